"""libcst expressions into the model's :class:`~..model.Expr`, and what every
builder needs around them: node positions as :class:`Span`, a node's source
text and display label, dotted names with the file's import aliases resolved
to ``T.``/``tilelang.``, assignment targets, decorators and parameters."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import libcst as cst

from ..model import (
    Attr,
    BinOp,
    Call,
    Compare,
    Const,
    DictExpr,
    Expr,
    IfExp,
    Name,
    Opaque,
    Param,
    Slice,
    Span,
    Subscript,
    TupleExpr,
    UnaryOp,
)
from .aliases import Aliases
from .chunks import source_lines

_EMPTY_MODULE = cst.Module([])
_DTYPE_KEY = {"float": "float32", "half": "float16", "double": "float64", "int": "int32"}


class ExprBuilder:
    """Expressions of one chunk (``text``, starting at ``start_line``) whose
    libcst tree has the positions ``positions`` (chunk lines, 1-based)."""

    def __init__(self, text: str, start_line: int, aliases: Aliases,
                 positions: Dict[int, Tuple[int, int, int, int]]) -> None:
        self.text = text
        self.lines = [ln.rstrip("\r\n") for ln in source_lines(text)]
        self.offset = start_line - 1
        self.aliases = aliases
        self.positions = positions

    # ---- positions --------------------------------------------------------
    def span(self, node: cst.CSTNode) -> Span:
        r = self.positions.get(id(node))
        if r is None:
            return Span(self.offset + 1, 0, self.offset + 1, 0)
        return Span(r[0] + self.offset, r[1], r[2] + self.offset, r[3])

    def src(self, node: cst.CSTNode) -> str:
        try:
            return _EMPTY_MODULE.code_for_node(node)
        except Exception:  # pragma: no cover - defensive
            return "<?>"


    def label(self, node: cst.CSTNode) -> str:
        sp = self.span(node)
        idx = sp.line - 1 - self.offset
        if 0 <= idx < len(self.lines):
            text = self.lines[idx].strip()
        else:
            text = ""
        return text if len(text) <= 80 else text[:77] + "..."

    # ---- names ------------------------------------------------------------
    def dotted(self, node: cst.BaseExpression) -> Optional[str]:
        parts: List[str] = []
        cur = node
        while isinstance(cur, cst.Attribute):
            parts.append(cur.attr.value)
            cur = cur.value
        if not isinstance(cur, cst.Name):
            return None
        parts.append(cur.value)
        parts.reverse()
        return self.normalise(parts)

    def normalise(self, parts: List[str]) -> str:
        head = parts[0]
        if head in self.aliases.lang and len(parts) > 1:
            return "T." + ".".join(parts[1:])
        if head in self.aliases.tilelang and len(parts) > 2 and parts[1] == "language":
            return "T." + ".".join(parts[2:])
        if (head in self.aliases.tilelang and len(parts) > 3 and parts[1] == "ascend"
                and parts[2] == "language"):
            return "T." + ".".join(parts[3:])
        if head in self.aliases.tilelang and len(parts) > 1:
            return "tilelang." + ".".join(parts[1:])
        return ".".join(parts)

    # ---- expressions ------------------------------------------------------
    def expr(self, node: Optional[cst.BaseExpression]) -> Expr:
        """The model of a libcst expression (None: ``Const(None)``); what the
        model has no form for is kept as its source text (``Opaque``)."""
        if node is None:
            return Const(None)
        # One dict look-up by exact type (libcst's node classes are final, and
        # ``isinstance`` on them goes through ABCMeta).
        build = _EXPR_BUILDERS.get(type(node))
        return Opaque(self.src(node)) if build is None else build(self, node)

    def _integer(self, node: cst.Integer) -> Expr:
        try:
            return Const(int(node.value.replace("_", ""), 0))
        except ValueError:
            return Opaque(node.value)

    def _float(self, node: cst.Float) -> Expr:
        try:
            return Const(float(node.value.replace("_", "")))
        except ValueError:
            return Opaque(node.value)

    def _string(self, node: Union[cst.SimpleString, cst.ConcatenatedString]) -> Expr:
        if type(node) is cst.SimpleString:
            v = node.value
            if v[0] in "\"'" and "\\" not in v and "\r" not in v:
                # No prefix, no escape: the text between the quotes (what
                # ``evaluated_value``'s ast.literal_eval gives, without a parse).
                q = 3 if v[:3] in ('"""', "'''") else 1
                return Const(v[q:-q])
        try:
            val = node.evaluated_value
        except (SyntaxError, ValueError, MemoryError, UnicodeError):
            # e.g. a half-typed "\x" escape: libcst parses it, Python does not.
            return Opaque(self.src(node))
        if isinstance(val, bytes):
            return Opaque(self.src(node))
        return Const(val)

    def _name(self, node: cst.Name) -> Expr:
        if node.value in ("True", "False"):
            return Const(node.value == "True")
        if node.value == "None":
            return Const(None)
        return Name(node.value)

    def _attribute(self, node: cst.Attribute) -> Expr:
        d = self.dotted(node)
        if d is not None and d.startswith("T.") and d.count(".") == 1:
            return Attr(Name("T"), d[2:])
        return Attr(self.expr(node.value), node.attr.value)

    def _binary(self, node: cst.BinaryOperation) -> Expr:
        return BinOp(_BINOPS.get(type(node.operator), "?"), self.expr(node.left),
                     self.expr(node.right))

    def _unary(self, node: cst.UnaryOperation) -> Expr:
        return UnaryOp(_UNOPS.get(type(node.operator), "?"), self.expr(node.expression))

    def _boolean(self, node: cst.BooleanOperation) -> Expr:
        op = "and" if isinstance(node.operator, cst.And) else "or"
        return Compare(op, self.expr(node.left), self.expr(node.right))

    def _comparison(self, node: cst.Comparison) -> Expr:
        """``a < b <= c`` as ``(a < b) and (b <= c)``."""
        left = self.expr(node.left)
        result: Optional[Expr] = None
        for target in node.comparisons:
            right = self.expr(target.comparator)
            cmp = Compare(_CMPOPS.get(type(target.operator), "?"), left, right)
            result = cmp if result is None else Compare("and", result, cmp)
            left = right
        return result if result is not None else left

    def _if_exp(self, node: cst.IfExp) -> Expr:
        return IfExp(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))

    def _call(self, node: cst.Call) -> Expr:
        func = self.dotted(node.func)
        if func is None and isinstance(node.func, cst.Attribute) and \
                all(a.keyword is None and not a.star for a in node.args):
            # A method of a computed value (``default_config().items()``):
            # ``Call(".items", (receiver, *args))``.
            return Call("." + node.func.attr.value,
                        (self.expr(node.func.value),)
                        + tuple(self.expr(a.value) for a in node.args))
        if func is None:
            return Opaque(self.src(node))
        args: List[Expr] = []
        kwargs: List[Tuple[str, Expr]] = []
        for a in node.args:
            if a.keyword is not None:
                kwargs.append((a.keyword.value, self.expr(a.value)))
            elif a.star:
                args.append(Opaque(self.src(a)))
            else:
                args.append(self.expr(a.value))
        return Call(func, tuple(args), tuple(kwargs))

    def _comprehension(self, node: Union[cst.ListComp, cst.SetComp, cst.GeneratorExp]) -> Expr:
        return Call("<listcomp>", (self.expr(node.elt),) + self.comp_gens(node.for_in))

    def _dict_comprehension(self, node: cst.DictComp) -> Expr:
        return Call("<dictcomp>", (self.expr(node.key), self.expr(node.value))
                    + self.comp_gens(node.for_in))

    def _sequence(self, node: Union[cst.Tuple, cst.List]) -> Expr:
        items: List[Expr] = []
        for el in node.elements:
            if isinstance(el, cst.StarredElement):
                items.append(Opaque(self.src(el)))
            else:
                items.append(self.expr(el.value))
        return TupleExpr(tuple(items), type(node) is cst.List)

    def _dict(self, node: cst.Dict) -> Expr:
        """The entries whose key is a string, a name or a ``T.`` dtype."""
        pairs: List[Tuple[str, Expr]] = []
        for entry in node.elements:
            if isinstance(entry, cst.DictElement):
                key = self.expr(entry.key)
                if isinstance(key, Const) and isinstance(key.value, str):
                    pairs.append((key.value, self.expr(entry.value)))
                elif isinstance(key, Name):
                    # ``{A_l1: 2}`` (annotate_buffer_versions keys are buffers)
                    pairs.append((key.id, self.expr(entry.value)))
                elif isinstance(key, Attr) and key.base == Name("T"):
                    # ``{T.float16: 2}``: dtypes evaluate to their names.
                    pairs.append((_DTYPE_KEY.get(key.attr, key.attr),
                                  self.expr(entry.value)))
        return DictExpr(tuple(pairs))

    def _subscript(self, node: cst.Subscript) -> Expr:
        idx = self.subscript_indices(node)
        return Subscript(self.expr(node.value), idx[0] if len(idx) == 1 else TupleExpr(idx))

    def comp_gens(self, f: Optional[cst.CompFor]) -> Tuple[Expr, ...]:
        out: List[Expr] = []
        while f is not None:
            out.append(TupleExpr((self.expr(f.target), self.expr(f.iter),
                                  TupleExpr(tuple(self.expr(i.test) for i in f.ifs)))))
            f = f.inner_for_in
        return tuple(out)

    def subscript_indices(self, node: cst.Subscript) -> Tuple[Expr, ...]:
        out: List[Expr] = []
        for el in node.slice:
            sl = el.slice
            if isinstance(sl, cst.Index):
                out.append(self.expr(sl.value))
            elif isinstance(sl, cst.Slice):
                out.append(Slice(None if sl.lower is None else self.expr(sl.lower),
                                 None if sl.upper is None else self.expr(sl.upper),
                                 None if sl.step is None else self.expr(sl.step)))
        return tuple(out)


    def assign_target(self, target: cst.BaseExpression, value: cst.BaseExpression,
                      out: List[Tuple[str, Expr]]) -> None:
        if isinstance(target, cst.Name):
            out.append((target.value, self.expr(value)))
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = [el.value for el in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(names):
                for n, v in zip(names, value.elements, strict=True):
                    self.assign_target(n, v.value, out)
            else:
                whole = self.expr(value)
                for i, n in enumerate(names):
                    if isinstance(n, cst.Name):
                        out.append((n.value, Subscript(whole, Const(i))))

    def decorator_names(self, fn: cst.FunctionDef) -> List[str]:
        names = []
        for dec in fn.decorators:
            d = dec.decorator
            if isinstance(d, cst.Call):
                d = d.func
            name = self.dotted(d)
            if name:
                names.append(name)
        return names

    def params(self, fn: cst.FunctionDef) -> Tuple[Param, ...]:
        out = []
        p = fn.params
        for param in list(p.posonly_params) + list(p.params) + list(p.kwonly_params):
            out.append(Param(param.name.value, self.span(param.name),
                             None if param.default is None else self.expr(param.default),
                             None if param.annotation is None
                             else self.expr(param.annotation.annotation)))
        return tuple(out)


_BINOPS = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/",
    cst.FloorDivide: "//", cst.Modulo: "%", cst.Power: "**", cst.LeftShift: "<<",
    cst.RightShift: ">>", cst.BitAnd: "&", cst.BitOr: "|", cst.BitXor: "^",
    cst.MatrixMultiply: "@",
}
_UNOPS = {cst.Minus: "-", cst.Plus: "+", cst.Not: "not", cst.BitInvert: "~"}
AUGOPS = {
    cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*",
    cst.DivideAssign: "/", cst.FloorDivideAssign: "//", cst.ModuloAssign: "%",
    cst.PowerAssign: "**", cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>",
    cst.BitAndAssign: "&", cst.BitOrAssign: "|", cst.BitXorAssign: "^",
}
_CMPOPS: Dict[type, str] = {
    cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=", cst.Equal: "==", cst.NotEqual: "!=",
    cst.In: "in", cst.NotIn: "not in", cst.Is: "is", cst.IsNot: "is not",
}


