"""The producer/consumer split of a warp-specialized (sm_90) pipelined loop, as
tilelang 0.1.15's ``tl.ProducerConsumerWarpSpecialized`` builds it, derived from
what the model already has (the loop's statements, the kernel, its bindings).

What the pass does (``src/cuda/transform/producer_consumer_ws.cc`` in the wheel,
checked against its IR by tests/test_ws_parity.py):

* Each statement of the loop body (an else-less ``if`` around the whole body is
  entered) is a *TMA producer* (a ``T.copy`` global→shared the TMA classifier
  accepts), a *SIMT producer* (a loop storing global values into shared memory
  and reading no shared or local buffer; it becomes cp.async), or a consumer.
* One barrier group per TMA copy, ``num_stages`` "full" mbarriers and as many
  "empty" ones each: full[g][s] = ``g·S + s``, empty[g][s] = ``G·S + g·S + s``
  (S = num_stages, G = groups).  A consumer waits on full[g] right before the
  first consumer statement that reads the copy's buffer, and arrives on empty[g]
  right after the last one that touches it.  Groups that all wait and release at
  the same place (and no SIMT producer) are merged into one.  SIMT producers pull
  every wait up to their own first reader.
* Slot s = k mod S, parity = (k div S) mod 2: the consumer waits on full with
  that parity, the producer on empty with parity ^ 1 (its first pass through the
  ring does not block).  A guarded body or a loop under an outer loop counts
  with a phase counter instead of k.
* A TMA copy before the loop that the loop reads gets one more mbarrier, waited
  (parity 0) in the first iteration only, before its first reader.
* Producer threads: one warpgroup (128) run ``threadIdx.x < 128``; with a SIMT
  producer the producer branch gets the kernel's own thread count.  The
  consumer keeps the kernel's threads.

Not modelled: consumer statements the pass moves in front of a TMA copy into the
producer (``IsProducerMovableLoopPrefixStmt``), Im2Col producers, tcgen05.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple

from .loops import active_view
from .model import (
    Alloc,
    Kernel,
    KernelResult,
    LoopResult,
    ScheduledStmt,
    Stmt,
    is_im2col,
    walk_bodies,
)

if TYPE_CHECKING:
    from .values import Env

PRODUCER_WARPGROUP = 128


@dataclass(frozen=True)
class WsGroup:
    """One barrier group: the TMA copies it paces, its full and empty mbarriers
    (the first id of each ring of ``num_stages``), and where the consumer waits
    and releases (an index into ``WsView.consumer``)."""

    index: int
    copies: Tuple[ScheduledStmt, ...]
    full: int
    empty: int
    wait_at: int
    release_after: int
    bytes: Optional[int]  # bytes one stage of the group's copies brings (expect_tx)


@dataclass(frozen=True)
class WsEvent:
    """One step of a warpgroup's loop body.  kind: wait (mbarrier ``base + slot``,
    or ``base`` alone when ``once``), arrive, tma (a TMA copy completing on
    ``base + slot``), stmt (a statement run as written), commit (cp.async group
    commit), cp_async_arrive (cp.async completion arrives on ``base + slot``),
    counter_inc (the phase counter counts the iteration)."""

    kind: str
    stmt: Optional[ScheduledStmt] = None
    base: int = 0
    flip: bool = False  # parity ^ 1 (the producer waiting for a free slot)
    once: bool = False  # only in the first iteration, parity 0
    group: int = -1
    bytes: Optional[int] = None


@dataclass(frozen=True)
class WsView:
    num_stages: int
    producer_threads: int
    consumer_threads: Optional[int]
    # (statement, "TMA" | "cp.async" | "moved": a consumer statement run ahead by the producer)
    producers: Tuple[Tuple[ScheduledStmt, str], ...]
    consumer: Tuple[ScheduledStmt, ...]
    groups: Tuple[WsGroup, ...]
    prelude: Tuple[Tuple[str, int, int], ...]  # (buffer, mbarrier id, consumer index)
    producer_events: Tuple[WsEvent, ...]
    consumer_events: Tuple[WsEvent, ...]
    counter: bool  # slot and parity count a phase counter, not the loop variable
    merged: bool  # several TMA copies share one group
    var: str

    @property
    def mbarriers(self) -> int:
        return 2 * len(self.groups) * self.num_stages + len(self.prelude)

    @property
    def threads(self) -> Optional[int]:
        if self.consumer_threads is None:
            return None
        return self.producer_threads + self.consumer_threads

    def role(self, ss: ScheduledStmt) -> str:
        return "producer" if any(p is ss for p, _ in self.producers) else "consumer"


# --------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------


def _allocs(kernel: Kernel) -> Dict[str, Alloc]:
    return {a.name: a for a in kernel.allocs}


def _is_shared(name: str, allocs: Dict[str, Alloc]) -> bool:
    a = allocs.get(name)
    return a is not None and a.scope.startswith("shared") and "barrier" not in a.scope


def _rw(stmt: Stmt) -> Tuple[Set[str], Set[str]]:
    reads: Set[str] = set()
    writes: Set[str] = set()
    for s in walk_bodies([stmt]):
        reads |= {a.buffer for a in s.reads}
        writes |= {a.buffer for a in s.writes}
    return reads, writes


def _is_tma(stmt: Stmt, kernel: Kernel, env: object, allocs: Dict[str, Alloc]) -> bool:
    if stmt.kind != "copy":
        return False
    from .planning import is_tma_load
    from .sync_cuda import is_async_copy
    try:
        return is_async_copy(stmt, kernel) and is_tma_load(stmt, kernel, env, allocs)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001  (a view never raises)
        return False


def _is_simt(stmt: Stmt, allocs: Dict[str, Alloc]) -> bool:
    """A loop (or store) writing shared memory from global memory only."""
    if stmt.kind not in ("parallel", "serial", "loop", "store"):
        return False
    reads, writes = _rw(stmt)
    writes_shared = any(_is_shared(w, allocs) for w in writes)
    reads_global = any(r not in allocs for r in reads)
    reads_onchip = any(r in allocs for r in reads)
    return writes_shared and reads_global and not reads_onchip


def _flat(lr: LoopResult) -> Tuple[List[ScheduledStmt], bool]:
    """The statements the pass classifies, and whether an ``if`` around the whole
    body was entered (the guarded case counts phases with a counter)."""
    stmts = list(lr.statements)
    if len(stmts) == 1 and stmts[0].stmt.kind == "if" and stmts[0].stmt.else_index is None \
            and stmts[0].stmt.children:
        return [ScheduledStmt(c, None, None) for c in stmts[0].stmt.children
                if c.kind != "bind"], True
    return stmts, False


def _one_version_bytes(kr: KernelResult, buffer: str) -> Optional[int]:
    for b in kr.buffers:
        if b.name == buffer and b.bytes is not None:
            return b.bytes // max(1, b.versions or 1)
    return None


def _env(kr: KernelResult) -> "Env":
    from .values import Env
    return Env(exprs=dict(kr.kernel.locals), values=dict(kr.bindings))


def _prelude_copies(kernel: Kernel, loop_line: int) -> List[Stmt]:
    """Top-level statements of the kernel body before the one holding the loop."""
    out: List[Stmt] = []
    for top in kernel.body:
        if any(x.loop is not None and x.loop.span.line == loop_line for x in walk_bodies([top])):
            return out
        out.append(top)
    return []


# --------------------------------------------------------------------------
# The view
# --------------------------------------------------------------------------


def ws_view(kr: KernelResult, lr: LoopResult) -> Optional[WsView]:
    """The split of ``lr`` when it is the loop the sm_90 rewriter specializes,
    else None.  Never raises."""
    try:
        return _view(kr, lr)
    except Exception:  # noqa: BLE001
        return None


def _view(kr: KernelResult, lr: LoopResult) -> Optional[WsView]:
    if not (lr.pipelined and lr.warp_specialized and kr.kernel.dialect == "cuda"):
        return None
    env = _env(kr)
    # The kernel as built for this instance (a Python ``for`` over a list is
    # unrolled, so a loop it held is no longer under an outer loop).
    kernel = active_view(kr.kernel, env)
    allocs = _allocs(kernel)
    ns = lr.num_stages or 1
    flat, guarded = _flat(lr)
    kinds = [_kind(ss, kernel, env, allocs) for ss in flat]
    tmas = [ss for ss, k in zip(flat, kinds, strict=True) if k == "TMA"]
    if not tmas:
        return None
    simts = [ss for ss, k in zip(flat, kinds, strict=True) if k == "cp.async"]
    consumer = [ss for ss, k in zip(flat, kinds, strict=True) if not k]
    c_rw = [_rw(c.stmt) for c in consumer]
    groups, waits, merged = _groups(kr, tmas, simts, c_rw, ns, allocs)
    prelude = _prelude(kernel, lr, env, allocs, c_rw, 2 * len(groups) * ns)
    # Consumer statements ahead of a group's wait that the producer can run
    # instead (synchronous global->shared copies and the binds the producer
    # needs) move to the producer, in front of that group's copy.
    prefix, moved = _producer_prefix(tmas, simts, consumer, waits, allocs, kernel, env)
    prod = _producer_events(kr, tmas, simts, prefix, groups, merged, allocs)
    cons = _consumer_events(consumer, moved, groups, prelude)
    nested = lr.loop.pipelined_ancestors > 0 or _under_outer_loop(kernel, lr.loop.span.line)
    if guarded or nested:
        prod.append(WsEvent("counter_inc"))
        cons.append(WsEvent("counter_inc"))
    own, producer_threads = _threads(kernel, env, flat, simts, allocs)
    return WsView(
        num_stages=ns, producer_threads=producer_threads, consumer_threads=own,
        producers=tuple([(ss, k) for ss, k in zip(flat, kinds, strict=True) if k]
                        + [(ss, "moved") for i in sorted(prefix) for ss in prefix[i]]),
        consumer=tuple(c for ci, c in enumerate(consumer) if ci not in moved),
        groups=tuple(groups), prelude=tuple(prelude),
        producer_events=tuple(prod), consumer_events=tuple(cons),
        counter=guarded or nested, merged=merged, var=lr.loop.var)


def _kind(ss: ScheduledStmt, kernel: Kernel, env: object, allocs: Dict[str, Alloc]
          ) -> str:
    """How the producer issues a statement: "TMA", "cp.async", or "" (consumer)."""
    if _is_tma(ss.stmt, kernel, env, allocs):
        return "TMA"
    if _is_simt(ss.stmt, allocs):
        return "cp.async"
    return ""


def _dst(ss: ScheduledStmt, allocs: Dict[str, Alloc]) -> Set[str]:
    """The shared buffers a producer statement writes."""
    return {w for w in _rw(ss.stmt)[1] if _is_shared(w, allocs)}


def _groups(kr: KernelResult, tmas: List[ScheduledStmt], simts: List[ScheduledStmt],
            c_rw: List[Tuple[Set[str], Set[str]]], ns: int, allocs: Dict[str, Alloc]
            ) -> Tuple[List[WsGroup], List[int], bool]:
    """The barrier groups (and each TMA copy's wait index, and whether the
    copies share one group): a consumer waits before the first statement that
    reads a copy's buffer and releases after the last that touches it."""
    waits: List[int] = []
    releases: List[int] = []
    n = len(c_rw)
    for t in tmas:
        d = _dst(t, allocs)
        first = next((i for i, (r, _) in enumerate(c_rw) if d & r), -1)
        last = max((i for i, (r, w) in enumerate(c_rw) if d & (r | w)), default=-1)
        waits.append(first if first >= 0 else 0)
        releases.append(last + 1 if last >= 0 else n)
    if simts:
        earliest = min((next((i for i, (r, _) in enumerate(c_rw) if _dst(s, allocs) & r), n)
                        for s in simts), default=n)
        waits = [min(w, earliest) for w in waits]
    merged = len(tmas) > 1 and not simts and len(set(waits)) == 1 and len(set(releases)) == 1
    n_groups = 1 if merged else len(tmas)
    members = [tmas] if merged else [[t] for t in tmas]
    groups: List[WsGroup] = []
    for g in range(n_groups):
        sizes = [_one_version_bytes(kr, b) for t in members[g] for b in sorted(_dst(t, allocs))]
        groups.append(WsGroup(
            index=g, copies=tuple(members[g]), full=g * ns, empty=n_groups * ns + g * ns,
            wait_at=waits[0] if merged else waits[g],
            release_after=releases[0] if merged else releases[g],
            bytes=None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)))
    return groups, waits, merged


