"""``textDocument/didChange``: apply incremental edits, analyse the newest version.

Edits are applied on the event loop (cheap); the analysis runs in the worker
thread, and edits arriving while it runs are coalesced (see ``documents``).
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

log = logging.getLogger("tilelint.server")

METHOD = lsp.TEXT_DOCUMENT_DID_CHANGE


def _reversed(change) -> bool:
    rng = getattr(change, "range", None)
    return rng is not None and (rng.start.line, rng.start.character) > \
        (rng.end.line, rng.end.character)


def handler(ls, params: lsp.DidChangeTextDocumentParams) -> None:
    doc = ls.store.opened(params.text_document.uri, METHOD)
    if doc is None:
        return
    version = params.text_document.version
    # A notification that cannot be applied as sent is refused whole: applying
    # part of it, or guessing (swapping a reversed range deletes text the user
    # kept), would leave a document the client does not have.  Positions past
    # the end of a line or of the document are clamped (apply_change), as LSP
    # says for characters.
    if isinstance(version, int) and isinstance(doc.version, int) and version < doc.version:
        log.error("%s: version %d of %s is older than the document's %d: refused",
                  METHOD, version, doc.uri, doc.version)
        return
    bad = [i for i, c in enumerate(params.content_changes) if _reversed(c)]
    if bad:
        change = params.content_changes[bad[0]]
        assert isinstance(change, lsp.TextDocumentContentChangePartial)  # _reversed: a range
        r = change.range
        log.error("%s: change %d of version %s of %s has its start (%d:%d) after its end "
                  "(%d:%d): the whole notification is refused", METHOD, bad[0], version,
                  doc.uri, r.start.line, r.start.character, r.end.line, r.end.character)
        return
    encoding = ls.encoding()
    for change in params.content_changes:
        doc.apply_change(change, encoding)
    doc.version = params.text_document.version
    ls.store.request(doc)
