"""Shared-memory arena packing, mirroring MergeSharedMemoryAllocations (tilelang 0.1.15).

What the compiler does (read in ``src/transform/merge_shared_memory_allocations.cc``
and checked on the parity fixtures):

* Liveness is computed over the *top-level statements* of the lowered kernel body
  (every access is attributed to the statement at the allocation's scope level).
  After InjectSoftwarePipeline each prologue/epilogue statement instance is its own
  top-level statement and the steady-state loop is one; a prologue or epilogue that
  stays a loop (a run-time ``start``) is one statement.  A buffer lives from the
  first statement that touches it to the last one; two buffers may share bytes
  only if one's last statement comes strictly before the other's first.
* Buffers are processed sorted by (first statement, size descending, name).  Each
  takes, in turn: the best-fitting free block (least waste) at its alignment; else
  the free block touching the arena top, grown; else a bump allocation at the top
  (the alignment gap goes back to the free list).  Freed blocks are coalesced.
* Alignment: 16 bytes by default.  On sm_90 the shared operands of ``T.gemm``
  (wgmma descriptors) need 1024 bytes, and so do those of a tcgen05 gemm (an
  accumulator in tensor memory) on sm_100/sm_103; a gemm lowered to mma.sync
  (sm_80–89, sm_120, and sm_100 with a fragment accumulator) adds nothing.
  TMA-written buffers that are not gemm operands get the TMA minimum of 128
  (``kSmemAlignmentMap``).  The arena size is rounded up
  to 16.  The CUDA source always declares ``extern __shared__ __align__(1024) uchar
  buf_dyn_shmem[]``, so offsets are absolute.
* Warp-specialized path (sm_90): the producer loop comes first in the linear order and
  touches every buffer its copies fill (TMA loads and ``T.Parallel`` copies from global
  memory), so those buffers share one first statement and are ordered by size then name; pre-loop copies stay before the split, every other
  statement (including pre-loop consumers) moves after the producer loop.
* ``scope="shared"`` buffers are packed separately into a static arena; on the
  warp-specialized path the mbarriers add 8 bytes each to the static shared memory.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

from . import planning, targets as targets_mod, versions as versions_mod
from .loops import LoopMatcher, active_view, loop_result, pipelined_loops
from .model import (
    Alloc,
    BufferInfo,
    Const,
    Diagnostic,
    Fix,
    Kernel,
    Loop,
    LoopResult,
    Module,
    Related,
    Span,
    Stmt,
    TextEdit,
    expr_text,
    walk_bodies,
)
from .schedule import modulo_schedule
from .sync_cuda import is_simt_producer, rolled_ends, ws_barriers
from .values import Env, Program, dtype_bits, normalise_dtype
from .workspace import added_shared

DEFAULT_ALIGN = 16
WGMMA_ALIGN = 1024
TMA_ALIGN = 128
MBARRIER_BYTES = 8


@dataclass(frozen=True)
class Packing:
    """The packed shared memory of one kernel instance."""

    buffers: Tuple[BufferInfo, ...]  # every shared buffer, dynamic then static
    arena_bytes: Optional[int]  # dynamic shared memory (what the launch asks for)
    no_reuse_bytes: Optional[int]  # sum of all dynamic buffers (incl. versions), aligned
    static_bytes: int = 0  # static ``__shared__`` bytes (scope="shared", mbarriers)
    reused: bool = False  # some buffers share bytes
    unknown: Tuple[str, ...] = ()  # buffers whose size is not statically known

    @property
    def total_bytes(self) -> Optional[int]:
        return None if self.arena_bytes is None else self.arena_bytes + self.static_bytes

    def buffer(self, name: str) -> Optional[BufferInfo]:
        for b in self.buffers:
            if b.name == name:
                return b
        return None


# --------------------------------------------------------------------------
# Helpers over the kernel model
# --------------------------------------------------------------------------


def _buffers(stmt: Stmt, writes_only: bool) -> Set[str]:
    """The buffers ``stmt`` and everything nested in it (children and loop
    bodies) write, or read and write."""
    out = {a.buffer for a in stmt.writes}
    if not writes_only:
        out.update(a.buffer for a in stmt.reads)
    for c in stmt.children:
        out |= _buffers(c, writes_only)
    if stmt.loop is not None:
        for c in stmt.loop.body:
            out |= _buffers(c, writes_only)
    return out


def _touched(stmt: Stmt) -> Set[str]:
    return _buffers(stmt, writes_only=False)


def _written(stmt: Stmt) -> Set[str]:
    return _buffers(stmt, writes_only=True)


def _is_pipelined_stmt(s: Stmt) -> bool:
    return s.loop is not None and s.loop.kind == "pipelined"


def buffer_versions(loops: Sequence[LoopResult]) -> Dict[str, int]:
    """Versions per buffer; 0 when a loop cannot tell (its stages are unknown),
    and then the buffer's bytes are unknown too."""
    out: Dict[str, int] = {}
    for lr in loops:
        for v in lr.versions:
            if v.versions == 0 or out.get(v.buffer) == 0:
                out[v.buffer] = 0
            else:
                out[v.buffer] = max(out.get(v.buffer, 1), v.versions)
    return out


def _is_copy_into_shared(s: Stmt, shared: Set[str]) -> bool:
    return s.kind == "copy" and any(w.buffer in shared for w in s.writes)


