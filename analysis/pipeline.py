"""The pass pipeline: run the mirrored passes over every kernel of a file.

The order follows tilelang's own lowering (``tilelang/cuda/pipeline.py``):
warp specialization is decided first (sm_90), then PipelinePlanning and
InjectSoftwarePipeline's validation and versioning, then
MergeSharedMemoryAllocations, then sync insertion.  ``analyze()`` is the one
entry point the CLI and the language server share.
"""

from __future__ import annotations

import re
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
)

from . import frontend, targets as targets_mod, values
from .directives import NOQA
from .loops import (
    active_view,
    loop_active as loop_active,  # re-exported for callers of pipeline
    pipelined_loops,
)
from .model import (
    Alloc,
    Analysis,
    Branch,
    CallSite,
    Diagnostic,
    Expr,
    Kernel,
    KernelResult,
    Loop,
    LoopResult,
    Module,
    OpenClaim,
    Settings,
    Span,
    Stmt,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from .model import AscendResult, KernelSync
    from .packing import Packing

# run_kernel's signature: (module, kernel, target, settings, source, select).
KernelRunner = Callable[[Module, Kernel, str, Settings, Optional[str], Optional[str]],
                        Tuple[List[KernelResult], List[Diagnostic]]]
_D = TypeVar("_D", bound="DataclassInstance")


def analyze(source: str, path: str = "<stdin>", settings: Optional[Settings] = None,
            module: Optional[Module] = None,
            selection: Tuple[Tuple[str, str], ...] = ()) -> Analysis:
    """Analyse one file's text from scratch.  Never raises on bad input.

    ``selection`` pairs a kernel (or factory) name, or ``*``, with the label
    of the instance to report (the editor's ``binding`` setting).  The
    incremental engine (``host.AnalysisHost``) returns the same value for the
    same text through :func:`analyze_module` with its caches."""
    settings = settings or Settings()
    if module is None:
        module = frontend.parse_module(source)
    return analyze_module(module, source, path, settings, selection)


def analyze_module(module: Module, source: str, path: str, settings: Settings,
                   selection: Tuple[Tuple[str, str], ...] = (),
                   run: Optional[KernelRunner] = None) -> Analysis:
    """Every kernel of ``module`` through ``run`` (default :func:`run_kernel`;
    the host passes a caching one), then the file's filtering."""
    run = run or run_kernel
    target = targets_mod.normalise(settings.target)
    diagnostics: List[Diagnostic] = list(module.problems)
    results: List[KernelResult] = []
    budget = settings.time_budget
    t0 = time.monotonic()
    for i, kernel in enumerate(module.kernels):
        if budget and i and time.monotonic() - t0 > budget:
            diagnostics.append(_budget_used(module, i, budget))
            break
        select = selected_label(selection, kernel.name, kernel.factory) if selection else None
        krs, kdiags = run(module, kernel, target, settings, source, select)
        results.extend(krs)
        if kernel.kernel_span is None:
            # A prim_func at the TIR level (no ``T.Kernel``): tilelang.lower
            # rejects it before any pass we mirror (nothing binds its threads), so
            # it is modelled for explain/hover but reported on by no rule.
            continue
        diagnostics.extend(kdiags)
    diagnostics = filter_diagnostics(diagnostics, source, settings)
    return Analysis(path=path, target=target, kernels=tuple(results),
                    diagnostics=tuple(diagnostics), module=module)


def _budget_used(module: Module, done: int, budget: float) -> Diagnostic:
    kernel = module.kernels[done]
    left = len(module.kernels) - done
    return Diagnostic(
        code="TL005", severity="warning", span=kernel.name_span,
        message=(f"tilelint stopped analysing this file after {done} of "
                 f"{len(module.kernels)} kernels: its time budget of {budget:g} s was used "
                 f"up, so `{kernel.name}` and the {left - 1} kernel(s) after it are not "
                 f"checked (raise `time-budget` in [tool.tilelint], or `--time-budget`; "
                 f"0 means no limit)"))


def selected_label(selection: Tuple[Tuple[str, str], ...], kernel_name: str,
                   factory: Optional[str]) -> Optional[str]:
    """The label ``selection`` picks for one kernel (a per-kernel entry beats ``*``)."""
    hit = None
    for name, label in selection:
        if name in (kernel_name, factory):
            return label
        if name == "*":
            hit = label
    return hit


def run_kernel(module: Module, kernel: Kernel, target: str, settings: Settings,
               source: Optional[str], select: Optional[str] = None,
               memo: Optional["InstanceMemo"] = None
               ) -> Tuple[List[KernelResult], List[Diagnostic]]:
    """:func:`analyze_kernel` for the instance labelled ``select`` (None: the
    default one, or all of them with ``settings.all_bindings``); a bug of ours
    becomes TL000 on the kernel's name instead of an exception.  ``memo``: see
    :func:`analyze_kernel`."""
    try:
        if select is not None and not settings.all_bindings:
            return _analyze_selected(module, kernel, target, settings, source, select, memo)
        return analyze_kernel(module, kernel, target, settings, source, memo)
    except Exception as exc:  # a bug of ours must not take the editor down
        return [KernelResult(kernel=kernel)], [Diagnostic(
            code="TL000", severity="error", span=kernel.name_span, kernel=kernel.name,
            message=f"tilelint internal error while analysing `{kernel.name}`: "
                    f"{type(exc).__name__}: {exc}. Please report this.")]


def _analyze_selected(module: Module, kernel: Kernel, target: str, settings: Settings,
                      source: Optional[str], select: str, memo: Optional["InstanceMemo"] = None
                      ) -> Tuple[List[KernelResult], List[Diagnostic]]:
    """The results of the instance labelled ``select``: every instance is
    analysed and the one asked for is kept, with the diagnostics that hold for
    it; a label the kernel does not have gives the default instance."""
    import dataclasses
    overrides = kernel_overrides(kernel, settings)
    labels = values.instance_labels(module, kernel, overrides)
    if select not in labels[1:]:  # the default one, or a label it does not have
        return analyze_kernel(module, kernel, target, settings, source, memo)
    krs, diags = analyze_kernel(
        module, kernel, target, dataclasses.replace(settings, all_bindings=True), source, memo)
    hit = [kr for kr in krs if kr.config_label == select]
    if not hit:  # pragma: no cover - labels and results come from the same instances
        return analyze_kernel(module, kernel, target, settings, source, memo)
    kept = []
    for d in diags:
        if d.configs and select not in d.configs:
            continue
        kept.append(dataclasses.replace(d, configs=()) if d.configs else d)
    return hit[:1], kept


# --------------------------------------------------------------------------
# One kernel
# --------------------------------------------------------------------------


def kernel_overrides(kernel: Kernel, settings: Settings) -> Dict[str, object]:
    out: Dict[str, object] = dict(settings.bindings)
    for name, pairs in settings.kernel_bindings:
        if name in (kernel.name, kernel.factory):
            out.update(dict(pairs))
    return out


def _attempted(lr: LoopResult, diags: Sequence[Diagnostic]) -> LoopResult:
    """A loop whose schedule the compiler rejects (an error among ``diags``: a
    duplicate order, a length mismatch, ...) is still one it tries to pipeline:
    ``pipelined`` stays true and the note says why lowering fails.  The kernel
    then emits no code, so no sync is claimed for it."""
    errors = [d for d in diags if d.severity == "error"]
    if not errors:
        return lr
    d = errors[0]
    return _replace(lr, pipelined=True, rejected=True,
                    note=f"pipelining fails ({d.code}): {d.message}")


def _schedule_unknown(loop_results: Sequence[LoopResult]) -> bool:
    """A pipelined loop whose stages are not known: the sync the compiler
    inserts is not known either, so none is claimed."""
    return any(lr.pipelined and not lr.warp_specialized
               and any(s.stage is None for s in lr.statements)
               for lr in loop_results)


# One instance's planned loops, warp specialization, packing, sync and loop
# rules (:func:`instance_core`): (the active view of the kernel, loop results,
# warp-specialized, packing, kernel sync, threads, Ascend result, diagnostics,
# the facts that depend on an undecided ``if``).
InstanceCore = Tuple[Kernel, Tuple[LoopResult, ...], bool, Optional["Packing"],
                     Optional["KernelSync"], Optional[int], Optional["AscendResult"],
                     Tuple[Diagnostic, ...], Tuple[OpenClaim, ...]]
# (settings, the instance's index, computes its core) -> its core.
InstanceMemo = Callable[[Settings, int, Callable[[], InstanceCore]], InstanceCore]


def analyze_kernel(module: Module, kernel: Kernel, target: str, settings: Settings,
                   source: Optional[str] = None, memo: Optional[InstanceMemo] = None
                   ) -> Tuple[List[KernelResult], List[Diagnostic]]:
    """Every instance of ``kernel``: its core (:func:`instance_core`, through
    ``memo`` when given: the host keeps cores across edits that only move the
    call sites, whose lines show in the instance labels and TL002 texts built
    here), its unresolved names and its labels."""
    from . import packing

    if kernel.dialect == "npu":
        # The tilelang-ascend fork's dialect is not modelled: no finding at all
        # (the file's one TL004 comes from the frontend).
        return [KernelResult(kernel=kernel)], []
    overrides = kernel_overrides(kernel, settings)
    insts = values.instances(module, kernel, overrides, all_calls=settings.all_bindings)
    results: List[KernelResult] = []
    # One diagnostic per (code, position, message), with every configuration
    # it holds for.
    merged: Dict[Tuple[str, int, int, str], Tuple[Diagnostic, List[str]]] = {}
    base_kernel = kernel
    # TL002: one per kernel, over every instance analysed.
    unknown_per_instance: List[Tuple[str, Dict[str, "Unresolved"]]] = []
    tinfo = targets_mod.get(target)
    for n, inst in enumerate(insts):
        env = inst.env

        def core(env: values.Env = env) -> InstanceCore:
            return instance_core(base_kernel, env, target, source)

        kernel, loops, ws, pack, ksync, threads, ascend, cdiags, claims = \
            memo(settings, n, core) if memo is not None else core()
        loop_results = list(loops)
        kdiags = list(cdiags)
        unknown = unresolved_values(module, kernel, env, source, inst.call)
        unknown_per_instance.append((inst.label, unknown))
        results.append(KernelResult(
            kernel=base_kernel,
            bindings=inst.bindings,
            unresolved=tuple(sorted(unknown)),
            threads=threads,
            warp_specialized=ws,
            shared_bytes=None if pack is None else pack.arena_bytes,
            shared_budget=None if tinfo is None else tinfo.smem_budget,
            no_reuse_bytes=None if pack is None else pack.no_reuse_bytes,
            shared_static_bytes=0 if pack is None else pack.static_bytes,
            buffers=() if pack is None else tuple(pack.buffers),
            loops=tuple(loop_results),
            sync=ksync,
            ascend=ascend,
            config_label=inst.label,
            branches=kernel.branches,
            open_claims=claims,
        ))
        for d in kdiags:
            key = (d.code, d.span.line, d.span.col, d.message)
            if key not in merged:
                merged[key] = (d, [])
            labels = merged[key][1]
            if inst.label not in labels:
                labels.append(inst.label)
    for d in unresolved_diagnostic(module, base_kernel, unknown_per_instance, source):
        merged[(d.code, d.span.line, d.span.col, d.message)] = (d, list(d.configs))
    diags: List[Diagnostic] = []
    tinfo = targets_mod.get(target)
    if tinfo is not None and tinfo.kind == "cuda" and insts:
        # TL202: every configuration of a literal autotune list (packing.py).
        for d in packing.autotune_diagnostics(module, base_kernel, target, source,
                                              insts[0].bindings, overrides):
            merged[(d.code, d.span.line, d.span.col, d.message)] = (d, list(d.configs))
    for d, labels in merged.values():
        if len(insts) > 1 and len(labels) < len(insts):
            # Holds for some configurations only: say which.
            d = _replace(d, configs=tuple(d.configs) + tuple(
                lb for lb in labels if lb not in d.configs))
        diags.append(_replace(d, kernel=kernel.name) if d.kernel is None else d)
    return results, diags


def instance_core(base_kernel: Kernel, env: values.Env, target: str, source: Optional[str]
                  ) -> InstanceCore:
    """One instance's planned loops, warp specialization, packing, sync and
    loop rules.  Reads the kernel, the instance's values and the source at the
    kernel's own spans (quick fixes), never a call site's line.

    An ``if`` whose Python value is not known keeps every arm in the results
    shown; its errors and warnings are the ones that hold however it is built
    (:func:`_choice_diagnostics`)."""
    core = _instance_core(base_kernel, env, target, source)
    from .elaborate import choice_variants
    variants = choice_variants(core[0].branches)
    if not variants:
        return core
    cores = [_instance_core(base_kernel, env, target, source, dict(c)) for c in variants]
    branches = core[0].branches
    diags = _choice_diagnostics(core[7], variants, [c[7] for c in cores], branches)
    return core[:7] + (diags, _open_claims(variants, cores, branches))


def _open_claims(variants: Sequence[Tuple], cores: Sequence[InstanceCore],
                 branches: Sequence[Branch]) -> Tuple[OpenClaim, ...]:
    """The kernel facts that differ between the ways its undecided ``if``
    statements can be built."""
    from .elaborate import choice_text

    def shared(c: InstanceCore) -> str:
        total = None if c[3] is None else c[3].total_bytes
        return "?" if total is None else f"{total} B"

    facts = (("shared memory", shared),
             ("warp specialization", lambda c: "yes" if c[2] else "no"),
             ("threads", lambda c: "?" if c[5] is None else str(c[5])))
    deciders = tuple(sorted({n for b in branches if not b.decided for n in b.decided_by}))
    out = []
    for fact, get in facts:
        vals = tuple((choice_text(v, branches), get(c)) for v, c in zip(variants, cores,
                                                                       strict=True))
        if len({v for _, v in vals}) > 1:
            out.append(OpenClaim(fact=fact, decided_by=deciders, values=vals))
    return tuple(out)


_FINDING = ("error", "warning")
_KERNEL_WIDE = ("TL201", "TL203")


def _choice_diagnostics(kept: Sequence[Diagnostic], variants: Sequence[Tuple],
                        built: Sequence[Sequence[Diagnostic]], branches: Sequence[Branch]
                        ) -> Tuple[Diagnostic, ...]:
    """The diagnostics of a kernel with undecided branches: ``kept`` (every arm
    kept), ``built[i]`` (the kernel built as ``variants[i]`` chooses).  An error
    or warning stands when every variant has it; one that only some variants
    have becomes a TL002 information that names the values deciding it and
    the choices it holds for; one that none has (an artefact of keeping every
    arm, such as an arena with both arms' buffers) is dropped."""
    from .elaborate import choice_text

    def key(d: Diagnostic) -> Tuple[str, int, int]:
        # The kernel's one shared-memory finding sits on its largest buffer,
        # which may be another one when an arm is built: matched by its code.
        if d.code in _KERNEL_WIDE:
            return (d.code, 0, 0)
        return (d.code, d.span.line, d.span.col)

    per_variant = [{key(d): d for d in ds if d.severity in _FINDING} for ds in built]
    deciders = sorted({n for b in branches if not b.decided for n in b.decided_by})
    names = ", ".join(f"`{n}`" for n in deciders) or "a value not known here"
    out: List[Diagnostic] = []
    seen: Set[Tuple[str, int, int]] = set()

    def place(k: Tuple[str, int, int], d: Optional[Diagnostic]) -> None:
        if k in seen:
            return
        seen.add(k)
        hits = [i for i, pv in enumerate(per_variant) if k in pv]
        if len(hits) == len(per_variant):
            out.append(d if d is not None else per_variant[0][k])
            return
        if not hits:
            return
        first = per_variant[hits[0]][k]
        when = " or ".join(f"when {choice_text(variants[i], branches)}" for i in hits)
        out.append(_replace(
            first, code="TL002", severity="information", fixes=(),
            message=f"{first.code} depends on {names}, whose value is not known here: "
                    f"it holds only {when}: {first.message}"))

    for d in kept:
        if d.severity in _FINDING:
            place(key(d), d)
        else:
            out.append(d)
    for pv in per_variant:
        for k in pv:
            place(k, None)
    return tuple(out)


def _instance_core(base_kernel: Kernel, env: values.Env, target: str, source: Optional[str],
                   choices: Optional[Dict[Tuple[int, int], int]] = None) -> InstanceCore:
    """:func:`instance_core` of the kernel built with the undecided ``if``
    statements in ``choices`` forced (None: every arm kept)."""
    from . import packing, rules, sync_ascend, sync_cuda

    # Loops whose conditional iterator takes its serial arm here are plain
    # loops for every pass (planning, warp specialization, packing, sync).
    kernel = active_view(base_kernel, env, choices)
    allocs: Dict[str, Alloc] = {a.name: a for a in kernel.allocs}
    tinfo = targets_mod.get(target)
    planned = packing.plan_loops(kernel, env, target)
    ws_mode, ws = planned.ws_mode, planned.warp_specialized
    loop_results: List[LoopResult] = []
    kdiags: List[Diagnostic] = []
    per_loop: List[List[Diagnostic]] = []
    for lr, ld in zip(planned.loops, planned.errors, strict=True):
        ldiags = [rules.planning_diagnostic(e) for e in ld]
        ldiags += rules.validate_loop(lr, allocs, target, env, source)
        loop_results.append(_attempted(lr, ldiags))
        per_loop.append(ldiags)
    if tinfo is not None and tinfo.kind == "cuda" and kernel.dialect == "cuda":
        # Measured on CUDA targets (layout inference, docs/compiler-notes.md).
        for i, extra in enumerate(rules.outside_uses(kernel.body, loop_results)):
            if extra:
                per_loop[i] = per_loop[i] + extra
                loop_results[i] = _attempted(loop_results[i], per_loop[i])
    for ldiags in per_loop:
        kdiags.extend(ldiags)
    if ws_mode == "fallback":
        kdiags.extend(_ws_fallback(kernel, loop_results, env, target))
    pack = None
    ksync = None
    threads = None
    if tinfo is not None and tinfo.kind == "cuda" and kernel.dialect == "cuda":
        pack = packing.pack_kernel(kernel, env, loop_results, target, ws)
        ksync, regions = sync_cuda.kernel_sync_regions(kernel, env, loop_results, target, ws,
                                                       pack=pack)
        if _sync_not_modelled(kernel) or _schedule_unknown(loop_results) or \
                any(lr.rejected for lr in loop_results):
            ksync = None
            loop_results = [_replace(lr, sync=None, prologue_sync=None, epilogue_sync=None)
                            for lr in loop_results]
        else:
            loop_results = [_replace(lr, sync=r.body, prologue_sync=r.prologue,
                                     epilogue_sync=r.epilogue)
                            for lr, r in zip(loop_results, regions, strict=False)]
        threads = sync_cuda.threads(kernel, env, ws)
        kdiags.extend(packing.overflow_diagnostics(kernel, env, loop_results, pack, target, ws))
    else:
        threads = env.eval_int(kernel.threads)
    ascend = None
    if tinfo is not None and tinfo.kind == "ascend" and kernel.dialect == "ascend":
        ascend, adiags = sync_ascend.analyze_ascend(
            kernel, env, list(pipelined_loops(kernel.body)))
        kdiags.extend(adiags)
    return kernel, tuple(loop_results), ws, pack, ksync, threads, ascend, tuple(kdiags), ()


def _sync_not_modelled(kernel: Kernel) -> bool:
    """Tensor memory, tcgen05 gemms and user mbarriers (``T.alloc_barrier``) add
    syncs the model does not place (a tcgen05 GEMM on sm_100: the compiler emits
    2 ``__syncthreads`` and 6 mbarriers where the model counts 1 and 4), so no
    sync counts are claimed for such a kernel."""
    if any(a.scope in ("shared.tmem", "shared.barrier", "shared.cluster_barrier")
           for a in kernel.allocs):
        return True

    def walk(stmts: Sequence[Stmt]) -> bool:
        return any("tcgen05" in st.op or walk(st.children) for st in stmts)

    return walk(kernel.body)


def _ws_fallback(kernel: Kernel, loops: Sequence[LoopResult],
                 env: values.Env, target: str) -> List[Diagnostic]:
    """TL113: the warp-specialization pass (sm_90 and later) claimed the kernel
    but could not split its first num_stages loop, and dropped num_stages
    everywhere."""
    staged = [lr for lr in loops if lr.loop.num_stages is not None
              and (env.eval_int(lr.loop.num_stages) or 1) >= 1]
    if not staged:
        return []
    first = staged[0].loop
    if _structure_unknown(kernel, first, env):
        # Which copies sit at the top of the loop depends on a value tilelint
        # does not know (``if k_exact:`` on a factory value): say nothing.
        return []
    span = first.num_stages_span or first.iter_span
    return [Diagnostic(
        code="TL113", severity="warning", span=span, kernel=kernel.name,
        message=(f"on {target} the warp-specialization pass takes this kernel (it has TMA-"
                 "eligible copies) but cannot split this loop into producer and consumer: "
                 "no global-to-shared copy sits at the top level of its body. The compiler "
                 f"then drops num_stages from all {len(staged)} pipelined loop(s) of "
                 f"`{kernel.name}`, so none is software-pipelined"))]


def _structure_unknown(kernel: Kernel, loop: Loop, env: values.Env) -> bool:
    """Whether an ``if`` in the loop body tests a Python value tilelint does
    not know (``if k_exact:`` on a factory value it cannot see): Python
    decides it when the kernel is built, so which statements the loop holds
    is not known (elaborate.py records it as undecided)."""
    from .elaborate import undecided_in
    return bool(undecided_in(loop.body, kernel.branches))


def _replace(obj: _D, **changes: Any) -> _D:
    import dataclasses
    return dataclasses.replace(obj, **changes)


# --------------------------------------------------------------------------
# TL002: what stays symbolic
# --------------------------------------------------------------------------


def _relevant_exprs(kernel: Kernel) -> Iterator[Expr]:
    for a in kernel.allocs:
        if a.scope.startswith("shared") or kernel.dialect == "ascend":
            yield from a.shape
            yield a.dtype
    for loop in pipelined_loops(kernel.body):
        if loop.num_stages is not None:
            yield loop.num_stages
        for e in (loop.order or ()) + (loop.stage or ()):
            yield e
    if kernel.threads is not None:
        yield kernel.threads


def _unresolved_names(kernel: Kernel, env: values.Env) -> Set[str]:
    """The raw names ``Env.missing`` gives for the kernel's sizes and schedule."""
    names: Set[str] = set()
    for e in _relevant_exprs(kernel):
        names |= env.missing(e)
    return names


from dataclasses import dataclass as _dataclass  # noqa: E402  (TL002 section)

# Names that hold an object, never a value a binding could give.
_NOT_VALUES = ("self", "cls")
# Attributes of a dtype object (``DataType(x).bits``): the dtype is the value.
_DTYPE_ATTRS = ("bits", "bytes", "lanes")


@_dataclass(frozen=True)
class Unresolved:
    """One value that keeps a kernel's sizes or schedule unknown."""

    name: str  # as shown: ``N``, ``self.block_m``
    why: str = ""  # why it is unknown ("" when not known)
    bind: Optional[str] = None  # the name a ``# tilelint: bind`` would set (None: none)


def unresolved_values(module: Module, kernel: Kernel, env: values.Env,
                      source: Optional[str] = None,
                      call: Optional[CallSite] = None) -> Dict[str, Unresolved]:
    """Every value that keeps ``kernel``'s shared-memory sizes, dtypes, threads or
    schedule from being known in ``env``, keyed by the name shown to the user.

    Each is traced to where it comes from: a parameter without a value, the
    argument of a call that is unknown where the call is, an import, an
    attribute of ``self``.  Objects (``self``, ``cls``, modules) are never
    offered for binding: an attribute read through a local name is bound by
    that name, one read directly has no binding."""
    ctx = _TraceCtx(module, kernel, env, source, call)
    raw: Set[str] = set()
    for e in _relevant_exprs(kernel):
        raw |= env.missing(e)
        try:
            ctx.visit(e, None, 0)
        except RecursionError:  # pragma: no cover - depth is bounded below
            continue
    if not ctx.found:
        # Never silent where the resolver names a blocker: if the trace found
        # nothing to show, show the resolver's own names.
        for n in sorted(raw - {"<symbolic>"}):
            if n in _NOT_VALUES or ctx.is_module(n):
                ctx.add(n, ctx.object_why(n, n), None)
            else:
                ctx.add(n, ctx.why(n), n)
    return ctx.found


class _TraceCtx:
    def __init__(self, module: Module, kernel: Kernel, env: values.Env,
                 source: Optional[str], call: Optional[CallSite]) -> None:
        self.module = module
        self.kernel = kernel
        self.env = env
        self.source = source
        self.call = call
        self.found: Dict[str, Unresolved] = {}
        self._seen: Dict[Tuple[str, Optional[str]], bool] = {}
        self._imports: Optional[Dict[str, Tuple[str, bool]]] = None

    # -- recording ------------------------------------------------------------
    def add(self, name: str, why: str, bind: Optional[str]) -> bool:
        """Record ``name`` (once); True: something is to blame."""
        if name == "<symbolic>":
            return True  # an anonymous ``T.dynamic``: nothing to name or bind
        if name in self.found:
            return True
        if bind is not None and (bind in _NOT_VALUES or bind == "<symbolic>"
                                 or self.is_module(bind)):
            bind = None
        self.found[name] = Unresolved(name, why, bind)
        return True

    # -- the walk -----------------------------------------------------------------
    def visit(self, e: Optional[Expr], proxy: Optional[str], depth: int) -> bool:
        """Trace why ``e`` is unknown; True when something is to blame for it
        (newly recorded or recorded before)."""
        from .model import (
            Attr,
            BinOp,
            Call,
            Compare,
            DictExpr,
            IfExp,
            Name,
            Subscript,
            TupleExpr,
            UnaryOp,
        )
        if e is None or depth > 48:
            return False
        blocked, miss = self.blocked(e)
        if not blocked:
            return False
        hit = False
        if isinstance(e, Name):
            hit = self.name(e.id, proxy, depth)
        elif isinstance(e, (Attr, Subscript)) and not (
                isinstance(e, Attr) and e.attr in _DTYPE_ATTRS):
            root, text = _chain(e)
            if root is not None and (root in _NOT_VALUES or self.is_module(root) or (
                    isinstance(e, Attr) and self.env.missing(Name(root)))):
                # An attribute (or item) of an object: the object is no value.
                hit = self.add(text, self.object_why(root, text), proxy)
            elif isinstance(e, Attr):
                hit = self.visit(e.base, proxy, depth + 1)
            else:
                hit = self.visit_all((e.value, e.index), proxy, depth)
        elif isinstance(e, Attr):  # ``x.bits``: the dtype x is the value
            hit = self.visit(e.base, proxy, depth + 1)
        elif isinstance(e, (BinOp, Compare)):
            hit = self.visit_all((e.left, e.right), proxy, depth)
        elif isinstance(e, UnaryOp):
            hit = self.visit(e.operand, proxy, depth + 1)
        elif isinstance(e, IfExp):
            hit = self.visit_all((e.test, e.body, e.orelse), proxy, depth)
        elif isinstance(e, TupleExpr):
            hit = self.visit_all(e.items, proxy, depth)
        elif isinstance(e, DictExpr):
            hit = self.visit_all([x for _, x in e.items], proxy, depth)
        elif isinstance(e, Call):
            hit = self.visit_all(tuple(e.args) + tuple(x for _, x in e.kwargs), proxy, depth)
        if hit:
            return True
        # Nothing more specific: name what the resolver names.
        for n in sorted(miss):
            if n in _NOT_VALUES or self.is_module(n):
                if proxy is not None:
                    hit = self.add(proxy, self.local_why(proxy), proxy) or hit
                else:
                    hit = self.add(_text(e), self.object_why(n, n), None) or hit
            else:
                hit = self.add(n, self.why(n), n) or hit
        if not miss and proxy is None:
            # Unknown without a name to blame (a call tilelint does not
            # follow, a missing attribute): name the expression.
            hit = self.add(_chain(e)[1], _why_text(self.env, e) or "not computable statically",
                           None)
        return hit

    def visit_all(self, exprs: Iterable[Optional[Expr]], proxy: Optional[str],
                  depth: int) -> bool:
        hit = False
        for x in exprs:
            hit = self.visit(x, proxy, depth + 1) or hit
        return hit

    def blocked(self, e: Expr) -> Tuple[bool, Set[str]]:
        """(whether ``e`` is unknown, the names that block it)."""
        try:
            self.env.compute(e)
            return False, set()
        except values.Unknown as exc:
            return True, set(exc.names)
        except Exception:  # noqa: BLE001 - a value that fails is not "unknown"
            return False, set()

    def name(self, n: str, proxy: Optional[str], depth: int) -> bool:
        key = (n, proxy)
        if key in self._seen:
            return self._seen[key]
        self._seen[key] = False  # reached again through itself: blames nothing new
        hit = self._name(n, proxy, depth)
        self._seen[key] = hit
        return hit

    def _name(self, n: str, proxy: Optional[str], depth: int) -> bool:
        env = self.env
        if n in env.values:
            v = env.values[n]
            if isinstance(v, values.Symbolic):
                s = v.name
                if s in _NOT_VALUES:
                    return proxy is not None and self.add(proxy, self.local_why(proxy), proxy)
                return self.add(s, self.why(s), s)
            if isinstance(v, values.Unresolved):
                # A value handed over from elsewhere (``**cfg``, a helper's
                # result): only this name can be bound here.
                return self.add(n, self.why(n, sorted(v.names)), n)
            if v is None:
                return self.add(n, "given as None", n)
            return False
        if n in env.exprs:
            if self.visit(env.exprs[n], n, depth + 1):
                return True
            return self.add(n, self.why(n), n)
        if n in _NOT_VALUES:
            return proxy is not None and self.add(proxy, self.local_why(proxy), proxy)
        return self.add(n, self.why(n), n)

    # -- why ---------------------------------------------------------------------
    def imports(self) -> Dict[str, Tuple[str, bool]]:
        if self._imports is None:
            self._imports = imported_names(self.source or "")
        return self._imports

    def is_module(self, name: str) -> bool:
        hit = self.imports().get(name)
        return hit is not None and hit[1] and name not in self.env.values \
            and name not in self.env.exprs

    def owner(self, name: str) -> Optional[str]:
        """The function whose parameter ``name`` is."""
        k = self.kernel
        for p in tuple(k.factory_params) + tuple(k.params):
            if p.name != name:
                continue
            hit = _source_facts(self.source or "")[1].get((name, p.span.line))
            if hit is not None:
                return hit
            for fname, params in getattr(self.module, "functions", ()):
                if any(q.span == p.span and q.name == name for q in params):
                    return fname
            return k.factory if p in k.factory_params and k.factory else k.name
        return None

    def why(self, n: str, depends: Sequence[str] = ()) -> str:
        src = self.env.sources.get(n, "")
        dep = [d for d in depends if d != n]
        dep_txt = (", which depends on " + ", ".join(
            f"`{d}`" for d in dep)) if dep else ""
        if src == "parameter":
            owner = self.owner(n)
            head = f"parameter of `{owner}` without a default" if owner else \
                "parameter without a default"
            return f"{head}, {self.call_note(n, owner)}"
        if src.startswith("call at line"):
            where, _, rest = src.partition(" (unknown there: ")
            rest = rest[:-1] if rest.endswith(")") else rest
            arg = self.call_arg(n)
            if arg is not None:
                return f"the {where} passes `{arg}`, which is not known there"
            return f"the {where} passes a value not known there" + (
                f" ({rest})" if rest else "")
        if src.startswith("**"):
            return f"given by {src}{dep_txt or ' as an unknown value'}"
        if src == "autotune config":
            return f"from an autotune configuration{dep_txt}"
        if src in ("default", "module constant", "assignment"):
            expr = self.env.exprs.get(n)
            what = {"default": "default", "module constant": "module constant",
                    "assignment": "assigned"}[src]
            text = _text(expr) if expr is not None else ""
            reason = _why_text(self.env, expr)
            return f"{what} `{text}`" + (f": {reason}" if reason else "") if text else what
        hit = self.imports().get(n)
        if hit is not None:
            return f"imported from `{hit[0]}`; tilelint does not read other modules"
        for name, _expr in self.kernel.locals:
            if name == n:
                return "a size given to `T.const`/`T.dynamic`, known only from the tensors " \
                       "at call time"
        if dep_txt:
            return dep_txt[2:]
        return "not defined anywhere tilelint follows in this file"

    def call_arg(self, n: str) -> Optional[str]:
        """The text of the argument the instance's call gives parameter ``n``."""
        call = self.call
        if call is None:
            return None
        for k, a in call.kwargs:
            if k == n:
                return _text(a)
        names = [p.name for p in values.kernel_params(self.kernel)]
        if self.kernel.class_name is not None and names and names[0] in _NOT_VALUES:
            names = names[1:]
        if n in names and names.index(n) < len(call.args):
            return _text(call.args[names.index(n)])
        return None

    def call_note(self, n: str, owner: Optional[str] = None) -> str:
        k = self.kernel
        if owner is not None and owner != (k.factory or k.name):
            # A parameter of another level (a jit function returned by the
            # factory): its calls are not followed.
            mine = [c for c in getattr(self.module, "call_sites", ())
                    if c.func == owner or c.func.endswith("." + owner)]
            if not mine:
                return "no call site in this file"
            return (f"its call at line {mine[0].span.line} is not followed (only calls of "
                    f"`{k.factory or k.name}` are)")
        calls = values.call_sites_for(self.module, self.kernel)
        if not calls:
            return "no call site in this file"
        call = self.call if self.call is not None else calls[0]
        if call.star_kwargs:
            star = ", ".join(f"**{_text(s)}" for s in call.star_kwargs)
            return f"the call at line {call.span.line} passes it in {star}, which is not known"
        return f"not passed by the call at line {call.span.line}"

    def local_why(self, n: str) -> str:
        expr = self.env.exprs.get(n)
        text = _text(expr) if expr is not None else ""
        obj = self.object_why("self", "self")
        return (f"assigned `{text}`; " if text else "") + obj

    def object_why(self, root: str, text: str) -> str:
        if root in _NOT_VALUES:
            cls = self.kernel.class_name
            if cls is None:
                return f"`{root}` is an object tilelint does not build"
            if isinstance(self.env.values.get(root), values.Symbolic):
                return f"`{root}` is a `{cls}` object, which tilelint does not build " \
                       f"for a method's kernel"
            built = any(c.func == cls or c.func.endswith("." + cls)
                        for c in getattr(self.module, "call_sites", ()))
            if not built:
                return f"`{root}` is a `{cls}` object and this file never builds one"
            return f"`{cls}` gives it no value tilelint can compute"
        hit = self.imports().get(root)
        if hit is not None:
            return f"`{root}` is imported from `{hit[0]}`; tilelint does not read other modules"
        return f"`{root}` is not known: {self.why(root)}"


def _chain(e: Expr) -> Tuple[Optional[str], str]:
    """The root name of an attribute/item chain (``self.cfg["k"]`` → self) and
    its text."""
    from .model import Attr, Const, Name, Subscript
    if isinstance(e, Name):
        return e.id, e.id
    if isinstance(e, Attr):
        root, text = _chain(e.base)
        return root, f"{text}.{e.attr}"
    if isinstance(e, Subscript):
        root, text = _chain(e.value)
        idx = repr(e.index.value) if isinstance(e.index, Const) else "…"
        return root, f"{text}[{idx}]"
    return None, _text(e)


def _text(e: Expr) -> str:
    """Source-like text of a model expression (items and attributes included)."""
    from .model import Attr, Call, Const, Name, Subscript, TupleExpr
    try:
        if isinstance(e, Subscript):
            return f"{_text(e.value)}[{_text(e.index)}]"
        if isinstance(e, Attr):
            return f"{_text(e.base)}.{e.attr}"
        if isinstance(e, Call) and not e.func.startswith("<"):
            args = [_text(a) for a in e.args] + [f"{k}={_text(v)}" for k, v in e.kwargs]
            return f"{e.func}({', '.join(args)})"
        if isinstance(e, TupleExpr):
            inner = ", ".join(_text(x) for x in e.items)
            return f"[{inner}]" if e.is_list else f"({inner})"
        if isinstance(e, (Name, Const)):
            return values.expr_text(e)
    except RecursionError:  # pragma: no cover
        return "…"
    return values.expr_text(e)


def _why_text(env: values.Env, expr: Optional[Expr]) -> str:
    """What stops ``expr`` (the ``why`` of the resolver, said for a person)."""
    if expr is None:
        return ""
    try:
        env.compute(expr)
        return ""
    except values.Unknown as exc:
        why = exc.why
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    if why.startswith("call "):
        return f"a call of `{why[5:]}` tilelint does not follow"
    if why.startswith("attribute "):
        return f"attribute `.{why[10:]}` of an object"
    if why == "subscript":
        return "an item tilelint cannot look up"
    if why == "cyclic definition":
        return "computed from its own earlier value, which tilelint could not compute"
    return why


_IMPORT_FROM = re.compile(r"^[ \t]*from[ \t]+(?P<mod>[\w.]+)[ \t]+import[ \t]+"
                          r"(?P<names>\([^)]*\)|[^\n#;]*)", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+(?P<names>[^\n#;]*)", re.MULTILINE)


def imported_names(source: str) -> Dict[str, Tuple[str, bool]]:
    """name → (module it comes from, whether the name is that module itself)."""
    out: Dict[str, Tuple[str, bool]] = {}
    if "import" not in source:
        return out
    for m in _IMPORT_FROM.finditer(source):
        for part in m.group("names").strip("()").replace("\\", " ").split(","):
            words = part.split()
            if not words or words[0] == "*":
                continue
            local = words[2] if len(words) == 3 and words[1] == "as" else words[0]
            out.setdefault(local, (m.group("mod"), False))
    for m in _IMPORT.finditer(source):
        for part in m.group("names").split(","):
            words = part.split()
            if not words:
                continue
            if len(words) == 3 and words[1] == "as":
                out.setdefault(words[2], (words[0], True))
            else:
                out.setdefault(words[0].split(".")[0], (words[0], True))
    return out


def unresolved_diagnostic(module: Module, kernel: Kernel,
                          per_instance: Sequence[Tuple[str, Dict[str, Unresolved]]],
                          source: Optional[str] = None) -> List[Diagnostic]:
    """TL002: one per kernel, naming every unknown value of every instance
    analysed, sorted, each with why it is unknown, and the names a
    ``# tilelint: bind`` comment can give (never ``self``/``cls``)."""
    found: Dict[str, Unresolved] = {}
    labels: List[str] = []
    for label, unknown in per_instance:
        if unknown:
            labels.append(label)
        for name, u in unknown.items():
            found.setdefault(name, u)
    if not found:
        return []
    items = [found[n] for n in sorted(found)]
    what = ", ".join(f"`{u.name}`" + (f" ({u.why})" if u.why else "") for u in items)
    one = len(items) == 1
    msg = (f"{what} {'stays' if one else 'stay'} symbolic in `{kernel.name}`, so "
           f"shared-memory bytes or the schedule cannot be computed")
    binds = sorted({u.bind for u in items if u.bind is not None})
    # No quick fix: the values are what is unknown, and a fix must clear the
    # diagnostic it is offered for (a template with blanks would not).
    if binds:
        example = " ".join(f"{n}=…" for n in binds)
        via = [u for u in items if u.bind is not None and u.bind != u.name]
        msg += (f"; bind {'it' if len(binds) == 1 else 'them'} with `# tilelint: bind {example}` "
                f"above the kernel or under [tool.tilelint.bindings]")
        if via:
            msg += " (" + ", ".join(f"`{u.name}` through `{u.bind}`" for u in via) + ")"
    stuck = [u.name for u in items if u.bind is None]
    if stuck:
        msg += ("; " + ", ".join(f"`{n}`" for n in stuck)
                + (" is" if len(stuck) == 1 else " are")
                + " read from an object or a module, which `# tilelint: bind` cannot give")
    configs: Tuple[str, ...] = ()
    if len(per_instance) > 1 and len(labels) < len(per_instance):
        configs = tuple(labels)
    return [Diagnostic(code="TL002", severity="information", span=kernel.name_span,
                       kernel=kernel.name, message=msg, configs=configs)]


_FACTS: Dict[int, Tuple[str, Tuple[Dict[int, Tuple[int, int]], Dict[Tuple[str, int], str]]]] = {}


def _source_facts(source: str) -> Tuple[Dict[int, Tuple[int, int]],
                                        Dict[Tuple[str, int], str]]:
    """From CPython's parser (nothing when the file does not parse): def line →
    (first line of its decorators or the def line, its column); (parameter,
    line) → the function it belongs to, at every nesting level (the frontend's
    function list has the top-level and class-level ones only)."""
    import ast
    key = hash(source)
    hit = _FACTS.get(key)
    if hit is not None and hit[0] == source:
        return hit[1]
    starts: Dict[int, Tuple[int, int]] = {}
    owners: Dict[Tuple[str, int], str] = {}
    # The frontend's tree of the same text when it just parsed it (check).
    tree = frontend.ast_tree(frontend.normalise_newlines(source)) if source else None
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                starts[node.lineno] = (first, node.col_offset)
                a = node.args
                for arg in (list(getattr(a, "posonlyargs", [])) + list(a.args)
                            + list(a.kwonlyargs) + [x for x in (a.vararg, a.kwarg) if x]):
                    owners.setdefault((arg.arg, arg.lineno), node.name)
    if len(_FACTS) > 8:
        _FACTS.clear()
    _FACTS[key] = (source, (starts, owners))
    return starts, owners


def unresolved_diagnostics(kernel: Kernel, env: values.Env,
                           module: Optional[Module] = None,
                           source: Optional[str] = None) -> List[Diagnostic]:
    """TL002 for one environment of ``kernel``."""
    found = unresolved_values(module or Module(), kernel, env, source)
    return unresolved_diagnostic(module or Module(), kernel, [("", found)], source)


# --------------------------------------------------------------------------
# Suppressions and rule selection
# --------------------------------------------------------------------------

_FILE_NOQA = re.compile(r"^#\s*tilelint:\s*noqa\b", re.IGNORECASE | re.MULTILINE)

# Codes that only appear when selected explicitly.
OFF_BY_DEFAULT = ("TL900",)


def noqa_map(source: str) -> Dict[int, Optional[Tuple[str, ...]]]:
    """line → codes suppressed there (None: every code)."""
    out: Dict[int, Optional[Tuple[str, ...]]] = {}
    if "noqa" not in source.lower():
        return out
    for i, line in enumerate(_plain_lines(source), start=1):
        if "#" not in line:
            continue
        m = NOQA.search(line)
        if m is None:
            continue
        codes = m.group("codes")
        out[i] = None if codes is None else tuple(
            c.strip().upper() for c in codes.split(","))
    return out


def _plain_lines(source: str) -> List[str]:
    return [ln.rstrip("\r\n") for ln in frontend.source_lines(source)]


def selected(code: str, settings: Settings) -> bool:
    if settings.select:
        ok = any(code.startswith(p) for p in settings.select)
    else:
        ok = code not in OFF_BY_DEFAULT
    if any(code.startswith(p) for p in settings.ignore):
        ok = False
    return ok


def filter_diagnostics(diags: Sequence[Diagnostic], source: str,
                       settings: Settings) -> List[Diagnostic]:
    if _FILE_NOQA.search(source or ""):
        return [d for d in diags if d.code == "TL001" and selected(d.code, settings)]
    noqa = noqa_map(source or "")
    used: Dict[int, Set[str]] = {}
    out: List[Diagnostic] = []
    for d in diags:
        if not selected(d.code, settings):
            continue
        codes = noqa.get(d.span.line, ()) if d.span.line in noqa else ()
        if d.span.line in noqa and (codes is None or d.code in codes):
            used.setdefault(d.span.line, set()).add(d.code)
            continue
        out.append(d)
    if selected("TL900", settings):
        lines = _plain_lines(source or "")
        for line, codes in noqa.items():
            hit = used.get(line, set())
            unused = [c for c in (codes or ()) if c not in hit] if codes else []
            if codes is None and not hit:
                unused = ["(all)"]
            if unused:
                text = lines[line - 1]
                col = text.lower().find("# noqa") if "# noqa" in text.lower() else text.find("#")
                out.append(Diagnostic(
                    code="TL900", severity="hint",
                    span=Span(line, max(col, 0), line, len(text)),
                    message="unused `noqa` directive" + (
                        f" (nothing to suppress for {', '.join(unused)})"
                        if unused != ["(all)"] else "")))
    out.sort(key=lambda d: (d.span.line, d.span.col, d.code))
    return out
