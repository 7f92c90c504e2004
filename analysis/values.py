"""Static values: resolve symbolic sizes without executing anything.

A kernel's sizes come from, in increasing priority: module constants, the
factory's defaults, the literal arguments of a call site in the same file
(direct call, ``.compile(...)``, ``functools.partial``, ``**cfg`` from a
literal dict), the factory's and the kernel's own assignments, and finally
explicit bindings (a ``# tilelint: bind`` comment or configuration).
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from .model import (
    Attr,
    BinOp,
    Call,
    CallSite,
    Compare,
    Const,
    DictExpr,
    Expr,
    FuncDef,
    FuncStmt,
    IfExp,
    Kernel,
    Module,
    Name,
    Opaque,
    Param,
    Subscript,
    TupleExpr,
    UnaryOp,
    expr_text,
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


@dataclass(frozen=True)
class Unresolved:
    """A value the resolver could not compute; ``names`` block it."""

    names: frozenset


_TORCH_DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                 "int32", "int64", "bool", "half", "float", "double", "float8_e4m3fn",
                 "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}


_DTYPE_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32",
    "bool": "bool", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
    "fp8": "float8_e4m3", "e4m3_float8": "float8_e4m3", "e5m2_float8": "float8_e5m2",
    "long": "int64", "short": "int16", "uint": "uint32",
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
    """Bits of one element of ``dtype`` (all lanes of a vector type such as
    ``float16x2``), or None if the name is not a dtype."""
    info = dtype_info(dtype)
    return None if info is None else info[0] * info[1]


# ``custom[float4_e2m1_unpacked]8``: tilelang's spelling of a few custom types.
_CUSTOM_DTYPE = re.compile(r"custom\[(?P<name>\w+)\](?P<bits>\d+)")
_LANES = re.compile(r"(?P<base>\w+?)x(?P<lanes>\d+)")
_SIZED = re.compile(r"(?:u?int|float|bfloat)(?P<bits>\d+)")


def dtype_info(dtype: Optional[str]) -> Optional[Tuple[int, int]]:
    """(bits per lane, lanes) of a dtype name, as ``tvm.DataType(name)`` has
    them in tilelang 0.1.15 (``.bits``, ``.lanes``; ``.bytes`` is
    ``(bits * lanes + 7) // 8``): ``float16`` (16, 1), ``int4`` (4, 1),
    ``bool`` (8, 1), ``float8_e4m3fn`` (8, 1), ``float4_e2m1fn`` (4, 1),
    ``float4_e2m1_unpacked`` (8, 1: one byte per value), ``float16x2`` (16, 2).
    None when the name is not a dtype."""
    if not isinstance(dtype, str) or not dtype or len(dtype) > 64:
        return None
    m = _CUSTOM_DTYPE.fullmatch(dtype)
    if m is not None:
        return int(m.group("bits")), 1
    m = _LANES.fullmatch(dtype)  # a vector type: ``float16x2``, ``float4_e2m1fnx16``
    if m is not None:
        bits = _base_bits(m.group("base"))
        lanes = int(m.group("lanes"))
        if bits is not None and 1 <= lanes <= 1024:
            return bits, lanes
    bits = _base_bits(dtype)
    return None if bits is None else (bits, 1)


def _base_bits(name: str) -> Optional[int]:
    if name in _DTYPE_BITS:
        return _DTYPE_BITS[name]
    if name.endswith("_unpacked") and name.startswith("float4"):
        return 8  # one float4 value per byte (tilelang's float4_e2m1_unpacked)
    for prefix, bits in (("float8_", 8), ("float6_", 6), ("float4_", 4)):
        if name.startswith(prefix) and name[len(prefix):].replace("_", "").isalnum():
            return bits
    m = _SIZED.fullmatch(name)
    if m is not None:
        bits = int(m.group("bits"))
        if name.startswith("bfloat"):
            return bits if bits == 16 else None
        if name.startswith("float"):
            return bits if bits in (4, 6, 8, 16, 32, 64) else None
        return bits if 1 <= bits <= 64 else None
    return None


def dtype_attribute(dtype: object, attr: str) -> Optional[int]:
    """``.bits`` / ``.bytes`` / ``.lanes`` of a dtype value (a dtype object of
    tilelang is a ``str`` subclass, which is how the resolver holds it)."""
    info = dtype_info(dtype) if isinstance(dtype, str) else None
    if info is None:
        return None
    bits, lanes = info
    if attr == "bits":
        return bits
    if attr == "lanes":
        return lanes
    if attr == "bytes":
        return (bits * lanes + 7) // 8
    return None


# The calls that turn a dtype name into a dtype object (``tvm.DataType`` is
# ``tvm_ffi.dtype``, a ``str`` subclass, as is ``T.dtype``).
DTYPE_CONSTRUCTORS = frozenset({
    "DataType", "tvm.DataType", "tvm.runtime.DataType", "tvm.ffi.runtime_ctypes.DataType",
    "tilelang.DataType", "tl.DataType", "T.DataType", "T.dtype", "tl.dtype", "tilelang.dtype",
    "tvm_ffi.dtype",
})


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
                 module_dicts: Mapping[str, Expr] | None = None,
                 program: "Optional[Program]" = None) -> None:
        self.exprs: Dict[str, Expr] = dict(exprs or {})
        self.values: Dict[str, object] = dict(values or {})
        self.sources: Dict[str, str] = dict(sources or {})
        # The file's functions and argparse defaults (None: plain expressions only).
        self.program = program
        self._cache: Dict[str, object] = {}
        self._active: Set[str] = set()
        self._reads: Optional[Dict[Tuple[str, int], Tuple[object, ...]]] = None

    # -- public -----------------------------------------------------------
    def record_reads(self) -> Dict[Tuple[str, int], Tuple[object, ...]]:
        """Record, from now on, every name this environment resolves and what it
        resolved to: ``(name, depth)`` → outcome (its value's type and repr, or
        the exception).  Every evaluation reads the environment only through
        names, so a computation that read these names gives the same result in
        any environment of the same program where they resolve the same way
        (:meth:`outcomes`)."""
        self._reads = {}
        return self._reads

    def outcomes(self, keys: Sequence[Tuple[str, int]]) -> Tuple[Tuple[object, ...], ...]:
        """What each ``(name, depth)`` of ``keys`` resolves to here, in the form
        :meth:`record_reads` records."""
        out = []
        for name, depth in keys:
            try:
                v = self._resolve(name, depth)
            except Exception as exc:  # noqa: BLE001 - the outcome is the exception
                out.append(_failure(exc))
            else:
                out.append(("value", type(v), repr(v)))
        return tuple(out)

    def evaluate(self, expr: Optional[Expr]) -> object:
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
        v = self.evaluate(expr)
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

    def reason(self, expr: Optional[Expr]) -> str:
        """Why ``expr`` is not known: the blocking names, else what stopped the
        evaluation ("call get_e_factor"); empty if it is known."""
        if expr is None:
            return ""
        try:
            self._eval(expr, 0)
            return ""
        except Unknown as exc:
            if exc.names:
                return ", ".join(sorted(exc.names))
            return exc.why or "not a constant expression"
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__

    def lookup(self, name: str) -> object:
        try:
            return self._name(name, 0)
        except Unknown:
            return None

    # -- evaluation -------------------------------------------------------
    def _name(self, name: str, depth: int) -> object:
        reads = self._reads
        if reads is None:
            return self._resolve(name, depth)
        try:
            v = self._resolve(name, depth)
        except Exception as exc:
            _note(reads, (name, depth), _failure(exc))
            raise
        _note(reads, (name, depth), ("value", type(v), repr(v)))
        return v

    def _resolve(self, name: str, depth: int) -> object:
        if name in self.values:
            v = self.values[name]
            if isinstance(v, Symbolic):
                raise Unknown([v.name])
            if isinstance(v, Unresolved):
                raise Unknown(v.names)
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
            except Unknown as exc:
                if not exc.names:  # name what is blocked, keep why
                    raise Unknown([name], exc.why) from exc
                raise
            finally:
                self._active.discard(name)
            self._cache[name] = v
            if v is None:
                raise Unknown([name])
            return v
        if name in ("True", "False"):
            return name == "True"
        raise Unknown([name])

    # The interpreter's values are whatever Python values the user's code computes:
    # their operations are checked at run time (evaluate() turns TypeError and
    # friends into "unknown"), so the evaluator's own results are typed Any.
    def _eval(self, e: Expr, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise Unknown([], "expression too deep")
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Name):
            return self._name(e.id, depth)
        if isinstance(e, Attr):
            if isinstance(e.base, Name) and e.base.id == "T":
                return normalise_dtype(e.attr)
            if isinstance(e.base, Name) and e.base.id == "torch" and e.attr in _TORCH_DTYPES \
                    and e.base.id not in self.values:
                return normalise_dtype(e.attr.replace("fn", "").replace("uz", ""))
            base = self._eval(e.base, depth + 1)
            if isinstance(base, dict) and e.attr in base:
                return base[e.attr]
            if isinstance(base, str) and base == "T":
                return e.attr
            if e.attr in ("bits", "bytes", "lanes") and isinstance(base, str):
                # ``DataType(dtype).bits``, ``T.float16.bytes``, ``in_dtype.bits``
                size = dtype_attribute(normalise_dtype(base), e.attr)
                if size is not None:
                    return size
            raise Unknown([], f"attribute {e.attr}")
        if isinstance(e, BinOp):
            fn = _BIN.get(e.op)
            if fn is None:
                raise Unknown([], e.op)
            left = self._eval(e.left, depth + 1)
            right = self._eval(e.right, depth + 1)
            if isinstance(left, (tuple, list)) and isinstance(right, (tuple, list)) \
                    and e.op == "+":
                return tuple(left) + tuple(right)
            if isinstance(left, (tuple, list, str)) and isinstance(right, int) and e.op == "*" \
                    and not isinstance(right, bool) and 0 <= right <= 4096:
                return left * right
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
            if e.op in ("in", "not in"):
                left = self._eval(e.left, depth + 1)
                right = self._eval(e.right, depth + 1)
                if not isinstance(right, (tuple, list, dict, str, set, frozenset)):
                    raise Unknown([], "in")
                return (left in right) == (e.op == "in")
            if e.op in ("is", "is not"):
                left = self._eval(e.left, depth + 1)
                right = self._eval(e.right, depth + 1)
                if right is not None and left is not None:
                    raise Unknown([], "is")
                return (left is right) == (e.op == "is")
            fn = _CMP.get(e.op)
            if fn is None:
                raise Unknown([], e.op)
            return fn(self._eval(e.left, depth + 1), self._eval(e.right, depth + 1))
        if isinstance(e, IfExp):
            return self._eval(e.body if self._eval(e.test, depth + 1) else e.orelse,
                              depth + 1)
        if isinstance(e, TupleExpr):
            items = [self._eval(i, depth + 1) for i in e.items]
            return items if getattr(e, "is_list", False) else tuple(items)
        if isinstance(e, DictExpr):
            return {k: self._eval(v, depth + 1) for k, v in e.items}
        if isinstance(e, Subscript):
            base = self._eval(e.value, depth + 1)
            idx = self._eval(e.index, depth + 1)
            try:
                return base[idx]
            except (KeyError, IndexError, TypeError):
                raise Unknown([], "subscript") from None
        if isinstance(e, Call):
            return self._call(e, depth)
        raise Unknown([], "opaque")

    def _call(self, e: Call, depth: int) -> Any:
        f = e.func
        args = e.args
        if f.split(".")[-1] == "determine_fp8_type":
            # tilelang.language.fp8: on CUDA, float8_e4m3fn or float8_e5m2 (ROCm's
            # fnuz spellings differ in name only: the size is one byte either way).
            kw = dict(e.kwargs)
            given = args[0] if args else kw.get("fp8_format")
            fmt = "e4m3" if given is None else self._eval(given, depth + 1)
            if fmt not in ("e4m3", "e5m2"):
                raise Unknown([], "fp8 format")
            return "float8_e4m3fn" if fmt == "e4m3" else "float8_e5m2"
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
        if f == "str":
            return self._eval(args[0], depth + 1)
        if f in DTYPE_CONSTRUCTORS and len(args) == 1 and not e.kwargs and (
                self.program is None or f not in self.program.defs):
            # ``tvm.DataType(x)`` / ``T.dtype(x)``: the dtype named by x (a
            # dtype is a str subclass in tilelang 0.1.15).
            d = normalise_dtype(self._eval(args[0], depth + 1))
            if dtype_info(d) is None:
                raise Unknown([], f"{f} of something that is not a dtype name")
            return d
        if f in ("T.const", "T.dynamic", "T.symbolic", "T.var"):
            names = []
            if args and isinstance(args[0], Const) and isinstance(args[0].value, str):
                names = [n.strip() for n in args[0].value.replace(",", " ").split()]
            raise Unknown(names or ["<symbolic>"], "symbolic")
        if f in ("dict",):
            out = {}
            if args:
                base = self._eval(args[0], depth + 1)
                out.update(dict(base))
            out.update({k: self._eval(v, depth + 1) for k, v in e.kwargs})
            return out
        if f in ("len",):
            return len(self._eval(args[0], depth + 1))
        return _builtin_call(self, e, depth)


_MAX_ITEMS = 4096


def _note(reads: Dict[Tuple[str, int], Tuple[object, ...]], key: Tuple[str, int],
          outcome: Tuple[object, ...]) -> None:
    # A name that resolved two ways during one computation (a cyclic
    # definition seen from inside) matches nothing.
    if reads.setdefault(key, outcome) != outcome:
        reads[key] = ("unstable", id(reads))


def _failure(exc: Exception) -> Tuple[object, ...]:
    """The outcome of a name that did not resolve (Env.record_reads)."""
    if isinstance(exc, Unknown):
        return ("unknown", tuple(sorted(exc.names)), exc.why)
    return ("error", type(exc), str(exc))


def _seq(v: object) -> list:
    if isinstance(v, dict):
        return list(v)
    if isinstance(v, (tuple, list, range, str, set, frozenset)):
        if len(v) > _MAX_ITEMS:
            raise Unknown([], "sequence too long")
        return list(v)
    raise Unknown([], "not iterable")


def _assign_target(target: Optional[Expr], value: object, scope: Dict[str, object]) -> None:
    """Python assignment of ``value`` to ``target`` in ``scope`` (names, tuple
    unpacking, ``d["k"] = v``).  Unknown values become :class:`Unresolved`."""
    if isinstance(target, Name):
        scope[target.id] = value
        return
    if isinstance(target, TupleExpr):
        items = None
        if not isinstance(value, (Unresolved, Symbolic)):
            try:
                items = _seq(value)
            except Unknown:
                items = None
        if items is not None and len(items) == len(target.items):
            for t, v in zip(target.items, items, strict=True):
                _assign_target(t, v, scope)
        else:
            why = value if isinstance(value, Unresolved) else Unresolved(frozenset())
            for t in target.items:
                _assign_target(t, why, scope)
        return
    if isinstance(target, Subscript) and isinstance(target.value, Name):
        base = scope.get(target.value.id)
        if isinstance(base, dict) and isinstance(target.index, Const):
            base[target.index.value] = value
        return
    if isinstance(target, Attr) and isinstance(target.base, Name):
        base = scope.get(target.base.id)
        if isinstance(base, dict):  # ``self.block_M = 128`` on an object
            base[target.attr] = value


def _builtin_call(env: "Env", e: Call, depth: int) -> Any:
    f = e.func
    ev = lambda x: env._eval(x, depth + 1)  # noqa: E731
    args = e.args
    if any(isinstance(a, Opaque) for a in args):
        raise Unknown([], "starred argument")
    if f in ("<listcomp>", "<dictcomp>"):
        return _comprehension(env, e, depth)
    if f == "range":
        vals = [ev(a) for a in args]
        if not all(isinstance(v, int) for v in vals) or not vals:
            raise Unknown([], "range")
        r = range(*vals)
        if len(r) > _MAX_ITEMS:
            raise Unknown([], "range too long")
        return r
    if f in ("list", "tuple", "sorted", "set"):
        items = _seq(ev(args[0])) if args else []
        if f == "sorted":
            items = sorted(items)
        return list(items) if f != "tuple" else tuple(items)
    if f == "zip":
        return list(zip(*[_seq(ev(a)) for a in args], strict=False))
    if f == "enumerate":
        return list(enumerate(_seq(ev(args[0]))))
    if f in ("itertools.product", "product"):
        seqs = [_seq(ev(a)) for a in args]
        n = 1
        for sq in seqs:
            n *= max(len(sq), 1)
        if n > _MAX_ITEMS:
            raise Unknown([], "product too large")
        return list(itertools.product(*seqs))
    if f in ("sum",):
        return sum(_seq(ev(args[0])))
    if f in ("abs",):
        return abs(ev(args[0]))
    if f in ("bool",):
        return bool(ev(args[0]))
    if f in ("round",):
        return round(*[ev(a) for a in args])
    if f in ("pytest.param",):
        return tuple(ev(a) for a in args)
    if f in ("math.prod",):
        return math.prod(_seq(ev(args[0])))
    if f in ("math.gcd",):
        return math.gcd(*[ev(a) for a in args])
    if f.split(".")[-1] in ("next_power_of_2", "next_pow2", "next_power_of_two"):
        v = ev(args[0])
        if not isinstance(v, int) or v > 1 << 40:
            raise Unknown([], f"call {f}")
        return 1 if v <= 1 else 1 << (v - 1).bit_length()
    if f in ("T.float16", "T.float32", "T.bfloat16") and not args:
        return normalise_dtype(f[2:])
    prog = env.program
    if "." in f:
        base, meth = f.rsplit(".", 1)
        if meth in ("parse_args", "parse_known_args") and prog is not None:
            d = prog.argparse_values()
            return (d, []) if meth == "parse_known_args" else d
        if not base and args:  # ``Call(".items", (receiver, ...))``
            return _method(ev(args[0]), meth, args[1:], ev, f)
        if "." not in base and (base in env.values or base in env.exprs):
            return _method(env._name(base, depth + 1), meth, args, ev, f)
    if prog is not None and f in prog.classes:
        pos = [ev(a) for a in args]
        kw = {k: ev(v) for k, v in e.kwargs}
        return prog.construct(f, pos, kw, depth + 1)
    if prog is not None:
        fdef = prog.function(f)
        if fdef is not None:
            pos = [ev(a) for a in args]
            kw = {k: ev(v) for k, v in e.kwargs}
            return prog.call(fdef, pos, kw, depth + 1)
    raise Unknown([], f"call {f}")


def _method(obj: object, meth: str, args: Sequence[Expr], ev: Callable[[Expr], Any],
            f: str) -> object:
    """The few side-effect-free methods of dicts, lists and strings we follow."""
    if isinstance(obj, dict):
        if meth == "get" and args:
            key = ev(args[0])
            if key in obj:
                return obj[key]
            return ev(args[1]) if len(args) > 1 else None
        if meth in ("keys", "values", "items"):
            return list(getattr(obj, meth)())
        if meth == "copy":
            return dict(obj)
    if isinstance(obj, list) and meth == "copy":
        return list(obj)
    if isinstance(obj, (list, tuple)) and meth in ("index", "count") and args:
        return getattr(obj, meth)(ev(args[0]))
    if isinstance(obj, str) and meth in ("upper", "lower", "strip") and not args:
        return getattr(obj, meth)()
    raise Unknown([], f"call {f}")


def _comprehension(env: "Env", e: Call, depth: int) -> object:
    dict_comp = e.func == "<dictcomp>"
    head = e.args[:2] if dict_comp else e.args[:1]
    gens = e.args[len(head):]
    out_list: list = []
    out_dict: dict = {}
    base_values = env.values
    count = [0]

    def rec(i: int, scope: Dict[str, object]) -> None:
        if i == len(gens):
            sub = Env(env.exprs, scope, env.sources, program=env.program)
            if dict_comp:
                out_dict[sub._eval(head[0], depth + 1)] = sub._eval(head[1], depth + 1)
            else:
                out_list.append(sub._eval(head[0], depth + 1))
            return
        gen = gens[i]
        if not isinstance(gen, TupleExpr) or len(gen.items) != 3:
            raise Unknown([], "comprehension")
        target, it, conds = gen.items
        sub = Env(env.exprs, scope, env.sources, program=env.program)
        for item in _seq(sub._eval(it, depth + 1)):
            count[0] += 1
            if count[0] > _MAX_ITEMS:
                raise Unknown([], "comprehension too large")
            inner = dict(scope)
            _assign_target(target, item, inner)
            ienv = Env(env.exprs, inner, env.sources, program=env.program)
            if all(ienv._eval(c, depth + 1) for c in (conds.items if isinstance(conds, TupleExpr)
                                                       else ())):
                rec(i + 1, inner)

    rec(0, dict(base_values))
    return out_dict if dict_comp else out_list


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)


# --------------------------------------------------------------------------
# The file as a program: functions, call contexts, argparse (never executed)
# --------------------------------------------------------------------------

_MAX_CALL_DEPTH = 6  # nested calls of the file's own functions
_MAX_CHAIN = 4  # caller-of-caller levels followed for call contexts
_MAX_CONTEXTS = 64  # contexts kept per function / call site
_MAX_STEPS = 20000  # statements interpreted per run
MAX_INSTANCES = 32  # instances of one kernel


class _Return(Exception):
    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value


class _Budget(Exception):
    pass


class Program:
    """What the resolver knows about a file besides its kernels: ordinary
    functions (interpreted on demand, never executed), argparse defaults, the
    module's own statements, and the call contexts they give each call site."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.constants: Dict[str, Expr] = module_exprs(module)
        self.defs: Dict[str, FuncDef] = {}
        self.methods: Dict[Tuple[str, str], FuncDef] = {}
        for d in module.defs:
            if d.class_name is None or d.name not in self.defs:
                self.defs[d.name] = d
            if d.class_name is not None:
                self.methods.setdefault((d.class_name, d.name), d)
        self.classes: Set[str] = {c for c, _ in self.methods}
        self._instances: Dict[str, object] = {}
        self.argparse: Dict[str, Expr] = {}
        for k, v in module.argparse:
            self.argparse.setdefault(k, v)
        self._argvals: Optional[Dict[str, object]] = None
        self._ctx_cache: Dict[Tuple[int, int], List[Tuple["Env", str]]] = {}
        self._param_cache: Dict[str, List[Tuple[Dict[str, object], str]]] = {}
        self._active: Set[str] = set()
        self._call_memo: Dict[Tuple, object] = {}
        self.steps = 0

    # -- helpers ------------------------------------------------------------
    def env(self, values: Optional[Mapping[str, object]] = None) -> "Env":
        return Env(self.constants, values or {}, program=self)

    def function(self, name: str) -> Optional[FuncDef]:
        if name in self.defs:
            return self.defs[name]
        if name.startswith("self.") and name[5:] in self.defs:
            return self.defs[name[5:]]
        return None

    def argparse_values(self) -> Dict[str, object]:
        if self._argvals is None:
            self._argvals = {}
            env = Env(self.constants, {}, program=None)
            for k, e in self.argparse.items():
                v = env.evaluate(e)
                self._argvals[k] = v if v is not None else Unresolved(frozenset([k]))
        return dict(self._argvals)

    def bind_params(self, fdef: FuncDef, pos: Sequence[object], kw: Mapping[str, object],
                    skip_self: bool = True) -> Dict[str, object]:
        params = list(fdef.params)
        if skip_self and fdef.class_name is not None and params and params[0].name in (
                "self", "cls"):
            params = params[1:]
        scope: Dict[str, object] = {}
        names = [p.name for p in params]
        for n, v in zip(names, pos, strict=False):
            scope[n] = v
        if fdef.vararg:
            scope[fdef.vararg] = tuple(pos[len(names):])
        extra = {}
        for k, v in kw.items():
            if k in names:
                scope[k] = v
            else:
                extra[k] = v
        if fdef.kwarg:
            scope[fdef.kwarg] = extra
        if fdef.class_name is not None and skip_self and len(params) < len(fdef.params) \
                and fdef.params[0].name == "self" and "self" not in scope:
            scope["self"] = self.default_object(fdef.class_name)
        menv = self.env()
        for p in params:
            if p.name in scope:
                continue
            if p.default is not None:
                v = menv.evaluate(p.default)
                scope[p.name] = v if v is not None or (
                    isinstance(p.default, Const) and p.default.value is None) else \
                    Unresolved(frozenset([p.name]))
            else:
                scope[p.name] = Unresolved(frozenset([p.name]))
        return scope

    # -- classes ----------------------------------------------------------------
    def construct(self, cls: str, pos: Sequence[object], kw: Mapping[str, object],
                  depth: int) -> Dict[str, object]:
        """``Cls(...)``: the attributes ``__init__`` assigns to ``self``."""
        obj: Dict[str, object] = {}
        init = self.methods.get((cls, "__init__"))
        if init is None or depth > _MAX_CALL_DEPTH:
            return obj
        scope = self.bind_params(init, pos, kw)
        scope["self"] = obj
        key = "__init__@" + cls
        if key in self._active:
            return obj
        self._active.add(key)
        try:
            self._exec(init.body, scope, depth, None, [])
        except (_Return, _Budget):
            pass
        finally:
            self._active.discard(key)
        return obj

    def default_object(self, cls: str) -> object:
        """``self`` for a method: the object built by the first ``Cls(...)`` in
        the file (unknown if there is none)."""
        if cls in self._instances:
            return self._instances[cls]
        self._instances[cls] = Unresolved(frozenset(["self"]))
        for c in self.module.call_sites:
            if c.func == cls:
                ctxs = self.contexts_at(c)
                if ctxs:
                    pos, kw = self.call_values(c, ctxs[0][0])
                    self._instances[cls] = self.construct(cls, pos, kw, 1)
                break
        return self._instances[cls]

    # -- calling a function ---------------------------------------------------
    def call(self, fdef: FuncDef, pos: Sequence[object], kw: Mapping[str, object],
             depth: int) -> object:
        if depth > _MAX_CALL_DEPTH or fdef.name in self._active:
            raise Unknown([], f"call {fdef.name}: too deep")
        try:
            key = (fdef.class_name, fdef.name, tuple(pos), tuple(sorted(kw.items())))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._call_memo:
            v = self._call_memo[key]
            if isinstance(v, Unknown):
                raise v
            return v
        scope = self.bind_params(fdef, pos, kw)
        self._active.add(fdef.name)
        try:
            self._exec(fdef.body, scope, depth, None, [])
            result: object = None
        except _Return as r:
            result = r.value
        except _Budget:
            result = Unresolved(frozenset())
        finally:
            self._active.discard(fdef.name)
        if isinstance(result, (Unresolved, Symbolic)):
            exc = Unknown(result.names if isinstance(result, Unresolved) else [result.name],
                          f"call {fdef.name}")
            if key is not None:
                self._call_memo[key] = exc
            raise exc
        if key is not None and not isinstance(result, (list, dict)):
            self._call_memo[key] = result
        return result

    # -- the statement interpreter ----------------------------------------------
    def _value(self, e: Optional[Expr], scope: Dict[str, object], depth: int) -> object:
        if e is None:
            return None
        env = Env(self.constants, scope, program=self)
        try:
            return env._eval(e, depth)
        except Unknown as exc:
            return Unresolved(frozenset(exc.names))
        except (ArithmeticError, TypeError, ValueError, OverflowError, RecursionError,
                KeyError, IndexError, AttributeError):
            return Unresolved(frozenset())

    def _exec(self, stmts: Sequence[FuncStmt], scope: Dict[str, object], depth: int,
              stop_line: Optional[int], snaps: List[Dict[str, object]]) -> None:
        for st in stmts:
            self.steps += 1
            if self.steps > _MAX_STEPS or len(snaps) >= _MAX_CONTEXTS:
                raise _Budget()
            inside = stop_line is not None and st.line <= stop_line <= st.end_line
            if inside and st.kind in ("assign", "expr", "return"):
                snaps.append(dict(scope))
            if st.kind == "assign":
                _assign_target(st.target, self._value(st.value, scope, depth), scope)
            elif st.kind == "expr":
                self._effect(st.value, scope, depth)
            elif st.kind == "return":
                if stop_line is None:
                    raise _Return(self._value(st.value, scope, depth))
                if not inside:
                    return
            elif st.kind == "if":
                test = self._value(st.value, scope, depth)
                if stop_line is not None and _covers(st.body, stop_line):
                    self._exec(st.body, scope, depth, stop_line, snaps)
                elif stop_line is not None and _covers(st.orelse, stop_line):
                    self._exec(st.orelse, scope, depth, stop_line, snaps)
                elif isinstance(test, (Unresolved, Symbolic)):
                    self._exec(st.orelse, scope, depth, stop_line, snaps)
                elif test:
                    self._exec(st.body, scope, depth, stop_line, snaps)
                else:
                    self._exec(st.orelse, scope, depth, stop_line, snaps)
            elif st.kind == "for":
                it = self._value(st.value, scope, depth)
                try:
                    items = None if isinstance(it, (Unresolved, Symbolic)) else _seq(it)
                except Unknown:
                    items = None
                if items is None:
                    if inside:
                        _assign_target(st.target, it if isinstance(it, Unresolved)
                                       else Unresolved(frozenset()), scope)
                        self._exec(st.body, scope, depth, stop_line, snaps)
                    continue
                for item in items:
                    _assign_target(st.target, item, scope)
                    self._exec(st.body, scope, depth, stop_line, snaps)
                self._exec(st.orelse, scope, depth, stop_line, snaps)
            elif st.kind == "while":
                if inside:
                    self._exec(st.body, scope, depth, stop_line, snaps)

    def _effect(self, e: Optional[Expr], scope: Dict[str, object], depth: int) -> None:
        """A bare call statement: only list/dict mutation is followed."""
        if not isinstance(e, Call) or "." not in e.func:
            return
        base, meth = e.func.rsplit(".", 1)
        obj = scope.get(base)
        if isinstance(obj, list) and meth in ("append", "extend") and e.args:
            v = self._value(e.args[0], scope, depth)
            if meth == "append":
                obj.append(v)
            elif isinstance(v, (list, tuple)):
                obj.extend(v)
        elif isinstance(obj, dict) and meth == "update":
            if e.args:
                v = self._value(e.args[0], scope, depth)
                if isinstance(v, dict):
                    obj.update(v)
            for k, x in e.kwargs:
                obj[k] = self._value(x, scope, depth)

    # -- call contexts ------------------------------------------------------------
    def contexts_at(self, call: CallSite, chain: int = 0) -> List[Tuple["Env", str]]:
        """Environments of the code around ``call`` (one per way it is reached)."""
        key = (id(call), chain)
        if key in self._ctx_cache:
            return self._ctx_cache[key]
        self._ctx_cache[key] = [(self.env(), "")]  # guards recursion
        out: List[Tuple[Env, str]] = []
        try:
            if call.enclosing is None:
                snaps: List[Dict[str, object]] = []
                self.steps = 0
                try:
                    self._exec(self.module.toplevel, {}, 0, call.span.line,
                               snaps)
                except (_Budget, _Return):
                    pass
                for snap in snaps[:1] or [{}]:
                    out.append((self._frame_env(snap), ""))
            else:
                fdef = self.defs.get(call.enclosing)
                if fdef is None:
                    out.append((self.env(), ""))
                else:
                    for binding, label in self.param_contexts(fdef, chain + 1):
                        snaps = []
                        self.steps = 0
                        try:
                            self._exec(fdef.body, dict(binding), 0, call.span.line, snaps)
                        except (_Budget, _Return):
                            pass
                        for snap in snaps or [dict(binding)]:
                            out.append((self._frame_env(snap), label))
                            if len(out) >= _MAX_CONTEXTS:
                                break
                        if len(out) >= _MAX_CONTEXTS:
                            break
        except RecursionError:
            out = out or [(self.env(), "")]
        self._ctx_cache[key] = out
        return out

    def _frame_env(self, scope: Mapping[str, object]) -> "Env":
        # A function's locals shadow module constants of the same name.
        exprs = {k: v for k, v in self.constants.items() if k not in scope}
        return Env(exprs, dict(scope), program=self)

    def param_contexts(self, fdef: FuncDef, chain: int) -> List[Tuple[Dict[str, object], str]]:
        """Ways the parameters of ``fdef`` get values: parametrize cases, call
        sites in the file (followed up to a few callers), or the defaults."""
        if fdef.name in self._param_cache:
            return self._param_cache[fdef.name]
        self._param_cache[fdef.name] = [(self.bind_params(fdef, [], {}), "")]
        out: List[Tuple[Dict[str, object], str]] = []
        cases = self.parametrize_cases(fdef)
        if cases:
            for case in cases[:_MAX_CONTEXTS]:
                out.append((self.bind_params(fdef, [], case), ""))
        elif chain <= _MAX_CHAIN:
            for c in self.module.call_sites:
                if c.enclosing == fdef.name or c.via == "partial":
                    continue
                if not (c.func == fdef.name or c.func == "self." + fdef.name):
                    continue
                for cenv, label in self.contexts_at(c, chain):
                    pos, kw = self.call_values(c, cenv)
                    out.append((self.bind_params(fdef, pos, kw), label))
                    if len(out) >= _MAX_CONTEXTS:
                        break
                if len(out) >= _MAX_CONTEXTS:
                    break
        if not out:
            out = [(self.bind_params(fdef, [], {}), "")]
        self._param_cache[fdef.name] = out
        return out

    def call_values(self, call: CallSite, cenv: "Env") -> Tuple[List[object], Dict[str, object]]:
        pos: List[object] = []
        for a in call.args:
            if isinstance(a, Opaque):
                break
            pos.append(_value_or_unresolved(cenv, a))
        kw: Dict[str, object] = {}
        for star in call.star_kwargs:
            d = cenv.evaluate(star)
            if isinstance(d, dict):
                kw.update({k: v for k, v in d.items() if isinstance(k, str)})
        for k, a in call.kwargs:
            kw[k] = _value_or_unresolved(cenv, a)
        return pos, kw

    def parametrize_cases(self, fdef: FuncDef) -> List[Dict[str, object]]:
        """``@pytest.mark.parametrize("a, b", [(1, 2), (3, 4)])`` (stacked ones
        multiply): one dict per case."""
        combos: List[Dict[str, object]] = [{}]
        found = False
        env = self.env()
        for d in fdef.decorators:
            if not isinstance(d, Call) or not d.func.endswith("parametrize"):
                continue
            args = list(d.args)
            kw = dict(d.kwargs)
            names_e = args[0] if args else kw.get("argnames")
            vals_e = args[1] if len(args) > 1 else kw.get("argvalues")
            names = env.evaluate(names_e)
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",") if n.strip()]
            if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
                continue
            cases = env.evaluate(vals_e)
            if not isinstance(cases, (list, tuple)):
                continue
            wrapped = [isinstance(x, Call) and x.func.endswith("param")
                       for x in vals_e.items] if isinstance(vals_e, TupleExpr) else []
            rows: List[Dict[str, object]] = []
            for i, c in enumerate(cases):
                if len(names) == 1 and not (i < len(wrapped) and wrapped[i]):
                    c = (c,)
                if isinstance(c, (list, tuple)) and len(c) == len(names):
                    rows.append(dict(zip(names, c, strict=True)))
            if not rows:
                continue
            found = True
            combos = [dict(a, **b) for a in combos for b in rows][:_MAX_CONTEXTS]
        return combos if found else []

    def autotune_configs(self, name: str) -> Optional[List[Dict[str, object]]]:
        """``@tilelang.autotune(configs=...)`` on the factory / jit function."""
        fdef = self.defs.get(name)
        if fdef is None:
            return None
        for d in fdef.decorators:
            if isinstance(d, Call) and d.func.split(".")[-1] == "autotune":
                cfg = dict(d.kwargs).get("configs")
                if cfg is None:
                    return None
                v = self.env().evaluate(cfg)
                if isinstance(v, dict) and v and all(isinstance(x, (list, tuple))
                                                     for x in v.values()):
                    keys = list(v)
                    prod = 1
                    for x in v.values():
                        prod *= max(len(x), 1)
                    if prod > _MAX_ITEMS:
                        return None
                    v = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*v.values())]
                if isinstance(v, (list, tuple)):
                    out = [x for x in v if isinstance(x, dict)]
                    return out or None
        return None


    def class_configs(self, classes: Sequence[str]) -> Optional[List[Dict[str, object]]]:
        """Configurations a kernel class gives the kernels it builds: its
        ``default_config`` (a dict) first, then its ``autotune_configs`` (a list of
        dicts), each a method or property interpreted like any function.  Keys
        whose value stays unknown are left out of a configuration."""
        out: List[Dict[str, object]] = []
        for cls in classes:
            for meth in CLASS_CONFIG_METHODS:
                fdef = self.methods.get((cls, meth))
                if fdef is None:
                    continue
                try:
                    v = self.call(fdef, [], {}, 0)
                except Exception:  # Unknown, or anything the interpreter cannot follow
                    continue
                items = [v] if isinstance(v, dict) else list(v) if isinstance(v, (list, tuple)) \
                    else []
                for x in items[:_MAX_ITEMS]:
                    if not isinstance(x, dict):
                        continue
                    known = {k: val for k, val in x.items() if isinstance(k, str)
                             and not isinstance(val, (Unresolved, Symbolic))}
                    if known and known not in out:
                        out.append(known)
        return out or None


