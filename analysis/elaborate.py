"""Elaboration: the kernel the builder builds, for one instance.

tilelang 0.1.15's ``T.prim_func`` is the eager builder
(``tilelang/language/eager/builder.py``; ``language/eager/ast.py`` rewrites the
body into builder calls that run when the kernel is built).  Its rules, read
from the wheel and checked by lowering (``docs/compiler-notes.md``):

- ``if c:`` goes through ``unwrap_cond(c)``: a Python ``int``/``bool``/``None``
  or any other Python object, and an ``IntImm``/``FloatImm``/``StringImm``, is
  decided there and only the taken arm is built (the other arm's loops and
  allocations never exist); any other ``PrimExpr`` (a buffer element, a loop,
  block or thread index, a ``T.dynamic`` size) stays an ``If`` in the IR.
- ``elif`` is an ``if`` in the ``else`` arm: decided arm by arm.
- ``a if c else b``, ``and``/``or``/``not`` on Python values short-circuit as
  in Python (the evaluator, ``values/evaluate.py``, does the same).
- ``for x in range(...)`` is ``T.serial``, a loop in the IR; ``for x in`` a
  Python list, tuple or other iterable builds the body once per element.

What tilelint cannot know stays open: a test whose Python value is not known
builds neither arm for certain.  The ``if`` is kept as written and recorded as
undecided (:class:`~.model.Branch` with ``taken=None`` and the names that
decide it), so that no claim is made on a guess (``undecided_in``).

Pure: reads the model and an :class:`~.values.Env`, never raises on bad code.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from . import values
from .frontend.macros import rename_stmt
from .model import (
    Attr,
    BinOp,
    Branch,
    Call,
    Compare,
    Const,
    DictExpr,
    Expr,
    IfExp,
    Kernel,
    Name,
    Param,
    Slice,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
    UnaryOp,
    walk_stmts,
)

# Calls whose result is a device value (a thread index, a symbolic size, a
# scalar buffer): a test on a name bound to one stays an ``If``.
_DEVICE_CALLS = frozenset({
    "get_thread_binding", "get_thread_bindings", "get_block_binding",
    "get_block_bindings", "thread_binding", "dynamic", "symbolic", "var",
    "alloc_var", "alloc_local", "alloc_fragment", "alloc_shared", "Var",
    "dyn", "ptr", "Tensor", "Buffer",
})
# A Python iterable the builder unrolls is expanded at most this many times
# (a longer one stays a loop, undecided).
MAX_COPIES = 64
_ATOM_TYPES = (bool, int, float, str, type(None))
# Off only in tests (tests/test_elaborate.py): the parity fixtures must
# disagree with the compiler without elaboration, or they test nothing.
ENABLED = True


def names_in(e: Optional[Expr], out: Optional[Set[str]] = None) -> Set[str]:
    """Every plain name ``e`` reads (attribute bases included)."""
    out = set() if out is None else out
    stack: List[object] = [e]
    while stack:
        x = stack.pop()
        if x is None:
            continue
        if isinstance(x, Name):
            out.add(x.id)
        elif isinstance(x, Attr):
            stack.append(x.base)
        elif isinstance(x, (BinOp, Compare)):
            stack.extend((x.left, x.right))
        elif isinstance(x, UnaryOp):
            stack.append(x.operand)
        elif isinstance(x, IfExp):
            stack.extend((x.test, x.body, x.orelse))
        elif isinstance(x, Call):
            stack.extend(x.args)
            stack.extend(v for _, v in x.kwargs)
        elif isinstance(x, TupleExpr):
            stack.extend(x.items)
        elif isinstance(x, DictExpr):
            stack.extend(v for _, v in x.items)
        elif isinstance(x, Subscript):
            stack.extend((x.value, x.index))
        elif isinstance(x, Slice):
            stack.extend((x.lower, x.upper, x.step))
    return out


def _device_call(e: Optional[Expr]) -> bool:
    return isinstance(e, Call) and e.func.split(".")[-1] in _DEVICE_CALLS


def _device_param(p: Param, style: str) -> bool:
    """A prim_func parameter is a buffer or a scalar ``Var``; a ``@tilelang.jit``
    function's parameter is a Python value unless annotated with a ``T.`` type
    (``A: T.Tensor(...)``; one annotated in the body is a local bound to a
    ``T.Tensor`` call, seen by :func:`device_names`)."""
    if style != "jit":
        return True
    ann = p.annotation
    while isinstance(ann, (Call, Subscript)):
        ann = Name(ann.func) if isinstance(ann, Call) else ann.value
    if isinstance(ann, Attr):
        return values.expr_text(ann).startswith("T.")
    return isinstance(ann, Name) and ann.id.startswith("T.")


def device_names(kernel: Kernel) -> FrozenSet[str]:
    """Names that hold a device value in the kernel: block and loop indices,
    buffers and tensor parameters, thread bindings, ``T.dynamic`` sizes, and
    every local computed from one of them."""
    out: Set[str] = set(kernel.block_vars)
    out.update(p.name for p in kernel.params if _device_param(p, kernel.style))
    out.update(a.name for a in kernel.allocs)
    binds: List[Tuple[str, Optional[Expr]]] = list(kernel.locals)
    for st in walk_stmts(kernel.body):
        if st.loop is not None:
            out.update(v.strip() for v in st.loop.var.split(","))
        if st.kind == "bind" and st.target:
            binds.append((st.target, st.value))
    changed = True
    while changed:
        changed = False
        for name, value in binds:
            if name in out:
                continue
            if _device_call(value) or names_in(value) & out:
                out.add(name)
                changed = True
    return frozenset(out)


# --------------------------------------------------------------------------
# Deciding one test
# --------------------------------------------------------------------------

DEVICE = "device"


def decide(test: Expr, env: values.Env, device: FrozenSet[str]
           ) -> Tuple[object, Tuple[str, ...]]:
    """What the builder does with ``test``: (True or False, ()) when it is a
    Python value decided at build time; (``DEVICE``, ()) when it stays an
    ``If`` in the IR; (None, the names that decide it) when tilelint does not
    know its Python value."""
    if names_in(test) & device:
        return DEVICE, ()
    none_test = _none_test(test, env)
    if none_test is not None:
        return none_test, ()
    try:
        v = env.evaluate(test)
    except Exception:  # never raise on bad code
        v = None
    if v is not None and not isinstance(v, values.Symbolic):
        try:
            return bool(v), ()
        except Exception:
            pass
    try:
        missing = sorted(env.missing(test))
    except Exception:
        missing = []
    if any(_symbolic(env, n) for n in missing):
        return DEVICE, ()  # a T.dynamic / T.symbolic size: a PrimExpr test
    return None, tuple(missing) or tuple(sorted(names_in(test)))


def _symbolic(env: values.Env, name: str) -> bool:
    """``name`` holds a symbolic size (``T.dynamic``, a jit tensor's shape).  A
    factory parameter that no call gives, or that its call gives from a value
    not known there, is symbolic to the evaluator but a Python value to the
    builder: not known here, so not a device value."""
    v = env.values.get(name)
    if isinstance(v, values.Symbolic):
        src = (env.sources or {}).get(name, "")
        return not (src == "parameter" or "(unknown there" in src)
    return _device_call(env.exprs.get(name))


def _none_test(test: Expr, env: values.Env) -> Optional[bool]:
    """``x is None`` / ``x is not None`` (and ``not x`` / ``x`` on such a name)
    where ``x`` is bound to None for this instance: the evaluator reads a None
    value as "not given", the builder reads it as None."""
    if isinstance(test, Compare) and test.op in ("is", "is not"):
        for a, b in ((test.left, test.right), (test.right, test.left)):
            if isinstance(b, Const) and b.value is None and isinstance(a, Name):
                given = _given_none(a.id, env)
                if given is None:
                    return None
                return given == (test.op == "is")
    return None


def _given_none(name: str, env: values.Env) -> Optional[bool]:
    """True when ``name`` is bound to None, False when to another known value,
    None when not known."""
    if name in env.values:
        v = env.values[name]
        if v is None:
            return True
        if isinstance(v, (values.Symbolic, values.Unresolved)):
            return None
        return False
    if name in env.exprs:
        e = env.exprs[name]
        if isinstance(e, Const):
            return e.value is None
        v = env.evaluate(e)
        return None if v is None else False
    return None


def _values_read(test: Expr, env: values.Env) -> Tuple[Tuple[str, str], ...]:
    out = []
    for n in sorted(names_in(test)):
        if n in ("True", "False", "None"):
            continue
        if _given_none(n, env) is True:
            out.append((n, "None"))
            continue
        v = env.evaluate(Name(n))
        if isinstance(v, _ATOM_TYPES) and v is not None:
            out.append((n, repr(v)))
    return tuple(out)


# --------------------------------------------------------------------------
# The kernel as built
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Elaborated:
    kernel: Kernel  # the kernel as built (``branches`` filled)
    branches: Tuple[Branch, ...]

    @property
    def undecided(self) -> Tuple[Branch, ...]:
        return tuple(b for b in self.branches if not b.decided)


class _Builder:
    def __init__(self, env: values.Env, device: FrozenSet[str],
                 choices: Optional[Mapping[Tuple[int, int], int]] = None) -> None:
        self.env = env
        self.device = device
        # (line, col) of an undecided ``if`` -> the arm to build (``len(arms)``:
        # none), for the variants of a kernel whose choice tilelint cannot make
        # (:func:`choice_variants`).
        self.choices = choices or {}
        self.branches: List[Branch] = []
        self.dropped: List[Span] = []

    def block(self, stmts: Sequence[Stmt]) -> Tuple[Stmt, ...]:
        out: List[Stmt] = []
        changed = False
        for st in stmts:
            built = self.stmt(st)
            if len(built) != 1 or built[0] is not st:
                changed = True
            out.extend(built)
        return tuple(out) if changed else tuple(stmts)

    def stmt(self, st: Stmt) -> Tuple[Stmt, ...]:
        if st.kind == "if" and st.arms and st.loop is None:
            return self.if_stmt(st)
        if st.loop is not None and st.loop.kind == "loop" and st.loop.iterator is not None \
                and not isinstance(st.loop.iterator, Call):
            expanded = self.for_stmt(st)
            if expanded is not None:
                return expanded
        if not st.children:
            return (st,)
        kids = self.block(st.children)
        if kids is st.children or kids == st.children:
            return (st,)
        return (_with_children(st, kids),)

    def if_stmt(self, st: Stmt) -> Tuple[Stmt, ...]:
        arms = _arm_slices(st)
        conditions = tuple("else" if t is None else _text(t) for t, _ in arms)
        kept: List[Tuple[Optional[Expr], Tuple[Stmt, ...]]] = []
        kept_arms: List[int] = []
        read: List[Tuple[str, str]] = []
        taken = len(arms)  # no arm built: every test false, no else
        python = False  # some test was decided by a Python value
        forced = self.choices.get((st.span.line, st.span.col))
        for i, (test, body) in enumerate(arms):
            if forced is not None:
                python = True
                if i == forced:
                    taken = i
                    kept.append((None, body))
                    kept_arms.append(i)
                    break
                continue
            if test is None:
                taken = i
                kept.append((None, body))
                kept_arms.append(i)
                break
            verdict, deciders = decide(test, self.env, self.device)
            if verdict is None:
                return self.undecided(st, conditions, deciders, i)
            if verdict == DEVICE:
                kept.append((test, body))
                kept_arms.append(i)
                continue
            python = True
            read.extend(_values_read(test, self.env))
            if verdict:
                taken = i
                kept.append((None, body))
                kept_arms.append(i)
                break
        if not python:  # device tests only: the chain stays as written
            return (self.rebuilt(st),)
        devices = [a for a in kept if a[0] is not None]
        if devices:
            built: Tuple[Stmt, ...] = (self.rebuild_if(st, kept),)
        elif kept:
            built = self.block(kept[-1][1])
        else:
            built = ()
        dropped = tuple(_arm_span(st, i) for i in range(len(arms)) if i not in kept_arms)
        self.dropped.extend(dropped)
        self.branches.append(Branch(
            span=st.span, kind="if", conditions=conditions, taken=taken, dropped=dropped,
            kept=tuple(_arm_span(st, i) for i in kept_arms), values=_dedupe(read)))
        return built

    def rebuild_if(self, st: Stmt, kept: Sequence[Tuple[Optional[Expr], Tuple[Stmt, ...]]]
                   ) -> Stmt:
        """The ``if`` of the arms that stay device tests, and the arm the
        chain ends in when a Python test (or ``else``) builds one."""
        children: List[Stmt] = []
        new_arms: List[Tuple[Optional[Expr], int]] = []
        for test, body in kept:
            new_arms.append((test, len(children)))
            children.extend(self.block(body))
        first_kept = kept[0][1] == _arm_slices(st)[0][1]
        return _if_of(st, children, new_arms, _cond_reads(st) if first_kept else ())

    def rebuilt(self, st: Stmt) -> Stmt:
        """``st`` as written, each arm elaborated inside."""
        children: List[Stmt] = []
        new_arms: List[Tuple[Optional[Expr], int]] = []
        for test, body in _arm_slices(st):
            new_arms.append((test, len(children)))
            children.extend(self.block(body))
        if children == list(st.children):
            return st
        return _if_of(st, children, new_arms, _cond_reads(st))

    def undecided(self, st: Stmt, conditions: Tuple[str, ...], deciders: Tuple[str, ...],
                  first: int) -> Tuple[Stmt, ...]:
        """A test whose Python value is not known (arm ``first``): the
        statement is kept as written (its arms elaborated inside) and recorded
        as undecided."""
        spans = tuple(_arm_span(st, i) for i in range(first, len(st.arms)))
        self.branches.append(Branch(
            span=st.span, kind="if", conditions=conditions, taken=None,
            kept=spans, decided_by=deciders))
        return (self.rebuilt(st),)

    def for_stmt(self, st: Stmt) -> Optional[Tuple[Stmt, ...]]:
        """``for x in <Python iterable>``: the body once per element, ``x``
        replaced by the element (None: not expanded, the loop is kept)."""
        loop = st.loop
        assert loop is not None and loop.iterator is not None
        var = loop.var.strip()
        if not var.isidentifier():
            return None
        if names_in(loop.iterator) & self.device:
            return None
        try:
            items = self.env.evaluate(loop.iterator)
        except Exception:
            items = None
        if isinstance(items, dict):
            items = tuple(items)
        if not isinstance(items, (tuple, list, str)) or len(items) > MAX_COPIES or \
                not all(isinstance(x, _ATOM_TYPES) for x in items):
            if items is None:
                self.branches.append(Branch(
                    span=st.span, kind="for", conditions=(_text(loop.iterator),), taken=None,
                    kept=tuple(s.span for s in st.children),
                    decided_by=tuple(sorted(self.env.missing(loop.iterator)))))
            return None
        out: List[Stmt] = []
        for x in items:
            for child in st.children:
                out.append(rename_stmt(child, {}, child.span, {var: Const(x)}))
        self.branches.append(Branch(
            span=st.span, kind="for", conditions=(_text(loop.iterator),), taken=0,
            kept=tuple(s.span for s in st.children), copies=len(items)))
        return self.block(out)


def _dedupe(pairs: Iterable[Tuple[str, str]]) -> Tuple[Tuple[str, str], ...]:
    seen: Dict[str, str] = {}
    for k, v in pairs:
        seen.setdefault(k, v)
    return tuple(seen.items())


def _arm_slices(st: Stmt) -> List[Tuple[Optional[Expr], Tuple[Stmt, ...]]]:
    starts = [i for _, i in st.arms] + [len(st.children)]
    return [(test, tuple(st.children[starts[n]:starts[n + 1]]))
            for n, (test, _) in enumerate(st.arms)]


def _arm_span(st: Stmt, i: int) -> Span:
    """The indented body of arm ``i`` (its statements' extent when the
    frontend gave no arm spans)."""
    if i < len(st.arm_spans):
        return st.arm_spans[i]
    body = _arm_slices(st)[i][1]
    if not body:
        return st.span
    return Span(body[0].span.line, body[0].span.col, body[-1].span.end_line,
                body[-1].span.end_col)


def _cond_reads(st: Stmt) -> Tuple:
    n = len(st.reads) - sum(len(c.reads) for c in st.children)
    return tuple(st.reads[:max(n, 0)])


def _with_children(st: Stmt, kids: Tuple[Stmt, ...]) -> Stmt:
    """A loop or macro statement whose body was elaborated."""
    changes: Dict[str, object] = {"children": kids}
    if st.loop is not None:
        changes["loop"] = dataclasses.replace(st.loop, body=kids)
    changes["reads"] = tuple(a for c in kids for a in c.reads)
    changes["writes"] = tuple(a for c in kids for a in c.writes)
    return dataclasses.replace(st, **changes)  # type: ignore[arg-type]


def _if_of(st: Stmt, children: List[Stmt], arms: List[Tuple[Optional[Expr], int]],
           cond_reads: Tuple) -> Stmt:
    """An ``if`` statement with the given arms (the frontend's form: ``test``
    only when there is no ``elif``, ``else_index`` where the second arm starts)."""
    else_index = arms[1][1] if len(arms) > 1 else None
    test = arms[0][0] if len(arms) == 1 or (len(arms) == 2 and arms[1][0] is None) else None
    return dataclasses.replace(
        st, children=tuple(children), arms=tuple(arms), else_index=else_index, test=test,
        reads=tuple(cond_reads) + tuple(a for c in children for a in c.reads),
        writes=tuple(a for c in children for a in c.writes))


def _text(e: Expr) -> str:
    return values.expr_text(e) if not isinstance(e, (Compare, UnaryOp, TupleExpr, IfExp,
                                                     Subscript)) else _long_text(e)


def _long_text(e: Expr) -> str:
    if isinstance(e, Compare):
        return f"{_text(e.left)} {e.op} {_text(e.right)}"
    if isinstance(e, UnaryOp):
        return f"{e.op} {_text(e.operand)}" if e.op == "not" else f"{e.op}{_text(e.operand)}"
    if isinstance(e, TupleExpr):
        inner = ", ".join(_text(x) for x in e.items)
        return f"[{inner}]" if e.is_list else f"({inner})"
    if isinstance(e, IfExp):
        return f"{_text(e.body)} if {_text(e.test)} else {_text(e.orelse)}"
    if isinstance(e, Subscript):
        return f"{_text(e.value)}[{_text(e.index)}]"
    return values.expr_text(e)


def elaborate(kernel: Kernel, env: values.Env,
              choices: Optional[Mapping[Tuple[int, int], int]] = None) -> Elaborated:
    """``kernel`` as the builder builds it in ``env``: every ``if`` on a
    Python value replaced by the arm it takes, every ``for`` over a Python
    iterable unrolled, the allocations of statements not built removed.  The
    same kernel object (with no branches) when nothing is decided.

    ``choices`` forces undecided ``if`` statements, (line, col) -> the arm
    built (``len(arms)``: none), as :func:`choice_variants` lists them."""
    if not ENABLED:
        return Elaborated(kernel, ())
    try:
        device = device_names(kernel)
        b = _Builder(env, device, choices)
        body = b.block(kernel.body)
    except RecursionError:  # pragma: no cover - bodies are shallow
        return Elaborated(kernel, ())
    if not b.branches:
        return Elaborated(kernel, ())
    allocs = kernel.allocs
    if b.dropped:
        allocs = tuple(a for a in kernel.allocs
                       if not any(_inside(a.span, d) for d in b.dropped))
    branches = tuple(b.branches)
    built = dataclasses.replace(kernel, body=body, allocs=allocs, branches=branches)
    return Elaborated(built, branches)


def _inside(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def undecided_in(stmts: Sequence[Stmt], branches: Sequence[Branch]) -> Tuple[Branch, ...]:
    """The undecided branches among the statements ``stmts`` (a loop body),
    searched through nested statements."""
    open_ = {b.span: b for b in branches if not b.decided}
    if not open_:
        return ()
    out = []
    for st in walk_stmts(stmts):
        hit = open_.get(st.span)
        if hit is not None and hit not in out:
            out.append(hit)
    return tuple(out)


# At most this many variants are built for a kernel with undecided branches;
# past it no finding that depends on them is checked (every arm stays kept).
MAX_VARIANTS = 8

Choice = Tuple[Tuple[Tuple[int, int], int], ...]  # ((line, col), arm built), ...


def choice_variants(branches: Sequence[Branch]) -> List[Choice]:
    """Every way the undecided ``if`` statements among ``branches`` can be
    built: each arm, and no arm when the chain has no ``else``.  Only chains
    whose first test is the undecided one are varied (an earlier device test
    keeps its ``if``).  Empty when there is nothing to vary or more than
    :data:`MAX_VARIANTS` ways."""
    opts: List[List[Tuple[Tuple[int, int], int]]] = []
    for b in branches:
        if b.kind != "if" or b.decided or len(b.kept) != len(b.conditions):
            continue
        n = len(b.conditions)
        arms = list(range(n)) + ([] if b.conditions[-1] == "else" else [n])
        opts.append([((b.span.line, b.span.col), i) for i in arms])
    if not opts:
        return []
    total = 1
    for o in opts:
        total *= len(o)
        if total > MAX_VARIANTS:
            return []
    return [tuple(c) for c in itertools.product(*opts)]


def choice_text(choice: Choice, branches: Sequence[Branch]) -> str:
    """``line 13 `if big:` builds its `big` arm`` for each forced chain."""
    by = {(b.span.line, b.span.col): b for b in branches}
    parts = []
    for key, arm in choice:
        b = by.get(key)
        if b is None:
            continue
        head = f"line {b.span.line} `if {b.conditions[0]}:`"
        if arm >= len(b.conditions):
            parts.append(f"{head} builds no arm")
        elif b.conditions[arm] == "else":
            parts.append(f"{head} builds its `else` arm")
        else:
            parts.append(f"{head} builds its `{b.conditions[arm]}` arm")
    return "; ".join(parts)
