"""``initialize``: remember ``initializationOptions`` (the ``tilelint`` section
or the whole object).  pygls negotiates the position encoding from the
client's ``general.positionEncodings`` and builds the capabilities."""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.INITIALIZE


def handler(ls, params: lsp.InitializeParams) -> None:
    opts = params.initialization_options
    if isinstance(opts, dict):
        section = opts.get("tilelint")
        ls.init_options = dict(section) if isinstance(section, dict) else dict(opts)
