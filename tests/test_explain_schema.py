"""The explain JSON, the explain text, the hover and docs/explain-schema.md agree on
a loop's sync: ``sync`` is one iteration of the generated loop, ``prologue_sync`` and
``epilogue_sync`` the unrolled steps around it.  (The values themselves are checked
against the compiler in tests/test_parity.py; this checks that every output says the
same thing under the same names.)"""

from __future__ import annotations

import re
from pathlib import Path

from tilelint.analysis import Settings, analyze
from tilelint.analysis.render import explain_json, explain_text

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "explain-schema.md"
GEMM = ROOT / "tests" / "fixtures" / "parity" / "gemm_ns3.py"


def _table_fields(heading: str) -> list:
    """The backticked names in the first column of the table under ``heading``."""
    text = DOC.read_text()
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        m = re.match(r"\| `([a-z_]+)` \|", line)
        if m:
            rows.append(m.group(1))
        elif rows and not line.startswith("|"):
            break
    return rows


def _analysis():
    return analyze(GEMM.read_text(), str(GEMM), Settings(target="sm_80"))


def test_schema_document_lists_the_kernel_and_branch_fields_explain_prints():
    kernel = explain_json(_analysis())["kernels"][0]
    assert _table_fields("## kernel (`kernels[]`)") == list(kernel)
    path = ROOT / "tests" / "fixtures" / "parity" / "elab_if_elif_else.py"
    doc = explain_json(analyze(path.read_text(), str(path), Settings(target="sm_80")))
    branch = doc["kernels"][0]["branches"][0]
    assert _table_fields("branch (`kernels[].branches[]`)") == list(branch)
    path = ROOT / "tests" / "fixtures" / "elaborate" / "unknown_tl201_one_arm.py"
    doc = explain_json(analyze(path.read_text(), str(path), Settings(target="sm_80")))
    claim = doc["kernels"][0]["open_claims"][0]
    assert _table_fields("open claim (`kernels[].open_claims[]`)") == list(claim)


def test_schema_document_lists_the_loop_fields_explain_prints():
    loop = explain_json(_analysis())["kernels"][0]["loops"][0]
    assert _table_fields("## loop (`kernels[].loops[]`)") == list(loop)
    sync_keys = _table_fields("loop sync (`sync`, `prologue_sync`, `epilogue_sync`)")
    for key in ("sync", "prologue_sync", "epilogue_sync"):
        assert sorted(loop[key]) == sorted(sync_keys), key


def test_text_and_hover_say_per_iteration_and_show_prologue_and_epilogue():
    from tilelint.server.lsp import hover_text

    a = _analysis()
    kr = a.kernels[0]
    lr = kr.loops[0]
    loop = explain_json(a)["kernels"][0]["loops"][0]
    text = explain_text(a)
    hover = hover_text.loop_hover(kr, lr, "sm_80")
    for what, key in (("per iteration", "sync"), ("prologue", "prologue_sync"),
                      ("epilogue", "epilogue_sync")):
        region = loop[key]
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"sync {what}:"))
        assert f"__syncthreads×{region['syncthreads']}" in line, (what, line)
        if region["cp_async_wait"]:
            assert f"wait_group{region['cp_async_wait']}" in line, (what, line)
        part = re.search(rf"{what}: ([^;\n]*)", hover)
        assert part, (what, hover)
        assert f"`__syncthreads()` ×{region['syncthreads']}" in part.group(1), (what, part.group(1))
        if region["cp_async_commit"]:
            assert f"commit ×{region['cp_async_commit']}" in part.group(1), (what, part.group(1))
    # the kernel's sync is the whole kernel: the three regions together
    ks = explain_json(a)["kernels"][0]["sync"]
    assert ks["syncthreads"] == sum(loop[k]["syncthreads"] for k in
                                    ("sync", "prologue_sync", "epilogue_sync"))
    assert ks["cp_async_wait"] == (loop["prologue_sync"]["cp_async_wait"] + loop["sync"]["cp_async_wait"]
                                   + loop["epilogue_sync"]["cp_async_wait"])


def test_schema_document_lists_the_configs_fields_explain_prints(capsys):
    """``explain --configs --format json``: every key it prints is documented, in order."""
    import json

    from tilelint.server import cli

    fixture = ROOT / "tests" / "fixtures" / "autotune" / "autotune_gemm.py"
    assert cli.main(["explain", str(fixture), "--configs", "--format", "json",
                     "--target", "sm_80"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert _table_fields("## Top level") == list(doc)
    configs = doc["configs"]
    assert _table_fields("## configs (`configs`, with `--configs`)") == list(configs)
    kernel = configs["kernels"][0]
    assert _table_fields("configs kernel (`configs.kernels[]`)") == list(kernel)
    verdict = kernel["configs"][0]
    assert _table_fields("config verdict (`configs.kernels[].configs[]`)") == list(verdict)
