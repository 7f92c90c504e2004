"""Render: analysis results as the explain JSON (schema 1), as text for a person,
and the small text pieces (schedule tables, arena maps) that hovers reuse."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from .model import (
    Analysis,
    AscendLoop,
    AscendResult,
    AscendStatement,
    Branch,
    BufferInfo,
    Diagnostic,
    KernelResult,
    LoopResult,
    LoopSync,
    OpenClaim,
    Span,
)

SCHEMA = 1


# --------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------


def diagnostic_json(d: Diagnostic) -> Dict[str, object]:
    """A diagnostic; ``column``/``end_column`` are 0-based code points, as in
    ``tilelint check --format json`` (the text outputs of both commands show
    ``column + 1``)."""
    out: Dict[str, object] = {
        "code": d.code,
        "severity": d.severity,
        "line": d.span.line,
        "column": d.span.col,
        "end_line": d.span.end_line,
        "end_column": d.span.end_col,
        "message": d.message,
    }
    return out


def loop_sync_json(sync: Optional[LoopSync]) -> Optional[Dict[str, object]]:
    """One region of a loop's sync (an iteration of the generated loop, its prologue
    or its epilogue)."""
    if sync is None:
        return None
    return {
        "syncthreads": sync.syncthreads,
        "cp_async_commit": sync.cp_async_commit,
        "cp_async_wait": list(sync.cp_async_wait),
        "mbarrier_wait": sync.mbarrier_wait,
    }


def loop_json(lr: LoopResult, kr: Optional[KernelResult] = None) -> Dict[str, object]:
    return {
        "line": lr.loop.span.line,
        "pipelined": lr.pipelined,
        "num_stages": lr.num_stages,
        "depth": lr.depth,
        "statements": [
            {"line": s.stmt.span.line, "stage": s.stage, "order": s.order}
            for s in lr.statements
        ],
        # sync: one iteration of the generated (steady-state) loop; the unrolled
        # prologue and epilogue around it are given separately.
        "sync": loop_sync_json(lr.sync),
        "prologue_sync": loop_sync_json(lr.prologue_sync),
        "epilogue_sync": loop_sync_json(lr.epilogue_sync),
        "note": lr.note or None,
        "warp_specialization": ws_json(kr, lr) if kr is not None else None,
    }


def ws_json(kr: KernelResult, lr: LoopResult) -> Optional[Dict[str, object]]:
    """The producer/consumer split of a warp-specialized loop (``ws_view``), or None."""
    from .ws_view import ws_view
    v = ws_view(kr, lr)
    if v is None:
        return None

    def event(ev: object) -> Dict[str, object]:
        from .ws_view import WsEvent
        assert isinstance(ev, WsEvent)
        out: Dict[str, object] = {"kind": ev.kind}
        if ev.stmt is not None:
            out["line"] = ev.stmt.stmt.span.line
        if ev.kind in ("wait", "arrive", "tma", "cp_async_arrive"):
            out["mbarrier"] = ev.base
        if ev.kind == "wait":
            out["parity_flipped"] = ev.flip
            out["first_iteration_only"] = ev.once
        if ev.kind == "tma":
            out["bytes"] = ev.bytes
        return out

    return {
        "producer_threads": v.producer_threads,
        "consumer_threads": v.consumer_threads,
        "producer": [{"line": ss.stmt.span.line, "how": how} for ss, how in v.producers],
        "consumer": [ss.stmt.span.line for ss in v.consumer],
        "mbarriers": v.mbarriers,
        "groups": [{"buffers": sorted({w.buffer for c in g.copies for w in c.stmt.writes}),
                    "full": g.full, "empty": g.empty, "bytes": g.bytes} for g in v.groups],
        "phase_counter": v.counter,
        "producer_loop": [event(e) for e in v.producer_events],
        "consumer_loop": [event(e) for e in v.consumer_events],
    }


def buffer_json(b: BufferInfo) -> Dict[str, object]:
    return {
        "name": b.name,
        "line": b.span.line,
        "scope": b.scope,
        "dtype": b.dtype,
        "shape": list(b.shape),
        "versions": b.versions or None,  # 0 = unknown (stages unknown)
        "bytes": b.bytes,
        "offset": b.offset,
    }


def _lines_text(sp: Span) -> str:
    return f"line {sp.line}" if sp.end_line <= sp.line else f"lines {sp.line}–{sp.end_line}"


def _arm_name(b: Branch, i: int) -> str:
    cond = b.conditions[i] if i < len(b.conditions) else ""
    if cond == "else":
        return "`else:` arm"
    return f"`{'if' if i == 0 else 'elif'} {cond}:` arm"


def _deciders(b: Branch) -> str:
    return ", ".join(f"`{n}`" for n in b.decided_by) if b.decided_by else "a value"


def branch_text(b: Branch) -> str:
    """One line on what the builder builds of ``b`` for this instance
    (``explain``, the hover): the arm taken and for which values, what is not
    built, or which names leave it undecided."""
    if b.kind == "for":
        head = f"line {b.span.line} `for` over `{b.conditions[0]}`"
        if b.copies is not None:
            return (f"{head} is Python: the body is built {b.copies} "
                    f"time{'' if b.copies == 1 else 's'}, once per element")
        return (f"{head}: how many times the body is built depends on {_deciders(b)}, "
                "whose value is not known here; tilelint keeps it a loop")
    head = f"line {b.span.line} `if {b.conditions[0]}:`"
    if b.taken is None:
        return (f"{head}: which arm is built depends on {_deciders(b)}, whose value is not "
                "known here; tilelint keeps every arm, as for a device `if`")
    why = f" ({', '.join(f'{n} = {v}' for n, v in b.values)})" if b.values else ""
    built = (f"the builder builds the {_arm_name(b, b.taken)} only"
             if b.taken < len(b.conditions) else "nothing is built")
    out = f"{head} is Python{why}: {built}"
    if b.dropped:
        out += "; not built: " + ", ".join(_lines_text(sp) for sp in b.dropped)
    return out


def open_claim_text(c: OpenClaim) -> str:
    """``shared memory (shown with every arm kept) is 98304 B when ..., 262144 B
    when ...: it depends on `USE_BIG```."""
    names = ", ".join(f"`{n}`" for n in c.decided_by) or "a value not known here"
    ways = "; ".join(f"{v} when {when}" for when, v in c.values)
    return f"{c.fact} (shown with every arm kept) depends on {names}: {ways}"


def open_claim_json(c: OpenClaim) -> Dict[str, object]:
    return {"fact": c.fact, "decided_by": list(c.decided_by),
            "values": [{"when": when, "value": v} for when, v in c.values]}


def branch_json(b: Branch) -> Dict[str, object]:
    return {
        "line": b.span.line,
        "end_line": b.span.end_line,
        "kind": b.kind,
        "conditions": list(b.conditions),
        "built": b.taken,
        "copies": b.copies,
        "not_built": [[sp.line, sp.end_line] for sp in b.dropped],
        "decided_by": list(b.decided_by),
        "values": dict(b.values),
    }


def kernel_json(kr: KernelResult) -> Dict[str, object]:
    k = kr.kernel
    sync = kr.sync
    asc = kr.ascend
    return {
        "name": k.name,
        "line": k.span.line,
        "bindings": {name: _jsonable(v) for name, v in kr.bindings},
        "threads": kr.threads,
        "warp_specialized": kr.warp_specialized,
        "shared": {
            # bytes: the dynamic arena; total_bytes (arena + static) is what the
            # launch needs, the number TL201/TL203 and the text output give.
            "bytes": kr.shared_bytes,
            "static_bytes": kr.shared_static_bytes,
            "total_bytes": kr.shared_total,
            "budget": kr.shared_budget,
            "buffers": [buffer_json(b) for b in kr.buffers],
        },
        "loops": [loop_json(lr, kr) for lr in kr.loops],
        "branches": [branch_json(b) for b in kr.branches],
        "open_claims": [open_claim_json(c) for c in kr.open_claims],
        "sync": None if sync is None else {
            "syncthreads": sync.syncthreads,
            "cp_async_commit": sync.cp_async_commit,
            "cp_async_wait": list(sync.cp_async_wait),
            "mbarriers": sync.mbarriers,
        },
        "ascend": None if asc is None else {
            "versions": dict(asc.versions),
            "hard_events": {name: ascend_event_json(asc, name, slots, spilled)
                            for name, slots, spilled in asc.hard_events},
            "pipe_barriers": list(asc.pipe_barriers),
            "cross_core_slots": asc.cross_core_slots,
            "mutex_ids": asc.mutex_ids,
            "versions_exact": asc.versions_exact,
            "schedule": {
                "exact": asc.schedule_exact,
                "note": asc.schedule_note,
                "ii": asc.ii,
                "statements": ascend_statements_json(asc.statements),
            },
            "loops": [{"line": lp.line, "exact": lp.exact, "note": lp.note, "ii": lp.ii,
                       "statements": ascend_statements_json(lp.statements)}
                      for lp in asc.loops],
            "preview": asc.preview,
        },
    }


def _jsonable(v: object) -> object:
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def explain_json(analysis: Analysis) -> Dict[str, object]:
    return {
        "schema": SCHEMA,
        "file": analysis.path,
        "target": analysis.target,
        "kernels": [kernel_json(k) for k in analysis.kernels],
        "diagnostics": [diagnostic_json(d) for d in analysis.diagnostics],
    }


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


def kib(n: Optional[int]) -> str:
    if n is None:
        return "?"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n / 1024:.1f} KiB"


def _short(label: str, width: int = 28) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(c: str) -> str:
        return c.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(esc(c) for c in r) + " |")
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in header]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    def fmt(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def shared_text(kr: KernelResult, unit: str = "B", target: Optional[str] = None) -> str:
    """The kernel's shared memory per block in the words TL201 uses: the total
    (what the launch needs and the per-block limit applies to), the budget, and
    the dynamic arena and static bytes it is made of."""
    total = kr.shared_total
    if total is None:
        return "?"
    out = f"{total} {unit} ({kib(total)})"
    if kr.shared_budget:
        out += (f" of the {target} budget" if target else " of a budget") + \
            f" of {kr.shared_budget} {unit} ({kib(kr.shared_budget)})"
    out += f" (arena {kr.shared_bytes} {unit}"
    if kr.shared_static_bytes:
        out += f" + static {kr.shared_static_bytes} {unit}"
    return out + ")"


def arena_map(kr: KernelResult, width: int = 64) -> str:
    """A bar of the whole dynamic arena with each buffer's span (static
    ``__shared__`` buffers have offsets of their own and are left out)."""
    total = kr.shared_bytes
    bufs = [b for b in kr.buffers if b.offset is not None and b.bytes and b.scope != "shared"]
    if not total or not bufs:
        return ""
    lines = []
    scale = total / width
    for b in sorted(bufs, key=lambda b: (b.offset, b.name)):
        offset, size = b.offset or 0, b.bytes or 0  # both known (filtered above)
        start = int(round(offset / scale))
        end = max(start + 1, int(round((offset + size) / scale)))
        bar = "." * start + "#" * (end - start) + "." * max(0, width - end)
        lines.append(f"|{bar[:width]}| {b.name} @ {b.offset} +{b.bytes}")
    lines.append(f"0{' ' * (width - 1)}{total} bytes (dynamic arena)")
    return "\n".join(lines)


def explain_text(analysis: Analysis) -> str:
    out: List[str] = [f"{analysis.path} (target {analysis.target})"]
    if not analysis.kernels:
        out.append("  no TileLang kernels found")
    for kr in analysis.kernels:
        k = kr.kernel
        out.append("")
        head = f"kernel {k.name} (line {k.span.line})"
        if k.factory:
            head += f" from factory {k.factory}"
        out.append(head)
        if kr.config_label:
            out.append(f"  values from: {kr.config_label}")
        if kr.bindings:
            out.append("  bindings: " + ", ".join(f"{n}={v}" for n, v in kr.bindings))
        if kr.unresolved:
            out.append("  symbolic: " + ", ".join(kr.unresolved))
        out.append(f"  threads: {kr.threads if kr.threads is not None else '?'}"
                   f"{'  (warp-specialized)' if kr.warp_specialized else ''}")
        for br in kr.branches:
            out.append(("  elaboration: " if br.decided else "  undecided: ") + branch_text(br))
        for claim in kr.open_claims:
            out.append("  depends on it: " + open_claim_text(claim))
        if kr.ascend is not None:
            out.extend(ascend_text(kr.ascend))
        for lr in ([] if kr.ascend is not None else kr.loops):
            out.append(f"  loop line {lr.loop.span.line}: "
                       + ("pipelined" if lr.pipelined else "not pipelined")
                       + (f", num_stages={lr.num_stages}" if lr.num_stages is not None else "")
                       + (f", depth {lr.depth}" if lr.depth is not None else "")
                       + (" (manual order/stage)" if lr.manual else "")
                       + (f" — {lr.note}" if lr.note else ""))
            ws = ws_text(kr, lr)
            for s in ([] if ws else lr.statements):
                out.append(f"    line {s.stmt.span.line:<4} stage {_v(s.stage)}  order {_v(s.order)}"
                           f"  {s.stmt.label}")
            out.extend("    " + ln for ln in ws)
            for bind in lr.excluded_binds:
                out.append(f"    line {bind.span.line:<4} (replayable bind, not scheduled)  "
                           f"{bind.label}")
            if lr.versions:
                out.append("    versions: " + ", ".join(
                    f"{v.buffer}×{v.versions or '?'}" for v in lr.versions))
            for what, region in (("prologue", lr.prologue_sync), ("per iteration", lr.sync),
                                 ("epilogue", lr.epilogue_sync)):
                if region is not None:
                    out.append(f"    sync {what}: {loop_sync_text(region)}")
            preview = "" if ws else cuda_preview(kr, lr, analysis.target)
            if preview:
                # the whole code the hover shortens to its steady state
                out.append("    CUDA sync (preview):")
                out.extend("      " + ln for ln in preview.rstrip("\n").splitlines())
        if kr.buffers:
            out.append(f"  shared memory: {shared_text(kr, target=analysis.target)}"
                       + (f"; arena without reuse {kr.no_reuse_bytes} B"
                          if kr.no_reuse_bytes is not None else ""))
            for b in kr.buffers:
                shape = "×".join(str(x) for x in b.shape)
                where = "static @" if b.scope == "shared" else "@"
                out.append(f"    {b.name:<16} {shape} {b.dtype} ×{b.versions or '?'} = "
                           f"{_v(b.bytes)} B {where} {_v(b.offset)}")
        if kr.sync is not None:
            ks = kr.sync
            out.append(f"  sync: __syncthreads×{ks.syncthreads}, cp.async commit×{ks.cp_async_commit},"
                       f" wait_group{list(ks.cp_async_wait)}, mbarriers×{ks.mbarriers}")
    if analysis.diagnostics:
        out.append("")
        out.append("diagnostics:")
        for d in analysis.diagnostics:
            # 1-based column, as ``tilelint check`` prints it.
            out.append(f"  {d.span.line}:{d.span.col + 1}: {d.code} [{d.severity}] {d.message}")
    return "\n".join(out) + "\n"


WS_HEADER = ("line", "warpgroup", "issues", "waits on", "signals")


def ws_text(kr: KernelResult, lr: LoopResult) -> List[str]:
    """A warp-specialized loop for ``explain``: the threads of each warpgroup,
    the statements each one runs with the mbarrier calls around them, the
    mbarriers and their phases per stage, and the code of both loops ([] when
    ``lr`` is not the loop the sm_90 rewriter splits)."""
    from .ws_view import (
        barriers_text,
        code,
        phase_header,
        phase_rows,
        statement_rows,
        threads_text,
        ws_view,
    )
    v = ws_view(kr, lr)
    if v is None:
        return []
    out = [f"warp-specialized: {threads_text(v)}"]
    rows = [[str(ss.stmt.span.line), role, how or "", before, after, _short(ss.stmt.label, 44)]
            for ss, role, how, before, after in statement_rows(v)]
    out.extend(text_table(WS_HEADER + ("statement",), rows).splitlines())
    if any(how == "moved" for _, how in v.producers):
        out.append("moved: a consumer statement the pass runs in the producer, ahead of the "
                   "copy that needs it")
    out.append(barriers_text(v))
    out.append("phases per stage (slot: the buffer version and its full/empty pair; the "
               "producer's parity is flipped, so its first pass does not wait):")
    out.extend("  " + ln for ln in text_table(phase_header(v), phase_rows(v)).splitlines())
    if v.counter:
        out.append("phase: a counter of the iterations run, not the loop variable (the loop "
                   "sits in an outer loop or under a condition)")
    out.append("CUDA sync (sketch of both warpgroups' loops):")
    out.extend("  " + ln for ln in code(v).rstrip("\n").splitlines())
    return out


def cuda_preview(kr: KernelResult, lr: LoopResult, target: str = "sm_80") -> str:
    """``sync_cuda.render_preview`` of a pipelined CUDA loop ("" otherwise)."""
    if not lr.pipelined or kr.kernel.dialect != "cuda":
        return ""
    from .sync_cuda import render_preview
    return render_preview(kr.kernel, lr, target=target)


def loop_sync_text(s: LoopSync) -> str:
    """``__syncthreads×2, cp.async commit×1, wait_group[2]`` for one region of a loop."""
    return (f"__syncthreads×{s.syncthreads}"
            + (f", cp.async commit×{s.cp_async_commit}" if s.cp_async_commit else "")
            + (f", wait_group{list(s.cp_async_wait)}" if s.cp_async_wait else "")
            + (f", mbarrier waits×{s.mbarrier_wait}" if s.mbarrier_wait else ""))


def ascend_event_json(asc: AscendResult, name: str, slots: int, spilled: bool
                      ) -> Dict[str, object]:
    """One hard event: the ids still in use after RewriteFlagToBuf (``slots``),
    the ids InsertSync gave it before (``ids_before``) and the id ranges that
    became locks."""
    locks = [{"ids": [lo, hi], "mutex_ids": [m, m + hi - lo]}
             for ev, lo, hi, m in asc.spills if ev == name]
    before = slots + sum(hi - lo + 1 for ev, lo, hi, _ in asc.spills if ev == name)
    return {"slots": slots, "spilled": spilled, "ids_before": before, "locks": locks}


def ascend_statements_json(statements: Sequence[AscendStatement]) -> List[Dict[str, object]]:
    return [{"line": st.line, "label": st.label, "pipe": st.pipe, "core": st.core,
             "start": st.start, "latency": st.latency, "ii": st.ii} for st in statements]


def ascend_schedule_rows(asc: AscendResult) -> List[List[str]]:
    """The Ascend loop body in the auto-scheduler's order, one row per task."""
    return _ascend_rows(asc.statements)


