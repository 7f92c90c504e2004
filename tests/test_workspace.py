"""The shared buffers the compiler adds (analysis/workspace.py): the cross-warp
reduction ``workspace`` of ``T.reduce_*`` and the ``scan_smem`` staging buffer
of ``T.cumsum`` over a fragment.  Arena bytes and
offsets of the ws_reduce_* fixtures are checked against tilelang 0.1.15 in
tests/test_parity.py (test_shared_memory_matches); here: the warp split read
from ``src/cuda/op/gemm.cc``, that the fixtures disagree with the compiler
when the workspace model is removed (so they can fail), and the TL201 that
only the workspace causes."""

from __future__ import annotations

from pathlib import Path

import pytest
from parity_support import all_oracle_facts, require_tilelang

from tilelint.analysis import Settings, analyze, packing, targets, workspace

PARITY = Path(__file__).parent / "fixtures" / "parity"
FIXTURES = sorted(p.stem for p in PARITY.glob("ws_reduce_*.py")) + \
    sorted(p.stem for p in PARITY.glob("ws_scan_*.py")) + ["invalid_tl201_workspace"]


# Reasoned from ComputeDefaultWarpPartition / ComputeWgmmaWarpPartition:
# Square 128x128 over 4 warps: (1,4) scores |8/4-1|=1, (2,2) |4/8-1|=0.5,
# (4,1) |2/16-1|=0.875 -> (2,2).  FullRow takes the most warps along M that
# divide M into 16-row tiles: 64 rows, 4 warps -> (4,1).  FullCol: 4 warps
# along N when 128 % 32 == 0 -> (1,4).  8 warps, 64x128 Square (ideal 0.5):
# (2,4) scores |2/4-0.5| = 0 -> (2,4).  wgmma (groups of 4 warps along M),
# 128x128 over 8 warps: (4,2) |2/8-1|=0.75, (8,1) |1/16-1|=0.94 -> (4,2).
SPLITS = [
    (("Square", 128, 128, 4, False), (2, 2)),
    (("FullRow", 64, 128, 4, False), (4, 1)),
    (("FullCol", 64, 128, 4, False), (1, 4)),
    (("Square", 64, 128, 8, False), (2, 4)),
    (("Square", 128, 128, 8, True), (4, 2)),
    (("Square", 128, 128, 4, True), (4, 1)),
    (("FullRow", 48, 128, 4, False), (1, 4)),  # 48 % 32, 48 % 64 fail; 48 % 16 holds
]


@pytest.mark.parametrize("args,split", SPLITS)
def test_gemm_warp_partition(args, split) -> None:
    assert workspace.gemm_warp_partition(*args) == split


def _arena(stem: str, target: str):
    path = PARITY / f"{stem}.py"
    a = analyze(path.read_text(), str(path), Settings(target=target))
    return {kr.kernel.name: (kr.shared_bytes, workspace.comparable_offsets(
        {b.name: b.offset for b in kr.buffers if b.scope == "shared.dyn"}))
            for kr in a.kernels}, a


def _compiler(stem: str, target: str):
    facts = all_oracle_facts(target)[f"{stem}.py"]
    # ``offsets`` (the device IR) and ``source_offsets`` (the CUDA source's
    # aliases) each miss some buffers: one at offset 0 has no alias, and a
    # second ``workspace_1`` shares its IR name's entry.
    return {name: ((k.get("shared") or {}).get("bytes"), workspace.comparable_offsets(
                   {**((k.get("shared") or {}).get("offsets") or {}),
                    **((k.get("shared") or {}).get("source_offsets") or {})}))
            for name, k in facts["kernels"].items() if not k.get("error")}


@pytest.mark.parity
@pytest.mark.parametrize("stem", FIXTURES)
def test_fixtures_fail_without_the_workspace(stem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    require_tilelang()
    for target in ("sm_80", "sm_90"):
        assert _arena(stem, target)[0] == _compiler(stem, target), target
    has = [t for t in ("sm_80", "sm_90")
           if any(n.startswith(("workspace", "scan_smem"))
                  for _, offs in _compiler(stem, t).values() for n in offs)]
    assert has or "no_workspace" in stem or "fullrow" in stem or "one_warp" in stem
    monkeypatch.setattr(packing, "added_shared", lambda *a, **k: [])
    for target in has:
        assert _arena(stem, target)[0] != _compiler(stem, target), \
            f"{stem} on {target}: agrees with the compiler without the workspace model"


@pytest.mark.parity
def test_tl201_only_because_of_the_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler's arena passes the sm_80 budget; tilelint says so (TL201,
    naming the workspace), and without the workspace model it would not."""
    require_tilelang()
    stem = "invalid_tl201_workspace"
    budget = targets.get("sm_80").smem_budget
    (theirs, offs), = _compiler(stem, "sm_80").values()
    assert theirs > budget and "workspace*" in offs
    _, a = _arena(stem, "sm_80")
    tl201 = [d for d in a.diagnostics if d.code == "TL201"]
    assert len(tl201) == 1 and f"{theirs} B exceeds" in tl201[0].message
    assert "workspace 1024 B" in tl201[0].message
    monkeypatch.setattr(packing, "added_shared", lambda *a, **k: [])
    _, a = _arena(stem, "sm_80")
    assert not [d for d in a.diagnostics if d.code == "TL201"]


def test_no_workspace_claimed_under_a_thread_branch() -> None:
    """A reduction under ``if tx < 128:`` runs on part of the block; tilelint
    does not model that thread range, so it counts no workspace there (the
    compiler gave none for tile-ai/tilelang's example_warp_specialize_flashmla
    on sm_90, where counting four made a false TL201).  The same reduction
    outside the branch gets one (ws_reduce_gemm_square)."""
    from tilelint.analysis import frontend, values
    src = (PARITY / "ws_reduce_gemm_square.py").read_text()
    branch = src.replace("            T.reduce_max(C_local, R, dim=1)",
                         "            tx = T.get_thread_binding()\n"
                         "            if tx < 64:\n"
                         "                T.reduce_max(C_local, R, dim=1)")
    assert branch != src
    for text, count in ((src, 1), (branch, 0)):
        module = frontend.parse_module(text)
        (kernel,) = module.kernels
        env = values.instances(module, kernel)[0].env
        assert len(workspace.reduce_workspaces(kernel, env, "sm_80", False)) == count


# One workspace per emission of a reduction in a software-pipelined loop
# (packing.pipeline_copies), measured on sm_80: 3 for a row max at stage 2 of
# a num_stages=2 loop (steady state + 2 epilogue steps), 6 with a row sum.
PIPELINED = {"ws_reduce_in_pipeline": 3, "ws_reduce_two_in_pipeline": 6}


@pytest.mark.parametrize("stem", sorted(PIPELINED))
def test_one_workspace_per_pipeline_emission(stem: str) -> None:
    (got,) = _arena(stem, "sm_80")[0].values()
    assert len(got[1]["workspace*"]) == PIPELINED[stem]


@pytest.mark.parity
@pytest.mark.parametrize("stem", sorted(PIPELINED))
def test_pipeline_emissions_fail_without_copies(stem: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    require_tilelang()
    assert _arena(stem, "sm_80")[0] == _compiler(stem, "sm_80")
    assert len(_compiler(stem, "sm_80")[stem][1]["workspace*"]) == PIPELINED[stem]
    monkeypatch.setattr(packing, "pipeline_copies",
                        lambda kernel, env, loops, target, ws:
                        (packing.added_shared(kernel, env, target, ws), {}))
    assert _arena(stem, "sm_80")[0] != _compiler(stem, "sm_80")
