"""The expression evaluator: what an ``Expr`` of the model is worth, or why it
cannot be known.

:class:`Env` maps names to values (computed ones) and to expressions (evaluated
on demand, once) for one kernel instantiation.  Evaluation never executes the
user's code: it folds constants, follows a fixed list of builtins and
side-effect-free methods, and hands calls of the file's own functions to the
:class:`Host` it was given (``interpret.Program``).  Whatever it cannot follow
raises :class:`Unknown`, which names the values that block it; the public
methods turn that into ``None``.
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass
from typing import (
    AbstractSet,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
)

from ..model import (
    Attr,
    BinOp,
    Call,
    Compare,
    Const,
    DictExpr,
    Expr,
    FuncDef,
    IfExp,
    Name,
    Opaque,
    Subscript,
    TupleExpr,
    UnaryOp,
    expr_text,
)
from .dtypes import DTYPE_CONSTRUCTORS, TORCH_DTYPES, dtype_attribute, dtype_info, normalise_dtype


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


class Host(Protocol):
    """What the evaluator asks of the file around an expression: its own
    functions and classes, and its argparse defaults.  ``interpret.Program``
    is the one implementation; an :class:`Env` without a host evaluates plain
    expressions only."""

    @property
    def defs(self) -> Mapping[str, FuncDef]: ...

    @property
    def classes(self) -> AbstractSet[str]: ...

    def function(self, name: str) -> Optional[FuncDef]: ...

    def call(self, fdef: FuncDef, pos: Sequence[object], kw: Mapping[str, object],
             depth: int) -> object: ...

    def construct(self, cls: str, pos: Sequence[object], kw: Mapping[str, object],
                  depth: int) -> Dict[str, object]: ...

    def argparse_values(self) -> Dict[str, object]: ...


class Env:
    """Names → values for one kernel instantiation."""

    def __init__(self, exprs: Mapping[str, Expr] | None = None,
                 values: Mapping[str, object] | None = None,
                 sources: Mapping[str, str] | None = None,
                 program: Optional[Host] = None) -> None:
        self.exprs: Dict[str, Expr] = dict(exprs or {})
        self.values: Dict[str, object] = dict(values or {})
        self.sources: Dict[str, str] = dict(sources or {})
        # The file's functions and argparse defaults (None: plain expressions only).
        self.program = program
        self._cache: Dict[str, object] = {}
        self._active: Set[str] = set()
        self._reads: Optional[Dict[Tuple[str, int], Tuple[object, ...]]] = None
        # The plain values (numbers, strings) already recorded in _reads: a name
        # read again with an equal one needs no second repr.
        self._read_atoms: Dict[Tuple[str, int], object] = {}

    # -- public -----------------------------------------------------------
    def record_reads(self) -> Dict[Tuple[str, int], Tuple[object, ...]]:
        """Record, from now on, every name this environment resolves and what it
        resolved to: ``(name, depth)`` → outcome (its value's type and repr, or
        the exception).  Every evaluation reads the environment only through
        names, so a computation that read these names gives the same result in
        any environment of the same program where they resolve the same way
        (:meth:`outcomes`)."""
        self._reads = {}
        self._read_atoms = {}
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

    def compute(self, expr: Expr, depth: int = 0) -> Any:
        """The value of ``expr``, raising :class:`Unknown` when it cannot be
        known (and Python's own errors, ``TypeError`` and the like, for code
        that would fail); ``depth`` counts the evaluations already under way."""
        return self._eval(expr, depth)

    def assign_local(self, name: str, expr: Expr) -> None:
        """``name = expr`` as a local assignment of the kernel, in order: the
        value when it is known now, else the expression itself (``missing()``
        then names what blocks it)."""
        try:
            self.values[name] = self._eval(expr, 0)
            self.exprs.pop(name, None)
        except Exception:
            self.values.pop(name, None)
            self.exprs[name] = expr
        self._cache.clear()

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
        key = (name, depth)
        try:
            v = self._resolve(name, depth)
        except Exception as exc:
            _note(reads, key, _failure(exc))
            raise
        kind = type(v)
        if kind in _ATOMS:
            atoms = self._read_atoms
            if key in atoms:
                seen = atoms[key]
                if type(seen) is kind and seen == v:
                    return v
            atoms[key] = v
        _note(reads, key, ("value", kind, repr(v)))
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
            return self._attr(e, depth)
        if isinstance(e, BinOp):
            return self._binop(e, depth)
        if isinstance(e, UnaryOp):
            return self._unary(e, depth)
        if isinstance(e, Compare):
            return self._compare(e, depth)
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

    def _attr(self, e: Attr, depth: int) -> Any:
        """``T.float16``, ``torch.bfloat16``, ``cfg.block_M`` on a dict,
        ``dtype.bits`` / ``.bytes`` / ``.lanes``."""
        if isinstance(e.base, Name) and e.base.id == "T":
            return normalise_dtype(e.attr)
        if isinstance(e.base, Name) and e.base.id == "torch" and e.attr in TORCH_DTYPES \
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

    def _binop(self, e: BinOp, depth: int) -> Any:
        """Arithmetic on numbers (with bounds on ``**`` and ``<<``), tuple and
        string concatenation, a sequence repeated a bounded number of times."""
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

    def _unary(self, e: UnaryOp, depth: int) -> Any:
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

    def _compare(self, e: Compare, depth: int) -> Any:
        """Comparisons, ``and``/``or`` (short-circuit, as Python), ``in`` on a
        container, ``is``/``is not`` against None only."""
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


MAX_ITEMS = 4096


# Immutable values whose equality (same type) means the same repr (not floats:
# 0.0 == -0.0).
_ATOMS = frozenset({int, str, bool, type(None)})


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


def as_sequence(v: object) -> list:
    if isinstance(v, dict):
        return list(v)
    if isinstance(v, (tuple, list, range, str, set, frozenset)):
        if len(v) > MAX_ITEMS:
            raise Unknown([], "sequence too long")
        return list(v)
    raise Unknown([], "not iterable")


def assign_target(target: Optional[Expr], value: object, scope: Dict[str, object]) -> None:
    """Python assignment of ``value`` to ``target`` in ``scope`` (names, tuple
    unpacking, ``d["k"] = v``).  Unknown values become :class:`Unresolved`."""
    if isinstance(target, Name):
        scope[target.id] = value
        return
    if isinstance(target, TupleExpr):
        items = None
        if not isinstance(value, (Unresolved, Symbolic)):
            try:
                items = as_sequence(value)
            except Unknown:
                items = None
        if items is not None and len(items) == len(target.items):
            for t, v in zip(target.items, items, strict=True):
                assign_target(t, v, scope)
        else:
            why = value if isinstance(value, Unresolved) else Unresolved(frozenset())
            for t in target.items:
                assign_target(t, why, scope)
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
        if len(r) > MAX_ITEMS:
            raise Unknown([], "range too long")
        return r
    if f in ("list", "tuple", "sorted", "set"):
        items = as_sequence(ev(args[0])) if args else []
        if f == "sorted":
            items = sorted(items)
        return list(items) if f != "tuple" else tuple(items)
    if f == "zip":
        return list(zip(*[as_sequence(ev(a)) for a in args], strict=False))
    if f == "enumerate":
        return list(enumerate(as_sequence(ev(args[0]))))
    if f in ("itertools.product", "product"):
        seqs = [as_sequence(ev(a)) for a in args]
        n = 1
        for sq in seqs:
            n *= max(len(sq), 1)
        if n > MAX_ITEMS:
            raise Unknown([], "product too large")
        return list(itertools.product(*seqs))
    if f in ("sum",):
        return sum(as_sequence(ev(args[0])))
    if f in ("abs",):
        return abs(ev(args[0]))
    if f in ("bool",):
        return bool(ev(args[0]))
    if f in ("round",):
        return round(*[ev(a) for a in args])
    if f in ("pytest.param",):
        return tuple(ev(a) for a in args)
    if f in ("math.prod",):
        return math.prod(as_sequence(ev(args[0])))
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
        for item in as_sequence(sub._eval(it, depth + 1)):
            count[0] += 1
            if count[0] > MAX_ITEMS:
                raise Unknown([], "comprehension too large")
            inner = dict(scope)
            assign_target(target, item, inner)
            ienv = Env(env.exprs, inner, env.sources, program=env.program)
            if all(ienv._eval(c, depth + 1) for c in (conds.items if isinstance(conds, TupleExpr)
                                                       else ())):
                rec(i + 1, inner)

    rec(0, dict(base_values))
    return out_dict if dict_comp else out_list


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)


def shape_value(env: Env, shape: Sequence[Expr]) -> Tuple[object, ...]:
    """A shape with each dimension an int, or the source name(s) if unknown."""
    out: List[object] = []
    for d in shape:
        v = env.eval_int(d)
        out.append(v if v is not None else expr_text(d))
    return tuple(out)


