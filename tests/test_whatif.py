"""The what-if engine (analysis/whatif.py): one kernel instance planned again per
``num_stages`` value.  ``tilelint explain --sweep`` and the hover over
``num_stages=`` both read it, so the tests check the engine's numbers against the
compiler and check that both callers show the same numbers.

Expected values:
* GEMM 1024³ fp16, tile 128×128×32 (tests/fixtures/parity/gemm_ns3.py): the
  compiler table in /work/shared/NOTES.md ("CUDA facts"), measured with
  tests/oracle/lower.py on gemm_ns1..ns4 (the same kernel with that num_stages):
  sm_80 arena 16384 / 32768 / 49152 / 65536 B for ns 1..4, versions = ns (ns=1 is
  one version), ``__syncthreads`` 3/3/4/5 in total and 2 in the loop, cp.async
  commits 2/2/3/4 with ``wait_group`` [0,0] / [1,0] / [2,1,0] / [3,2,1,0]; on sm_90
  warp specialization uses 2 × num_stages mbarriers and no cp.async.
  (tests/test_sync_cuda.py::test_sweep_sync_counts_match_compiler re-checks the
  sync counts and arena against the live compiler.)
* gemm_smem_over_sm80.py (tile 128×128×64): 32768 B per stage, so ns=5 is
  163840 B (measured on gemm_smem_fits_sm80.py, same tiles) and fits sm_80's
  166912 B, ns=6 is 196608 B (measured) and does not; both fit sm_90's 232448 B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelint.analysis import Settings, frontend, values, whatif

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PARITY = FIXTURES / "parity"

# num_stages -> (arena bytes, versions of A_shared/B_shared, syncthreads total,
# cp.async commits, wait_group list) on sm_80, from the compiler (NOTES.md).
GEMM_SM80 = {
    1: (16384, 1, 3, 2, (0, 0)),
    2: (32768, 2, 3, 2, (1, 0)),
    3: (49152, 3, 4, 3, (2, 1, 0)),
    4: (65536, 4, 5, 4, (3, 2, 1, 0)),
}


def _instance(path: Path):
    module = frontend.parse_module(path.read_text())
    kernel = module.kernels[0]
    return module, kernel, values.instances(module, kernel)[0].env


@pytest.mark.parametrize("ns", sorted(GEMM_SM80))
def test_gemm_per_num_stages_sm80(ns):
    _, kernel, env = _instance(PARITY / "gemm_ns3.py")
    (pt,) = whatif.sweep_num_stages(kernel, env, [ns], "sm_80")
    arena, versions, sync, commits, waits = GEMM_SM80[ns]
    assert pt.num_stages == ns
    assert pt.arena_bytes == arena and pt.static_bytes == 0 and pt.total_bytes == arena
    v = dict(pt.versions)
    assert (v["A_shared"], v["B_shared"]) == (versions, versions)
    assert pt.sync.syncthreads == sync
    assert pt.sync.cp_async_commit == commits and tuple(pt.sync.cp_async_wait) == waits
    assert pt.sync.mbarriers == 0
    assert [ls.syncthreads for ls in pt.loop_sync] == [2]
    assert [lr.num_stages for lr in pt.loops] == [ns]


def test_gemm_sm90_warp_specialization_redecided():
    # Each value is planned on the warp-specialized path with its own barriers:
    # 2 × num_stages mbarriers (8 static bytes each), no cp.async.
    _, kernel, env = _instance(PARITY / "gemm_ns3.py")
    pts = whatif.sweep_num_stages(kernel, env, [1, 2, 3], "sm_90")
    assert [p.num_stages for p in pts] == [1, 2, 3]
    for p in pts:
        assert all(lr.warp_specialized for lr in p.loops)
        assert p.sync.mbarriers == 2 * p.num_stages and p.sync.cp_async_commit == 0
        assert p.static_bytes == 8 * 2 * p.num_stages
    assert [p.arena_bytes for p in pts] == [16384, 32768, 49152]


def test_fits_per_target():
    _, kernel, env = _instance(PARITY / "gemm_smem_over_sm80.py")
    p5, p6 = whatif.sweep_num_stages(kernel, env, [5, 6], "sm_80")
    assert (p5.arena_bytes, p6.arena_bytes) == (163840, 196608)
    assert dict(p5.fits)["sm_80"] is True and dict(p6.fits)["sm_80"] is False
    assert dict(p6.fits)["sm_90"] is True


def test_one_loop_only():
    # two_loops.py: loop 1 (line 13, num_stages=2) stages A_shared, loop 2
    # (line 16, num_stages=3) stages B_shared.  Forcing line 13 to 4 plans loop 1
    # with 4 stages and leaves loop 2 at its own 3; without a line, both get 4.
    # Each buffer is 64×32 fp16 = 4096 B per version and versions = num_stages
    # here (written in stage 0, read in the last stage, as in the GEMM).  The two
    # loops' buffers are never live together, so the arena is the larger one
    # (packing.py's liveness rule): 4 × 4096 = 16384 B either way.
    _, kernel, env = _instance(FIXTURES / "whatif" / "two_loops.py")
    (only,) = whatif.sweep_num_stages(kernel, env, [4], "sm_80", loop_line=13)
    assert [lr.num_stages for lr in only.loops] == [4, 3]
    assert dict(only.versions) == {"A_shared": 4, "B_shared": 3}
    (both,) = whatif.sweep_num_stages(kernel, env, [4], "sm_80")
    assert [lr.num_stages for lr in both.loops] == [4, 4]
    assert dict(both.versions) == {"A_shared": 4, "B_shared": 4}
    assert only.arena_bytes == both.arena_bytes == 16384
    lr, sync = only.loop_at(16)
    assert lr is not None and lr.num_stages == 3 and sync is not None
    assert only.loop_at(99) == (None, None)


def test_bad_values_and_non_cuda_never_raise():
    _, kernel, env = _instance(PARITY / "gemm_ns3.py")
    assert whatif.sweep_num_stages(kernel, env, [], "sm_80") == []
    (pt,) = whatif.sweep_num_stages(kernel, env, [2], "ascend")
    assert pt.arena_bytes is None and pt.sync is None and pt.total_bytes is None


@pytest.mark.parity
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_engine_matches_the_compiler(target):
    """gemm_ns3.py swept to num_stages 1..4 against the compiler's own lowering
    of gemm_ns1..ns4.py (the same kernel with that value; gemm_ns4 has a
    smaller M/N, which changes only the grid): versions of every shared buffer,
    the dynamic arena and the static shared memory (mbarriers on sm_90)."""
    from parity_support import oracle_facts, require_tilelang
    require_tilelang()
    files = tuple(str(PARITY / f"gemm_ns{n}.py") for n in (1, 2, 3, 4))
    facts = oracle_facts(target, files)
    _, kernel, env = _instance(PARITY / "gemm_ns3.py")
    pts = whatif.sweep_num_stages(kernel, env, [1, 2, 3, 4], target)
    assert [p.num_stages for p in pts] == [1, 2, 3, 4]
    for p in pts:
        (k,) = facts[f"gemm_ns{p.num_stages}.py"]["kernels"].values()
        where = f"num_stages={p.num_stages} on {target}"
        mine = dict(p.versions)
        assert {b: mine.get(b) for b in k["versions"]} == k["versions"], where
        assert p.arena_bytes == k["shared"]["bytes"], where
        assert p.static_bytes == k["shared"]["static_bytes"], where


@pytest.mark.parity
def test_one_loop_forced_to_its_own_value_is_the_compiler():
    """parity/two_loops.py (loop 1 num_stages=2, loop 2 num_stages=3): forcing
    only loop 1 to its own value gives exactly what the compiler lowers (loop 2
    keeps its 3); forcing every loop to 2 would change loop 2's buffers."""
    from parity_support import oracle_facts, require_tilelang
    require_tilelang()
    path = PARITY / "two_loops.py"
    (k,) = oracle_facts("sm_80", (str(path),))["two_loops.py"]["kernels"].values()
    _, kernel, env = _instance(path)
    first = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "T.Pipelined" in ln)
    (only,) = whatif.sweep_num_stages(kernel, env, [2], "sm_80", loop_line=first)
    mine = dict(only.versions)
    assert {b: mine.get(b) for b in k["versions"]} == k["versions"]
    assert only.arena_bytes == k["shared"]["bytes"]
    (every,) = whatif.sweep_num_stages(kernel, env, [2], "sm_80")
    assert dict(every.versions)["E_shared"] == 2 != k["versions"]["E_shared"]