def linear_units(kernel: Kernel, loops: Sequence[LoopResult], shared: Set[str],
                 warp_specialized: bool, env: Optional[Env] = None,
                 extra: Optional[Dict[Tuple[int, int], Set[str]]] = None,
                 tags: Optional[List[bool]] = None,
                 copies: Optional[Dict[Tuple[int, int], List[str]]] = None) -> List[Set[str]]:
    """The kernel's top-level statements in the compiler's linear order, each as the set
    of shared buffers it touches (statements touching none are dropped).  On the
    warp-specialized path the producer branch (the loop's TMA loads) comes first; a
    copy that is not a TMA load stays in the consumer branch.

    ``extra``: buffers a statement touches beyond its own accesses, by the
    statement's (line, column) (the workspace a reduction lowers to).  ``tags``,
    when given, gets one entry per unit returned: whether the unit is a
    pipelined loop's (its prologue, steady state or epilogue).

    ``copies``: for a statement the software pipeline emits more than once (a
    reduction in its prologue steps, steady state and epilogue steps), the name
    of the added buffer each emission uses, in that order (:func:`pipeline_copies`)."""
    allocs = {a.name: a for a in kernel.allocs}
    units: List[Set[str]] = []
    loop_units: Set[int] = set()  # indices in ``units`` of a pipeline's statements
    emitted: Dict[Tuple[int, int], int] = {}

    def _touched(stmt: Stmt) -> Set[str]:
        out = _buffers(stmt, writes_only=False)
        if extra:
            for x in walk_bodies([stmt]):
                key = (x.span.line, x.span.col)
                names = copies.get(key) if copies else None
                if names:
                    i = emitted.get(key, 0)
                    emitted[key] = i + 1
                    out.add(names[min(i, len(names) - 1)])
                else:
                    out |= extra.get(key, set())
        return out
    body = list(kernel.body)
    ws_index = None
    ws_loop: Optional[Loop] = None
    if warp_specialized:
        for i, s in enumerate(body):
            lr = loop_result(s.loop, loops) if s.loop is not None and _is_pipelined_stmt(s) \
                else None
            if lr is not None and lr.pipelined and lr.warp_specialized:
                ws_index = i
                ws_loop = s.loop
                break
    if ws_index is not None and ws_loop is not None:
        before = body[:ws_index]
        ws_stmt = body[ws_index]
        kept = [s for s in before if _is_copy_into_shared(s, shared)]
        moved = [s for s in before if not _is_copy_into_shared(s, shared)]
        for s in kept:
            units.append(_touched(s) & shared)
        produced: Set[str] = set()
        for c in ws_loop.body:
            if is_simt_producer(c, kernel):
                # a T.Parallel copy from global runs in the producer branch too
                # (measured: long_store_rhs places its A_shared first)
                produced |= _written(c) & shared
            for x in walk_bodies([c]):
                if _is_copy_into_shared(x, shared) and planning.is_tma_load(x, kernel, env, allocs):
                    produced |= _written(x) & shared
        units.append(produced)
        for s in moved:
            units.append(_touched(s) & shared)
        units.append(_touched(ws_stmt) & shared)
        rest = body[ws_index + 1:]
    else:
        rest = body
    match = LoopMatcher(loops)
    for s in rest:
        lr = match(s.loop) if s.loop is not None and _is_pipelined_stmt(s) else None
        sched = modulo_schedule(lr) if lr is not None and lr.pipelined else None
        if sched is None:
            units.append(_touched(s) & shared)
            continue
        if lr is not None and env is not None and sched.max_stage >= 2 and \
                rolled_ends(kernel, lr, env):
            # The prologue and the epilogue are loops (a run-time start): each is
            # one statement, so the buffers it touches first share a start and go
            # by size (measured: T.Pipelined(by, n, num_stages=3) with a bigger
            # B tile places B_shared at offset 0, A_shared after it).
            units.append({b for step in sched.prologue for row in step
                          for b in _touched(row.stmt) & shared})
            units.append(_touched(s) & shared)
            units.append({b for step in sched.epilogue for row in step
                          for b in _touched(row.stmt) & shared})
            continue
        n0 = len(units)
        for step in sched.prologue:
            for row in step:
                units.append(_touched(row.stmt) & shared)
        units.append(_touched(s) & shared)  # the steady-state loop
        for step in sched.epilogue:
            for row in step:
                units.append(_touched(row.stmt) & shared)
        loop_units.update(range(n0, len(units)))
    if tags is not None:
        tags.extend(i in loop_units for i, u in enumerate(units) if u)
    return [u for u in units if u]


# --------------------------------------------------------------------------
# The arena packer (best-fit free list, as in LinearScanPack)
# --------------------------------------------------------------------------


def _align(v: int, a: int) -> int:
    return v if a <= 1 else (v + a - 1) // a * a


class _FreeList:
    def __init__(self) -> None:
        self.blocks: List[List[int]] = []  # [offset, size], sorted, coalesced

    def allocate(self, need: int, align: int) -> Optional[int]:
        best, best_waste = -1, None
        for i, (off, size) in enumerate(self.blocks):
            aligned = _align(off, align)
            head = aligned - off
            if head > size or size - head < need:
                continue
            waste = size - need
            if best_waste is None or waste < best_waste:
                best, best_waste = i, waste
        if best < 0:
            return None
        off, size = self.blocks.pop(best)
        aligned = _align(off, align)
        head = aligned - off
        tail = size - head - need
        if tail:
            self.insert(aligned + need, tail)
        if head:
            self.insert(off, head)
        return aligned

    def allocate_from_tail(self, align: int, top: int) -> Optional[int]:
        if not self.blocks:
            return None
        off, size = self.blocks[-1]
        if off + size != top:
            return None
        aligned = _align(off, align)
        if aligned >= top:
            return None
        self.blocks.pop()
        if aligned - off:
            self.insert(off, aligned - off)
        return aligned

    def insert(self, off: int, size: int) -> None:
        if size <= 0:
            return
        i = 0
        while i < len(self.blocks) and self.blocks[i][0] < off:
            i += 1
        self.blocks.insert(i, [off, size])
        if i + 1 < len(self.blocks) and off + size >= self.blocks[i + 1][0]:
            end = max(off + size, sum(self.blocks[i + 1]))
            self.blocks[i][1] = end - off
            self.blocks.pop(i + 1)
        if i > 0 and sum(self.blocks[i - 1]) >= self.blocks[i][0]:
            end = max(sum(self.blocks[i - 1]), sum(self.blocks[i]))
            self.blocks[i - 1][1] = end - self.blocks[i - 1][0]
            self.blocks.pop(i)


