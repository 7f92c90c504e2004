"""Pipeline planning: which statements of a ``T.Pipelined`` body are scheduled
units, and which stage/order each one gets.

This mirrors tilelang 0.1.15's ``tl.PipelinePlanning`` pass (and the parts of
``IfStmtBinding`` and ``ProducerConsumerWarpSpecialized`` that run before it)
on the frontend's statement model.  The rules, in the compiler's terms:

* The loop body is flattened (macro calls inline, an ``if`` without ``else``
  whose body has several statements becomes one guarded ``if`` per statement).
  Scalar binds that read no buffer written in the body are *replayable*: they
  take no order/stage slot.
* A statement is a *copy stage* when it is a pure copy from a global buffer into
  shared memory (a ``T.copy`` global->shared, or a ``T.Parallel`` nest whose
  stores are plain loads from global memory into shared).
* A statement that writes a buffer some copy stage reads (buffer level, closed
  transitively, only statements before the copy) is a *producer for copy*.
* Copies (and their producers) are placed right before their last consumer in
  stage 0; every other statement gets stage ``num_stages`` in source order.
  When all copies end up last in the order, they are rotated to the front and
  the other statements' stage drops to ``num_stages - 1``.

Nothing here raises on malformed input; unknown values give ``None`` fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from . import targets as targets_mod
from .model import (
    Access,
    Alloc,
    Attr,
    Call,
    Const,
    Expr,
    Kernel,
    Loop,
    LoopResult,
    Name,
    Opaque,
    ScheduledStmt,
    Slice,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
    is_im2col,
    walk_stmt,
)
from .values import Env

# Statement kinds that are tile operators (one call).
TILE_KINDS = frozenset({"copy", "gemm", "fill", "reduce", "atomic", "call"})
COMPOUND_KINDS = frozenset({"parallel", "serial", "loop", "pipelined", "if", "macro"})
# The scopes of CUDA shared memory: the ones MergeSharedMemoryAllocations packs
# ("shared.dyn") and the static ``__shared__`` ones.  Everything else named
# "shared.*" is another memory: tensor memory (``T.alloc_tmem``: "shared.tmem",
# its 4-byte address slot is added by LowerSharedTmem as static shared memory),
# mbarriers ("shared.barrier", counted with the warp-specialized path), and the
# Ascend on-chip buffers (L1, L0A/B/C: "shared.l1", "shared.l0a", ...).
SHARED_SCOPES = frozenset({"shared", "shared.dyn"})

# --------------------------------------------------------------------------
# Regions
# --------------------------------------------------------------------------

Interval = Tuple[Optional[int], Optional[int]]  # [lo, hi), None = unbounded


@dataclass(frozen=True)
class Region:
    """A buffer region; ``dims`` None means 'unknown extent' (conflicts with anything)."""

    buffer: str
    dims: Optional[Tuple[Interval, ...]]


def may_conflict(a: Region, b: Region) -> bool:
    """The compiler's MayConflict: disjoint only if some dimension's intervals
    are provably disjoint.  Unknown bounds never prove anything."""
    if a.dims is None or b.dims is None or len(a.dims) != len(b.dims):
        return True
    for (lo1, hi1), (lo2, hi2) in zip(a.dims, b.dims, strict=True):
        if hi1 is not None and lo2 is not None and hi1 <= lo2:
            return False
        if hi2 is not None and lo1 is not None and hi2 <= lo1:
            return False
    return True


def eval_int(env: Optional[Env], expr: Optional[Expr]) -> Optional[int]:
    """``expr``'s integer value in ``env`` (None: unknown); with no ``env`` only
    an integer constant is known.  Never raises."""
    if expr is None:
        return None
    if env is None:
        v = expr.value if isinstance(expr, Const) else None
        return int(v) if isinstance(v, int) else None
    try:
        return env.eval_int(expr)
    except Exception:  # never raise on bad code
        return None


def _shape(name: str, env: Optional[Env], allocs: Dict[str, Alloc]
           ) -> Optional[Tuple[Optional[int], ...]]:
    a = allocs.get(name)
    if a is None:
        return None
    return tuple(eval_int(env, s) for s in a.shape)


def _operand_region(acc: Access, env: Optional[Env], allocs: Dict[str, Alloc]) -> Region:
    """The region a tile operator's operand covers."""
    shape = _shape(acc.buffer, env, allocs)
    if acc.indices is None:
        if shape is None:
            return Region(acc.buffer, None)
        return Region(acc.buffer, tuple((0, s) for s in shape))
    dims: List[Interval] = []
    for i, ix in enumerate(acc.indices):
        dim = shape[i] if shape is not None and i < len(shape) else None
        if isinstance(ix, Slice):
            dims.append(_slice_bounds(ix, env, dim))
        else:
            # ``A[by * 128, k * 32]`` as a tile operand: the base of a region whose
            # extent comes from the other operand.
            lo = eval_int(env, ix)
            dims.append((lo, None))
    return Region(acc.buffer, tuple(dims))


def _slice_bounds(ix: Slice, env: Optional[Env], upper: Optional[int]) -> Interval:
    """``lo:hi`` of a subscript: a missing ``lo`` is 0, a missing ``hi`` is ``upper``."""
    lo = 0 if ix.lower is None else eval_int(env, ix.lower)
    return lo, (upper if ix.upper is None else eval_int(env, ix.upper))


def _base_point(acc: Access, env: Optional[Env], allocs: Dict[str, Alloc]) -> Region:
    """The point the compiler's region detector sees for a tile-op operand
    (``T.region(A_s[0, 0], ...)``): every operand is read at its base."""
    if acc.indices is None:
        shape = _shape(acc.buffer, env, allocs)
        if shape is None:
            return Region(acc.buffer, None)
        return Region(acc.buffer, tuple((0, 1) for _ in shape))
    dims: List[Interval] = []
    for ix in acc.indices:
        lo = (0 if ix.lower is None else eval_int(env, ix.lower)) if isinstance(ix, Slice) \
            else eval_int(env, ix)
        dims.append((lo, None if lo is None else lo + 1))
    return Region(acc.buffer, tuple(dims))


def _element(acc: Access, env: Optional[Env], allocs: Dict[str, Alloc]) -> Region:
    """An elementwise load/store ``X[i, j]`` (index expressions mostly symbolic)."""
    if acc.indices is None:
        return _operand_region(acc, env, allocs)
    dims: List[Interval] = []
    for ix in acc.indices:
        if isinstance(ix, Slice):
            dims.append(_slice_bounds(ix, env, None))
        else:
            v = eval_int(env, ix)
            dims.append((v, None if v is None else v + 1))
    return Region(acc.buffer, tuple(dims))


