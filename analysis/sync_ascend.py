"""Ascend synchronisation: InsertSync + RewriteFlagToBuf, re-run in pure Python.

What tilelang 0.1.15 does on Ascend (``src/ascend/transform/insert_sync.cc``,
``rewrite_flag_to_buf.cc``), and what this module mirrors:

* Every tile operation runs on one hardware pipe of one core: GM->L1/UB copies
  on MTE2, UB->GM/L1 on MTE3, L1->L0A/L0B on MTE1, L0C->UB/GM on FIX, the cube
  GEMM on M, SimtVF/SimdVF/reduce work on V, scalar work on S; L1/L0 work on
  the cube core (AIC), UB work on the vector core (AIV).
* Two operations that touch the same buffer (read/write, write/read,
  write/write) form a dependency with an iteration distance: 0 inside one
  iteration, the buffer's version count for a multi-buffered buffer whose
  reuse wraps around the loop, 1 otherwise.
* A dependency between different pipes of one core is a flag pair
  (``set_flag``/``wait_flag`` of hard event ``PROD_CONS``, with the renames
  MTE2_M->MTE2_MTE1, M_MTE2->MTE1_MTE2, MTE3_M->MTE3_MTE1, M_MTE3->MTE1_MTE3);
  across cores a cross-core flag (16 slots, the cube side also addresses
  slot + 16 for the second vector core); on one pipe a ``pipe_barrier`` for
  MTE1/MTE2/MTE3/FIX and nothing for S/V/M, whose issue order is implicit.
* Dependencies already implied by a chain of emitted synchronisations and
  same-pipe issue order are pruned (processed tightest first).
* Each remaining flag takes ``num_versions`` consecutive ids of its hard
  event; ``event_id = iteration % num_versions + base``.  Loop-carried flags
  are primed at kernel entry and drained at kernel exit.
* RewriteFlagToBuf: per hard event the id ranges form blocks; if they total
  more than 8 a 0/1 knapsack (capacity 8) keeps whole blocks, the others
  become ``asc_lock``/``asc_unlock`` on the 32-id mutex pool (ids 0-1 are held
  by ``gemm_l1``); more than 32 spilled ids is a compiler error.

The task order inside a loop is the auto-scheduler's (a Z3 model), and it
decides which dependencies survive pruning.  Every pipelined loop of the
statement list holding the first one is scheduled on its own; the list itself
(tasks and whole loops, a loop costing its last task's end plus II per further
iteration) goes through the compiler's straight-line scheduler, which
minimises the makespan and may move a copy-out past a later loop.  Flag ids
are allocated over the whole kernel (the widest rings first) and every
loop-carried flag is primed at kernel entry.  ``schedule_ascend`` reproduces
it: the compiler's cost model for latency/II, its dependency and resource
lists, and the same constraint program through Z3.  When an input is outside
that model (or z3-solver is missing) the order is predicted by dependency
levels (all loads, then compute, then stores; vector tasks of one level in
reverse source order) and the result says so (``AscendResult.schedule_exact``).
Buffer versions fixed by ``T.annotate_buffer_versions`` are facts; the others
are the versions the scheduler recomputes from its start times, or, without
the scheduler, a range up to ``num_stages``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar, Union

from .model import (
    Access,
    AscendLoop,
    AscendResult,
    AscendStatement,
    Call,
    Const,
    Diagnostic,
    DictExpr,
    Expr,
    Kernel,
    Loop,
    Name,
    Opaque,
    Slice,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
    walk_stmts,
)
from .schedule_ascend import (
    AscendSchedule,
    RootInput,
    RootNode,
    SchedulerInput,
    Unmodelled,
    build_outer_input,
    build_root_input,
    compose_loop_node,
    guard_node,
    root_loop_node,
    root_task_node,
    schedule_loop,
    solve_now_or_later,
    solve_root,
    vf_scope_call,
)
from .values import Env

INTRA_CORE_FLAGS = 8
_UNKNOWN_EXTENT = 1 << 20  # a trip count that could not be evaluated
CROSS_CORE_FLAGS = 16
MUTEX_POOL = 32
GEMM_L1_MUTEX_IDS = 2
NUM_AIV_SUBCORES = 2
AIC, AIV = "AIC", "AIV"

_ALLOC_MEMORY = {
    "alloc_l1": "L1", "alloc_L1": "L1",
    "alloc_l0a": "L0A", "alloc_L0A": "L0A",
    "alloc_l0b": "L0B", "alloc_L0B": "L0B",
    "alloc_l0c": "L0C", "alloc_L0C": "L0C",
    "alloc_shared": "UB", "alloc_ub": "UB", "alloc_UB": "UB",
    "alloc_fragment": "REG", "alloc_local": "REG", "alloc_var": "REG",
    "alloc_reducer": "REG", "alloc_barrier": "REG",
}
_SCOPE_MEMORY = {
    "shared.l1": "L1", "shared.l0a": "L0A", "shared.l0b": "L0B", "shared.l0c": "L0C",
    "shared.dyn": "UB", "shared": "UB", "local": "REG", "local.var": "REG",
    "local.fragment": "REG",
}
_RENAMES = {"MTE2_M": "MTE2_MTE1", "M_MTE2": "MTE1_MTE2", "MTE3_M": "MTE3_MTE1",
            "M_MTE3": "MTE1_MTE3"}
_IMPLICIT_ORDER = ("S", "V", "M")


def hard_event(producer: str, consumer: str) -> str:
    ev = f"{producer}_{consumer}"
    return _RENAMES.get(ev, ev)


# --------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------


@dataclass
class Task:
    index: int  # position in the predicted schedule (global)
    pipe: str
    core: str
    stmt: Stmt
    region: str  # pre | loop | post
    reads: Dict[str, Tuple[str, ...]] = field(default_factory=dict)  # buffer -> index keys
    writes: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    gemm_l1: bool = False
    loop_id: int = -1  # which pipelined loop of the root list (-1: none)
    outer: bool = False  # inside the serial loop around the pipelined loops


@dataclass
class SyncPoint:
    src: Tuple[int, bool]  # (task index, at_beginning)
    dst: Tuple[int, bool]
    distance: int
    num_versions: int
    level: str  # loop | root
    buffer: str
    kind: str  # RAW | WAR | WAW
    base: int = 0
    allocation: int = -1


@dataclass
class Allocation:
    points: List[int]
    num_versions: int
    cross_iter: bool
    base: int
    domain: str


@dataclass(frozen=True)
class SyncCall:
    """One emitted synchronisation call, in program order."""

    name: str  # notify | wait | barrier | intra_arrive | intra_wait | lock
    core: str
    pipes: Tuple[str, ...]
    base: int  # id offset (mutex id for lock)
    versions: int  # 1 = constant id
    where: str  # prefix | pre | loop | post | suffix
    guard: str = ""  # "first" / "last" for loop-boundary syncs
    blocking: bool = True  # lock: BLOCK (wait side) or NON_BLOCK (set side)
    task: int = -1  # the task it is emitted next to (-1: kernel entry/exit)
    after: bool = False  # emitted after that task (else before it)
    loop_id: int = -1  # the pipelined loop it sits in (where == "loop")
    extent: int = 1  # the iterations its id counts (inner x outer inside a serial loop)
    flat: str = ""  # the flattened iteration as the compiler prints it ({var}: the loop's)
    level: str = ""  # the sync point's level: loop | outer | root

    def ids(self) -> Tuple[int, ...]:
        """The ids it takes over its loop."""
        if self.where not in ("loop", "outer") or self.versions <= 1:
            return (self.base,)
        # k % versions + base over k in range(extent)
        return tuple(range(self.base, self.base + min(max(self.extent, 1), self.versions)))


@dataclass
class AscendPlan:
    result: AscendResult
    tasks: List[Task]
    points: List[SyncPoint]
    allocations: List[Allocation]
    calls: List[SyncCall]
    loop: Optional[Loop]
    loop_var: str
    extent: int
    events: Dict[str, Tuple[int, bool]]  # hard event -> (ids kept after the rewrite, spilled)
    spilled_blocks: List[Tuple[str, int, int, int]]  # event, lo, hi, mutex base
    mutex_used: int
    cross_core_failed: bool
    version_range: Tuple[Tuple[str, int, int], ...] = ()
    schedule: Optional[AscendSchedule] = None  # the first loop's
    source_order: Tuple[int, ...] = ()  # first loop's tasks (scheduled order) -> source position
    units: List["LoopUnit"] = field(default_factory=list)  # every pipelined loop, in source order
    root_note: str = ""  # why the kernel body's order is not the scheduler's ("" when it is)
    root_input: Optional[RootInput] = None  # the root list's scheduler input
    root_times: Tuple[int, ...] = ()  # and its start times
    outer: Optional["OuterUnit"] = None  # the serial loop around the pipelined loops


# --------------------------------------------------------------------------
# Memory and pipe classification
# --------------------------------------------------------------------------


def buffer_memory(kernel: Kernel) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for a in kernel.allocs:
        mem = _ALLOC_MEMORY.get(a.func)
        if a.scope in ("shared.l1", "shared.l0a", "shared.l0b", "shared.l0c"):
            mem = _SCOPE_MEMORY[a.scope]
        out[a.name] = mem or _SCOPE_MEMORY.get(a.scope, "UB")
    return out


def _mem(name: str, memory: Dict[str, str]) -> str:
    return memory.get(name, "GM")


def _core_of_memory(mem: str) -> Optional[str]:
    if mem in ("L1", "L0A", "L0B", "L0C"):
        return AIC
    if mem == "UB":
        return AIV
    return None


def classify(stmt: Stmt, memory: Dict[str, str]) -> Optional[Tuple[str, str, bool]]:
    """(pipe, core, is_gemm_l1) of a statement, None if it runs nowhere."""
    kind = stmt.kind
    if kind in ("bind", "annotation", "alloc", "other"):
        return None
    if kind == "vf":  # a T.SimdVF block of register intrinsics
        return ("V", AIV, False)
    if kind == "copy":
        src = _mem(stmt.reads[0].buffer, memory) if stmt.reads else "GM"
        dst = _mem(stmt.writes[0].buffer, memory) if stmt.writes else "GM"
        if src == "GM" and dst in ("UB", "L1"):
            return ("MTE2", AIC if dst == "L1" else AIV, False)
        if src == "UB" and dst in ("GM", "L1"):
            return ("MTE3", AIV, False)
        if src == "L1" and dst in ("L0A", "L0B"):
            return ("MTE1", AIC, False)
        if src == "L0C" and dst in ("UB", "GM"):
            return ("FIX", AIC, False)
        return ("V", AIV, False)
    if kind == "gemm":
        a = _mem(stmt.reads[0].buffer, memory) if stmt.reads else "L1"
        return ("M", AIC, a == "L1")
    if kind == "fill":
        dst = _mem(stmt.writes[0].buffer, memory) if stmt.writes else "UB"
        if dst == "L1":
            return ("MTE2", AIC, False)
        return ("S", _core_of_memory(dst) or AIV, False)
    if kind in ("reduce", "parallel", "atomic"):
        return ("V", AIV, False)
    if kind in ("store",):
        mems = [_mem(a.buffer, memory) for a in stmt.writes + stmt.reads]
        cores = [c for c in (_core_of_memory(m) for m in mems) if c]
        return ("S", cores[0] if cores else AIV, False)
    if kind in ("serial", "loop", "macro", "if"):
        # A compound statement: the pipe of its work (a VF region is V).
        pipes = [p for p in (classify(c, memory) for c in stmt.children) if p is not None]
        if not pipes:
            return None
        if all(p[0] == "V" for p in pipes):
            return ("V", AIV, False)
        return pipes[0]
    if kind == "call":
        return None
    return None


def _index_key(acc: Access) -> Tuple[str, ...]:
    from .values import expr_text
    if acc.indices is None:
        return ()
    return tuple(expr_text(i) if not isinstance(i, Slice) else
                 f"{expr_text(i.lower) if i.lower else ''}:{expr_text(i.upper) if i.upper else ''}"
                 for i in acc.indices)


# Register intrinsics of a T.SimdVF block that store to a UB address (their
# first argument); the loads (vld, vld2, pld) and register ops only read.
_SIMD_STORES = ("vsts", "vsstb", "pst")


def _stored_buffer(call: Stmt) -> Optional[str]:
    if call.call is None or not call.call.args:
        return None
    if call.op.rsplit(".", 1)[-1] not in _SIMD_STORES:
        return None
    e = call.call.args[0]
    while isinstance(e, Subscript):
        e = e.value
    return e.id if isinstance(e, Name) else None


def _vf_block(stmts: Sequence[Stmt], op: str = "T.SimdVF") -> Optional[Stmt]:
    """Consecutive statements of one ``T.SimdVF`` block written with register
    intrinsics, as the single V task the compiler makes of the block: it reads
    every buffer the intrinsics mention and writes the ones a store
    intrinsic addresses.  None when the block touches no buffer."""
    reads: Dict[str, Access] = {}
    writes: Dict[str, Access] = {}
    for st in walk_stmts(stmts):
        if st.children:
            continue  # a loop or branch: its statements are visited themselves
        stored = _stored_buffer(st) if st.kind == "call" else None
        address_seen = False
        for a in st.reads:
            if a.buffer == stored and not address_seen:
                address_seen = True  # the store's address operand
                writes.setdefault(a.buffer, a)
            else:
                reads.setdefault(a.buffer, a)
        for a in st.writes:
            writes.setdefault(a.buffer, a)
    if not reads and not writes:
        return None
    first, last = stmts[0], stmts[-1]
    span = replace(first.span, end_line=last.span.end_line, end_col=last.span.end_col)
    return replace(first, kind="vf", op=op, span=span,
                   reads=tuple(reads.values()), writes=tuple(writes.values()),
                   label=f"{op} block ({len(stmts)} statement{'s' if len(stmts) != 1 else ''})",
                   children=tuple(stmts), loop=None, call=None, target=None, value=None)


def _group_vf_blocks(stmts: Sequence[Stmt], memory: Dict[str, str]) -> List[Stmt]:
    """``stmts`` with each run of statements inside one ``T.SimdVF`` block that
    the pipes do not classify (register intrinsics, their scalar bindings and
    loops) replaced by one V-task statement.  Two blocks written back to back
    stay two tasks, as in the compiler (measured: two blocks of a loop body are
    two V tasks of the loop scheduler, each with its own latency)."""
    out: List[Stmt] = []
    run: List[Stmt] = []

    def flush() -> None:
        if run:
            block = _vf_block(run)
            if block is not None:
                out.append(block)
            run.clear()

    for st in _group_parallel_blocks(stmts, memory):
        if "T.SimdVF" in st.scope and (st.kind == "bind" or classify(st, memory) is None):
            if run and vf_scope_call(run[-1], "T.SimdVF") != vf_scope_call(st, "T.SimdVF"):
                flush()
            run.append(st)
            continue
        flush()
        out.append(st)
    flush()
    return out


def _vf_key(st: Stmt) -> Optional[Tuple[Span, Call]]:
    """The innermost VF block (``with T.SimdVF/T.SimtVF(...)``) around ``st``."""
    for span, call in reversed(st.scope_calls):
        if isinstance(call, Call) and call.func in ("T.SimdVF", "T.SimtVF"):
            return (span, call)
    return None


def _group_parallel_blocks(stmts: Sequence[Stmt], memory: Dict[str, str]) -> List[Stmt]:
    """``stmts`` with each VF block that holds several T.Parallel loops (and
    only vector work) replaced by one V-task statement: the compiler makes the
    block one task (measured: two T.Parallel loops of one SimdVF or SimtVF
    block are one V task of 22 cycles, not two of 11 and 16)."""
    out: List[Stmt] = []
    i = 0
    while i < len(stmts):
        key = _vf_key(stmts[i])
        j = i
        while j < len(stmts) and key is not None and _vf_key(stmts[j]) == key and \
                (stmts[j].kind == "bind" or classify(stmts[j], memory) in (None, ("V", AIV, False))):
            j += 1
        run = stmts[i:j]
        block = _vf_block(run, key[1].func) if key is not None and \
            sum(s.kind == "parallel" for s in run) >= 2 else None
        if block is not None:
            out.append(block)
            i = j
        else:
            out.append(stmts[i])
            i += 1
    return out


def _make_task(stmt: Stmt, memory: Dict[str, str], region: str) -> Optional[Task]:
    c = classify(stmt, memory)
    if c is None:
        return None
    pipe, core, gl1 = c
    t = Task(index=-1, pipe=pipe, core=core, stmt=stmt, region=region, gemm_l1=gl1)
    for a in stmt.reads:
        if _mem(a.buffer, memory) != "REG":
            t.reads.setdefault(a.buffer, _index_key(a))
    for a in stmt.writes:
        if _mem(a.buffer, memory) != "REG":
            t.writes.setdefault(a.buffer, _index_key(a))
    return t


# --------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------

def _version_items(value: Expr, env: Optional[Env]) -> Dict[str, int]:
    """``{buf: n}`` / ``{buf: (n, mode)}`` items of a version map whose count is
    known (a mode alone leaves the count to the scheduler)."""
    out: Dict[str, int] = {}
    if not isinstance(value, DictExpr):
        return out
    for name, v in value.items:
        if isinstance(v, TupleExpr) and v.items:
            v = v.items[0]
        n = env.eval_int(v) if env is not None else None
        if n is None and isinstance(v, Const) and type(v.value) is int:
            n = v.value
        if n is not None:
            out[name] = n
    return out


def annotated_versions(kernel: Kernel, env: Optional[Env]) -> Dict[str, int]:
    """Buffer -> version count from ``T.annotate_buffer_versions``."""
    out: Dict[str, int] = {}
    for key, value in kernel.attrs:
        if key == "buffer_versions":
            out.update(_version_items(value, env))
    if not out:
        # The kernel's attributes hold the calls at the kernel's top level
        # only (one inside an inlined macro is a statement): read every call
        # statement.
        for st in walk_stmts(kernel.body):
            if st.kind == "annotation" and st.op == "T.annotate_buffer_versions" \
                    and st.call is not None and st.call.args:
                out.update(_version_items(st.call.args[0], env))
    return out


# --------------------------------------------------------------------------
# Dependency closure (distances, strictness)
# --------------------------------------------------------------------------


class Closure:
    def __init__(self) -> None:
        self.present: Set[Tuple] = set()
        self.out: Dict[Tuple, List[Tuple]] = {}
        self.inc: Dict[Tuple, List[Tuple]] = {}

    def contains(self, e: Tuple) -> bool:
        return e in self.present

    def has_edge(self, s: Tuple[int, bool], d: Tuple[int, bool], dist: int) -> bool:
        return (s, d, dist, False) in self.present or (s, d, dist, True) in self.present

    def min_distance(self, s: Tuple[int, bool], d: Tuple[int, bool]) -> Optional[int]:
        best = None
        for e in self.out.get(s, ()):
            if e[1] == d and (best is None or e[2] < best):
                best = e[2]
        return best

    def _insert(self, e: Tuple) -> None:
        if e in self.present:
            return
        self.present.add(e)
        self.out.setdefault(e[0], []).append(e)
        self.inc.setdefault(e[1], []).append(e)

    def saturate(self, start: Tuple, max_distance: int) -> None:
        if start[2] > max_distance:
            return
        work = [start]
        pending = {start}
        while work:
            e = work.pop()
            pending.discard(e)
            if e in self.present:
                continue
            s, d, dist, strict = e
            new = []
            for o in list(self.out.get(d, ())):
                if dist + o[2] <= max_distance:
                    new.append((s, o[1], dist + o[2], strict or o[3]))
            for o in list(self.inc.get(s, ())):
                if o[2] + dist <= max_distance:
                    new.append((o[0], d, o[2] + dist, strict or o[3]))
            self._insert(e)
            for n in new:
                if n not in self.present and n not in pending:
                    pending.add(n)
                    work.append(n)

    def edges(self) -> List[Tuple]:
        return list(self.present)


# --------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------


def _pipelined_loop(kernel: Kernel, loops: Sequence[Loop]) -> Tuple[Optional[Loop], List[Stmt], List[Stmt], Optional[Stmt]]:
    """The first pipelined loop at any depth, with the statements before and
    after it at the kernel's top level (enclosing loops are flattened)."""
    target = loops[0] if loops else None

    def find(stmts: Sequence[Stmt], path: List[Stmt]) -> Optional[List[Stmt]]:
        for s in stmts:
            if s.loop is not None and (target is None and s.loop.kind == "pipelined"
                                       or target is not None and s.loop.span == target.span):
                return path + [s]
            r = find(s.children, path + [s])
            if r:
                return r
        return None

    path = find(kernel.body, [])
    if not path:
        return None, list(kernel.body), [], None
    loop_stmt = path[-1]
    container = kernel.body if len(path) == 1 else path[-2].children
    i = list(container).index(loop_stmt)
    return loop_stmt.loop, list(container[:i]), list(container[i + 1:]), loop_stmt


