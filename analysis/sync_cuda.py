"""CUDA synchronisation model: cp.async commit/wait_group, ``__syncthreads`` and mbarriers.

cp.async path (sm_80/86/89, and sm_90 without warp specialization), as
InjectSoftwarePipeline + ThreadSync emit it (checked on the parity fixtures):

* Every copy global→shared inside a pipelined loop is a cp.async.  Within one emitted
  step (prologue step, loop body, epilogue step) consecutive async copies of the same
  stage form one commit group; ``cp_async_commit()`` follows the group's last copy.
* Before the first statement of a step that reads a buffer filled by a group instance
  not yet known complete, ``cp_async_wait<N>()`` is emitted, N = the number of groups
  committed after the needed one; after it everything but the last N groups is
  complete.  Each wait is followed by ``__syncthreads()``.  In the steady-state loop
  the first reader of each group waits for it, and a ``cp_async_wait<0>()`` there is
  relaxed to ``retain × (groups committed since the last wait)`` (``retained_groups``).
* ThreadSync: walking the emitted statements, a ``__syncthreads()`` goes before a
  statement whose shared access conflicts (RAW/WAR/WAW, async-async writes excepted)
  with an access since the last sync.  Versioned accesses ``(k + a) % V`` and
  ``(k + b) % V`` conflict only if a ≡ b (mod V); different buffers conflict when their
  arena bytes overlap (epilogue reuse).  A loop gets a sync at the top of its body when
  the accesses after its last sync conflict with those before its first sync in the
  next iteration.  A pipelined region (prologue+loop+epilogue) gets a sync before it
  when anything pending conflicts with any access inside it.  An indexed access
  (a store or load) and a pointer access (cp.async, the gemm's operands) of dynamic
  shared memory always conflict.

Warp-specialized path (sm_90): a 128-thread producer warpgroup is added; mbarriers are
``2 × num_stages`` per producer group (one group when all TMA copies are first read and
last used by the same consumer statements, else one per copy) plus one per TMA copy
before the loop that a consumer reads; each group contributes a producer and a consumer
wait site, each pre-loop TMA copy one.  A ``T.Parallel`` copy from global memory (a SIMT
producer) keeps the groups apart and is one cp.async commit per iteration.
``__syncthreads()``: one after barrier init, one more when statements before the loop
write shared memory or the loop is nested.

docs/compiler-notes.md lists the measured behaviours behind these rules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import (
    AbstractSet,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
)

from . import targets as targets_mod
from .loops import LoopMatcher, loop_result
from .model import (
    BufferInfo,
    Const,
    Kernel,
    KernelSync,
    Loop,
    LoopResult,
    LoopSync,
    Name,
    Stmt,
    Subscript,
    is_im2col,
    walk_bodies,
)
from .schedule import BODY, EPILOGUE, PROLOGUE, Row, Schedule, modulo_schedule
from .values import Env, dtype_bits, normalise_dtype


class PackLayout(Protocol):
    """What the tracer reads of ``packing.Packing`` (whose module imports this one):
    each shared buffer's arena offset and size."""

    @property
    def buffers(self) -> Sequence[BufferInfo]: ...


VersionKey = Optional[Tuple[str, int]]  # see Acc.vkey

PRODUCER_THREADS = 128


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def _shared_names(kernel: Kernel) -> Set[str]:
    return {a.name for a in kernel.allocs
            if a.scope.startswith("shared") and "barrier" not in a.scope}


def _alloc_names(kernel: Kernel) -> Set[str]:
    return {a.name for a in kernel.allocs}


def _rw(stmt: Stmt, shared: Set[str]) -> Tuple[Set[str], Set[str]]:
    reads: Set[str] = set()
    writes: Set[str] = set()
    for s in walk_bodies([stmt]):
        reads |= {a.buffer for a in s.reads if a.buffer in shared}
        writes |= {a.buffer for a in s.writes if a.buffer in shared}
    return reads, writes


def _writes_shared_after_pipeline(body: Sequence[Stmt], pipeline: Callable[[Stmt], bool],
                                  shared: Set[str]) -> bool:
    """Whether the body of a loop around a warp-specialized pipeline writes shared
    memory after the pipeline (an epilogue through a shared tile, which runs in the
    consumer branch).  ThreadSync then puts the loop-carried barrier there, as a
    barrier over the consumer threads, instead of a ``__syncthreads()`` at the top of
    the outer loop.  Measured with tilelang 0.1.15 on sm_90: an outer serial loop
    around a pipeline has 2 ``__syncthreads`` (nested_outer_plain), 1 and 2 partial
    barriers when its body then copies the accumulator through a shared tile
    (elab_persistent_primitive, whose outer loop is a T.Persistent)."""
    items = list(walk_bodies(body))
    for i, x in enumerate(items):
        if pipeline(x):
            inner = {id(y) for y in walk_bodies([x])}
            return any(a.buffer in shared for y in items[i + 1:] if id(y) not in inner
                       for a in y.writes)
    return False


def is_async_copy(stmt: Stmt, kernel: Kernel) -> bool:
    """A copy from global memory (a kernel parameter) into shared memory, possibly under
    an ``if`` (a producer for warp specialization; not a cp.async otherwise:
    :func:`is_cp_async_copy`)."""
    if stmt.kind == "if" and stmt.children:
        return all(is_async_copy(c, kernel) for c in stmt.children)
    if stmt.kind != "copy":
        return False
    shared = _shared_names(kernel)
    allocs = _alloc_names(kernel)
    return any(w.buffer in shared for w in stmt.writes) and \
        any(r.buffer not in allocs for r in stmt.reads)


def is_cp_async_copy(stmt: Stmt, kernel: Kernel) -> bool:
    """A copy the software pipeline issues as cp.async (outside warp
    specialization): a global-to-shared copy at the top of the loop body.  One
    under an ``if`` (on a block, thread or loop index, or a buffer element) is a
    synchronous copy (measured on sm_80: ``if bx < 3:``, ``if k < 20:``,
    ``if Flag[0] > 0:`` around the B copy leave only A's cp.async; around both
    copies none, and no commit).  ``T.im2col`` gathers with a bounds test per
    element: plain stores (measured: example_convolution.py on sm_80, a
    ``__syncthreads`` between it and the cp.async of the kernel tile)."""
    if stmt.kind == "if" or is_im2col(stmt):
        return False
    return is_async_copy(stmt, kernel) or is_parallel_copy(stmt, kernel)


def is_parallel_copy(stmt: Stmt, kernel: Kernel) -> bool:
    """A ``T.Parallel`` whose every store copies a global element into shared memory
    (``K_shared[j, d] = K[idx, d]``, a gather by index included): PipelinePlanning
    calls it a pure copy stage and the pipeline issues it as cp.async (measured on
    sm_80 and sm_90: plan_gather_mask, 2 commits, wait_group 1 and 0).  Only an
    uncast element is moved by cp.async."""
    if stmt.kind != "parallel" or stmt.loop is None:
        return False
    from .planning import store_is_pure_copy
    allocs = {a.name: a for a in kernel.allocs}
    shared = _shared_names(kernel)
    stores = [x for x in walk_bodies([stmt]) if x.kind == "store"]
    others = [x for x in walk_bodies([stmt])
              if x is not stmt and x.kind not in ("store", "bind")]
    # A cast (``T.cast(A[i], dt)``) is a pure copy stage too, but cp.async moves
    # bytes and cannot convert: it is a plain store (long_store_rhs: 5 syncs).
    return bool(stores) and not others and all(
        x.writes and x.writes[0].buffer in shared and isinstance(x.value, Subscript)
        and store_is_pure_copy(x, allocs) for x in stores)