@dataclass
class Accesses:
    """Reads and writes of one scheduled unit as the compiler's collectors see
    them.  ``*_elem`` are what TVM's region detector sees (elementwise loads and
    stores, and the base point of every tile-operator operand); ``*_tile`` are
    the tile operators' own operand regions."""

    reads_elem: List[Region] = field(default_factory=list)
    reads_tile: List[Region] = field(default_factory=list)
    writes_elem: List[Region] = field(default_factory=list)
    writes_tile: List[Region] = field(default_factory=list)

    @property
    def reads(self) -> List[Region]:
        return self.reads_elem + self.reads_tile

    @property
    def writes(self) -> List[Region]:
        return self.writes_elem + self.writes_tile

    def first_read(self, buffer: str) -> Optional[Region]:
        """The region InjectSoftwarePipeline's tightening rule compares: the
        detector's hull of all element reads of ``buffer``, else the first
        operand region."""
        return _hull([r for r in self.reads_elem if r.buffer == buffer]) or \
            next((r for r in self.reads_tile if r.buffer == buffer), None)

    def first_write(self, buffer: str) -> Optional[Region]:
        return _hull([r for r in self.writes_elem if r.buffer == buffer]) or \
            next((r for r in self.writes_tile if r.buffer == buffer), None)


def _hull(regions: List[Region]) -> Optional[Region]:
    if not regions:
        return None
    known = [r.dims for r in regions if r.dims is not None]
    if len(known) != len(regions) or len({len(k) for k in known}) != 1:
        return Region(regions[0].buffer, None)
    dims: List[Interval] = []
    for d in range(len(known[0])):
        los = [x for k in known if (x := k[d][0]) is not None]
        his = [x for k in known if (x := k[d][1]) is not None]
        lo = min(los) if len(los) == len(known) else None
        hi = max(his) if len(his) == len(known) else None
        dims.append((lo, hi))
    return Region(regions[0].buffer, tuple(dims))


def stmt_accesses(stmt: Stmt, env: Optional[Env], allocs: Dict[str, Alloc]) -> Accesses:
    out = Accesses()
    _collect(stmt, env, allocs, out)
    return out


def _child_reads_count(stmt: Stmt) -> int:
    return sum(len(c.reads) for c in stmt.children)


def _collect(stmt: Stmt, env: Optional[Env], allocs: Dict[str, Alloc], out: Accesses) -> None:
    if stmt.kind in TILE_KINDS:
        operands = list(stmt.reads) + [w for w in stmt.writes
                                       if all(w is not r for r in stmt.reads)]
        for acc in operands:
            out.reads_elem.append(_base_point(acc, env, allocs))
        for acc in stmt.reads:
            out.reads_tile.append(_operand_region(acc, env, allocs))
        for acc in stmt.writes:
            out.writes_tile.append(_operand_region(acc, env, allocs))
        return
    if stmt.children or stmt.kind in COMPOUND_KINDS:
        # Condition reads of an ``if`` (the frontend lists them first).
        extra = len(stmt.reads) - _child_reads_count(stmt)
        for acc in stmt.reads[:max(0, extra)]:
            out.reads_elem.append(_element(acc, env, allocs))
        for ch in stmt.children:
            _collect(ch, env, allocs, out)
        return
    for acc in stmt.reads:
        out.reads_elem.append(_element(acc, env, allocs))
    for acc in stmt.writes:
        out.writes_elem.append(_element(acc, env, allocs))


# --------------------------------------------------------------------------
# Scopes and statement classification
# --------------------------------------------------------------------------


def scope_of(name: str, allocs: Dict[str, Alloc]) -> str:
    a = allocs.get(name)
    return "global" if a is None else (a.scope or "global")


def is_global(name: str, allocs: Dict[str, Alloc]) -> bool:
    return scope_of(name, allocs) in ("global", "")


def is_shared(name: str, allocs: Dict[str, Alloc]) -> bool:
    return scope_of(name, allocs) in SHARED_SCOPES


def _is_copy_op(stmt: Stmt) -> bool:
    op = stmt.op.split(".")[-1]
    return stmt.kind == "copy" and (op == "copy" or "im2col" in op)


def _copy_src_dst(stmt: Stmt) -> Tuple[Optional[str], Optional[str]]:
    src = stmt.reads[0].buffer if stmt.reads else None
    dst = stmt.writes[0].buffer if stmt.writes else None
    return src, dst


def _is_raw_load(value: Optional[Expr]) -> bool:
    """The stored value is one buffer load, possibly cast (``T.cast(A[i], dt)``,
    ``A[i].astype(dt)``): PipelinePlanning's "pure raw copy value"."""
    while isinstance(value, Call) and value.func in ("T.cast", ".astype") and value.args:
        value = value.args[0]
    return isinstance(value, Subscript) and isinstance(value.value, (Name, Attr))


def store_is_pure_copy(stmt: Stmt, allocs: Dict[str, Alloc]) -> bool:
    """``dst[...] = src[...]`` (optionally cast) with src global, dst shared/local."""
    if not stmt.writes:
        return False
    dst = stmt.writes[0].buffer
    if not (is_shared(dst, allocs) or scope_of(dst, allocs).startswith("local")):
        return False
    if not _is_raw_load(stmt.value):
        return False
    data_reads = [r for r in stmt.reads if r.indices is not None or r.buffer not in allocs]
    globals_ = [r for r in data_reads if is_global(r.buffer, allocs)]
    return len(globals_) >= 1 and len(data_reads) - len(globals_) == 0


def is_conditional(stmt: Stmt) -> bool:
    return any(s.kind == "if" for s in walk_stmt(stmt))


def _global_copy_pattern(stmt: Stmt, allocs: Dict[str, Alloc]) -> bool:
    for s in walk_stmt(stmt):
        if _is_copy_op(s):
            src, dst = _copy_src_dst(s)
            if src is not None and dst is not None and is_global(src, allocs) \
                    and is_shared(dst, allocs):
                return True
        elif s.kind == "store" and s.writes and is_shared(s.writes[0].buffer, allocs):
            if any(is_global(r.buffer, allocs) for r in s.reads):
                return True
    return False


