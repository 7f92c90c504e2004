"""Kernel statements: blocks, ``if``, loops (``T.Pipelined`` and kin, with
their arguments), assignments, stores and allocations."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace as dc_replace
from typing import Dict, List, Optional, Sequence, Tuple, Union

import libcst as cst

from ..model import (
    Access,
    Alloc,
    BinOp,
    Const,
    DictExpr,
    Expr,
    IfExp,
    Loop,
    Macro,
    Name,
    Span,
    Stmt,
    TupleExpr,
    UnaryOp,
)
from .accesses import KernelCtx
from .calls import CallBuilder
from .expressions import AUGOPS

_ALLOC_SCOPES = {
    "alloc_shared": "shared.dyn",
    "alloc_fragment": "local.fragment",
    "alloc_local": "local",
    "alloc_var": "local.var",
    "alloc_barrier": "shared.barrier",
    # Ascend (tilelang/ascend/language/allocate.py): L1 and L0 have scopes of
    # their own; UB is ``alloc_shared`` (shared.dyn).  The upper-case and
    # ``alloc_ub`` spellings of older adapters map to the same memories.
    "alloc_l1": "shared.l1",
    "alloc_L1": "shared.l1",
    "alloc_l0a": "shared.l0a",
    "alloc_L0A": "shared.l0a",
    "alloc_l0b": "shared.l0b",
    "alloc_L0B": "shared.l0b",
    "alloc_l0c": "shared.l0c",
    "alloc_L0C": "shared.l0c",
    "alloc_ub": "shared.dyn",
    "alloc_UB": "shared.dyn",
    "alloc_tmem": "shared.tmem",
    "alloc_reducer": "local.fragment",
}

LOOP_KINDS = {
    "Pipelined": "pipelined",
    "serial": "serial",
    "Parallel": "parallel",
    "unroll": "unroll",
    "vectorized": "vectorized",
    "Persistent": "serial",
    "grid": "parallel",
}

# The keyword arguments of tilelang 0.1.15's ``T.Pipelined``
# (tilelang/language/loop.py); anything else (a fork's ``sync=``/``group=``) is
# unsupported.
PIPELINED_KWARGS = ("start", "stop", "num_stages", "order", "stage", "annotations")
# The statement kind of a loop of each kind.
STMT_KIND = {"pipelined": "pipelined", "parallel": "parallel", "serial": "serial",
             "range": "serial", "unroll": "serial", "vectorized": "parallel"}


@dataclass
class LoopHead:
    """What a loop's iterator call says (:meth:`StatementBuilder.loop_head`)."""

    kind: str = "loop"
    start: Optional[Expr] = None
    stop: Optional[Expr] = None
    kwargs: Dict[str, Tuple[Expr, Span, cst.Arg]] = field(default_factory=dict)
    unsupported: List[Tuple[str, Span]] = field(default_factory=list)
    iterator: Optional[Expr] = None
    step: Optional[Expr] = None