@dataclass(frozen=True)
class _Interval:
    name: str
    start: int
    end: int  # last unit (inclusive)
    size: int
    align: int


def pack_intervals(intervals: Sequence[_Interval]) -> Tuple[int, Dict[str, int]]:
    """Offsets for each interval and the arena top (before rounding)."""
    order = sorted(intervals, key=lambda iv: (iv.start, -iv.size, iv.name))
    active: List[Tuple[int, int, int]] = []  # (end, offset, size)
    free = _FreeList()
    top = 0
    offsets: Dict[str, int] = {}
    for iv in order:
        active.sort()
        while active and active[0][0] < iv.start:
            _, off, size = active.pop(0)
            free.insert(off, size)
        slot = free.allocate(iv.size, iv.align)
        if slot is None:
            slot = free.allocate_from_tail(iv.align, top)
            if slot is not None:
                top = slot + iv.size
        if slot is None:
            slot = _align(top, iv.align)
            if slot > top:
                free.insert(top, slot - top)
            top = slot + iv.size
        active.append((iv.end, slot, iv.size))
        offsets[iv.name] = slot
    return top, offsets


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def _alignments(kernel: Kernel, shared: Set[str], target: str, warp_specialized: bool,
                loops: Sequence[LoopResult]) -> Dict[str, int]:
    t = targets_mod.get(target)
    out = {n: DEFAULT_ALIGN for n in shared}
    if t is None or not t.has_tma:
        return out
    scopes = {a.name: a.scope for a in kernel.allocs}
    operands: Set[str] = set()  # shared operands of any gemm (swizzled layouts)
    for s in walk_bodies(kernel.body):
        if s.kind == "gemm":
            operands |= {a.buffer for a in s.reads[:2] if a.buffer in shared}
            if _descriptor_gemm(s, t, scopes):
                for a in s.reads[:2]:
                    if a.buffer in shared:
                        out[a.buffer] = max(out[a.buffer], WGMMA_ALIGN)
    if warp_specialized:
        for lr in loops:
            if lr.warp_specialized:
                for st in lr.statements:
                    for x in walk_bodies([st.stmt]):
                        if _is_copy_into_shared(x, shared):
                            for w in x.writes:
                                if w.buffer in shared:
                                    # A TMA load into a gemm operand's swizzled
                                    # layout needs the swizzle's alignment
                                    # (measured on sm_100: 1024 for 128-byte rows).
                                    need = WGMMA_ALIGN if w.buffer in operands else TMA_ALIGN
                                    out[w.buffer] = max(out[w.buffer], need)
    return out


def _descriptor_gemm(s: Stmt, t: "targets_mod.Target", scopes: Dict[str, str]) -> bool:
    """A gemm whose shared operands the compiler reads through a descriptor
    (wgmma on Hopper, tcgen05 into tensor memory on sm_100/sm_103)."""
    if t.wgmma:
        return True
    if not t.tmem:
        return False
    op = s.op.split(".")[-1]
    into_tmem = any(scopes.get(w.buffer) == "shared.tmem" for w in s.writes)
    return into_tmem or "tcgen05" in op


def buffer_bytes(alloc: Alloc, env: Optional[Env], versions: int = 1) -> Optional[int]:
    """Bytes of one allocation times its versions, None if unknown."""
    bits = dtype_bits(normalise_dtype(env.evaluate(alloc.dtype)) if env is not None else None)
    if bits is None:
        return None
    n = 1
    for d in alloc.shape:
        v = env.eval_int(d) if env is not None else None
        if v is None:
            return None
        n *= v
    return (n * bits + 7) // 8 * versions


def _shape_display(alloc: Alloc, env: Env) -> Tuple[Union[int, str], ...]:
    out = []
    for d in alloc.shape:
        v = env.eval_int(d) if env is not None else None
        out.append(v if v is not None else expr_text(d))
    return tuple(out)


def mbarrier_count(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
                   warp_specialized: bool) -> int:
    return ws_barriers(kernel, env, loops, target, warp_specialized)[0]


def _defer_pipeline_kills(units: Sequence[Set[str]], tags: Sequence[bool],
                          workspaces: Set[str], last: Dict[str, int]) -> None:
    """A reduction right after a pipelined loop (with only statements touching
    no other shared buffer between) lowers to a loop that is a deeper scope
    for MergeSharedMemoryAllocations, which moves the kill of the loop's
    buffers past it: its workspace never takes their bytes (measured on
    sm_80: a 2x2-warp GEMM's workspace sits above A_shared and B_shared,
    with a global store between too; two reductions share one block there;
    a reduction before the loop frees its workspace for A_shared)."""
    for i, u in enumerate(units):
        if not u or not u <= workspaces:
            continue
        j = i - 1
        while j >= 0 and units[j] <= workspaces:
            j -= 1
        if j < 0 or not tags[j]:
            continue
        for n, end in list(last.items()):
            if n not in workspaces and j <= end < i:
                last[n] = i