def _pure_copy(stmt: Stmt, allocs: Dict[str, Alloc]) -> bool:
    saw_copy = False
    for s in walk_stmt(stmt):
        if s.kind in TILE_KINDS:
            if _is_copy_op(s):
                saw_copy = True
            elif s.kind == "call" and not s.reads and not s.writes:
                continue  # e.g. T.sync_threads(): not a tile operator
            else:
                return False
        elif s.kind == "store":
            saw_copy = True
            if not store_is_pure_copy(s, allocs):
                return False
    return saw_copy


def _single_copy_op(stmt: Stmt) -> Optional[Stmt]:
    found: Optional[Stmt] = None
    for s in walk_stmt(stmt):
        if s.kind in TILE_KINDS:
            if s.kind == "call" and not s.reads and not s.writes:
                continue
            if not _is_copy_op(s) or found is not None:
                return None
            found = s
    return found


def is_copy_stage(stmt: Stmt, allocs: Dict[str, Alloc]) -> bool:
    if _global_copy_pattern(stmt, allocs) and _pure_copy(stmt, allocs):
        return True
    if is_conditional(stmt):
        return False
    cp = _single_copy_op(stmt)
    if cp is None:
        return False
    src, dst = _copy_src_dst(cp)
    return src is not None and dst is not None and is_global(src, allocs) \
        and is_shared(dst, allocs)


# --------------------------------------------------------------------------
# Flattening the loop body into scheduled units
# --------------------------------------------------------------------------


def _written_buffers(stmts: Sequence[Stmt]) -> set:
    out = set()
    for s in stmts:
        for x in walk_stmt(s):
            for w in x.writes:
                out.add(w.buffer)
    return out


def _has_side_effect(expr: Optional[Expr]) -> bool:
    if isinstance(expr, Call):
        name = expr.func.split(".")[-1]
        if name.startswith("atomic") or name in ("call_extern", "call_intrin", "ptx_"):
            return True
        return any(_has_side_effect(a) for a in expr.args) or \
            any(_has_side_effect(v) for _, v in expr.kwargs)
    for attr in ("left", "right", "operand", "test", "body", "orelse", "value", "index"):
        sub = getattr(expr, attr, None)
        if sub is not None and not isinstance(sub, (str, int, float, bool)) \
                and _has_side_effect(sub):
            return True
    if isinstance(expr, TupleExpr):
        return any(_has_side_effect(i) for i in expr.items)
    return False


def is_replayable_bind(stmt: Stmt, written: set) -> bool:
    if stmt.kind != "bind":
        return False
    if stmt.value is not None and _has_side_effect(stmt.value):
        return False
    return not any(r.buffer in written for r in stmt.reads)


def _guard(orig: Stmt, cond_reads: Tuple[Access, ...], child: Stmt) -> Stmt:
    return Stmt(kind="if", op="if", span=orig.span, reads=cond_reads + child.reads,
                writes=child.writes, label=orig.label, children=(child,))


def _bind_if(stmt: Stmt) -> List[Stmt]:
    """IfStmtBinding on an ``if`` without ``else``: one guarded ``if`` per statement."""
    children = [_normalise(c) for c in stmt.children]
    flat: List[Stmt] = []
    for c in children:
        flat.extend(c)
    extra = len(stmt.reads) - _child_reads_count(stmt)
    cond_reads = tuple(stmt.reads[:max(0, extra)])
    if len(flat) <= 1:
        return [stmt]
    written = _written_buffers(flat)
    guarded: List[Stmt] = []
    scope: List[Stmt] = []
    for s in flat:
        if scope:
            scope.append(s)
            continue
        if s.kind == "bind":
            if is_replayable_bind(s, written):
                continue  # inlined into its uses
            scope.append(s)
            continue
        guarded.append(s)
    if scope:
        guarded.append(Stmt(kind="macro", op="{bind scope}", span=scope[0].span,
                            reads=tuple(a for s in scope for a in s.reads),
                            writes=tuple(a for s in scope for a in s.writes),
                            label=scope[0].label, children=tuple(scope)))
    if not guarded:
        return []
    if len(guarded) == 1:
        return [_guard(stmt, cond_reads, guarded[0])]
    out: List[Stmt] = []
    g_written = _written_buffers(guarded)
    if any(r.buffer in g_written for r in cond_reads):
        out.append(Stmt(kind="bind", op="=", span=stmt.span, reads=cond_reads,
                        label=stmt.label, target="if_condition"))
    out.extend(_guard(stmt, cond_reads, g) for g in guarded)
    return out


def _normalise(stmt: Stmt) -> List[Stmt]:
    if stmt.kind == "macro" and stmt.op != "{bind scope}":
        out: List[Stmt] = []
        for c in stmt.children:
            out.extend(_normalise(c))
        return out
    if stmt.kind == "if" and stmt.else_index is None:
        return _bind_if(stmt)
    if stmt.kind == "annotation":
        return []
    return [stmt]


def flatten_body(body: Sequence[Stmt]) -> List[Stmt]:
    out: List[Stmt] = []
    for s in body:
        out.extend(_normalise(s))
    return out


def _is_floatish(expr: Optional[Expr]) -> bool:
    from .model import Attr
    if isinstance(expr, Const):
        return isinstance(expr.value, float)
    if isinstance(expr, Call):
        name = expr.func.split(".")[-1]
        if "float" in name or name in ("cast", "exp", "exp2", "log", "log2", "sqrt",
                                       "rsqrt", "sin", "cos", "tanh", "sigmoid", "pow"):
            return True
        return any(_is_floatish(a) for a in expr.args)
    if isinstance(expr, Attr):
        return "float" in expr.attr
    if getattr(expr, "op", None) == "/":
        return True
    for attr in ("left", "right", "operand", "body", "orelse"):
        sub = getattr(expr, attr, None)
        if sub is not None and not isinstance(sub, (str, int, float, bool)) and _is_floatish(sub):
            return True
    return False


_DTYPE_CALL = re.compile(r"^(T\.)?(u?int\d+|float\d+|bfloat16|float8\w*|bool)$")


def _is_constant(expr: Optional[Expr], env: Optional[Env] = None) -> bool:
    """A number once the kernel is traced: a literal, ``T.float16(2.0)``, or a
    Python-level value of the factory (``scale = 1.0 / dim ** 0.5``)."""
    if isinstance(expr, Const):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, Call) and _DTYPE_CALL.match(expr.func) and len(expr.args) == 1 \
            and not expr.kwargs:
        return _is_constant(expr.args[0], env)
    if env is not None:
        try:
            v = env.evaluate(expr)
        except Exception:  # never raise on bad code
            return False
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return False


