"""What the value resolver reads outside kernels: module constants, call
sites, argparse defaults, ordinary functions as statement summaries,
functions returning a loop iterator, and ``# tilelint: bind`` comments."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import libcst as cst

from ..model import (
    Binding,
    BinOp,
    Call,
    CallSite,
    Const,
    Expr,
    FuncDef,
    FuncStmt,
    IfExp,
    Name,
    Opaque,
    Param,
    Span,
)
from .expressions import AUGOPS, ExprBuilder
from .statements import LOOP_KINDS
from .walk import calls_in, compound_children, suite

# A function returning a loop iterator: (name, parameters, returned expression).
IterHelper = Tuple[str, Tuple[Param, ...], Expr]
_BIND_RX = re.compile(r"#\s*tilelint:\s*bind\s+(?P<body>.*)$")


class ModuleFacts(ExprBuilder):
    """The facts of module-level code and ordinary functions."""

    constants: List[Tuple[str, Expr]]
    calls: List[CallSite]
    argparse: List[Tuple[str, Expr]]
    defs: List[FuncDef]

    def module_compound(self, stmt: cst.CSTNode) -> None:
        """Assignments inside a module-level ``if``/``with``/``try`` (the
        ``if __name__ == "__main__":`` block) are module globals too."""
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    self.module_assign(small)
        elif isinstance(stmt, (cst.If, cst.With, cst.Try)):
            for inner in compound_children(stmt):
                self.module_compound(inner)

    def module_assign(self, node: Union[cst.Assign, cst.AnnAssign]) -> None:
        if isinstance(node, cst.AnnAssign):
            if isinstance(node.target, cst.Name) and node.value is not None:
                self.constants.append((node.target.value, self.expr(node.value)))
            return
        value = node.value
        for target in node.targets:
            self.assign_target(target.target, value, self.constants)

    def collect_calls(self, node: cst.CSTNode, enclosing: Optional[str],
                      enclosing_class: Optional[str] = None) -> None:
        if isinstance(node, cst.FunctionDef):  # (the visitor this replaces stopped at once)
            return
        for call in calls_in(node, []):
            self.record_call(call, enclosing, enclosing_class)

    def record_call(self, call: cst.Call, enclosing: Optional[str],
                    enclosing_class: Optional[str] = None) -> None:
        func = call.func
        via = "call"
        call_span = self.span(call)
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            self.record_argument(call)
            return
        name: Optional[str]
        if isinstance(func, cst.Attribute) and func.attr.value in ("compile", "get_tir",
                                                                    "get_kernel_source"):
            via = func.attr.value
            inner = func.value
            if isinstance(inner, cst.Name):
                name = inner.value
            else:
                return
        else:
            name = self.dotted(func)
            if name is None:
                return
            if name in ("functools.partial", "partial") and call.args:
                first = self.dotted(call.args[0].value)
                if first is None:
                    return
                name, via = first, "partial"
                call = call.with_changes(args=call.args[1:])
        args: List[Expr] = []
        kwargs: List[Tuple[str, Expr]] = []
        stars: List[Expr] = []
        for a in call.args:
            if a.keyword is not None:
                kwargs.append((a.keyword.value, self.expr(a.value)))
            elif a.star == "**":
                stars.append(self.expr(a.value))
            elif a.star == "*":
                args.append(Opaque(self.src(a)))
            else:
                args.append(self.expr(a.value))
        self.calls.append(CallSite(name, call_span, tuple(args), tuple(kwargs),
                                   tuple(stars), via, enclosing, enclosing_class))

    def record_argument(self, call: cst.Call) -> None:
        """``parser.add_argument("--num_stages", type=int, default=3)``."""
        names: List[str] = []
        kw: Dict[str, Expr] = {}
        for a in call.args:
            if a.keyword is not None:
                kw[a.keyword.value] = self.expr(a.value)
            elif not a.star:
                v = self.expr(a.value)
                if isinstance(v, Const) and isinstance(v.value, str):
                    names.append(v.value)
        dest = None
        d = kw.get("dest")
        if isinstance(d, Const) and isinstance(d.value, str):
            dest = d.value
        else:
            longs = [n for n in names if n.startswith("--")]
            pick = longs[0] if longs else (names[0] if names else None)
            if pick is not None:
                dest = pick.lstrip("-").replace("-", "_")
        if not dest or not dest.isidentifier():
            return
        default: Expr = kw.get("default", Const(None))
        action = kw.get("action")
        if "default" not in kw and isinstance(action, Const):
            if action.value == "store_true":
                default = Const(False)
            elif action.value == "store_false":
                default = Const(True)
        typ = kw.get("type")
        if isinstance(default, Const) and isinstance(default.value, str) and \
                isinstance(typ, Name) and typ.id in ("int", "float"):
            try:
                default = Const(int(default.value) if typ.id == "int" else float(default.value))
            except ValueError:
                pass
        self.argparse.append((dest, default))

    def record_def(self, fn: cst.FunctionDef, params: Tuple[Param, ...],
                   class_name: Optional[str]) -> None:
        p = fn.params
        vararg = p.star_arg.name.value if isinstance(p.star_arg, cst.Param) else None
        kwarg = p.star_kwarg.name.value if p.star_kwarg is not None else None
        decos = tuple(self.expr(d.decorator) for d in fn.decorators)
        try:
            body = tuple(self.func_stmts(suite(fn.body)))
        except RecursionError:
            body = ()
        self.defs.append(FuncDef(fn.name.value, self.span(fn.name), params, body, decos,
                                 class_name, vararg, kwarg))

    def func_stmts(self, stmts: Sequence[cst.CSTNode]) -> List[FuncStmt]:
        """A statement summary of ordinary Python code (nested defs left out)."""
        out: List[FuncStmt] = []
        for node in stmts:
            sp = self.span(node)
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    if isinstance(small, cst.Assign):
                        val = self.expr(small.value)
                        for t in small.targets:
                            out.append(FuncStmt("assign", sp, self.expr(t.target), val))
                    elif isinstance(small, cst.AnnAssign) and small.value is not None:
                        out.append(FuncStmt("assign", sp, self.expr(small.target),
                                            self.expr(small.value)))
                    elif isinstance(small, cst.AugAssign):
                        tgt = self.expr(small.target)
                        op = AUGOPS.get(type(small.operator), "?")
                        out.append(FuncStmt("assign", sp, tgt,
                                            BinOp(op, tgt, self.expr(small.value))))
                    elif isinstance(small, cst.Return):
                        out.append(FuncStmt("return", sp, None,
                                            self.expr(small.value) if small.value is not None
                                            else Const(None)))
                    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                        out.append(FuncStmt("expr", sp, None, self.expr(small.value)))
            elif isinstance(node, cst.If):
                orelse: List[FuncStmt] = []
                if isinstance(node.orelse, cst.If):
                    orelse = self.func_stmts([node.orelse])
                elif node.orelse is not None:
                    orelse = self.func_stmts(suite(node.orelse.body))
                out.append(FuncStmt("if", sp, None, self.expr(node.test),
                                    tuple(self.func_stmts(suite(node.body))), tuple(orelse)))
            elif isinstance(node, cst.For):
                out.append(FuncStmt(
                    "for", sp, self.expr(node.target), self.expr(node.iter),
                    tuple(self.func_stmts(suite(node.body))),
                    tuple(self.func_stmts(suite(node.orelse.body)))
                    if node.orelse is not None else ()))
            elif isinstance(node, cst.While):
                out.append(FuncStmt("while", sp, None, self.expr(node.test),
                                    tuple(self.func_stmts(suite(node.body)))))
            elif isinstance(node, cst.With):
                out.extend(self.func_stmts(suite(node.body)))
            elif isinstance(node, cst.Try):
                out.extend(self.func_stmts(suite(node.body)))
                if node.orelse is not None:
                    out.extend(self.func_stmts(suite(node.orelse.body)))
                if node.finalbody is not None:
                    out.extend(self.func_stmts(suite(node.finalbody.body)))
        return out

    def iterator_helper(self, fn: cst.FunctionDef) -> Optional[IterHelper]:
        """``def maybe_pipeline(n, s): return T.Pipelined(n, num_stages=s) if … else
        T.serial(n)`` (or the same with if/else returns): (name, params, expr)."""
        try:
            e = self._iter_return(list(suite(fn.body)))
        except RecursionError:
            return None
        if e is None:
            return None
        return (fn.name.value, self.params(fn), e)

    def _iter_return(self, stmts: Sequence[cst.CSTNode]) -> Optional[Expr]:
        for i, st in enumerate(stmts):
            if isinstance(st, cst.SimpleStatementLine):
                for small in st.body:
                    if isinstance(small, cst.Return):
                        e = self.expr(small.value) if small.value is not None else None
                        return e if _is_iter_expr(e) else None
            elif isinstance(st, cst.If):
                a = self._iter_return(list(suite(st.body)))
                if a is None:
                    return None
                if st.orelse is None:
                    b = self._iter_return(stmts[i + 1:])
                elif isinstance(st.orelse, cst.If):
                    b = self._iter_return([st.orelse])
                else:
                    b = self._iter_return(list(suite(st.orelse.body)))
                if b is None:
                    return None
                return IfExp(self.expr(st.test), a, b)
            elif isinstance(st, (cst.For, cst.While, cst.With, cst.Try)):
                return None
        return None

    def comment_bindings(self, node: cst.FunctionDef) -> List[Binding]:
        """``# tilelint: bind a=1 b=2`` in the comment lines right above ``node``."""
        out: List[Binding] = []
        first = self.span(node).line - self.offset  # 1-based within chunk (def line)
        if node.decorators:
            first = self.span(node.decorators[0]).line - self.offset
        i = first - 2
        while 0 <= i < len(self.lines):
            line = self.lines[i].strip()
            if not line.startswith("#"):
                break
            m = _BIND_RX.search(line)
            if m:
                out.extend(self.parse_bind_body(m.group("body"), i + 1 + self.offset))
            i -= 1
        return out

    def parse_bind_body(self, body: str, line: int) -> List[Binding]:
        out = []
        for m in re.finditer(r"(\w+)\s*=\s*([^\s,]+)", body):
            try:
                val = cst.parse_expression(m.group(2))
                expr = self.expr(val)
            except Exception:
                expr = Opaque(m.group(2))
            out.append(Binding(m.group(1), expr, "comment",
                               Span(line, 0, line, len(self.lines[line - 1 - self.offset])
                                    if 0 <= line - 1 - self.offset < len(self.lines) else 0)))
        return out


_ITER_FUNCS = {"T." + k for k in LOOP_KINDS} | {"range"}


def _is_iter_expr(e: Optional[Expr]) -> bool:
    if isinstance(e, Call):
        return e.func in _ITER_FUNCS
    if isinstance(e, IfExp):
        return _is_iter_expr(e.body) and _is_iter_expr(e.orelse)
    return False
