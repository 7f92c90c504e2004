"""``textDocument/didOpen``: start tracking and analyse at once."""

from __future__ import annotations

from lsprotocol import types as lsp

from .uris import path_of

METHOD = lsp.TEXT_DOCUMENT_DID_OPEN


def handler(ls, params: lsp.DidOpenTextDocumentParams) -> None:
    td = params.text_document
    ls.store.open(td.uri, path_of(td.uri), td.text, td.version, td.language_id)