def is_inlined_bind(stmt: Stmt, env: Optional[Env] = None) -> bool:
    """A bind that tilelang's Simplify (run before planning) substitutes into its
    uses and deletes (``CanInlineBind`` in ``src/transform/simplify.cc``): a
    constant number, a plain alias of another variable, or an integer value of
    pure expressions (``base = k * block_K``).  It is not a statement of the
    body at all, and not even counted by the compatibility rule that accepts
    lists including binds.  Measured on 0.1.15: ``sc: T.float16 = T.float16(2.0)``
    and ``j = i`` disappear, ``f = T.cast(i, T.float16)`` stays (a float value)."""
    if stmt.kind != "bind" or stmt.reads or stmt.value is None:
        return False
    if stmt.target == "if_condition" or _has_side_effect(stmt.value):
        return False
    if _is_constant(stmt.value, env) or isinstance(stmt.value, Name):
        return True
    return not _is_floatish(stmt.value)


@dataclass
class BodyAnalysis:
    units: List[Stmt]  # every executable statement, source order
    scheduled: List[int]  # indices into units
    replayable: List[int]  # replayable binds (take no slot; counted by the compat rule)
    inlined: List[Stmt] = field(default_factory=list)  # integer aliases Simplify removes


def static_body(stmts: Sequence[Stmt], env: Optional[Env]) -> Tuple[Stmt, ...]:
    """``stmts`` with every ``if`` whose condition is a value known when the
    kernel is traced (``if use_bias:`` on a factory argument) replaced by the
    branch taken: the other branch does not exist for the compiler (measured on
    0.1.15: ``if flag:`` around a copy with ``flag=False`` leaves one statement
    fewer, and order/stage must not count it).  Macro bodies are searched too."""
    if env is None:
        return tuple(stmts)
    out: List[Stmt] = []
    changed = False
    for st in stmts:
        if st.kind == "if" and st.test is not None:
            try:
                v = env.evaluate(st.test)
            except Exception:  # never raise on bad code
                v = None
            if isinstance(v, (bool, int, float, str, tuple, list)) and v is not None:
                cut = len(st.children) if st.else_index is None else st.else_index
                taken = st.children[:cut] if v else st.children[cut:]
                out.extend(static_body(taken, env))
                changed = True
                continue
        if st.kind == "macro" and st.children:
            kids = static_body(st.children, env)
            if kids != tuple(st.children):
                st = _replace_stmt(st, kids)
                changed = True
        out.append(st)
    return tuple(out) if changed else tuple(stmts)


def _replace_stmt(st: Stmt, children: Tuple[Stmt, ...]) -> Stmt:
    import dataclasses
    return dataclasses.replace(
        st, children=children,
        reads=tuple(a for c in children for a in c.reads),
        writes=tuple(a for c in children for a in c.writes))


def analyse_body(loop: Loop, env: Optional[Env] = None) -> BodyAnalysis:
    flat = flatten_body(static_body(loop.body, env))
    inlined = [s for s in flat if is_inlined_bind(s, env)]
    units = [s for s in flat if not is_inlined_bind(s, env)]
    written = _written_buffers(units)
    sched: List[int] = []
    rep: List[int] = []
    for i, s in enumerate(units):
        (rep if is_replayable_bind(s, written) else sched).append(i)
    return BodyAnalysis(units, sched, rep, inlined)


# --------------------------------------------------------------------------
# The planner
# --------------------------------------------------------------------------


@dataclass
class _Info:
    stmt: Stmt
    index: int
    acc: Accesses
    copy: bool
    conditional: bool
    producer: bool = False
    last_use: int = -1
    order: int = -1
    stage: int = -1
    defs: Tuple[str, ...] = ()
    uses: frozenset = frozenset()

    @property
    def first_stage(self) -> bool:
        return self.copy or self.producer


class PlanningError(Exception):
    def __init__(self, kind: str, message: str, stmt: Optional[Stmt] = None,
                 other: Optional[Stmt] = None):
        super().__init__(message)
        self.kind, self.message, self.stmt, self.other = kind, message, stmt, other


def _names_in(expr: object, out: Set[str]) -> None:
    from .model import Name
    if isinstance(expr, Name):
        out.add(expr.id)
        return
    for attr in ("left", "right", "operand", "test", "body", "orelse", "value", "index",
                 "base", "lower", "upper", "step"):
        sub = getattr(expr, attr, None)
        if sub is not None and not isinstance(sub, (str, int, float, bool)):
            _names_in(sub, out)
    for seq_attr in ("args", "items"):
        for it in getattr(expr, seq_attr, ()) or ():
            if isinstance(it, tuple):
                _names_in(it[1], out)
            else:
                _names_in(it, out)
    for _, v in getattr(expr, "kwargs", ()) or ():
        _names_in(v, out)


def _local_defs(stmt: Stmt) -> Set[str]:
    """Names bound inside ``stmt`` (a Bind in a T.Parallel body, an ``if`` arm):
    each is its own variable in the IR, seen only there."""
    return {s.target for s in walk_stmt(stmt)
            if s is not stmt and s.kind == "bind" and s.target}


def _scalar_uses(stmt: Stmt) -> frozenset:
    """The scalar variables ``stmt`` reads that another statement may define: the
    names it binds itself are its own variables, not another statement's (two
    T.Parallel bodies that each bind ``idx`` hold two variables; PipelinePlanning
    matches VarNodes, not names)."""
    names: set = set()
    for s in walk_stmt(stmt):
        if s.value is not None:
            _names_in(s.value, names)
        for a in s.reads + s.writes:
            for ix in a.indices or ():
                _names_in(ix, names)
    return frozenset(names - _local_defs(stmt))


def _scalar_defs(stmt: Stmt) -> Tuple[str, ...]:
    """The variable a statement defines for the statements after it: only a Bind
    of the loop body itself; one nested in a statement is scoped to it."""
    return (stmt.target,) if stmt.kind == "bind" and stmt.target else ()


def _make_infos(stmts: Sequence[Stmt], env: Optional[Env], allocs: Dict[str, Alloc]
                ) -> List[_Info]:
    infos = []
    for i, s in enumerate(stmts):
        infos.append(_Info(stmt=s, index=i, acc=stmt_accesses(s, env, allocs),
                           copy=is_copy_stage(s, allocs), conditional=is_conditional(s),
                           defs=_scalar_defs(s), uses=_scalar_uses(s)))
    return infos


