"""Macro inlining on the statement model: a macro's statements seen at a call
site (buffers renamed, scalar parameters substituted), and parameter binding."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from ..model import (
    Access,
    Attr,
    BinOp,
    Call,
    Compare,
    Const,
    DictExpr,
    Expr,
    IfExp,
    Loop,
    Macro,
    Name,
    Opaque,
    Param,
    Slice,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
    UnaryOp,
)


def rename_stmt(stmt: Stmt, mapping: Dict[str, str], span: Span,
            scalars: Optional[Dict[str, Expr]] = None) -> Stmt:
    """A macro statement seen at its call site: buffers renamed, scalar
    parameters replaced by the arguments (in loop bounds, ``num_stages`` and
    indices), positions kept at the macro body (so hovers can point into the
    macro)."""
    sub = scalars or {}

    def acc(a: Access) -> Access:
        idx = a.indices
        if sub and idx is not None:
            idx = tuple(subst(i, sub) for i in idx)
        return Access(mapping.get(a.buffer, a.buffer), a.span, idx)

    loop = stmt.loop
    children = tuple(rename_stmt(c, mapping, span, scalars) for c in stmt.children)
    if loop is not None:
        changes: Dict[str, object] = {"body": children}
        if sub:
            for f in ("start", "stop", "num_stages", "condition", "iterator"):
                v = getattr(loop, f)
                if v is not None:
                    changes[f] = subst(v, sub)
            for f in ("order", "stage"):
                v = getattr(loop, f)
                if v is not None:
                    changes[f] = tuple(subst(x, sub) for x in v)
        loop = Loop(**{**loop.__dict__, **changes})
    test = stmt.test
    arms = stmt.arms
    if sub and arms:
        # an ``if`` on a macro parameter is decided with the argument (elaborate.py)
        test = None if test is None else subst(test, sub)
        arms = tuple((None if t is None else subst(t, sub), i) for t, i in arms)
    return Stmt(kind=stmt.kind, op=stmt.op, span=stmt.span,
                reads=tuple(acc(a) for a in stmt.reads),
                writes=tuple(acc(a) for a in stmt.writes),
                label=stmt.label, children=children, loop=loop, target=stmt.target,
                value=stmt.value, macro=stmt.macro, else_index=stmt.else_index,
                roles_known=stmt.roles_known, call=stmt.call, test=test, arms=arms,
                arm_spans=stmt.arm_spans)


def subst(e: Expr, mapping: Dict[str, Expr], depth: int = 0) -> Expr:
    """``e`` with the names in ``mapping`` replaced by their expressions."""
    if depth > 64 or not mapping:
        return e
    if isinstance(e, Name):
        return mapping.get(e.id, e)
    if isinstance(e, (Const, Opaque)):
        return e
    if isinstance(e, Attr):
        return Attr(subst(e.base, mapping, depth + 1), e.attr)
    if isinstance(e, BinOp):
        return BinOp(e.op, subst(e.left, mapping, depth + 1), subst(e.right, mapping, depth + 1))
    if isinstance(e, UnaryOp):
        return UnaryOp(e.op, subst(e.operand, mapping, depth + 1))
    if isinstance(e, Compare):
        return Compare(e.op, subst(e.left, mapping, depth + 1),
                       subst(e.right, mapping, depth + 1))
    if isinstance(e, IfExp):
        return IfExp(subst(e.test, mapping, depth + 1), subst(e.body, mapping, depth + 1),
                     subst(e.orelse, mapping, depth + 1))
    if isinstance(e, Call):
        return Call(e.func, tuple(subst(a, mapping, depth + 1) for a in e.args),
                    tuple((k, subst(v, mapping, depth + 1)) for k, v in e.kwargs))
    if isinstance(e, TupleExpr):
        return TupleExpr(tuple(subst(a, mapping, depth + 1) for a in e.items))
    if isinstance(e, DictExpr):
        return DictExpr(tuple((k, subst(v, mapping, depth + 1)) for k, v in e.items))
    if isinstance(e, Subscript):
        return Subscript(subst(e.value, mapping, depth + 1), subst(e.index, mapping, depth + 1))
    if isinstance(e, Slice):
        return Slice(*(None if x is None else subst(x, mapping, depth + 1)
                       for x in (e.lower, e.upper, e.step)))
    return e


def bind_params(params: Sequence[Param], call: Expr) -> Dict[str, Expr]:
    """Parameter name → argument expression for a call (defaults for the rest)."""
    out: Dict[str, Expr] = {}
    if not isinstance(call, Call):
        return out
    names = [p.name for p in params]
    pos = [a for a in call.args if not isinstance(a, Opaque)]
    if len(pos) != len(call.args):  # ``*args``: positions unknown
        pos = []
    for p, a in zip(names, pos, strict=False):
        out[p] = a
    for k, v in call.kwargs:
        if k in names:
            out[k] = v
    for prm in params:
        if prm.name not in out and prm.default is not None:
            out[prm.name] = prm.default
    return out


def scalar_args(macro: Macro, call: Expr) -> Dict[str, Expr]:
    """Macro parameters bound to non-buffer arguments (sizes, num_stages)."""
    out: Dict[str, Expr] = {}
    for k, v in bind_params(macro.params, call).items():
        if isinstance(v, Opaque):
            continue
        out[k] = v
    return out
