"""Markdown for hovers.  Pure functions of analysis results (no LSP types)."""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from .lazy import model, render

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.model import (
        Alloc,
        AscendLoop,
        Branch,
        BufferInfo,
        Kernel,
        KernelResult,
        LoopResult,
        ScheduledStmt,
        Span,
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
            out += f"  \n{what}: " + _sync_parts(region)
    return out


def sync_preview(kr: "KernelResult", lr: "LoopResult", target: str = "sm_80") -> Optional[str]:
    """The emitted sync code for the loop (``sync_cuda.render_preview``)."""
    return render.cuda_preview(kr, lr, target) or None


# --------------------------------------------------------------------------
# Width: every line a reader sees is at most WIDTH characters
# --------------------------------------------------------------------------

WIDTH = 100  # hover_view.WIDTH (the summary line is fitted there)
_REF_DEF = re.compile(r"^\[[^\]]+\]: \S+$")


def visible_width(line: str) -> int:
    """The characters of a hover line a reader sees: a link shows its text,
    a link reference definition (``[L12]: file:///…#L12``) shows nothing."""
    if _REF_DEF.match(line):
        return 0
    return len(re.sub(r"\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])", r"\1", line))


def fit(md: str, width: int = WIDTH) -> str:
    """Prose wrapped at ``width`` (a line break inside a paragraph is a soft
    break in Markdown), code lines cut with an ellipsis.  Tables are built to
    fit by their makers."""
    out: List[str] = []
    fenced = False
    for line in md.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append(line)
        elif visible_width(line) <= width or line.startswith("|"):
            out.append(line)
        elif fenced:
            out.append(line[: width - 1] + "…")
        else:
            hard = line.endswith("  ")
            indent = "  " if line.startswith("- ") else ""
            parts = textwrap.wrap(line, width - (2 if hard else 0), subsequent_indent=indent,
                                  break_long_words=False, break_on_hyphens=False)
            if hard and parts:
                parts[-1] += "  "
            out.extend(parts or [line])
    return "\n".join(out)


def _ref(uri: Optional[str], line: int, text: Optional[str] = None) -> str:
    """``line`` as a link to the source (a reference-style link: the target is
    defined once at the end of the hover, see ``_ref_defs``)."""
    shown = text if text is not None else str(line)
    return f"[{shown}][L{line}]" if uri else shown


def _ref_defs(md: str, uri: Optional[str]) -> str:
    if not uri:
        return md
    lines = sorted({int(n) for n in re.findall(r"\]\[L(\d+)\]", md)})
    if not lines:
        return md
    return md + "\n\n" + "\n".join(f"[L{n}]: {uri}#L{n}" for n in lines)


def ascend_loop_hover(kr: "KernelResult", lr: "LoopResult", path: Optional[str] = None,
                      later: Optional[AscendLoop] = None) -> str:
    """An Ascend loop: the auto-scheduler's task order, versions, flags and
    the Ascend C sync the compiler emits.  ``later``: a pipelined loop after
    the kernel's first one (its own schedule; versions, flags and the sync
    code are the kernel's, allocated across its loops)."""
    asc = kr.ascend
    assert asc is not None  # loop_hover calls this only with an Ascend result
    loop = lr.loop
    out: List[str] = [f"**`T.Pipelined` loop over `{loop.var}` (Ascend)**"
                      + (f" — num_stages = {lr.num_stages}" if lr.num_stages is not None else "")]
    if later is not None:
        out.append("loop " + render.ascend_loop_title(later))
        out.append(render.markdown_table(render.ASCEND_SCHEDULE_HEADER,
                                         render.ascend_loop_rows(later)))
        out.append("Versions, flags and sync below are the kernel's (flag ids are allocated "
                   "across its pipelined loops).")
    elif asc.statements:
        out.append(render.ascend_schedule_title(asc))
        out.append(render.markdown_table(render.ASCEND_SCHEDULE_HEADER,
                                         render.ascend_schedule_rows(asc)))
    if asc.versions:
        out.append("Buffer versions: " + ", ".join(f"`{b}` ×{n}" for b, n in asc.versions)
                   + ("" if asc.versions_exact else
                      " (not all fixed: the scheduler picks the rest, at most num_stages)"))
    if asc.hard_events:
        # two events a line, so that no entry is split over two lines
        # ids InsertSync gave the event → ids still in use after RewriteFlagToBuf
        events = [(f"`{ev}` {render.ascend_event_json(asc, ev, n, sp)['ids_before']} → {n}"
                   + " **spilled to locks**") if sp else f"`{ev}` {n}"
                  for ev, n, sp in asc.hard_events]
        out.append("Flags per hard event: " + ",  \n".join(
            ", ".join(events[i:i + 2]) for i in range(0, len(events), 2))
            + f"  \ncross-core slots {asc.cross_core_slots} of 16; mutex ids {asc.mutex_ids} of 32")
    if asc.preview:
        from tilelint.analysis import hover_view
        before, body, after = hover_view.steady_body(asc.preview)
        out.append("Emitted sync, the loop (preview):\n\n" + _fence(body, "cpp"))
        ends = [(what, hover_view.call_counts(code))
                for what, code in (("Before the loop", before), ("after it", after)) if code]
        if ends:
            where = f"`tilelint explain --target ascend {path}`" if path else \
                "`tilelint explain --target ascend`"
            out.append("; ".join(f"{what}: " + ", ".join(f"`{name}` ×{n}" for name, n in calls)
                                 for what, calls in ends if calls)
                       + f" (their code: {where})")
    return fit("\n\n".join(out) + _config_note(kr))


SCHEDULE_HEADER = ("line", "statement", "stage", "order", "prologue", "steady state", "epilogue")
# Warp-specialized: the producer warpgroup runs the copies ahead, mbarriers pace it.
WS_SCHEDULE_HEADER = ("line", "statement", "stage", "order", "warpgroup")
# The split as the sm_90 rewriter builds it (ws_view): each warpgroup's statements in
# its order, the mbarrier rings each one waits on first and signals.
WS_SPLIT_HEADER = ("line", "statement", "warpgroup", "issues", "waits on", "signals")


def ws_table(kr: "KernelResult", lr: "LoopResult", uri: Optional[str] = None) -> str:
    """The producer/consumer split, one row per statement ("" when ``lr`` is not
    the loop the rewriter splits)."""
    from tilelint.analysis import hover_view, ws_view
    v = ws_view.ws_view(kr, lr)
    if v is None:
        return ""
    rows = []
    for ss, role, how, before, after in ws_view.statement_rows(v):
        rows.append([_ref(uri, ss.stmt.span.line),
                     "`" + hover_view.cut(ss.stmt.label or ss.stmt.op, 24) + "`",
                     role, how or "", _ring_short(before), _ring_short(after)])
    return render.markdown_table(WS_SPLIT_HEADER, rows)


def _ring_short(text: str) -> str:
    """``empty mbarrier[4 + k % 2] (tx), empty mbarrier[6 + k % 2]`` → ``empty [4+k%2]
    [6+k%2]``; ``mbarrier[8] at k = 0`` → ``[8] (k=0)`` (the table's cells)."""
    text = re.sub(r"\[([^\]]*)\]", lambda m: "[" + m.group(1).replace(" ", "") + "]",
                  text.replace("mbarrier[", "["))
    text = re.sub(r" at (\w+) = 0", r" (\1=0)", text.replace(" (tx)", ""))
    out: List[str] = []
    kind = None
    for part in text.split(", "):
        word, _, rest = part.partition(" ")
        if word in ("full", "empty") and rest.startswith("["):
            out.append(rest if word == kind else part)
            kind = word
        else:
            out.append(part)
            kind = None
    return " ".join(out) if len(out) > 1 else text


def ws_details(kr: "KernelResult", lr: "LoopResult") -> List[str]:
    """Threads of each warpgroup, the mbarriers, their phases per stage and the
    code of both loops, as hover paragraphs ([] for any other loop)."""
    from tilelint.analysis import ws_view
    v = ws_view.ws_view(kr, lr)
    if v is None:
        return []
    out = [ws_view.threads_text(v) + "  \n" + ws_view.barriers_text(v)]
    rows = ws_view.phase_rows(v)
    header = (f"{'phase' if v.counter else v.var} mod {2 * v.num_stages}", "slot",
              "consumer waits full", "producer waits empty")
    out.append("Phases per stage (wait parity; the producer's is flipped, so its first pass "
               "does not block)" + (", counted by a phase counter (the loop is nested or "
               "guarded)" if v.counter else "") + ":\n\n" + render.markdown_table(header, rows))
    out.append("Both loops (sketch):\n\n" + _fence(ws_view.code(v), "cuda"))
    return out


def schedule_table(lr: "LoopResult", uri: Optional[str] = None,
                   kernel: Optional["Kernel"] = None) -> str:
    """The modulo schedule, one row per statement in issue order: its line,
    the statement (cut to fit), stage, order, and the iteration it runs in
    the prologue, one pass of the generated loop, and the epilogue."""
    from tilelint.analysis import hover_view

    def cells(st: "ScheduledStmt") -> List[str]:
        return [_ref(uri, st.stmt.span.line),
                "`" + hover_view.cut(st.stmt.label or st.stmt.op, 36) + "`",
                int_text(st.stage), int_text(st.order)]

    if kernel is not None and lr.warp_specialized:
        ws = sorted(lr.statements, key=lambda st: st.order if st.order is not None else -1)
        return render.markdown_table(WS_SCHEDULE_HEADER, [
            cells(st) + [_warpgroup(st, kernel)] for st in ws]) if ws else ""
    rows = [cells(r.stmt) + [r.prologue, r.steady, r.epilogue]
            for r in hover_view.schedule_rows(lr)]
    return render.markdown_table(SCHEDULE_HEADER, rows) if rows else ""


def _warpgroup(st: "ScheduledStmt", kernel: "Kernel") -> str:
    from tilelint.analysis import sync_cuda
    return "producer" if sync_cuda.is_async_copy(st.stmt, kernel) else "consumer"


def loop_hover(kr: "KernelResult", lr: "LoopResult", target: str = "sm_80",
               uri: Optional[str] = None, path: Optional[str] = None) -> str:
    """The hover on ``T.Pipelined``: a summary line, the schedule (a row per
    statement), the sync of one iteration and the steady-state code.
    ``uri`` makes line numbers links; ``path`` names the file in the
    ``tilelint explain`` hint."""
    from tilelint.analysis import hover_view
    out: List[str] = []
    loop = lr.loop
    if kr.ascend is not None and kr.kernel.dialect == "ascend":
        if kr.ascend.loop_line == loop.span.line and \
                (kr.ascend.statements or kr.ascend.hard_events):
            return ascend_loop_hover(kr, lr, path)
        later = next((lp for lp in kr.ascend.loops[1:]
                      if lp.line == loop.span.line and lp.statements), None)
        if later is not None:
            return ascend_loop_hover(kr, lr, path, later)
        why = (f"tilelint models the pipelined loops of the statement list that holds the "
               f"first one (line {kr.ascend.loop_line}), and this loop is not among them"
               if kr.ascend.loop_line is not None
               else "no tile operation of this kernel maps to an Ascend pipe")
        return fit(f"**`T.Pipelined` loop over `{loop.var}` (Ascend)**\n\nNot modelled: {why}."
                   + _config_note(kr))
    if not lr.pipelined:
        out.append(f"**`T.Pipelined` loop over `{loop.var}`: not pipelined**")
        if lr.note:
            out.append(lr.note)
        return fit("\n\n".join(out) + _config_note(kr))
    facts = []
    if lr.num_stages is not None:
        facts.append(f"num_stages = {lr.num_stages}")
    if lr.manual:
        facts.append("manual order/stage")
    if lr.warp_specialized or kr.warp_specialized:
        facts.append("warp-specialized")
    title = f"**`T.Pipelined` loop over `{loop.var}`**" + (" — " + ", ".join(facts)
                                                           if facts else "")
    out.append(title + "  \n" + " · ".join(hover_view.summary_parts(kr, lr)))
    split = ws_details(kr, lr)
    table = ws_table(kr, lr, uri) if split else schedule_table(lr, uri, kr.kernel)
    if table:
        out.append(table)
    if lr.excluded_binds:
        out.append("Replayed in every phase (not scheduled): "
                   + ", ".join(f"`{hover_view.cut(b.label, 40)}`" for b in lr.excluded_binds))
    tightened = [v.buffer for v in lr.versions if v.tightened]
    if tightened:
        out.append("One version fewer than the stage distance needs (tightened): "
                   + ", ".join(f"`{b}`" for b in tightened))
    summary = sync_summary(lr)
    if summary:
        out.append(summary)
    out.extend(split)
    preview = None if split else sync_preview(kr, lr, target)
    if preview:
        before, body, after = hover_view.steady_body(preview)
        out.append("Emitted sync, steady state (preview):\n\n" + _fence(body, "cuda"))
        if before or after:
            where = f"`tilelint explain {path}`" if path else "`tilelint explain`"
            out.append(f"Prologue and epilogue: the counts above; their code: {where}, "
                       f"or hover a statement of the loop.")
    if lr.note:
        out.append(f"_{lr.note}_")
    return _ref_defs(fit("\n\n".join(out) + _config_note(kr)), uri)


def _accesses(stmt: Stmt, which: str, versions: Dict[str, int]) -> str:
    accs = stmt.reads if which == "reads" else stmt.writes
    names = list(dict.fromkeys(a.buffer for a in accs))
    if not names:
        return "—"
    return ", ".join(f"`{n}`" + (f" ({versions[n]} versions)" if versions.get(n, 1) > 1 else "")
                     for n in names)


def _calls(sync: Sequence[str]) -> str:
    """Sync lines of the preview as inline code, without their comments."""
    return " ".join(f"`{s.split('  //')[0].rstrip(';')}`" for s in sync) if sync else "—"


_SECTION_NAMES = {"prologue": "prologue", "body": "steady state", "epilogue": "epilogue"}


def statement_hover(kr: "KernelResult", lr: "LoopResult", ss: "ScheduledStmt",
                    target: str = "sm_80", uri: Optional[str] = None) -> str:
    """A statement of a pipelined loop: stage, order, the buffers it reads and
    writes with their versions, and the sync calls right before and after it
    in the steady state (then in the prologue and epilogue steps)."""
    from tilelint.analysis import hover_view
    versions = _versions(lr)
    label = hover_view.cut(ss.stmt.label or ss.stmt.op, 72)
    out = [f"**`{label}`** — {_ref(uri, ss.stmt.span.line, f'line {ss.stmt.span.line}')}"]
    where = next((r for r in hover_view.schedule_rows(lr) if r.stmt is ss), None)
    from tilelint.analysis import ws_view
    view = ws_view.ws_view(kr, lr)
    where_loop = (f" the pipelined loop over `{lr.loop.var}` "
                  f"({_ref(uri, lr.loop.span.line, 'line ' + str(lr.loop.span.line))})")
    if view is not None:
        line = (f"**{view.role(ss)}** warpgroup of the warp-specialized loop over "
                f"`{lr.loop.var}` ({_ref(uri, lr.loop.span.line, 'line ' + str(lr.loop.span.line))}"
                f", {view.num_stages} stage{'s' if view.num_stages != 1 else ''})")
    else:
        line = (f"stage **{int_text(ss.stage)}** · order **{int_text(ss.order)}**"
                + (f" of {len(lr.statements)}" if lr.statements else "") + " in" + where_loop)
    out.append(line)
    if where is not None and not lr.warp_specialized:
        out.append(f"runs iteration {where.steady} in the steady state; prologue: {where.prologue};"
                   f" epilogue: {where.epilogue}")
    out.append(f"reads: {_accesses(ss.stmt, 'reads', versions)}  \n"
               f"writes: {_accesses(ss.stmt, 'writes', versions)}")
    if view is not None:
        role, before, after = ws_view.events_around(view, ss)
        how = dict((id(p), h) for p, h in view.producers).get(id(ss))
        what = {"TMA": "issues it as a TMA load", "cp.async": "issues it as cp.async",
                "moved": "runs it ahead of the copy that needs it"}.get(how or "", "runs it")
        first = view.producer_threads if role == "consumer" else 0
        count = view.producer_threads if role == "producer" else view.consumer_threads
        threads = (f"threads {first}–{first + count - 1}" if count is not None else "threads ?")
        tma = next((e for e in view.producer_events if e.stmt is ss and e.kind == "tma"), None)
        if tma is not None:
            ring = ws_view.ring(tma.base, view.num_stages,
                                "phase" if view.counter else view.var)
            what += (f"; it completes on `{ring}`"
                     + (f" ({tma.bytes} bytes per stage)" if tma.bytes is not None else ""))
        out.append(f"The {role} warpgroup ({threads}) {what}.  \n"
                   f"In its loop, right before it: {_calls(before)}  \n"
                   f"right after it: {_calls(after)}")
        out.append(_fence("\n".join(before + [ws_view.event_code(view, ws_view.WsEvent(
            "tma" if how == "TMA" else "stmt", stmt=ss, base=next(
                (e.base for e in view.producer_events if e.stmt is ss), 0)))] + after), "cuda"))
        return _ref_defs(fit("\n\n".join(out) + _config_note(kr)), uri)
    preview = sync_preview(kr, lr, target)
    index = next((i for i, s in enumerate(lr.statements) if s is ss), -1)
    places = hover_view.placements(kr.kernel, lr, preview).get(index, []) if preview else []
    steady = [p for p in places if p.section == "body"]
    if steady:
        p = steady[0]
        part = (f"In the {_warpgroup(ss, kr.kernel)} warpgroup's loop" if lr.warp_specialized
                else "Steady state")
        out.append(f"{part}, right before it: {_calls(p.before)}  \n"
                   f"right after it: {_calls(p.after)}")
        out.append(_fence("\n".join(list(p.before) + [p.code] + list(p.after)), "cuda"))
    others = [p for p in places if p.section != "body"]
    if others:
        out.append("\n".join(
            f"- {_SECTION_NAMES.get(p.section, p.section)} step {p.step}: before "
            f"{_calls(p.before)} · after {_calls(p.after)}" for p in others))
    elif steady and not lr.warp_specialized:
        out.append("Runs only in the steady state.")
    return _ref_defs(fit("\n\n".join(out) + _config_note(kr)), uri)


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
    return fit("\n\n".join(out) + _config_note(kr))


def whatif_hover(lr: LoopResult, rows: Sequence[Tuple[int, Dict[str, object]]],
                 budget: Optional[int]) -> str:
    """``rows``: (num_stages, {"stage": [...], "order": [...], "versions": str,
    "bytes": int|None, "sync": str, "note": str})."""
    out = [f"**`num_stages`** = {lr.num_stages if lr.num_stages is not None else '?'}"
           + (f" (pipeline depth {lr.depth})" if lr.depth is not None else "")]
    from tilelint.analysis import hover_view
    cut = hover_view.cut
    # Cells are cut so that a row fits WIDTH (the loop hover has the full lists).
    header = ["num_stages", "stage", "order", "versions", "shared B", "sync per iteration"]
    table = []
    for ns, r in rows:
        b = r.get("bytes")
        over = isinstance(b, int) and bool(budget) and b > (budget or 0)
        mark = " ◀" if ns == lr.num_stages else ""
        table.append([f"{ns}{mark}", cut(str(r.get("stage", "—")), 12),
                      cut(str(r.get("order", "—")), 12), cut(str(r.get("versions", "—")), 20),
                      "?" if b is None else f"{b}" + (" **over**" if over else ""),
                      cut(str(r.get("sync", "—")), 18)])
    if table:
        out.append("What if (same kernel, other `num_stages`):")
        out.append(render.markdown_table(header, table))
    if budget:
        out.append(f"_shared-memory budget of the target: {budget} bytes ({render.kib(budget)})_")
    return fit("\n\n".join(out))


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
        # its own line: the sentence stays whole within the hover's width
        how = f"  \n`tilelint.binding` asks for `{chosen}`, which this kernel does not have"
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
    return fit(out)


def branch_hover(kr: "KernelResult", b: "Branch", dropped: Optional["Span"]) -> str:
    """A Python ``if``/``for`` the builder decides (``elaborate.py``): on an arm
    it does not build, that it is not built and for which values; on the
    header, what it builds."""
    what = render.branch_text(b)
    if dropped is not None:
        return ("**Not built** for this instance: " + what + ".\n\nNothing in this arm "
                "(loops, allocations, copies) exists in the kernel tilelang 0.1.15 lowers; "
                "tilelint counts none of it." + _config_note(kr))
    title = "**Decided when the kernel is built**" if b.decided else "**Not decided here**"
    return f"{title}: {what}." + _config_note(kr)
