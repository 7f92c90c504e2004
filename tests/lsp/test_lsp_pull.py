"""Pull diagnostics: result ids, unchanged reports, unopened files,
workspace diagnostics with progress, cancellation."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from lsp_helpers import DATA, change, close_doc, codes, open_doc, read, rng, uri_for
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

CLIENT = "pull"


def make_workspace(factory):
    ws = factory.mktemp("pullws")
    for i in range(40):
        shutil.copy(DATA / "smem_over.py", ws / f"k{i:02d}.py")
    (ws / "not_tilelang.py").write_text("x = 1\n")
    return ws


def pull(client, uri, previous=None):
    return client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), previous_result_id=previous))


@pytest.mark.asyncio(loop_scope="module")
async def test_pull_result_ids(client: LanguageClient):
    uri = uri_for("smem_over.py", "pull")
    text = read("smem_over.py")
    open_doc(client, uri, text)
    first = await pull(client, uri)
    assert first.kind == "full"
    assert "TL201" in codes(first.items)
    assert first.result_id
    again = await pull(client, uri, first.result_id)
    assert again.kind == "unchanged" and again.result_id == first.result_id
    # An edit that does not change the diagnostics keeps the result id.
    last = len(text.splitlines()) - 1
    end = len(text.splitlines()[-1])
    change(client, uri, 2, rng(last, end, last, end), "  # note")
    same = await pull(client, uri, first.result_id)
    assert same.kind == "unchanged"
    # One that does: num_stages=6 → 5 (line 20, 0-based 19).
    col = text.splitlines()[19].index("num_stages=6") + len("num_stages=")
    change(client, uri, 3, rng(19, col, 19, col + 1), "5")
    new = await pull(client, uri, first.result_id)
    assert new.kind == "full" and new.result_id != first.result_id
    assert "TL201" not in codes(new.items)
    # The pull client gets no pushed diagnostics (diagnostics mode "auto").
    assert uri not in client.published
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_pull_unopened_file_reads_disk(client: LanguageClient):
    report = await pull(client, (DATA / "smem_over.py").as_uri())
    assert report.kind == "full"
    assert "TL201" in codes(report.items)
    missing = await pull(client, (DATA / "does_not_exist.py").as_uri())
    assert missing.kind == "full" and len(missing.items) == 0


@pytest.mark.asyncio(loop_scope="module")
async def test_workspace_diagnostics_with_progress(client: LanguageClient):
    uri = uri_for("gemm_ns3.py", "ws")
    open_doc(client, uri, read("gemm_ns3.py"))
    token = "tilelint-test-progress"
    client.progress_reports[token] = []
    report = await client.workspace_diagnostic_async(lsp.WorkspaceDiagnosticParams(
        previous_result_ids=[], work_done_token=token))
    by_uri = {item.uri: item for item in report.items}
    assert uri in by_uri and by_uri[uri].version == 1
    files = [u for u in by_uri if u.endswith(".py") and "/k" in u]
    assert len(files) == 40
    assert all("TL201" in codes(by_uri[u].items) for u in files)
    assert not any(u.endswith("not_tilelang.py") for u in by_uri)
    kinds = [type(v).__name__ for v in client.progress_reports[token]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    # Previous result ids → unchanged reports.
    prev = [lsp.PreviousResultId(uri=u, value=item.result_id) for u, item in by_uri.items()]
    again = await client.workspace_diagnostic_async(lsp.WorkspaceDiagnosticParams(
        previous_result_ids=prev))
    assert all(item.kind == "unchanged" for item in again.items)
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_workspace_diagnostics_cancel(client: LanguageClient):
    # Fresh kernel texts so nothing is cached, and enough of them (20 kernels
    # per file) that the request is still running when the cancellation comes.
    for p in sorted(client.workspace_path.glob("k*.py")):
        text = p.read_text()
        p.write_text("".join(
            text.replace("T.clear(C_local)", f"T.clear(C_local)  # {p.name}")
                .replace("gemm", f"gemm{j}").replace("smem_over", f"smem_over{j}")
                .replace("kernel =", f"kernel{j} =")
            for j in range(20)))
    fut = asyncio.ensure_future(client.protocol.send_request_async(
        lsp.WORKSPACE_DIAGNOSTIC,
        lsp.WorkspaceDiagnosticParams(previous_result_ids=[]),
        msg_id="ws-cancel-1"))
    await asyncio.sleep(0.3)  # the request is out and the server is working through files
    assert not fut.done()
    client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="ws-cancel-1"))
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(fut, 30)
    # The server is still fine.
    report = await pull(client, (DATA / "smem_over.py").as_uri())
    assert "TL201" in codes(report.items)
