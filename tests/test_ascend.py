"""Unit tests of the Ascend sync model (no tilelang needed).

Expected values are written-down reasoning from the compiler's sources
(insert_sync.cc, rewrite_flag_to_buf.cc, ascend_pipe.h) and from AscendC the
real compiler printed for tests/fixtures/ascend/gemm_v2.py (quoted below).
"""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from analysis import frontend, values  # noqa: E402
from analysis.sync_ascend import (  # noqa: E402
    _knapsack_keep,
    analyze_ascend,
    annotated_versions,
    hard_event,
    plan_ascend,
    render_ascend_preview,
)

FIX = ROOT / "tests" / "fixtures" / "ascend"


def _load(name):
    module = frontend.parse_module((FIX / name).read_text())
    kernel = module.kernels[0]
    return kernel, values.build_env(module, kernel)


def test_hard_event_renames():
    # GetHardEvent: the four renames, everything else is PROD_CONS.
    assert hard_event("MTE2", "M") == "MTE2_MTE1"
    assert hard_event("M", "MTE2") == "MTE1_MTE2"
    assert hard_event("MTE3", "M") == "MTE3_MTE1"
    assert hard_event("M", "MTE3") == "MTE1_MTE3"
    assert hard_event("M", "FIX") == "M_FIX"
    assert hard_event("V", "MTE3") == "V_MTE3"


def test_pipes_and_cores_of_gemm():
    kernel, env = _load("gemm_v2.py")
    plan = plan_ascend(kernel, env)
    got = [(t.stmt.op, t.pipe, t.core, t.region) for t in plan.tasks]
    assert ("T.copy", "MTE2", "AIC", "loop") in got       # GM -> L1
    assert ("T.gemm", "M", "AIC", "loop") in got          # gemm_l1 task
    assert ("T.copy", "FIX", "AIC", "post") in got        # L0C -> GM
    assert any(t.gemm_l1 for t in plan.tasks)


def test_pipes_of_mixed_kernel():
    kernel, env = _load("mixed_ub_v2.py")
    plan = plan_ascend(kernel, env)
    pipes = {(t.stmt.op, t.pipe, t.core) for t in plan.tasks}
    assert ("T.dual_copy", "FIX", "AIC") in pipes   # L0C -> UB
    assert ("T.dual_copy", "MTE3", "AIV") in pipes  # UB -> GM
    assert any(p == "V" and c == "AIV" for _, p, c in pipes)  # SimtVF body


def test_annotated_versions_are_exact():
    kernel, env = _load("gemm_v4.py")
    assert annotated_versions(kernel, env) == {"A_l1": 4, "B_l1": 4}
    result, diags = analyze_ascend(kernel, env)
    assert result.versions_exact
    assert dict(result.versions)["A_l1"] == 4


def test_unannotated_versions_come_from_the_scheduler():
    # The compiler's scheduler picked A_l1: 2, B_l1: 3 for gemm_ns3 (recorded
    # from its z3_schedule_loop_python result; tests/test_ascend_parity.py
    # checks it on every run).  The model runs the same constraint program.
    pytest.importorskip("z3")
    kernel, env = _load("gemm_ns3.py")
    plan = plan_ascend(kernel, env)
    assert plan.result.versions_exact
    assert dict(plan.result.versions) == {"A_l1": 2, "B_l1": 3, "C_l0c": 1}
    assert plan.version_range == ()


def test_without_the_solver_unannotated_versions_are_a_range(monkeypatch):
    import analysis.schedule_ascend as sched
    monkeypatch.setattr(sched, "solve", lambda inp: None)
    kernel, env = _load("gemm_ns3.py")
    plan = plan_ascend(kernel, env)
    assert not plan.result.versions_exact
    assert ("A_l1", 1, 3) in plan.version_range
    assert not plan.schedule.exact
    assert "z3-solver" in plan.schedule.reason


