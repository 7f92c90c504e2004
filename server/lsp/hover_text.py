"""Markdown for hovers.  Pure functions of analysis results (no LSP types)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from .lazy import model, render

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.model import (
        Alloc,
        BufferInfo,
        KernelResult,
        LoopResult,
        ScheduledStmt,
        Stmt,
    )


def _fence(text: str, lang: str = "text") -> str:
    return f"```{lang}\n{text.rstrip()}\n```"


def _config_note(kr: KernelResult) -> str:
    if kr.config_label and kr.config_label != "defaults":
        return f"\n\n_values from {kr.config_label}_"
    return ""


def _versions(lr: LoopResult) -> Dict[str, int]:
    return {v.buffer: v.versions for v in lr.versions}


def _sync_parts(s) -> str:
    parts = [f"`__syncthreads()` ×{s.syncthreads}"]
    if s.cp_async_commit:
        parts.append(f"`cp.async` commit ×{s.cp_async_commit}")
    if s.cp_async_wait:
        parts.append("`cp.async.wait_group` " + ", ".join(str(n) for n in s.cp_async_wait))
    if s.mbarrier_wait:
        parts.append(f"mbarrier waits ×{s.mbarrier_wait}")
    return ", ".join(parts)


def sync_summary(lr: LoopResult) -> str:
    """The loop's sync per iteration of the generated loop, then what the unrolled
    prologue and epilogue around it execute once each."""
    s = lr.sync
    if s is None:
        return ""
    out = "sync per iteration: " + _sync_parts(s)
    for what, region in (("prologue", lr.prologue_sync), ("epilogue", lr.epilogue_sync)):
        if region is not None:
            out += f"; {what}: " + _sync_parts(region)
    return out


def sync_preview(kr: "KernelResult", lr: "LoopResult", target: str = "sm_80") -> Optional[str]:
    """The emitted sync code for the loop (``sync_cuda.render_preview``)."""
    if not lr.pipelined or kr.kernel.dialect != "cuda":
        return None
    try:
        from tilelint.analysis import sync_cuda
        text = sync_cuda.render_preview(kr.kernel, lr, target=target)
    except Exception:
        return None
    return str(text) if text else None


def ascend_loop_hover(kr: "KernelResult", lr: "LoopResult") -> str:
    """An Ascend loop: the auto-scheduler's task order, versions, flags and
    the Ascend C sync the compiler emits."""
    asc = kr.ascend
    assert asc is not None  # loop_hover calls this only with an Ascend result
    loop = lr.loop
    out: List[str] = [f"**`T.Pipelined` loop over `{loop.var}` (Ascend)**"
                      + (f" — num_stages = {lr.num_stages}" if lr.num_stages is not None else "")]
    if asc.statements:
        out.append(render.ascend_schedule_title(asc))
        out.append(render.markdown_table(render.ASCEND_SCHEDULE_HEADER,
                                         render.ascend_schedule_rows(asc)))
    if asc.versions:
        out.append("Buffer versions: " + ", ".join(f"`{b}` ×{n}" for b, n in asc.versions)
                   + ("" if asc.versions_exact else
                      " (not all fixed: the scheduler picks the rest, at most num_stages)"))
    if asc.hard_events:
        out.append("Flags per hard event: " + ", ".join(
            f"`{ev}` {n}" + (" **spilled to locks**" if sp else "")
            for ev, n, sp in asc.hard_events)
            + f"; cross-core slots {asc.cross_core_slots} of 16; mutex ids {asc.mutex_ids} of 32")
    if asc.preview:
        out.append("Emitted sync (preview):\n\n" + _fence(asc.preview, "cpp"))
    return "\n\n".join(out) + _config_note(kr)


def loop_hover(kr: "KernelResult", lr: "LoopResult", target: str = "sm_80") -> str:
    out: List[str] = []
    loop = lr.loop
    if kr.ascend is not None and kr.kernel.dialect == "ascend":
        if kr.ascend.loop_line == loop.span.line and \
                (kr.ascend.statements or kr.ascend.hard_events):
            return ascend_loop_hover(kr, lr)
        why = (f"tilelint follows the first pipelined loop of an Ascend kernel "
               f"(line {kr.ascend.loop_line})" if kr.ascend.loop_line is not None
               else "no tile operation of this kernel maps to an Ascend pipe")
        return (f"**`T.Pipelined` loop over `{loop.var}` (Ascend)**\n\nNot modelled: {why}."
                + _config_note(kr))
    if not lr.pipelined:
        out.append(f"**`T.Pipelined` loop over `{loop.var}`: not pipelined**")
        if lr.note:
            out.append(lr.note)
        return "\n\n".join(out) + _config_note(kr)
    head = f"**`T.Pipelined` loop over `{loop.var}`**"
    facts = []
    if lr.num_stages is not None:
        facts.append(f"num_stages = {lr.num_stages}")
    if lr.depth is not None:
        facts.append(f"pipeline depth {lr.depth}")
    if lr.manual:
        facts.append("manual order/stage")
    if lr.warp_specialized or kr.warp_specialized:
        facts.append("warp-specialized")
    out.append(head + (" — " + ", ".join(facts) if facts else ""))
    rows = render.schedule_rows(lr)
    if rows:
        out.append("Modulo schedule (rows: phases, columns: statements in issue order):")
        out.append(render.markdown_table(render.schedule_header(lr), rows))
    if lr.excluded_binds:
        out.append("Replayed in every phase (not scheduled): "
                   + ", ".join(f"`{b.label}`" for b in lr.excluded_binds))
    if lr.versions:
        out.append("Buffer versions: " + ", ".join(
            f"`{v.buffer}` ×{v.versions}" + (" (tightened)" if v.tightened else "")
            for v in lr.versions))
    summary = sync_summary(lr)
    if summary:
        out.append(summary)
    preview = sync_preview(kr, lr, target)
    if preview:
        out.append("Emitted sync (preview):\n\n" + _fence(preview, "cuda"))
    if lr.note:
        out.append(f"_{lr.note}_")
    return "\n\n".join(out) + _config_note(kr)


def _accesses(stmt: Stmt, which: str, versions: Dict[str, int]) -> str:
    accs = stmt.reads if which == "reads" else stmt.writes
    names = list(dict.fromkeys(a.buffer for a in accs))
    if not names:
        return "—"
    return ", ".join(f"`{n}`" + (f" ({versions[n]} versions)" if versions.get(n, 1) > 1 else "")
                     for n in names)


def statement_hover(kr: "KernelResult", lr: "LoopResult", ss: "ScheduledStmt",
                    target: str = "sm_80") -> str:
    versions = _versions(lr)
    out = [f"**`{ss.stmt.label or ss.stmt.op}`** in the pipelined loop over `{lr.loop.var}`"]
    out.append(f"stage **{int_text(ss.stage)}** · order **{int_text(ss.order)}**"
               + (f" (of {len(lr.statements)} scheduled statements)" if lr.statements else ""))
    out.append(f"reads: {_accesses(ss.stmt, 'reads', versions)}  \n"
               f"writes: {_accesses(ss.stmt, 'writes', versions)}")
    if ss.stage is not None and lr.statements:
        max_stage = max((s.stage for s in lr.statements if s.stage is not None), default=0)
        if max_stage:
            ahead = max_stage - ss.stage
            out.append(f"runs {ahead} iteration{'s' if ahead != 1 else ''} ahead of the last stage"
                       if ahead else "runs in the last stage (consumes what earlier stages produced)")
    summary = sync_summary(lr)
    if summary:
        out.append(summary)
    preview = sync_preview(kr, lr, target)
    if preview:
        out.append(_fence(preview, "cuda"))
    return "\n\n".join(out) + _config_note(kr)


def buffer_hover(kr: KernelResult, alloc: Optional[Alloc], info: Optional[BufferInfo]) -> str:
    name = info.name if info is not None else (alloc.name if alloc is not None else "?")
    out: List[str] = []
    if info is not None:
        shape = " × ".join(str(x) for x in info.shape) or "scalar"
        line = f"**`{name}`** `{info.scope}`: {shape} × {info.dtype}"
        if info.versions and info.versions > 1:
            line += f" × {info.versions} versions"
        if info.bytes is not None:
            line += f" = {info.bytes} bytes ({render.kib(info.bytes)})"
        out.append(line)
        if info.offset is not None:
            if info.scope == "shared":
                out.append(f"static offset **{info.offset}** of {kr.shared_static_bytes} bytes "
                           f"of static `__shared__` memory")
            else:
                out.append(f"arena offset **{info.offset}**"
                           + (f" of the {kr.shared_bytes} bytes ({render.kib(kr.shared_bytes)})"
                              f" dynamic arena" if kr.shared_bytes else ""))
        if kr.shared_total is not None:
            out.append(f"shared memory per block: {render.shared_text(kr, 'bytes')}")
        arena = render.arena_map(kr)
        if arena:
            out.append("Shared-memory arena:\n\n" + _fence(arena))
    elif alloc is not None:
        shape = " × ".join(model.expr_text(e) for e in alloc.shape)
        out.append(f"**`{name}`** `{alloc.scope}`: {shape} × {model.expr_text(alloc.dtype)}")
        if alloc.scope.startswith("shared"):
            names = ", ".join(f"`{n}`" for n in kr.unresolved)
            out.append(f"_size unknown: {names} {'stays' if len(kr.unresolved) == 1 else 'stay'}"
                       f" symbolic (TL002)_" if names else
                       "_size unknown: some values stay symbolic_")
        else:
            out.append("_not in the shared-memory arena_")
    return "\n\n".join(out) + _config_note(kr)


def whatif_hover(lr: LoopResult, rows: Sequence[Tuple[int, Dict[str, object]]],
                 budget: Optional[int]) -> str:
    """``rows``: (num_stages, {"stage": [...], "order": [...], "versions": str,
    "bytes": int|None, "sync": str, "note": str})."""
    out = [f"**`num_stages`** = {lr.num_stages if lr.num_stages is not None else '?'}"
           + (f" (pipeline depth {lr.depth})" if lr.depth is not None else "")]
    header = ["num_stages", "stage", "order", "versions", "shared memory", "fits",
              "sync per iteration"]
    table = []
    for ns, r in rows:
        b = r.get("bytes")
        fits = "—" if not isinstance(b, int) or not budget else ("yes" if b <= budget else "**no**")
        mark = " ◀" if ns == lr.num_stages else ""
        table.append([f"{ns}{mark}", str(r.get("stage", "—")), str(r.get("order", "—")),
                      str(r.get("versions", "—")),
                      "?" if b is None else f"{b} ({render.kib(b)})", fits,
                      str(r.get("sync", "—"))])
    if table:
        out.append("What if (same kernel, other `num_stages`):")
        out.append(render.markdown_table(header, table))
    if budget:
        out.append(f"_shared-memory budget of the target: {budget} bytes ({render.kib(budget)})_")
    return "\n\n".join(out)


def int_text(x: Optional[int]) -> str:
    return "?" if x is None else str(x)


def compiler_sync(sc, compiler: str) -> str:
    """The real sync code the compiler emitted around a loop (verify on save)."""
    where = "" if sc.scope == "loop" else " (whole kernel: the loop was not located)"
    return (f"**Compiler output ({compiler}, verified on save)**{where}:\n\n"
            + _fence(sc.code, "cuda"))


def binding_footer(kr: "KernelResult", labels: Sequence[str], chosen: Optional[str],
                   all_bindings: bool = False) -> Optional[str]:
    """``configuration in use`` and the other instantiations of the kernel."""
    if len(labels) < 2:
        return None
    current = kr.config_label or labels[0]
    if chosen is not None and chosen not in labels:
        how = f" (`tilelint.binding` asks for `{chosen}`, which this kernel does not have)"
    elif chosen is not None and chosen == current:
        how = " (picked by `tilelint.binding`)"
    elif all_bindings:
        how = " (first of every instantiation analysed)"
    else:
        how = " (the default instantiation)"
    others = [lb for lb in labels if lb != current]
    out = f"Configuration: `{current}`{how}"
    if others:
        out += "  \nOther configurations (set `tilelint.binding` to one): " + ", ".join(
            f"`{lb}`" for lb in others)
    return out
