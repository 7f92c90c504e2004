"""Kernel discovery and the chunk model: which functions are kernels
(``@T.prim_func``, ``@tilelang.jit`` with ``T.Kernel``, macros that launch one,
factories around them), each kernel's launch, parameters and body, and
:class:`ChunkModel`, everything one chunk contributes to the module."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from ..model import (
    Call,
    CallSite,
    Diagnostic,
    Expr,
    FuncDef,
    FuncStmt,
    Kernel,
    Macro,
    Param,
    Span,
    Stmt,
)
from .accesses import KernelCtx
from .aliases import Aliases
from .facts import IterHelper, ModuleFacts
from .positions import ChunkTree
from .statements import StatementBuilder
from .syntax import error_diagnostic
from .walk import code_children, compound_children

# ``with ...:`` statements that launch a device kernel.
KERNEL_LAUNCHES = ("T.Kernel", "T.ScopeKernel", "T.ClusterKernel")
# A launch's threads, the span of ``threads=``, and its grid.
Launch = Tuple[Optional[Expr], Optional[Span], Tuple[Expr, ...]]


# ``tilelang.PassConfigKey`` members read from a decorator's ``pass_configs``,
# with the config string each stands for (tilelang/transform/pass_config.py).
_PASS_CONFIG_KEYS = {"TL_DISABLE_WARP_SPECIALIZED": "tl.disable_warp_specialized"}


@dataclass(frozen=True)
class ChunkModel:
    kernels: Tuple[Kernel, ...] = ()
    constants: Tuple[Tuple[str, Expr], ...] = ()
    call_sites: Tuple[CallSite, ...] = ()
    functions: Tuple[Tuple[str, Tuple[Param, ...]], ...] = ()
    macros: Tuple[Macro, ...] = ()
    problems: Tuple[Diagnostic, ...] = ()
    defs: Tuple[FuncDef, ...] = ()
    argparse: Tuple[Tuple[str, Expr], ...] = ()
    toplevel: Tuple[FuncStmt, ...] = ()
    # Functions that return a loop iterator (``def maybe_pipeline(n, s): return
    # T.Pipelined(n, num_stages=s) if s > 0 else T.serial(n)``): name, params, expr.
    iter_helpers: Tuple[IterHelper, ...] = ()


class ChunkBuilder(StatementBuilder, ModuleFacts):
    """One chunk's :class:`ChunkModel`: its kernels (found here), statements
    (:class:`StatementBuilder`) and module facts (:class:`ModuleFacts`)."""

    def __init__(self, text: str, start_line: int, aliases: Aliases,
                 positions: Dict[int, Tuple[int, int, int, int]]) -> None:
        super().__init__(text, start_line, aliases, positions)
        self.kernels: List[Kernel] = []
        self.constants: List[Tuple[str, Expr]] = []
        self.calls: List[CallSite] = []
        self.functions: List[Tuple[str, Tuple[Param, ...]]] = []
        self.macros: List[Macro] = []
        self.problems: List[Diagnostic] = []
        self.defs: List[FuncDef] = []
        self.argparse: List[Tuple[str, Expr]] = []
        self.toplevel: List[FuncStmt] = []
        self.iter_helpers: List[IterHelper] = []

    def build(self, module: cst.Module) -> ChunkModel:
        for stmt in module.body:
            self.top_level(stmt, enclosing=None, class_name=None)
            try:
                self.toplevel.extend(self.func_stmts([stmt]))
            except RecursionError:
                pass
        return ChunkModel(tuple(self.kernels), tuple(self.constants), tuple(self.calls),
                          tuple(self.functions), tuple(self.macros), tuple(self.problems),
                          tuple(self.defs), tuple(self.argparse), tuple(self.toplevel),
                          tuple(self.iter_helpers))

    def top_level(self, stmt: cst.CSTNode, enclosing: Optional[str],
                  class_name: Optional[str]) -> None:
        if isinstance(stmt, cst.FunctionDef):
            self.function(stmt, class_name=class_name)
        elif isinstance(stmt, cst.ClassDef):
            for member in stmt.body.body:
                self.top_level(member, enclosing=None, class_name=stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and enclosing is None \
                        and class_name is None:
                    self.module_assign(small)
                self.collect_calls(small, enclosing)
        elif isinstance(stmt, (cst.If, cst.With, cst.For, cst.While, cst.Try)):
            self.collect_calls(stmt, enclosing)
            for inner in compound_children(stmt):
                if isinstance(inner, (cst.FunctionDef, cst.ClassDef)):
                    self.top_level(inner, enclosing, class_name)
                elif enclosing is None and class_name is None and \
                        isinstance(stmt, (cst.If, cst.With, cst.Try)):
                    self.module_compound(inner)

    def function(self, fn: cst.FunctionDef, class_name: Optional[str],
                 factory: Optional[cst.FunctionDef] = None,
                 factory_locals: Optional[List[Tuple[str, Expr]]] = None,
                 factory_macros: Optional[Dict[str, Macro]] = None,
                 chain: Tuple[Param, ...] = ()) -> None:
        """One function.  ``factory`` is the outermost enclosing function (the
        one the file calls); ``chain`` the parameters of every enclosing function,
        outermost first (a prim_func inside a ``@tilelang.jit`` function inside an
        ``lru_cache`` factory sees all of them)."""
        decos = self.decorator_names(fn)
        params = self.params(fn)
        if factory is None:
            self.functions.append((fn.name.value, params))
        if any(d in ("T.prim_func", "tilelang.prim_func", "prim_func") for d in decos):
            self.kernel(fn, "factory" if factory is not None else "module", class_name,
                        factory, factory_locals or [], factory_macros or {}, chain)
            return
        if any(d == "T.macro" or d.endswith(".macro") or d == "macro" for d in decos):
            macro = Macro(fn.name.value, self.span(fn.name), params,
                          tuple(self.block(fn.body, {}, macros=factory_macros or {})))
            if factory_macros is not None:
                factory_macros[fn.name.value] = macro
            else:
                self.macros.append(macro)
            if _contains_kernel_with(fn, self):
                # A macro that opens ``T.Kernel`` itself is a whole kernel body.
                self.kernel(fn, "factory" if factory is not None else "macro", class_name,
                            factory, factory_locals or [], factory_macros or {}, chain)
            return
        is_jit = any(d in ("tilelang.jit", "jit", "tilelang.lazy_jit", "lazy_jit")
                     or d.endswith(".jit") for d in decos)
        if is_jit and _contains_kernel_with(fn, self):
            if factory is None:
                self.record_def(fn, params, class_name)
                self.kernel(fn, "jit", class_name, None, [], {})
            else:
                self.kernel(fn, "jit", class_name, factory, factory_locals or [],
                            factory_macros or {}, _merge_params(chain, params))
            return
        helper = self.iterator_helper(fn)
        if helper is not None:
            self.iter_helpers.append(helper)
        if factory is not None:
            # A function inside a factory (a ``@tilelang.jit`` builder, a
            # ``def kernel(block_M=None, …)`` config closure): a deeper level of
            # the same factory.  Its parameters join the chain.
            if _defines_kernel(fn, self):
                self.factory_body(factory, fn.body.body, class_name,
                                  list(factory_locals or []), dict(factory_macros or {}),
                                  _merge_params(chain, params))
            return
        self.record_def(fn, params, class_name)
        # A plain function: a factory if it defines a prim_func inside.
        self.collect_calls(fn.body, fn.name.value, class_name)
        local: List[Tuple[str, Expr]] = []
        local_macros: Dict[str, Macro] = {m.name: m for m in self.macros}
        self.factory_body(fn, fn.body.body, class_name, local, local_macros, params)

    def factory_body(self, fn: cst.FunctionDef, stmts: Sequence[cst.CSTNode],
                     class_name: Optional[str], local: List[Tuple[str, Expr]],
                     local_macros: Dict[str, Macro], chain: Tuple[Param, ...] = ()) -> None:
        for stmt in stmts:
            if isinstance(stmt, cst.FunctionDef):
                self.function(stmt, class_name, factory=fn, factory_locals=list(local),
                              factory_macros=local_macros, chain=chain)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            self.assign_target(t.target, small.value, local)
                    elif isinstance(small, cst.AnnAssign) and small.value is not None \
                            and isinstance(small.target, cst.Name):
                        local.append((small.target.value, self.expr(small.value)))
            elif isinstance(stmt, (cst.If, cst.With, cst.Try, cst.For, cst.While)):
                self.factory_body(fn, compound_children(stmt), class_name, local,
                                  local_macros, chain)

    def kernel(self, fn: cst.FunctionDef, style: str, class_name: Optional[str],
               factory: Optional[cst.FunctionDef], factory_locals: List[Tuple[str, Expr]],
               macros: Dict[str, Macro], chain: Tuple[Param, ...] = ()) -> None:
        """The kernels ``fn`` defines: one per ``with T.Kernel(...)`` in its
        body (the second is ``name#2``...), or, for a prim_func written at the
        TIR level (no ``T.Kernel``, a ``T.Pipelined`` loop), its whole body."""
        ctx = KernelCtx(macros=dict(macros))
        for name, _ in self.params_of(fn):
            ctx.buffers.add(name)
        locals_: List[Tuple[str, Expr]] = list(factory_locals)
        ctx.locals = locals_
        kernel_with: Optional[cst.With] = None
        launch: Launch = (None, None, ())
        body: List[Stmt] = []
        more: List[cst.With] = []  # a second ``with T.Kernel`` is a second device kernel
        for stmt in fn.body.body:
            found = self.find_kernel_with(stmt)
            if found is not None and kernel_with is not None:
                more.append(found)
            elif found is not None:
                kernel_with = found
                launch = self.kernel_launch(found)
                body = self.block(found.body, ctx, macros=ctx.macros, locals_out=locals_)
            else:
                self.kernel_prelude(stmt, ctx, locals_)
        if kernel_with is None and _has_pipelined(fn, self):
            # A prim_func written at the TIR level (no ``T.Kernel``): its body is
            # what the passes see.
            body = self.block(fn.body, ctx, macros=ctx.macros, locals_out=locals_)
        first = self.kernel_model(fn, style, class_name, factory, chain, kernel_with, launch,
                                  body, ctx)
        self.kernels.append(first)
        for i, extra in enumerate(more, start=2):
            self.kernels.append(self.next_launch(first, i, extra, ctx, locals_))

    def kernel_prelude(self, stmt: cst.CSTNode, ctx: KernelCtx,
                       locals_: List[Tuple[str, Expr]]) -> None:
        """A statement of the prim_func outside ``with T.Kernel`` (jit style puts
        annotations and ``T.const`` before it): buffers it declares, locals it
        assigns, macros it defines."""
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    ann = self.expr(small.annotation.annotation)
                    ctx.buffers.add(small.target.value)
                    if small.value is not None:
                        locals_.append((small.target.value, self.expr(small.value)))
                    elif isinstance(ann, Call):
                        locals_.append((small.target.value, ann))
                elif isinstance(small, cst.Assign):
                    val = small.value
                    if isinstance(val, cst.Call) and (self.dotted(val.func) or "") in (
                            "T.empty", "T.Tensor", "T.Buffer"):
                        for t in small.targets:
                            if isinstance(t.target, cst.Name):
                                ctx.buffers.add(t.target.value)
                    for t in small.targets:
                        self.assign_target(t.target, val, locals_)
        elif isinstance(stmt, cst.FunctionDef):
            self.record_macro(stmt, ctx.macros)

    def kernel_model(self, fn: cst.FunctionDef, style: str, class_name: Optional[str],
                     factory: Optional[cst.FunctionDef], chain: Tuple[Param, ...],
                     kernel_with: Optional[cst.With], launch: "Launch", body: List[Stmt],
                     ctx: KernelCtx) -> Kernel:
        """The :class:`Kernel` of ``fn`` once its body is built."""
        threads, threads_span, grid = launch
        dialect = "ascend" if self.aliases.ascend else "npu" if self.aliases.npu_fork else "cuda"
        fspan = self.span(fn)
        # The def line, not the decorators.
        def_span = Span(self.span(fn.name).line, 0, fspan.end_line, fspan.end_col)
        bindings = self.comment_bindings(fn)
        if factory is not None:
            bindings = self.comment_bindings(factory) + bindings
        return Kernel(
            name=fn.name.value,
            span=def_span,
            name_span=self.span(fn.name),
            style=style,
            dialect=dialect,
            factory=None if factory is None else factory.name.value,
            factory_span=None if factory is None else self.span(factory.name),
            factory_params=() if factory is None else (chain or self.params(factory)),
            params=self.params(fn),
            threads=threads,
            threads_span=threads_span,
            kernel_span=None if kernel_with is None else self.span(kernel_with),
            grid=grid,
            allocs=tuple(ctx.allocs),
            body=tuple(body),
            locals=tuple(ctx.locals),
            comment_bindings=tuple(bindings),
            attrs=tuple(ctx.attrs) + tuple(self.pass_config_attrs(factory))
            + tuple(self.pass_config_attrs(fn)),
            class_name=class_name,
            block_vars=() if kernel_with is None else block_vars(kernel_with),
        )

    def pass_config_attrs(self, fn: Optional[cst.FunctionDef]) -> List[Tuple[str, Expr]]:
        """The pass configs a decorator gives the kernel that matter to the model:
        ``@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED:
        True})`` (or the key as the string ``"tl.disable_warp_specialized"``):
        tilelang 0.1.15 then runs no warp-specialization pass
        (``cuda/pipeline.py``: ``allow_warp_specialized``)."""
        out: List[Tuple[str, Expr]] = []
        if fn is None:
            return out
        for d in fn.decorators:
            call = d.decorator
            if not isinstance(call, cst.Call):
                continue
            for a in call.args:
                if a.keyword is None or a.keyword.value != "pass_configs" or \
                        not isinstance(a.value, cst.Dict):
                    continue
                for el in a.value.elements:
                    if not isinstance(el, cst.DictElement):
                        continue
                    key: Optional[str] = None
                    if isinstance(el.key, cst.SimpleString):
                        v = el.key.evaluated_value
                        key = v if isinstance(v, str) else None
                    elif isinstance(el.key, cst.Attribute):
                        key = _PASS_CONFIG_KEYS.get(el.key.attr.value)
                    if key is not None and key in _PASS_CONFIG_KEYS.values():
                        out.append((key, self.expr(el.value)))
        return out

    def next_launch(self, first: Kernel, i: int, extra: cst.With, ctx: KernelCtx,
                    locals_: List[Tuple[str, Expr]]) -> Kernel:
        """The ``i``-th ``with T.Kernel`` of the function of ``first``: a kernel
        of its own, seeing the buffers, macros and locals of the prelude."""
        ctx2 = KernelCtx(macros=dict(ctx.macros), buffers=set(ctx.buffers),
                         attrs=list(ctx.attrs))
        locals2 = list(locals_)
        ctx2.locals = locals2
        threads2, threads_span2, grid2 = self.kernel_launch(extra)
        body2 = self.block(extra.body, ctx2, macros=ctx2.macros, locals_out=locals2)
        return dataclasses.replace(
            first, name=f"{first.name}#{i}", threads=threads2, threads_span=threads_span2,
            kernel_span=self.span(extra), grid=grid2, allocs=tuple(ctx2.allocs),
            body=tuple(body2), locals=tuple(locals2), attrs=tuple(ctx2.attrs),
            block_vars=block_vars(extra))

    def kernel_launch(self, kernel_with: cst.With) -> "Launch":
        """threads, the span of ``threads=``, and the grid of ``with T.Kernel(...)``."""
        threads = None
        threads_span = None
        grid_args = []
        call = kernel_with.items[0].item
        if isinstance(call, cst.Call):
            for a in call.args:
                if a.keyword is None:
                    grid_args.append(self.expr(a.value))
                elif a.keyword.value == "threads":
                    threads = self.expr(a.value)
                    threads_span = self.span(a)
        return threads, threads_span, tuple(grid_args)

    def params_of(self, fn: cst.FunctionDef) -> List[Tuple[str, Optional[Expr]]]:
        return [(p.name, p.annotation) for p in self.params(fn)]

    def find_kernel_with(self, stmt: cst.CSTNode) -> Optional[cst.With]:
        if isinstance(stmt, cst.With):
            if _is_launch(stmt, self):
                return stmt
            for inner in stmt.body.body:
                found = self.find_kernel_with(inner)
                if found is not None:
                    return found
        return None


def block_vars(kernel_with: cst.With) -> Tuple[str, ...]:
    """The names ``with T.Kernel(...) as bx`` / ``as (bx, by)`` binds."""
    asname = kernel_with.items[0].asname
    if asname is None:
        return ()
    target = asname.name
    if isinstance(target, cst.Name):
        return (target.value,)
    if isinstance(target, (cst.Tuple, cst.List)):
        names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
        return tuple(names) if len(names) == len(target.elements) else ()
    return ()


def too_deep(start_line: int) -> ChunkModel:
    return ChunkModel(problems=(error_diagnostic(
        "TL001", Span(start_line, 0, start_line, 1),
        "this statement nests too deeply to analyse"),))


def build_model(tree: "ChunkTree", start_line: int, aliases: Aliases) -> ChunkModel:
    try:
        builder = ChunkBuilder(tree.text, start_line, aliases, tree.positions)
        with warnings.catch_warnings():
            # String literals are evaluated (ast.literal_eval) to read dtypes:
            # the user's invalid escapes would warn on our stderr.
            warnings.simplefilter("ignore")
            return builder.build(tree.module)
    except RecursionError:
        return too_deep(start_line)


def _contains_kernel_with(fn: cst.FunctionDef, builder: ChunkBuilder) -> bool:
    """Whether ``fn``'s own body (not a nested function) launches a kernel."""
    return _finds_kernel(fn, builder, nested=False)


