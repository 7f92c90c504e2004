"""CUDA sync model (analysis/sync_cuda.py) against tilelang 0.1.15.

EXPECTED was measured with ``tests/oracle/lower.py`` (counts of ``__syncthreads()``,
``cp_async_commit()``, ``cp_async_wait<N>()`` and mbarriers in the generated .cu).
The preview test lowers GEMM num_stages 1-4 with the real compiler (skipped when
tilelang is not importable) and compares the sequence of sync calls."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_packing import analyse

from analysis import packing, schedule, sync_cuda
from analysis.model import NO_SPAN, Access, Loop, LoopResult, ScheduledStmt, Stmt

ROOT = Path(__file__).resolve().parent.parent
PARITY = ROOT / "tests" / "fixtures" / "parity"

# fixture, target, kernel, threads, syncthreads, commits, waits, mbarriers, in-loop syncs
EXPECTED = [
    ("gemm_ns0.py", "sm_80", None, 128, 2, 0, (), 0, None),
    ("gemm_ns1.py", "sm_80", None, 128, 3, 2, (0, 0), 0, 2),
    ("gemm_ns2.py", "sm_80", None, 128, 3, 2, (1, 0), 0, 2),
    ("gemm_ns3.py", "sm_80", None, 128, 4, 3, (2, 1, 0), 0, 2),
    ("gemm_ns4.py", "sm_80", None, 128, 5, 4, (3, 2, 1, 0), 0, 2),
    ("gemm_smem_over_sm80.py", "sm_80", None, 128, 7, 6, (5, 4, 3, 2, 1, 0), 0, 2),
    ("gemm_epilogue_shared.py", "sm_80", None, 128, 6, 3, (2, 1, 0), 0, 2),
    ("two_loops.py", "sm_80", None, 128, 8, 5, (1, 0, 2, 1, 0), 0, 2),
    ("flash_attn_ns1.py", "sm_80", None, 128, 7, 4, (1, 1, 1, 0), 0, 4),
    ("flash_attn_ns2.py", "sm_80", None, 256, 9, 6, (3, 3, 3, 2, 1, 0), 0, 4),
    ("mixed_dtypes_smem.py", "sm_80", None, 128, 9, 6, (3, 3, 3, 2, 1, 0), 0, 4),
    ("cond_bx_copy.py", "sm_80", None, 128, 4, 3, (2, 1, 0), 0, 2),
    ("outer_serial.py", "sm_80", None, 128, 3, 2, (1, 0), 0, 2),
    ("manual_order_120_stage_001.py", "sm_80", None, 128, 3, 2, (0, 0), 0, 2),
    ("gemm_ns1.py", "sm_90", None, 256, 1, 0, (), 2, None),
    ("gemm_ns3.py", "sm_90", None, 256, 1, 0, (), 6, None),
    ("gemm_ns4.py", "sm_90", None, 256, 1, 0, (), 8, None),
    ("copy_only.py", "sm_90", None, 384, 1, 0, (), 4, None),
    ("flash_attn_ns1.py", "sm_90", None, 256, 2, 0, (), 5, None),
    ("flash_attn_ns2.py", "sm_90", None, 384, 2, 0, (), 9, None),
    ("mixed_dtypes_smem.py", "sm_90", None, 256, 2, 0, (), 12, None),
    ("start_stop.py", "sm_90", None, 256, 2, 0, (), 4, None),
    ("outer_serial.py", "sm_90", None, 256, 2, 0, (), 4, None),
    ("manual_stage_002.py", "sm_90", None, 128, 4, 3, (2, 1, 0), 0, 2),
    # indexed (T.Parallel store) against pointer (cp.async) accesses: a barrier
    ("long_store_rhs.py", "sm_80", "long_store_scaled", 128, 5, 2, (1, 0), 0, 3),
    ("long_store_rhs.py", "sm_80", "multiline_store_cast", 128, 5, 2, (1, 0), 0, 3),
    # warp-specialized SIMT producer: one cp.async commit, no barrier merging
    ("long_store_rhs.py", "sm_90", "long_store_scaled", 256, 1, 1, (), 4, None),
    # a non-TMA copy is a consumer: the TMA barriers stay merged
    ("bind_reads_written_buffer.py", "sm_90", None, 256, 1, 0, (), 4, None),
    # the WS loop inside a T.Pipelined(n) without num_stages (a plain loop)
    ("nested_outer_plain.py", "sm_80", None, 128, 3, 2, (1, 0), 0, 2),
    ("nested_outer_plain.py", "sm_90", None, 256, 2, 0, (), 4, None),
    ("start_block_dependent_wide_b.py", "sm_80", None, 128, 5, 3, (0, 2, 0), 0, 2),
]


@pytest.mark.parametrize("fixture,target,kernel,threads,syncs,commits,waits,mbars,in_loop",
                         EXPECTED, ids=[f"{e[0]}-{e[1]}" for e in EXPECTED])
def test_sync_matches_compiler(fixture, target, kernel, threads, syncs, commits, waits, mbars,
                               in_loop):
    k, env, lrs, ws = analyse(fixture, target, kernel)
    pack = packing.pack_kernel(k, env, lrs, target, ws)
    ks, ls = sync_cuda.kernel_sync(k, env, lrs, target, ws, pack=pack)
    assert sync_cuda.threads(k, env, ws) == threads
    assert (ks.syncthreads, ks.cp_async_commit, ks.cp_async_wait, ks.mbarriers) == \
        (syncs, commits, waits, mbars)
    if in_loop is not None:
        pipelined = [s for lr, s in zip(lrs, ls, strict=False) if lr.pipelined]
        assert all(s.syncthreads == in_loop for s in pipelined)


def _stmt(kind, reads=(), writes=(), label=""):
    return Stmt(kind=kind, op="T." + kind, span=NO_SPAN,
                reads=tuple(Access(b, NO_SPAN) for b in reads),
                writes=tuple(Access(b, NO_SPAN) for b in writes), label=label)


def test_schedule_reasoned():
    # Reasoned from the skewing rule: stage [0,0,2] / order [0,1,2] -> 2 prologue steps
    # of the two copies (iterations 0, 1), body copies at k+2 and gemm at k, epilogue
    # gemm at n-2 then n-1.
    a = _stmt("copy", ["A"], ["A_s"])
    b = _stmt("copy", ["B"], ["B_s"])
    g = _stmt("gemm", ["A_s", "B_s"], ["C"])
    loop = Loop(var="k", kind="pipelined", span=NO_SPAN, iter_span=NO_SPAN, start=None, stop=None)
    lr = LoopResult(loop=loop, pipelined=True, num_stages=3, depth=3, statements=(
        ScheduledStmt(a, 0, 0), ScheduledStmt(b, 0, 1), ScheduledStmt(g, 2, 2)))
    sc = schedule.modulo_schedule(lr)
    assert [[(r.stmt.kind, r.offset) for r in step] for step in sc.prologue] == \
        [[("copy", 0), ("copy", 0)], [("copy", 1), ("copy", 1)]]
    assert [(r.stmt.kind, r.iteration_text()) for r in sc.body] == \
        [("copy", "k + 2"), ("copy", "k + 2"), ("gemm", "k")]
    assert [[r.iteration_text() for r in step] for step in sc.epilogue] == [["n - 2"], ["n - 1"]]


def _tilelang_ok() -> bool:
    try:
        r = subprocess.run([sys.executable, "-c", "import tilelang"], capture_output=True,
                           timeout=120)
        return r.returncode == 0
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_preview_sync_sequence_matches_cu(target):
    if not _tilelang_ok():
        pytest.skip("tilelang not importable")
    files = [PARITY / f"gemm_ns{n}.py" for n in (1, 2, 3, 4)]
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "oracle" / "lower.py"),
                            "--target", target, "--dump-dir", d, *map(str, files)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        facts = json.loads(r.stdout)
        for f, fact in zip(files, facts, strict=False):
            (kname, kf), = fact["kernels"].items()
            cu = Path(kf["source_cu"]).read_text()
            k, env, lrs, ws = analyse(f.name, target)
            text = sync_cuda.render_preview(k, lrs[0], None, None, target, env=env)
            assert sync_cuda.sync_calls(text) == sync_cuda.sync_calls(cu), (f.name, text)


@pytest.mark.parity
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_sweep_sync_counts_match_compiler(target):
    """``explain --sweep num_stages=1..4`` on gemm_ns3.py: every row's sync counts
    equal what the compiler emits for gemm_ns1..ns4 (the same kernel with that
    num_stages; gemm_ns4 has a smaller M/N, which only changes the grid)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from parity_support import oracle_facts, require_tilelang

    from tilelint.analysis import Settings
    from tilelint.server.cli import sweep_rows
    require_tilelang()
    files = tuple(str(PARITY / f"gemm_ns{n}.py") for n in (1, 2, 3, 4))
    facts = oracle_facts(target, files)
    rows = sweep_rows((PARITY / "gemm_ns3.py").read_text(), "gemm_ns3.py",
                      Settings(target=target), "num_stages", [1, 2, 3, 4])
    assert [r.value for r in rows] == [1, 2, 3, 4]
    for r in rows:
        (k,) = facts[f"gemm_ns{r.value}.py"]["kernels"].values()
        sync = k["sync"]
        where = f"num_stages={r.value} on {target}"
        assert r.syncthreads == sync["syncthreads"], where
        assert r.cp_async_commit == sync["cp_async_commit"], where
        assert list(r.cp_async_wait) == sync["cp_async_wait"], where
        assert r.mbarriers == sync["mbarriers"], where
        assert r.arena_bytes == k["shared"]["bytes"], where
