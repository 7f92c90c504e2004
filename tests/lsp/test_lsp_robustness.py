"""The server answers bad requests with errors and keeps working."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsp_helpers import change, close_doc, codes, open_doc, read, rng, uri_for, wait_published
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

CLIENT = "push"


async def alive(client: LanguageClient) -> None:
    uri = uri_for("smem_over.py", f"alive{id(object())}")
    open_doc(client, uri, read("smem_over.py"))
    pub = await wait_published(client, uri, 1)
    assert "TL201" in codes(pub.diagnostics)
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_unknown_method(client: LanguageClient):
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(client.protocol.send_request_async("tilelint/noSuchThing", {}), 10)
    client.protocol.notify("tilelint/noSuchNotification", {})
    await alive(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_bad_params(client: LanguageClient):
    # Bypass the client's own typing: a hover whose params do not fit the schema.
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    cfut = __import__("concurrent.futures").futures.Future()
    cfut.add_done_callback(lambda f: loop.call_soon_threadsafe(
        fut.set_exception if f.exception() else fut.set_result,
        f.exception() if f.exception() else f.result()))
    client.protocol._request_futures["bad-params-1"] = cfut
    body = json.dumps({"jsonrpc": "2.0", "id": "bad-params-1", "method": lsp.TEXT_DOCUMENT_HOVER,
                       "params": {"textDocument": {"uri": 5}}}).encode()
    client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(fut, 10)
    await alive(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_requests_on_unopened_uri(client: LanguageClient):
    uri = uri_for("nothing.py", "unopened")
    ident = lsp.TextDocumentIdentifier(uri=uri)
    assert await client.text_document_hover_async(
        lsp.HoverParams(text_document=ident, position=lsp.Position(line=0, character=0))) is None
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=ident, range=rng(0, 0, 10, 0)))
    assert not hints
    acts = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=ident, range=rng(0, 0, 0, 0),
        context=lsp.CodeActionContext(diagnostics=[])))
    assert not acts
    change(client, uri, 2, rng(0, 0, 0, 0), "x")  # didChange for a document never opened
    close_doc(client, uri)
    await alive(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_files_that_break_things(client: LanguageClient):
    cases = {
        "deep": "import tilelang.language as T\nx = " + "(" * 3000 + "1" + ")" * 3000 + "\n",
        "garbage": "\x00\x01 def (((\n\t\t  ]]] '''\n",
        "empty": "",
        "only_kernel_head": "import tilelang.language as T\n@T.prim_func\ndef k(A: T.Tensor((",
    }
    for name, text in cases.items():
        uri = uri_for("broken.py", name)
        open_doc(client, uri, text)
        await wait_published(client, uri, 1)
        # Edits beyond the end of the document are clamped, not fatal.
        change(client, uri, 2, rng(500, 3, 600, 0), "\n")
        await wait_published(client, uri, 2)
        close_doc(client, uri)
    await alive(client)


@pytest.mark.asyncio(loop_scope="module")
async def test_code_action_with_mangled_data(client: LanguageClient):
    uri = uri_for("smem_over.py", "mangled")
    open_doc(client, uri, read("smem_over.py"))
    await wait_published(client, uri, 1)
    weird = [lsp.Diagnostic(range=rng(15, 0, 15, 3), message="?", code="TL201", source="tilelint",
                            data={"fixes": [{"edits": [{"range": "nope"}]}, 7, None]}),
             lsp.Diagnostic(range=rng(15, 0, 15, 3), message="?", source="tilelint", data="x")]
    acts = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng(15, 0, 15, 3),
        context=lsp.CodeActionContext(diagnostics=weird)))
    # Only the noqa insertion for the diagnostic that has a code.
    quick = [a.title for a in acts or [] if a.kind == lsp.CodeActionKind.QuickFix]
    assert quick == ["Suppress TL201 on this line (# noqa: TL201)"]
    close_doc(client, uri)
