"""Configuration: pyproject.toml [tool.tilelint] (reloaded on
didChangeWatchedFiles), overridden by workspace/configuration."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_helpers import DATA, close_doc, codes, open_doc, read, wait_until

CLIENT = "push"
CONFIG = {}


def make_workspace(factory):
    ws = factory.mktemp("cfgws")
    (ws / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.tilelint]\nignore = ["TL201"]\n')
    sub = ws / "kernels"
    sub.mkdir()
    (sub / "smem_over.py").write_text(read("smem_over.py"))
    return ws


def latest(client, uri):
    pubs = client.published.get(uri) or []
    return pubs[-1] if pubs else None


async def settle(client, uri, pred, what):
    return await wait_until(lambda: latest(client, uri) is not None and pred(latest(client, uri)),
                            what=what)


@pytest.mark.asyncio(loop_scope="module")
async def test_pyproject_then_watch_then_client_settings(client: LanguageClient):
    ws = client.workspace_path
    path = ws / "kernels" / "smem_over.py"
    uri = path.as_uri()
    # The server asked to watch pyproject.toml files.
    await wait_until(lambda: any(r.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES
                                 for r in client.registrations), what="watcher registration")
    open_doc(client, uri, path.read_text())
    await settle(client, uri, lambda p: True, "first publish")
    assert "TL201" not in codes(latest(client, uri).diagnostics)
    # pyproject changes: target sm_90 (232448 B opt-in) still fits 196608 B; sm_86 (101376 B) does not.
    (ws / "pyproject.toml").write_text('[tool.tilelint]\ntarget = "sm_86"\n')
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[
        lsp.FileEvent(uri=(ws / "pyproject.toml").as_uri(), type=lsp.FileChangeType.Changed)]))
    await settle(client, uri, lambda p: "TL201" in codes(p.diagnostics), "TL201 after reload")
    # Client settings override pyproject.toml.
    client.set_configuration({"target": "sm_90"}, section="tilelint")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    await settle(client, uri, lambda p: "TL201" not in codes(p.diagnostics), "sm_90 from client")
    # Inlay hints can be switched off.
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=99, character=0))))
    assert hints
    client.set_configuration({"target": "sm_90", "inlayHints": False}, section="tilelint")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    async def no_hints():
        h = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=99, character=0))))
        return not h
    for _ in range(200):
        if await no_hints():
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("inlay hints still on")
    close_doc(client, uri)


def test_targets_list_gives_the_editor_its_first_target() -> None:
    """`targets = [...]` in pyproject (for `tilelint check`): the editor analyses
    for the first one; an explicit `target` still wins."""
    from tilelint.server.lsp.settings import normalise_keys
    assert normalise_keys({"targets": ["sm_90", "sm_80"]}) == {"target": "sm_90"}
    assert normalise_keys({"targets": ["sm_90"], "target": "sm_86"})["target"] == "sm_86"
