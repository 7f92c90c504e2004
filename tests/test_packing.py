"""Arena packing (analysis/packing.py) against values measured from tilelang 0.1.15.

The EXPECTED table was measured with ``tests/oracle/lower.py --target sm_80|sm_90`` on
the parity fixtures (dynamic shared memory bytes = the device function's
``dyn_shared_memory_buf``, offsets = the ``buf_dyn_shmem + N`` aliases in the .cu)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from analysis import frontend, loops, packing, planning, values, versions
from analysis.model import Const, walk_bodies

PARITY = Path(__file__).resolve().parent / "fixtures" / "parity"


def analyse(name: str, target: str, kernel: str | None = None):
    module = frontend.parse_module((PARITY / name).read_text())
    k = next(x for x in module.kernels if kernel is None or x.name == kernel)
    insts = values.instances(module, k)
    env = insts[0].env if insts else values.build_env(module, k)
    # The kernel as the passes see it (pipeline.instance_core): elaborated,
    # guards the block ranges prove deleted.
    k = loops.active_view(k, env)
    allocs = {a.name: a for a in k.allocs}
    ws = planning.warp_specialization_applies(k, env, target)
    lrs = []
    for s in walk_bodies(k.body):
        if s.loop is not None and s.loop.kind == "pipelined":
            lr, _ = planning.plan_loop(s.loop, env, target, allocs, ws)
            if lr.pipelined:
                lr = dataclasses.replace(lr, versions=versions.compute_versions(lr, allocs))
            lrs.append(lr)
    return k, env, lrs, ws


# (fixture, target, kernel, dynamic bytes, offsets, static bytes) -- measured from the compiler.
EXPECTED = [
    ("gemm_ns0.py", "sm_80", None, 16384, {"A_shared": 0, "B_shared": 8192}, 0),
    ("gemm_ns1.py", "sm_80", None, 16384, {"A_shared": 0, "B_shared": 8192}, 0),
    ("gemm_ns3.py", "sm_80", None, 49152, {"A_shared": 0, "B_shared": 24576}, 0),
    ("gemm_ns4.py", "sm_80", None, 65536, {"A_shared": 0, "B_shared": 32768}, 0),
    ("gemm_epilogue_shared.py", "sm_80", None, 49152,
     {"A_shared": 0, "C_shared": 0, "B_shared": 24576}, 0),
    ("two_loops.py", "sm_80", None, 24576,
     {"A_shared": 0, "D_shared": 0, "B_shared": 8192, "E_shared": 12288}, 0),
    ("mixed_dtypes_smem.py", "sm_80", None, 36992,
     {"P_shared": 0, "A_shared": 4224, "S_shared": 12416, "B_shared": 28800}, 0),
    ("start_stop.py", "sm_80", None, 32768,
     {"A0_shared": 0, "A_shared": 0, "B0_shared": 8192, "B_shared": 16384}, 0),
    ("bind_reads_written_manual.py", "sm_80", None, 32784,
     {"Idx_shared": 0, "A_shared": 16, "B_shared": 16400}, 0),
    ("flash_attn_ns2.py", "sm_80", None, 49152,
     {"Q_shared": 0, "K_shared": 16384, "V_shared": 32768}, 0),
    ("static_shared_scope.py", "sm_80", None, 0, {}, 16384),
    ("gemm_two_kernels.py", "sm_80", "gemm_literal_ns3", 24576, {"A_shared": 0, "B_shared": 12288}, 0),
    # sm_90: warp-specialized path (first-touch ties broken by size, then name;
    # wgmma operands 1024-aligned; 8 static bytes per mbarrier)
    ("gemm_ns3.py", "sm_90", None, 49152, {"A_shared": 0, "B_shared": 24576}, 48),
    ("gemm_cfg_dict.py", "sm_90", None, 49152, {"B_shared": 0, "A_shared": 32768}, 64),
    ("gemm_threads256_ns3.py", "sm_90", None, 73728, {"B_shared": 0, "A_shared": 49152}, 48),
    ("mixed_dtypes_smem.py", "sm_90", None, 37888,
     {"P_shared": 0, "S_shared": 4224, "A_shared": 20608, "B_shared": 29696}, 96),
    ("start_stop.py", "sm_90", None, 49152,
     {"A0_shared": 0, "B0_shared": 8192, "A_shared": 16384, "B_shared": 32768}, 32),
    ("flash_attn_ns2.py", "sm_90", None, 49152,
     {"Q_shared": 0, "K_shared": 16384, "V_shared": 32768}, 72),
    ("gemm_epilogue_shared.py", "sm_90", None, 49152,
     {"A_shared": 0, "C_shared": 0, "B_shared": 24576}, 48),
    # sm_90 without warp specialization: the gemm operand A is 1024-aligned after Idx.
    ("bind_reads_written_manual.py", "sm_90", None, 33792,
     {"Idx_shared": 0, "A_shared": 1024, "B_shared": 17408}, 0),
    ("static_shared_scope.py", "sm_90", None, 0, {}, 16416),
    # run-time start: the prologue is one loop statement, buffers go by size
    ("start_block_dependent_wide_b.py", "sm_80", None, 36864,
     {"B_shared": 0, "A_shared": 24576}, 0),
    # the T.Parallel copy's A_shared is filled by the producer branch
    ("long_store_rhs.py", "sm_90", "long_store_scaled", 32768,
     {"A_shared": 0, "B_shared": 16384}, 32),
]


@pytest.mark.parametrize("fixture,target,kernel,nbytes,offsets,static", EXPECTED,
                         ids=[f"{e[0]}-{e[1]}" for e in EXPECTED])
def test_pack_matches_compiler(fixture, target, kernel, nbytes, offsets, static):
    k, env, lrs, ws = analyse(fixture, target, kernel)
    p = packing.pack_kernel(k, env, lrs, target, ws)
    assert p.arena_bytes == nbytes
    got = {b.name: b.offset for b in p.buffers if b.scope != "shared" and b.offset is not None}
    assert got == offsets
    assert p.static_bytes == static


def test_free_list_reasoned():
    # Reasoned: A,B (8192 each) die before D,E (12288 each) start; D takes the best-fit
    # block [0,16384) at 0, E no longer fits the 4096 B remainder, which touches the
    # arena top, so E starts at 12288 and the top grows to 24576.
    ivs = [packing._Interval("A", 0, 3, 8192, 16), packing._Interval("B", 1, 3, 8192, 16),
           packing._Interval("D", 4, 7, 12288, 16), packing._Interval("E", 5, 7, 12288, 16)]
    top, offs = packing.pack_intervals(ivs)
    assert (top, offs) == (24576, {"A": 0, "B": 8192, "D": 0, "E": 12288})


def test_alignment_gap_is_reused():
    # Reasoned: X (16 B) at 0; Y needs 1024 alignment -> 1024, gap [16,1024) is freed;
    # Z (500 B, starts later) best-fits into the gap at 16.
    ivs = [packing._Interval("X", 0, 9, 16, 16), packing._Interval("Y", 1, 9, 2048, 1024),
           packing._Interval("Z", 2, 9, 500, 16)]
    top, offs = packing.pack_intervals(ivs)
    assert offs == {"X": 0, "Y": 1024, "Z": 16} and top == 3072


def test_no_reuse_and_reused_flag():
    k, env, lrs, ws = analyse("gemm_epilogue_shared.py", "sm_80")
    p = packing.pack_kernel(k, env, lrs, "sm_80", ws)
    assert p.reused and p.no_reuse_bytes == 49152 + 32768


def test_overflow_tl201_with_fix():
    # gemm_smem_over_sm80: ns=6 -> 196608 B (measured) > 166912; ns=5 -> 163840 B
    # (measured on gemm_smem_fits_sm80, same tiles) fits.
    k, env, lrs, ws = analyse("gemm_smem_over_sm80.py", "sm_80")
    p = packing.pack_kernel(k, env, lrs, "sm_80", ws)
    assert p.arena_bytes == 196608
    diags = packing.overflow_diagnostics(k, env, lrs, p, "sm_80", ws)
    assert [d.code for d in diags] == ["TL201"]
    d = diags[0]
    assert d.severity == "error" and "num_stages=5" in d.message
    literal = any(isinstance(lr.loop.num_stages, Const) for lr in lrs)
    if literal:
        assert d.fixes and d.fixes[0].edits[0].new_text == "num_stages=5"


def test_tl203_near_budget():
    # 163840 B on sm_80 is 98 % of 166912 B -> information.
    k, env, lrs, ws = analyse("gemm_smem_fits_sm80.py", "sm_80")
    p = packing.pack_kernel(k, env, lrs, "sm_80", ws)
    assert p.arena_bytes == 163840
    assert [d.code for d in packing.overflow_diagnostics(k, env, lrs, p, "sm_80", ws)] == ["TL203"]
