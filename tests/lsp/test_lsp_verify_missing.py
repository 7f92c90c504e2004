"""Without tilelang, saving with ``compiler.verify = "onSave"`` tells the user
once how to install it, and the server keeps working."""

from __future__ import annotations

import pytest
from lsp_helpers import (
    change,
    close_doc,
    codes,
    open_doc,
    read,
    rng,
    uri_for,
    wait_published,
    wait_until,
)
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"
CONFIG = {"compiler": {"verify": "onSave"}}


@pytest.mark.asyncio(loop_scope="module")
async def test_missing_compiler_message(client_without_tilelang: LanguageClient):
    client = client_without_tilelang
    uri = uri_for("smem_over.py", "nocompiler")
    open_doc(client, uri, read("smem_over.py"))
    await wait_published(client, uri, 1)
    for _ in range(2):
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))
        await wait_until(lambda: client.messages, 60, "the install hint")
    await wait_until(lambda: len([m for m in client.log_messages
                                  if m.message.startswith("tilelint: verifying")]) >= 2, 60,
                     "the second attempt")
    infos = [m for m in client.messages if "pip install 'tilelint[compiler]'" in m.message]
    assert len(infos) == 1 and infos[0].type == lsp.MessageType.Info
    # The analysis goes on as before.
    change(client, uri, 2, rng(0, 0, 0, 0), "# still here\n")
    pub = await wait_published(client, uri, 2)
    assert "TL201" in codes(pub.diagnostics)
    close_doc(client, uri)
