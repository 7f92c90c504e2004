"""``workspace/diagnostic``: every open document plus the TileLang files of
the workspace folders, with work-done progress.  Cancellable: a
``$/cancelRequest`` cancels the task between files."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Dict, Iterator, List

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from .diagnostic_pull import content_result_id, diagnose_file
from .uris import path_of

METHOD = lsp.WORKSPACE_DIAGNOSTIC
log = logging.getLogger(__name__)

MAX_FILES = 2000
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox",
              ".mypy_cache", ".pytest_cache", "build", "dist", "site-packages", ".eggs"}


def workspace_files(ls) -> Iterator[str]:
    roots: List[str] = []
    try:
        for folder in ls.workspace.folders.values():
            roots.append(path_of(folder.uri))
        if not roots and ls.workspace.root_path:
            roots.append(ls.workspace.root_path)
    except Exception:
        return
    count = 0
    for root in roots:
        if not root or not os.path.isdir(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        if "tilelang" not in fh.read(200_000):
                            continue
                except OSError:
                    continue
                count += 1
                if count > MAX_FILES:
                    return
                yield path


async def handler(ls, params: lsp.WorkspaceDiagnosticParams) -> lsp.WorkspaceDiagnosticReport:
    previous: Dict[str, str] = {p.uri: p.value for p in params.previous_result_ids or []}
    token = params.work_done_token
    items: List[lsp.WorkspaceDocumentDiagnosticReport] = []
    open_docs = list(ls.store.docs.values())
    seen = {d.uri for d in open_docs}
    files = [p for p in workspace_files(ls) if from_fs_path(p) not in seen]
    total = len(open_docs) + len(files)
    if token is not None:
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
            title="tilelint", message=f"checking {total} files", percentage=0, cancellable=True))
    done = 0
    try:
        for doc in open_docs:
            await ls.store.current(doc)
            if previous.get(doc.uri) == doc.result_id and doc.result_id is not None:
                items.append(lsp.WorkspaceUnchangedDocumentDiagnosticReport(
                    uri=doc.uri, result_id=doc.result_id, version=doc.analysis_version))
            else:
                items.append(lsp.WorkspaceFullDocumentDiagnosticReport(
                    uri=doc.uri, items=list(doc.lsp_diagnostics), result_id=doc.result_id,
                    version=doc.analysis_version))
            done += 1
        for path in files:
            uri = from_fs_path(path) or path
            diags = await diagnose_file(ls, uri)
            done += 1
            if token is not None:
                ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(
                    message=os.path.basename(path), percentage=int(100 * done / max(total, 1))))
            if diags is None:
                continue
            rid = content_result_id(diags)
            if previous.get(uri) == rid:
                items.append(lsp.WorkspaceUnchangedDocumentDiagnosticReport(
                    uri=uri, result_id=rid, version=None))
            else:
                items.append(lsp.WorkspaceFullDocumentDiagnosticReport(
                    uri=uri, items=diags, result_id=rid, version=None))
            await asyncio.sleep(0)  # a cancellation point between files
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=f"{done} files"))
    return lsp.WorkspaceDiagnosticReport(items=items)
