"""Kernel instances: every way the file instantiates a kernel, each with the
environment its sizes are evaluated in.

A kernel's names get values from, in increasing priority: module constants,
the factory's defaults, the arguments of a call site in the same file (direct
call, ``.compile(...)``, ``functools.partial``, ``**cfg`` from a dict), an
autotune configuration, explicit bindings (a ``# tilelint: bind`` comment or
the configuration), and finally the factory's and the kernel's own
assignments (which an explicit binding still beats).  :func:`instances`
follows every call site in every context the interpreter finds for it
(:mod:`.interpret`) and labels the instances by the bindings that differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..model import (
    Call,
    CallSite,
    Const,
    Expr,
    Kernel,
    Module,
    Name,
    Opaque,
    Param,
    Subscript,
    expr_text,
)
from .evaluate import Env, Symbolic, Unknown
from .interpret import module_exprs, program

MAX_INSTANCES = 32  # instances of one kernel


@dataclass(frozen=True)
class Instance:
    """One way the file instantiates a kernel: where its values come from."""

    env: Env
    label: str  # "matmul(1024, 1024, …) at line 30" or "defaults"
    call: Optional[CallSite]
    bindings: Tuple[Tuple[str, object], ...]


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
    of the call's arguments.  Each layer below overrides the one before it."""
    prog = program(module)
    b = _Bindings(module_exprs(module), {}, {})
    b.sources.update((n, "module constant") for n in b.exprs)
    module_env = Env(b.exprs, program=prog)
    _bind_defaults(b, kernel_params(kernel))
    if call is not None:  # call-site arguments, evaluated where the call is
        _bind_call(b, kernel, call, caller if caller is not None else Env(b.exprs, program=prog))
    for k, v in (config or {}).items():
        b.set(k, v, "autotune config")
    # The jit style's tensor parameters are symbolic.
    if kernel.style in ("jit", "macro"):
        for p in kernel.params:
            if p.default is None and p.name not in b.values:
                b.values[p.name] = Symbolic(p.name)
    # Explicit bindings (comment) and configuration beat everything else.
    explicit = _explicit_bindings(kernel, module_env, overrides)
    for k, v in explicit.items():
        b.set(k, v, "binding")
    env = Env(b.exprs, b.values, b.sources, program=prog)
    _assign_locals(env, kernel, explicit, b.sources)
    env.sources = b.sources
    return env


@dataclass
class _Bindings:
    """What a kernel's names are bound to while its environment is built:
    expressions (evaluated on demand), values, and where each came from."""

    exprs: Dict[str, Expr]
    values: Dict[str, object]
    sources: Dict[str, str]

    def set(self, name: str, value: object, source: str) -> None:
        self.values[name] = value
        self.exprs.pop(name, None)
        self.sources[name] = source


def _bind_defaults(b: _Bindings, params: Sequence[Param]) -> None:
    """The factory's parameters: their defaults, symbolic when there is none."""
    for p in params:
        if p.default is not None:
            b.exprs[p.name] = p.default
            b.sources[p.name] = "default"
        else:
            b.set(p.name, Symbolic(p.name), "parameter")


def _bind_call(b: _Bindings, kernel: Kernel, call: CallSite, cenv: Env) -> None:
    """The arguments of ``call``: positional ones up to a starred one, a
    ``**cfg`` dict's items, keywords."""
    names = _param_names(kernel)
    for i, a in enumerate(call.args):
        if isinstance(a, Opaque):
            break
        if i < len(names):
            _bind_from(cenv, b, names[i], a, call)
    for star in call.star_kwargs:
        d = cenv.evaluate(star)
        if isinstance(d, dict):
            for k, v in d.items():
                b.set(k, v, f"**{_expr_name(star)} at line {call.span.line}")
    for k, a in call.kwargs:
        _bind_from(cenv, b, k, a, call)


def _explicit_bindings(kernel: Kernel, module_env: Env,
                       overrides: Mapping[str, object] | None) -> Dict[str, object]:
    """``# tilelint: bind`` comments (evaluated among the module's constants),
    then the bindings of the configuration or the command line."""
    explicit: Dict[str, object] = {}
    for bind in kernel.comment_bindings:
        v = module_env.evaluate(bind.value)
        if v is not None:
            explicit[bind.name] = v
    for k, v in (overrides or {}).items():
        explicit[k] = v
    return explicit


_SYMBOLIC_CALLS = ("T.const", "T.dynamic", "T.symbolic")


def _assign_locals(env: Env, kernel: Kernel, explicit: Mapping[str, object],
                   sources: Dict[str, str]) -> None:
    """The factory's then the kernel's local assignments, in order; an
    explicit binding still wins."""
    for name, expr in kernel.locals:
        if name in explicit:
            continue
        symbolic = _symbolic_local(name, expr)
        if symbolic is not None:
            if symbolic:
                env.values[name] = Symbolic(name)
            continue
        env.assign_local(name, expr)
        sources[name] = "assignment"


def _symbolic_local(name: str, expr: Expr) -> Optional[bool]:
    """For ``name = T.const("M, N")`` (``T.dynamic``, ``T.symbolic``, or one
    of their items): whether ``name`` is one of the symbolic values it makes;
    None when ``expr`` makes none."""
    if isinstance(expr, Call) and expr.func in _SYMBOLIC_CALLS:
        syms: List[str] = []
        if expr.args and isinstance(expr.args[0], Const) and isinstance(expr.args[0].value, str):
            syms = [s.strip() for s in expr.args[0].value.replace(",", " ").split()]
        return name in syms or not syms
    if isinstance(expr, Subscript) and isinstance(expr.value, Call) and \
            expr.value.func in _SYMBOLIC_CALLS:
        return True
    return None


def _bind_from(cenv: Env, b: _Bindings, name: str, arg: Expr,
               call: Optional[CallSite] = None) -> None:
    where = f"call at line {call.span.line}" if call is not None else "call"
    try:
        v = cenv.compute(arg)
        missing: Set[str] = set()
    except Unknown as exc:
        v, missing = None, exc.names
    except Exception:
        v, missing = None, set()
    if v is not None or (isinstance(arg, Const) and arg.value is None):
        b.set(name, v, where)
        return
    # The argument is not known where the call is: the parameter stays symbolic
    # (named by the parameter, with the caller's blocking names as the reason).
    why = ", ".join(sorted(missing)) or expr_text(arg)
    b.set(name, Symbolic(name), f"{where} (unknown there: {why})")


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