def _propagate_producers(infos: List[_Info]) -> None:
    dep: List[str] = []
    for p in infos:
        if p.copy:
            for r in p.acc.reads:
                if r.buffer not in dep:
                    dep.append(r.buffer)
    for p in infos:
        if not p.copy:
            continue
        updated = True
        guard = 0
        while updated and guard < 4 * len(infos) + 16:
            guard += 1
            updated = False
            for q in infos:
                if q.copy:
                    continue
                if q.index >= p.index:
                    break
                prepare = any(w.buffer in dep for w in q.acc.writes)
                if prepare and not q.producer:
                    q.producer = True
                    updated = True
                if prepare:
                    for r in q.acc.reads:
                        if r.buffer not in dep:
                            dep.append(r.buffer)
                            updated = True


def known_reads(stmt: Stmt) -> set:
    """Buffers ``stmt`` reads through statements whose operand roles are known
    (``Stmt.roles_known``): what an unknown call mentions is left out, so no
    error is based on it."""
    out: set = set()
    _known_accesses(stmt, out, writes=False)
    return out


def known_writes(stmt: Stmt) -> set:
    """Buffers ``stmt`` writes through statements whose roles are known."""
    out: set = set()
    _known_accesses(stmt, out, writes=True)
    return out


def _known_accesses(stmt: Stmt, out: set, writes: bool) -> None:
    if not stmt.roles_known:
        return
    if stmt.children or stmt.kind in COMPOUND_KINDS:
        if not writes:  # condition reads of an ``if`` come first
            extra = len(stmt.reads) - _child_reads_count(stmt)
            out.update(a.buffer for a in stmt.reads[:max(0, extra)])
        for ch in stmt.children:
            _known_accesses(ch, out, writes)
        return
    out.update(a.buffer for a in (stmt.writes if writes else stmt.reads))


def _analyse_last_use(infos: List[_Info], check_writes: bool) -> None:
    for p in infos:
        if not p.first_stage:
            continue
        for q in infos[p.index + 1:]:
            for r in q.acc.reads:
                if any(w.buffer == r.buffer and may_conflict(w, r) for w in p.acc.writes):
                    p.last_use = max(p.last_use, q.index)
            if not p.copy or not check_writes:
                continue
            # TL108 only on writes whose roles are known on both sides.
            sure = known_writes(q.stmt) & known_writes(p.stmt)
            for w2 in q.acc.writes:
                if w2.buffer not in sure:
                    continue
                if any(w.buffer == w2.buffer and may_conflict(w, w2) for w in p.acc.writes):
                    raise PlanningError(
                        "overlap",
                        f"buffer '{w2.buffer}' is written by the copy stage and again by a "
                        f"later statement with an overlapping region", q.stmt, p.stmt)


def _propagate_scalar_producers(infos: List[_Info]) -> None:
    defs: Dict[str, int] = {}
    for i, p in enumerate(infos):
        for d in p.defs:
            defs.setdefault(d, i)
    updated, guard = True, 0
    while updated and guard < 4 * len(infos) + 16:
        guard += 1
        updated = False
        for ci, c in enumerate(infos):
            if not (c.first_stage and c.last_use != -1):
                continue
            for v in c.uses:
                pi = defs.get(v)
                if pi is None or pi == ci:
                    continue
                p = infos[pi]
                if p.copy:
                    continue
                if not p.producer:
                    p.producer, p.last_use, updated = True, c.last_use, True
                elif p.last_use == -1 or c.last_use < p.last_use:
                    p.last_use, updated = c.last_use, True


def plan_auto(stmts: Sequence[Stmt], num_stages: int, env: Optional[Env],
              allocs: Dict[str, Alloc]) -> List[_Info]:
    """Stage/order for a num_stages loop, as tl.PipelinePlanning assigns them."""
    infos = _make_infos(stmts, env, allocs)
    _propagate_producers(infos)
    _analyse_last_use(infos, check_writes=True)
    _propagate_scalar_producers(infos)
    order = 0
    for p in infos:
        if p.first_stage and p.last_use != -1:
            continue
        p.order, p.stage = order, num_stages
        order += 1
        for q in infos:
            if q.first_stage and q.last_use == p.index:
                q.order, q.stage = order, 0
                order += 1
    unplaced = [p for p in infos if p.order == -1]
    if unplaced:
        p = unplaced[0]
        consumer = infos[p.last_use].stmt if 0 <= p.last_use < len(infos) else None
        raise PlanningError(
            "unplaced", "PipelinePlanning cannot place this statement: its last consumer "
            "is itself moved to stage 0 as a producer for a copy, so no statement "
            "schedules it", p.stmt, consumer)
    n = len(infos)
    copies = [p for p in infos if p.first_stage]
    others = [p for p in infos if not p.first_stage]
    copy_min = min((p.order for p in copies), default=n)
    other_max = max((p.order for p in others), default=0)
    at_end = len(copies) if copy_min > other_max else -1
    if at_end > 0 and num_stages >= 2:
        for p in infos:
            p.order = (p.order + at_end) % n
            if not p.copy and not p.producer:
                p.stage -= 1
    return infos


# --------------------------------------------------------------------------
# Warp specialization (sm_90)
# --------------------------------------------------------------------------

_DTYPE_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "int8": 8,
               "uint8": 8, "int16": 16, "int32": 32, "uint32": 32, "int64": 64,
               "float8_e4m3": 8, "float8_e5m2": 8, "float8_e4m3fn": 8, "half": 16,
               "float": 32}


def _dtype_bits(env: Optional[Env], expr: Optional[Expr]) -> Optional[int]:
    if expr is None:
        return None
    try:
        v = env.evaluate(expr) if env is not None else None
    except Exception:
        v = None
    if v is None:
        if isinstance(expr, Const) and isinstance(expr.value, str):
            v = expr.value
        else:
            from .model import Attr
            if isinstance(expr, Attr):
                v = expr.attr
    if not isinstance(v, str):
        return None
    v = v.replace("T.", "")
    if v in _DTYPE_BITS:
        return _DTYPE_BITS[v]
    m = re.match(r"^[a-z]+?(\d+)", v)
    return int(m.group(1)) if m else None