def _prelude(kernel: Kernel, lr: LoopResult, env: object, allocs: Dict[str, Alloc],
             c_rw: List[Tuple[Set[str], Set[str]]], first_id: int) -> List[Tuple[str, int, int]]:
    """TMA copies before the loop that the loop's consumer reads: (buffers,
    their mbarrier id, the consumer index that waits once)."""
    prelude: List[Tuple[str, int, int]] = []
    for pre in _prelude_copies(kernel, lr.loop.span.line):
        if not _is_tma(pre, kernel, env, allocs):
            continue
        d = {w for w in _rw(pre)[1] if _is_shared(w, allocs)}
        first = next((i for i, (r, _) in enumerate(c_rw) if d & r), -1)
        if first >= 0:
            prelude.append((", ".join(sorted(d)), first_id + len(prelude), first))
    return prelude


def _producer_events(kr: KernelResult, tmas: List[ScheduledStmt], simts: List[ScheduledStmt],
                     prefix: Dict[int, List[ScheduledStmt]], groups: List[WsGroup],
                     merged: bool, allocs: Dict[str, Alloc]) -> List[WsEvent]:
    """Producer body: per TMA copy its group's empty wait (once per merged
    group), the SIMT copies and their commit after the first wait, the copies
    moved ahead of it, the copy; with SIMT producers every group's full barrier
    gets the cp.async completion."""
    prod: List[WsEvent] = []
    simt_done = False
    for i, t in enumerate(tmas):
        g = 0 if merged else i
        if not merged or i == 0:
            prod.append(WsEvent("wait", base=groups[g].empty, flip=True, group=g))
        if simts and not simt_done:
            prod.extend(WsEvent("stmt", stmt=s) for s in simts)
            prod.append(WsEvent("commit"))
            simt_done = True
        prod.extend(WsEvent("stmt", stmt=s) for s in prefix.get(i, ()))
        sizes = [_one_version_bytes(kr, b) for b in sorted(_dst(t, allocs))]
        prod.append(WsEvent("tma", stmt=t, base=groups[g].full, group=g,
                            bytes=None if any(s is None for s in sizes)
                            else sum(s or 0 for s in sizes)))
    if simts:
        prod.extend(WsEvent("cp_async_arrive", base=gr.full, group=gr.index) for gr in groups)
    return prod


