"""TL001 diagnostics for text that does not parse: CPython's parser is asked
first (compile-only, nothing runs) for its message and position."""

from __future__ import annotations

import ast
import re
import warnings

import libcst as cst

from ..model import Diagnostic, Span
from .chunks import source_lines


def syntax_problem(text: str, start_line: int, exc: cst.ParserSyntaxError) -> Diagnostic:
    """TL001 at the broken line.  CPython's own parser (compile-only: nothing runs)
    usually names the real culprit ("'(' was never closed") where libcst reports
    the next token, so its message and position are preferred."""
    line = start_line + max(exc.raw_line, 1) - 1
    col = max(exc.raw_column, 0)
    msg = re.sub(r"^error at \d+:\d+: ", "", exc.message.replace("parser error: ", ""))
    try:
        compile_only(text)
    except SyntaxError as err:
        if err.lineno:
            line = start_line + err.lineno - 1
            col = max((err.offset or 1) - 1, 0)
            msg = err.msg
    except (ValueError, RecursionError, MemoryError):  # NUL bytes, absurd nesting
        pass
    lines = [ln.rstrip("\r\n") for ln in source_lines(text)]
    rel = line - start_line
    width = len(lines[rel]) if 0 <= rel < len(lines) else col + 1
    end = min(max(col + 1, col), max(width, col + 1))
    return error_diagnostic("TL001", Span(line, col, line, end), f"syntax error: {msg}")


def compile_only(text: str) -> None:
    """``ast.parse`` with the user's SyntaxWarnings/DeprecationWarnings (invalid
    escapes, ``is`` with a literal…) kept out of our output: the file is never
    run, so they are not ours to print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ast.parse(text)


def ast_problem(text: str, start_line: int, err: SyntaxError) -> Diagnostic:
    if "null bytes" in str(err.msg):
        return error_diagnostic("TL001", nul_span(text, start_line), "the source contains a NUL byte")
    line = start_line + max(err.lineno or 1, 1) - 1
    col = max((err.offset or 1) - 1, 0)
    lines = text.split("\n")
    rel = line - start_line
    width = len(lines[rel]) if 0 <= rel < len(lines) else col + 1
    end = max(col + 1, min(width, col + 1))
    return error_diagnostic("TL001", Span(line, col, line, end), f"syntax error: {err.msg}")


def nul_span(text: str, start_line: int) -> Span:
    i = text.find("\x00")
    before = text[:max(i, 0)]
    line = start_line + before.count("\n")
    col = len(before) - (before.rfind("\n") + 1)
    return Span(line, col, line, col + 1)


def error_diagnostic(code: str, span: Span, message: str) -> Diagnostic:
    return Diagnostic(code=code, severity="error", span=span, message=message)
