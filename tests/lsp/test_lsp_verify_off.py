"""Compiler verification is off by default: saving runs nothing."""

from __future__ import annotations

import asyncio

import pytest
from lsp_helpers import close_doc, open_doc, read, uri_for, wait_published
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"


@pytest.mark.asyncio(loop_scope="module")
async def test_verify_off_by_default(client: LanguageClient):
    uri = uri_for("gemm_ns3.py", "verify_off")
    open_doc(client, uri, read("gemm_ns3.py"))
    await wait_published(client, uri, 1)
    n = len(client.published[uri])
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    await asyncio.sleep(1.5)
    assert not [m for m in client.log_messages if "verif" in m.message]
    assert not client.messages
    assert len(client.published[uri]) == n
    close_doc(client, uri)