def _asks_cp_async(stmt: Stmt) -> bool:
    """A copy written as ``T.async_copy`` or with ``prefer_instruction="cp_async"``."""
    for x in walk_bodies([stmt]):
        if x.op == "T.async_copy":
            return True
        pref = x.kwarg("prefer_instruction")
        if isinstance(pref, Const) and pref.value == "cp_async":
            return True
    return False


def _is_tma(stmt: Stmt, kernel: Kernel, env: Optional[Env]) -> bool:
    if not is_async_copy(stmt, kernel):
        return False
    try:
        from .planning import is_tma_load
        allocs = {a.name: a for a in kernel.allocs}
        return any(is_tma_load(x, kernel, env, allocs) for x in walk_bodies([stmt]))
    except Exception:  # noqa: BLE001
        return True


def _is_pipeline(loop: Loop, loops: Sequence[LoopResult]) -> bool:
    """A ``T.Pipelined`` loop that writes a pipeline annotation: ``num_stages`` of
    at least 1 or an order/stage.  ``T.Pipelined(n)`` alone is a plain loop for
    the compiler."""
    if loop.kind != "pipelined":
        return False
    lr = loop_result(loop, loops)
    return lr is None or not (lr.num_stages == 0 and loop.order is None and loop.stage is None)


def _is_ws_loop(lr: Optional[LoopResult]) -> bool:
    return lr is not None and lr.pipelined and lr.warp_specialized


def _walk_writes(stmt: Stmt) -> List[str]:
    return [w.buffer for x in walk_bodies([stmt]) for w in x.writes]


def threads(kernel: Kernel, env: Env, warp_specialized: bool) -> Optional[int]:
    """Threads per block after lowering (a producer warpgroup is added on the WS path)."""
    t = env.eval_int(kernel.threads) if kernel.threads is not None else 128
    if t is None:
        return None
    return t + PRODUCER_THREADS if warp_specialized else t


# --------------------------------------------------------------------------
# Warp-specialized mbarriers
# --------------------------------------------------------------------------


def ws_barriers(kernel: Kernel, env: Optional[Env], loops: Sequence[LoopResult], target: str,
                warp_specialized: bool) -> Tuple[int, int]:
    """(mbarrier count, mbarrier wait sites) on the warp-specialized path, else (0, 0)."""
    ws = _ws_barriers(kernel, env, loops, warp_specialized)
    return ws.barriers, ws.waits + ws.prelude


def is_simt_producer(stmt: Stmt, kernel: Kernel) -> bool:
    """A statement that is not a tile operator, stores into shared memory and reads
    global memory and no buffer of the kernel (a ``T.Parallel`` copy from a
    parameter): the warp-specialization rewriter's SIMT producer
    (``SimtProducerDetector``), lowered to cp.async in the producer branch."""
    if stmt.kind not in ("parallel", "store"):
        return False
    allocs = _alloc_names(kernel)
    reads = {a.buffer for x in walk_bodies([stmt]) for a in x.reads}
    return bool(set(_walk_writes(stmt)) & _shared_names(kernel)) and \
        bool(reads - allocs) and not reads & allocs


class _WsSync(NamedTuple):
    barriers: int  # mbarriers
    waits: int  # mbarrier wait sites in one iteration of producer and consumer loops
    prelude: int  # wait sites before them, for the TMA copies ahead of the loop
    commits: int  # cp.async commits in one producer iteration (SIMT producers)


def _ws_barriers(kernel: Kernel, env: Optional[Env], loops: Sequence[LoopResult],
                 warp_specialized: bool) -> _WsSync:
    """The mbarriers and producer commits of the warp-specialized loop."""
    if not warp_specialized:
        return _WsSync(0, 0, 0, 0)
    count = waits = prelude = commits = 0
    shared = _shared_names(kernel)
    body = list(kernel.body)
    for i, top in enumerate(body):
        found: Optional[Tuple[Loop, LoopResult]] = None
        for x in walk_bodies([top]):
            if x.loop is None or x.loop.kind != "pipelined":
                continue
            xlr = loop_result(x.loop, loops)
            if xlr is not None and _is_ws_loop(xlr):
                found = (x.loop, xlr)
                break
        if found is None:
            continue
        ws_loop, lr = found
        ns = lr.num_stages or 1
        stmts = [st.stmt for st in sorted(lr.statements, key=lambda x: x.order or 0)] \
            or list(ws_loop.body)
        asyncs = [x for x in stmts if is_async_copy(x, kernel)]
        producers = [x for x in asyncs if _is_tma(x, kernel, env)]
        # A copy that lowers to neither TMA nor cp.async (the default for a copy
        # TMA cannot do) is a consumer statement for the rewriter and keeps the TMA
        # copies' barriers merged (measured: bind_reads_written_buffer); only a
        # copy that asks for cp.async is a producer of its own.
        # A SIMT producer ties every TMA group to its own completion: no merging;
        # its stores become cp.async, committed once per iteration (measured:
        # long_store_rhs).
        simt = [x for x in stmts if is_simt_producer(x, kernel)]
        other_async = bool(simt) or any(_asks_cp_async(x) for x in asyncs if x not in producers)
        commits = 1 if simt else 0
        consumers = [x for x in stmts if not is_async_copy(x, kernel) and x not in simt]
        positions = []
        for p in producers:
            dst = {w for w in _walk_writes(p) if w in shared}
            first = last = -1
            for ci, c in enumerate(consumers):
                r, w = _rw(c, shared)
                if dst & r and first < 0:
                    first = ci
                if dst & (r | w):
                    last = ci
            positions.append((first, last))
        groups = len(producers)
        if groups > 1 and len(set(positions)) == 1 and not other_async:
            groups = 1
        prelude = 0
        for pre in body[:i]:
            if _is_tma(pre, kernel, env):
                dst = set(_walk_writes(pre))
                if any(dst & _rw(c, shared)[0] for c in consumers):
                    prelude += 1
        count += 2 * groups * ns + prelude
        waits += 2 * groups
        break  # the pass specializes the first eligible loop only
    return _WsSync(count, waits, prelude, commits)


# --------------------------------------------------------------------------
# The event trace (cp.async path)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Acc:
    buffer: str
    write: bool
    is_async: bool
    # version key: None = whole buffer; ("c", v) a concrete version; ("k", o) (k+o) % V
    vkey: Optional[Tuple[str, int]] = None
    # through a pointer (cp.async's destination, ldmatrix and the gemm's operands)
    # rather than an indexed load or store
    pointer: bool = False


@dataclass(frozen=True)
class Event:
    kind: str  # stmt | sync | commit | wait
    section: str = ""  # pre | prologue | body | epilogue | post
    loop_index: int = -1  # which pipelined loop (index into loops), -1 outside
    row: Optional[Row] = None
    stmt: Optional[Stmt] = None
    n: int = 0  # wait_group count
    note: str = ""