# Methods (or properties) of a kernel class that hold its configurations.
CLASS_CONFIG_METHODS = ("default_config", "autotune_configs")


def _covers(stmts: Sequence[FuncStmt], line: int) -> bool:
    return any(st.line <= line <= st.end_line for st in stmts)


def _value_or_unresolved(env: "Env", e: Expr) -> object:
    try:
        return env._eval(e, 0)
    except Unknown as exc:
        return Unresolved(frozenset(exc.names))
    except Exception:
        return Unresolved(frozenset())


_PROGRAMS: Dict[int, Tuple[Module, Program]] = {}


def program(module: Module) -> Program:
    """The (cached) :class:`Program` of a module."""
    hit = _PROGRAMS.get(id(module))
    if hit is not None and hit[0] is module:
        return hit[1]
    prog = Program(module)
    if len(_PROGRAMS) > 16:
        _PROGRAMS.clear()
    _PROGRAMS[id(module)] = (module, prog)
    return prog


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


def kernel_params(kernel: Kernel) -> Tuple[Param, ...]:
    return kernel.factory_params if kernel.factory else (
        kernel.params if kernel.style in ("jit", "macro") else ())


def build_env(module: Module, kernel: Kernel, call: Optional[CallSite] = None,
              overrides: Mapping[str, object] | None = None,
              caller: Optional[Env] = None,
              config: Optional[Mapping[str, object]] = None) -> Env:
    """The environment of ``kernel`` as instantiated by ``call`` (or by defaults).

    ``caller``: the environment around the call (the calling function's locals;
    default: the module).  ``config``: an autotune configuration applied on top
    of the call's arguments."""
    prog = program(module)
    exprs: Dict[str, Expr] = module_exprs(module)
    sources: Dict[str, str] = {n: "module constant" for n in exprs}
    module_env = Env(exprs, program=prog)
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
    # Call-site arguments, evaluated where the call is.
    if call is not None:
        cenv = caller if caller is not None else Env(exprs, program=prog)
        names = [p.name for p in params]
        if kernel.class_name is not None and names and names[0] in ("self", "cls"):
            names = names[1:]
        for i, a in enumerate(call.args):
            if isinstance(a, Opaque):
                break
            if i < len(names):
                _bind_from(cenv, exprs, values, names[i], a, sources, call)
        for star in call.star_kwargs:
            d = cenv.evaluate(star)
            if isinstance(d, dict):
                for k, v in d.items():
                    values[k] = v
                    exprs.pop(k, None)
                    sources[k] = f"**{_expr_name(star)} at line {call.span.line}"
        for k, a in call.kwargs:
            _bind_from(cenv, exprs, values, k, a, sources, call)
    for k, v in (config or {}).items():
        values[k] = v
        exprs.pop(k, None)
        sources[k] = "autotune config"
    # The jit style's tensor parameters are symbolic.
    if kernel.style in ("jit", "macro"):
        for p in kernel.params:
            if p.default is None and p.name not in values:
                values[p.name] = Symbolic(p.name)
    # Explicit bindings (comment) and configuration beat everything else.
    explicit: Dict[str, object] = {}
    for b in kernel.comment_bindings:
        v = module_env.evaluate(b.value)
        if v is not None:
            explicit[b.name] = v
    for k, v in (overrides or {}).items():
        explicit[k] = v
    for k, v in explicit.items():
        values[k] = v
        exprs.pop(k, None)
        sources[k] = "binding"
    # Locals (factory then kernel), in order; an explicit binding still wins.
    env = Env(exprs, values, sources, program=prog)
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


