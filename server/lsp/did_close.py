"""``textDocument/didClose``: forget the document and clear its diagnostics."""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.TEXT_DOCUMENT_DID_CLOSE


def handler(ls, params: lsp.DidCloseTextDocumentParams) -> None:
    doc = ls.store.close(params.text_document.uri)
    if doc is not None and ls.should_push(doc):
        ls.clear(params.text_document.uri)