def pipeline_copies(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
                    warp_specialized: bool
                    ) -> Tuple[List[Tuple[Tuple[int, int], Alloc]],
                               Dict[Tuple[int, int], List[str]]]:
    """The buffers the compiler adds (``workspace.added_shared``), with one
    ``workspace`` per emission of a reduction inside a software-pipelined loop.

    InjectSoftwarePipeline runs before the reduce is lowered, so a reduction at
    stage s of a loop whose last stage is m is emitted in ``m - s`` prologue
    steps, once in the steady state and in ``s`` epilogue steps, and each
    emission asks ``add_workspace`` for its own buffer (measured on sm_80: a row
    max at stage 2 of a num_stages=2 loop gives 3 workspaces, at stage 3 of
    num_stages=3 4; with a row sum after it 6, the two of the steady state at
    two offsets, each epilogue one alone at the lower).  The codegen numbers
    them in no fixed order (three lowerings of one kernel gave three), so only
    their offsets can be compared, not their names.  Returns the buffers,
    renumbered ``workspace``, ``workspace_1``, ... in emission order, and for each
    reduction emitted more than once the names of its emissions in IR order."""
    added = added_shared(kernel, env, target, warp_specialized)
    if warp_specialized or not any(a.func == "add_workspace" for _, a in added):
        return added, {}
    emissions: Dict[Tuple[int, int], int] = {}
    match = LoopMatcher(loops)
    for s in walk_bodies(kernel.body):
        lr = match(s.loop) if s.loop is not None and _is_pipelined_stmt(s) else None
        sched = modulo_schedule(lr) if lr is not None and lr.pipelined else None
        if sched is None or lr is None or lr.warp_specialized or \
                (sched.max_stage >= 2 and rolled_ends(kernel, lr, env)):
            continue
        for row in sched.rows():
            for x in walk_bodies([row.stmt]):
                key = (x.span.line, x.span.col)
                emissions[key] = emissions.get(key, 0) + 1
    out: List[Tuple[Tuple[int, int], Alloc]] = []
    copies: Dict[Tuple[int, int], List[str]] = {}
    n = 0
    for key, alloc in added:
        if alloc.func != "add_workspace":
            out.append((key, alloc))
            continue
        names = []
        for _ in range(max(1, emissions.get(key, 1))):
            name = "workspace" if n == 0 else f"workspace_{n}"
            n += 1
            names.append(name)
            out.append((key, dataclasses.replace(alloc, name=name)))
        if len(names) > 1:
            copies[key] = names
    return out, copies


def pack_kernel(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
                warp_specialized: bool) -> Packing:
    """Pack the kernel's shared buffers like MergeSharedMemoryAllocations.

    ``loops`` are the planned pipelined loops (with ``versions`` filled in); versions of
    buffers not mentioned there are 1.  Never raises."""
    try:
        return _pack(kernel, env, loops, target, warp_specialized)
    except Exception:  # noqa: BLE001 - analysis must never raise on bad code
        return Packing(buffers=(), arena_bytes=None, no_reuse_bytes=None)


def _pack(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
          warp_specialized: bool) -> Packing:
    added, copies = pipeline_copies(kernel, env, loops, target, warp_specialized)
    extra: Dict[Tuple[int, int], Set[str]] = {}
    for key, alloc in added:
        extra.setdefault(key, set()).add(alloc.name)
    workspaces = {a.name for _, a in added if a.func == "add_workspace"}
    allocs = [a for a in kernel.allocs if a.scope in planning.SHARED_SCOPES] + \
        [a for _, a in added]
    dyn = {a.name for a in allocs if a.scope != "shared"}
    static = {a.name for a in allocs if a.scope == "shared"}
    versions = buffer_versions(loops)
    aligns = _alignments(kernel, dyn | static, target, warp_specialized, loops)
    sizes: Dict[str, Optional[int]] = {}
    for a in allocs:
        nver = versions.get(a.name, 1)
        sizes[a.name] = buffer_bytes(a, env, nver) if nver else None
    unknown = tuple(sorted(n for n, v in sizes.items() if v is None))

    def arena(names: Set[str]) -> Tuple[Optional[int], Dict[str, int], Dict[str, int],
                                        Dict[str, int]]:
        tags: List[bool] = []
        units = linear_units(kernel, loops, names, warp_specialized, env, extra, tags, copies)
        first: Dict[str, int] = {}
        last: Dict[str, int] = {}
        for i, u in enumerate(units):
            for n in u:
                first.setdefault(n, i)
                last[n] = i
        if workspaces and not warp_specialized:
            _defer_pipeline_kills(units, tags, workspaces, last)
        ivs = [_Interval(n, first[n], last[n], size, aligns.get(n, DEFAULT_ALIGN))
               for n in names if n in first and (size := sizes.get(n)) is not None]
        if any(sizes.get(n) is None for n in names if n in first):
            return None, {}, first, last
        top, offs = pack_intervals(ivs)
        return (_align(top, DEFAULT_ALIGN) if ivs else 0), offs, first, last

    dyn_bytes, dyn_offs, first, last = arena(dyn)
    st_bytes, st_offs, sfirst, slast = arena(static)
    first.update(sfirst)
    last.update(slast)
    offsets = dict(dyn_offs)
    offsets.update(st_offs)
    infos = []
    for a in allocs:
        infos.append(BufferInfo(
            name=a.name, span=a.span, scope=a.scope,
            dtype=str(normalise_dtype(env.evaluate(a.dtype)) or "?"),
            shape=_shape_display(a, env), versions=versions.get(a.name, 1),
            bytes=sizes[a.name], offset=offsets.get(a.name),
            live=(first[a.name], last[a.name]) if a.name in first else None))
    infos.sort(key=lambda b: (b.scope == "shared", b.offset if b.offset is not None else 1 << 60,
                              b.name))
    no_reuse = None
    if dyn_bytes is not None:
        cur = 0
        for n in sorted(dyn):
            if n in first:
                cur = _align(cur, aligns.get(n, DEFAULT_ALIGN)) + (sizes[n] or 0)
        no_reuse = _align(cur, DEFAULT_ALIGN)
    static_total = (st_bytes or 0)
    if warp_specialized:
        static_total += MBARRIER_BYTES * mbarrier_count(kernel, env, loops, target, True)
    reused = dyn_bytes is not None and no_reuse is not None and dyn_bytes < no_reuse
    return Packing(buffers=tuple(infos), arena_bytes=dyn_bytes, no_reuse_bytes=no_reuse,
                   static_bytes=static_total, reused=reused, unknown=unknown)


# --------------------------------------------------------------------------
# Planning an instance (with num_stages forced), and the overflow diagnostics
# --------------------------------------------------------------------------


