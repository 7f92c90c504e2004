"""The pass pipeline: run the mirrored passes over every kernel of a file.

The order follows tilelang's own lowering (``tilelang/cuda/pipeline.py``):
warp specialization is decided first (sm_90), then PipelinePlanning and
InjectSoftwarePipeline's validation and versioning, then
MergeSharedMemoryAllocations, then sync insertion.  ``analyze()`` is the one
entry point the CLI and the language server share.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from . import frontend, values
from .model import (
    Alloc, Analysis, Diagnostic, Kernel, KernelResult, Loop, LoopResult, Module,
    Settings, Span, Stmt,
)
from . import targets as targets_mod


def analyze(source: str, path: str = "<stdin>", settings: Optional[Settings] = None,
            module: Optional[Module] = None) -> Analysis:
    """Analyse one file's text.  Never raises on bad input."""
    settings = settings or Settings()
    target = targets_mod.normalise(settings.target)
    if module is None:
        module = frontend.parse_module(source)
    diagnostics: List[Diagnostic] = list(module.problems)
    results: List[KernelResult] = []
    for kernel in module.kernels:
        try:
            krs, kdiags = analyze_kernel(module, kernel, target, settings, source)
        except Exception as exc:  # a bug of ours must not take the editor down
            krs = [KernelResult(kernel=kernel)]
            kdiags = [Diagnostic(
                code="TL000", severity="error", span=kernel.name_span, kernel=kernel.name,
                message=f"tilelint internal error while analysing `{kernel.name}`: "
                        f"{type(exc).__name__}: {exc}. Please report this.")]
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


# --------------------------------------------------------------------------
# One kernel
# --------------------------------------------------------------------------


def kernel_overrides(kernel: Kernel, settings: Settings) -> Dict[str, object]:
    out: Dict[str, object] = dict(settings.bindings)
    for name, pairs in settings.kernel_bindings:
        if name in (kernel.name, kernel.factory):
            out.update(dict(pairs))
    return out


def pipelined_loops(stmts: Sequence[Stmt]) -> Iterator[Loop]:
    """Every ``T.Pipelined`` loop of a body, outer before inner, in source order."""
    for st in stmts:
        if st.loop is not None and st.loop.kind == "pipelined":
            yield st.loop
        yield from pipelined_loops(st.children)


def analyze_kernel(module: Module, kernel: Kernel, target: str, settings: Settings,
                   source: Optional[str] = None) -> Tuple[List[KernelResult], List[Diagnostic]]:
    from . import packing, planning, rules, sync_ascend, sync_cuda, versions

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
    for inst in insts:
        env = inst.env
        # Loops whose conditional iterator takes its serial arm here are plain
        # loops for every pass (planning, warp specialization, packing, sync).
        kernel = active_view(base_kernel, env)
        allocs: Dict[str, Alloc] = {a.name: a for a in kernel.allocs}
        tinfo = targets_mod.get(target)
        ws_mode = "none"
        ws_loop = None
        if tinfo is not None and tinfo.kind == "cuda":
            ws_mode = planning.warp_specialization_mode(kernel, env, target, allocs)
            if ws_mode == "applied":
                ws_loop = planning.warp_specialized_loop(kernel, env, target, allocs)
        ws = ws_loop is not None
        loop_results: List[LoopResult] = []
        kdiags: List[Diagnostic] = []
        for loop in pipelined_loops(kernel.body):
            lr, ld = planning.plan_loop(loop, env, target, allocs, loop is ws_loop,
                                        ws_fallback=ws_mode == "fallback")
            if lr.pipelined:
                lr = _replace(lr, versions=versions.compute_versions(lr, allocs, env))
            loop_results.append(lr)
            kdiags.extend(ld)
            kdiags.extend(rules.validate_loop(lr, allocs, target, env, source))
        if ws_mode == "fallback":
            kdiags.extend(_ws_fallback(kernel, loop_results, env))
        pack = None
        ksync = None
        threads = None
        if tinfo is not None and tinfo.kind == "cuda" and kernel.dialect == "cuda":
            pack = packing.pack_kernel(kernel, env, loop_results, target, ws)
            ksync, lsyncs = sync_cuda.kernel_sync(kernel, env, loop_results, target, ws)
            if _sync_not_modelled(kernel):
                ksync, lsyncs = None, [None] * len(loop_results)
            loop_results = [_replace(lr, sync=s) for lr, s in zip(loop_results, lsyncs)]
            threads = sync_cuda.threads(kernel, env, ws)
            kdiags.extend(packing.overflow_diagnostics(kernel, env, loop_results, pack, target, ws))
        else:
            threads = env.eval_int(kernel.threads)
        ascend = None
        if tinfo is not None and tinfo.kind == "ascend" and kernel.dialect == "ascend":
            ascend, adiags = sync_ascend.analyze_ascend(
                kernel, env, list(pipelined_loops(kernel.body)))
            kdiags.extend(adiags)
        kdiags.extend(unresolved_diagnostics(kernel, env))
        results.append(KernelResult(
            kernel=base_kernel,
            bindings=inst.bindings,
            unresolved=tuple(sorted(_unresolved_names(kernel, env))),
            threads=threads,
            warp_specialized=ws,
            shared_bytes=None if pack is None else pack.arena_bytes,
            shared_budget=None if tinfo is None else tinfo.smem_budget,
            no_reuse_bytes=None if pack is None else pack.no_reuse_bytes,
            buffers=() if pack is None else tuple(pack.buffers),
            loops=tuple(loop_results),
            sync=ksync,
            ascend=ascend,
            config_label=inst.label,
        ))
        for d in kdiags:
            key = (d.code, d.span.line, d.span.col, d.message)
            if key not in merged:
                merged[key] = (d, [])
            labels = merged[key][1]
            if inst.label not in labels:
                labels.append(inst.label)
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