def _consumer_events(consumer: List[ScheduledStmt], moved: Set[int], groups: List[WsGroup],
                     prelude: List[Tuple[str, int, int]]) -> List[WsEvent]:
    """Consumer body: the once-waits of copies before the loop, each group's
    full wait before its first reader, the statements (less those moved to the
    producer), each group's release after its last user."""
    cons: List[WsEvent] = []
    released: Set[int] = set()
    for ci, c in enumerate(consumer):
        cons.extend(WsEvent("wait", base=bid, once=True) for _, bid, at in prelude if at == ci)
        cons.extend(WsEvent("wait", base=gr.full, group=gr.index)
                    for gr in groups if gr.wait_at == ci)
        if ci not in moved:
            cons.append(WsEvent("stmt", stmt=c))
        for gr in groups:
            if gr.release_after == ci + 1:
                cons.append(WsEvent("arrive", base=gr.empty, group=gr.index))
                released.add(gr.index)
    if not consumer:
        cons.extend(WsEvent("wait", base=gr.full, group=gr.index) for gr in groups)
    cons.extend(WsEvent("arrive", base=gr.empty, group=gr.index) for gr in groups
                if gr.index not in released and gr.release_after == len(consumer))
    return cons


def _threads(kernel: Kernel, env: object, flat: List[ScheduledStmt],
             simts: List[ScheduledStmt], allocs: Dict[str, Alloc]) -> Tuple[Optional[int], int]:
    """The consumer's threads (the kernel's) and the producer's: producer-side
    SIMT work (and synchronous global->shared copies anywhere in the body)
    keeps the kernel's thread count in the producer branch."""
    from .planning import eval_int
    own = eval_int(env, kernel.threads) if kernel.threads is not None else 128  # type: ignore[arg-type]
    # A ``T.im2col`` moved to the producer is gathered by the producer
    # warpgroup alone (measured: pipeline_im2col on sm_90, 128 + 256 threads).
    full = bool(simts) or any(_sync_copy_like(ss.stmt, kernel, env, allocs)
                              and not is_im2col(ss.stmt) for ss in flat)
    return own, own if full and own is not None else PRODUCER_WARPGROUP