def _force_num_stages(kernel: Kernel, num_stages: int, loop_line: Optional[int] = None) -> Kernel:
    """``kernel`` with ``num_stages=<num_stages>`` written on every pipelined loop
    (only on the one whose ``for`` is on ``loop_line`` when that is given)."""

    def fix(stmts: Sequence[Stmt]) -> Tuple[Stmt, ...]:
        out = []
        for st in stmts:
            children = fix(st.children) if st.children else st.children
            loop = st.loop
            if loop is not None:
                loop = dataclasses.replace(loop, body=children)
                if loop.kind == "pipelined" and loop_line in (None, loop.span.line):
                    loop = dataclasses.replace(loop, num_stages=Const(num_stages))
            out.append(dataclasses.replace(st, children=children, loop=loop))
        return tuple(out)

    return dataclasses.replace(kernel, body=fix(kernel.body))


def plan_instance(kernel: Kernel, env: Env, target: str, num_stages: Optional[int] = None,
                  loop_line: Optional[int] = None) -> Tuple[Kernel, List[LoopResult], bool]:
    """Plan one instance of a kernel the way ``pipeline.analyze_kernel`` does (the
    active view of conditional iterators, sm_90 warp specialization, planning and
    versions): (the kernel as planned, its loop results, warp-specialized).
    ``num_stages`` forces that value on every pipelined loop, or on the one whose
    ``for`` is on ``loop_line`` (a what-if: ``whatif.sweep_num_stages``)."""
    view = active_view(kernel, env)
    if num_stages is not None:
        view = _force_num_stages(view, num_stages, loop_line)
    planned = plan_loops(view, env, target)
    return view, list(planned.loops), planned.warp_specialized


@dataclass(frozen=True)
class PlannedLoops:
    """Every pipelined loop of a kernel view, planned."""

    loops: Tuple[LoopResult, ...]  # in source order, versions filled in
    errors: Tuple[Tuple[planning.PlanError, ...], ...]  # planning's errors, per loop
    ws_mode: str  # planning.warp_specialization_mode: "none", "applied" or "fallback"
    warp_specialized: bool  # a loop was split into producer and consumer


def plan_loops(view: Kernel, env: Env, target: str) -> PlannedLoops:
    """Plan every pipelined loop of ``view`` (a kernel's active view) in the
    compiler's order: warp specialization is decided first (CUDA targets), then
    each loop is planned and its buffer versions computed.  The one planning
    driver of ``pipeline.analyze_kernel`` and of the what-ifs."""
    allocs = {a.name: a for a in view.allocs}
    t = targets_mod.get(target)
    mode = "none"
    ws_loop = None
    if t is not None and t.kind == "cuda":
        mode = planning.warp_specialization_mode(view, env, target, allocs)
        if mode == "applied":
            ws_loop = planning.warp_specialized_loop(view, env, target, allocs)
    loops: List[LoopResult] = []
    errors: List[Tuple[planning.PlanError, ...]] = []
    for loop in pipelined_loops(view.body):
        lr, errs = planning.plan_loop(loop, env, target, allocs, loop is ws_loop,
                                      ws_fallback=mode == "fallback")
        if lr.pipelined:
            lr = dataclasses.replace(lr, versions=versions_mod.compute_versions(
                lr, allocs, env, ws_kernel=ws_loop is not None))
        loops.append(lr)
        errors.append(tuple(errs))
    return PlannedLoops(tuple(loops), tuple(errors), mode, ws_loop is not None)


def _literal_num_stages(loops: Sequence[LoopResult]) -> List[Loop]:
    return [lr.loop for lr in loops if isinstance(lr.loop.num_stages, Const)
            and isinstance(lr.loop.num_stages.value, int) and lr.loop.num_stages_span is not None]


def overflow_diagnostics(kernel: Kernel, env: Env, loops: Sequence[LoopResult], pack: Packing,
                         target: str, warp_specialized: bool) -> List[Diagnostic]:
    """TL201 (error) when the kernel's shared memory exceeds the target's opt-in budget,
    TL203 (information) above 90 % of it."""
    try:
        return _overflow(kernel, env, loops, pack, target, warp_specialized)
    except Exception:  # noqa: BLE001
        return []


def _overflow(kernel: Kernel, env: Env, loops: Sequence[LoopResult], pack: Packing, target: str,
              warp_specialized: bool) -> List[Diagnostic]:
    budget = targets_mod.budget(target)
    total = pack.total_bytes if pack is not None else None
    if budget is None or total is None:
        return []
    dyn = [b for b in pack.buffers if b.bytes is not None and b.scope != "shared"]
    if not dyn and not pack.buffers:
        return []
    largest = max(pack.buffers, key=lambda b: (b.bytes or 0))
    parts = ", ".join(
        f"{b.name} {b.bytes} B" + (f" ({b.versions} versions)" if b.versions > 1 else "")
        for b in sorted(pack.buffers, key=lambda b: (b.offset if b.offset is not None else 0, b.name)))
    if total <= budget:
        if total * 10 > budget * 9:
            return [Diagnostic(
                code="TL203", severity="information", span=largest.span,
                message=(f"shared memory {total} B is {100 * total // budget}% of the "
                         f"{target} budget ({budget} B)"),
            )]
        return []
    related = [Related(b.span, f"{b.name}: {b.bytes} B = {b.versions} version(s)"
                       + (f" at offset {b.offset}" if b.offset is not None else ""))
               for b in pack.buffers if b.bytes]
    reuse = ("buffers already share space (reuse applied; no-reuse total "
             f"{pack.no_reuse_bytes} B)" if pack.reused else "no buffers could share space")
    fixes: List[Fix] = []
    best = None
    deep = [lr for lr in loops if lr.pipelined and lr.num_stages]
    top = max((lr.num_stages or 0 for lr in deep), default=0)
    lowered: List[LoopResult] = []
    if top > 1:
        for ns in range(top - 1, 0, -1):
            # Every loop deeper than ``ns`` lowered to it, the others as written
            # (with two loops, the second loop's versions depend on the first
            # one's on sm_90), planned like a what-if: warp specialization is
            # decided again for the smaller value.
            lowered = [lr for lr in deep if (lr.num_stages or 0) > ns]
            view = kernel
            for lr in lowered:
                view = _force_num_stages(view, ns, lr.loop.span.line)
            view, lrs, ws_ns = plan_instance(view, env, target)
            p = pack_kernel(view, env, lrs, target, ws_ns)
            if p.total_bytes is not None and p.total_bytes <= budget:
                best = (ns, p.total_bytes)
                break
    msg = (f"shared memory {total} B exceeds the {target} budget of {budget} B "
           f"(arena {pack.arena_bytes} B" + (f" + static {pack.static_bytes} B" if pack.static_bytes else "")
           + f"; {parts}); {reuse}")
    if best is not None:
        lines = list(dict.fromkeys(str(lr.loop.span.line) for lr in lowered))
        where = "" if len(deep) < 2 else " on the loop" + ("s" if len(lines) > 1 else "") + \
            " at line " + ", ".join(lines)
        msg += f"; num_stages={best[0]}{where} would fit ({best[1]} B)"
        literal = {id(lp) for lp in _literal_num_stages(loops)}
        # (one source loop built several times, by a Python ``for`` over a
        # list, has one num_stages to edit)
        spans = [sp for sp in dict.fromkeys(lr.loop.num_stages_span for lr in lowered
                                            if id(lr.loop) in literal) if sp is not None]
        for ns_span in spans:
            related.append(Related(ns_span, f"num_stages={best[0]} fits in {best[1]} B"))
        if spans and len(spans) == len({lr.loop.span for lr in lowered}):
            # One fix that writes the value on every loop the what-if lowered
            # (a loop whose num_stages is not a literal cannot be edited: no fix).
            fixes.append(Fix(title=f"Set num_stages={best[0]} ({best[1]} B fits {target})",
                             edits=tuple(TextEdit(sp, f"num_stages={best[0]}")
                                         for sp in spans),
                             preferred=True))
    elif top > 1:
        msg += "; no num_stages >= 1 fits"
    return [Diagnostic(code="TL201", severity="error", span=largest.span, message=msg,
                       related=tuple(related), fixes=tuple(fixes))]


