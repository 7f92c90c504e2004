"""Buffer versions after InjectSoftwarePipeline (multi-buffering).

For every buffer allocated in the kernel and accessed in a pipelined loop the
compiler keeps ``use - def + 1`` copies, where ``def`` is the smallest stage
that writes it and ``use`` the largest stage that reads it, and then removes one
copy again unless some writer comes both earlier in the order and in an earlier
stage than a reader of an overlapping region (the tightening rule).  A buffer no
statement of the loop writes keeps one version.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .model import Access, Alloc, BufferVersion, LoopResult, Stmt
from .planning import may_conflict, stmt_accesses
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


def _top_level(stmts: Sequence[Stmt]) -> Iterator[Stmt]:
    """The loop body as the warp-specialization pass lists it: statements in
    source order, ``if`` branches opened, loops (``T.Parallel``) kept whole."""
    for s in stmts:
        if s.kind == "if" and s.loop is None and s.children:
            yield from _top_level(s.children)
        else:
            yield s


def ws_versioned(loop_result: LoopResult, allocs: Dict[str, Alloc]) -> Set[str]:
    """Shared buffers the warp-specialized path gives num_stages versions
    (``GetVersionedBuffers`` of ``multi_version_buffer_rewriter.cc``; it runs
    before tile ops are lowered, so a ``T.copy`` is neither producer nor consumer
    to its role marker and its fallback decides): a buffer whose first writer in
    the body is a copy stage (writes shared memory, reads global memory; TMA or
    not) and which a later statement reads."""
    def shared(b: str) -> bool:
        a = allocs.get(b)
        return a is not None and a.scope.startswith("shared") and "barrier" not in a.scope

    stmts = list(_top_level([st.stmt for st in loop_result.statements]))
    first_write: Dict[str, int] = {}
    last_read: Dict[str, int] = {}
    copy_stage: List[bool] = []
    for i, s in enumerate(stmts):
        reads = {a.buffer for a in _all_accesses_of(s, "reads")}
        writes = {a.buffer for a in _all_accesses_of(s, "writes")}
        copy_stage.append(any(shared(b) for b in writes) and any(b not in allocs for b in reads))
        for b in writes:
            first_write.setdefault(b, i)
        for b in reads:
            last_read[b] = i
    return {b for b, w in first_write.items()
            if shared(b) and b in last_read and w < last_read[b] and copy_stage[w]}


def _all_accesses_of(stmt: Stmt, which: str) -> Iterator[Access]:
    yield from getattr(stmt, which)
    for c in stmt.children:
        yield from _all_accesses_of(c, which)


def compute_versions(loop_result: LoopResult, allocs: Dict[str, Alloc],
                     env: Optional[Env] = None,
                     ws_kernel: bool = False) -> Tuple[BufferVersion, ...]:
    """Versions of each allocated buffer the loop touches (kernel parameters excluded).

    ``ws_kernel``: warp specialization applied to another loop of the kernel.  The
    multi-version rewriter then also expands this loop's buffers (the same choice
    as ``ws_versioned``) to its ``num_stages`` copies, and InjectSoftwarePipeline
    multiplies them again (measured: two_loops on sm_90, shape (3, 3, 64, 32))."""
    out = _compute_versions(loop_result, allocs, env)
    ns = loop_result.num_stages
    if not ws_kernel or loop_result.warp_specialized or not loop_result.pipelined \
            or not ns or ns < 2:
        return out
    doubled = ws_versioned(loop_result, dict(allocs or {}))
    return tuple(replace(v, versions=v.versions * ns) if v.buffer in doubled and v.versions
                 else v for v in out)


def _compute_versions(loop_result: LoopResult, allocs: Dict[str, Alloc],
                      env: Optional[Env] = None) -> Tuple[BufferVersion, ...]:
    allocs = dict(allocs or {})
    names = _accessed(loop_result, allocs)
    if not loop_result.pipelined:
        return tuple(BufferVersion(n, 1) for n in names)
    if loop_result.warp_specialized:
        ns = loop_result.num_stages
        produced = ws_versioned(loop_result, allocs)
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


