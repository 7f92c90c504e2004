"""Static values: resolve symbolic sizes without executing anything.

A kernel's sizes come from, in increasing priority: module constants, the
factory's defaults, the literal arguments of a call site in the same file
(direct call, ``.compile(...)``, ``functools.partial``, ``**cfg`` from a
literal dict), the factory's and the kernel's own assignments, and finally
explicit bindings (a ``# tilelint: bind`` comment or configuration).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from .model import (
    Attr, BinOp, Binding, Call, CallSite, Compare, Const, DictExpr, Expr, IfExp,
    Kernel, Module, Name, Opaque, Slice, Subscript, TupleExpr, UnaryOp,
)


class Unknown(Exception):
    """Raised inside evaluation when a value cannot be known statically."""

    def __init__(self, names: Iterable[str] = (), why: str = "") -> None:
        super().__init__(why)
        self.names = set(names)
        self.why = why


# A marker for names known to be symbolic at compile time (``T.const``,
# ``T.dynamic``, tensor parameters).
@dataclass(frozen=True)
class Symbolic:
    name: str


_DTYPE_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32",
    "bool": "bool", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
    "fp8": "float8_e4m3", "e4m3_float8": "float8_e4m3", "e5m2_float8": "float8_e5m2",
}

_DTYPE_BITS = {
    "bool": 8, "int4": 4, "uint4": 4, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16,
    "int32": 32, "uint32": 32, "int64": 64, "uint64": 64, "float16": 16, "bfloat16": 16,
    "float32": 32, "float64": 64, "tfloat32": 32,
}


def normalise_dtype(value: object) -> Optional[str]:
    if not isinstance(value, str):
        return None
    v = _DTYPE_ALIASES.get(value, value)
    return v


def dtype_bits(dtype: Optional[str]) -> Optional[int]:
    if dtype is None:
        return None
    if dtype in _DTYPE_BITS:
        return _DTYPE_BITS[dtype]
    if dtype.startswith("float8") or dtype.startswith("int8") or dtype.startswith("uint8"):
        return 8
    if dtype.startswith("float4") or dtype.startswith("float6"):
        return int(dtype[5]) if dtype[5].isdigit() else None
    return None


_BIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<<": operator.lshift,
    ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor,
}
_CMP = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}

_MAX_DEPTH = 64


class Env:
    """Names → values for one kernel instantiation."""

    def __init__(self, exprs: Mapping[str, Expr] | None = None,
                 values: Mapping[str, object] | None = None,
                 sources: Mapping[str, str] | None = None,
                 module_dicts: Mapping[str, Expr] | None = None) -> None:
        self.exprs: Dict[str, Expr] = dict(exprs or {})
        self.values: Dict[str, object] = dict(values or {})
        self.sources: Dict[str, str] = dict(sources or {})
        self._cache: Dict[str, object] = {}
        self._active: Set[str] = set()

    # -- public -----------------------------------------------------------
    def eval(self, expr: Optional[Expr]) -> object:
        """The value of ``expr`` or None if it cannot be known."""
        if expr is None:
            return None
        try:
            return self._eval(expr, 0)
        except Unknown:
            return None
        except (ArithmeticError, TypeError, ValueError, OverflowError, RecursionError):
            return None

    def eval_int(self, expr: Optional[Expr]) -> Optional[int]:
        v = self.eval(expr)
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return None

    def missing(self, expr: Optional[Expr]) -> Set[str]:
        """The names that keep ``expr`` from being known (empty if known)."""
        if expr is None:
            return set()
        try:
            self._eval(expr, 0)
            return set()
        except Unknown as exc:
            return exc.names
        except Exception:
            return set()

    def lookup(self, name: str) -> object:
        try:
            return self._name(name, 0)
        except Unknown:
            return None

    # -- evaluation -------------------------------------------------------
    def _name(self, name: str, depth: int) -> object:
        if name in self.values:
            v = self.values[name]
            if isinstance(v, Symbolic):
                raise Unknown([v.name])
            if v is None:  # ``block_K=None``: a size nobody gave
                raise Unknown([name])
            return v
        if name in self._cache:
            if self._cache[name] is None:
                raise Unknown([name])
            return self._cache[name]
        if name in self.exprs:
            if name in self._active:
                raise Unknown([name], "cyclic definition")
            self._active.add(name)
            try:
                v = self._eval(self.exprs[name], depth + 1)
            finally:
                self._active.discard(name)
            self._cache[name] = v
            if v is None:
                raise Unknown([name])
            return v
        if name in ("True", "False"):
            return name == "True"
        raise Unknown([name])

    def _eval(self, e: Expr, depth: int) -> object:
        if depth > _MAX_DEPTH:
            raise Unknown([], "expression too deep")
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Name):
            return self._name(e.id, depth)
        if isinstance(e, Attr):
            if isinstance(e.base, Name) and e.base.id == "T":
                return normalise_dtype(e.attr)
            base = self._eval(e.base, depth + 1)
            if isinstance(base, dict) and e.attr in base:
                return base[e.attr]
            if isinstance(base, str) and base == "T":
                return e.attr
            raise Unknown([], f"attribute {e.attr}")
        if isinstance(e, BinOp):
            fn = _BIN.get(e.op)
            if fn is None:
                raise Unknown([], e.op)
            left = self._eval(e.left, depth + 1)
            right = self._eval(e.right, depth + 1)
            if isinstance(left, tuple) and isinstance(right, tuple) and e.op == "+":
                return left + right
            if not _is_num(left) or not _is_num(right):
                if isinstance(left, str) and isinstance(right, str) and e.op == "+":
                    return left + right
                raise Unknown([], "non-numeric")
            if e.op == "**" and abs(right) > 64:
                raise Unknown([], "exponent too large")
            if e.op in ("<<",) and right > 64:
                raise Unknown([], "shift too large")
            return fn(left, right)
        if isinstance(e, UnaryOp):
            v = self._eval(e.operand, depth + 1)
            if e.op == "-":
                return -v
            if e.op == "+":
                return +v
            if e.op == "not":
                return not v
            if e.op == "~":
                return ~v
            raise Unknown([], e.op)
        if isinstance(e, Compare):
            if e.op == "and":
                left = self._eval(e.left, depth + 1)
                return left and self._eval(e.right, depth + 1)
            if e.op == "or":
                left = self._eval(e.left, depth + 1)
                return left or self._eval(e.right, depth + 1)
            fn = _CMP.get(e.op)
            if fn is None:
                raise Unknown([], e.op)
            return fn(self._eval(e.left, depth + 1), self._eval(e.right, depth + 1))
        if isinstance(e, IfExp):
            return self._eval(e.body if self._eval(e.test, depth + 1) else e.orelse,
                              depth + 1)
        if isinstance(e, TupleExpr):
            return tuple(self._eval(i, depth + 1) for i in e.items)
        if isinstance(e, DictExpr):
            return {k: self._eval(v, depth + 1) for k, v in e.items}
        if isinstance(e, Subscript):
            base = self._eval(e.value, depth + 1)
            idx = self._eval(e.index, depth + 1)
            try:
                return base[idx]
            except (KeyError, IndexError, TypeError):
                raise Unknown([], "subscript")
        if isinstance(e, Call):
            return self._call(e, depth)
        raise Unknown([], "opaque")

    def _call(self, e: Call, depth: int) -> object:
        f = e.func
        args = e.args
        if f in ("T.ceildiv", "tilelang.cdiv", "T.cdiv", "cdiv", "ceildiv"):
            a, b = (self._eval(x, depth + 1) for x in args[:2])
            return -(-a // b)
        if f in ("T.min", "min", "T.max", "max"):
            vals = [self._eval(x, depth + 1) for x in args]
            if len(vals) == 1 and isinstance(vals[0], tuple):
                vals = list(vals[0])
            return min(vals) if f.endswith("min") else max(vals)
        if f in ("int", "T.int32", "T.int64"):
            return int(self._eval(args[0], depth + 1))
        if f == "float":
            return float(self._eval(args[0], depth + 1))
        if f in ("math.ceil",):
            return math.ceil(self._eval(args[0], depth + 1))
        if f in ("math.floor",):
            return math.floor(self._eval(args[0], depth + 1))
        if f in ("math.log2",):
            return math.log2(self._eval(args[0], depth + 1))
        if f in ("math.sqrt",):
            return math.sqrt(self._eval(args[0], depth + 1))
        if f in ("T.dtype", "str"):
            return self._eval(args[0], depth + 1)
        if f in ("T.const", "T.dynamic", "T.symbolic", "T.var"):
            names = []
            if args and isinstance(args[0], Const) and isinstance(args[0].value, str):
                names = [n.strip() for n in args[0].value.replace(",", " ").split()]
            raise Unknown(names or ["<symbolic>"], "symbolic")
        if f in ("dict",):
            return {k: self._eval(v, depth + 1) for k, v in e.kwargs}
        if f in ("len",):
            return len(self._eval(args[0], depth + 1))
        raise Unknown([], f"call {f}")


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)


# --------------------------------------------------------------------------
# Building a kernel's environment
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """One way the file instantiates a kernel: where its values come from."""

    env: Env
    label: str  # "matmul(1024, 1024, …) at line 30" or "defaults"
    call: Optional[CallSite]
    bindings: Tuple[Tuple[str, object], ...]


def module_exprs(module: Module) -> Dict[str, Expr]:
    out: Dict[str, Expr] = {}
    for name, expr in module.constants:
        out[name] = expr
    return out


def call_sites_for(module: Module, kernel: Kernel) -> List[CallSite]:
    """Call sites in the file that instantiate ``kernel`` (its factory, or the
    jit function itself)."""
    target = kernel.factory if kernel.factory else kernel.name
    if kernel.style == "module":
        return []
    return [c for c in module.call_sites if c.func == target
            or c.func.endswith("." + target)]


def kernel_params(kernel: Kernel):
    return kernel.factory_params if kernel.factory else (
        kernel.params if kernel.style == "jit" else ())


def build_env(module: Module, kernel: Kernel, call: Optional[CallSite] = None,
              overrides: Mapping[str, object] | None = None) -> Env:
    """The environment of ``kernel`` as instantiated by ``call`` (or by defaults)."""
    exprs: Dict[str, Expr] = module_exprs(module)
    sources: Dict[str, str] = {n: "module constant" for n in exprs}
    module_env = Env(exprs)
    values: Dict[str, object] = {}
    params = kernel_params(kernel)
    # Defaults first.
    for p in params:
        if p.default is not None:
            exprs[p.name] = p.default
            sources[p.name] = "default"
        else:
            exprs.pop(p.name, None)
            values[p.name] = Symbolic(p.name)
            sources[p.name] = "parameter"
    # Call-site arguments.
    if call is not None:
        names = [p.name for p in params]
        for i, a in enumerate(call.args):
            if i < len(names) and not isinstance(a, Opaque):
                _bind_from(module_env, exprs, values, names[i], a)
                sources[names[i]] = f"call at line {call.span.line}"
        for k, a in call.kwargs:
            _bind_from(module_env, exprs, values, k, a)
            sources[k] = f"call at line {call.span.line}"
        for star in call.star_kwargs:
            d = module_env.eval(star)
            if isinstance(d, dict):
                for k, v in d.items():
                    values[k] = v
                    exprs.pop(k, None)
                    sources[k] = f"**{_expr_name(star)} at line {call.span.line}"
    # The jit style's tensor parameters are symbolic.
    if kernel.style == "jit":
        for p in kernel.params:
            if p.default is None and p.name not in values:
                values[p.name] = Symbolic(p.name)
    # Explicit bindings (comment) and configuration beat everything else.
    explicit: Dict[str, object] = {}
    for b in kernel.comment_bindings:
        v = module_env.eval(b.value)
        if v is not None:
            explicit[b.name] = v
    for k, v in (overrides or {}).items():
        explicit[k] = v
    for k, v in explicit.items():
        values[k] = v
        exprs.pop(k, None)
        sources[k] = "binding"
    # Locals (factory then kernel), in order; an explicit binding still wins.
    env = Env(exprs, values, sources)
    for name, expr in kernel.locals:
        if name in explicit:
            continue
        if isinstance(expr, Call) and expr.func in ("T.const", "T.dynamic", "T.symbolic"):
            syms = []
            if expr.args and isinstance(expr.args[0], Const) and isinstance(expr.args[0].value, str):
                syms = [s.strip() for s in expr.args[0].value.replace(",", " ").split()]
            if name in syms or not syms:
                env.values[name] = Symbolic(name)
            continue
        if isinstance(expr, Subscript) and isinstance(expr.value, Call) and \
                expr.value.func in ("T.const", "T.dynamic", "T.symbolic"):
            env.values[name] = Symbolic(name)
            continue
        try:
            env.values[name] = env._eval(expr, 0)
            env.exprs.pop(name, None)
        except Exception:
            # Keep the expression: ``missing()`` then names what blocks it.
            env.values.pop(name, None)
            env.exprs[name] = expr
        env._cache.clear()
        sources[name] = "assignment"
    env.sources = sources
    return env


def _bind_from(module_env: Env, exprs: Dict[str, Expr], values: Dict[str, object],
               name: str, arg: Expr) -> None:
    v = module_env.eval(arg)
    if v is not None:
        values[name] = v
        exprs.pop(name, None)
    else:
        exprs[name] = arg
        values.pop(name, None)


def _expr_name(e: Expr) -> str:
    return e.id if isinstance(e, Name) else "cfg"


def instances(module: Module, kernel: Kernel,
              overrides: Mapping[str, object] | None = None,
              all_calls: bool = False) -> List[Instance]:
    """The instantiations of a kernel: the first call site (or every one with
    ``all_calls``), else the defaults."""
    calls = call_sites_for(module, kernel)
    chosen: List[Optional[CallSite]] = list(calls if all_calls else calls[:1]) or [None]
    out = []
    for call in chosen:
        env = build_env(module, kernel, call, overrides)
        label = "defaults" if call is None else f"{call.func}(…) at line {call.span.line}"
        binds = tuple((k, env.lookup(k)) for k in _param_names(kernel)
                      if env.lookup(k) is not None)
        out.append(Instance(env, label, call, binds))
    return out


def _param_names(kernel: Kernel) -> List[str]:
    return [p.name for p in kernel_params(kernel)]


def shape_value(env: Env, shape: Sequence[Expr]) -> Tuple[object, ...]:
    """A shape with each dimension an int, or the source name(s) if unknown."""
    out: List[object] = []
    for d in shape:
        v = env.eval_int(d)
        out.append(v if v is not None else _expr_text(d))
    return tuple(out)


def _expr_text(e: Expr) -> str:
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, BinOp):
        return f"{_expr_text(e.left)} {e.op} {_expr_text(e.right)}"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(_expr_text(a) for a in e.args)})"
    if isinstance(e, Attr):
        return f"{_expr_text(e.base)}.{e.attr}"
    if isinstance(e, Opaque):
        return e.text
    return "?"


expr_text = _expr_text