# --------------------------------------------------------------------------
# TL202: autotune configurations that overflow
# --------------------------------------------------------------------------

MAX_AUTOTUNE_CONFIGS = 512  # configurations checked per kernel
_CONFIGS_KW = re.compile(r"(?<![\w.])configs\s*=(?!=)")


def _kib(n: Optional[int]) -> str:
    if n is None:
        return "?"
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n / 1024:.1f} KiB"


def _cfg_label(cfg: Dict[str, object]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, str):
            return v
        return repr(v)
    return ", ".join(f"{k}={fmt(v)}" for k, v in cfg.items() if k != "pass_configs") or "{}"


def autotune_span(source: Optional[str], def_line: int) -> Optional[Span]:
    """The ``configs=…`` argument of an ``@…autotune(…)`` decorator above the def
    on ``def_line`` (1-based), else the decorator line, else None."""
    if not source or def_line <= 1:
        return None
    lines = source.splitlines()
    # Walk up over the decorator block (stop at a blank line or a statement).
    first = def_line - 1
    i = def_line - 2
    while i >= 0:
        text = lines[i].strip()
        if not text or text.startswith("#"):
            if not text:
                break
            i -= 1
            continue
        first = i
        if text.startswith("@"):
            i -= 1
            continue
        # a continuation line of a multi-line decorator
        i -= 1
    block_start = first
    for ln in range(block_start, def_line - 1):
        text = lines[ln]
        at = text.find("@")
        if at < 0 or "autotune" not in text[at:]:
            continue
        # Search ``configs`` from here to the def line.
        for ln2 in range(ln, def_line - 1):
            m = _CONFIGS_KW.search(lines[ln2])
            if m is None:
                continue
            j = m.end()
            while j < len(lines[ln2]) and lines[ln2][j] == " ":
                j += 1
            start = (ln2 + 1, j)
            depth = 0
            r, c = ln2, j
            while r < def_line - 1:
                row = lines[r]
                while c < len(row):
                    ch = row[c]
                    if ch in "([{":
                        depth += 1
                    elif ch in ")]}":
                        if depth == 0:
                            return Span(start[0], start[1], r + 1, c)
                        depth -= 1
                    elif ch == "," and depth == 0:
                        return Span(start[0], start[1], r + 1, c)
                    c += 1
                if depth == 0:
                    return Span(start[0], start[1], r + 1, len(row.rstrip()))
                r += 1
                c = 0
            break
        return Span(ln + 1, at, ln + 1, len(text.rstrip()))
    return None


def autotune_configs(module: Module, kernel: Kernel,
                     base_bindings: Sequence[Tuple[str, object]] = (),
                     through_wrapper: bool = False
                     ) -> Optional[List[Dict[str, object]]]:
    """The literal autotune configuration list of ``kernel``'s factory, if any.

    The forms the value resolver turns into instances (a literal list, a name or
    a call evaluating to one, a dict of lists) come from ``values``; a callable
    ``configs=get_configs`` (tilelang calls it with the kernel's arguments) is
    called here with the factory's resolved arguments (``base_bindings``).
    ``through_wrapper``: also the list of ``configs=tilelint.autotune_configs(
    get_configs, ...)``, which that wrapper prunes at run time (TL202 does not
    ask for it: what overflows never reaches the autotuner)."""
    from . import values as values_mod
    try:
        prog = values_mod.program(module)
        cfgs = prog.autotune_configs(kernel.factory or kernel.name)
        if not cfgs:
            cfgs = _callable_configs(prog, module, kernel, dict(base_bindings), through_wrapper)
    except Exception:  # noqa: BLE001
        return None
    if not cfgs:
        return None
    return [c for c in cfgs if isinstance(c, dict)][:MAX_AUTOTUNE_CONFIGS] or None