def active_view(kernel: Kernel, env: values.Env) -> Kernel:
    """``kernel`` with every pipelined loop whose condition is false in ``env``
    turned into the serial loop the compiler sees (the same object when there
    is none)."""
    if not any(lp.condition is not None and not loop_active(lp, env)
               for lp in pipelined_loops(kernel.body)):
        return kernel
    import dataclasses

    def fix(stmts: Sequence[Stmt]) -> Tuple[Stmt, ...]:
        out = []
        for st in stmts:
            children = fix(st.children) if st.children else st.children
            loop = st.loop
            kind = st.kind
            if loop is not None:
                loop = dataclasses.replace(loop, body=children)
                if loop.kind == "pipelined" and not loop_active(loop, env):
                    loop = dataclasses.replace(loop, kind="serial", num_stages=None,
                                               num_stages_span=None, order=None, stage=None,
                                               condition=None)
                    kind = "serial"
            if children is st.children and loop is st.loop:
                out.append(st)
            else:
                out.append(dataclasses.replace(st, kind=kind, children=children, loop=loop))
        return tuple(out)

    return dataclasses.replace(kernel, body=fix(kernel.body))


def loop_active(loop: Loop, env: values.Env) -> bool:
    """False when the loop's iterator is a conditional (``T.Pipelined(...) if c
    else T.serial(...)``, directly or through a helper) whose pipelined arm is
    known not to be taken in this binding."""
    if loop.condition is None:
        return True
    c = env.evaluate(loop.condition)
    return c is None or bool(c)


def _ws_fallback(kernel: Kernel, loops: Sequence[LoopResult],
                 env: values.Env) -> List[Diagnostic]:
    """TL113: sm_90's warp-specialization pass claimed the kernel but could not
    split its first num_stages loop, and dropped num_stages everywhere."""
    staged = [lr for lr in loops if lr.loop.num_stages is not None
              and (env.eval_int(lr.loop.num_stages) or 1) >= 1]
    if not staged:
        return []
    first = staged[0].loop
    span = first.num_stages_span or first.iter_span
    return [Diagnostic(
        code="TL113", severity="warning", span=span, kernel=kernel.name,
        message=("on sm_90 the warp-specialization pass takes this kernel (it has TMA-"
                 "eligible copies) but cannot split this loop into producer and consumer: "
                 "no global-to-shared copy sits at the top level of its body. The compiler "
                 f"then drops num_stages from all {len(staged)} pipelined loop(s) of "
                 f"`{kernel.name}`, so none is software-pipelined"))]


def _replace(obj, **changes):
    import dataclasses
    return dataclasses.replace(obj, **changes)


# --------------------------------------------------------------------------
# TL002: what stays symbolic
# --------------------------------------------------------------------------


def _relevant_exprs(kernel: Kernel):
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
    names: Set[str] = set()
    for e in _relevant_exprs(kernel):
        names |= env.missing(e)
    return names


def unresolved_diagnostics(kernel: Kernel, env: values.Env) -> List[Diagnostic]:
    names = sorted(n for n in _unresolved_names(kernel, env) if n != "<symbolic>")
    if not names:
        return []
    example = " ".join(f"{n}=…" for n in names)
    what = ", ".join(f"`{n}`" for n in names)
    return [Diagnostic(
        code="TL002", severity="information", span=kernel.name_span, kernel=kernel.name,
        message=(f"{what} {'stays' if len(names) == 1 else 'stay'} symbolic in `{kernel.name}`, "
                 f"so shared-memory bytes or the schedule cannot be computed; bind "
                 f"{'it' if len(names) == 1 else 'them'} with `# tilelint: bind {example}` "
                 f"above the kernel or under [tool.tilelint.bindings]"))]


# --------------------------------------------------------------------------
# Suppressions and rule selection
# --------------------------------------------------------------------------

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)
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
        m = _NOQA.search(line)
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
