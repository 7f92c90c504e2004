"""``initialize``: remember ``initializationOptions`` (the ``tilelint`` section
or the whole object) and whether the client says the workspace is trusted
(``trusted: false`` turns compiler verification off).  pygls negotiates the position encoding from the
client's ``general.positionEncodings`` and builds the capabilities."""

from __future__ import annotations

from lsprotocol import types as lsp

from . import settings as settings_mod

METHOD = lsp.INITIALIZE


def handler(ls, params: lsp.InitializeParams) -> None:
    opts = params.initialization_options
    if isinstance(opts, dict):
        section = opts.get("tilelint")
        ls.init_options = dict(section) if isinstance(section, dict) else dict(opts)
        # Workspace trust comes from the client only (never from a workspace file).
        ls.trusted = settings_mod.trusted(opts, section if isinstance(section, dict) else None)
