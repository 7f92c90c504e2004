"""tilelint.analysis: the pure analysis core.

``analyze(source, path, settings)`` parses a file with libcst and re-runs the
pipelining passes of tilelang 0.1.15 on every kernel in it.  No LSP, no I/O,
no tilelang import, and it never raises on bad code.
"""

from .model import Analysis, Diagnostic, Settings, Span
from .pipeline import analyze

__all__ = ["analyze", "Analysis", "Diagnostic", "Settings", "Span"]