def _names(obj: object, out: Optional[Set[str]] = None) -> Set[str]:
    """Every ``Name`` id in a model value (a statement, an expression)."""
    import dataclasses

    from .model import Name, Span
    if out is None:
        out = set()
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, (tuple, list)):
            stack.extend(o)
        elif isinstance(o, Name):
            out.add(o.id)
        elif dataclasses.is_dataclass(o) and not isinstance(o, (type, Span)):
            stack.extend(getattr(o, f.name) for f in dataclasses.fields(o))
    return out


def _uses(stmt: Stmt) -> Set[str]:
    return _names(stmt.value) if stmt.kind == "bind" else _names(stmt)


def _sync_copy_like(stmt: Stmt, kernel: Kernel, env: object, allocs: Dict[str, Alloc]) -> bool:
    """A ``T.copy`` global->shared that is not a TMA load (it stays a plain copy)."""
    if stmt.kind != "copy":
        return False
    reads, writes = _rw(stmt)
    return any(r not in allocs for r in reads) and any(_is_shared(w, allocs) for w in writes) \
        and not _is_tma(stmt, kernel, env, allocs)


def _producer_prefix(tmas: Sequence[ScheduledStmt], simts: Sequence[ScheduledStmt],
                     consumer: Sequence[ScheduledStmt], waits: Sequence[int],
                     allocs: Dict[str, Alloc], kernel: Kernel, env: object
                     ) -> Tuple[Dict[int, List[ScheduledStmt]], Set[int]]:
    """Per TMA copy (index), the consumer statements before its wait that move to
    the producer, and the consumer indices that leave the consumer."""
    producer_uses: Set[str] = set()
    for ss in list(tmas) + list(simts):
        producer_uses |= _uses(ss.stmt)
    prefix: Dict[int, List[ScheduledStmt]] = {}
    moved: Set[int] = set()
    cursor = 0
    for ti, wait_pos in enumerate(waits):
        if wait_pos <= cursor:
            cursor = max(cursor, wait_pos)
            continue
        probe = set(producer_uses)
        movable = True
        for ci in range(cursor, wait_pos):
            c = consumer[ci].stmt
            if c.kind == "bind":
                if c.target not in probe:
                    movable = False
                    break
            elif not _sync_copy_like(c, kernel, env, allocs):
                movable = False
                break
            probe |= _uses(c)
        if movable:
            live_p = set(producer_uses)
            live_c: Set[str] = set()
            for ci in range(wait_pos, len(consumer)):
                if ci not in moved:
                    live_c |= _uses(consumer[ci].stmt)
            add: Set[int] = set()
            for ci in range(wait_pos - 1, cursor - 1, -1):
                c = consumer[ci].stmt
                if c.kind != "bind":
                    add.add(ci)
                    moved.add(ci)
                    live_p |= _uses(c)
                    continue
                needs_p = c.target in live_p
                needs_c = c.target in live_c
                if needs_p:
                    add.add(ci)
                    live_p |= _uses(c)
                if not needs_p or needs_c:
                    live_c |= _uses(c)
                else:
                    moved.add(ci)
            prefix[ti] = [consumer[ci] for ci in range(cursor, wait_pos) if ci in add]
        cursor = wait_pos
    return prefix, moved