class StatementBuilder(CallBuilder):
    """The statement model of kernel (and macro) bodies."""

    def block(self, body: Union[cst.BaseSuite, Sequence[cst.CSTNode]],
              ctx: Union["KernelCtx", Dict[str, Macro]], macros: Dict[str, Macro],
              locals_out: Optional[List[Tuple[str, Expr]]] = None,
              pipelined_ancestors: int = 0) -> List[Stmt]:
        if isinstance(ctx, dict):
            ctx = KernelCtx(macros=dict(macros), loose=True)
        stmts: List[Stmt] = []
        if isinstance(body, cst.SimpleStatementSuite):
            items: Sequence[cst.CSTNode] = [body]
        elif isinstance(body, cst.BaseSuite):
            items = body.body
        else:
            items = body
        for node in items:
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    st = self.small_stmt(small, ctx, locals_out)
                    if st is not None:
                        stmts.append(st)
            elif isinstance(node, cst.For):
                stmts.append(self.for_stmt(node, ctx, locals_out, pipelined_ancestors))
            elif isinstance(node, cst.If):
                stmts.append(self.if_stmt(node, ctx, locals_out, pipelined_ancestors))
            elif isinstance(node, cst.With):
                # ``with T.block(...)`` / other scopes: statements count inline;
                # each remembers the T.* scopes around it (T.SimtVF, T.Stage).
                inner = self.block(node.body, ctx, ctx.macros, locals_out,
                                   pipelined_ancestors)
                scopes = tuple(name for name in (
                    self.dotted(item.item.func) for item in node.items
                    if isinstance(item.item, cst.Call)) if name and name.startswith("T."))
                if scopes:
                    written = tuple((self.span(c), self.expr(c)) for c in (
                        item.item for item in node.items if isinstance(item.item, cst.Call))
                        if (self.dotted(c.func) or "").startswith("T."))
                    inner = [dc_replace(st, scope=scopes + st.scope,
                                        scope_calls=written + st.scope_calls) for st in inner]
                stmts.extend(inner)
            elif isinstance(node, cst.While):
                children = self.block(node.body, ctx, ctx.macros, locals_out,
                                      pipelined_ancestors)
                stmts.append(self.compound("loop", "while", node, children))
            elif isinstance(node, cst.FunctionDef):
                self.record_macro(node, ctx.macros)
            elif isinstance(node, cst.Try):
                stmts.extend(self.block(node.body, ctx, ctx.macros, locals_out,
                                        pipelined_ancestors))
        return stmts

    def record_macro(self, fn: cst.FunctionDef, macros: Dict[str, Macro]) -> None:
        """A ``@T.macro`` defined in a kernel body: its statements, for the calls
        that inline it (any other nested function is not kernel code)."""
        if any(d.endswith("macro") for d in self.decorator_names(fn)):
            macros[fn.name.value] = Macro(fn.name.value, self.span(fn.name), self.params(fn),
                                          tuple(self.block(fn.body, {}, macros=macros)))

    def compound(self, kind: str, op: str, node: cst.CSTNode, children: List[Stmt],
                 loop: Optional[Loop] = None, extra_reads: Sequence[Access] = ()) -> Stmt:
        reads: List[Access] = list(extra_reads)
        writes: List[Access] = []
        for ch in children:
            reads.extend(ch.reads)
            writes.extend(ch.writes)
        return Stmt(kind=kind, op=op, span=self.span(node), reads=tuple(reads),
                    writes=tuple(writes), label=self.label(node), children=tuple(children),
                    loop=loop)

    def if_stmt(self, node: cst.If, ctx: "KernelCtx", locals_out: Optional[List[Tuple[str, Expr]]],
                pa: int) -> Stmt:
        children = self.block(node.body, ctx, ctx.macros, locals_out, pa)
        orelse = node.orelse
        else_index = len(children) if orelse is not None else None
        # Every arm's test and where its statements start in ``children``
        # (elaborate.py picks the arm a Python condition builds).
        arms: List[Tuple[Optional[Expr], int]] = [(self.expr(node.test), 0)]
        arm_spans: List[Span] = [self.span(node.body)]
        while orelse is not None:
            arm_spans.append(self.span(orelse.body))
            if isinstance(orelse, cst.If):
                arms.append((self.expr(orelse.test), len(children)))
                children.extend(self.block(orelse.body, ctx, ctx.macros, locals_out, pa))
                orelse = orelse.orelse
            else:
                arms.append((None, len(children)))
                children.extend(self.block(orelse.body, ctx, ctx.macros, locals_out, pa))
                orelse = None
        cond_reads = self.accesses_in(node.test, ctx)
        st = self.compound("if", "if", node, children, extra_reads=cond_reads)
        st = dataclasses.replace(st, arms=tuple(arms), arm_spans=tuple(arm_spans))
        if not isinstance(node.orelse, cst.If):  # no elif: the branches are known
            st = dataclasses.replace(st, test=arms[0][0])
        return st if else_index is None else dataclasses.replace(st, else_index=else_index)

    def for_stmt(self, node: cst.For, ctx: "KernelCtx", locals_out: Optional[List[Tuple[str, Expr]]],
                 pa: int) -> Stmt:
        """A ``for`` loop: its header (:meth:`loop_head`), then its body, whose
        loops know how many annotating ``T.Pipelined`` loops enclose them."""
        var = node.target.value if isinstance(node.target, cst.Name) else self.src(node.target)
        it, condition = self.modelled_iter(node.iter)
        head = self.loop_head(it, ctx)
        # Only a T.Pipelined that writes a pipeline annotation (num_stages > 0, or
        # an order/stage list) hides the loops inside it from PipelinePlanning;
        # ``T.Pipelined(n)`` alone is a plain loop to the compiler.
        child_pa = pa + (1 if head.kind == "pipelined" and _annotates(head.kwargs) else 0)
        ctx.loop_vars.add(var)
        children = self.block(node.body, ctx, ctx.macros, locals_out, child_pa)
        loop = self.loop_model(node, it, var, head, children, pa, condition)
        return self.compound(STMT_KIND.get(head.kind, "loop"), "for", node, children, loop=loop)

    def modelled_iter(self, it: cst.BaseExpression
                      ) -> Tuple[cst.BaseExpression, Optional[Expr]]:
        """The iterator the model follows, and the condition under which it
        runs: for ``T.Pipelined(...) if c else T.serial(...)``, the pipelined
        arm (under ``c``, or ``not c`` when it is the ``else`` arm)."""
        if isinstance(it, cst.IfExp):
            body_call, else_call = it.body, it.orelse
            if isinstance(body_call, cst.Call) and \
                    (self.dotted(body_call.func) or "").endswith("Pipelined"):
                return body_call, self.expr(it.test)
            if isinstance(else_call, cst.Call) and \
                    (self.dotted(else_call.func) or "").endswith("Pipelined"):
                return else_call, UnaryOp("not", self.expr(it.test))
        return it, None

    def loop_head(self, it: cst.BaseExpression, ctx: "KernelCtx") -> "LoopHead":
        """What a loop's iterator call says: the loop kind, bounds, keyword
        arguments (and the unsupported ones of ``T.Pipelined``), and for a call
        of a helper or macro, the iterator expression."""
        head = LoopHead()
        if not isinstance(it, cst.Call):
            # ``for x in cfgs`` / ``for x in [a, b]``: a Python iterable the
            # builder unrolls (elaborate.py), kept as written.
            head.iterator = self.expr(it)
            return head
        fname = self.dotted(it.func) or ""
        short = fname[2:] if fname.startswith("T.") else fname
        if short in LOOP_KINDS:
            head.kind = LOOP_KINDS[short]
        elif fname == "range":
            head.kind = "range"
        elif short in ctx.macros or fname in ctx.helper_iterators:
            head.kind = "loop"
        kind = head.kind
        if kind == "loop" and fname and not fname.startswith("T.") or short == "Persistent":
            head.iterator = self.expr(it)
        positional = [a for a in it.args if a.keyword is None and not a.star]
        for a in it.args:
            if a.keyword is not None:
                key = a.keyword.value
                head.kwargs[key] = (self.expr(a.value), self.span(a), a)
                if kind == "pipelined" and key not in PIPELINED_KWARGS:
                    head.unsupported.append((key, self.span(a)))
        if kind in ("pipelined", "serial", "range", "unroll", "vectorized"):
            self.range_bounds(head, positional)
        elif kind == "parallel":
            head.start = Const(0)
            head.stop = TupleExpr(tuple(self.expr(a.value) for a in positional)) \
                if len(positional) != 1 else self.expr(positional[0].value)
        return head

    def range_bounds(self, head: "LoopHead", positional: Sequence[cst.Arg]) -> None:
        """``start``/``stop`` of a ranged loop (one or two positional arguments,
        or the keywords), and ``T.Pipelined``'s positional ``num_stages``,
        ``order`` and ``stage``."""
        if len(positional) >= 2:
            head.start, head.stop = self.expr(positional[0].value), self.expr(positional[1].value)
        elif len(positional) == 1:
            head.start, head.stop = Const(0), self.expr(positional[0].value)
        if head.kind == "pipelined":
            # T.Pipelined(start, stop, num_stages, order, stage, annotations)
            for pos, key in ((2, "num_stages"), (3, "order"), (4, "stage")):
                if len(positional) > pos:
                    head.kwargs.setdefault(key, (self.expr(positional[pos].value),
                                                 self.span(positional[pos]),
                                                 positional[pos]))
        if "start" in head.kwargs:
            head.start = head.kwargs["start"][0]
        if "stop" in head.kwargs:
            head.stop = head.kwargs["stop"][0]
        if head.kind in ("serial", "range", "unroll"):
            # range(start, stop, step), T.serial/T.unroll(start, stop, step=...)
            if len(positional) >= 3:
                head.step = self.expr(positional[2].value)
            if "step" in head.kwargs:
                head.step = head.kwargs["step"][0]

    def loop_model(self, node: cst.For, it: cst.BaseExpression, var: str, head: "LoopHead",
             children: List[Stmt], pa: int, condition: Optional[Expr]) -> Loop:
        """The :class:`Loop` of a ``for`` whose header is ``head``."""
        kw = head.kwargs
        order, order_span = self.tuple_argument(kw, "order")
        stage, stage_span = self.tuple_argument(kw, "stage")
        ns = kw.get("num_stages")
        annotations: Tuple[Tuple[str, Expr], ...] = ()
        if "annotations" in kw and isinstance(kw["annotations"][0], DictExpr):
            annotations = kw["annotations"][0].items
        return Loop(
            var=var, kind=head.kind, span=self.span(node), iter_span=self.span(it),
            start=head.start, stop=head.stop,
            num_stages=None if ns is None else ns[0],
            num_stages_span=None if ns is None else ns[1],
            order=order, order_span=order_span, stage=stage, stage_span=stage_span,
            annotations=annotations, unsupported_kwargs=tuple(head.unsupported),
            body=tuple(children), pipelined_ancestors=pa, condition=condition,
            iterator=head.iterator,
            order_expr=kw["order"][0] if "order" in kw else None,
            stage_expr=kw["stage"][0] if "stage" in kw else None,
            declarations=self.pipelined_declarations(node) if head.kind == "pipelined" else 0,
            step=head.step,
        )

    def tuple_argument(self, kwargs: Dict[str, Tuple[Expr, Span, cst.Arg]], key: str
                       ) -> Tuple[Optional[Tuple[Expr, ...]], Optional[Span]]:
        """A loop argument that is a list (``order=[...]``) as its items (a
        single value as one item) and the span of its value."""
        if key not in kwargs:
            return None, None
        val, _, arg = kwargs[key]
        if isinstance(val, TupleExpr):
            return val.items, self.span(arg.value)
        return (val,), self.span(arg.value)

    def pipelined_declarations(self, node: cst.For) -> int:
        """Buffer views declared at the top of a pipelined body (T.decl_buffer):
        the compiler's "original statement count" includes them (allocations
        are hoisted out of the loop and do not count, measured on 0.1.15)."""
        count = 0
        if not isinstance(node.body, cst.IndentedBlock):
            return count
        for line in node.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                val = getattr(small, "value", None) \
                    if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
                if isinstance(val, cst.Call) and \
                        (self.dotted(val.func) or "").split(".")[-1] == "decl_buffer":
                    count += 1
        return count

    def small_stmt(self, small: cst.BaseSmallStatement, ctx: "KernelCtx",
                   locals_out: Optional[List[Tuple[str, Expr]]]) -> Optional[Stmt]:
        if isinstance(small, cst.Expr):
            if isinstance(small.value, cst.Call):
                return self.call_stmt(small.value, small, ctx)
            return None
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            return self.assign_stmt(small, ctx, locals_out)
        return None

    def assign_stmt(self, node: Union[cst.Assign, cst.AnnAssign, cst.AugAssign], ctx: "KernelCtx",
                    locals_out: Optional[List[Tuple[str, Expr]]]) -> Optional[Stmt]:
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
            value: Optional[cst.BaseExpression] = node.value
        elif isinstance(node, cst.AnnAssign):
            targets = [node.target]
            value = node.value
        else:
            targets = [node.target]
            value = node.value
        if value is None:
            return None
        # Allocation?
        if isinstance(value, cst.Call):
            fname = self.dotted(value.func) or ""
            short = fname[2:] if fname.startswith("T.") else fname
            if short in _ALLOC_SCOPES and len(targets) == 1 and isinstance(targets[0], cst.Name):
                self.alloc(targets[0].value, short, value, node, ctx)
                return None
            if short in ("make_tensor", "Tensor", "Buffer", "empty", "decl_buffer") \
                    and len(targets) == 1 and isinstance(targets[0], cst.Name):
                ctx.buffers.add(targets[0].value)
                return None
        target = targets[0]
        reads = list(self.accesses_in(value, ctx))
        if isinstance(node, cst.AugAssign) and isinstance(target, cst.Subscript):
            reads.extend(self.accesses_in(target, ctx))
        if isinstance(target, cst.Subscript):
            base = self.dotted(target.value)
            idx_reads = []
            for el in target.slice:
                if isinstance(el.slice, cst.Index):
                    idx_reads.extend(self.accesses_in(el.slice.value, ctx))
            if base is not None:
                write = Access(base, self.span(target), self.subscript_indices(target))
                rhs = self.expr(value)
                if isinstance(node, cst.AugAssign):
                    rhs = BinOp(AUGOPS.get(type(node.operator), "?"), self.expr(target), rhs)
                return Stmt(kind="store", op="=", span=self.span(node),
                            reads=tuple(reads + idx_reads), writes=(write,),
                            label=self.label(node), value=rhs)
        if isinstance(target, cst.Name):
            name = target.value
            if isinstance(node, cst.AugAssign):
                # ``x += ...`` on a local var buffer (alloc_var) is a store.
                if name in ctx.buffers:
                    acc = Access(name, self.span(target))
                    rhs = BinOp(AUGOPS.get(type(node.operator), "?"), Name(name),
                                self.expr(value))
                    return Stmt(kind="store", op="=", span=self.span(node),
                                reads=tuple(reads) + (acc,), writes=(acc,),
                                label=self.label(node), value=rhs)
                return None
            if name in ctx.buffers and name in ctx.var_buffers:
                acc = Access(name, self.span(target))
                return Stmt(kind="store", op="=", span=self.span(node), reads=tuple(reads),
                            writes=(acc,), label=self.label(node), value=self.expr(value))
            val = self.expr(value)
            if locals_out is not None:
                locals_out.append((name, val))
            return Stmt(kind="bind", op="=", span=self.span(node), reads=tuple(reads),
                        label=self.label(node), target=name, value=val)
        if isinstance(target, (cst.Tuple, cst.List)):
            if locals_out is not None:
                for t in node.targets if isinstance(node, cst.Assign) else []:
                    self.assign_target(t.target, value, locals_out)
            return Stmt(kind="bind", op="=", span=self.span(node), reads=tuple(reads),
                        label=self.label(node), target=self.src(target),
                        value=self.expr(value))
        return None

    def alloc(self, name: str, func: str, call: cst.Call, node: cst.CSTNode,
              ctx: "KernelCtx") -> None:
        args = [a for a in call.args if a.keyword is None]
        kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
        shape: Tuple[Expr, ...] = ()
        dtype: Expr = Const(None)
        shape_node = args[0].value if args else (kw["shape"].value if "shape" in kw else None)
        if shape_node is not None:
            s = self.expr(shape_node)
            expanded = _expand_shape(s, ctx.locals, 0)
            shape = expanded if expanded is not None else (s,)
        if func in ("alloc_var",):
            dtype = self.expr(args[0].value) if args else (
                self.expr(kw["dtype"].value) if "dtype" in kw else Const(None))
            shape = (Const(1),)
        elif func == "alloc_barrier":
            dtype = Const("uint64")
        else:
            if len(args) >= 2:
                dtype = self.expr(args[1].value)
            elif "dtype" in kw:
                dtype = self.expr(kw["dtype"].value)
            elif func in ("alloc_local", "alloc_fragment", "alloc_shared"):
                dtype = Const(None)
        scope = _ALLOC_SCOPES[func]
        if "scope" in kw:
            s = self.expr(kw["scope"].value)
            if isinstance(s, Const) and isinstance(s.value, str):
                scope = s.value
        elif len(args) >= 3 and func == "alloc_shared":
            s = self.expr(args[2].value)
            if isinstance(s, Const) and isinstance(s.value, str):
                scope = s.value
        ctx.buffers.add(name)
        if func == "alloc_var":
            ctx.var_buffers.add(name)
        ctx.allocs.append(Alloc(name, func, scope, shape, dtype, self.span(node),
                                self.span(call)))


