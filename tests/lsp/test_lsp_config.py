"""Configuration: pyproject.toml [tool.tilelint] (reloaded on
didChangeWatchedFiles), overridden by workspace/configuration; every key of
[tool.tilelint] gives the editor what `tilelint check` reports."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_helpers import REPO, close_doc, codes, open_doc, read, wait_until
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"
CONFIG = {}

# Two statements with order 0 (lines 13 and 14): tilelang 0.1.15's
# InjectSoftwarePipeline rejects it ("Two statements in the software pipeline
# cannot have the same order", NOTES.md), TL101 on the second.  The noqa on
# line 20 suppresses nothing: TL900 (unused noqa), off unless selected.
# A duplicate order (TL101 on line 14) and a noqa that suppresses nothing (TL900 on line 20).
DUP_ORDER = (Path(__file__).resolve().parents[1] / "fixtures" / "config" / "dup_order_noqa.py").read_text()

# proj/: extend-select, per-file-ignores and exclude; (code, 1-based line)
# expected per file from the reasoning above: the default rules plus TL900,
# legacy_*.py without TL101, generated/ not checked at all.
PROJ_PYPROJECT = """\
[tool.tilelint]
extend-select = ["TL900"]
exclude = ["generated/"]
per-file-ignores = { "legacy_*.py" = ["TL101"] }
"""
EXPECTED = {
    "dup_order.py": [("TL101", 14), ("TL900", 20)],
    "legacy_dup.py": [("TL900", 20)],
    "generated/dup.py": [],
}


def make_workspace(factory):
    ws = factory.mktemp("cfgws")
    (ws / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.tilelint]\nignore = ["TL201"]\n')
    sub = ws / "kernels"
    sub.mkdir()
    (sub / "smem_over.py").write_text(read("smem_over.py"))
    proj = ws / "proj"
    (proj / "generated").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(PROJ_PYPROJECT)
    for rel in EXPECTED:
        (proj / rel).write_text(DUP_ORDER)
    return ws


def cli_findings(proj, rels):
    """What `tilelint check` reports for each file: {rel: [(code, line)]}."""
    out = subprocess.run(
        [sys.executable, "-m", "tilelint.server.entry", "check", "--format", "json",
         "--no-progress", *rels], cwd=proj, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)})
    assert out.returncode in (0, 1), out.stderr
    found = {rel: [] for rel in rels}
    for d in json.loads(out.stdout):
        rel = os.path.relpath(os.path.join(proj, d["path"]), proj).replace(os.sep, "/")
        found[rel].append((d["code"], d["line"]))
    return {rel: sorted(v) for rel, v in found.items()}


def latest(client, uri):
    pubs = client.published.get(uri) or []
    return pubs[-1] if pubs else None


async def settle(client, uri, pred, what):
    return await wait_until(lambda: latest(client, uri) is not None and pred(latest(client, uri)),
                            what=what)


@pytest.mark.asyncio(loop_scope="module")
async def test_server_publishes_what_the_cli_reports(client: LanguageClient):
    """extend-select, per-file-ignores and exclude of [tool.tilelint]: the
    editor shows exactly what `tilelint check` reports for the same files."""
    proj = client.workspace_path / "proj"
    cli = cli_findings(proj, list(EXPECTED))
    assert cli == EXPECTED  # the reasoning above, so the comparison can fail
    uris = {rel: (proj / rel).as_uri() for rel in EXPECTED}
    for uri in uris.values():
        open_doc(client, uri, DUP_ORDER)
    for rel, uri in uris.items():
        await settle(client, uri, lambda p: True, f"publish for {rel}")
        pub = latest(client, uri)
        got = sorted((d.code, d.range.start.line + 1) for d in pub.diagnostics)
        assert got == cli[rel], rel
    # An excluded file is not analysed at all: no inlay hints either.
    def hints(uri):
        return client.text_document_inlay_hint_async(lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=lsp.Position(line=0, character=0),
                            end=lsp.Position(line=99, character=0))))
    assert await hints(uris["dup_order.py"])
    assert not await hints(uris["generated/dup.py"])
    # Editor settings are an overlay: `ignore` adds to the file's (TL900 off
    # everywhere), exclude and per-file-ignores stay.
    client.set_configuration({"ignore": ["TL900"]}, section="tilelint")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    want = {rel: [f for f in v if f[0] != "TL900"] for rel, v in EXPECTED.items()}
    for rel, uri in uris.items():
        await settle(client, uri, lambda p, w=want[rel]: sorted(
            (d.code, d.range.start.line + 1) for d in p.diagnostics) == w, f"{rel} with ignore")
    for uri in uris.values():
        close_doc(client, uri)
    client.set_configuration({}, section="tilelint")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))


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


def test_targets_list_gives_the_editor_its_first_target(tmp_path) -> None:
    """`targets = [...]` in pyproject (for `tilelint check`): the editor analyses
    for the first one; a `target` setting of the editor still wins."""
    from tilelint.server.config import load_config
    from tilelint.server.lsp import settings as S
    pp = tmp_path / "pyproject.toml"
    pp.write_text('[tool.tilelint]\ntargets = ["sm_90", "sm_80"]\n')
    base = load_config(pp)
    k = str(tmp_path / "k.py")
    assert S.to_settings(S.merge({}), k, base).target == "sm_90"
    assert S.to_settings(S.merge({"targets": ["sm_86", "sm_90"]}), k, base).target == "sm_86"
    assert S.to_settings(S.merge({"target": "sm_89"}), k, base).target == "sm_89"
