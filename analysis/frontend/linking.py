"""Linking across chunks: calls of macros and loops over iterator helpers
defined in other top-level statements, resolved when the chunk models are
combined into the module."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

from ..model import (
    Access,
    Call,
    Const,
    DictExpr,
    Expr,
    IfExp,
    Kernel,
    Loop,
    Macro,
    Name,
    Opaque,
    Stmt,
    Subscript,
    TupleExpr,
    UnaryOp,
    walk_stmts,
)
from .facts import IterHelper
from .macros import bind_params, rename_stmt, subst
from .statements import LOOP_KINDS, PIPELINED_KWARGS, STMT_KIND


def needs_link(kernel: Kernel, macros: Sequence[Macro], helpers: Sequence[IterHelper]) -> bool:
    mnames = {m.name for m in macros}
    hnames = {h[0] for h in helpers}
    for s in walk_stmts(kernel.body):
        if s.kind == "call" and s.op in mnames and isinstance(s.value, Call):
            return True
        lp = s.loop
        if lp is not None and lp.kind == "loop" and isinstance(lp.iterator, Call) and \
                lp.iterator.func.split(".")[-1] in hnames:
            return True
    return False


@lru_cache(maxsize=1024)
def link_kernel(kernel: Kernel, macros: Tuple[Macro, ...],
                 helpers: Tuple[IterHelper, ...]) -> Kernel:
    """``kernel`` with calls of macros from other statements inlined and loops
    over iterator helpers turned into the loops they return.  Cached so that an
    unchanged kernel keeps its identity across re-combines."""
    mdict = {m.name: m for m in macros}
    hdict = {h[0]: h for h in helpers}
    try:
        body = tuple(_link_stmts(kernel.body, mdict, hdict, 0))
    except RecursionError:
        return kernel
    return dataclasses.replace(kernel, body=body)


def _link_stmts(stmts: Sequence[Stmt], macros: Dict[str, Macro], helpers: Dict[str, IterHelper],
                depth: int) -> List[Stmt]:
    out: List[Stmt] = []
    for s in stmts:
        out.append(_link_stmt(s, macros, helpers, depth))
    return out


def _link_stmt(s: Stmt, macros: Dict[str, Macro], helpers: Dict[str, IterHelper],
               depth: int) -> Stmt:
    if depth > 16:
        return s
    if s.kind == "call" and s.op in macros and isinstance(s.value, Call):
        macro = macros[s.op]
        bound = bind_params(macro.params, s.value)
        mapping = {}
        for k, v in bound.items():
            b = _buffer_of(v)
            if b is not None:
                mapping[k] = b
        scalars: Dict[str, Expr] = {k: v for k, v in bound.items() if not isinstance(v, Opaque)}
        body = _link_stmts(macro.body, macros, helpers, depth + 1)
        children = tuple(rename_stmt(c, mapping, s.span, scalars) for c in body)
        reads: List[Access] = []
        writes: List[Access] = []
        for ch in children:
            reads.extend(ch.reads)
            writes.extend(ch.writes)
        return Stmt(kind="macro", op=macro.name, span=s.span, reads=tuple(reads),
                    writes=tuple(writes), label=s.label, children=children, macro=macro.name)
    if not s.children:
        return s
    children = tuple(_link_stmts(s.children, macros, helpers, depth + 1))
    loop = s.loop
    kind = s.kind
    if loop is not None:
        loop = dataclasses.replace(loop, body=children)
        if loop.kind == "loop" and isinstance(loop.iterator, Call):
            h = helpers.get(loop.iterator.func.split(".")[-1])
            if h is not None:
                new = _loop_from_iter(loop, subst(h[2], bind_params(h[1], loop.iterator)))
                if new is not None:
                    loop = new
                    kind = STMT_KIND.get(new.kind, "loop")
    if children == s.children and loop is s.loop:
        return s
    reads = []
    writes = []
    own = len(s.reads) - sum(len(c.reads) for c in s.children)
    reads.extend(s.reads[:max(own, 0)])
    for ch in children:
        reads.extend(ch.reads)
        writes.extend(ch.writes)
    return dataclasses.replace(s, kind=kind, children=children, loop=loop,
                               reads=tuple(reads), writes=tuple(writes))


def _buffer_of(e: Expr) -> Optional[str]:
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Subscript):
        return _buffer_of(e.value)
    if isinstance(e, Call) and e.func in ("T.region", "T.BufferRegion", "T.access_ptr") and e.args:
        return _buffer_of(e.args[0])
    return None


def _loop_from_iter(loop: Loop, it: Expr) -> Optional[Loop]:
    """The loop a helper's returned iterator expression makes."""
    condition: Optional[Expr] = None
    if isinstance(it, IfExp):
        if isinstance(it.body, Call) and it.body.func == "T.Pipelined":
            condition, it = it.test, it.body
        elif isinstance(it.orelse, Call) and it.orelse.func == "T.Pipelined":
            condition, it = UnaryOp("not", it.test), it.orelse
        else:
            it = it.body
    if not isinstance(it, Call):
        return None
    short = it.func[2:] if it.func.startswith("T.") else it.func
    kind = LOOP_KINDS.get(short) if it.func.startswith("T.") else (
        "range" if it.func == "range" else None)
    if kind is None:
        return None
    pos = list(it.args)
    if any(isinstance(a, Opaque) for a in pos):
        return None
    kw = dict(it.kwargs)
    start: Optional[Expr] = None
    stop: Optional[Expr] = None
    ns = kw.get("num_stages")
    if kind == "parallel":
        start = Const(0)
        stop = TupleExpr(tuple(pos)) if len(pos) != 1 else pos[0]
    else:
        if len(pos) >= 2:
            start, stop = pos[0], pos[1]
        elif len(pos) == 1:
            start, stop = Const(0), pos[0]
        if kind == "pipelined":
            if ns is None and len(pos) >= 3:
                ns = pos[2]
            for i, key in ((3, "order"), (4, "stage")):
                if len(pos) > i:
                    kw.setdefault(key, pos[i])
    start = kw.get("start", start)
    stop = kw.get("stop", stop)

    def tup(key: str) -> Optional[Tuple[Expr, ...]]:
        v = kw.get(key)
        if v is None:
            return None
        return v.items if isinstance(v, TupleExpr) else (v,)

    order, stage = tup("order"), tup("stage")
    ann = kw.get("annotations")
    unsupported = tuple((k, loop.iter_span) for k in kw if k not in PIPELINED_KWARGS) \
        if kind == "pipelined" else ()
    return dataclasses.replace(
        loop, kind=kind, start=start, stop=stop, num_stages=ns,
        num_stages_span=None if ns is None else loop.iter_span,
        order=order, order_span=None if order is None else loop.iter_span,
        stage=stage, stage_span=None if stage is None else loop.iter_span,
        order_expr=kw.get("order"), stage_expr=kw.get("stage"),
        unsupported_kwargs=unsupported,
        annotations=ann.items if isinstance(ann, DictExpr) else (),
        condition=condition)
