"""Cost that grows with the file, not with its square (issue "The server under
load").  Work is counted, never timed: these machines are shared and noisy.
``bench/scale.py`` measures time and memory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze
from tilelint.analysis.values import interpret

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from scale import make_kernels_file  # noqa: E402


def _statements_run(n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Statements the value interpreter runs to analyse a file whose ``main()``
    builds ``n`` kernels, one ``kernels.append(matmul_i(M, N, K))`` each."""
    counted = {"n": 0}
    real = interpret.Program._exec

    def exec_(self, stmts, *a, **k):
        counted["n"] += len(stmts)
        return real(self, stmts, *a, **k)

    monkeypatch.setattr(interpret.Program, "_exec", exec_)
    text = make_kernels_file(n)
    a = analyze(text, "kernels.py", Settings(target="sm_80"))
    # every kernel got its values from main(): 4096^3
    assert len(a.kernels) == n
    assert all(dict(kr.bindings).get("M") == 4096 for kr in a.kernels)
    return counted["n"]


def test_main_is_run_once_for_all_its_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kernel's values come from the call in ``main()``; main's body is run
    once for all its call sites, so the statements run grow linearly (run once
    per call site, 40 kernels cost 4x the statements of 20, plus 20x20 more)."""
    small = _statements_run(20, monkeypatch)
    big = _statements_run(40, monkeypatch)
    assert big <= 2 * small + 40, (small, big)


# --------------------------------------------------------------------------
# The time budget per file (TL005)
# --------------------------------------------------------------------------

import json  # noqa: E402
import subprocess  # noqa: E402

from tilelint.server.config import ConfigError, load_config  # noqa: E402

THREE = make_kernels_file(3)


def test_budget_used_leaves_the_rest_out() -> None:
    """A budget shorter than one kernel's analysis: the first kernel is always
    analysed, then one TL005 on the next kernel's name, and no more kernels."""
    a = analyze(THREE, "k.py", Settings(target="sm_80", time_budget=1e-9))
    assert [kr.kernel.name for kr in a.kernels] == ["gemm_0"]
    (d,) = [d for d in a.diagnostics if d.code == "TL005"]
    assert d.severity == "warning"
    assert "after 1 of 3 kernels" in d.message and "`gemm_1`" in d.message
    assert "time-budget" in d.message
    assert d.span == a.module.kernels[1].name_span


@pytest.mark.parametrize("budget", [None, 0, 60.0])
def test_no_limit_or_a_roomy_budget_analyses_everything(budget) -> None:
    a = analyze(THREE, "k.py", Settings(target="sm_80", time_budget=budget))
    assert len(a.kernels) == 3
    assert not [d for d in a.diagnostics if d.code == "TL005"]


def test_budget_in_pyproject(tmp_path: Path) -> None:
    pp = tmp_path / "pyproject.toml"
    pp.write_text("[tool.tilelint]\ntime-budget = 0\n")
    assert load_config(pp).settings_for(None).time_budget is None
    pp.write_text("[tool.tilelint]\ntime-budget = 2.5\n")
    assert load_config(pp).settings_for(None).time_budget == 2.5
    for bad in ("-1", '"fast"', "true"):
        pp.write_text(f"[tool.tilelint]\ntime-budget = {bad}\n")
        with pytest.raises(ConfigError, match="`time-budget`"):
            load_config(pp)


def test_budget_from_the_command_line(tmp_path: Path) -> None:
    f = tmp_path / "k.py"
    f.write_text(THREE)
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from tilelint.server.entry import main; "
         "sys.exit(main())", "check", "--isolated", "--time-budget", "1e-9",
         "--format", "json", str(f)], capture_output=True, text=True, timeout=300)
    codes = [d["code"] for d in json.loads(out.stdout)]
    assert codes.count("TL005") == 1
    assert out.returncode == 1  # a warning fails the check


def test_budget_from_the_editor() -> None:
    """``tilelint.timeBudget`` (VS Code) / ``timeBudget`` in the server's settings."""
    from tilelint.server.config import Config, overlay
    from tilelint.server.lsp import settings as lsp_settings
    keys = lsp_settings.config_keys(lsp_settings.merge({"timeBudget": 5}))
    assert keys == {"time-budget": 5}
    assert overlay(Config(), keys).settings_for(None).time_budget == 5.0
    # a bad value is left out with a warning (the server never raises)
    warned: list = []
    assert overlay(Config(), {"time-budget": -3}, warned.append).time_budget == 60.0
    assert warned and "`time-budget`" in warned[0]
