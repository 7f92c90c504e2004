"""``textDocument/didSave``: run the compiler verification when
``compiler.verify`` is ``"onSave"`` (see ``compiler``)."""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.TEXT_DOCUMENT_DID_SAVE
OPTIONS = lsp.SaveOptions(include_text=False)


def handler(ls, params: lsp.DidSaveTextDocumentParams) -> None:
    doc = ls.store.opened(params.text_document.uri, METHOD)
    if doc is None:
        return
    ls.verifier.on_save(doc, params.text)
