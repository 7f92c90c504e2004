"""An untrusted workspace (initializationOptions ``trusted: false``) refuses
compiler verification even when the settings ask for it."""

from __future__ import annotations

import asyncio

import pytest
from lsp_helpers import close_doc, open_doc, read, uri_for, wait_published, wait_until
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"
INIT_OPTIONS = {"trusted": False, "tilelint": {"compiler": {"verify": "onSave"}}}
CONFIG = {"compiler": {"verify": "onSave"}}


@pytest.mark.asyncio(loop_scope="module")
async def test_untrusted_refuses(client: LanguageClient):
    uri = uri_for("gemm_ns3.py", "untrusted")
    open_doc(client, uri, read("gemm_ns3.py"))
    await wait_published(client, uri, 1)
    for _ in range(2):
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))
    await wait_until(lambda: client.messages, 10, "a message")
    await asyncio.sleep(1.0)
    assert len(client.messages) == 1  # said once
    assert "untrusted" in client.messages[0].message
    assert not [m for m in client.log_messages if m.message.startswith("tilelint: verif")]
    close_doc(client, uri)