def _callable_configs(prog: Program, module: Module, kernel: Kernel, bound: Dict[str, object],
                      through_wrapper: bool = False) -> Optional[List[Dict[str, object]]]:
    from . import values as values_mod
    from .model import Call as CallExpr, Name as NameExpr
    fdef = prog.defs.get(kernel.factory or kernel.name)
    if fdef is None:
        return None
    for d in fdef.decorators:
        if not (isinstance(d, CallExpr) and d.func.split(".")[-1] == "autotune"):
            continue
        cfg = dict(d.kwargs).get("configs")
        if through_wrapper and isinstance(cfg, CallExpr) and cfg.args \
                and cfg.func.split(".")[-1] == "autotune_configs":
            cfg = cfg.args[0]
        if not isinstance(cfg, NameExpr):
            return None
        helper = prog.defs.get(cfg.id)
        if helper is None:
            return None
        # tilelang calls configs(*args, **kwargs) with the kernel call's arguments:
        # pass the factory's parameters, in order, as far as the helper takes them.
        names = [p.name for p in values_mod.kernel_params(kernel)]
        pos = []
        for _p, name in zip(helper.params, names, strict=False):
            v = bound.get(name)
            if v is None or isinstance(v, (values_mod.Symbolic, values_mod.Unresolved)):
                break
            pos.append(v)
        if len(pos) < len([p for p in helper.params if p.default is None]):
            return None
        v = prog.call(helper, pos, {}, 0)
        if isinstance(v, dict) and v and all(isinstance(x, (list, tuple)) for x in v.values()):
            import itertools
            v = [dict(zip(v, combo, strict=True)) for combo in itertools.product(*v.values())]
        if isinstance(v, (list, tuple)):
            return [x for x in v if isinstance(x, dict)] or None
        return None
    return None


def autotune_overflows(module: Module, kernel: Kernel, target: str,
                       base_bindings: Sequence[Tuple[str, object]] = (),
                       overrides: Optional[Dict[str, object]] = None
                       ) -> Optional[Tuple[List[Dict[str, object]],
                                           List[Tuple[Dict[str, object], Packing]]]]:
    """Every autotune configuration of ``kernel`` packed on ``target``:
    (the configurations, [(config, packing) for each one that overflows]).

    Each configuration is one instance of the kernel: the configuration's values
    on top of ``base_bindings`` (the default instance's resolved arguments, e.g.
    the problem size from the call site), with ``overrides`` (explicit bindings)
    winning.  None when the kernel has no literal configuration list."""
    cfgs = autotune_configs(module, kernel, base_bindings)
    budget = targets_mod.budget(target)
    if not cfgs or budget is None:
        return None
    packed = _sweep_packings(module, kernel, cfgs, target, base_bindings, overrides)
    over = [(cfg, p) for cfg, p in zip(cfgs, packed, strict=True)
            if p is not None and p.total_bytes is not None and p.total_bytes > budget]
    return cfgs, over


# ---- the sweep, kept across analyses ---------------------------------------
# The language server analyses a kernel again on every keystroke, and most
# keystrokes of a statement being typed leave the kernel's model as it was (a
# bare name or attribute is no statement of the model) or only move its lines.
# A configuration's packing reads the kernel's model (never a line of it: a
# span only orders statements of the same model, and the same lines moved keep
# their order) and the names its evaluation resolves (``Env.record_reads``).
# So a packing is kept per kernel model with its spans left out
# (:func:`shape_key`) and target, under the names read and what they resolved
# to, and holds for a later analysis where those resolve the same way.  An
# evaluation that consults the file's functions (a helper called in a tile
# size) reads more than names, and its packing is kept for this sweep only.
# The spans a kept packing holds are its buffers' allocations: they are taken
# from the kernel being analysed.

_SweepMemo = Dict[Tuple[Tuple[str, int], ...], Dict[tuple, Tuple[Kernel, bool, Packing]]]
_SWEEPS: "OrderedDict[Tuple[object, str], _SweepMemo]" = OrderedDict()
_SWEEPS_KEPT = 64


def _sweep_packings(module: Module, kernel: Kernel, cfgs: Sequence[Dict[str, object]],
                    target: str, base_bindings: Sequence[Tuple[str, object]],
                    overrides: Optional[Dict[str, object]]) -> List[Optional[Packing]]:
    """The packing of each configuration (None: it could not be planned), as
    :func:`pack_configs` computes it, re-using the plans kept for a kernel of
    the same model (see above)."""
    spans = _alloc_spans(kernel)
    if spans is None:
        return [None if isinstance(cp, str) else cp.packing
                for cp in pack_configs(module, kernel, cfgs, target, base_bindings, overrides)]
    key = (shape_key(kernel), target)
    kept = _SWEEPS.get(key, {})
    _SWEEPS[key] = kept
    _SWEEPS.move_to_end(key)
    while len(_SWEEPS) > _SWEEPS_KEPT:
        _SWEEPS.popitem(last=False)
    packed = pack_configs(module, kernel, cfgs, target, base_bindings, overrides, kept)
    return [None if isinstance(cp, str) else _rebased(cp.packing, spans) for cp in packed]


def _kept_plan(env: Env, memo: _SweepMemo) -> Optional[Tuple[Kernel, bool, Packing]]:
    for read, plans in list(memo.items()):  # (a copy: another thread may add)
        hit = plans.get(env.outcomes(read))
        if hit is not None:
            return hit
    return None


class _ProgramWatch:
    """The file's functions as an evaluation sees them, noting that it looked."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.consulted = False

    def __getattr__(self, name: str) -> object:
        self.consulted = True
        return getattr(self.inner, name)


def _alloc_spans(kernel: Kernel) -> Optional[Dict[str, Span]]:
    """Buffer name → its allocation's span (None: a name allocated twice)."""
    out: Dict[str, Span] = {}
    for a in kernel.allocs:
        if a.name in out:
            return None
        out[a.name] = a.span
    return out


def _rebased(p: Packing, spans: Dict[str, Span]) -> Packing:
    """``p`` with each buffer's span that of its allocation in ``spans``."""
    if all(spans.get(b.name, b.span) == b.span for b in p.buffers):
        return p
    return dataclasses.replace(p, buffers=tuple(
        dataclasses.replace(b, span=spans.get(b.name, b.span)) for b in p.buffers))