def test_gemm_v2_flags():
    # The compiler printed for gemm_v2 (16 iterations):
    #   notify(MTE1,MTE2,0); notify(MTE1,MTE2,1)         -- priming
    #   loop: wait(MTE1,MTE2,k&1) ... notify(MTE2,MTE1,k&1); wait(MTE2,MTE1,k&1)
    #         gemm; notify(MTE1,MTE2,k&1); if (k == 15) notify(M,FIX,0)
    #   wait(M,FIX,0); copy out; wait(MTE1,MTE2,0); wait(MTE1,MTE2,1)
    kernel, env = _load("gemm_v2.py")
    result, diags = analyze_ascend(kernel, env)
    assert dict((e, n) for e, n, _ in result.hard_events) == {
        "MTE1_MTE2": 2, "MTE2_MTE1": 2, "M_FIX": 1}
    assert result.pipe_barriers == ()
    assert result.cross_core_slots == 0
    assert diags == []
    text = render_ascend_preview(kernel, env)
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines[0] == "asc_sync_notify(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>(0));"
    assert "asc_sync_wait(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>((k & 1)));" in lines
    assert "if (k == 15) {" in lines
    assert lines[-1] == "asc_sync_wait(PIPE_MTE1, PIPE_MTE2, static_cast<event_t>(1));"


def test_knapsack_keeps_whole_blocks():
    # Three 4-id blocks, capacity 8: the DP reaches 4 with block 0 and 8 with
    # blocks 0+1 first, so blocks 0 and 1 stay flags and block 2 spills.
    assert _knapsack_keep([(0, 3), (4, 7), (8, 11)]) == [True, True, False]
    # A block larger than 8 can never be kept.
    assert _knapsack_keep([(0, 15), (16, 17)]) == [False, True]
    # 3+3+3: best fill is 6 (two blocks).
    assert _knapsack_keep([(0, 2), (3, 5), (6, 8)]).count(True) == 2


def test_gemm_v16_exhausts_the_mutex_pool():
    # 16 versions: MTE1_MTE2 and MTE2_MTE1 each need 16 ids in one block; a
    # 16-id block cannot be kept, so both spill: 2 (gemm_l1) + 16 + 16 = 34 > 32.
    kernel, env = _load("gemm_v16.py")
    result, diags = analyze_ascend(kernel, env)
    assert result.mutex_ids == 34
    codes = sorted(d.code for d in diags)
    assert codes == ["TL301", "TL301", "TL302"]
    tl301 = [d for d in diags if d.code == "TL301"]
    assert all(d.severity == "warning" for d in tl301)
    assert "needs 16 flag slots" in tl301[0].message


def test_cross_core_ids_of_mixed_kernel():
    # Cube side of a loop-carried vector->cube flag waits on id and id + 16
    # (two vector sub-cores); 2 UB versions: base slots 0,1 (release) and 2,3
    # (FIX -> V), four of the sixteen cross-core slots.
    kernel, env = _load("mixed_ub_v2.py")
    result, diags = analyze_ascend(kernel, env)
    assert result.cross_core_slots == 4
    text = render_ascend_preview(kernel, env)
    assert "asc_sync_intra_wait(PIPE_FIX, ((t & 1) + 16));" in text
    assert "asc_sync_intra_arrive(PIPE_FIX, ((t & 1) + 18));" in text
    assert "asc_sync_intra_arrive(PIPE_MTE3, 0);" in text


def test_never_raises_on_odd_kernels():
    src = (
        "import tilelang.ascend.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((16,), 'float32')):\n"
        "    with T.Kernel(1) as bx:\n"
        "        for k in T.Pipelined(n, num_stages=ns):\n"
        "            T.copy(A[0:16], A[0:16])\n"
    )
    module = frontend.parse_module(src)
    kernel = module.kernels[0]
    env = values.build_env(module, kernel)
    result, diags = analyze_ascend(kernel, env)
    assert result is not None


def test_loops_around_the_serial_loop_are_said_to_be_unmodelled():
    # Two T.serial levels around the pipelined loop: only one enclosing serial
    # loop is modelled (its cross-tile flags, e.g. FIX->M); for any other
    # nesting the hazards across the outer iterations have no flags here, so
    # the result must not claim the compiler's schedule.
    src = (FIX / "gemm_outer_tiles.py").read_text().replace(
        "            for t in T.serial(tiles):\n",
        "            for u in T.serial(1):\n             for t in T.serial(tiles):\n")
    module = frontend.parse_module(src)
    kernel = module.kernels[0]
    plan = plan_ascend(kernel, values.build_env(module, kernel))
    assert not plan.result.schedule_exact
    assert "for u in T.serial(1)" in plan.result.schedule_note
    # One serial loop (the fixture itself) is modelled: FIX_M is there.
    kernel, env = _load("gemm_outer_tiles.py")
    plan = plan_ascend(kernel, env)
    assert plan.result.schedule_exact and "FIX_M" in dict(
        (e, n) for e, n, _ in plan.result.hard_events)