def _ascend_rows(statements: Sequence[AscendStatement]) -> List[List[str]]:
    rows = []
    for st in statements:
        rows.append([str(st.line), st.core, st.pipe, _v(st.start), _v(st.latency),
                     _v(st.ii), _short(st.label, 40)])
    return rows


ASCEND_SCHEDULE_HEADER = ("line", "core", "pipe", "start", "latency", "II", "statement")


def ascend_loop_rows(lp: AscendLoop) -> List[List[str]]:
    """One pipelined loop of an Ascend kernel (``AscendResult.loops``), a row per task."""
    return _ascend_rows(lp.statements)


def ascend_loop_title(lp: AscendLoop) -> str:
    how = (f"the auto-scheduler's order (II {lp.ii} cycles)" if lp.exact and lp.ii
           else "the auto-scheduler's order, which its dependencies force" if lp.exact
           else f"a predicted order ({lp.note})")
    return f"body in {how}:"


def ascend_schedule_title(asc: AscendResult) -> str:
    if asc.schedule_exact and asc.ii is None:
        return (f"loop body in the auto-scheduler's order, which its dependencies force "
                f"(no start times: {asc.schedule_note}):")
    if asc.schedule_exact:
        return (f"loop body in the auto-scheduler's order (its Z3 model reproduced, "
                f"II {asc.ii} cycles{'; ' + asc.schedule_note if asc.schedule_note else ''}):")
    return (f"loop body in a predicted order (dependency levels; the scheduler's "
            f"order is not reproduced: {asc.schedule_note}):")