def shape_key(obj: object, memo: Optional[Dict[int, object]] = None) -> object:
    """A hashable value equal for two model values that differ in their spans
    only (dataclasses by their fields, in order; every Span left out)."""
    memo = {} if memo is None else memo
    return _shape(obj, memo)


_SHAPE_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}


def _shape(o: object, memo: Dict[int, object]) -> object:
    t = type(o)
    if t is Span:
        return None
    if t in (str, int, float, bool, type(None)):
        return o
    if isinstance(o, (tuple, list)) and (t is tuple or t is list):
        return (t, tuple([_shape(x, memo) for x in o]))
    hit = memo.get(id(o))
    if hit is not None:
        return hit
    names = _SHAPE_FIELDS.get(t, ())
    if names == ():
        names = _SHAPE_FIELDS[t] = (tuple(f.name for f in dataclasses.fields(o))
                                    if dataclasses.is_dataclass(o) else None)
    if names is not None:
        d = o.__dict__
        out: object = (t,) + tuple([_shape(d[n], memo) for n in names])
    elif isinstance(o, (frozenset, set)):
        out = (t, frozenset(_shape(x, memo) for x in o))
    elif isinstance(o, dict):
        out = (t, tuple((_shape(k, memo), _shape(v, memo)) for k, v in o.items()))
    else:
        out = (t, repr(o))
    memo[id(o)] = out
    return out


class ConfigPacking(NamedTuple):
    """One configuration planned and packed (:func:`pack_configs`)."""

    env: Env  # the configuration's instance
    view: Kernel  # the kernel as planned
    warp_specialized: bool
    packing: Packing


def pack_configs(module: Module, kernel: Kernel, cfgs: Sequence[Dict[str, object]], target: str,
                 base_bindings: Sequence[Tuple[str, object]] = (),
                 overrides: Optional[Dict[str, object]] = None,
                 kept: Optional["_SweepMemo"] = None
                 ) -> List[Union[ConfigPacking, str]]:
    """Each configuration of ``cfgs`` planned and packed on ``target``, in order,
    or why it could not be (the error's text).  TL202 and the pruning API
    (``prune.py``) both read it.

    Each configuration is one instance of the kernel: the configuration's values
    on top of ``base_bindings`` (the default instance's resolved arguments, e.g.
    the problem size from the call site), with ``overrides`` (explicit bindings)
    winning.  ``kept``: plans kept from earlier sweeps of a kernel of the same
    model (see :func:`_sweep_packings`, the only caller that passes it); a
    configuration served from it has the view and the buffer spans of that
    earlier kernel."""
    from . import values as values_mod
    keys = {k for c in cfgs for k in c}
    out: List[Union[ConfigPacking, str]] = []
    # Configurations often differ only in values the packing never reads
    # (a rasterization flag, the thread count of a kernel without warp
    # specialization): each packing is kept with the names it read and what
    # they resolved to, and a configuration where they all resolve the same
    # way gets that packing without planning again (Env.record_reads).
    local: _SweepMemo = {}
    for cfg in cfgs:
        binds = {k: v for k, v in base_bindings if k not in keys}
        binds.update(overrides or {})
        try:
            env = values_mod.build_env(module, kernel, None, binds, config=cfg)
            hit = _kept_plan(env, kept or {}) or _kept_plan(env, local)
            if hit is None:
                reads = env.record_reads()
                watch = _ProgramWatch(env.program)
                env.program = watch  # type: ignore[assignment]
                view, loops, ws = plan_instance(kernel, env, target)
                hit = (view, ws, pack_kernel(view, env, loops, target, ws))
                read = tuple(reads)
                memo = local if kept is None or watch.consulted else kept
                memo.setdefault(read, {})[tuple(reads[k] for k in read)] = hit
        except Exception as exc:  # noqa: BLE001 - the reason is the answer
            out.append(f"{type(exc).__name__}: {exc}")
            continue
        out.append(ConfigPacking(env, *hit))
    return out


def autotune_diagnostics(module: Module, kernel: Kernel, target: str, source: Optional[str],
                         base_bindings: Sequence[Tuple[str, object]] = (),
                         overrides: Optional[Dict[str, object]] = None) -> List[Diagnostic]:
    """TL202 (warning): one per kernel and target, on the autotune configuration list,
    naming every configuration whose shared memory exceeds the target's budget.
    Never raises."""
    try:
        return _autotune_diagnostics(module, kernel, target, source, base_bindings, overrides)
    except Exception:  # noqa: BLE001
        return []


def _autotune_diagnostics(module: Module, kernel: Kernel, target: str, source: Optional[str],
                          base_bindings: Sequence[Tuple[str, object]],
                          overrides: Optional[Dict[str, object]]) -> List[Diagnostic]:
    res = autotune_overflows(module, kernel, target, base_bindings, overrides)
    if res is None or not res[1]:
        return []
    cfgs, over = res
    budget = targets_mod.budget(target)
    fdef_line = (kernel.factory_span or kernel.name_span).line
    span = autotune_span(source, fdef_line) or kernel.factory_span or kernel.name_span
    shown = over[:8]
    parts = "; ".join(f"{_cfg_label(c)} ({_kib(p.total_bytes)})" for c, p in shown)
    if len(over) > len(shown):
        parts += f"; … {len(over) - len(shown)} more"
    msg = (f"{len(over)} of {len(cfgs)} autotune configs overflow {target} "
           f"(budget {budget} B = {_kib(budget)}): {parts}")
    related = []
    for c, p in over:
        big = max((b for b in p.buffers if b.bytes), key=lambda b: b.bytes or 0, default=None)
        where = big.span if big is not None else span
        detail = ", ".join(f"{b.name} {b.bytes} B" + (f" ×{b.versions}" if b.versions > 1 else "")
                           for b in p.buffers if b.bytes)
        related.append(Related(where, f"{_cfg_label(c)}: {p.total_bytes} B > {budget} B "
                                      f"({detail})"))
    return [Diagnostic(code="TL202", severity="warning", span=span, message=msg,
                       related=tuple(related), kernel=kernel.name,
                       configs=tuple(_cfg_label(c) for c, _ in over))]
