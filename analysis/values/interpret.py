"""The file as a program: its own functions, classes, argparse defaults and
top-level statements, interpreted on demand and never executed.

A kernel's sizes often come from ordinary Python around it: a ``main()`` that
calls the factory with computed arguments, a helper returning a config dict, a
``pytest.mark.parametrize`` table, ``@autotune(configs=...)``, a kernel class's
``default_config``.  :class:`Program` follows that code with a small statement
interpreter (assignments, ``if``, ``for`` over known sequences, ``return``,
list/dict mutation) on the evaluator's values, inside fixed budgets
(:data:`MAX_STEPS` statements per run, nested calls, contexts per call site).
It is the :class:`~.evaluate.Host` an :class:`~.evaluate.Env` hands calls of
the file's functions to.
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..model import Call, CallSite, Const, Expr, FuncDef, FuncStmt, Module, Opaque, TupleExpr
from .evaluate import MAX_ITEMS, Env, Symbolic, Unknown, Unresolved, as_sequence, assign_target


def module_exprs(module: Module) -> Dict[str, Expr]:
    """The module's constants, name -> expression."""
    out: Dict[str, Expr] = {}
    for name, expr in module.constants:
        out[name] = expr
    return out


_MAX_CALL_DEPTH = 6  # nested calls of the file's own functions
_MAX_CHAIN = 4  # caller-of-caller levels followed for call contexts
_MAX_CONTEXTS = 64  # contexts kept per function / call site
MAX_STEPS = 20000  # statements interpreted per run


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
        self._ctx_cache: Dict[Tuple[int, int], List[Tuple[Env, str]]] = {}
        self._param_cache: Dict[str, List[Tuple[Dict[str, object], str]]] = {}
        self._active: Set[str] = set()
        self._call_memo: Dict[Tuple, object] = {}
        self.steps = 0

    # -- helpers ------------------------------------------------------------
    def env(self, values: Optional[Mapping[str, object]] = None) -> Env:
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
            return env.compute(e, depth)
        except Unknown as exc:
            return Unresolved(frozenset(exc.names))
        except (ArithmeticError, TypeError, ValueError, OverflowError, RecursionError,
                KeyError, IndexError, AttributeError):
            return Unresolved(frozenset())

    def _exec(self, stmts: Sequence[FuncStmt], scope: Dict[str, object], depth: int,
              stop_line: Optional[int], snaps: List[Dict[str, object]]) -> None:
        for st in stmts:
            self.steps += 1
            if self.steps > MAX_STEPS or len(snaps) >= _MAX_CONTEXTS:
                raise _Budget()
            inside = stop_line is not None and st.line <= stop_line <= st.end_line
            if inside and st.kind in ("assign", "expr", "return"):
                snaps.append(dict(scope))
            if st.kind == "assign":
                assign_target(st.target, self._value(st.value, scope, depth), scope)
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
                    items = None if isinstance(it, (Unresolved, Symbolic)) else as_sequence(it)
                except Unknown:
                    items = None
                if items is None:
                    if inside:
                        assign_target(st.target, it if isinstance(it, Unresolved)
                                       else Unresolved(frozenset()), scope)
                        self._exec(st.body, scope, depth, stop_line, snaps)
                    continue
                for item in items:
                    assign_target(st.target, item, scope)
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
    def contexts_at(self, call: CallSite, chain: int = 0) -> List[Tuple[Env, str]]:
        """Environments of the code around ``call`` (one per way it is reached)."""
        key = (id(call), chain)
        if key in self._ctx_cache:
            return self._ctx_cache[key]
        self._ctx_cache[key] = [(self.env(), "")]  # guards recursion
        out: List[Tuple[Env, str]] = []
        try:
            batch = self._batch_contexts(call, chain)
            if batch is not None:
                self._ctx_cache.update(batch)
                out = batch[key]
            elif call.enclosing is None:
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

    def _batch_contexts(self, call: CallSite, chain: int
                        ) -> Optional[Dict[Tuple[int, int], List[Tuple[Env, str]]]]:
        """The contexts of every call site that sits, like ``call``, in a simple
        statement (assign, bare call, return) directly in the body of the same
        function (or of the module), from one run of that body: a ``main()``
        that builds 400 kernels is run once, not once per kernel.  For such a
        line the single-line run (:meth:`contexts_at`) forces no branch and
        snapshots once, just before the statement, so the result is the same.
        None when ``call`` is not in such a statement."""
        if call.enclosing is None:
            body: Sequence[FuncStmt] = self.module.toplevel
            fdef = None
        else:
            fdef = self.defs.get(call.enclosing)
            if fdef is None:
                return None
            body = fdef.body

        # the simple statement of the body each line belongs to (statement index)
        simple: Dict[int, int] = {}
        for i, st in enumerate(body):
            if st.kind in ("assign", "expr", "return"):
                for ln in range(st.line, st.end_line + 1):
                    simple[ln] = i
        if call.span.line not in simple:
            return None
        sites = [c for c in self.module.call_sites
                 if c.enclosing == call.enclosing and (id(c), chain) not in self._ctx_cache
                 and c.span.line in simple]
        if not any(c is call for c in sites):
            sites.append(call)
        if len(sites) < 2:
            return None
        at_stmt: Dict[int, List[int]] = {}  # statement index -> the call lines in it
        for ln in {c.span.line for c in sites}:
            at_stmt.setdefault(simple[ln], []).append(ln)
        if fdef is None:
            runs: List[Tuple[Dict[str, object], str]] = [({}, "")]
        else:
            runs = list(self.param_contexts(fdef, chain + 1))
        per_line: Dict[int, List[Tuple[Env, str]]] = {ln: [] for lns in at_stmt.values()
                                                      for ln in lns}
        for binding, label in runs:
            seen: Dict[int, Dict[str, object]] = {}
            scope = dict(binding)
            self.steps = 0
            try:
                for i, st in enumerate(body):
                    if self.steps + 1 > MAX_STEPS:
                        raise _Budget()
                    for ln in at_stmt.get(i, ()):
                        seen[ln] = dict(scope)
                    if st.kind == "return":
                        break
                    # stop line -1 lies in no statement: a return inside a branch ends
                    # that branch only, as in the single-line run before its line
                    self._exec((st,), scope, 0, -1, [])
            except (_Budget, _Return):
                pass
            for ln in per_line:
                snap = seen.get(ln)
                if fdef is None:
                    if not per_line[ln]:
                        per_line[ln].append((self._frame_env(snap or {}), ""))
                elif len(per_line[ln]) < _MAX_CONTEXTS:
                    per_line[ln].append((self._frame_env(snap if snap is not None
                                                         else dict(binding)), label))
        return {(id(c), chain): list(per_line[c.span.line]) for c in sites}

    def _frame_env(self, scope: Mapping[str, object]) -> Env:
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

    def call_values(self, call: CallSite, cenv: Env) -> Tuple[List[object], Dict[str, object]]:
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
                    if prod > MAX_ITEMS:
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
                for x in items[:MAX_ITEMS]:
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


def _value_or_unresolved(env: Env, e: Expr) -> object:
    try:
        return env.compute(e)
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

