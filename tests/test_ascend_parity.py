"""Ascend parity: our InsertSync/RewriteFlagToBuf model against the real compiler.

Every kernel in tests/fixtures/ascend/ is lowered once by tilelang 0.1.15
(target "ascend", AscendC codegen, no NPU needed) through
tests/oracle/lower_ascend.py; the sync calls of the AscendC source are compared
with ``analysis.sync_ascend``.  Skipped when tilelang is not importable.
Total lowering time on 2 cores: about 20 s (vec_n5_v8 is the slowest, ~5 s).
"""

from __future__ import annotations

import pathlib
import sys

import pytest

tilelang = pytest.importorskip("tilelang")

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "oracle"))
sys.path.insert(0, str(ROOT))

import lower_ascend  # noqa: E402
from analysis import frontend, values  # noqa: E402
from analysis.sync_ascend import (  # noqa: E402
    ascend_diagnostics, call_sequence, plan_ascend,
)

FIXTURES = ROOT / "tests" / "fixtures" / "ascend"
ALL = sorted(p.name for p in FIXTURES.glob("*.py"))

# Kernels whose task order the auto-scheduler (Z3) interleaves in a way our
# level-order prediction does not reproduce: the number of surviving sync
# points differs.  Measured: dual_gemm_v2 compiler MTE1_MTE2/MTE2_MTE1/M_FIX =
# 4/2/1 slots, ours 4/4/2; vec_n3_v4 compiler 8/4/8/8, ours 4 each.
SCHEDULE_DEPENDENT = {
    "dual_gemm_v2.py", "dual_gemm_v4.py", "vec_n3_v4.py", "vec_n4_v4.py",
    "vec_n5_v8.py", "vec_n6_v2.py",
}
# Versions left to the scheduler: only the range is reported.
UNANNOTATED = {"gemm_ns2.py", "gemm_ns3.py"}


@pytest.fixture(scope="module")
def oracle():
    return {name: lower_ascend.lower_file(str(FIXTURES / name)) for name in ALL}


def _plan(name):
    src = (FIXTURES / name).read_text()
    module = frontend.parse_module(src)
    kernel = module.kernels[0]
    env = values.build_env(module, kernel)
    return kernel, plan_ascend(kernel, env)


def _mark(name):
    if name in SCHEDULE_DEPENDENT:
        return pytest.param(name, marks=pytest.mark.xfail(
            strict=True, reason="auto-scheduler task interleaving not modelled"))
    return name


pytestmark = pytest.mark.parity


def test_suite_size():
    assert len(ALL) >= 15


@pytest.mark.parametrize("name", [_mark(n) for n in ALL if n not in UNANNOTATED])
def test_flags_match_compiler(oracle, name):
    o = oracle[name]
    kernel, plan = _plan(name)
    r = plan.result
    assert r.versions_exact
    diags = ascend_diagnostics(kernel, plan)
    codes = sorted({d.code for d in diags})
    if o["error"]:
        # The compiler fails: the matching error diagnostic must fire.
        if "mutex_running" in o["error"]:
            assert "TL302" in codes
        elif "cross-core" in o["error_text"]:
            assert "TL303" in codes
        else:  # pragma: no cover - an unexpected compiler failure
            pytest.fail(o["error"])
        return
    assert "TL302" not in codes and "TL303" not in codes
    ours = {ev: n for ev, n, _ in r.hard_events}
    assert ours == o["slots"]
    assert sorted(ev for ev, _, sp in r.hard_events if sp) == sorted(o["spilled"])
    assert ("TL301" in codes) == bool(o["spilled"])
    assert sorted(r.pipe_barriers) == o["pipe_barriers"]
    assert r.cross_core_slots == len(o["cross_core_slots"])
    reserved = 2 if any(t.gemm_l1 for t in plan.tasks) else 0
    used = list(range(reserved, r.mutex_ids)) if r.mutex_ids else []
    assert used == o["mutex_ids"]


@pytest.mark.parametrize("name", [_mark(n) for n in ALL if n not in UNANNOTATED])
def test_sync_sequence_matches_compiler(oracle, name):
    o = oracle[name]
    if o["error"]:
        pytest.skip("the compiler rejects this kernel")
    _, plan = _plan(name)
    ours = [[c[0], c[1], list(c[2]), list(c[3])] for c in call_sequence(plan)]
    theirs = [c[:4] for c in o["calls"]]
    assert ours == theirs


@pytest.mark.parametrize("name", sorted(UNANNOTATED))
def test_unannotated_versions_are_a_range(oracle, name):
    o = oracle[name]
    assert o["error"] is None
    kernel, plan = _plan(name)
    assert not plan.result.versions_exact
    ns = 2 if "ns2" in name else 3
    assert plan.version_range and all(lo == 1 and hi == ns for _, lo, hi in plan.version_range)
    # The scheduler's choice lies inside the range: the compiler's MTE1_MTE2
    # ring (loop-carried L1 reuse) has 1..ns slots.
    assert 1 <= o["slots"]["MTE1_MTE2"] <= ns
    assert ascend_diagnostics(kernel, plan) == []


def test_spill_kernel_really_spills(oracle):
    # vec_n4_v4: the compiler spills MTE3_V and V_MTE3 (16 slots each) to 16
    # mutex ids; gemm_v16 and vec_n5_v8 exhaust the 32-id pool.
    assert oracle["vec_n4_v4.py"]["spilled"]
    assert "mutex_running" in oracle["gemm_v16.py"]["error"]
    assert "mutex_running" in oracle["vec_n5_v8.py"]["error"]
    assert oracle["mixed_ub_v16.py"]["error"] is None
    assert len(oracle["mixed_ub_v16.py"]["cross_core_slots"]) == 16