def _annotates(loop_kwargs: Dict[str, Tuple]) -> bool:
    """Whether ``T.Pipelined(...)`` with these arguments writes a pipeline
    annotation: tilelang 0.1.15 writes none for ``num_stages=0`` and empty
    ``order``/``stage`` (their defaults)."""
    ns = loop_kwargs.get("num_stages")
    if ns is not None and not (isinstance(ns[0], Const) and ns[0].value == 0):
        return True
    for key in ("order", "stage"):
        v = loop_kwargs.get(key)
        if v is not None and not (isinstance(v[0], TupleExpr) and not v[0].items):
            return True
    return False


def _expand_shape(e: Expr, locals_: Sequence[Tuple[str, Expr]], depth: int
                  ) -> Optional[Tuple[Expr, ...]]:
    """A shape written through a local (``A_shared_shape = (block_M, block_K)``,
    ``(K, M) if trans_A else (M, K)``, ``(num_stages,) + tile``) as its dims."""
    if depth > 8:
        return None
    if isinstance(e, TupleExpr):
        return e.items
    if isinstance(e, Name):
        for name, val in reversed(locals_):
            if name == e.id:
                return _expand_shape(val, locals_, depth + 1)
        return None
    if isinstance(e, IfExp):
        a = _expand_shape(e.body, locals_, depth + 1)
        b = _expand_shape(e.orelse, locals_, depth + 1)
        if a is not None and b is not None and len(a) == len(b):
            return tuple(x if x == y else IfExp(e.test, x, y) for x, y in zip(a, b, strict=True))
        return None
    if isinstance(e, BinOp) and e.op == "+":
        a = _expand_shape(e.left, locals_, depth + 1)
        b = _expand_shape(e.right, locals_, depth + 1)
        if a is not None and b is not None:
            return a + b
        return None
    if isinstance(e, BinOp) and e.op == "*":
        a = _expand_shape(e.left, locals_, depth + 1)
        if a is not None and isinstance(e.right, Const) and isinstance(e.right.value, int) \
                and 0 <= e.right.value <= 8:
            return a * e.right.value
        return None
    return None