def _is_launch(node: cst.With, builder: "ChunkBuilder") -> bool:
    """Whether ``with ...:`` launches a device kernel (``T.Kernel`` and kin)."""
    return any(isinstance(item.item, cst.Call)
               and (builder.dotted(item.item.func) or "") in KERNEL_LAUNCHES
               for item in node.items)


def _merge_params(outer: Sequence[Param], inner: Sequence[Param]) -> Tuple[Param, ...]:
    """The parameters seen from a nested function: the enclosing ones in order
    (so a call of the outermost factory binds positionally), an inner parameter
    replacing an outer one of the same name."""
    names = {p.name for p in inner}
    return tuple(p for p in outer if p.name not in names) + tuple(inner)


def _defines_kernel(fn: cst.FunctionDef, builder: "ChunkBuilder") -> bool:
    """Whether a prim_func, a ``T.Kernel`` or a macro is defined anywhere inside."""
    return _finds_kernel(fn, builder, nested=True)


def _finds_kernel(fn: cst.FunctionDef, builder: "ChunkBuilder", nested: bool) -> bool:
    """A kernel launch (``with T.Kernel(...)``) in ``fn``; with ``nested``, in
    nested functions too, and a ``@prim_func`` / ``@macro`` decorator counts."""
    stack: List[cst.CSTNode] = [fn]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.FunctionDef) and not (nested or n is fn):
            continue
        if isinstance(n, cst.Decorator):
            d = n.decorator
            if isinstance(d, cst.Call):
                d = d.func
            name = builder.dotted(d) or ""
            if nested and (name.endswith("prim_func") or name.endswith("macro")):
                return True
            continue
        if isinstance(n, cst.With) and _is_launch(n, builder):
            return True
        stack.extend(code_children(n))
    return False


def _has_pipelined(fn: cst.FunctionDef, builder: "ChunkBuilder") -> bool:
    """Whether a ``for`` under ``fn`` iterates over ``T.Pipelined(...)`` (also as
    either branch of ``a if c else b``)."""
    stack: List[cst.CSTNode] = [fn]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.For):
            it = n.iter
            for e in ((it.body, it.orelse) if isinstance(it, cst.IfExp) else (it,)):
                if isinstance(e, cst.Call) and (builder.dotted(e.func) or "") == "T.Pipelined":
                    return True
        stack.extend(code_children(n))
    return False
