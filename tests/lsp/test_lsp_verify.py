"""Compiler-verified mode (``compiler.verify = "onSave"``, issue 7): on save the
real tilelang lowers the file in a worker process; its TL911 / TL910 join the
published diagnostics for that text and the loop hover shows the compiler's
own sync code.  Needs tilelang 0.1.15 in the interpreter running the tests."""

from __future__ import annotations

import importlib.util
import re

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

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tilelang") is None,
                                reason="tilelang is not installed")

CLIENT = "push"
CONFIG = {"compiler": {"verify": "onSave"}}


def save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))


def log_texts(client: LanguageClient):
    """Every window/logMessage and window/showMessage text the server sent."""
    return [m.message for m in list(client.log_messages) + list(client.messages)]


def verified_logs(client: LanguageClient, uri_path_part: str):
    return [m.message for m in client.log_messages
            if m.message.startswith("tilelint: verified") and uri_path_part in m.message]


@pytest.mark.asyncio(loop_scope="module")
async def test_save_verifies_and_hover_shows_compiler_output(client: LanguageClient):
    uri = uri_for("gemm_ns3.py", "verify")
    text = read("gemm_ns3.py")
    open_doc(client, uri, text)
    await wait_published(client, uri, 1)
    save(client, uri)
    logs = await wait_until(lambda: verified_logs(client, "gemm_ns3__verify"), 180,
                            "the verification")
    # The model agrees with tilelang on this kernel (NOTES.md): nothing to report.
    assert "0 finding(s)" in logs[-1], logs[-1]
    line = next(i for i, ln in enumerate(text.splitlines()) if "T.Pipelined(" in ln)
    col = text.splitlines()[line].index("T.Pipelined") + 3
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line=line, character=col)))
    value = h.contents.value
    assert "Compiler output (tilelang 0.1.15, verified on save)" in value
    code = value.split("verified on save", 1)[1]
    # The real CUDA: a cp.async pipeline with wait_group and __syncthreads.
    assert "__syncthreads()" in code and "cp_async_wait<" in code

    # A second save reuses the warm compiler process.
    save(client, uri)
    await wait_until(lambda: len(verified_logs(client, "gemm_ns3__verify")) >= 2, 180,
                     "the second verification")
    logs = verified_logs(client, "gemm_ns3__verify")
    pids = [re.search(r"compiler process (\d+)", m).group(1) for m in logs[-2:]]
    assert pids[0] == pids[1]

    # After an edit the compiler output is stale: the hover drops it.
    change(client, uri, 2, rng(0, 0, 0, 0), "# edited\n")
    await wait_published(client, uri, 2)
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line=line + 1, character=col)))
    assert "Compiler output" not in h.contents.value
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_compiler_error_is_merged_into_diagnostics(client: LanguageClient):
    # A kernel the compiler rejects where the static model predicts nothing:
    # a T.Pipelined loop inside a T.Parallel loop, which tilelang's semantic
    # check refuses (tests/fixtures/verify/pipelined_in_parallel.py).
    from pathlib import Path
    src = (Path(__file__).resolve().parents[1] / "fixtures" / "verify"
           / "pipelined_in_parallel.py").read_text()
    uri = uri_for("gemm_ns3.py", "verify_err")
    open_doc(client, uri, src)
    pub = await wait_published(client, uri, 1)
    assert "TL911" not in codes(pub.diagnostics)
    n = len(client.published[uri])
    save(client, uri)
    await wait_until(lambda: any("TL911" in codes(p.diagnostics)
                                 for p in client.published[uri][n:]), 180, "TL911")
    pub = client.published[uri][-1]
    assert pub.version == 1
    d = next(d for d in pub.diagnostics if d.code == "TL911")
    assert "nested inside a parallel loop" in d.message, d.message
    # Editing the file drops the compiler's (now stale) findings.
    change(client, uri, 2, rng(0, 0, 0, 0), "# edited\n")
    pub = await wait_published(client, uri, 2)
    assert "TL911" not in codes(pub.diagnostics)
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_import_failure_is_not_a_compiler_finding(client: LanguageClient):
    # Importing the file fails in this environment (no such module): that says
    # nothing about the kernel, so verification reports "could not verify" in
    # the log and publishes no TL910/TL911 (issue 12, item 6).
    uri = uri_for("gemm_ns3.py", "verify_import")
    text = read("gemm_ns3.py") + "import tilelint_test_no_such_module_xyz\n"
    open_doc(client, uri, text)
    await wait_published(client, uri, 1)
    save(client, uri)
    await wait_until(lambda: any("could not verify" in m for m in log_texts(client)),
                     180, "could not verify")
    assert all(not ({"TL910", "TL911"} & set(codes(p.diagnostics)))
               for p in client.published[uri])
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_worker_crash_is_reported_and_recovered(client: LanguageClient):
    import os
    import signal

    uri = uri_for("gemm_ns3.py", "verify_crash")
    open_doc(client, uri, read("gemm_ns3.py"))
    await wait_published(client, uri, 1)
    save(client, uri)
    await wait_until(lambda: verified_logs(client, "gemm_ns3__verify_crash"), 180, "a verification")
    pid = int(re.search(r"compiler process (\d+)", verified_logs(
        client, "gemm_ns3__verify_crash")[-1]).group(1))
    shown = len(client.messages)
    save(client, uri)
    os.kill(pid, signal.SIGKILL)  # the worker dies during (or just before) the next request
    await wait_until(lambda: len(client.messages) > shown, 60, "the crash report")
    msg = client.messages[-1]
    assert msg.type == lsp.MessageType.Warning and "did not complete" in msg.message
    # The next save starts a fresh worker.
    save(client, uri)
    await wait_until(lambda: len(verified_logs(client, "gemm_ns3__verify_crash")) >= 2, 180,
                     "a verification after the crash")
    new_pid = int(re.search(r"compiler process (\d+)", verified_logs(
        client, "gemm_ns3__verify_crash")[-1]).group(1))
    assert new_pid != pid
    close_doc(client, uri)