def _bind_from(cenv: Env, exprs: Dict[str, Expr], values: Dict[str, object],
               name: str, arg: Expr, sources: Optional[Dict[str, str]] = None,
               call: Optional[CallSite] = None) -> None:
    where = f"call at line {call.span.line}" if call is not None else "call"
    try:
        v = cenv._eval(arg, 0)
        missing: Set[str] = set()
    except Unknown as exc:
        v, missing = None, exc.names
    except Exception:
        v, missing = None, set()
    if v is not None or (isinstance(arg, Const) and arg.value is None):
        values[name] = v
        exprs.pop(name, None)
        if sources is not None:
            sources[name] = where
        return
    # The argument is not known where the call is: the parameter stays symbolic
    # (named by the parameter, with the caller's blocking names as the reason).
    exprs.pop(name, None)
    values[name] = Symbolic(name)
    if sources is not None:
        why = ", ".join(sorted(missing)) or expr_text(arg)
        sources[name] = f"{where} (unknown there: {why})"


def _expr_name(e: Expr) -> str:
    return e.id if isinstance(e, Name) else "cfg"


def instances(module: Module, kernel: Kernel,
              overrides: Mapping[str, object] | None = None,
              all_calls: bool = False, select: Optional[str] = None) -> List[Instance]:
    """The instantiations of a kernel.

    Every way the file instantiates it is followed: each call site of the
    factory (or jit function), in each context the call is reached in (the
    calling function's own call sites, ``pytest.mark.parametrize`` cases, loops
    over literal lists), times each ``@autotune`` configuration; identical
    bindings are merged, at most :data:`MAX_INSTANCES` are kept.  Labels name
    the bindings that differ between instances ("num_stages=4, block_K=64"); a
    kernel instantiated one way is labelled "defaults" or by its call.

    Without ``all_calls`` only the default instance is returned: the first one
    that resolves the most names.  ``select`` picks the instance with that label
    (falling back to the default one)."""
    insts = _all_instances(module, kernel, overrides)
    if select is not None:
        hit = [i for i in insts if i.label == select]
        if hit:
            return hit
    if all_calls:
        return insts
    return [_default_instance(insts)]