def _loop_tainted(loop: Loop) -> Set[str]:
    """Names whose value changes with the loop variable (loop var + binds)."""
    names = set(re.findall(r"[A-Za-z_]\w*", loop.var))  # ``bx, by`` / ``(bx,)``
    changed = True
    while changed:
        changed = False
        for st in walk_stmts(loop.body):
            if st.kind == "bind" and st.target and st.target not in names:
                if _mentions(st.value, names):
                    names.add(st.target)
                    changed = True
    return names


def _mentions(e: Optional[Expr], names: Set[str]) -> bool:
    if e is None:
        return False
    if isinstance(e, Name):
        return e.id in names
    if isinstance(e, Opaque):
        # Source the frontend kept as text (a lambda, a starred argument).
        return any(re.search(rf"\b{re.escape(n)}\b", e.text) for n in names)
    for v in getattr(e, "__dict__", {}).values():
        if isinstance(v, tuple):
            for x in v:
                if isinstance(x, tuple):
                    if any(_mentions(y, names) for y in x if not isinstance(y, str)):
                        return True
                elif not isinstance(x, str) and _mentions(x, names):
                    return True
        elif v is not None and not isinstance(v, (str, int, float, bool)) and _mentions(v, names):
            return True
    return False


def _conflict(a: Task, b: Task, memory: Dict[str, str], cross: bool,
              tainted: Set[str]) -> List[Tuple[str, str]]:
    """(buffer, kind) conflicts of a then b."""
    out = []
    bufs = set(a.reads) | set(a.writes)
    for buf in sorted(bufs):
        aw, ar = buf in a.writes, buf in a.reads
        bw, br = buf in b.writes, buf in b.reads
        if aw and bw:
            kind = "WAW"
        elif aw and br:
            kind = "RAW"
        elif ar and bw:
            kind = "WAR"
        else:
            continue
        if _mem(buf, memory) == "GM":
            ka = a.writes.get(buf, a.reads.get(buf, ()))
            kb = b.writes.get(buf, b.reads.get(buf, ()))
            if ka and kb and ka != kb:
                continue
            if cross and any(re.search(rf"\b{re.escape(n)}\b", " ".join(ka + kb))
                             for n in tainted):
                continue
        out.append((buf, kind))
    return out


