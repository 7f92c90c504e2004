"""``workspace/didChangeWatchedFiles``: a pyproject.toml changed → reload it."""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES


def handler(ls, params: lsp.DidChangeWatchedFilesParams) -> None:
    if any(c.uri.endswith("pyproject.toml") for c in params.changes):
        ls.pyproject.clear()
        ls.configuration_changed()