class _Layout:
    """Byte ranges of buffers in the arena, for cross-buffer conflicts."""

    def __init__(self, kernel: Kernel, env: Optional[Env], pack: Optional[PackLayout],
                 versions: Dict[str, int], target: str = "") -> None:
        self.versions = versions
        self.dyn = {a.name for a in kernel.allocs if a.scope == "shared.dyn"}
        self.ranges: Dict[str, Tuple[int, int]] = {}
        self.fragments = {a.name for a in kernel.allocs if a.scope == "local.fragment"}
        self.swizzled = swizzled_operands(kernel, env)
        self.stsm = stmatrix_copies(kernel, env, target)
        if pack is not None:
            for b in pack.buffers:
                if b.offset is not None and b.bytes is not None:
                    self.ranges[b.name] = (b.offset, b.offset + b.bytes)

    def _range(self, a: Acc) -> Optional[Tuple[int, int]]:
        r = self.ranges.get(a.buffer)
        if r is None:
            return None
        v = self.versions.get(a.buffer, 1)
        if a.vkey is not None and a.vkey[0] == "c" and v > 1:
            size = (r[1] - r[0]) // v
            return (r[0] + (a.vkey[1] % v) * size, r[0] + (a.vkey[1] % v + 1) * size)
        return r

    def overlap(self, a: Acc, b: Acc, shift: int = 0) -> bool:
        if a.buffer == b.buffer:
            v = self.versions.get(a.buffer, 1)
            if v <= 1 or a.vkey is None or b.vkey is None:
                return True
            if a.vkey[0] == b.vkey[0] == "k":
                return (a.vkey[1] - b.vkey[1] - shift) % v == 0
            if a.vkey[0] == b.vkey[0] == "c":
                return (a.vkey[1] - b.vkey[1]) % v == 0
            return True
        ra, rb = self._range(a), self._range(b)
        if ra is None or rb is None:
            return False
        return ra[0] < rb[1] and rb[0] < ra[1]


