"""Buffer versions after InjectSoftwarePipeline (multi-buffering).

For every buffer allocated in the kernel and accessed in a pipelined loop the
compiler keeps ``use - def + 1`` copies, where ``def`` is the smallest stage
that writes it and ``use`` the largest stage that reads it, and then removes one
copy again unless some writer comes both earlier in the order and in an earlier
stage than a reader of an overlapping region (the tightening rule).  A buffer no
statement of the loop writes keeps one version.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Set, Tuple

from .model import Access, Alloc, BufferVersion, LoopResult, Stmt, walk_stmt
from .planning import is_tma_load, may_conflict, stmt_accesses
from .values import Env


def _accessed(loop_result: LoopResult, allocs: Dict[str, Alloc]) -> List[str]:
    seen: List[str] = []
    for st in loop_result.statements:
        for a in _all_accesses(st.stmt):
            if a.buffer in allocs and a.buffer not in seen:
                seen.append(a.buffer)
    return seen


def _all_accesses(stmt: Stmt) -> Iterator[Access]:
    yield from stmt.reads
    yield from stmt.writes
    for c in stmt.children:
        yield from _all_accesses(c)


def compute_versions(loop_result: LoopResult, allocs: Dict[str, Alloc],
                     env: Optional[Env] = None) -> Tuple[BufferVersion, ...]:
    """Versions of each allocated buffer the loop touches (kernel parameters excluded)."""
    allocs = dict(allocs or {})
    names = _accessed(loop_result, allocs)
    if not loop_result.pipelined:
        return tuple(BufferVersion(n, 1) for n in names)
    if loop_result.warp_specialized:
        # The warp-specialized path expands the shared buffers its TMA
        # producers fill to num_stages versions before the producer/consumer
        # split (measured: a non-TMA copy's destination keeps 1 version).
        ns = loop_result.num_stages
        produced: Set[str] = set()
        for st in loop_result.statements:
            for s in walk_stmt(st.stmt):
                if is_tma_load(s, None, env, allocs):
                    produced.update(w.buffer for w in s.writes)
        return tuple(BufferVersion(n, (ns if ns else 1) if n in produced else 1)
                     for n in names)
    units = []
    for st in loop_result.statements:
        units.append((st, stmt_accesses(st.stmt, env, allocs)))
    out: List[BufferVersion] = []
    for name in names:
        def_stage, use_stage = -1, -1
        unknown = False
        for st, acc in units:
            if any(w.buffer == name for w in acc.writes):
                if st.stage is None:
                    unknown = True
                    continue
                def_stage = st.stage if def_stage == -1 else min(def_stage, st.stage)
            if any(r.buffer == name for r in acc.reads):
                if st.stage is None:
                    unknown = True
                    continue
                use_stage = max(use_stage, st.stage)
        if unknown:
            out.append(BufferVersion(name, 0, None, None))  # 0 = unknown
            continue
        if def_stage == -1:
            out.append(BufferVersion(name, 1, None, use_stage if use_stage >= 0 else None))
            continue
        n = use_stage - def_stage + 1
        tightened = False
        if n >= 2:
            need = False
            for w_st, w_acc in units:
                wr = w_acc.first_write(name)
                if wr is None:
                    continue
                for r_st, r_acc in units:
                    rd = r_acc.first_read(name)
                    if rd is None:
                        continue
                    if (w_st.order is not None and r_st.order is not None
                            and w_st.stage is not None and r_st.stage is not None
                            and w_st.order < r_st.order and w_st.stage < r_st.stage
                            and may_conflict(wr, rd)):
                        need = True
                        break
                if need:
                    break
            if not need:
                n -= 1
                tightened = True
        out.append(BufferVersion(name, max(n, 1), def_stage,
                                 use_stage if use_stage >= 0 else None, tightened))
    return tuple(out)