def _levels(tasks: List[Task], memory: Dict[str, str], tainted: Set[str]) -> List[Task]:
    """Predicted scheduled order: stable sort by dependency level."""
    level: Dict[int, int] = {}
    for j, t in enumerate(tasks):
        lv = 0
        for i in range(j):
            if _conflict(tasks[i], t, memory, False, tainted):
                lv = max(lv, level[i] + 1)
        level[j] = lv
    order = sorted(range(len(tasks)),
                   key=lambda j: (level[j], -j if tasks[j].pipe == "V" else j))
    return [tasks[j] for j in order]


def analyze_ascend(kernel: Kernel, env: Env, loops: Sequence[Loop] = ()
                   ) -> Tuple[AscendResult, List[Diagnostic]]:
    """Ascend sync analysis of ``kernel``: every pipelined loop of the
    statement list holding the first one, and that list's own statements."""
    try:
        plan = plan_ascend(kernel, env, loops)
    except Exception:  # never take the editor down
        return AscendResult(), []
    if plan is None:
        return AscendResult(), []
    try:
        preview = render_ascend_preview(kernel, env, loops, plan=plan)
    except Exception:
        preview = ""
    per_loop = tuple(AscendLoop(
        line=u.loop.span.line, statements=_statements(u), exact=u.schedule.exact,
        note=u.schedule.reason, ii=u.schedule.ii if u.schedule.exact else None)
        for u in plan.units)
    result = replace(plan.result, statements=per_loop[0].statements if per_loop else (),
                     preview=preview, loops=per_loop,
                     loop_line=plan.loop.span.line if plan.loop is not None else None)
    return result, ascend_diagnostics(kernel, plan)


def _statements(unit: "LoopUnit") -> Tuple[AscendStatement, ...]:
    sched = unit.schedule
    out = []
    for pos, t in enumerate(unit.body):
        src = unit.source_order[pos] if pos < len(unit.source_order) else pos
        timed = sched is not None and sched.exact and src < len(sched.start_times)
        inp = sched.input if sched is not None else None
        out.append(AscendStatement(
            line=t.stmt.span.line, label=t.stmt.label, pipe=t.pipe, core=t.core,
            start=sched.start_times[src] if timed and sched is not None else None,
            latency=inp.latencies[src] if timed and inp is not None else None,
            ii=inp.iis[src] if timed and inp is not None else None,
            source=src))
    return tuple(out)


@dataclass
class LoopUnit:
    """One pipelined loop of the root list, scheduled."""

    loop: Loop
    loop_id: int  # source position among the root list's pipelined loops
    src_body: List[Task]
    body: List[Task]  # scheduled order
    schedule: AscendSchedule
    extent: int
    tainted: Set[str]
    source_order: Tuple[int, ...]


@dataclass
class OuterUnit:
    """A serial loop (over output tiles, say) around the pipelined loops: its
    body is scheduled like a pipelined loop's, with each inner loop as one
    node, and its hazards across iterations get their own flags."""

    loop: Loop
    nodes: List[Union[Task, LoopUnit]]  # the body, in scheduled order
    extent: int
    tainted: Set[str]
    rnode: Optional[RootNode]  # the whole loop as one node of the root list
    note: str  # why its order is not the scheduler's ("" when it is)
    input: Optional[SchedulerInput] = None
    start_times: Tuple[int, ...] = ()  # per node, source order
    ii: Optional[int] = None
    var: str = ""  # the loop variable in the compiler's source (``w`` for T.Persistent)
    guards: int = 0  # the ``if`` a T.Persistent loop keeps around its body


def _root_list(kernel: Kernel, loops: Sequence[Loop]
               ) -> Tuple[List[Stmt], List[Stmt], Optional[Stmt], List[Stmt], str]:
    """The statement list holding the first pipelined loop and its pipelined
    loops; when that list is the body of a serial loop directly in the kernel
    body, that loop statement and the kernel body (else None and the list);
    and, when other constructs enclose the list, what is not modelled."""
    _, _, _, first = _pipelined_loop(kernel, loops)
    if first is None:
        return list(kernel.body), [], None, list(kernel.body), ""

    def find(stmts: Sequence[Stmt], path: List[Stmt]) -> Optional[List[Stmt]]:
        for s in stmts:
            if s is first:
                return path
            r = find(s.children, path + [s])
            if r is not None:
                return r
        return None

    path = find(kernel.body, []) or []
    container = list(path[-1].children) if path else list(kernel.body)
    spans = {lp.span for lp in loops}
    units = [s for s in container if s.loop is not None and (
        s is first or s.loop.kind == "pipelined" and (not spans or s.loop.span in spans))]
    outer = path[0] if len(path) == 1 and path[0].loop is not None \
        and path[0].loop.kind == "serial" else None
    note = ""
    if path and outer is None:
        what = path[0].label if len(path[0].label) <= 40 else path[0].label[:39] + "…"
        note = (f"the construct around the pipelined loop (`{what}`) is not modelled: "
                f"its hazards across iterations have no flags here")
    return container, units, outer, (list(kernel.body) if outer is not None else container), note


def _node_of(x: Union[Task, LoopUnit, OuterUnit], kernel: Kernel, env: Env,
             memory: Dict[str, str]) -> RootNode:
    if isinstance(x, OuterUnit):
        if x.rnode is None:
            raise Unmodelled(x.note or "the serial loop around the pipelined loop")
        return x.rnode
    if isinstance(x, LoopUnit):
        if x.extent >= _UNKNOWN_EXTENT:
            raise Unmodelled(f"the trip count of the loop over {x.loop.var} is not known")
        return root_loop_node(x.src_body, x.schedule, x.extent, memory)
    return root_task_node(x, kernel, env, memory)