def _tensor_param(kernel: Kernel, name: str
                  ) -> Optional[Tuple[Sequence[Optional[Expr]], Optional[Expr]]]:
    for p in kernel.params:
        if p.name == name and isinstance(p.annotation, Call):
            a = p.annotation
            shape = a.args[0] if a.args else dict(a.kwargs).get("shape")
            dtype = a.args[1] if len(a.args) > 1 else dict(a.kwargs).get("dtype")
            items = shape.items if isinstance(shape, TupleExpr) else ((shape,) if shape else ())
            return items, dtype
    return None


def is_tma_load(stmt: Stmt, kernel: Optional[Kernel], env: Optional[Env],
                allocs: Dict[str, Alloc]) -> bool:
    """A T.copy the sm_90 copy classifier would lower to a TMA load."""
    if not _is_copy_op(stmt) or is_im2col(stmt):
        return False
    src, dst = _copy_src_dst(stmt)
    if src is None or dst is None or src in allocs or not is_shared(dst, allocs):
        return False
    if stmt.kwarg_is_true("disable_tma"):
        return False
    info = _tensor_param(kernel, src) if kernel is not None else None
    src_bits = _dtype_bits(env, info[1]) if info else None
    dst_alloc = allocs[dst]
    dst_bits = _dtype_bits(env, dst_alloc.dtype)
    # Last dimension of the copy: the destination's last extent.
    dst_acc = stmt.writes[0]
    reg = _operand_region(dst_acc, env, allocs)
    last = None
    if reg.dims:
        lo, hi = reg.dims[-1]
        if lo is not None and hi is not None:
            last = hi - lo
    bits = src_bits or dst_bits
    if last is not None and bits is not None and (last * bits) % 128 != 0:
        return False
    if src_bits is not None and dst_bits is not None and src_bits != dst_bits:
        return False
    if info:
        shape = [eval_int(env, s) for s in info[0]]
        stride = 1
        for i in range(len(shape) - 1, 0, -1):
            dim = shape[i]
            if dim is None:
                break
            stride *= dim
            if src_bits is not None and (stride * src_bits // 8) % 16 != 0:
                return False
    return True


def _pipelined_loops(stmts: Sequence[Stmt]) -> Iterator[Loop]:
    for s in stmts:
        if s.kind == "pipelined" and s.loop is not None:
            yield s.loop
        yield from _pipelined_loops(s.children)


def _has_num_stages(loop: Loop, env: Optional[Env]) -> bool:
    if loop.num_stages is None:
        return False
    v = eval_int(env, loop.num_stages)
    return v is None or v >= 1


def warp_specialization_mode(kernel: Kernel, env: Optional[Env], target: str,
                             allocs: Optional[Dict[str, Alloc]] = None) -> str:
    """'applied', 'fallback' (candidate but the rewriter does not fire: the
    compiler then strips num_stages from every loop), or 'none'."""
    t = targets_mod.get(target)
    if t is None or not t.has_tma:
        return "none"
    for k, v in kernel.attrs:
        if "disable_warp_specialized" in k:
            val = env.evaluate(v) if env is not None else None
            if val is None and isinstance(v, Const):
                val = v.value
            if val in (True, 1, "true", "True"):
                return "none"
    if allocs is None:
        allocs = {a.name: a for a in kernel.allocs}
    loops = [lp for lp in _pipelined_loops(kernel.body) if _has_num_stages(lp, env)]
    candidate = False
    for lp in loops:
        for s in lp.body:
            if any(is_tma_load(x, kernel, env, allocs) for x in walk_stmt(s)):
                candidate = True
    if not candidate:
        return "none"
    first = loops[0]
    body = list(first.body)
    while body and body[0].kind == "bind":
        body.pop(0)
    if len(body) == 1 and body[0].kind == "if" and body[0].else_index is None:
        body = list(body[0].children)
    flat: List[Stmt] = []
    for s in body:
        flat.extend(_expand_macros(s))
    if any(is_tma_load(s, kernel, env, allocs) for s in flat):
        return "applied"
    return "fallback"


def _expand_macros(s: Stmt) -> List[Stmt]:
    if s.kind == "macro":
        out: List[Stmt] = []
        for c in s.children:
            out.extend(_expand_macros(c))
        return out
    return [s]


def pipelining_kept(target: str) -> bool:
    """PipelinePlanning keeps ``num_stages`` on ``target`` (not on gfx942)."""
    t = targets_mod.get(target)
    return t is None or t.pipelining


def warp_specialization_applies(kernel: Kernel, env: Optional[Env], target: str) -> bool:
    return warp_specialization_mode(kernel, env, target) == "applied"


def warp_specialized_loop(kernel: Kernel, env: Optional[Env], target: str,
                          allocs: Optional[Dict[str, Alloc]] = None) -> Optional[Loop]:
    """The one loop the sm_90 rewriter splits into producer/consumer (the first
    loop with num_stages in the kernel), or None."""
    if warp_specialization_mode(kernel, env, target, allocs) != "applied":
        return None
    loops = [lp for lp in _pipelined_loops(kernel.body) if _has_num_stages(lp, env)]
    return loops[0] if loops else None


# --------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------


def _ints(env: Optional[Env], exprs: Optional[Tuple[Expr, ...]]
          ) -> Optional[List[Optional[int]]]:
    if exprs is None:
        return None
    return [eval_int(env, e) for e in exprs]


def schedule_values(env: Optional[Env], raw: Optional[Expr],
                    items: Optional[Tuple[Expr, ...]]) -> Optional[List[Optional[int]]]:
    """The entries of ``order=``/``stage=`` in this instance: a list whose
    length is known (an entry is None when its value is not), or None when not
    even the length is known (a parameter nobody binds, ``list(X)`` of an
    unknown X, a starred item ...).  ``raw`` is the argument as written
    (``Loop.order_expr``); ``items`` the inline items (``Loop.order``)."""
    if raw is None:  # a Loop built without the raw argument: the inline items
        if items is None or len(items) == 1 and not isinstance(items[0], Const):
            return None if items is None else _sequence(env, items[0])
        return _ints(env, items)
    if isinstance(raw, TupleExpr) and not any(isinstance(i, Opaque) for i in raw.items):
        return [eval_int(env, e) for e in raw.items]
    return _sequence(env, raw)


def _sequence(env: Optional[Env], expr: Expr) -> Optional[List[Optional[int]]]:
    if env is None:
        return None
    try:
        v = env.evaluate(expr)
    except Exception:  # never raise on bad code
        return None
    if not isinstance(v, (list, tuple)):
        return None
    out: List[Optional[int]] = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int):
            out.append(None)
        else:
            out.append(x)
    return out