def swizzled_operands(kernel: Kernel, env: Optional[Env]) -> Set[str]:
    """Shared buffers that layout inference gives a swizzled layout: the shared
    operands of a gemm whose contiguous dimension holds a multiple of two
    128-bit vectors (``MakeGemmABLayout`` in layout/gemm_layouts.cc: quarter,
    half or full bank swizzle; an 8-bit operand with K outer and a 64-bit one
    are padded instead)."""
    out: Set[str] = set()
    if env is None:
        return out
    allocs = {a.name: a for a in kernel.allocs if a.scope.startswith("shared")}
    for s in walk_bodies(kernel.body):
        if s.kind != "gemm":
            continue
        for i, acc in enumerate(s.reads[:2]):
            alloc = allocs.get(acc.buffer)
            if alloc is None or not alloc.shape:
                continue
            bits = dtype_bits(normalise_dtype(env.evaluate(alloc.dtype)))
            last = env.evaluate(alloc.shape[-1])
            if bits not in (8, 16, 32) or not isinstance(last, int) or isinstance(last, bool):
                continue
            if last % (2 * (128 // bits)):
                continue
            if bits == 8:
                flag = s.kwarg("transpose_A" if i == 0 else "transpose_B")
                value = env.evaluate(flag) if flag is not None else False
                if (not value) if i == 1 else bool(value):
                    continue  # K outer: padded
            out.add(alloc.name)
    return out


def _arch(target: str) -> int:
    t = targets_mod.get(target)
    if t is None or t.kind != "cuda":
        return 0
    digits = "".join(ch for ch in t.arch if ch.isdigit())
    return int(digits) if digits else 0


def stmatrix_copies(kernel: Kernel, env: Optional[Env], target: str) -> Set[Tuple[int, int]]:
    """(line, column) of the ``T.copy`` statements that store a whole gemm
    accumulator into a whole 16-bit shared buffer on a target with
    ``stmatrix`` (sm_90 and later: ``CheckSTSMCopy``, then ``LowerLDSM``'s
    full-range, element-size and 8-wide vectorization checks in
    cuda/op/copy.cc).  Their stores go through a pointer (measured on sm_90:
    ``tl::ptx_stmatrix_m8n8_x4(&b[...], ...)``), so ThreadSync orders them
    against every indexed access before them."""
    out: Set[Tuple[int, int]] = set()
    if env is None or _arch(target) < 90:
        return out
    allocs = {a.name: a for a in kernel.allocs}
    body = list(walk_bodies(kernel.body))
    accumulators = {w.buffer for s in body if s.kind == "gemm" for w in s.writes}
    for s in body:
        if s.kind != "copy" or not s.reads or not s.writes:
            continue
        src, dst = s.reads[0], s.writes[0]
        fa, sa = allocs.get(src.buffer), allocs.get(dst.buffer)
        if fa is None or sa is None or fa.scope != "local.fragment" or not sa.scope.startswith("shared"):
            continue
        if src.indices is not None or dst.indices is not None or src.buffer not in accumulators:
            continue
        if dtype_bits(normalise_dtype(env.evaluate(sa.dtype))) != 16 or len(sa.shape) < 2:
            continue
        last = env.evaluate(sa.shape[-1])
        if not isinstance(last, int) or isinstance(last, bool) or last % 8:
            continue
        out.add((s.span.line, s.span.col))
    return out


def _swizzled_waw(prev: Sequence[Acc], cur: Sequence[Acc], stmt: Optional[Stmt],
                  layout: _Layout) -> bool:
    """ThreadSync cannot prove an indexed store of a fragment into a swizzled
    buffer apart from an earlier indexed store into another buffer, whatever
    their bytes (measured: ``T.copy(h, b)`` into a gemm operand ``b`` after a
    ``T.Parallel`` store into ``a`` gets a barrier between them; the reverse
    order, or a store copied from global memory into the swizzled buffer, gets
    none)."""
    if stmt is None or not layout.swizzled or not layout.fragments:
        return False
    writes = [c for c in cur if c.write and not c.pointer and c.buffer in layout.swizzled
              and c.buffer in layout.dyn]
    if not writes:
        return False
    if not any(a.buffer in layout.fragments for x in _leaves(stmt) for a in x.reads):
        return False
    return any(p.write and not p.pointer and p.buffer in layout.dyn and p.buffer != c.buffer
               for p in prev for c in writes)


def _conflict(prev: Sequence[Acc], cur: Sequence[Acc], layout: _Layout, shift: int = 0) -> bool:
    """ThreadSync's test.  Every access to dynamic shared memory is one buffer for
    it; an indexed access against a pointer access cannot be compared, so it is
    a conflict whatever the bytes (measured: a T.Parallel store into A_shared,
    then the cp.async into B_shared, gets a barrier between them)."""
    for p in prev:
        for c in cur:
            if not p.write and not c.write:
                continue
            if p.write and c.write and p.is_async and c.is_async:
                continue
            if p.pointer != c.pointer and p.buffer in layout.dyn and c.buffer in layout.dyn:
                return True
            if layout.overlap(p, c, shift):
                return True
    return False


def _leaves(stmt: Stmt) -> List[Stmt]:
    """The statements of ``stmt`` that hold no others (``stmt`` itself when it
    holds none)."""
    out = [x for x in walk_bodies([stmt]) if not x.children and not (x.loop and x.loop.body)]
    return out or [stmt]


def _accs(stmt: Stmt, shared: Set[str], is_async: bool, vkey: VersionKey,
          kernel: Optional[Kernel] = None,
          stsm: AbstractSet[Tuple[int, int]] = frozenset()) -> List[Acc]:
    """The shared-memory accesses of ``stmt``.  A gemm reads through pointers;
    given ``kernel`` (the statement is emitted by a software pipeline), so does a
    global-to-shared copy (a cp.async); every other access is indexed.  What the
    statement reads beyond its leaves (an ``if`` condition) is indexed."""
    out: List[Acc] = []
    seen_r: Set[str] = set()
    seen_w: Set[str] = set()
    for x in _leaves(stmt):
        r = {a.buffer for a in x.reads if a.buffer in shared}
        w = {a.buffer for a in x.writes if a.buffer in shared}
        ptr = x.kind == "gemm" or (kernel is not None and is_async and (
            is_async_copy(x, kernel) or x.kind == "store"))
        out += [Acc(b, False, False, vkey, ptr) for b in sorted(r)]
        wptr = ptr or (x.span.line, x.span.col) in stsm
        out += [Acc(b, True, is_async, vkey, wptr) for b in sorted(w)]
        seen_r |= r
        seen_w |= w
    r, w = _rw(stmt, shared)
    out += [Acc(b, False, False, vkey) for b in sorted(r - seen_r)]
    out += [Acc(b, True, is_async, vkey) for b in sorted(w - seen_w)]
    return out


def _vkey(row: Row, buffer: str, versions: Dict[str, int], trip: Optional[int] = None
          ) -> VersionKey:
    if versions.get(buffer, 1) <= 1:
        return None
    if row.section == EPILOGUE and trip is not None:
        return ("c", trip + row.offset)
    if row.section == BODY:
        return ("k", row.offset)
    if row.section == PROLOGUE:
        return ("c", row.offset)
    return None  # epilogue: the trip count is not modelled, whole buffer


class _Tracer:
    def __init__(self, kernel: Kernel, layout: _Layout) -> None:
        self.kernel = kernel
        self.shared = _shared_names(kernel)
        self.layout = layout
        self.events: List[Event] = []
        self.pending: List[Acc] = []
        self.trips: Dict[int, int] = {}  # id(stmt) -> trip count of its pipelined loop
        self.last_was_sync = False
        # (line, column) of a reduction -> the workspace it lowers to, of a scan
        # over a fragment -> its staging buffer (workspace.py)
        self.workspaces: Dict[Tuple[int, int], str] = {}
        self.scans: Dict[Tuple[int, int], str] = {}

    # -- primitives --------------------------------------------------------
    def sync(self, section: str, li: int, note: str = "") -> None:
        self.events.append(Event("sync", section, li, note=note))
        self.pending = []
        self.last_was_sync = True

    def access(self, accs: List[Acc], ev: Event) -> None:
        key = (ev.stmt.span.line, ev.stmt.span.col) if ev.stmt is not None else None
        ws = self.workspaces.get(key) if key is not None and self.workspaces else None
        scan = self.scans.get(key) if key is not None and self.scans else None
        if scan is not None:
            # The macro's three steps: an indexed copy into the staging buffer,
            # the scan through pointers, an indexed copy out (measured: 2
            # __syncthreads per scan of a fragment, as for a shared one).  The
            # previous scan's copy out of the same bytes, same shape, is the same
            # index per thread: no conflict for ThreadSync (measured: 4 for two).
            same = self.layout.ranges.get(scan)
            scans = set(self.scans.values())
            self.pending = [p for p in self.pending if not (
                p.buffer in scans and not p.write and not p.pointer and same is not None
                and self.layout.ranges.get(p.buffer) == same)]
            self._access([Acc(scan, True, False, None, False)] +
                         [a for a in accs if not a.write], Event("stmt", ev.section, ev.loop_index))
            self._access([Acc(scan, False, False, None, True), Acc(scan, True, False, None, True)],
                         Event("stmt", ev.section, ev.loop_index))
            self._access([Acc(scan, False, False, None, False)] + [a for a in accs if a.write], ev)
            return
        if ws is not None:
            # The reduce lowering's loop writes and reads the workspace in every
            # iteration: ThreadSync puts a barrier before the AllReduce, inside
            # that loop (one call; measured on sm_80 and sm_90).
            self.sync(ev.section, ev.loop_index, note="workspace")
            accs = accs + [Acc(ws, True, False, None, True), Acc(ws, False, False, None, True)]
        self._access(accs, ev)

    def _access(self, accs: List[Acc], ev: Event) -> None:
        stmt = ev.stmt if ev.stmt is not None else (ev.row.stmt if ev.row is not None else None)
        if accs and (_conflict(self.pending, accs, self.layout)
                     or _swizzled_waw(self.pending, accs, stmt, self.layout)):
            self.sync(ev.section, ev.loop_index)
        self.events.append(ev)
        self.pending.extend(accs)
        if accs:
            self.last_was_sync = False

    def stmt_accs(self, stmt: Stmt, is_async: bool = False,
                  kernel: Optional[Kernel] = None) -> List[Acc]:
        """:func:`_accs` with this kernel's stmatrix copies."""
        return _accs(stmt, self.shared, is_async, None, kernel, self.layout.stsm)

    # -- plain statements --------------------------------------------------
    def branch(self, stmt: Stmt, section: str, li: int, emit: Callable[[Stmt], None]) -> None:
        """An ``if`` as ThreadSync plans it (``VisitStmt_(IfThenElseNode)`` in
        transform/thread_storage_sync.cc): each arm is its own scope, planned from
        nothing pending, so its barriers order only its own statements; the
        enclosing sequence then sees the ``if`` as the condition's reads, then
        each arm's accesses with a barrier marker where the arm has one.  An
        access before the first marker that conflicts with what is pending puts
        a barrier before the ``if``.  (A barrier under a thread-dependent
        condition may be hoisted by the compiler; the count is the same.)"""
        outer = self.pending
        start = len(self.events)
        cond = sorted(_names(stmt.test) & self.shared) if stmt.test is not None else []
        summary: List[Optional[Acc]] = [Acc(b, False, False, None) for b in cond]
        cut = stmt.else_index if stmt.else_index is not None else len(stmt.children)
        for arm in (stmt.children[:cut], stmt.children[cut:]):
            if not arm:
                continue
            self.pending = []
            head: List[Acc] = []
            synced = False
            for c in arm:
                before, n = list(self.pending), len(self.events)
                emit(c)
                if synced:
                    continue
                if any(e.kind == "sync" for e in self.events[n:]):
                    synced, head = True, before
                else:
                    head = list(self.pending)
            summary.extend(head)
            if synced:
                summary.append(None)
                summary.extend(self.pending)
        hit = False
        for a in summary:
            if a is None:
                break
            if _conflict(outer, [a], self.layout):
                hit = True
                break
        if hit:
            self.events.insert(start, Event("sync", section, li))
            outer = []
        pending = list(outer)
        for a in summary:
            if a is None:
                pending = []
            else:
                pending.append(a)
        self.pending = pending
        self.last_was_sync = not pending and (hit or None in summary)

    def _close_loop(self, start: int, section: str, li: int) -> None:
        """Loop-carried hazard: the accesses after the body's last sync (iteration k)
        against those before its first sync (iteration k+1)."""
        head = self._head_accs(start)
        if _conflict(self.pending, head, self.layout, shift=1):
            self.events.insert(start, Event("sync", section, li, note="loop-carried"))

    def _head_accs(self, start: int) -> List[Acc]:
        out: List[Acc] = []
        for ev in self.events[start:]:
            if ev.kind == "sync":
                break
            if ev.kind == "stmt" and ev.stmt is not None:
                out.extend(self._ev_accs(ev))
        return out

    def _ev_accs(self, ev: Event) -> List[Acc]:
        if ev.row is not None:
            return self.row_accs(ev.row, self._versions())
        assert ev.stmt is not None  # a statement event (see _head_accs)
        return self.stmt_accs(ev.stmt)

    def _versions(self) -> Dict[str, int]:
        return self.layout.versions

    def row_accs(self, row: Row, versions: Dict[str, int]) -> List[Acc]:
        is_async = is_cp_async_copy(row.stmt, self.kernel)
        trip = self.trips.get(id(row.stmt))
        return [replace(a, vkey=_vkey(row, a.buffer, versions, trip))
                for a in self.stmt_accs(row.stmt, is_async, self.kernel)]

    # -- pipelined loops ---------------------------------------------------
    def pipelined(self, sched: Schedule, li: int, versions: Dict[str, int],
                  rolled: bool = False, retain: int = 1) -> Tuple[int, List[int]]:
        """Emit prologue/body/epilogue; returns (commits, waits).  ``rolled``: the
        prologue and the epilogue are loops (``rolled_ends``); their code is given once:
        the prologue's last step ending with ``wait_group<0>`` and a barrier, the
        epilogue as the whole body (every statement guarded) waiting with
        ``wait_group<0>``.  ``retain``: ``retained_groups`` of the loop (how far
        the compiler relaxes a ``wait_group<0>`` in the steady state)."""
        begin = len(self.events)
        if sched.trip_count is not None:
            for r in sched.rows():
                self.trips[id(r.stmt)] = sched.trip_count
        em = _PipelineEmitter(self, sched, li, versions, self._sync_before_pipeline(
            sched, li, self._pipeline_head(sched, li, versions, rolled)))
        n = sched.trip_count
        if n is not None and 0 < n <= sched.max_stage:
            # Fewer iterations than stages: the steady-state loop has none, and
            # the prologue and epilogue steps of iterations outside 0 .. n-1 are
            # guarded by a condition the compiler folds to false (measured:
            # example_tilelang_nsa_fwd.py with one selected block emits
            # iteration 0 only, its stage-0 copies first).
            em.trip = n  # the epilogue's iterations are n + offset
            for step in sched.prologue:
                rows = [r for r in step if r.offset < n]
                if rows:
                    em.step(rows, 0, True)
            for step in sched.epilogue:
                rows = [r for r in step if 0 <= n + r.offset < n]
                if rows:
                    em.step(rows, 0, True)
            return em.commits, em.waits
        warm, start = self._prologue_and_body(em, sched, li, rolled)
        self._relax_waits(start, retain, 0 if rolled else _outstanding(self.events[begin:start]))
        self._close_loop(start, BODY, li)
        if rolled and sched.epilogue:
            start = len(self.events)
            em.step(sched.body, warm + 1, True, drain=True)
            self._close_loop(start, EPILOGUE, li)
            self.events[start:] = [replace(e, section=EPILOGUE) for e in self.events[start:]]
        else:
            # Each epilogue step waits as a steady-state iteration does: the first
            # statement reading a group waits for it even when an earlier wait of
            # the step completed it (measured: example_mla_decode.py main_no_split
            # on sm_80, waits [2, 3] then [0, 1] after the loop).
            for step in sched.epilogue:
                em.step(step, 0, True, per_group=True)
        return em.commits, em.waits

    def _prologue_and_body(self, em: "_PipelineEmitter", sched: Schedule, li: int,
                           rolled: bool) -> Tuple[int, int]:
        """Emit the prologue, then warm-up body iterations (not recorded) and one
        recorded steady-state iteration (after a rolled prologue, which drains
        every group, the steady state starts once the body consumes only what
        the body committed).  Returns (warm-up count, index of the recorded
        iteration's first event)."""
        if rolled and sched.prologue:
            self._rolled_prologue(em, sched, li)
        else:
            for step in sched.prologue:
                em.step(step, 0, True)
        warm = max(2, sched.max_stage + 1) if rolled else 2
        saved_events, saved_pending = list(self.events), list(self.pending)
        for k in range(0, warm):
            em.step(sched.body, k, False)
        self.events, self.pending = saved_events, saved_pending
        start = len(self.events)
        em.step(sched.body, warm, True, per_group=True)
        return warm, start

    def _pipeline_head(self, sched: Schedule, li: int, versions: Dict[str, int],
                       rolled: bool) -> Optional[List[Acc]]:
        """The accesses the pipeline's code makes before its own first barrier
        (its prologue, then its steady-state body as emitted), from a dry run
        that leaves the tracer as it was; None when it places no barrier there.
        A barrier the pipeline needs anyway also orders the code before it:
        ThreadSync adds none before the loop then (measured: the block-sparse
        attention of tile-ai/tilelang examples/blocksparse_attention, whose
        pipeline opens with guarded copies and syncs before its first gemm, has
        no barrier between its Q_shared copy and the loop)."""
        saved = (self.events, self.pending, dict(self.trips), self.last_was_sync)
        self.events, self.pending = [], []
        try:
            self._prologue_and_body(_PipelineEmitter(self, sched, li, versions, None),
                                    sched, li, rolled)
            head: List[Acc] = []
            for ev in self.events:
                if ev.kind == "sync":
                    return head
                if ev.kind == "stmt":
                    head.extend(self._ev_accs(ev))
            return None
        except Exception:  # noqa: BLE001 - the dry run is a refinement only
            return None
        finally:
            self.events, self.pending, self.trips, self.last_was_sync = saved

    def _sync_before_pipeline(self, sched: Schedule, li: int,
                              head: Optional[List[Acc]] = None) -> Optional[Row]:
        """Code before the pipeline that conflicts with it: when a prologue statement
        conflicts, ThreadSync's barrier goes right before that statement (before the
        first one it is outside the pipeline; returned, for the emitter to place);
        otherwise it goes before the pipeline, here, unless only accesses after
        the pipeline's own first barrier conflict (``head``: those before it)."""
        region: List[Acc] = []
        if head is not None:
            region = head
        else:
            for row in sched.rows():
                region.extend(self.stmt_accs(row.stmt, False, self.kernel))
        first_row = sched.prologue[0][0] if sched.prologue and sched.prologue[0] else None
        in_prologue = any(_conflict(self.pending,
                                    self.stmt_accs(r.stmt, False, self.kernel),
                                    self.layout)
                          for step in sched.prologue for r in step)
        if self.pending and _conflict(self.pending, region, self.layout) and not in_prologue:
            self.sync("pre", li, note="before pipeline")
        return first_row

    def _rolled_prologue(self, em: "_PipelineEmitter", sched: Schedule, li: int) -> None:
        """A prologue that is a loop: its code is its last step, then
        ``wait_group<0>`` and a barrier."""
        for step in sched.prologue[:-1]:
            em.step(step, 0, False)
        start = len(self.events)
        em.step(sched.prologue[-1], 0, True)
        em.complete.update(em.committed)
        em.waits.append(0)
        self.events.append(Event("wait", PROLOGUE, li, n=0))
        self.sync(PROLOGUE, li, note="after wait")
        self._close_loop(start, PROLOGUE, li)

    def _relax_waits(self, start: int, retain: int, outstanding: int) -> None:
        """InjectSoftwarePipeline's last step on the steady-state loop: a
        ``wait_group<0>`` in it becomes ``wait_group<retain × g>``, g = the groups
        committed since the previous wait of the iteration (1 when there is none
        before it and no commit yet, which needs ``retain + 1`` groups outstanding
        from the prologue and a commit after the wait).  Measured on
        bind_reads_written_manual: the copy of the next index is committed, then
        ``wait_group<1>`` (not 0) before the statement reading it.  Only the
        count changes; what the tracer took as complete stays as before (the
        compiler computes every other wait before relaxing)."""
        if retain <= 0:
            return
        evs = self.events
        since = 0
        seen_wait = False
        for i in range(start, len(evs)):
            ev = evs[i]
            if ev.kind == "commit":
                outstanding += 1
                since += 1
            elif ev.kind == "wait":
                n = ev.n
                if n == 0:
                    head = since == 0 and not seen_wait
                    after = 0
                    for nxt in evs[i + 1:]:
                        if nxt.kind == "wait":
                            break
                        after += nxt.kind == "commit"
                    cand = retain * (1 if head else since)
                    if cand > 0 and (not head or (outstanding >= cand + 1 and after > 0)):
                        n = cand
                        evs[i] = replace(ev, n=n)
                seen_wait = True
                outstanding = min(outstanding, n)
                since = 0


class _CommitGroups:
    """Commit groups, as PipelinePlanning annotates them: async copies of one stage
    whose data is last read by the same statement share a group (numbered in
    issue order); InjectSoftwarePipeline commits each run of consecutive copies of
    one group, so a group split by another copy is committed once per run."""

    def __init__(self, sched: Schedule, shared: Set[str], kernel: Kernel) -> None:
        stmts = {r.index: r.stmt for r in sched.body}

        def last_use(i: int) -> int:
            written = _rw(stmts[i], shared)[1]
            return max((j for j in stmts if j > i and written & _rw(stmts[j], shared)[0]),
                       default=-1)

        self.of: Dict[int, int] = {}  # statement index -> commit group id
        keys: Dict[Tuple[int, int], int] = {}
        for r in sched.body:
            if is_cp_async_copy(r.stmt, kernel):
                self.of[r.index] = keys.setdefault((r.stage, last_use(r.index)), len(keys))
        self.count = max(len(keys), 1)
        self.writers: Dict[str, int] = {}  # buffer -> the group that fills it
        for r in sched.body:
            if r.index in self.of:
                for w in r.stmt.writes:
                    if w.buffer in shared:
                        self.writers[w.buffer] = self.of[r.index]

    def position(self, inst: Tuple[int, int]) -> int:
        """Where a (group, logical iteration) instance is in commit order: the
        compiler counts groups as if each iteration committed them in id order."""
        return inst[1] * self.count + inst[0]


class _PipelineEmitter:
    """Emits the steps of one pipelined loop into a tracer: before each statement
    the ``wait_group`` its reads need (and the barrier after it), the statement,
    and after the last copy of each run of a commit group its commit.  Keeps
    which group instances are committed and known complete across steps."""

    def __init__(self, tracer: "_Tracer", sched: Schedule, li: int,
                 versions: Dict[str, int], first_row: Optional[Row]) -> None:
        self.tr = tracer
        self.li = li
        self.versions = versions
        self.first_row = first_row
        self.groups = _CommitGroups(sched, tracer.shared, tracer.kernel)
        self.committed: List[Tuple[int, int]] = []  # (group, logical iteration), in commit order
        self.complete: Set[Tuple[int, int]] = set()
        self.commits = 0
        self.waits: List[int] = []
        self.trip = sched.max_stage + 3  # enough body iterations to reach the steady state

    def logical(self, r: Row, k: int) -> int:
        if r.section == PROLOGUE:
            return r.offset
        if r.section == BODY:
            return k + r.offset
        return self.trip + r.offset

    def step(self, rows: Sequence[Row], k: int, record: bool, drain: bool = False,
             per_group: bool = False) -> None:
        """One step (a prologue or epilogue step, or body iteration ``k``); only a
        ``record``-ed step leaves events.  ``drain``: every wait is
        ``wait_group<0>``.  ``per_group`` (the steady-state iteration): as
        InjectSoftwarePipeline counts the loop body, the first statement reading a
        commit group waits for it even when an earlier wait of the iteration
        already completed it (measured: bind_reads_written_manual's
        ``wait_group<2>`` before the gemm after a ``wait_group<0>`` for the index)."""
        gids = {r.index: self.groups.of[r.index] for r in rows if r.index in self.groups.of}
        last_of = {g: pos for pos, r in enumerate(rows) for g in [gids.get(r.index)]
                   if g is not None}
        waited: Set[int] = set()
        tr = self.tr
        for pos, r in enumerate(rows):
            it = self.logical(r, k)
            need = self._need(r, it, drain, per_group, waited)
            if need is not None:
                self._wait(r, need, record)
            accs = tr.row_accs(r, self.versions)
            if record and r is self.first_row and accs and \
                    _conflict(tr.pending, accs, tr.layout):
                tr.sync("pre", self.li, note="before pipeline")
            if record:
                tr.access(accs, Event("stmt", r.section, self.li, row=r, stmt=r.stmt))
            if r.index in gids:
                g = gids[r.index]
                nxt = rows[pos + 1] if pos + 1 < len(rows) else None
                if nxt is None or gids.get(nxt.index) != g:
                    if last_of[g] == pos:
                        self.committed.append((g, it))
                    if record:
                        self.commits += 1
                        tr.events.append(Event("commit", r.section, self.li))

    def _need(self, r: Row, it: int, drain: bool, per_group: bool, waited: Set[int]
              ) -> Optional[int]:
        """The ``wait_group`` count the statement needs before it, or None."""
        reads, _ = _rw(r.stmt, self.tr.shared)
        need = None
        for b in sorted(reads):
            g = self.groups.writers.get(b)
            if g is None:
                continue
            inst = (g, it)
            if inst not in self.committed:
                continue
            if per_group:
                if g in waited:
                    continue
                waited.add(g)
            elif inst in self.complete:
                continue
            last = self.groups.position(self.committed[-1])
            n = 0 if drain else max(0, last - self.groups.position(inst))
            need = n if need is None else min(need, n)
        return need

    def _wait(self, r: Row, need: int, record: bool) -> None:
        """``wait_group<need>``: every group but the last ``need`` is complete."""
        last = self.groups.position(self.committed[-1])
        for inst in self.committed:
            if self.groups.position(inst) <= last - need:
                self.complete.add(inst)
        if record:
            self.waits.append(need)
            self.tr.events.append(Event("wait", r.section, self.li, n=need))
            self.tr.sync(r.section, self.li, note="after wait")


def _outstanding(events: Sequence[Event]) -> int:
    """Groups the compiler counts as committed and not waited for at the end of a
    prologue: its commits when it has no wait (a wait anywhere in it: 0)."""
    if any(e.kind == "wait" for e in events):
        return 0
    return sum(1 for e in events if e.kind == "commit")


def retained_groups(lr: LoopResult, env: Optional[Env]) -> int:
    """The groups a pipelined loop may leave in flight (PipelinedRetainGroups):
    the loop's pipeline depth minus one, where the depth is the ``num_stages``
    written on the loop (beside a manual order/stage too), else the largest stage
    plus one."""
    ns: Optional[int] = None
    if lr.loop.num_stages is not None and env is not None:
        try:
            ns = env.eval_int(lr.loop.num_stages)
        except Exception:  # noqa: BLE001
            ns = None
    if ns is None:
        stages = [s.stage for s in lr.statements if s.stage is not None]
        ns = max(stages) + 1 if stages else None
    return 1 if ns is None else max(0, ns - 1)


def _trip(lr: LoopResult, env: Optional[Env]) -> Optional[int]:
    if env is None:
        return None
    try:
        stop = env.eval_int(lr.loop.stop)
        start = env.eval_int(lr.loop.start) if lr.loop.start is not None else 0
    except Exception:  # noqa: BLE001
        return None
    if stop is None or start is None:
        return None
    return stop - start


def _names(e: object) -> Set[str]:
    """The bare names an expression reads."""
    if e is None:
        return set()
    if isinstance(e, Name):
        return {e.id}
    out: Set[str] = set()
    for v in (vars(e).values() if hasattr(e, "__dict__") else ()):
        if isinstance(v, tuple):
            for x in v:
                out |= _names(x[1] if isinstance(x, tuple) and len(x) == 2 else x)
        elif hasattr(v, "__dataclass_fields__"):
            out |= _names(v)
    return out


def rolled_ends(kernel: Kernel, lr: LoopResult, env: Optional[Env]) -> bool:
    """The loop's start is a run-time value (a block index, say): InjectSoftwarePipeline
    cannot fold the extent ``(start + d) - start`` of the prologue and epilogue, so it
    emits each as a guarded loop over ``d`` iterations instead of ``d`` unrolled steps
    (measured: T.Pipelined(by, n, num_stages=3))."""
    start = lr.loop.start
    if start is None or env is None:
        return False
    try:
        if env.eval_int(start) is not None:
            return False
    except Exception:  # noqa: BLE001
        return False
    known = {p.name for p in kernel.factory_params} | {n for n, _ in kernel.locals}
    return bool(_names(start) - known)


def _layout_for(kernel: Kernel, env: Optional[Env], loops: Sequence[LoopResult],
                pack: Optional[PackLayout], target: str = "") -> _Layout:
    versions: Dict[str, int] = {}
    for lr in loops:
        for v in lr.versions:
            versions[v.buffer] = max(versions.get(v.buffer, 1), v.versions)
    return _Layout(kernel, env, pack, versions, target)


@dataclass(frozen=True)
class RegionSync:
    """The sync of one pipelined loop, split where the compiler's code splits it:
    ``prologue`` (the unrolled steps before the generated loop), ``body`` (one
    iteration of the generated, steady-state loop) and ``epilogue`` (the unrolled
    steps after it).  ``prologue``/``epilogue`` are None where the loop has none (not
    pipelined, or warp-specialized without copies before the loop)."""

    prologue: Optional[LoopSync] = None
    body: LoopSync = LoopSync()
    epilogue: Optional[LoopSync] = None


def _section_sync(events: Sequence[Event], section: str) -> LoopSync:
    """The sync calls among ``events`` that the tracer placed in ``section``."""
    evs = [e for e in events if e.section == section]
    return LoopSync(syncthreads=sum(1 for e in evs if e.kind == "sync"),
                    cp_async_commit=sum(1 for e in evs if e.kind == "commit"),
                    cp_async_wait=tuple(e.n for e in evs if e.kind == "wait"))


def trace(kernel: Kernel, env: Optional[Env], loops: Sequence[LoopResult], target: str,
          warp_specialized: bool = False, pack: Optional[PackLayout] = None) -> Tuple[List[Event], List[RegionSync]]:
    """The emitted statements and sync calls of the whole kernel (cp.async path) and a
    RegionSync per entry of ``loops``.  ``pack``: ``packing.pack_kernel``'s result for
    these loops (None: no arena layout, so no conflict between buffers is seen).  A
    sync the compiler puts before the whole pipeline (for the code before it) is in
    none of the loop's regions; it counts in the kernel's total."""
    layout = _layout_for(kernel, env, loops, pack, target)
    tr = _Tracer(kernel, layout)
    if env is not None:
        from .workspace import added_shared
        for key, alloc in added_shared(kernel, env, target, warp_specialized):
            (tr.workspaces if alloc.func == "add_workspace" else tr.scans)[key] = alloc.name
            layout.dyn.add(alloc.name)
    per_loop: Dict[int, RegionSync] = {}
    loops = list(loops)
    match = LoopMatcher(loops)

    def visit(s: Stmt) -> None:
        lr = match(s.loop) if (s.loop is not None and s.loop.kind == "pipelined") else None
        li = next((i for i, x in enumerate(loops) if x is lr), -1)
        sched = modulo_schedule(lr, _trip(lr, env)) if lr is not None and lr.pipelined and \
            not lr.warp_specialized else None
        if sched is not None:
            n0 = len(tr.events)
            assert lr is not None  # a schedule comes from a loop result
            tr.pipelined(sched, li, layout.versions,
                         rolled=sched.max_stage >= 2 and rolled_ends(kernel, lr, env),
                         retain=retained_groups(lr, env))
            region = tr.events[n0:]
            per_loop[li] = RegionSync(
                prologue=_section_sync(region, PROLOGUE),
                body=_section_sync(region, BODY),
                epilogue=_section_sync(region, EPILOGUE))
            return
        if s.loop is not None and s.kind != "parallel" and s.loop.kind not in ("parallel", "vectorized") \
                and any(_rw(c, tr.shared)[0] | _rw(c, tr.shared)[1] for c in s.loop.body):
            start = len(tr.events)
            for c in s.loop.body:
                visit(c)
            tr._close_loop(start, "pre", li)
            if li >= 0:
                per_loop[li] = RegionSync(body=LoopSync(syncthreads=sum(
                    1 for e in tr.events[start:] if e.kind == "sync")))
            return
        if s.loop is None and s.children and any(
                x.loop is not None and x.loop.kind == "pipelined" for x in walk_bodies(s.children)):
            # An ``if`` or an inlined macro around a pipelined loop: the emitted code
            # is its body in sequence (a guard does not change where ThreadSync
            # and the pipeline put their calls).
            for c in s.children:
                visit(c)
            return
        if s.loop is None and s.kind == "macro" and s.children:
            # An inlined macro: its statements are in the caller's sequence.
            for c in s.children:
                visit(c)
            return
        if s.loop is None and s.kind == "if" and s.children and \
                any(_rw(c, tr.shared)[0] | _rw(c, tr.shared)[1] for c in s.children):
            tr.branch(s, "pre", -1, visit)
            return
        tr.access(tr.stmt_accs(s), Event("stmt", "pre", -1, stmt=s))

    for s in kernel.body:
        visit(s)
    out = [per_loop.get(i, RegionSync()) for i in range(len(loops))]
    return tr.events, out


def kernel_sync(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
                warp_specialized: bool, pack: Optional[PackLayout]) -> Tuple[KernelSync, Tuple[LoopSync, ...]]:
    """Kernel-wide sync counts and, per loop, what one iteration of its generated
    (steady-state) loop executes.  ``pack`` is ``packing.pack_kernel``'s result for
    the same kernel and loops (the arena layout decides which buffers share bytes).
    Never raises."""
    ks, regions = kernel_sync_regions(kernel, env, loops, target, warp_specialized, pack)
    return ks, tuple(r.body for r in regions)


def kernel_sync_regions(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
                        warp_specialized: bool, pack: Optional[PackLayout]) -> Tuple[KernelSync, Tuple[RegionSync, ...]]:
    """Kernel-wide sync counts and one RegionSync (prologue, one steady-state
    iteration, epilogue) per loop.  Never raises."""
    try:
        return _kernel_sync(kernel, env, loops, target, warp_specialized, pack)
    except Exception:  # noqa: BLE001
        return KernelSync(), tuple(RegionSync() for _ in loops)


def _kernel_sync(kernel: Kernel, env: Env, loops: Sequence[LoopResult], target: str,
                 warp_specialized: bool, pack: Optional[PackLayout]
                 ) -> Tuple[KernelSync, Tuple[RegionSync, ...]]:
    t = targets_mod.get(target)
    if t is None or t.kind != "cuda":
        return KernelSync(), tuple(RegionSync() for _ in loops)
    if warp_specialized:
        ws_sync = _ws_barriers(kernel, env, loops, True)
        count, waits, before = ws_sync.barriers, ws_sync.waits, ws_sync.prelude
        shared = _shared_names(kernel)
        extra = 0

        def pipeline(x: Stmt) -> bool:
            return x.loop is not None and _is_pipeline(x.loop, loops)

        for s in kernel.body:
            if pipeline(s):
                break
            if s.loop is None and any(pipeline(x) for x in walk_bodies(s.children)):
                # an inlined macro (or a guard) around the loop: what it writes
                # inside the loop is not "before the loop"
                break
            if s.loop is not None and any(pipeline(x) for x in walk_bodies(s.loop.body)):
                # an outer loop around the pipeline: decided below
                break
            if _rw(s, shared)[1]:
                extra = 1
        for s in kernel.body:
            # A pipeline inside another loop (serial, or a T.Pipelined without
            # num_stages, which the compiler sees as a plain loop): a barrier at
            # the top of the outer loop (measured: nested_outer_plain).
            if s.loop is not None and not pipeline(s) and any(
                    pipeline(x) for x in walk_bodies(s.loop.body)) and \
                    not _writes_shared_after_pipeline(s.loop.body, pipeline, shared):
                extra = 1
        # Another pipelined loop of the kernel keeps the cp.async pipeline; it runs in
        # the consumer branch, where ThreadSync's barriers are named barriers over the
        # consumer threads (`__sync_thread_partial`), not `__syncthreads()`: its commits
        # and waits count, its barriers are not `__syncthreads()` (measured: two_loops).
        others = [lr for lr in loops if lr.pipelined and not lr.warp_specialized]
        events: List[Event] = []
        traced: List[RegionSync] = [RegionSync() for _ in loops]
        if others:
            events, traced = trace(kernel, env, loops, target, False, pack)

        def consumer(r: Optional[LoopSync]) -> Optional[LoopSync]:
            return None if r is None else replace(r, syncthreads=0)

        lsyncs = []
        given = False
        for lr, tr_sync in zip(loops, traced, strict=True):
            if _is_ws_loop(lr) and not given:
                lsyncs.append(RegionSync(
                    prologue=LoopSync(mbarrier_wait=before) if before else None,
                    body=LoopSync(mbarrier_wait=waits, cp_async_commit=ws_sync.commits)))
                given = True
            elif lr in others:
                lsyncs.append(RegionSync(prologue=consumer(tr_sync.prologue),
                                         body=consumer(tr_sync.body) or LoopSync(),
                                         epilogue=consumer(tr_sync.epilogue)))
            else:
                lsyncs.append(RegionSync())
        return KernelSync(syncthreads=1 + extra, mbarriers=count,
                          cp_async_commit=ws_sync.commits + sum(
                              1 for e in events if e.kind == "commit"),
                          cp_async_wait=tuple(e.n for e in events if e.kind == "wait")), \
            tuple(lsyncs)
    events, lsyncs = trace(kernel, env, loops, target, False, pack)
    ks = KernelSync(
        syncthreads=sum(1 for e in events if e.kind == "sync"),
        cp_async_commit=sum(1 for e in events if e.kind == "commit"),
        cp_async_wait=tuple(e.n for e in events if e.kind == "wait"),
    )
    return ks, tuple(lsyncs)


# --------------------------------------------------------------------------
# Preview of the emitted CUDA
# --------------------------------------------------------------------------


def _placeholder(row: Row, versions: Dict[str, int], var: str) -> str:
    s = row.stmt
    it = row.iteration_text(var)

    def ref(b: str) -> str:
        v = versions.get(b, 1)
        if v <= 1:
            return b
        if row.section == BODY:
            return f"{b}[({it}) % {v}]"
        if row.section == PROLOGUE:
            return f"{b}[{row.offset % v}]"
        return f"{b}[({it}) % {v}]"

    reads = [ref(a.buffer) for a in s.reads]
    writes = [ref(a.buffer) for a in s.writes]
    name = s.op.replace("T.", "") if s.op else s.kind
    if s.kind in ("copy", "gemm"):
        args = ", ".join(reads + [w for w in writes if w not in reads])
        return f"{name}({args});  // iteration {it}, stage {row.stage}"
    label = s.label or s.kind
    return f"/* {label} */  // iteration {it}, stage {row.stage}"


def render_preview(kernel: Kernel, loop_result: LoopResult, schedule: Optional[Schedule] = None,
                   sync: object = None, target: str = "sm_80", env: Optional[Env] = None) -> str:
    """A short CUDA skeleton of the pipelined loop with every sync call where the
    compiler puts it.  ``sync`` is accepted for symmetry and ignored (the placement is
    recomputed).  Returns "" when the loop is not pipelined."""
    try:
        return _render(kernel, loop_result, schedule, target, env)
    except Exception:  # noqa: BLE001
        return ""


def _render(kernel: Kernel, lr: LoopResult, schedule: Optional[Schedule], target: str,
            env: Optional[Env]) -> str:
    var = lr.loop.var
    versions = {v.buffer: v.versions for v in lr.versions}
    lines: List[str] = []
    if lr.pipelined and lr.warp_specialized:
        ns = lr.num_stages or 1
        body = [st for st in sorted(lr.statements, key=lambda x: x.order or 0)]
        prod = [st.stmt for st in body if is_async_copy(st.stmt, kernel)]
        cons = [st.stmt for st in body if not is_async_copy(st.stmt, kernel)]
        lines.append("__syncthreads();  // mbarrier init")
        lines.append("if (threadIdx.x < 128) {  // producer warpgroup")
        lines.append(f"  for (int {var} = 0; {var} < n; ++{var}) {{")
        lines.append(f"    mbarrier[{var} % {ns} + {ns}].wait((({var} / {ns}) & 1) ^ 1);  // slot free")
        for p in prod:
            lines.append(f"    tma_{p.op.replace('T.', '')}(... -> {p.writes[0].buffer}[{var} % {ns}]);"
                         f"  // arrive_and_expect_tx(mbarrier[{var} % {ns}])")
        lines.append("  }")
        lines.append("} else {  // consumer warpgroup(s)")
        lines.append(f"  for (int {var} = 0; {var} < n; ++{var}) {{")
        lines.append(f"    mbarrier[{var} % {ns}].wait(({var} / {ns}) & 1);  // data ready")
        for c in cons:
            lines.append(f"    /* {c.label or c.kind} */")
        lines.append(f"    mbarrier[{var} % {ns} + {ns}].arrive();  // release slot")
        lines.append("  }")
        lines.append("}")
        return "\n".join(lines) + "\n"
    sched = schedule or modulo_schedule(lr)
    if sched is None:
        return ""
    layout = _Layout(kernel, env, None, versions)
    tr = _Tracer(kernel, layout)
    tr.pipelined(sched, 0, versions, retain=retained_groups(lr, env))
    depth = sched.max_stage
    cur = None
    indent = ""
    for ev in tr.events:
        sec = ev.section if ev.section in (PROLOGUE, BODY, EPILOGUE) else "pre"
        if sec != cur:
            if cur == BODY:
                lines.append("}")
            if sec == PROLOGUE:
                lines.append(f"// prologue ({depth} step(s))")
            elif sec == BODY:
                lines.append(f"for (int {var} = 0; {var} < n - {depth}; ++{var}) {{  // steady state")
            elif sec == EPILOGUE:
                lines.append(f"// epilogue ({depth} step(s))")
            cur = sec
            indent = "  " if sec == BODY else ""
        if ev.kind == "sync":
            lines.append(indent + "__syncthreads();")
        elif ev.kind == "commit":
            lines.append(indent + "cp_async_commit();")
        elif ev.kind == "wait":
            lines.append(indent + f"cp_async_wait<{ev.n}>();")
        elif ev.row is not None:
            lines.append(indent + _placeholder(ev.row, versions, var))
    if cur == BODY:
        lines.append("}")
    return "\n".join(lines) + "\n"


def sync_calls(text: str) -> List[str]:
    """The sequence of sync calls in CUDA text (the compiler's or a preview):
    ``syncthreads``, ``commit``, ``wait<N>``, ``mbarrier_wait``."""
    import re
    out = []
    for m in re.finditer(r"__syncthreads\(\)|cp_async_commit\(\)|cp_async_wait<\s*(\d+)\s*>\(\)"
                         r"|\]\.wait\(|mbarrier_wait(?:_parity)?\(", text):
        g = m.group(0)
        if g.startswith("__sync"):
            out.append("syncthreads")
        elif "commit" in g:
            out.append("commit")
        elif "cp_async_wait" in g:
            out.append(f"wait<{m.group(1)}>")
        else:
            out.append("mbarrier_wait")
    return out