def _plan_outer(stmt: Stmt, nodes: List[Union[Task, LoopUnit]], kernel: Kernel, env: Env,
                memory: Dict[str, str], annotated: Dict[str, int],
                unseen: List[str], state: "_PlanState") -> OuterUnit:
    """Schedule the serial loop's body (the compiler's modulo scheduler, each
    pipelined loop one node) and make the loop one node of the root list.
    Buffers of the serial loop's own statements get their annotated versions
    when they are multi-buffer eligible there (written before any read in an
    iteration), else 1."""
    loop = stmt.loop
    assert loop is not None
    fixed, free = _outer_buffers(nodes, memory, annotated, state)
    trip, why, guards = serial_trip_count(loop, env, kernel)
    extent = trip if trip is not None else _UNKNOWN_EXTENT
    tainted = _loop_tainted(loop)
    for x in nodes:
        for t in (x.src_body if isinstance(x, LoopUnit) else [x]):
            t.outer = True
    if why:
        unseen = unseen + [why]
    exact_before = state.exact
    if free:
        state.exact = False  # until the scheduler has picked them
    if unseen:
        return OuterUnit(loop, nodes, extent, tainted, None,
                         f"the serial loop's body keeps the source order ({unseen[0]} "
                         f"is not modelled)")
    try:
        # Each `if` T.Persistent puts around the body is a scalar node first.
        rnodes = [guard_node() for _ in range(guards)] + \
            [_node_of(x, kernel, env, memory) for x in nodes]
        inp = build_outer_input(rnodes, [False] * guards + [isinstance(x, LoopUnit)
                                                           for x in nodes], fixed,
                                free, kernel, env, memory,
                                lambda a, b, cross: _conflict(a, b, memory, cross, tainted),
                                _serial_num_stages(loop, env), guards)
    except Unmodelled as exc:
        return OuterUnit(loop, nodes, extent, tainted, None,
                         f"the serial loop's body keeps the source order ({exc})")
    out, why = solve_now_or_later(inp)
    if out is None:
        return OuterUnit(loop, nodes, extent, tainted, None,
                         f"the serial loop's body keeps the source order ({why})", inp)
    times, chosen, ii = out
    for b, v in zip(inp.version_buffers, chosen, strict=False):
        state.versions[b] = v
    state.exact = exact_before
    t0 = min(times)
    times = tuple(x - t0 for x in times)
    order = sorted(range(len(rnodes)), key=lambda i: (times[i], i))
    rnode = compose_loop_node([rnodes[i] for i in order], [times[i] for i in order], ii, extent)
    body = [nodes[i - guards] for i in order if i >= guards]
    return OuterUnit(loop, body, extent, tainted, rnode, "", inp, times, ii, guards=guards)


def _outer_buffers(nodes: Sequence[Union[Task, LoopUnit]], memory: Dict[str, str],
                   annotated: Dict[str, int], state: "_PlanState"
                   ) -> Tuple[Dict[str, int], List[str]]:
    """The serial loop's own on-chip buffers (those of its statements outside
    the pipelined loops): the annotated versions of the multi-buffer eligible
    ones (written before any read in an iteration) and the eligible ones the
    scheduler picks versions for; the others have 1.  Fills ``state``."""
    flat = [t for x in nodes for t in (x.src_body if isinstance(x, LoopUnit) else [x])]
    fixed: Dict[str, int] = {}
    free: List[str] = []
    for x in nodes:
        if isinstance(x, LoopUnit):
            continue
        for b in list(x.writes) + list(x.reads):
            if _mem(b, memory) in ("GM", "REG") or b in fixed or b in free:
                continue
            first = next(t for t in flat if b in t.writes or b in t.reads)
            eligible = b in first.writes and b not in first.reads
            if b not in state.loop_bufs:
                state.loop_bufs.append(b)
            if eligible and b in annotated:
                fixed[b] = annotated[b]
                state.versions[b] = annotated[b]
            elif eligible:
                free.append(b)
                state.versions.setdefault(b, 1)
            else:
                state.versions.setdefault(b, 1)
    return fixed, free


_PERSISTENT_ARGS = ("domain", "wave_size", "index", "group_size", "num_stages")


def serial_trip_count(loop: Loop, env: Env, kernel: Kernel
                      ) -> Tuple[Optional[int], str, int]:
    """The trip count of a serial loop around the pipelined loops; when the
    model cannot follow the compiler's loop, what it does not model; and how
    many ``if`` the compiler puts around its body (T.Persistent)."""
    it = loop.iterator
    if isinstance(it, Call) and it.func == "T.Persistent":
        return _persistent_waves(it, env, kernel)
    start = env.eval_int(loop.start) if loop.start is not None else 0
    stop = env.eval_int(loop.stop)
    if stop is None:
        return None, f"the trip count of the loop over {loop.var}", 0
    return stop - (start or 0), "", 0


def _serial_num_stages(loop: Loop, env: Env) -> int:
    """The version bound the compiler's loop scheduler gets for a serial loop:
    ``T.Persistent``'s ``num_stages`` (5th argument) when positive, else 1."""
    it = loop.iterator
    if not isinstance(it, Call) or it.func != "T.Persistent":
        return 1
    value = dict(it.kwargs).get("num_stages", it.args[4] if len(it.args) > 4 else None)
    n = env.eval_int(value) if value is not None else None
    return n if n is not None and n > 0 else 1