@dataclass(frozen=True)
class ScheduleCounts:
    """The three list lengths PipelinePlanning accepts for a manual schedule
    (``FilterAnnotationsForScheduledStmts`` in ``pipeline_planning.cc``):
    one entry per scheduled statement; per executable statement (scheduled
    plus replayable scalar binds, whose entries are dropped); or per original
    statement (also buffer declarations such as ``T.decl_buffer``).  Each of
    ``order`` and ``stage`` is checked and filtered on its own."""

    scheduled: int
    executable: int
    original: int
    exec_index: Tuple[int, ...]  # position of each scheduled stmt among the executable
    orig_index: Tuple[int, ...]  # ... among the original statements

    def accepts(self, n: int) -> bool:
        return n in (self.scheduled, self.executable, self.original)

    def filter(self, values: Sequence[Optional[int]]) -> Optional[List[Optional[int]]]:
        """The compiler's filtered list (one entry per scheduled statement), or
        None when the length matches none of the counts (a compile error)."""
        n = len(values)
        if n == self.scheduled:
            return list(values)
        if n == self.executable:
            return [values[i] for i in self.exec_index]
        if n == self.original:
            return [values[i] for i in self.orig_index]
        return None


def schedule_counts(loop: Loop, ba: "BodyAnalysis") -> ScheduleCounts:
    decl = max(0, loop.declarations)
    # Declarations sit at the top of the body (measured with T.decl_buffer
    # first); their exact position only matters for the original count.
    return ScheduleCounts(
        scheduled=len(ba.scheduled), executable=len(ba.units), original=len(ba.units) + decl,
        exec_index=tuple(ba.scheduled), orig_index=tuple(i + decl for i in ba.scheduled))


@dataclass(frozen=True)
class ScheduleLengthError:
    """TL104, as data: the manual order/stage list(s) whose length no count of
    ``counts`` accepts; the compiler stops in PipelinePlanning.  ``bad``: list
    name (``order`` / ``stage``) -> its number of entries."""

    loop: Loop
    bad: Dict[str, int]
    counts: ScheduleCounts
    sched: Tuple[Stmt, ...]  # the scheduled statements, in order
    replayable: Tuple[Stmt, ...] = ()  # replayable scalar binds (executable count only)
    inlined: Tuple[Stmt, ...] = ()  # binds inlined before planning (no entry)
    code: ClassVar[str] = "TL104"
    # What the loop's result says about it (``explain``, the loop hover).
    note: ClassVar[str] = ("compile error: order/stage length does not match the "
                           "scheduled statement count")

    @property
    def span(self) -> Span:
        """Where the compiler's error points: the (first) list that is wrong."""
        loop = self.loop
        if "order" in self.bad:
            return loop.order_span or loop.stage_span or loop.iter_span
        return loop.stage_span or loop.order_span or loop.iter_span


@dataclass(frozen=True)
class StageConflict:
    """TL108 / TL112, as data: automatic planning stopped on ``stmt``.
    ``kind`` ``overlap`` (TL108): ``stmt`` writes a region the copy stage
    ``other`` writes too; ``unplaced`` (TL112): ``stmt`` cannot be placed
    because its last consumer ``other`` is itself moved to stage 0."""

    loop: Loop
    kind: str
    message: str
    stmt: Optional[Stmt] = None
    other: Optional[Stmt] = None

    @property
    def code(self) -> str:
        return "TL108" if self.kind == "overlap" else "TL112"

    @property
    def note(self) -> str:
        """What the loop's result says about it (``explain``, the loop hover)."""
        if self.kind == "overlap":
            return "compile error: overlapping writes in different stages"
        return ("compile error: PipelinePlanning cannot place a statement (its last "
                "consumer is moved to stage 0 as a producer for a copy)")

    @property
    def span(self) -> Span:
        return self.stmt.span if self.stmt is not None else self.loop.iter_span


# What ``plan_loop`` reports besides its result; ``rules.planning_diagnostic``
# turns each into a diagnostic.
PlanError = Union[ScheduleLengthError, StageConflict]


def _result(loop: Loop, **kw: Any) -> LoopResult:
    return LoopResult(loop=loop, **kw)


@dataclass(frozen=True)
class _LoopInput:
    """What ``plan_loop`` reads of one loop before choosing a path: the scheduled
    statements, the binds left out of the schedule, ``num_stages`` as written
    and evaluated, and the manual order/stage lists (each ``None`` when not
    known in this instance)."""

    loop: Loop
    ba: "BodyAnalysis"
    sched: Tuple[Stmt, ...]
    excluded: Tuple[Stmt, ...]
    ns: Optional[int]
    ns_unknown: bool
    manual: bool
    given: Dict[str, Optional[List[Optional[int]]]]

    @property
    def plain(self) -> Tuple[ScheduledStmt, ...]:
        """The scheduled statements without stage or order."""
        return tuple(ScheduledStmt(s, None, None) for s in self.sched)

    def result(self, **kw: Any) -> LoopResult:
        """A result for this loop with its excluded binds."""
        return _result(self.loop, excluded_binds=self.excluded, **kw)


def _loop_input(loop: Loop, env: Optional[Env]) -> _LoopInput:
    ba = analyse_body(loop, env)
    units = ba.units
    excluded = tuple(sorted([units[i] for i in ba.replayable] + ba.inlined,
                            key=lambda s: (s.span.line, s.span.col)))
    ns = eval_int(env, loop.num_stages) if loop.num_stages is not None else 0
    manual = loop.order is not None and loop.stage is not None and \
        len(loop.order) > 0 and len(loop.stage) > 0
    given: Dict[str, Optional[List[Optional[int]]]] = {}
    if manual:
        given = {"order": schedule_values(env, loop.order_expr, loop.order),
                 "stage": schedule_values(env, loop.stage_expr, loop.stage)}
        if any(v is not None and not v for v in given.values()):
            manual = False  # an empty list is no manual schedule (T.Pipelined's default)
    return _LoopInput(loop=loop, ba=ba, sched=tuple(units[i] for i in ba.scheduled),
                      excluded=excluded, ns=ns,
                      ns_unknown=loop.num_stages is not None and ns is None,
                      manual=manual, given=given)


