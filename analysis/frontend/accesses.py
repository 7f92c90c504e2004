"""Buffer accesses: which names of a kernel are buffers (:class:`KernelCtx`),
and the :class:`~..model.Access` reads and writes an expression makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import libcst as cst

from ..model import Access, Alloc, Expr, Macro
from .expressions import ExprBuilder
from .walk import code_children


@dataclass
class KernelCtx:
    macros: Dict[str, Macro] = field(default_factory=dict)
    buffers: set = field(default_factory=set)
    var_buffers: set = field(default_factory=set)
    allocs: List[Alloc] = field(default_factory=list)
    attrs: List[Tuple[str, Expr]] = field(default_factory=list)
    loop_vars: set = field(default_factory=set)
    helper_iterators: set = field(default_factory=set)
    loose: bool = False  # macro bodies: any name may be a buffer parameter
    locals: List[Tuple[str, Expr]] = field(default_factory=list)  # visible assignments



class AccessBuilder(ExprBuilder):
    """The buffer accesses of kernel code."""

    def access(self, node: cst.BaseExpression, ctx: "KernelCtx") -> Optional[Access]:
        if isinstance(node, cst.Name):
            if ctx.loose or node.value in ctx.buffers:
                return Access(node.value, self.span(node))
            return None
        if isinstance(node, cst.Subscript):
            base = self.dotted(node.value)
            if base is not None and (ctx.loose or base in ctx.buffers):
                return Access(base, self.span(node), self.subscript_indices(node))
            return None
        if isinstance(node, cst.Call):
            fname = self.dotted(node.func) or ""
            if fname in ("T.region", "T.BufferRegion", "T.access_ptr") and node.args:
                return self.access(node.args[0].value, ctx)
        if isinstance(node, cst.Attribute):
            base = self.dotted(node.value)
            if base is not None and base in ctx.buffers:
                return Access(base, self.span(node))
        return None

    def accesses_in(self, node: cst.CSTNode, ctx: "KernelCtx") -> List[Access]:
        """The buffer accesses under ``node``, in source order: a subscript of a
        buffer is one access (its indices are searched too), a bare buffer name
        is one unless the context is loose; a call contributes its arguments'
        accesses, an attribute its object's."""
        out: List[Access] = []
        stack: List[cst.CSTNode] = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Subscript):
                acc = self.access(n, ctx)
                if acc is not None:
                    out.append(acc)
                    kids: List[cst.CSTNode] = list(n.slice)
                else:
                    kids = code_children(n)
            elif isinstance(n, cst.Name):
                if n.value in ctx.buffers and not ctx.loose:
                    out.append(Access(n.value, self.span(n)))
                continue
            elif isinstance(n, cst.Attribute):
                kids = [n.value]
            elif isinstance(n, cst.Call):
                kids = [a.value for a in n.args]
            elif isinstance(n, cst.Arg):
                kids = [n.value]
            else:
                kids = code_children(n)
            kids.reverse()
            stack.extend(kids)
        return out
