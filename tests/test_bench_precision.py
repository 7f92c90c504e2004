"""The verdict rules of bench/precision.py on hand-written compiler facts.

The facts have the shape verify_worker returns (``loops``: one item per
annotated loop, ``shared``: merged dynamic + static bytes, ``error``: the
compiler's message mapped to a tilelint code).  Each case states what the
compiler did and therefore what the verdict must be.  No compiler runs here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("precision_bench", ROOT / "bench" / "precision.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["precision_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


P = _bench()


def _f(code, line=10, target="sm_80", message=""):
    return P.Finding(path="/x.py", code=code, severity="error", line=line, message=message,
                     target=target, kernel="k")


def test_compile_error_verdicts() -> None:
    # The compiler stopped with the duplicate-order message: TL101 is true.
    err = {"error": {"code": "TL101", "summary": "cannot have the same order"}}
    assert P.judge_error(_f("TL101"), err)[0] == P.CONFIRMED
    # It lowered the kernel: the predicted error does not happen.
    assert P.judge_error(_f("TL101"), {"error": None})[0] == P.REFUTED
    # It failed with something else first: neither.
    other = {"error": {"code": None, "type": "InternalError", "summary": "layout"}}
    assert P.judge_error(_f("TL101"), other)[0] == P.UNVERIFIABLE


def test_arena_verdicts() -> None:
    # sm_80's opt-in limit is 166912 B (NOTES.md): 163840 + 4096 static = 167936 > it.
    over = {"error": None, "shared": {"bytes": 163840, "static_bytes": 4096}}
    assert P.judge_arena(_f("TL201"), over)[0] == P.CONFIRMED
    fits = {"error": None, "shared": {"bytes": 163840, "static_bytes": 0}}
    assert P.judge_arena(_f("TL201"), fits)[0] == P.REFUTED
    # sm_90 allows 232448 B: the same over-sm_80 arena fits there.
    assert P.judge_arena(_f("TL201", target="sm_90"), over)[0] == P.REFUTED


def test_loop_verdicts() -> None:
    inner_not_pipelined = {"error": None, "loops": [
        {"line": 8, "pipelined": True, "stage": [0, 0, 1]},
        {"line": 10, "pipelined": False}]}
    assert P.judge_loop(_f("TL109"), inner_not_pipelined, None)[0] == P.CONFIRMED
    inner_pipelined = {"error": None, "loops": [{"line": 10, "pipelined": True, "stage": [0, 0, 1]}]}
    assert P.judge_loop(_f("TL109"), inner_pipelined, None)[0] == P.REFUTED
    # TL106: the compiler used exactly the manual lists -> num_stages changed nothing.
    manual = {"error": None, "loops": [{"line": 10, "pipelined": True, "num_stages": 2,
                                        "user_order": [0, 1, 2], "user_stage": [0, 0, 2],
                                        "order": [0, 1, 2], "stage": [0, 0, 2]}]}
    assert P.judge_loop(_f("TL106"), manual, None)[0] == P.CONFIRMED
    manual["loops"][0]["stage"] = [0, 0, 1]
    assert P.judge_loop(_f("TL106"), manual, None)[0] == P.REFUTED
    # TL113: no loop of the kernel pipelined.
    none = {"error": None, "loops": [{"line": 10, "pipelined": False}]}
    assert P.judge_loop(_f("TL113", target="sm_90"), none, None)[0] == P.CONFIRMED
    # No compiler loop on that line: nothing to judge.
    assert P.judge_loop(_f("TL109", line=99), inner_pipelined, None)[0] == P.UNVERIFIABLE


def test_spread_keeps_first_and_last() -> None:
    assert P.spread(list(range(10)), 4) == [0, 3, 6, 9]
    assert P.spread([1, 2], 6) == [1, 2]