def ascend_text(asc: AscendResult) -> List[str]:
    out: List[str] = []
    if asc.statements:
        out.append("  " + ascend_schedule_title(asc))
        table = text_table(ASCEND_SCHEDULE_HEADER, ascend_schedule_rows(asc))
        out.extend("    " + ln for ln in table.splitlines())
    for lp in asc.loops[1:]:
        out.append(f"  loop at line {lp.line}, {ascend_loop_title(lp)}")
        table = text_table(ASCEND_SCHEDULE_HEADER, ascend_loop_rows(lp))
        out.extend("    " + ln for ln in table.splitlines())
    if asc.versions:
        out.append("  versions: " + ", ".join(f"{b}×{n}" for b, n in asc.versions)
                   + ("" if asc.versions_exact else "  (not all fixed: the scheduler "
                      "picks the rest, at most num_stages)"))
    if asc.hard_events:
        out.append("  flags per hard event (event ids in use): " + ", ".join(
            f"{ev} {n}" if not sp else
            f"{ev} {ascend_event_json(asc, ev, n, sp)['ids_before']} → {n}"
            for ev, n, sp in asc.hard_events))
    for ev, lo, hi, m in asc.spills:
        out.append(f"    {ev} ids {lo}..{hi} → asc_lock/asc_unlock on mutex ids "
                   f"{m}..{m + hi - lo}")
    out.append(f"  pipe barriers: {', '.join(asc.pipe_barriers) or 'none'};"
               f" cross-core slots: {asc.cross_core_slots} of 16;"
               f" mutex ids: {asc.mutex_ids} of 32")
    if asc.preview:
        out.append("  Ascend C sync (preview):")
        out.extend("    " + ln for ln in asc.preview.rstrip("\n").splitlines())
    return out


def _v(x: Optional[int]) -> str:
    return "?" if x is None else str(x)
