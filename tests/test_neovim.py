"""A real client: headless Neovim attaches the server with vim.lsp.start_client,
opens a kernel with a duplicate pipeline order and reads vim.diagnostic.get()
and a hover.  Skipped when nvim is not installed."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "parity" / "invalid_tl101_duplicate_order.py"
SCRIPT = ROOT / "tests" / "lsp" / "data" / "nvim_client.lua"

NVIM = shutil.which("nvim")
# What editors launch: the console script's `tilelint server` (next to this
# interpreter in the venv the tests run in).
TILELINT = pathlib.Path(sys.executable).with_name("tilelint")


def _run_nvim(tmp_path, fixture, settings, script=SCRIPT):
    """Neovim runs ``script`` (tests/lsp/data/nvim_client.lua) against
    `tilelint server` on ``fixture``; ``settings``: the script's other TL_*
    variables.  Its result."""
    out = tmp_path / "result.json"
    env = dict(os.environ)
    env.update({
        "TL_CMD": json.dumps([str(TILELINT), "server"] if TILELINT.exists()
                             else [sys.executable, "-m", "tilelint.server"]),
        "TL_FILE": str(fixture),
        "TL_OUT": str(out),
        "PYTHONPATH": os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        **settings,
    })
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", "-c", f"luafile {script}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.exists(), f"nvim wrote no result: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(out.read_text())
    assert result.get("error") in (None, ""), result
    return result


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed")
def test_neovim_diagnostics_and_hover(tmp_path):
    text = FIXTURE.read_text(encoding="utf-8")
    lines = text.splitlines()
    loop_line = next(i for i, ln in enumerate(lines) if "T.Pipelined(" in ln)
    hover_col = lines[loop_line].index("T.Pipelined") + 3
    result = _run_nvim(tmp_path, FIXTURE, {"TL_HOVER_LINE": str(loop_line),
                                           "TL_HOVER_COL": str(hover_col)})
    diags = result["diagnostics"]
    # The compiler: "Two statements in the software pipeline cannot have the same
    # order", blaming the second statement (the B copy, the line marked `expect: TL101`).
    expected_line = next(i for i, ln in enumerate(lines) if "expect: TL101" in ln)
    tl101 = [d for d in diags if d.get("code") == "TL101"]
    assert tl101, diags
    assert tl101[0]["lnum"] == expected_line
    assert tl101[0]["source"] == "tilelint"
    hover = result["hover"]
    assert isinstance(hover, str) and "T.Pipelined" in hover, hover


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed")
def test_neovim_shipped_lua_module(tmp_path):
    """editors/neovim as a user installs it: require("tilelint").setup{} on the
    runtimepath attaches the server to a Python buffer and shows its findings."""
    text = FIXTURE.read_text(encoding="utf-8")
    lines = text.splitlines()
    result = _run_nvim(tmp_path, FIXTURE, {"TL_RTP": str(ROOT / "editors" / "neovim")},
                       ROOT / "tests" / "lsp" / "data" / "nvim_module_client.lua")
    assert result["clients"] == 1, result
    expected_line = next(i for i, ln in enumerate(lines) if "expect: TL101" in ln)
    assert [d["lnum"] for d in result["diagnostics"] if d.get("code") == "TL101"] == [expected_line]


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed")
def test_neovim_renders_the_loop_and_statement_hovers(tmp_path):
    """The hover Markdown as Neovim shows it (vim.lsp.util.open_floating_preview
    with markdown): the table rows and the steady-state code are there, the
    fences are gone (the code is highlighted, not shown as ```), and no line
    of the float is wider than 100 columns."""
    fixture = ROOT / "tests" / "fixtures" / "parity" / "gemm_ns3.py"
    lines = fixture.read_text(encoding="utf-8").splitlines()
    loop = next(i for i, ln in enumerate(lines) if "T.Pipelined(" in ln)
    gemm = next(i for i, ln in enumerate(lines) if "T.gemm(" in ln)
    hovers = [[loop, lines[loop].index("T.Pipelined") + 3], [gemm, lines[gemm].index("T.gemm") + 2]]
    result = _run_nvim(tmp_path, fixture, {
        "TL_HOVER_LINE": str(loop), "TL_HOVER_COL": str(hovers[0][1]),
        "TL_HOVERS": json.dumps(hovers), "TL_NO_DIAG_WAIT": "1"})
    loop_view, gemm_view = result["rendered"]
    for view in (loop_view, gemm_view):
        assert view["lines"], view
        assert not any(ln.lstrip().startswith("```") for ln in view["lines"]), view["lines"]
        assert max(len(ln) for ln in view["lines"]) <= 100, view["lines"]
        assert view["width"] <= 100, view["width"]
    shown = "\n".join(loop_view["lines"])
    # gemm_ns3 on sm_80 (compiler: stage [0, 0, 2], order [0, 1, 2]): the gemm's row
    # runs in the last two epilogue steps; the generated loop's code is shown.
    assert "| 0 | 1 | 0, 1 | k+2 | — |" in shown, shown
    assert "| 2 | 2 | — | k | n-2, n-1 |" in shown, shown
    assert "for (int k = 0; k < n - 2; ++k) {  // steady state" in shown, shown
    shown = "\n".join(gemm_view["lines"])
    # Neovim 0.7 keeps the emphasis markers in the text (it highlights them).
    assert "stage **2** · order **2**" in shown and "cp_async_wait<2>();" in shown, shown