# The builder of each expression node type (:meth:`ExprBuilder.expr`).
_EXPR_BUILDERS: Dict[type, Callable[[ExprBuilder, Any], Expr]] = {
    cst.Integer: ExprBuilder._integer,
    cst.Float: ExprBuilder._float,
    cst.SimpleString: ExprBuilder._string,
    cst.ConcatenatedString: ExprBuilder._string,
    cst.Name: ExprBuilder._name,
    cst.Attribute: ExprBuilder._attribute,
    cst.BinaryOperation: ExprBuilder._binary,
    cst.UnaryOperation: ExprBuilder._unary,
    cst.BooleanOperation: ExprBuilder._boolean,
    cst.Comparison: ExprBuilder._comparison,
    cst.IfExp: ExprBuilder._if_exp,
    cst.Call: ExprBuilder._call,
    cst.ListComp: ExprBuilder._comprehension,
    cst.SetComp: ExprBuilder._comprehension,
    cst.GeneratorExp: ExprBuilder._comprehension,
    cst.DictComp: ExprBuilder._dict_comprehension,
    cst.Tuple: ExprBuilder._sequence,
    cst.List: ExprBuilder._sequence,
    cst.Dict: ExprBuilder._dict,
    cst.Subscript: ExprBuilder._subscript,
}
