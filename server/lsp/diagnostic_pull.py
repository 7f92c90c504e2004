"""``textDocument/diagnostic``: pull diagnostics with result ids.

Waits for the analysis of the document's newest version (already scheduled by
the edit), then answers ``unchanged`` when the client's previous result id
still describes the diagnostics.  A URI that is not open is read from disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from lsprotocol import types as lsp

from . import convert
from .uris import path_of

METHOD = lsp.TEXT_DOCUMENT_DIAGNOSTIC
OPTIONS = lsp.DiagnosticOptions(identifier="tilelint", inter_file_dependencies=False,
                                workspace_diagnostics=True)
log = logging.getLogger(__name__)


def content_result_id(items) -> str:
    h = hashlib.sha1()
    for d in items:
        r = d.range
        h.update(f"{r.start.line}:{r.start.character}:{r.end.line}:{r.end.character}:"
                 f"{d.code}:{d.severity}:{d.message}:{d.data!r}\n".encode("utf-8", "replace"))
    return "f" + h.hexdigest()[:16]


async def diagnose_file(ls, uri: str):
    """Diagnostics of a file that is not open (read from disk), or None."""
    path = path_of(uri)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    loop = asyncio.get_running_loop()
    settings = ls.settings_for(path)
    lines, analysis = await loop.run_in_executor(
        ls.executor, ls.store.analyse_file, text, path, settings, ls.selection_for(path))
    return convert.diagnostics(analysis.diagnostics, uri, lines, ls.encoding())


async def handler(ls, params: lsp.DocumentDiagnosticParams):
    uri = params.text_document.uri
    doc = ls.store.get(uri)
    if doc is None:
        items = await diagnose_file(ls, uri) or []
        rid = content_result_id(items)
        if params.previous_result_id == rid:
            return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
        return lsp.RelatedFullDocumentDiagnosticReport(items=items, result_id=rid)
    await ls.store.current(doc)
    if params.previous_result_id is not None and params.previous_result_id == doc.result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=doc.result_id)
    return lsp.RelatedFullDocumentDiagnosticReport(items=list(doc.lsp_diagnostics),
                                                   result_id=doc.result_id)
