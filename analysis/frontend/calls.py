"""Call statements of kernel code: operators of ``analysis/ops.py`` with their
operand roles, annotations (``T.func_attr``...), inlined macro calls, the
Ascend dialect's name-based roles, and calls whose roles are unknown."""

from __future__ import annotations

from dataclasses import replace as dc_replace
from typing import Dict, List, Optional, Sequence

import libcst as cst

from .. import ops as ops_mod
from ..model import Access, Call, Const, DictExpr, Macro, Span, Stmt
from .accesses import AccessBuilder, KernelCtx
from .macros import rename_stmt, scalar_args

_GEMM_OPS = ("gemm", "wgmma", "mma")
_FILL_OPS = ("fill", "clear")
_COPY_OPS = ("copy", "async_copy", "tma_copy", "c2d_im2col", "im2col", "transpose")


class CallBuilder(AccessBuilder):
    """The statement a call makes."""

    def call_stmt(self, call: cst.Call, node: cst.CSTNode, ctx: "KernelCtx") -> Optional[Stmt]:
        """The statement of a call, with the call's arguments as data (``Stmt.call``)."""
        st = self._call_stmt(call, node, ctx)
        if st is None:
            return None
        # An unknown call already holds its parsed form as ``value``.
        parsed = st.value if st.kind == "call" and isinstance(st.value, Call) else self.expr(call)
        return dc_replace(st, call=parsed) if isinstance(parsed, Call) else st

    def _call_stmt(self, call: cst.Call, node: cst.CSTNode, ctx: "KernelCtx") -> Optional[Stmt]:
        fname = self.dotted(call.func)
        if fname is None:
            reads = self.accesses_in(call, ctx)
            return Stmt(kind="call", op=self.src(call.func), span=self.span(node),
                        reads=tuple(reads), label=self.label(node), roles_known=False)
        short = fname[2:] if fname.startswith("T.") else fname
        args = [a for a in call.args if a.keyword is None and not a.star]
        kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
        span = self.span(node)
        label = self.label(node)
        if fname in ("T.func_attr", "T.annotate_layout", "T.use_swizzle", "T.no_set_max_nreg",
                     "T.annotate_buffer_versions", "T.annotate_l2_hit_ratio",
                     "T.annotate_ws_schedule"):
            if fname == "T.func_attr" and args:
                d = self.expr(args[0].value)
                if isinstance(d, DictExpr):
                    ctx.attrs.extend(d.items)
            if fname == "T.annotate_buffer_versions" and args:
                ctx.attrs.append(("buffer_versions", self.expr(args[0].value)))
            return Stmt(kind="annotation", op=fname, span=span, label=label)
        if short in ctx.macros or (fname in ctx.macros):
            return self.macro_call(ctx.macros[short if short in ctx.macros else fname],
                                   call, node, ctx)
        if fname.startswith("T."):
            if self.aliases.ascend:
                # The Ascend dialect (tilelang.ascend.language) is not in the
                # operator table: its statements keep the name-based roles.
                legacy = self._legacy_tile_stmt(fname, short, args, kw, span, label, ctx)
                if legacy is not None:
                    return legacy
            elif "." not in short:
                spec = ops_mod.lookup(short)
                if spec is not None:
                    stmt = self.op_stmt(spec, fname, call, span, label, ctx)
                    if stmt is not None:
                        return stmt
                elif ops_mod.no_operands(short):
                    return Stmt(kind="call", op=fname, span=span,
                                reads=tuple(self.accesses_in(call, ctx)), label=label)
        # Unknown roles: everything it mentions may be read, nothing is taken
        # as written, and no error is based on it (Stmt.roles_known).
        reads = self.accesses_in(call, ctx)
        value = self.expr(call) if "." not in fname else None
        return Stmt(kind="call", op=fname, span=span, reads=tuple(reads), label=label,
                    value=value, roles_known=False)

    def op_stmt(self, spec: ops_mod.OpSpec, fname: str, call: cst.Call, span: Span, label: str,
                ctx: "KernelCtx") -> Optional[Stmt]:
        """A call of an operator of ``analysis/ops.py``: its arguments bound to
        the parameter names as Python binds them, reads and writes from the
        roles.  None for ``*args``/``**kwargs`` (nothing can be bound): the
        caller treats it as unknown.  A call that does not fit 0.1.15's
        signature (an argument it does not have, a missing one) keeps the roles
        of what binds, for ordering, but is marked ``roles_known=False``."""
        if any(a.star for a in call.args):
            return None
        pos = [a.value for a in call.args if a.keyword is None]
        kws = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        bound, fits = ops_mod.bind_lenient(spec, pos, kws)
        # ``dst=None`` / ``mbar=None``: the parameter is not given.
        bound = {k: v for k, v in bound.items()
                 if not (isinstance(v, cst.Name) and v.value == "None")}
        flag_value = None
        if spec.clear is not None and spec.clear[1] in bound:
            flag = self.expr(bound[spec.clear[1]])
            if isinstance(flag, Const):
                flag_value = flag.value
        reads: List[Access] = []
        writes: List[Access] = []
        for p in spec.params:
            node = bound.get(p.name)
            if node is None:
                continue
            role = ops_mod.effective_role(spec, p, bound, flag_value)
            if role == ops_mod.IGNORE:
                continue
            if role in (ops_mod.READ, ops_mod.WRITE, ops_mod.READWRITE):
                acc = self.access(node, ctx)
                if acc is None:
                    # Not a buffer operand as written (an expression): what it
                    # mentions is read.
                    reads.extend(self.accesses_in(node, ctx))
                    continue
                if role != ops_mod.WRITE:
                    reads.append(acc)
                if role != ops_mod.READ:
                    writes.append(acc)  # READWRITE: the same Access object in both
                continue
            reads.extend(self.accesses_in(node, ctx))  # VALUE, BARRIER
        return Stmt(kind=spec.kind, op=fname, span=span, reads=tuple(reads),
                    writes=tuple(writes), label=label, roles_known=fits)

    def _legacy_tile_stmt(self, fname: str, short: str, args: Sequence[cst.Arg],
                          kw: Dict[str, cst.Arg], span: Span, label: str,
                          ctx: "KernelCtx") -> Optional[Stmt]:
        """Name-based operand roles, kept for the Ascend dialect only."""
        base = short.split(".")[-1]
        if base in _COPY_OPS or base.endswith("_copy") or base == "copy":
            src = self.access(args[0].value, ctx) if args else None
            dst = self.access(args[1].value, ctx) if len(args) > 1 else None
            if dst is None and "dst" in kw:
                dst = self.access(kw["dst"].value, ctx)
            if src is None and "src" in kw:
                src = self.access(kw["src"].value, ctx)
            extra = [a for a in args[2:]]
            reads = [x for x in (src,) if x is not None]
            for a in extra:
                reads += self.accesses_in(a.value, ctx)
            return Stmt(kind="copy", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        if any(g in base for g in _GEMM_OPS):
            ops = [self.access(a.value, ctx) for a in args[:3]]
            a_, b_, c_ = (ops + [None, None, None])[:3]
            for key, pos in (("A", 0), ("B", 1), ("C", 2)):
                if key in kw:
                    val = self.access(kw[key].value, ctx)
                    if pos == 0:
                        a_ = val
                    elif pos == 1:
                        b_ = val
                    else:
                        c_ = val
            reads = [x for x in (a_, b_) if x is not None]
            clear = kw.get("clear_accum")
            clear_val = self.expr(clear.value) if clear is not None else Const(False)
            if c_ is not None and not (isinstance(clear_val, Const) and clear_val.value is True):
                reads.append(c_)
            for a in args[3:]:
                reads.extend(self.accesses_in(a.value, ctx))
            return Stmt(kind="gemm", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (c_,) if x is not None), label=label)
        if base in _FILL_OPS:
            dst = self.access(args[0].value, ctx) if args else None
            reads = [a for x in args[1:] for a in self.accesses_in(x.value, ctx)]
            return Stmt(kind="fill", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        if base.startswith("reduce") or base in ("cumsum", "finalize_reducer"):
            src = self.access(args[0].value, ctx) if args else None
            dst = self.access(args[1].value, ctx) if len(args) > 1 else src
            clear = kw.get("clear")
            reads = [x for x in (src,) if x is not None]
            clear_expr = self.expr(clear.value) if clear is not None else None
            if isinstance(clear_expr, Const) and clear_expr.value is False and dst is not None:
                reads.append(dst)
            return Stmt(kind="reduce", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        if base.startswith("atomic"):
            dst = self.access(args[0].value, ctx) if args else None
            reads = [a for x in args[1:] for a in self.accesses_in(x.value, ctx)]
            if dst is not None:
                reads.append(dst)
            return Stmt(kind="atomic", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        return None

    def macro_call(self, macro: Macro, call: cst.Call, node: cst.CSTNode, ctx: "KernelCtx") -> Stmt:
        """Inline a macro: its statements with parameters renamed to the arguments."""
        mapping: Dict[str, str] = {}
        params = [p.name for p in macro.params]
        pos = [a for a in call.args if a.keyword is None and not a.star]
        for p, a in zip(params, pos, strict=False):
            acc = self.access(a.value, ctx)
            if acc is not None:
                mapping[p] = acc.buffer
        for a in call.args:
            if a.keyword is not None and a.keyword.value in params:
                acc = self.access(a.value, ctx)
                if acc is not None:
                    mapping[a.keyword.value] = acc.buffer
        span = self.span(node)
        scalars = scalar_args(macro, self.expr(call))
        children = tuple(rename_stmt(s, mapping, span, scalars) for s in macro.body)
        reads: List[Access] = []
        writes: List[Access] = []
        for ch in children:
            reads.extend(ch.reads)
            writes.extend(ch.writes)
        return Stmt(kind="macro", op=macro.name, span=span, reads=tuple(reads),
                    writes=tuple(writes), label=self.label(node), children=children,
                    macro=macro.name)
