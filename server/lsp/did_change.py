"""``textDocument/didChange``: apply incremental edits, analyse the newest version.

Edits are applied on the event loop (cheap); the analysis runs in the worker
thread, and edits arriving while it runs are coalesced (see ``documents``).
"""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.TEXT_DOCUMENT_DID_CHANGE


def handler(ls, params: lsp.DidChangeTextDocumentParams) -> None:
    doc = ls.store.opened(params.text_document.uri, METHOD)
    if doc is None:
        return
    encoding = ls.encoding()
    for change in params.content_changes:
        doc.apply_change(change, encoding)
    doc.version = params.text_document.version
    ls.store.request(doc)
