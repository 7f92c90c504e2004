"""Helpers shared by the LSP tests (imported as ``lsp_helpers``)."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Callable, List, Optional

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

DATA = pathlib.Path(__file__).parent / "data"
REPO = pathlib.Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


async def wait_until(pred: Callable[[], object], timeout: float = 30.0, what: str = "condition"):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = pred()
        if value:
            return value
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def wait_published(client: LanguageClient, uri: str, version: Optional[int],
                         timeout: float = 30.0) -> lsp.PublishDiagnosticsParams:
    """The publishDiagnostics for ``uri`` at ``version`` (None: any, the latest)."""
    def find():
        for p in reversed(client.published.get(uri, [])):
            if version is None or p.version == version:
                return p
        return None
    return await wait_until(find, timeout, f"diagnostics of {uri} v{version}")


def uri_for(name: str, tag: str) -> str:
    """A distinct URI per test for a data file (same directory, so the same
    configuration applies)."""
    path = DATA / name
    return (DATA / f"{path.stem}__{tag}{path.suffix}").as_uri()


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version,
                                           text=text)))


def close_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))


def change(client: LanguageClient, uri: str, version: int, rng: Optional[lsp.Range], text: str):
    if rng is None:
        ch = lsp.TextDocumentContentChangeWholeDocument(text=text)
    else:
        ch = lsp.TextDocumentContentChangePartial(range=rng, text=text)
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[ch]))


def rng(l0: int, c0: int, l1: int, c1: int) -> lsp.Range:
    return lsp.Range(start=lsp.Position(line=l0, character=c0),
                     end=lsp.Position(line=l1, character=c1))


# ---- an independent implementation of applying LSP edits (for checking fixes)


def _offset(lines: List[str], pos: lsp.Position, encoding: str) -> int:
    """Absolute code-point offset of an LSP position."""
    off = sum(len(x) for x in lines[:pos.line])
    line = lines[pos.line] if pos.line < len(lines) else ""
    body = line.rstrip("\r\n")
    units = 0
    for i, ch in enumerate(body):
        if units >= pos.character:
            return off + i
        units += len(ch.encode("utf-16-le")) // 2 if encoding == "utf-16" else (
            len(ch.encode("utf-8")) if encoding == "utf-8" else 1)
    return off + len(body)


def apply_edits(text: str, edits, encoding: str = "utf-16") -> str:
    lines = text.splitlines(keepends=True)
    spans = []
    for e in edits:
        spans.append((_offset(lines, e.range.start, encoding), _offset(lines, e.range.end, encoding),
                      e.new_text))
    for s, t, new in sorted(spans, key=lambda x: (x[0], x[1]), reverse=True):
        text = text[:s] + new + text[t:]
    return text


def edits_of(action: lsp.CodeAction, uri: str):
    we = action.edit
    assert we is not None
    if we.document_changes:
        return [e for dc in we.document_changes if dc.text_document.uri == uri for e in dc.edits]
    return list((we.changes or {}).get(uri, []))


def codes(diags) -> List[str]:
    return [d.code for d in diags]