def _under_outer_loop(kernel: Kernel, line: int) -> bool:
    """The loop sits inside another ``for`` of the kernel body."""
    def rec(stmts: Sequence[Stmt], inside: bool) -> bool:
        for s in stmts:
            if s.loop is not None and s.loop.span.line == line:
                return inside
            body = s.loop.body if s.loop is not None and s.loop.body else s.children
            if rec(body, inside or s.loop is not None):
                return True
        return False
    return rec(kernel.body, False)


# --------------------------------------------------------------------------
# Concrete iterations (what the parity test compares with the compiler's IR)
# --------------------------------------------------------------------------


def iteration(view: WsView, role: str, k: int) -> List[Tuple[object, ...]]:
    """The events of one warpgroup in iteration ``k`` (counted from 0) with every
    mbarrier id and parity evaluated: ("wait", id, parity), ("arrive", id),
    ("tma", buffer, id, bytes), ("stmt", line), ("commit",), ("cp_async_arrive", id),
    ("counter_inc",).  A phase counter counts like k (it starts at 0)."""
    slot, parity = k % view.num_stages, (k // view.num_stages) % 2
    out: List[Tuple[object, ...]] = []
    events = view.producer_events if role == "producer" else view.consumer_events
    for ev in events:
        if ev.kind == "wait":
            if ev.once:
                if k == 0:
                    out.append(("wait", ev.base, 0))
            else:
                out.append(("wait", ev.base + slot, parity ^ 1 if ev.flip else parity))
        elif ev.kind == "arrive":
            out.append(("arrive", ev.base + slot))
        elif ev.kind == "tma" and ev.stmt is not None:
            bufs = sorted(w.buffer for w in ev.stmt.stmt.writes)
            out.append(("tma", ", ".join(bufs), ev.base + slot, ev.bytes))
        elif ev.kind == "stmt" and ev.stmt is not None:
            out.append(("stmt", ev.stmt.stmt.span.line))
        elif ev.kind == "commit":
            out.append(("commit",))
        elif ev.kind == "cp_async_arrive":
            out.append(("cp_async_arrive", ev.base + slot))
        elif ev.kind == "counter_inc":
            out.append(("counter_inc",))
    return out


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


def ring(base: int, ns: int, var: str = "k") -> str:
    """``mbarrier[4 + k % 2]`` (``mbarrier[k % 2]`` for base 0)."""
    slot = f"{var} % {ns}" if ns > 1 else "0"
    if ns == 1:
        return f"mbarrier[{base}]"
    return f"mbarrier[{slot}]" if base == 0 else f"mbarrier[{base} + {slot}]"


def parity_text(view: WsView, flip: bool) -> str:
    v = "phase" if view.counter else view.var
    p = f"({v} / {view.num_stages}) % 2" if view.num_stages > 1 else f"{v} % 2"
    return f"({p}) ^ 1" if flip else p


def event_code(view: WsView, ev: WsEvent) -> str:
    """One line of the split's code sketch for ``ev``."""
    v = "phase" if view.counter else view.var
    ns = view.num_stages
    if ev.kind == "wait" and ev.once:
        return f"if ({v} == 0) mbarrier[{ev.base}].wait(0);"
    if ev.kind == "wait":
        return f"{ring(ev.base, ns, v)}.wait({parity_text(view, ev.flip)});"
    if ev.kind == "arrive":
        return f"{ring(ev.base, ns, v)}.arrive();"
    if ev.kind == "tma" and ev.stmt is not None:
        buf = ", ".join(sorted(w.buffer for w in ev.stmt.stmt.writes))
        return f"tma_load({buf}[{v} % {ns}], {ring(ev.base, ns, v)});"
    if ev.kind == "commit":
        return "cp_async_commit();"
    if ev.kind == "cp_async_arrive":
        return f"cp_async_barrier_noinc({ring(ev.base, ns, v)});"
    if ev.kind == "counter_inc":
        return "phase += 1;"
    if ev.stmt is not None:
        return f"/* line {ev.stmt.stmt.span.line}: {ev.stmt.stmt.label or ev.stmt.stmt.kind} */"
    return ""


def _comment(view: WsView, ev: WsEvent) -> str:
    if ev.kind == "wait" and ev.once:
        return "copy before the loop landed"
    group = view.groups[ev.group] if 0 <= ev.group < len(view.groups) else None
    bufs = ", ".join(sorted({w.buffer for c in group.copies for w in c.stmt.writes})) \
        if group is not None else ""
    if ev.kind == "wait":
        return f"slot of {bufs} free" if ev.flip else f"{bufs} landed"
    if ev.kind == "arrive":
        return f"release the slot of {bufs}"
    if ev.kind == "tma" and ev.stmt is not None:
        size = f"{ev.bytes} B, " if ev.bytes is not None else ""
        return f"{size}line {ev.stmt.stmt.span.line}"
    return ""


def code(view: WsView) -> str:
    """A CUDA-like sketch of the split loop: both branches, every mbarrier call."""
    v = "phase" if view.counter else view.var
    p = view.producer_threads
    cons = view.consumer_threads
    lines = [f"if (threadIdx.x < {p}) {{  // producer: {p} threads"]
    lines.append(f"  for (int {view.var} = 0; {view.var} < n; ++{view.var}) {{"
                 + ("  // phase: a counter of the iterations that run" if view.counter else ""))
    for ev in view.producer_events:
        c = _comment(view, ev)
        lines.append("    " + event_code(view, ev) + (f"  // {c}" if c else ""))
    lines.append("  }")
    lines.append(f"}} else {{  // consumer: threads {p}–{p + cons - 1}" if cons is not None
                 else "} else {  // consumer")
    lines.append(f"  for (int {view.var} = 0; {view.var} < n; ++{view.var}) {{")
    for ev in view.consumer_events:
        c = _comment(view, ev)
        lines.append("    " + event_code(view, ev) + (f"  // {c}" if c else ""))
    lines.append("  }")
    lines.append("}")
    del v
    return "\n".join(lines) + "\n"


def threads_text(view: WsView) -> str:
    p, c = view.producer_threads, view.consumer_threads
    if c is None:
        return f"producer threadIdx.x 0–{p - 1} ({p}), consumer: the kernel's threads"
    return (f"{p + c} threads: producer threadIdx.x 0–{p - 1} ({p}), "
            f"consumer {p}–{p + c - 1} ({c})")


def _ids(base: int, ns: int) -> str:
    return f"{base}" if ns == 1 else f"{base}–{base + ns - 1}"


def barriers_text(view: WsView) -> str:
    ns = view.num_stages
    parts = []
    for g in view.groups:
        bufs = ", ".join(sorted({w.buffer for c in g.copies for w in c.stmt.writes}))
        parts.append(f"{bufs}: full {_ids(g.full, ns)}, empty {_ids(g.empty, ns)}")
    for buf, bid, _ in view.prelude:
        parts.append(f"{buf} (before the loop): {bid}")
    n = len(view.groups)
    head = (f"{view.mbarriers} mbarriers = {n} group{'s' if n != 1 else ''} × {ns} "
            f"stage{'s' if ns != 1 else ''} × (full + empty)"
            + (f" + {len(view.prelude)}" if view.prelude else ""))
    return head + "; " + "; ".join(parts)


def phase_rows(view: WsView) -> List[List[str]]:
    """One row per iteration of a full cycle (2 × num_stages): the slot, the
    parity the consumer waits for on full, the producer on empty."""
    ns = view.num_stages
    rows = []
    for j in range(2 * ns):
        parity = (j // ns) % 2
        rows.append([f"{j}", f"{j % ns}", f"{parity}", f"{parity ^ 1}"])
    return rows


PHASE_HEADER = ("k mod " + "2S", "slot", "consumer waits full", "producer waits empty")


def phase_header(view: WsView) -> Tuple[str, ...]:
    return (f"{'phase' if view.counter else view.var} mod {2 * view.num_stages}", "slot",
            "consumer waits full (parity)", "producer waits empty (parity)")


def statement_rows(view: WsView) -> List[Tuple[ScheduledStmt, str, str, str, str]]:
    """(statement, warpgroup, how it is issued, the mbarriers it waits on first,
    the mbarriers it signals) in each warpgroup's order: the producer waits on
    empty slots and its TMA copies complete on full ones; the consumer waits on
    full slots and arrives on empty ones."""
    out: List[Tuple[ScheduledStmt, str, str, str, str]] = []
    v = "phase" if view.counter else view.var
    ns = view.num_stages
    pending: List[str] = []
    for ev in view.producer_events:
        if ev.kind == "wait":
            pending.append(f"empty {ring(ev.base, ns, v)}")
        elif ev.kind in ("tma", "stmt") and ev.stmt is not None:
            how = {"tma": "TMA"}.get(ev.kind) or dict(
                (id(ss), h) for ss, h in view.producers).get(id(ev.stmt), "")
            signals = f"full {ring(ev.base, ns, v)} (tx)" if ev.kind == "tma" else "—"
            out.append((ev.stmt, "producer", how, ", ".join(pending) or "—", signals))
            pending = []
        elif ev.kind == "cp_async_arrive":
            for i, (st, role, how, before, after) in enumerate(out):
                if how == "cp.async":
                    done = f"full {ring(ev.base, ns, v)} (cp.async)"
                    out[i] = (st, role, how, before, done if after == "—" else f"{after}, {done}")
    pending = []
    last: Optional[int] = None
    for ev in view.consumer_events:
        if ev.kind == "wait":
            pending.append(f"mbarrier[{ev.base}] at {v} = 0" if ev.once
                           else f"full {ring(ev.base, ns, v)}")
        elif ev.kind == "stmt" and ev.stmt is not None:
            out.append((ev.stmt, "consumer", "", ", ".join(pending) or "—", "—"))
            last = len(out) - 1
            pending = []
        elif ev.kind == "arrive" and last is not None:
            st, role, how, before, after = out[last]
            arrive = f"empty {ring(ev.base, ns, v)}"
            out[last] = (st, role, how, before, arrive if after == "—" else f"{after}, {arrive}")
    return out


def events_around(view: WsView, ss: ScheduledStmt) -> Tuple[str, List[str], List[str]]:
    """(warpgroup, the mbarrier calls right before ``ss``, right after it) in its
    warpgroup's loop, as code lines."""
    for role, events in (("producer", view.producer_events), ("consumer", view.consumer_events)):
        for i, ev in enumerate(events):
            if ev.stmt is ss and ev.kind in ("tma", "stmt"):
                before: List[str] = []
                j = i - 1
                while j >= 0 and events[j].kind in ("wait", "arrive", "commit", "cp_async_arrive"):
                    before.insert(0, event_code(view, events[j]))
                    j -= 1
                after: List[str] = []
                j = i + 1
                while j < len(events) and events[j].kind in ("wait", "arrive", "commit",
                                                             "cp_async_arrive"):
                    after.append(event_code(view, events[j]))
                    j += 1
                return role, before, after
    return view.role(ss), [], []
