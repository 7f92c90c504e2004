"""Parity of the warp-specialized view (analysis/ws_view.py) with the compiler.

Every parity fixture with a loop tilelint says the sm_90 rewriter splits is lowered
for sm_90 by tests/oracle/lower_ws.py, which reads the IR right after
``tl.ProducerConsumerWarpSpecialized``.  For the first iterations of the loop, each
warpgroup's events must be the compiler's, in order: the statements each one runs
(producer: TMA copies with the buffer they fill, the mbarrier they complete on and
their bytes, cp.async stores; consumer: the compute statements), every mbarrier wait
with its id and parity, every arrive; plus the thread count of each group and the
number and arrive counts of the mbarriers.  Expected values come from the compiler
in this run, never pasted.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from parity_support import ROOT, parity_files, require_tilelang

from tilelint.analysis import Settings, analyze
from tilelint.analysis.ws_view import iteration, ws_view

pytestmark = pytest.mark.parity

ORACLE = ROOT / "tests" / "oracle" / "lower_ws.py"
ITERATIONS = 6  # covers a full parity cycle (2 × num_stages) for num_stages ≤ 3

# (fixture, kernel) where the view differs for a reason the model does not cover.
# strict: a fix makes the test XPASS and fail, so the list stays true.
KNOWN_GAPS: Dict[Tuple[str, str], str] = {}


def _model(path: Path):
    return analyze(path.read_text(), str(path), Settings(target="sm_90"))


@functools.lru_cache(maxsize=None)
def _ws_fixtures() -> tuple:
    """(path, kernel name) for every kernel with a loop the model splits."""
    out = []
    for p in parity_files():
        for kr in _model(p).kernels:
            if any(ws_view(kr, lr) is not None for lr in kr.loops):
                out.append((p, kr.kernel.name))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _oracle() -> Dict[str, dict]:
    require_tilelang()
    files = sorted({str(p) for p, _ in _ws_fixtures()})
    proc = subprocess.run([sys.executable, str(ORACLE), "--iterations", str(ITERATIONS), *files],
                          capture_output=True, text=True, timeout=3000)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"lower_ws oracle failed:\n{proc.stderr[-4000:]}")
    return {Path(e["file"]).name: e for e in json.loads(proc.stdout)}


def _cases():
    out = []
    for p, name in _ws_fixtures():
        reason = KNOWN_GAPS.get((p.stem, name))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(p, name, id=f"{p.stem}-{name}", marks=marks))
    return out


def _same(ours: List[list], theirs: List[list]) -> bool:
    """Event lists equal; a statement whose span the compiler does not give (a
    macro of tilelang's library) matches any statement."""
    if len(ours) != len(theirs):
        return False
    for o, t in zip(ours, theirs, strict=True):
        if o[0] == t[0] == "stmt" and t[1] is None:
            continue
        if o != t:
            return False
    return True


def test_some_fixtures_are_warp_specialized() -> None:
    stems = {p.stem for p, _ in _ws_fixtures()}
    # one barrier group, two groups, a copy before the loop, a SIMT producer,
    # a bind moved into the producer, a phase counter
    for stem in ("gemm_ns3", "ws_dequant_shared", "flash_attn_ns2", "long_store_rhs",
                 "bind_reads_written_buffer", "outer_serial"):
        assert stem in stems, stem


@pytest.mark.parametrize("path,name", _cases())
def test_split_matches_compiler(path: Path, name: str) -> None:
    facts = _oracle()[path.name]
    assert not facts.get("import_error"), facts["import_error"]
    k = facts["kernels"].get(name)
    assert k is not None, f"the oracle lowered no kernel {name}"
    theirs = k.get("ws")
    assert theirs, f"{name}: the compiler did not split the loop ({k.get('error')})"
    kr = next(kr for kr in _model(path).kernels if kr.kernel.name == name)
    views = [v for v in (ws_view(kr, lr) for lr in kr.loops) if v is not None]
    assert len(views) == 1, f"{name}: the pass splits one loop, the model {len(views)}"
    view = views[0]
    assert view.producer_threads == theirs["threads"]["producer"], f"{name}: producer threads"
    assert view.consumer_threads == theirs["threads"]["consumer"], f"{name}: consumer threads"
    assert kr.threads == view.threads, f"{name}: threads per block"
    assert view.mbarriers == len(theirs["barrier_init"]), f"{name}: mbarriers"
    for role in ("producer", "consumer"):
        assert theirs[role] is not None, f"{name}: no {role} loop found in the IR"
        for k_, events in enumerate(theirs[role]):
            ours = [list(e) for e in iteration(view, role, k_)]
            assert _same(ours, events), (
                f"{name}: {role} iteration {k_}\n  ours   {ours}\n  theirs {events}")


@pytest.mark.parametrize("path,name", _cases())
def test_statement_sets_match_compiler(path: Path, name: str) -> None:
    """The statements each warpgroup runs (by source line), independent of order."""
    facts = _oracle()[path.name]
    theirs = (facts["kernels"].get(name) or {}).get("ws")
    assert theirs, f"{name}: the compiler did not split the loop"
    kr = next(kr for kr in _model(path).kernels if kr.kernel.name == name)
    view = next(v for v in (ws_view(kr, lr) for lr in kr.loops) if v is not None)
    for role in ("producer", "consumer"):
        def items(events):
            return [(e[0], e[1]) for e in events if e[0] in ("tma", "stmt")]
        mine = items(iteration(view, role, 0))
        compiler = items(theirs[role][0])
        assert len(mine) == len(compiler), f"{name}: {role} runs ours {mine}, compiler {compiler}"
        named = {c for c in compiler if c[1] is not None}
        assert named <= set(mine), f"{name}: {role} runs ours {mine}, compiler {compiler}"
