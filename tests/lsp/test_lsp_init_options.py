"""initializationOptions configure the server; UTF-8 positions when the client prefers them."""

from __future__ import annotations

import pytest
from lsp_helpers import change, close_doc, codes, open_doc, read, rng, uri_for, wait_published
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"
ENCODINGS = ["utf-8", "utf-16"]
INIT_OPTIONS = {"tilelint": {"target": "sm_90", "select": ["TL"]}}


@pytest.mark.asyncio(loop_scope="module")
async def test_negotiated_utf8(client: LanguageClient):
    assert client.init_result.capabilities.position_encoding == lsp.PositionEncodingKind.Utf8
    uri = uri_for("smem_over.py", "utf8")
    bad = 'label = "é𝄞 tiles" +\n'
    text = read("smem_over.py") + bad
    open_doc(client, uri, text)
    pub = await wait_published(client, uri, 1)
    # sm_90 from initializationOptions: 196608 B fits the 232448 B budget.
    assert "TL201" not in codes(pub.diagnostics)
    d = next(d for d in pub.diagnostics if d.code == "TL001")
    plus = bad.index("+")
    plus_utf8 = len(bad[:plus].encode("utf-8"))
    assert plus_utf8 == plus + 1 + 3  # é is 2 bytes, 𝄞 is 4
    assert d.range.start.character >= plus_utf8
    line = len(text.splitlines()) - 1
    change(client, uri, 2, rng(line, plus_utf8 - 1, line, plus_utf8 + 1), "")
    pub = await wait_published(client, uri, 2)
    assert "TL001" not in codes(pub.diagnostics)
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_capabilities(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.text_document_sync.change == lsp.TextDocumentSyncKind.Incremental
    assert caps.hover_provider
    assert caps.inlay_hint_provider is not None
    assert caps.diagnostic_provider.workspace_diagnostics
    kinds = caps.code_action_provider.code_action_kinds
    assert "source.fixAll.tilelint" in kinds and lsp.CodeActionKind.QuickFix in kinds