def instance_labels(module: Module, kernel: Kernel,
                    overrides: Mapping[str, object] | None = None) -> List[str]:
    """The labels of every instance of ``kernel`` (the default one first)."""
    insts = _all_instances(module, kernel, overrides)
    first = _default_instance(insts)
    return [first.label] + [i.label for i in insts if i is not first]


def _default_instance(insts: List[Instance]) -> Instance:
    best = insts[0]
    best_n = _resolved_count(best)
    for i in insts[1:]:
        n = _resolved_count(i)
        if n > best_n:
            best, best_n = i, n
    return best


def _resolved_count(inst: Instance) -> int:
    return sum(1 for _, v in inst.bindings if v is not None)


def _all_instances(module: Module, kernel: Kernel,
                   overrides: Mapping[str, object] | None) -> List[Instance]:
    prog = program(module)
    calls = call_sites_for(module, kernel)
    contexts: List[Tuple[Optional[CallSite], Optional[Env]]] = []
    call: Optional[CallSite]
    cenv: Optional[Env]
    ctxs: Sequence[Tuple[Optional[Env], str]]
    for call in calls:
        try:
            ctxs = prog.contexts_at(call)
        except Exception:  # the resolver must never take the analysis down
            ctxs = [(None, "")]
        for cenv, _ in ctxs:
            contexts.append((call, cenv))
            if len(contexts) >= 4 * MAX_INSTANCES:
                break
    if not contexts:
        contexts = [(None, None)]
    try:
        configs = prog.autotune_configs(kernel.factory or kernel.name)
        if not configs:
            # A kernel class (``self.kernel = _factory(...)`` in its methods)
            # gives the builder its ``default_config`` / ``autotune_configs``.
            classes = sorted({c.enclosing_class for c in calls if c.enclosing_class})
            if kernel.class_name is not None and kernel.class_name not in classes:
                classes.append(kernel.class_name)
            configs = prog.class_configs(classes)
    except Exception:
        configs = None
    if configs and len(configs) > MAX_INSTANCES:
        # A spread over the whole list, not just its first entries.
        step = len(configs) / MAX_INSTANCES
        configs = [configs[int(i * step)] for i in range(MAX_INSTANCES)]
    names = _param_names(kernel)
    out: List[Instance] = []
    seen: Dict[Tuple, int] = {}
    for call, cenv in contexts:
        cfgs: Sequence[Optional[Dict[str, object]]] = configs or [None]
        for cfg in cfgs:
            env = build_env(module, kernel, call, overrides, caller=cenv, config=cfg)
            keys = list(names) + [k for k in (cfg or {}) if k not in names]
            binds = tuple((k, env.lookup(k)) for k in keys if env.lookup(k) is not None)
            try:
                sig = tuple((k, _hashable(v)) for k, v in binds)
                hash(sig)
            except TypeError:
                sig = (("#", len(out)),)
            if sig in seen:
                continue
            seen[sig] = len(out)
            out.append(Instance(env, "", call, binds))
            if len(out) >= MAX_INSTANCES:
                break
        if len(out) >= MAX_INSTANCES:
            break
    return _label(out)