def _outside_planning(li: _LoopInput, warp_specialized: bool, ws_fallback: bool
                      ) -> Optional[LoopResult]:
    """The result of a loop PipelinePlanning never plans (inside another pipeline,
    a fork's arguments, consumed by warp specialization, left behind by it), or
    None."""
    loop, ns, plain, manual = li.loop, li.ns, li.plain, li.manual
    if loop.pipelined_ancestors > 0:
        return li.result(pipelined=False, num_stages=ns, depth=None, statements=plain,
                         manual=manual,
                         note="not pipelined: PipelinePlanning does not look inside an "
                              "enclosing pipelined loop")
    if loop.unsupported_kwargs:
        # A fork's T.Pipelined (tilescale's sync=/group=): tilelang 0.1.15 has
        # no such argument, so nothing about this loop's schedule is known.
        names = ", ".join(f"{k}=" for k, _ in loop.unsupported_kwargs)
        return li.result(pipelined=manual or li.ns_unknown or bool(ns and ns >= 1),
                         num_stages=ns or None, depth=None, statements=plain, manual=manual,
                         note=f"schedule not modelled: {names} is not an argument of "
                              f"tilelang 0.1.15's T.Pipelined")
    if warp_specialized and (ns is None or ns >= 1):  # ns is None: ns_unknown
        return li.result(pipelined=True, num_stages=ns, depth=ns, statements=plain,
                         manual=manual, warp_specialized=True,
                         note="warp-specialized (producer/consumer); manual order/stage ignored"
                         if manual else "warp-specialized (producer/consumer)")
    if ws_fallback and (ns is None or ns >= 1) and not manual:
        return li.result(pipelined=False, num_stages=ns, depth=None, statements=plain,
                         note="not pipelined: the warp-specialization rewriter did not apply "
                              "and the compiler dropped num_stages")
    return None


def _plan_manual(li: _LoopInput) -> Tuple[LoopResult, List[PlanError]]:
    """A manual order/stage: checked against the statement counts the compiler
    accepts, then taken as written (``num_stages`` beside it sets the depth)."""
    loop, ns, ba, sched = li.loop, li.ns, li.ba, li.sched
    counts = schedule_counts(loop, ba)
    bad = {k: len(v) for k, v in li.given.items()
           if v is not None and not counts.accepts(len(v))}
    if bad:
        units = ba.units
        length_error = ScheduleLengthError(loop, bad, counts, sched,
                                           tuple(units[i] for i in ba.replayable),
                                           tuple(ba.inlined))
        return li.result(pipelined=False, num_stages=ns or None, depth=None,
                         statements=li.plain, manual=True, note=length_error.note), \
            [length_error]
    filtered = {k: (counts.filter(v) if v is not None else None) for k, v in li.given.items()}
    orders = filtered["order"] or [None] * len(sched)
    stages = filtered["stage"] or [None] * len(sched)
    unknown = [k for k, v in li.given.items() if v is None]
    st = [ScheduledStmt(s, stg, o) for s, stg, o in zip(sched, stages, orders, strict=False)]
    depth: Optional[int]
    if loop.num_stages is not None and ns is not None and ns > 0:
        depth = ns
    else:
        known = [s.stage for s in st if s.stage is not None]
        depth = max(known) + 1 if known and len(known) == len(st) else None
    distinct = {s.stage for s in st}
    pipelined = len(distinct) > 1 or None in distinct
    if unknown:
        note = (f"{' and '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                f"known in this instance")
    else:
        note = "" if pipelined else "all statements share one stage: the loop runs unpipelined"
    # All statements in one known stage: planned, then emitted as a plain
    # loop by InjectSoftwarePipeline (measured: no cp.async, one version).
    return li.result(pipelined=pipelined, num_stages=ns or None, depth=depth,
                     statements=tuple(st), manual=True, note=note), []


def _plan_automatic(li: _LoopInput, env: Optional[Env], target: str,
                    allocs: Dict[str, Alloc]) -> Tuple[LoopResult, List[PlanError]]:
    """``num_stages`` without a manual schedule: PipelinePlanning's own stages
    and order, or why the loop stays a plain loop."""
    loop, ns, plain, sched = li.loop, li.ns, li.plain, li.sched
    if loop.num_stages is None or (ns is not None and ns <= 0):
        note = "not pipelined: num_stages is 0 or absent"
        if (loop.order is not None) != (loop.stage is not None):
            note = "not pipelined: order without stage (or stage without order)"
        return li.result(pipelined=False, num_stages=ns, depth=None, statements=plain,
                         note=note), []
    if not pipelining_kept(target):
        return li.result(pipelined=False, num_stages=ns, depth=None, statements=plain,
                         note=f"not pipelined: software pipelining is disabled on {target}"), []
    if ns is None:
        return li.result(pipelined=True, num_stages=None, depth=None, statements=plain,
                         note="num_stages is unknown"), []
    if not sched:
        return li.result(pipelined=False, num_stages=ns, depth=None, statements=(),
                         note="compile error: no schedulable statements"), []
    try:
        infos = plan_auto(sched, ns, env, allocs)
    except PlanningError as e:
        conflict = StageConflict(loop, e.kind, e.message, e.stmt, e.other)
        return li.result(pipelined=False, num_stages=ns, depth=None, statements=plain,
                         note=conflict.note), [conflict]
    planned = tuple(ScheduledStmt(p.stmt, p.stage, p.order) for p in infos)
    if len({p.stage for p in infos}) <= 1:
        # InjectSoftwarePipeline keeps a loop whose statements all share one
        # stage as a plain loop (nothing to overlap).
        return li.result(pipelined=False, num_stages=ns, depth=ns, statements=planned,
                         note="not pipelined: no copy stage, every statement is in one stage"), []
    return li.result(pipelined=True, num_stages=ns, depth=ns, statements=planned), []


def plan_loop(loop: Loop, env: Optional[Env], target: str, allocs: Dict[str, Alloc],
              warp_specialized: bool, ws_fallback: bool = False
              ) -> Tuple[LoopResult, List[PlanError]]:
    """Plan one ``T.Pipelined`` loop.  Diagnostics (TL101–TL111) come from
    ``rules.validate_loop``; this returns the planning result and the errors
    that only planning can see (TL104/TL108/TL112 on the compiler's planning
    path), as data: ``rules.planning_diagnostic`` makes them diagnostics."""
    li = _loop_input(loop, env)
    outside = _outside_planning(li, warp_specialized, ws_fallback)
    if outside is not None:
        return outside, []
    if li.manual:
        return _plan_manual(li)
    return _plan_automatic(li, env, target, dict(allocs or {}))
