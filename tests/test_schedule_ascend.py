"""Unit tests of the Ascend auto-schedule model (analysis/schedule_ascend.py).

Expected latencies are worked out by hand from the 0.1.15 cost model
(estimate_latency.cc with the estimate_latency.h defaults); the arithmetic is
written next to each number.  The same numbers are checked against what the
compiler handed its scheduler in tests/test_ascend_parity.py.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from analysis import frontend, values  # noqa: E402
from analysis.schedule_ascend import SchedulerInput, clear_cache, solve  # noqa: E402
from analysis.sync_ascend import plan_ascend  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "ascend"


def _plan_src(src):
    module = frontend.parse_module(src)
    kernel = module.kernels[0]
    return plan_ascend(kernel, values.build_env(module, kernel))


def _plan(name):
    return _plan_src((FIX / name).read_text())


def _costs(plan):
    inp = plan.schedule.input
    return list(zip(inp.latencies, inp.iis, inp.resource_flags, strict=False))


def test_gemm_loop_costs():
    plan = _plan("gemm_v2.py")
    # GM->L1 of a 128x64 fp16 tile = 16384 B: base 190 + ceil(16384/100) = 354,
    # II max(164, 64) = 164, on MTE2 (bit 2).  The L1 GEMM 128x128x64 fp16:
    # 2*128*128*64 / 8192 = 256 cycles + 8 = 264, II 256, on the cube (bit 8).
    assert _costs(plan) == [(354, 164, 2), (354, 164, 2), (264, 256, 8)]


def test_vector_loop_costs():
    plan = _plan("vec_n2_v4.py")
    # GM->UB 512 fp32 (2048 B, both vector cores: 4096 B): 90 + ceil(4096/100)
    # = 131, II max(13, 41) = 41.  SimtVF z[i] = x[i] * 2.0 over 512: one mul,
    # ceil(512/51) = 11 > ceil(2048/256) = 8.  UB->GM: 180 + ceil(4096/115) =
    # 216, II max(10, 36) = 36.
    assert _costs(plan)[:3] == [(131, 41, 2), (11, 11, 16), (216, 36, 4)]


def test_mixed_loop_costs():
    plan = _plan("mixed_ub_v2.py")
    lat = plan.schedule.input.latencies
    # GM->L1 64x64 fp16 (8192 B): 190 + 82 = 272.  GEMM 64x128x64: 2*64*128*64
    # / 8192 = 128 + 8 = 136.  Dual L0C->UB, 32x128 fp32 per vector core
    # (16384 B, 32768 for both): 55 + ceil(32768/256) = 183.  SimtVF over the
    # fused 32x128 loop: each of the two C_ub[i, j] accesses costs three index
    # div/mods at ceil(4096/13) = 316, T.max ceil(4096/51) = 81:
    # 6*316 + 81 = 1977.  UB->GM 16384 B per core: 180 + ceil(32768/115) = 465.
    assert list(lat) == [272, 136, 183, 1977, 465]


def test_dependencies_and_resources_of_a_gemm():
    plan = _plan("gemm_v2.py")
    inp = plan.schedule.input
    # 0,1: copies into A_l1/B_l1 (2 versions), 2: gemm into the accumulator.
    # Same-iteration RAW copy->gemm (distance 0), loop-carried WAW of each copy
    # and WAR gemm->copy at the version count, the accumulator at distance 1;
    # every edge carries the producer's latency.
    assert inp.data_deps == (
        (0, 0, 2, 354), (0, 2, 0, 354), (1, 1, 2, 354), (1, 2, 0, 354),
        (2, 0, 2, 264), (2, 1, 2, 264), (2, 2, 1, 264))
    # The two copies share MTE2 (and the cube's GM port); the gemm shares nothing.
    assert inp.resource_deps == ((0, 1),)


def test_interleaved_vector_streams_are_scheduled():
    pytest.importorskip("z3")
    plan = _plan("vec_n3_v4.py")
    assert plan.schedule.exact
    # The scheduler's model issues the three loads in reverse, then the VFs
    # 2, 0, 1, then the stores in order (the compiler's start times 329, 370,
    # 468 | 2129, 2140, 2151 | 3353, 3569, 3785).
    assert plan.schedule.order == (6, 3, 0, 7, 1, 4, 2, 5, 8)


def test_solver_is_deterministic_and_cached():
    pytest.importorskip("z3")
    inp = SchedulerInput(2, (354, 354, 264), (164, 164, 256), (2, 2, 8),
                         ((0, 0, 2, 354), (0, 2, 0, 354), (1, 1, 2, 354), (1, 2, 0, 354),
                          (2, 0, 2, 264), (2, 1, 2, 264), (2, 2, 1, 264)),
                         ((0, 1),), (), ((253952,),))
    a = solve(inp)
    clear_cache()
    b = solve(inp)
    assert a == b
    # II: the second copy starts >= 164 after the first (one MTE2), the gemm
    # >= 354 after it, and the first copy of iteration k+2 (two versions) must
    # wait for the gemm to finish: 164 + 354 + 264 <= 2 * II, so II >= 391.
    assert a[2] == 391
    assert a[0] == (164, 0, 518)  # B first: the model Z3 returns


def test_strided_copy_costs():
    plan = _plan("vec_strided_v2.py")
    lat, iis = plan.schedule.input.latencies, plan.schedule.input.iis
    # 64x32 fp32 of 256-column rows: 128-byte rows, the "N" geometry.  GM->UB:
    # one 128-byte transaction per row, 128*102/128 = 102 B/cycle, capped at 100;
    # 2*8192 B / 100 = 164, base 75 -> 239, II 164.  UB->GM: 128*86/128 = 86;
    # ceil(16384/86) = 191, base 180 (rows not narrower than 128 B) -> 371.
    # The fused 64x32 VF: 3 accesses x 3 div/mod x ceil(2048/13)=158, one
    # mul ceil(2048/51)=41: 1463.
    assert (lat[0], iis[0]) == (239, 164)
    assert (lat[2], iis[2]) == (371, 191)
    assert lat[1] == 9 * 158 + 41


def test_unfused_vf_has_no_index_arithmetic():
    plan = _plan("vec_strided_wide_v4.py")
    # 16x192: 192 is not a power of two, so the two T.Parallel loops stay
    # nested and the accesses index with plain i, j; T.max and + over 3072
    # elements at 51/cycle: 61 + 61.
    assert plan.schedule.input.latencies[1] == 122


_ONE_STREAM = '''
import tilelang.ascend.language as T

def kernel(L=4096, W=256, blk=64):
    @T.prim_func
    def main(X: T.Tensor((L, W), "float32"), Z: T.Tensor((L,), "float32"),
             Y: T.Tensor((L, W), "float32"), R: T.Tensor((L,), "float32")):
        with T.Kernel(4) as bx:
            x = T.alloc_shared((blk, W), "float32")
            s = T.alloc_shared((blk,), "float32")
            y = T.alloc_shared((blk, W), "float32")
            r = T.alloc_shared((blk,), "float32")
            T.annotate_buffer_versions({x: 2, s: 2, y: 2, r: 2})
            for t in T.Pipelined(L // blk, num_stages=2):
                T.copy(X[t * blk:(t + 1) * blk, 0:W], x)
                T.reduce_sum(x, s, dim=1)
                T.copy(s, Z[t * blk:(t + 1) * blk])
    return main
'''
# The same with a second, independent stream: the order is no longer forced.
_TWO_STREAMS = _ONE_STREAM.replace(
    "                T.copy(s, Z[t * blk:(t + 1) * blk])\n",
    "                T.copy(s, Z[t * blk:(t + 1) * blk])\n"
    "                T.copy(Y[t * blk:(t + 1) * blk, 0:W], y)\n"
    "                T.reduce_sum(y, r, dim=1)\n"
    "                T.copy(r, R[t * blk:(t + 1) * blk])\n")


def test_unmodelled_task_falls_back_and_says_why():
    # A reduction's cost is not in the model and two independent streams can
    # interleave in many ways: the order is a prediction, and says why.
    plan = _plan_src(_TWO_STREAMS)
    assert not plan.schedule.exact
    assert "T.reduce_sum" in plan.schedule.reason
    assert plan.result.versions_exact  # annotated versions are still facts
    assert not plan.result.schedule_exact


def test_a_dependency_chain_needs_no_costs():
    # copy -> reduce -> copy: each task depends on the one before, so every
    # schedule issues them in source order: exact, without start times.
    plan = _plan_src(_ONE_STREAM)
    assert plan.schedule.exact and plan.schedule.ii is None
    assert plan.schedule.order == (0, 1, 2)
    assert "T.reduce_sum" in plan.schedule.reason
    assert plan.result.schedule_exact and plan.result.ii is None
    from analysis.sync_ascend import analyze_ascend
    module = frontend.parse_module(_ONE_STREAM)
    result, _ = analyze_ascend(module.kernels[0], values.build_env(module, module.kernels[0]))
    assert [st.line for st in result.statements] == [15, 16, 17]  # copy, reduce, copy
    assert all(st.start is None for st in result.statements)


def test_manual_stage_and_simd_blocks_are_not_claimed():
    # T.Stage fixes stages and per-pipe order (a different scheduler mode);
    # a T.SimdVF block has its own cost.  Neither is in the model: with two
    # streams the order must be flagged as predicted, not presented as the
    # compiler's.
    base = _TWO_STREAMS.replace("T.reduce_sum(x, s, dim=1)",
                                "with T.SimtVF(threads=128):\n"
                                "                    for i in T.Parallel(blk):\n"
                                "                        s[i] = x[i, 0] * 2.0")
    staged = base.replace("                T.copy(X[t", "                with T.Stage(0):\n"
                          "                    T.copy(X[t", 1)
    plan = _plan_src(staged)
    assert not plan.schedule.exact and "T.Stage" in plan.schedule.reason
    # Even a forced chain is not claimed under T.Stage (stages reorder it).
    plan = _plan_src(_ONE_STREAM.replace(
        "                T.copy(X[t", "                with T.Stage(0):\n"
        "                    T.copy(X[t", 1))
    assert not plan.schedule.exact
    simd = base.replace("T.SimtVF(threads=128)", "T.SimdVF()")
    plan = _plan_src(simd)
    assert not plan.schedule.exact
    assert "VF indexing" in plan.schedule.reason  # s[i] = x[i, 0]: not a whole-buffer loop


def test_deferred_solving_predicts_first_then_uses_the_solution():
    pytest.importorskip("z3")
    from analysis.schedule_ascend import deferred_solving
    clear_cache()
    with deferred_solving() as pending:
        plan = _plan("vec_n3_v4.py")
    # Not solved inside the block: the predicted order, said so, input queued.
    assert not plan.schedule.exact
    assert "being computed" in plan.schedule.reason
    assert pending == [plan.schedule.input]
    solve(pending[0])  # what the language server does on its solver thread
    with deferred_solving() as pending:
        plan = _plan("vec_n3_v4.py")
    assert plan.schedule.exact and pending == []
    assert plan.schedule.order == (6, 3, 0, 7, 1, 4, 2, 5, 8)


def test_a_simd_block_of_intrinsics_is_one_v_task():
    # The compiler schedules a T.SimdVF block of S.* intrinsics as one task on
    # the V pipe (its scheduler input for this kernel, tilelang 0.1.15:
    # latencies [131, 40, 216], IIs [41, 40, 36], resource flags [2, 16, 4]:
    # MTE2, V, MTE3).  The block reads x (S.vld) and writes z (S.vsts'
    # address), so the three tasks form a chain; latency=40 is the block's
    # latency and its II.
    plan = _plan("vec_simd_intrinsics_v4.py")  # the parity suite lowers the same file
    body = [t for t in plan.tasks if t.region == "loop"]
    assert [t.pipe for t in body] == ["MTE2", "V", "MTE3"]
    vf = body[1]
    assert set(vf.reads) == {"x"} and set(vf.writes) == {"z"}
    inp = plan.schedule.input
    assert inp is not None and inp.latencies[1] == 40 and inp.iis[1] == 40
    # Without latency= the compiler counts the operations of the lowered
    # intrinsics: pset 1, then per statement of the 8-trip loop vsts, its
    # access_ptr, _tmp * 64 (ceil(8/51) = 1), vmuls, vld, its access_ptr,
    # _tmp * 64: 8, against 2 KiB of x read / 256 = 8.  Measured with
    # tilelang 0.1.15 on this exact kernel: latencies [131, 8, 216], IIs
    # [41, 8, 36].
    src = (FIX / "vec_simd_intrinsics_v4.py").read_text()
    plan = _plan_src(src.replace("T.SimdVF(latency=40)", "T.SimdVF()"))
    assert plan.schedule.exact and plan.schedule.ii is not None
    assert plan.schedule.input.latencies == (131, 8, 216)
    assert plan.schedule.input.iis == (41, 8, 36)
    # A latency= whose value is not known here is said so, not taken for 0.
    plan = _plan_src(src.replace("T.SimdVF(latency=40)", "T.SimdVF(latency=lat)"))
    assert plan.schedule.ii is None
    assert "the value of T.SimdVF(latency=…) is not known" in plan.schedule.reason


def test_two_simd_blocks_are_two_tasks():
    # vec_simd_two_blocks: the compiler's scheduler input has two V tasks
    # (latencies [131, 40, 30, 216], flags [2, 16, 16, 4]); the frontend keeps
    # each block's `with` span, so back-to-back blocks are not merged.
    plan = _plan("vec_simd_two_blocks.py")
    body = [t for t in plan.tasks if t.region == "loop"]
    assert [t.pipe for t in body] == ["MTE2", "V", "V", "MTE3"]
    assert (set(body[1].reads), set(body[1].writes)) == ({"x"}, {"y"})
    assert (set(body[2].reads), set(body[2].writes)) == ({"y"}, {"z"})
    assert plan.schedule.input.latencies == (131, 40, 30, 216)


def test_deferred_solving_covers_the_serial_loop():
    # gemm_outer_tiles: the K loop is solved first, then the T.serial loop
    # around it (its input needs the K loop's start times); under deferred
    # solving each solve is queued in turn and nothing is claimed meanwhile.
    pytest.importorskip("z3")
    from analysis.schedule_ascend import deferred_solving
    clear_cache()
    with deferred_solving() as pending:
        plan = _plan("gemm_outer_tiles.py")
    assert not plan.result.schedule_exact and len(pending) == 1
    solve(pending[0])
    with deferred_solving() as pending:
        plan = _plan("gemm_outer_tiles.py")
    assert not plan.result.schedule_exact and "being computed" in plan.outer.note
    assert pending == [plan.outer.input]
    solve(pending[0])
    with deferred_solving() as pending:
        plan = _plan("gemm_outer_tiles.py")
    assert plan.result.schedule_exact and pending == [] and plan.outer.ii == 4033


def _vf_costs(name):
    inp = _plan(name).schedule.input
    return [(lat, ii) for lat, ii, flag in zip(inp.latencies, inp.iis, inp.resource_flags,
                                               strict=True) if flag == 16]


@pytest.mark.parametrize("name,costs", [
    # pset 1; per statement (26 x 4 trips: index products ceil(104/51) = 3):
    # a = vld (1) + access_ptr (1) + _tmp * 64 (3); vsts' default mask pset
    # bound in the inner loop (1, shared with vexp's), vsts 1, access_ptr 1,
    # _tmp * 64 3, vexp 1: 1 + 5 + 7 = 13 > 1 KiB / 256 = 4.
    ("vec_simd_est_nested.py", [(13, 13)]),
    # pset 1; a: vld 1, access_ptr 1, _tmp * 64 ceil(52/51) = 2; vadds 1; each
    # vsts: 1 + access_ptr 1 + r * k (1, r alone: ceil(26/51)) + _tmp * 64 (2)
    # + the sum (2) = 7; 1 + 4 + 1 + 7 + 7 = 20 > 512 B / 256 = 2.
    ("vec_simd_est_index.py", [(20, 20)]),
    # The reads: x 1 KiB, y 1 KiB, z [128, 511] 768 B: 2816 / 256 = 11 against
    # 23 operations: vld + access_ptr (2), vexp + its default pset (2), loop 1
    # (vsts, access_ptr, _tmp * 128, vadd, 2 x (vld, access_ptr, _tmp * 128):
    # 10), loop 2 (vsts, access_ptr, 2 for 128 + _tmp * 128, vmax, vld,
    # access_ptr, 2: 9).
    ("vec_simd_est_masks.py", [(23, 23)]),
    # pset 1; vsts 1, access_ptr 1, r * 128 + _tmp * 64 + 64 (two products,
    # two sums: 4), vmuls 1, vld 1, access_ptr 1, r * 128 + _tmp * 64 (3):
    # 13 > x[128, 383] = 1 KiB / 256 = 4.
    ("vec_simd_est_offsets.py", [(13, 13)]),
    # All of x (26 KiB / 256 = 104) against 12 ops; half of y (13 KiB: 52)
    # against 10.
    ("vec_simd_est_two_blocks.py", [(104, 104), (52, 52)]),
    # C_ub 32 x 128 fp32 read whole: 16 KiB / 256 = 64 against 10 ops.
    ("mixed_simd_relu.py", [(64, 64)]),
    # vdup 1 + its default pset 1 (the block's, reused in the loop); per
    # statement of the 4-trip loop: a = vld + access_ptr + _tmp * 64 (3),
    # vcmps 1, vsel 1, vcadd + vcmax + vcpadd 3, vsts + access_ptr + _tmp * 64
    # + vdupv + vcmin 5: 15 > 1 KiB / 256 = 4.
    ("vec_simd_est_reduce.py", [(15, 15)]),
    # pset 1; a 3, b 3; vsts + access_ptr + _tmp * 64 + vnot + vxor + vor +
    # vand 7: 14 > x and y, 1 KiB / 256 = 4.
    ("vec_simd_est_int_logic.py", [(14, 14)]),
    # 26 x 2 trips, products and sums with c at ceil(52/51) = 2, with r alone
    # 1: mk = update_mask(500 - _tmp * 64): 1 + 2 + 2; vsts 1, access_ptr 1,
    # r * 64 + _tmp * 64 (1 + 2 + 2), vmuls 1, vld 1, access_ptr 1,
    # 192 - _tmp * 64 (2 + 2): 5 + 14 = 19 > 512 B / 256 = 2.
    ("vec_simd_est_tail.py", [(19, 19)]),
    # x 8 x 128 fp32 (4096 B) and b[0:8] read by broadcasts of one element
    # (32 B; a register each would make it [0, 70], 284 B): ceil(4128/256) =
    # 17 > 10 operations.
    ("vec_simd_est_broadcast.py", [(17, 17)]),
    # One T.Parallel in a SimdVF block, costed as in a SimtVF block:
    # z = x * 2 over 512, ceil(512/51) = 11 > 2 KiB / 256 = 8.
    ("vec_simd_chain_v4.py", [(11, 11)]),
    # Two T.Parallel loops, one task: 11 + 11 = 22 > (x + z) 4 KiB / 256 = 16.
    ("vec_simd_parallel_two.py", [(22, 22)]),
    # Two fused 16 x 64 loops (SimtVF): each access indexes with three div/mod
    # at ceil(1024/13) = 79; z = x * 2: 2 accesses (474) + mul ceil(1024/51)
    # = 21; y = z + x: 3 accesses (711) + add 21: 1227.
    ("vec_simt_parallel_two.py", [(1227, 1227)]),
])
def test_simd_block_estimate(name, costs):
    # max(operations, UB bytes read / 256) for latency and II (OperationCounter
    # in estimate_latency.cc); the parity suite checks each against the
    # compiler's scheduler input.
    assert _vf_costs(name) == costs


_SIMD_BLOCK = (FIX / "vec_simd_est_offsets.py").read_text()
_SIMD_STORE = """                            S.vsts(z[r * 128 + c + 64],
                                   S.vmuls(S.vld(x[c + r * 128], "NORM"), T.float32(2.0), m),
                                   m, "NORM_B32")"""


@pytest.mark.parametrize("edit,why", [
    # A branch inside the block.
    ((_SIMD_STORE, "                            if r == 1:\n" + _SIMD_STORE.replace(
        "\n", "\n    ").replace("                            S.vsts",
                                   "                                S.vsts")),
     "if in a T.SimdVF block"),
    # An intrinsic outside the counted set, a load of another footprint.
    (("S.vmuls(", "S.vshls("), "S.vshls in a T.SimdVF block"),
    (('"NORM")', '"US_B32")'), "a vld distribution other than NORM or BRC"),
    (('"NORM")', '"BRC_B16")'), "a broadcast load of another width"),
    # A loop of one trip (Simplify may fold it), an index subtraction.
    (("range(1, 3)", "range(1, 2)"), "fewer than two trips"),
    (("x[c + r * 128]", "x[r * 128 - c + 64]"), "a subtraction in an index"),
    # A product of two loop variables is not an index Simplify keeps linear.
    (("x[c + r * 128]", "x[c * r]"), "a product of loop variables"),
    # A load past the end of x (512 elements): the compiler's regions are not
    # the hull there (measured on this edit: the MTE2->V hand-off of x and its
    # flags disappear, and the start times differ).
    (("x[c + r * 128]", "x[c + 128 * 128]"), "a register access outside x"),
])
def test_simd_block_outside_the_count_says_why(edit, why):
    src = _SIMD_BLOCK.replace(*edit)
    assert src != _SIMD_BLOCK
    plan = _plan_src(src)
    # The three tasks form a chain: the order is exact, without start times.
    assert plan.schedule.exact and plan.schedule.ii is None
    assert why in plan.schedule.reason, plan.schedule.reason


def test_simd_store_before_load_keeps_a_buffer_eligible():
    # The compiler's write-first check visits the lowered block in order, a
    # call's arguments in order: vsts(z[c], vmax(vld(z[c]), ...)) stores z
    # first (its address is the first argument), a separate v = vld(z[c])
    # before the store reads it first.  Measured: vec_simd_est_masks gives z a
    # version variable (2 versions), vec_simd_est_read_first does not (1).
    masks = _plan("vec_simd_est_masks.py")
    assert masks.schedule.input.version_buffers == ("y", "z")
    assert dict(masks.result.versions)["z"] == 2
    first = _plan("vec_simd_est_read_first.py")
    assert first.schedule.input.version_buffers == ("y",)
    assert dict(first.result.versions)["z"] == 1


def test_a_vf_block_of_two_parallel_loops_is_one_task():
    # The compiler makes a VF block one task whatever it holds (measured: two
    # T.Parallel loops in one SimdVF or SimtVF block give the scheduler three
    # tasks, MTE2, V, MTE3); one loop alone stays the T.Parallel statement.
    for name in ("vec_simd_parallel_two.py", "vec_simt_parallel_two.py"):
        body = [t for t in _plan(name).tasks if t.region == "loop"]
        assert [t.pipe for t in body] == ["MTE2", "V", "MTE3"]
        assert body[1].stmt.kind == "vf" and len(body[1].stmt.children) == 2
        assert (set(body[1].reads), set(body[1].writes)) == ({"x", "z"}, {"z", "y"})
        # z is stored before it is read: eligible, a version variable.
        assert _plan(name).schedule.input.version_buffers == ("z", "y")
    body = [t for t in _plan("vec_simd_chain_v4.py").tasks if t.region == "loop"]
    assert body[1].stmt.kind == "parallel"


def test_simd_difference_whose_order_matters_is_not_counted():
    # vec_simd_est_tail with x[192 - c - r]: Simplify writes c0 - t1 - t2, and
    # the first difference costs 2 when it holds c (26 x 2 trips) but 1 when
    # it holds r (26): which one comes first is not modelled.
    src = (FIX / "vec_simd_est_tail.py").read_text()
    plan = _plan_src(src.replace("x[192 - c]", "x[192 - c - r]"))
    assert plan.schedule.ii is None
    assert "a difference of loop variables whose order matters" in plan.schedule.reason
