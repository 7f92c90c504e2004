"""The ``binding`` setting picks which instantiation of a kernel the
diagnostics, hovers and inlay hints describe (issue 8).

``two_configs.py`` instantiates one factory as ``num_stages=3, block_K=32``
(16 KiB per stage × 3 = 49152 B: fits sm_80) and ``num_stages=6, block_K=64``
(32 KiB per stage × 6 = 196608 B: over sm_80's 166912 B budget, TL201).  The
labels are the bindings that differ, the stage-related one first.
"""

from __future__ import annotations

import pytest
from lsp_helpers import close_doc, codes, open_doc, read, rng, uri_for, wait_until
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"
CONFIG: dict = {}

SMALL = "num_stages=3, block_K=32"
BIG = "num_stages=6, block_K=64"


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines()) if needle in ln)


async def _config(client: LanguageClient, value: dict, uri: str) -> lsp.PublishDiagnosticsParams:
    before = len(client.published.get(uri, []))
    client.set_configuration(value, section="tilelint")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    await wait_until(lambda: len(client.published.get(uri, [])) > before, 30, "a new publish")
    return client.published[uri][-1]


async def _hover(client: LanguageClient, uri: str, text: str) -> str:
    line = _line_of(text, "T.Pipelined(")
    col = text.splitlines()[line].index("T.Pipelined") + 3
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line=line, character=col)))
    assert h is not None
    return h.contents.value


async def _inlay(client: LanguageClient, uri: str) -> list:
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng(0, 0, 100, 0)))
    return [h.label for h in hints or []]


@pytest.mark.asyncio(loop_scope="module")
async def test_binding_picks_an_instantiation(client: LanguageClient):
    uri = uri_for("two_configs.py", "binding")
    text = read("two_configs.py")
    open_doc(client, uri, text)
    await wait_until(lambda: client.published.get(uri), 30, "first publish")
    pub = client.published[uri][-1]
    # Default: the first instantiation (fits).
    assert "TL201" not in codes(pub.diagnostics)
    hover = await _hover(client, uri, text)
    assert "num_stages = 3" in hover
    assert f"Configuration: `{SMALL}` (the default instantiation)" in hover
    assert f"`{BIG}`" in hover.split("Other configurations", 1)[1]
    assert any(str(ln).startswith("×3") for ln in await _inlay(client, uri))

    # Per kernel (by factory name): the other one, with its TL201.
    pub = await _config(client, {"binding": {"gemm": BIG}}, uri)
    assert "TL201" in codes(pub.diagnostics)
    d = next(d for d in pub.diagnostics if d.code == "TL201")
    assert "196608" in d.message
    hover = await _hover(client, uri, text)
    assert "num_stages = 6" in hover
    assert f"Configuration: `{BIG}` (picked by `tilelint.binding`)" in hover
    assert f"`{SMALL}`" in hover.split("Other configurations", 1)[1]
    labels = await _inlay(client, uri)
    assert any(str(ln).startswith("×6") for ln in labels) and not any(
        str(ln).startswith("×3") for ln in labels)

    # A label for every kernel (string form), then one no kernel has: the default.
    pub = await _config(client, {"binding": SMALL}, uri)
    assert "TL201" not in codes(pub.diagnostics)
    pub = await _config(client, {"binding": "num_stages=99"}, uri)
    assert "TL201" not in codes(pub.diagnostics)
    hover = await _hover(client, uri, text)
    assert "which this kernel does not have" in hover
    # "all": every instantiation, TL201 names the configuration it holds for.
    pub = await _config(client, {"binding": "all"}, uri)
    assert "TL201" in codes(pub.diagnostics)
    await _config(client, {}, uri)
    close_doc(client, uri)