def _hashable(v: object) -> object:
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _hashable(x)) for k, x in v.items()))
    return v


def _fmt(v: object) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        return str(v)
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def _label(insts: List[Instance]) -> List[Instance]:
    if len(insts) == 1:
        i = insts[0]
        c = i.call
        label = "defaults" if c is None else f"{c.func}(…) at line {c.span.line}"
        return [Instance(i.env, label, c, i.bindings)]
    maps = [dict(i.bindings) for i in insts]
    keys: List[str] = []
    for m in maps:
        for k in m:
            if k not in keys:
                keys.append(k)
    differ = [k for k in keys
              if len({repr(_hashable(m.get(k, "<unset>"))) for m in maps}) > 1]
    differ.sort(key=lambda k: (0 if "stage" in k else 1, keys.index(k)))
    out: List[Instance] = []
    used: Dict[str, int] = {}
    for i, m in zip(insts, maps, strict=True):
        label = ", ".join(f"{k}={_fmt(m[k])}" if k in m else f"{k}=?" for k in differ)
        if not label:
            label = "defaults" if i.call is None else f"{i.call.func}(…) at line {i.call.span.line}"
        if label in used:
            used[label] += 1
            label = f"{label} #{used[label]}"
        else:
            used[label] = 1
        out.append(Instance(i.env, label, i.call, i.bindings))
    return out


def _param_names(kernel: Kernel) -> List[str]:
    names = [p.name for p in kernel_params(kernel)]
    if kernel.class_name is not None and names and names[0] in ("self", "cls"):
        names = names[1:]
    return names


def shape_value(env: Env, shape: Sequence[Expr]) -> Tuple[object, ...]:
    """A shape with each dimension an int, or the source name(s) if unknown."""
    out: List[object] = []
    for d in shape:
        v = env.eval_int(d)
        out.append(v if v is not None else expr_text(d))
    return tuple(out)