def _persistent_waves(it: Call, env: Env, kernel: Kernel) -> Tuple[Optional[int], str, int]:
    """``T.Persistent(domain, wave_size, index, group_size=8)``: the compiler's
    loop ``for w in range(waves)`` over ``ceil(padded / wave_size)`` waves, the
    padded domain grouping the last dimension by ``min(group_size, last)``
    (src/ir.cc PersistentFor).  Its body is guarded by two ``if``: the wave's
    tile inside the padded domain, and the last coordinate inside the last
    dimension; the analyzer removes the first when the padded domain is a
    multiple of wave_size (the index a block index below wave_size) and the
    second when the last dimension is a multiple of the group.  Each guard
    left is a scalar node of the loop's scheduler, and the flag ids are
    counted by version counters, which take the same ids (measured: 64 tiles
    on 8 cores, no guard; on 6 cores one; a [16, 3] domain grouped by 2, one
    on 8 cores and two on 6).  Modelled: two or more waves, the index a block
    index below wave_size."""
    args: Dict[str, Expr] = dict(zip(_PERSISTENT_ARGS, it.args, strict=False))
    args.update(it.kwargs)
    domain = args.get("domain")
    items = domain.items if isinstance(domain, TupleExpr) else ()
    dims = [env.eval_int(d) for d in items]
    wave = env.eval_int(args["wave_size"]) if "wave_size" in args else None
    group = env.eval_int(args.get("group_size", Const(8)))
    unknown = "the trip count of the T.Persistent loop"
    if not dims or wave is None or group is None or wave <= 0 or any(d is None for d in dims):
        return None, unknown, False
    known = [d for d in dims if d is not None]  # all of them
    last = known[-1]
    g = max(1, min(group, last))
    padded = -(-last // g) * g
    for d in known[:-1]:
        padded *= d
    waves = -(-padded // wave)
    grid = [env.eval_int(e) for e in kernel.grid]
    if waves < 2:
        return waves, f"a T.Persistent loop of {waves} wave", 0
    if wave not in grid:
        return waves, "a T.Persistent index that is not a block index below wave_size", 0
    return waves, "", (padded % wave != 0) + (last % g != 0)


def _flatten(x: Union[Task, LoopUnit, OuterUnit]) -> List[Task]:
    if isinstance(x, OuterUnit):
        return [t for y in x.nodes for t in _flatten(y)]
    if isinstance(x, LoopUnit):
        return list(x.body)
    return [x]


def _plan_loop(loop: Loop, loop_id: int, kernel: Kernel, env: Env, memory: Dict[str, str],
               annotated: Dict[str, int], versions: Dict[str, int],
               ranges: List[Tuple[str, int, int]], loop_bufs: List[str]) -> Tuple[LoopUnit, bool]:
    """Schedule one pipelined loop; fills ``versions``/``ranges``/``loop_bufs``.
    Returns the unit and whether its versions are the compiler's."""
    start = env.eval_int(loop.start) if loop.start is not None else 0
    stop = env.eval_int(loop.stop)
    extent = (stop - (start or 0)) if stop is not None else _UNKNOWN_EXTENT
    num_stages = env.eval_int(loop.num_stages) if loop.num_stages is not None else None
    tainted = _loop_tainted(loop)
    body_stmts = _group_vf_blocks(loop.body, memory)
    src_body = [t for t in (_make_task(s, memory, "loop") for s in body_stmts) if t is not None]
    for t in src_body:
        t.loop_id = loop_id
    own, eligible = _loop_buffers(src_body, memory)
    extras = [k for k, _ in loop.annotations]
    if loop.order is not None:
        extras.append("order")
    if loop.stage is not None:
        extras.append("stage")
    schedule = schedule_loop(
        src_body, kernel, env, memory, annotated, eligible, max(1, num_stages or 1),
        lambda a, b, cross: _conflict(a, b, memory, cross, tainted), extras,
        _unplaced(body_stmts, memory))
    if schedule.exact:
        body = [src_body[i] for i in schedule.order]
    else:
        body = _levels(src_body, memory, tainted)
    source_order = tuple(next(i for i, u in enumerate(src_body) if u is t) for t in body)
    exact = _loop_versions(own, eligible, annotated, dict(schedule.versions),
                           max(1, num_stages or 1), versions, ranges, loop_bufs)
    return LoopUnit(loop, loop_id, src_body, body, schedule, extent, tainted,
                    source_order), exact


def _loop_buffers(src_body: Sequence[Task], memory: Dict[str, str]
                  ) -> Tuple[List[str], List[str]]:
    """The loop's on-chip buffers, and those that are multi-buffer eligible:
    written before any read in an iteration (fully redefined each one)."""
    own: List[str] = []
    for t in src_body:
        for b in list(t.writes) + list(t.reads):
            if _mem(b, memory) not in ("GM", "REG") and b not in own:
                own.append(b)
    eligible = []
    for b in own:
        first = next((t for t in src_body if b in t.writes or b in t.reads), None)
        if first is not None and b in first.writes and \
                (b not in first.reads or _simd_writes_first(first.stmt, b)):
            eligible.append(b)
    return own, eligible


def _simd_writes_first(stmt: Stmt, buf: str) -> bool:
    """Whether a VF block grouped into one task ("vf": intrinsics, or several
    T.Parallel loops) stores to ``buf`` before it loads from it, in the order
    the compiler's write-first check visits the lowered block: statements in
    order, a call's arguments in order (a store intrinsic's address is its
    first argument), a buffer store's value before the store."""
    if stmt.kind != "vf":
        return False

    def first(e: Optional[Expr], store: bool) -> Optional[bool]:
        if isinstance(e, Subscript):
            base = e.value
            while isinstance(base, Subscript):
                base = base.value
            if isinstance(base, Name) and base.id == buf:
                return store
            return None
        if isinstance(e, Call):
            stored = e.func.rsplit(".", 1)[-1] in _SIMD_STORES
            args = list(e.args) + [v for _, v in e.kwargs]
            for i, a in enumerate(args):
                got = first(a, stored and i == 0)
                if got is not None:
                    return got
        return None

    for st in walk_stmts(stmt.children):
        got = first(st.call if st.kind == "call" else st.value if st.kind in ("bind", "store")
                    else None, False)
        if got is None and st.kind == "store" and any(a.buffer == buf for a in st.writes):
            got = True  # a T.Parallel store: its value is visited before the store
        if got is not None:
            return got
    return False


def _unplaced(body_stmts: Sequence[Stmt], memory: Dict[str, str]) -> List[str]:
    """Loop statements that do work the model cannot place on a pipe (an
    unknown T.* call, a loop of them): the compiler schedules them, so no
    order that leaves them out can be claimed as its order."""
    unseen = []
    for st in body_stmts:
        if classify(st, memory) is not None:
            continue
        vf = next((sc for sc in st.scope if sc.endswith("VF")), None)
        if vf is not None:
            unseen.append(f"a {vf} block of intrinsics")
        elif st.kind in ("call", "loop", "serial", "macro", "if"):
            label = st.label if len(st.label) <= 40 else st.label[:39] + "…"
            unseen.append(f"`{label}`")
    return unseen


def _loop_versions(own: Sequence[str], eligible: Sequence[str], annotated: Dict[str, int],
                   chosen: Dict[str, int], bound: int, versions: Dict[str, int],
                   ranges: List[Tuple[str, int, int]], loop_bufs: List[str]) -> bool:
    """Each buffer's versions: annotated (when eligible; else the annotation
    does nothing), chosen by the scheduler, or, without its answer, a range up
    to ``bound``; False when a range stands in for a version count."""
    exact = True
    for b in own:
        if b not in loop_bufs:
            loop_bufs.append(b)
        if b in annotated and b in eligible:
            versions[b] = annotated[b]
        elif b in annotated:
            versions[b] = 1  # not multi-buffer eligible: the annotation does nothing
        elif b in eligible and b in chosen:
            versions[b] = chosen[b]
        elif b in eligible:
            exact = False
            ranges.append((b, 1, bound))
            versions[b] = bound
        else:
            versions[b] = 1
    return exact


def _root_order(nodes: Sequence[Union[Task, LoopUnit, OuterUnit]], kernel: Kernel, env: Env,
                memory: Dict[str, str], unseen: List[str]
                ) -> Tuple[List[int], str, Optional[RootInput], Tuple[int, ...]]:
    """The root list's order (indices into ``nodes``): the compiler's
    makespan-minimising schedule when every node is modelled, else the source
    order, with the reason; and the scheduler's input and start times."""
    n = len(nodes)
    src = list(range(n))
    if n <= 1:
        return src, "", None, ()
    if unseen:
        return src, (f"the kernel body's order is the source order "
                     f"({unseen[0]} is not modelled)"), None, ()
    try:
        rnodes = [_node_of(x, kernel, env, memory) for x in nodes]
        inp = build_root_input(rnodes, lambda a, b, cross: _conflict(a, b, memory, False, set()))
    except Unmodelled as exc:
        return src, f"the kernel body's order is the source order ({exc})", None, ()
    times = solve_root(inp)
    if times is None:
        return src, "the kernel body's order is the source order (no z3-solver)", inp, ()
    return sorted(range(n), key=lambda i: (times[i], i)), "", inp, times


def _list_nodes(stmts: Sequence[Stmt], loop_stmts: Sequence[Stmt], kernel: Kernel, env: Env,
                memory: Dict[str, str], annotated: Dict[str, int], state: "_PlanState",
                ) -> Tuple[List[Union[Task, LoopUnit]], List[str]]:
    """Tasks and scheduled pipelined loops of a statement list (source order),
    and the statements doing work the model does not place."""
    nodes: List[Union[Task, LoopUnit]] = []
    unseen: List[str] = []
    for s in _group_vf_blocks(stmts, memory):
        if any(s is ls for ls in loop_stmts) and s.loop is not None:
            unit, ok = _plan_loop(s.loop, len(state.units), kernel, env, memory, annotated,
                                  state.versions, state.ranges, state.loop_bufs)
            state.exact = state.exact and ok
            state.units.append(unit)
            nodes.append(unit)
            continue
        t = _task_or_unseen(s, memory, unseen)
        if t is not None:
            nodes.append(t)
    return nodes, unseen


def _task_or_unseen(s: Stmt, memory: Dict[str, str], unseen: List[str]) -> Optional[Task]:
    """The task of a statement outside the pipelined loops, or None; a
    statement doing work the model does not place is named in ``unseen``."""
    t = _make_task(s, memory, "pre")
    if t is None and s.kind in ("call", "loop", "serial", "macro", "if"):
        unseen.append(f"`{s.label if len(s.label) <= 40 else s.label[:39] + '…'}`")
    return t


@dataclass
class _PlanState:
    versions: Dict[str, int] = field(default_factory=dict)
    ranges: List[Tuple[str, int, int]] = field(default_factory=list)
    loop_bufs: List[str] = field(default_factory=list)
    units: List[LoopUnit] = field(default_factory=list)
    exact: bool = True


def plan_ascend(kernel: Kernel, env: Env, loops: Sequence[Loop] = ()) -> Optional[AscendPlan]:
    """Every pipelined loop of the kernel's root list scheduled, the root
    list ordered, the sync points InsertSync keeps, their flag ids and the
    calls after RewriteFlagToBuf; None without a pipelined loop."""
    memory = buffer_memory(kernel)
    container, loop_stmts, outer_stmt, root_stmts, nest_note = _root_list(kernel, loops)
    if not loop_stmts:
        return None
    state = _PlanState()
    nodes, unseen, outer = _root_nodes(container, loop_stmts, outer_stmt, root_stmts, kernel,
                                       env, memory, state)
    order, root_note, root_input, root_times = _root_order(nodes, kernel, env, memory, unseen)
    tasks = _program_order(nodes, order)
    points = _sync_points(state.units, outer, tasks, memory, state.versions)
    allocations, cross_failed = _allocate(points, tasks)
    calls = _materialize(points, allocations, tasks, {u.loop_id: u.extent for u in state.units},
                         outer.extent if outer is not None else 1,
                         outer.var if outer is not None else "")
    calls, events, spilled, mutex_used = _rewrite_flag_to_buf(
        calls, any(t.gemm_l1 for t in tasks))
    first = state.units[0]
    outer_note = outer.note if outer is not None else nest_note
    result = _result(kernel, state, first.schedule, calls, events, spilled, mutex_used,
                     [outer_note, root_note])
    return AscendPlan(result, tasks, points, allocations, calls, first.loop, first.loop.var,
                      first.extent, events, spilled, mutex_used, cross_failed,
                      tuple(_in_alloc_order(state.ranges, kernel, lambda r: r[0])),
                      first.schedule, first.source_order, state.units, root_note, root_input,
                      root_times, outer)


def _root_nodes(container: Sequence[Stmt], loop_stmts: Sequence[Stmt],
                outer_stmt: Optional[Stmt], root_stmts: Sequence[Stmt], kernel: Kernel,
                env: Env, memory: Dict[str, str], state: _PlanState
                ) -> Tuple[List[Union[Task, LoopUnit, OuterUnit]], List[str], Optional[OuterUnit]]:
    """The root list's nodes in source order (tasks, scheduled pipelined loops
    and the serial loop around them as one node), the statements doing work
    the model does not place, and the serial loop."""
    annotated = annotated_versions(kernel, env)
    if outer_stmt is None:
        found, not_placed = _list_nodes(container, loop_stmts, kernel, env, memory, annotated,
                                        state)
        return list(found), not_placed, None
    inner, inner_unseen = _list_nodes(container, loop_stmts, kernel, env, memory,
                                      annotated, state)
    outer = _plan_outer(outer_stmt, inner, kernel, env, memory, annotated, inner_unseen,
                        state)
    persistent = isinstance(outer.loop.iterator, Call) and \
        outer.loop.iterator.func == "T.Persistent"
    outer.var = "w" if persistent else outer.loop.var
    nodes: List[Union[Task, LoopUnit, OuterUnit]] = []
    unseen: List[str] = []
    for s in root_stmts:
        if s is outer_stmt:
            nodes.append(outer)
            continue
        t = _task_or_unseen(s, memory, unseen)
        if t is not None:
            nodes.append(t)
    return nodes, unseen, outer


def _program_order(nodes: Sequence[Union[Task, LoopUnit, OuterUnit]], order: Sequence[int]
                   ) -> List[Task]:
    """Every task in program order (the root list's ``order``, each loop's
    body in its scheduled order), numbered, with its region."""
    tasks: List[Task] = []
    seen_loop = False
    for i in order:
        x = nodes[i]
        if isinstance(x, Task):
            x.region = "post" if seen_loop else "pre"
        else:
            seen_loop = True
        tasks.extend(_flatten(x))
    for i, t in enumerate(tasks):
        t.index = i
        if t.outer and t.region != "loop":
            t.region = "outer"
    return tasks


def _sync_points(units: Sequence[LoopUnit], outer: Optional[OuterUnit], tasks: List[Task],
                 memory: Dict[str, str], versions: Dict[str, int]) -> List[SyncPoint]:
    """The sync points InsertSync keeps: each pipelined loop's, then the
    serial loop's (pruned by what the loops already order), then the root
    list's (pruned by every level's same-iteration order)."""
    points: List[SyncPoint] = []
    closures: List[Closure] = []
    for u in units:
        emitted, closure = _level_points(u.body, memory, u.tainted, versions, "loop",
                                         u.extent, [])
        points.extend(emitted)
        closures.append(closure)
    if outer is not None:
        emitted, closure = _level_points([t for t in tasks if t.outer], memory, outer.tainted,
                                         versions, "outer", outer.extent, list(closures))
        points.extend(emitted)
        closures.append(closure)
    root_closure = Closure()
    for closure in closures:
        for e in closure.edges():
            if e[2] == 0:
                root_closure.saturate(e, 0)
    _same_pipe_edges(root_closure, tasks, 0)
    points.extend(_optimise(_collect_root(tasks, memory), root_closure, 0))
    return points


def _level_points(body: List[Task], memory: Dict[str, str], tainted: Set[str],
                  versions: Dict[str, int], level: str, extent: int, inner: Sequence[Closure]
                  ) -> Tuple[List[SyncPoint], Closure]:
    """The kept sync points of one loop level (``body`` in program order) and
    the closure of the order they and the issue order give; ``inner``: the
    closures of the loops inside it (their same-iteration order holds here)."""
    collected = _collect(body, memory, tainted, versions, level)
    max_distance = max([1] + [p.distance for p in collected])
    closure = Closure()
    for c in inner:
        for e in c.edges():
            if e[2] == 0:
                closure.saturate(e, max_distance)
    _same_pipe_edges(closure, body, max_distance)
    emitted = _optimise(collected, closure, max_distance)
    _optimise_versions(emitted, closure, extent)
    return emitted, closure


_X = TypeVar("_X")


def _in_alloc_order(items: Sequence[_X], kernel: Kernel, name: Callable[[_X], str]) -> List[_X]:
    """``items`` sorted by their buffer's allocation order (unknown ones last)."""
    alloc_order = [a.name for a in kernel.allocs]
    return sorted(items, key=lambda x: alloc_order.index(name(x))
                  if name(x) in alloc_order else len(alloc_order))


def _result(kernel: Kernel, state: _PlanState, schedule: AscendSchedule,
            calls: List[SyncCall],
            events: Dict[str, Tuple[int, bool]], spilled: List[Tuple[str, int, int, int]],
            mutex_used: int, notes: Sequence[str]) -> AscendResult:
    """The kernel's AscendResult; ``notes``: why the serial loop's and the
    root list's orders are not the compiler's ("" when they are)."""
    barriers = tuple(sorted({c.pipes[0] for c in calls if c.name == "barrier"}))
    # The cross-core slots the code uses (the cube side's id + 16 is the
    # second vector core's copy of a slot): fewer than the reserved rings when
    # a loop runs fewer iterations than a ring has ids (measured: two 8-id
    # rings over 4 waves use slots 0..11).
    cross = {i % CROSS_CORE_FLAGS for c in calls if c.name.startswith("intra")
             for i in c.ids()}
    loop_bufs = _in_alloc_order(state.loop_bufs, kernel, lambda b: b)
    said = [n for n in (schedule.reason, *notes) if n]
    return AscendResult(
        versions=tuple((b, state.versions[b]) for b in loop_bufs),
        versions_exact=state.exact,
        hard_events=tuple((ev, n, sp) for ev, (n, sp) in events.items()),
        spills=tuple(spilled),
        pipe_barriers=barriers,
        cross_core_slots=len(cross),
        mutex_ids=mutex_used,
        schedule_exact=schedule.exact and not any(notes),
        schedule_note="; ".join(said),
        ii=schedule.ii if schedule.exact else None,
    )


def _collect(body: List[Task], memory: Dict[str, str], tainted: Set[str],
             versions: Dict[str, int], level: str) -> List[SyncPoint]:
    out = []
    n = len(body)
    for i in range(n):
        for j in range(n):
            a, b = body[i], body[j]
            if level == "outer" and a.region == "loop" and b.region == "loop" \
                    and a.loop_id == b.loop_id:
                continue  # the inner loop's own
            same = i < j
            for buf, kind in _conflict(a, b, memory, not same, tainted):
                v = versions.get(buf, 1)
                if same:
                    dist = 0
                else:
                    if kind == "RAW" and v > 1:
                        continue
                    dist = v if kind in ("WAR", "WAW") and v > 1 else 1
                out.append(SyncPoint((a.index, False), (b.index, True), dist, v, level,
                                     buf, kind))
    return out


def _collect_root(seq: List[Task], memory: Dict[str, str]) -> List[SyncPoint]:
    """Same-pass hazards of the root list (``seq`` in program order), except
    those inside one loop (the loop level has them)."""
    out = []
    for i, a in enumerate(seq):
        for b in seq[i + 1:]:
            if a.region == "loop" and b.region == "loop" and a.loop_id == b.loop_id \
                    or a.outer and b.outer:
                continue
            for buf, kind in _conflict(a, b, memory, False, set()):
                out.append(SyncPoint((a.index, False), (b.index, True), 0, 1, "root", buf, kind))
    return out


def _site_key(t: Task) -> Tuple[str, str]:
    return (t.core, t.pipe)


def _same_pipe_edges(closure: Closure, tasks: List[Task], max_distance: int,
                     loop_region_first: bool = False) -> None:
    groups: Dict[Tuple[str, str], List[Tuple[int, bool]]] = {}
    for t in tasks:
        for at_begin in (True, False):
            groups.setdefault(_site_key(t), []).append((t.index, at_begin))

    def order(site: Tuple[int, bool]) -> Tuple[int, int]:
        return (site[0], 0 if site[1] else 1)

    for sites in groups.values():
        for lhs in sites:
            for rhs in sites:
                if lhs == rhs:
                    continue
                lo = 0 if order(lhs) < order(rhs) else 1
                for d in range(lo, max_distance + 1):
                    closure.saturate((lhs, rhs, d, False), max_distance)


def _edge_sort_key(p: SyncPoint) -> Tuple[int, Tuple[int, ...], Tuple[int, int]]:
    src = (p.src[0], 0 if p.src[1] else 1)
    dst = (p.dst[0], 0 if p.dst[1] else 1)
    return (p.distance, tuple(-x for x in src), dst)


def _optimise(points: List[SyncPoint], closure: Closure, max_distance: int) -> List[SyncPoint]:
    out = []
    seen = set()
    for p in sorted(points, key=_edge_sort_key):
        e = (p.src, p.dst, p.distance, True)
        if closure.contains(e) or (e, p.num_versions) in seen:
            continue
        seen.add((e, p.num_versions))
        closure.saturate(e, max_distance)
        out.append(p)
    return out


def _optimise_versions(points: List[SyncPoint], closure: Closure, extent: int) -> None:
    for p in points:
        if p.distance > 0:
            continue
        if extent <= p.num_versions:
            continue
        md = closure.min_distance(p.dst, p.src)
        if md is None or md > p.num_versions or md <= 0:
            continue
        p.num_versions = md


def _task_pipe(tasks: List[Task], site: Tuple[int, bool]) -> Tuple[str, str]:
    t = tasks[site[0]]
    return t.core, t.pipe


def _uses_flag(p: SyncPoint, tasks: List[Task]) -> bool:
    return _task_pipe(tasks, p.src) != _task_pipe(tasks, p.dst)


def _is_cross(p: SyncPoint, tasks: List[Task]) -> bool:
    return tasks[p.src[0]].core != tasks[p.dst[0]].core


def _domain(p: SyncPoint, tasks: List[Task]) -> str:
    if _is_cross(p, tasks):
        return "Cube-Vector"
    return hard_event(tasks[p.src[0]].pipe, tasks[p.dst[0]].pipe)


def _allocate(points: List[SyncPoint], tasks: List[Task]) -> Tuple[List[Allocation], bool]:
    allocations: List[Allocation] = []
    next_id: Dict[str, int] = {}
    cross_slots = [False] * CROSS_CORE_FLAGS
    failed = False
    required: Dict[str, int] = {}
    for p in points:
        if _uses_flag(p, tasks):
            d = _domain(p, tasks)
            required[d] = required.get(d, 0) + p.num_versions
    for cross_iter in (True, False):
        cands = [i for i, p in enumerate(points)
                 if _uses_flag(p, tasks) and (p.distance > 0) == cross_iter]
        cands.sort(key=lambda i: -points[i].num_versions)
        for i in cands:
            p = points[i]
            dom = _domain(p, tasks)
            if dom == "Cube-Vector":
                shared = _cross_core_ring(p, allocations, points, tasks, required)
                if shared is not None:
                    p.base = shared.base
                    p.allocation = allocations.index(shared)
                    shared.points.append(i)
                    required[dom] -= p.num_versions
                    continue
                base = -1
                for b in range(0, CROSS_CORE_FLAGS - p.num_versions + 1):
                    if not any(cross_slots[b:b + p.num_versions]):
                        base = b
                        break
                if base < 0:
                    failed = True
                    base = CROSS_CORE_FLAGS
                else:
                    for k in range(p.num_versions):
                        cross_slots[base + k] = True
            else:
                base = next_id.get(dom, 0)
                next_id[dom] = base + p.num_versions
            p.base = base
            p.allocation = len(allocations)
            allocations.append(Allocation([i], p.num_versions, cross_iter, base, dom))
    return allocations, failed


def _cross_core_ring(p: SyncPoint, allocations: List[Allocation], points: List[SyncPoint],
                     tasks: List[Task], required: Dict[str, int]) -> Optional[Allocation]:
    """InsertSync lets a same-iteration cube<->vector handshake share the ring of
    the loop-carried flag going the other way (they alternate on one flag) when
    the 16 cross-core slots would not suffice otherwise."""
    if p.distance > 0 or required.get("Cube-Vector", 0) <= CROSS_CORE_FLAGS:
        return None
    for a in allocations:
        if a.domain != "Cube-Vector" or not a.cross_iter or len(a.points) != 1:
            continue
        q = points[a.points[0]]
        if (q.num_versions == p.num_versions and q.level == p.level
                and tasks[q.src[0]].core == tasks[p.dst[0]].core
                and tasks[q.dst[0]].core == tasks[p.src[0]].core):
            return a
    return None


def _materialize(points: List[SyncPoint], allocations: List[Allocation],
                 tasks: List[Task], extents: Dict[int, int], outer_extent: int = 1,
                 outer_var: str = "") -> List[SyncCall]:
    """The sync calls of ``points``, in program order.  An id of a loop inside
    the serial loop counts the flattened iteration (outer * trip + inner)."""
    before: Dict[int, List[SyncCall]] = {}
    after: Dict[int, List[SyncCall]] = {}
    for p in points:
        _point_calls(p, tasks, extents, outer_extent, outer_var, before, after)
    prefix, suffix = _prime_and_drain(points, allocations, tasks)
    out: List[SyncCall] = list(prefix)
    for t in tasks:
        for c in before.get(t.index, []) + after.get(t.index, []):
            out.append(replace(c, loop_id=t.loop_id))
    out.extend(suffix)
    return out


def _guard(p: SyncPoint, site: Tuple[int, bool], tasks: List[Task]) -> str:
    """A point of an outer level next to a task of an inner loop runs in that
    loop's first (wait) or last (notify) iteration only."""
    t = tasks[site[0]]
    if p.level == "root" and t.region in ("loop", "outer") or \
            p.level == "outer" and t.region == "loop":
        return "first" if site[1] else "last"
    return ""


def _point_calls(p: SyncPoint, tasks: List[Task], extents: Dict[int, int], outer_extent: int,
                 outer_var: str, before: Dict[int, List[SyncCall]],
                 after: Dict[int, List[SyncCall]]) -> None:
    """Add the calls of one sync point: those before its consumer task to
    ``before`` (prepended, so the tightest point ends up nearest) and those
    after its producer to ``after``."""
    s, d = tasks[p.src[0]], tasks[p.dst[0]]
    vers = p.num_versions if p.level in ("loop", "outer") else 1
    ext = (extents.get(s.loop_id, 1) if p.level == "loop"
           else outer_extent if p.level == "outer" else 1)
    flat = ""
    if p.level == "loop" and s.outer:
        inner = ext
        ext = inner * outer_extent
        if vers > 1 and inner % vers:
            flat = f"(({outer_var} * {inner}) + {{var}})"
    src_guard, dst_guard = _guard(p, p.src, tasks), _guard(p, p.dst, tasks)

    def wait(name: str, pipes: Tuple[str, ...], base: int) -> None:
        before.setdefault(d.index, []).insert(0, SyncCall(
            name, d.core, pipes, base, vers, d.region, dst_guard, task=d.index, extent=ext,
            flat=flat, level=p.level))

    def notify(name: str, pipes: Tuple[str, ...], base: int) -> None:
        after.setdefault(s.index, []).append(SyncCall(
            name, s.core, pipes, base, vers, s.region, src_guard, task=s.index, after=True,
            extent=ext, flat=flat, level=p.level))

    if not _is_cross(p, tasks) and s.pipe == d.pipe:
        if s.pipe not in _IMPLICIT_ORDER:
            wait("barrier", (s.pipe,), 0)
        return
    pp, cp = hard_event(s.pipe, d.pipe).split("_", 1)
    if not _is_cross(p, tasks):
        notify("notify", (pp, cp), p.base)
        wait("wait", (pp, cp), p.base)
        return
    # Cross-core: the cube side addresses one flag per vector core (id + 16).
    if s.core == AIV:
        notify("intra_arrive", (pp,), p.base)
        for sid in range(NUM_AIV_SUBCORES):
            wait("intra_wait", (cp,), p.base + 16 * sid)
    else:
        for sid in range(NUM_AIV_SUBCORES):
            notify("intra_arrive", (pp,), p.base + 16 * sid)
        wait("intra_wait", (cp,), p.base)


def _prime_and_drain(points: List[SyncPoint], allocations: List[Allocation],
                     tasks: List[Task]) -> Tuple[List[SyncCall], List[SyncCall]]:
    """Every id of a loop-carried flag is notified once at kernel entry
    (prime) and waited once at exit (drain)."""
    prefix: List[SyncCall] = []
    suffix: List[SyncCall] = []
    for a in allocations:
        if not a.cross_iter:
            continue
        p = points[a.points[0]]
        s, d = tasks[p.src[0]], tasks[p.dst[0]]
        pp, cp = hard_event(s.pipe, d.pipe).split("_", 1)
        ids = range(a.base, a.base + a.num_versions)
        both = [i + 16 * sid for sid in range(NUM_AIV_SUBCORES) for i in ids]
        if not _is_cross(p, tasks):
            for i in ids:
                prefix.append(SyncCall("notify", s.core, (pp, cp), i, 1, "prefix"))
                suffix.append(SyncCall("wait", s.core, (pp, cp), i, 1, "suffix"))
        elif s.core == AIV:
            prefix.extend(SyncCall("intra_arrive", AIV, (pp,), i, 1, "prefix") for i in ids)
            suffix.extend(SyncCall("intra_wait", AIC, (cp,), i, 1, "suffix") for i in both)
        else:
            prefix.extend(SyncCall("intra_arrive", AIC, (pp,), i, 1, "prefix") for i in both)
            suffix.extend(SyncCall("intra_wait", AIV, (cp,), i, 1, "suffix") for i in ids)
    return prefix, suffix


def _knapsack_keep(blocks: List[Tuple[int, int]]) -> List[bool]:
    cap = INTRA_CORE_FLAGS
    parent = [-2] * (cap + 1)
    prev = [-1] * (cap + 1)
    parent[0] = -1
    for i, (lo, hi) in enumerate(blocks):
        w = hi - lo + 1
        if w > cap:
            continue
        for s in range(cap, w - 1, -1):
            if parent[s] == -2 and parent[s - w] != -2:
                parent[s] = i
                prev[s] = s - w
    best = 0
    for s in range(cap, -1, -1):
        if parent[s] != -2:
            best = s
            break
    kept = [False] * len(blocks)
    s = best
    while s > 0:
        kept[parent[s]] = True
        s = prev[s]
    return kept


def _call_range(c: SyncCall) -> Tuple[int, int]:
    ids = c.ids()
    return ids[0], ids[-1]


def _rewrite_flag_to_buf(calls: List[SyncCall], gemm_l1: bool
                         ) -> Tuple[List[SyncCall], Dict[str, Tuple[int, bool]],
                                    List[Tuple[str, int, int, int]], int]:
    """Apply RewriteFlagToBuf; per core (each core's code is its own flag space
    in the compiler's view of one hard event name, so ranges are merged)."""
    order: List[str] = []
    ranges: Dict[str, List[Tuple[int, int]]] = {}
    for c in calls:
        if c.name in ("notify", "wait"):
            ev = "_".join(c.pipes)
            if ev not in ranges:
                order.append(ev)
                ranges[ev] = []
            ranges[ev].append(_call_range(c))
    mutex = GEMM_L1_MUTEX_IDS if gemm_l1 else 0
    assign: Dict[str, List[Tuple[int, int, bool, int]]] = {}
    events: Dict[str, Tuple[int, bool]] = {}
    spilled: List[Tuple[str, int, int, int]] = []
    any_spill = False
    for ev in order:
        blocks: List[Tuple[int, int]] = []
        for lo, hi in sorted(ranges[ev]):
            if blocks and lo <= blocks[-1][1]:
                blocks[-1] = (blocks[-1][0], max(blocks[-1][1], hi))
            else:
                blocks.append((lo, hi))
        total = sum(hi - lo + 1 for lo, hi in blocks)
        legal = all(hi < INTRA_CORE_FLAGS for _, hi in blocks)
        if total <= INTRA_CORE_FLAGS and legal:
            events[ev] = (total, False)
            continue
        kept = [True] * len(blocks) if total <= INTRA_CORE_FLAGS else _knapsack_keep(blocks)
        run = 0
        out = []
        for (lo, hi), k in zip(blocks, kept, strict=False):
            if k:
                out.append((lo, hi, True, run - lo))
                run += hi - lo + 1
            else:
                any_spill = True
                out.append((lo, hi, False, mutex - lo))
                spilled.append((ev, lo, hi, mutex))
                mutex += hi - lo + 1
        assign[ev] = out
        # The ids still in use after the rewrite (0 when every block spilled).
        events[ev] = (sum(hi - lo + 1 for lo, hi, k, _ in out if k), not all(kept))
    new_calls: List[SyncCall] = []
    for c in calls:
        ev = "_".join(c.pipes)
        if c.name not in ("notify", "wait") or ev not in assign:
            new_calls.append(c)
            continue
        lo, hi = _call_range(c)
        blk = next(b for b in assign[ev] if b[0] <= lo and hi <= b[1])
        base = c.base + blk[3]
        if blk[2]:
            new_calls.append(replace(c, base=base))
        else:
            pp, cp = c.pipes
            new_calls.append(replace(c, name="lock", pipes=(pp if c.name == "notify" else cp,),
                                     base=base, blocking=c.name == "wait"))
    return new_calls, events, spilled, (mutex if any_spill else 0)


# --------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------


def ascend_diagnostics(kernel: Kernel, plan: AscendPlan) -> List[Diagnostic]:
    out: List[Diagnostic] = []
    loop = plan.loop
    span = loop.iter_span if loop is not None else kernel.name_span
    if not plan.result.versions_exact:
        return out
    caveat = ""
    if plan.schedule is not None and not plan.schedule.exact:
        caveat = (f" (the loop order is predicted, not the auto-scheduler's: "
                  f"{plan.schedule.reason}; the compiler's count may differ)")
    for ev, (kept, spilled) in plan.events.items():
        if not spilled:
            continue
        blocks = [(lo, hi, m) for e, lo, hi, m in plan.spilled_blocks if e == ev]
        slots = kept + sum(hi - lo + 1 for lo, hi, _ in blocks)
        what = ", ".join(f"event ids {lo}..{hi} → mutex {m}..{m + hi - lo}"
                         for lo, hi, m in blocks)
        out.append(Diagnostic(
            code="TL301", severity="warning", span=span, kernel=kernel.name,
            message=(f"hard event {ev} needs {slots} flag slots but a core has "
                     f"{INTRA_CORE_FLAGS}: RewriteFlagToBuf turns {len(blocks)} sync "
                     f"point{'s' if len(blocks) != 1 else ''} ({what}) into blocking "
                     f"asc_lock/asc_unlock pairs, leaving {kept} event id"
                     f"{'s' if kept != 1 else ''} of {ev} in use; lower the buffer versions in "
                     f"T.annotate_buffer_versions or merge the statements that "
                     f"synchronise on {ev}{caveat}")))
    if plan.mutex_used > MUTEX_POOL:
        out.append(Diagnostic(
            code="TL302", severity="error", span=span, kernel=kernel.name,
            message=(f"spilled flags need {plan.mutex_used} mutex ids but the shared "
                     f"asc_lock pool has {MUTEX_POOL}"
                     f"{' (ids 0-1 held by gemm_l1)' if any(t.gemm_l1 for t in plan.tasks) else ''}"
                     f": RewriteFlagToBuf fails; reduce the buffer versions{caveat}")))
    if plan.cross_core_failed:
        need = sum(a.num_versions for a in plan.allocations if a.domain == "Cube-Vector")
        out.append(Diagnostic(
            code="TL303", severity="error", span=span, kernel=kernel.name,
            message=(f"cube↔vector synchronisation needs {need} cross-core flag slots "
                     f"but there are {CROSS_CORE_FLAGS}: InsertSync fails; reduce the "
                     f"versions of the buffers shared by the cube and vector cores")))
    return out


# --------------------------------------------------------------------------
# Preview
# --------------------------------------------------------------------------


def _id_text(c: SyncCall, var: str, extent: int, cast: bool) -> str:
    if c.where in ("loop", "outer") and c.versions > 1:
        v = c.versions
        extent = c.extent if c.extent > 1 else extent
        if c.flat:
            var = c.flat.format(var=var)
        if extent <= v:
            core = var
        elif v & (v - 1) == 0:
            core = f"({var} & {v - 1})"
        else:
            core = f"({var} % {v})"
        text = core if c.base == 0 else f"({core} + {c.base})"
    else:
        text = str(c.base)
    return f"static_cast<event_t>({text})" if cast else text


def render_call(c: SyncCall, var: str = "k", extent: int = 1 << 20) -> str:
    if c.name == "barrier":
        return f"asc_sync_pipe(PIPE_{c.pipes[0]});"
    if c.name in ("notify", "wait"):
        fn = "asc_sync_notify" if c.name == "notify" else "asc_sync_wait"
        return (f"{fn}(PIPE_{c.pipes[0]}, PIPE_{c.pipes[1]}, "
                f"{_id_text(c, var, extent, True)});")
    if c.name in ("intra_arrive", "intra_wait"):
        return f"asc_sync_{c.name}(PIPE_{c.pipes[0]}, {_id_text(c, var, extent, False)});"
    mode = "ASC_LOCK_BLOCK" if c.blocking else "ASC_LOCK_NON_BLOCK"
    i = _id_text(c, var, extent, False)
    return (f"asc_lock(PIPE_{c.pipes[0]}, {i}, {mode});\n"
            f"asc_unlock(PIPE_{c.pipes[0]}, {i}, {mode});")


def render_ascend_preview(kernel: Kernel, env: Env, loops: Sequence[Loop] = (),
                          plan: Optional[AscendPlan] = None) -> str:
    """The Ascend C synchronisation of the pipelined loop, as 0.1.15 emits it:
    per core, priming, the loop body's sync calls, draining.  Each task is
    shown as a comment where it runs (in the scheduled order), between the
    waits before it and the notifies after it."""
    if plan is None:
        plan = plan_ascend(kernel, env, loops)
    if plan is None:
        return ""
    lines: List[str] = []
    cores = [c for c in (AIC, AIV) if any(t.core == c for t in plan.tasks)]
    for core in cores:
        if len(cores) > 1:
            lines.append(f"// {core}")
        stack: List[object] = []  # "O" (the serial loop) and/or an inner loop id
        for obj in _core_items(plan, core):
            _enter(lines, stack, _nest(plan, obj), plan)
            _render_item(lines, stack, obj, plan)
        _enter(lines, stack, [], plan)
    return "\n".join(lines) + ("\n" if lines else "")


def _core_items(plan: AscendPlan, core: str) -> List[Union[SyncCall, Task]]:
    """One core's calls and tasks in program order: priming, each task
    between the waits before it and the notifies after it, draining."""
    calls = [c for c in plan.calls if c.core == core]
    items: List[Union[SyncCall, Task]] = [c for c in calls if c.task < 0 and c.where == "prefix"]
    for t in plan.tasks:
        if t.core != core:
            continue
        items.extend(c for c in calls if c.task == t.index and not c.after)
        items.append(t)
        items.extend(c for c in calls if c.task == t.index and c.after)
    items.extend(c for c in calls if c.task < 0 and c.where != "prefix")
    return items


def _nest(plan: AscendPlan, obj: Union[SyncCall, Task]) -> List[object]:
    """The loops around a task or call, outermost first: "O" for the serial
    loop, an inner loop's id ([] at the kernel's top level)."""
    t = obj if isinstance(obj, Task) else (plan.tasks[obj.task] if obj.task >= 0 else None)
    if t is None:
        return []
    where = obj.region if isinstance(obj, Task) else obj.where
    out: List[object] = ["O"] if t.outer and plan.outer is not None else []
    if where == "loop":
        out.append(t.loop_id)
    return out


def _loop_head(plan: AscendPlan, level: object) -> Tuple[str, int]:
    """(variable, trip count) of a level of :func:`_nest`."""
    if level == "O" and plan.outer is not None:
        return plan.outer.var, plan.outer.extent
    loop_of = {u.loop_id: (u.loop.var, u.extent) for u in plan.units}
    return loop_of.get(level if isinstance(level, int) else -1, (plan.loop_var, plan.extent))


def _enter(lines: List[str], stack: List[object], want: List[object], plan: AscendPlan) -> None:
    """Close the loops of ``stack`` that ``want`` leaves and open the ones it adds."""
    keep = 0
    while keep < min(len(stack), len(want)) and stack[keep] == want[keep]:
        keep += 1
    while len(stack) > keep:
        stack.pop()
        lines.append("  " * len(stack) + "}")
    while len(stack) < len(want):
        v, e = _loop_head(plan, want[len(stack)])
        lines.append("  " * len(stack) + f"for (int32_t {v} = 0; {v} < {e}; ++{v}) {{")
        stack.append(want[len(stack)])
        if stack[-1] == "O" and plan.outer is not None and plan.outer.guards:
            lines.append("  " * len(stack) + "// T.Persistent: the body below runs inside "
                         "`if (tile in range)`; ring ids count the iterations run "
                         "(<buffer>_version_counter)")


def _render_item(lines: List[str], stack: List[object], obj: Union[SyncCall, Task],
                 plan: AscendPlan) -> None:
    """A task as a comment, or a call (inside ``if`` when it is guarded: a
    root-level point's guard holds on every enclosing loop's first/last
    iteration, a serial loop's point on the inner loop's)."""
    ind = "  " * len(stack)
    if isinstance(obj, Task):
        label = obj.stmt.label if len(obj.stmt.label) <= 60 else obj.stmt.label[:59] + "…"
        lines.append(f"{ind}// {obj.pipe}: {label}  (line {obj.stmt.span.line})")
        return
    var, ext = _loop_head(plan, stack[-1]) if stack else (plan.loop_var, plan.extent)
    text = render_call(obj, var, ext)
    if not obj.guard:
        lines.extend(ind + ln for ln in text.splitlines())
        return
    conds = []
    for lv in (stack if obj.level == "root" else stack[-1:]):
        v, e = _loop_head(plan, lv)
        conds.append(f"{v} == 0" if obj.guard == "first" else f"{v} == {e - 1}")
    lines.append(f"{ind}if ({' && '.join(conds)}) {{")
    lines.extend(f"{ind}  {ln}" for ln in text.splitlines())
    lines.append(f"{ind}}}")


def call_sequence(plan: AscendPlan) -> List[Tuple[str, str, Tuple[str, ...], Tuple[int, ...]]]:
    """(core, call, pipes, ids over the loop) for every emitted call, per core in
    order: the form the parity tests compare with the compiler's source."""
    out = []
    for core in (AIC, AIV):
        for c in plan.calls:
            if c.core != core:
                continue
            name = {"notify": "asc_sync_notify", "wait": "asc_sync_wait",
                    "barrier": "asc_sync_pipe", "intra_arrive": "asc_sync_intra_arrive",
                    "intra_wait": "asc_sync_intra_wait", "lock": "asc_lock"}[c.name]
            out.append((core, name, tuple("PIPE_" + p for p in c.pipes),
                        c.ids()))
    return out
