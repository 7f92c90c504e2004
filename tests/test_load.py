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
