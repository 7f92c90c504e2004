"""``textDocument/didSave``: run the compiler verification when
``compiler.verify`` is ``"onSave"`` (see ``compiler``)."""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

METHOD = lsp.TEXT_DOCUMENT_DID_SAVE
OPTIONS = lsp.SaveOptions(include_text=False)
log = logging.getLogger(__name__)


def handler(ls, params: lsp.DidSaveTextDocumentParams) -> None:
    doc = ls.store.get(params.text_document.uri)
    if doc is None:
        log.warning("didSave for a document that is not open: %s", params.text_document.uri)
        return
    ls.verifier.on_save(doc, params.text)