def test_cli_and_hover_show_the_engine():
    """Both callers print the engine's numbers (the compiler's, above)."""
    from tilelint.server import cli
    from tilelint.server.lsp import hover

    text = (PARITY / "gemm_ns3.py").read_text()
    rows = cli.sweep_rows(text, "gemm_ns3.py", Settings(target="sm_80"), "num_stages", [1, 2, 3, 4])
    assert [(r.value, r.arena_bytes) for r in rows] == [(n, GEMM_SM80[n][0]) for n in (1, 2, 3, 4)]
    module, kernel, _ = _instance(PARITY / "gemm_ns3.py")
    loop_line = next(i for i, ln in enumerate(text.splitlines(), 1) if "T.Pipelined" in ln)
    hrows = dict(hover.whatif_rows(module, kernel, None, Settings(target="sm_80"), "sm_80",
                                   loop_line))
    assert sorted(hrows) == [1, 2, 3, 4, 5]
    assert [hrows[n]["bytes"] for n in (1, 2, 3, 4)] == [GEMM_SM80[n][0] for n in (1, 2, 3, 4)]
    # The hover lists only the buffers that are multiplied (issue 19): at
    # num_stages=3 the two shared tiles have 3 versions; C_local (a fragment,
    # one version) is not listed.
    assert hrows[3]["versions"] == "A_shared×3, B_shared×3"
    # Inside the steady-state loop: 2 __syncthreads and one wait_group<2> (of the
    # kernel's [2, 1, 0], the 1 and 0 drain the epilogue after the loop).
    assert hrows[3]["sync"] == "sync×2, wait 2"  # the hover's short form (issue 19)
