"""Render: the explain page (``tilelint explain FILE --format html``).

One self-contained HTML page: inline CSS and SVG, no script, no font and no
address outside the page.  It only formats what the analysis already computed:

* a pipeline timeline per pipelined loop: the emitted steps across (prologue,
  steady state, epilogue), the loop's statements down, each cell coloured by
  the statement's stage and labelled with the iteration it runs; every
  ``__syncthreads``, ``cp_async_commit`` and ``cp_async_wait<N>`` where
  ``sync_cuda``'s trace puts it (the trace the loop's ``sync``,
  ``prologue_sync`` and ``epilogue_sync`` counts come from), the mbarrier
  waits of a warp-specialized loop, and the Ascend flag waits of the
  auto-scheduler's order;
* an arena map per kernel instance: offset across, lifetime (the lowered
  kernel's top-level statements, ``BufferInfo.live``) down, a box per buffer
  version, the target's shared-memory limit as a line;
* a table of every instance (call site, autotune configuration) × target:
  shared bytes and whether they fit, blocks per SM from shared memory and
  threads, and a register estimate from the fragment bytes per thread.

Pure: no I/O; the caller writes the string.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from . import targets as targets_mod
from .model import (
    Analysis,
    AscendLoop,
    BufferInfo,
    Kernel,
    KernelResult,
    LoopResult,
    LoopSync,
    Settings,
)
from .schedule import BODY, EPILOGUE, PROLOGUE, Row

if TYPE_CHECKING:
    from .values import Env

# Stage colours (a colour-blind-safe qualitative palette); stage s takes
# STAGE_COLOURS[s % len].  Tests look for these in the screenshot.
STAGE_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2",
                 "#edc948", "#9c755f")
# Sync marks: (stroke colour, dash pattern).
MARK_STYLE = {
    "syncthreads": ("#d62728", ""),
    "named_barrier": ("#d62728", "1,2"),
    "wait": ("#1f3a93", ""),
    "commit": ("#7f7f7f", "3,2"),
    "mbarrier_wait": ("#8e44ad", ""),
    "mbarrier_wait_once": ("#8e44ad", "1,2"),
    "arrive": ("#8e44ad", "3,2"),
    "flag_wait": ("#1f3a93", ""),
    "flag_notify": ("#7f7f7f", "3,2"),
}
BUFFER_COLOURS = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99",
                  "#8dd3c7", "#bebada", "#80b1d3", "#fccde5")

# --------------------------------------------------------------------------
# Occupancy: blocks per SM (targets.residency, the table of per-SM limits)
# --------------------------------------------------------------------------

REGISTER_WORD = 4  # bytes per 32-bit register


@dataclass(frozen=True)
class Occupancy:
    """One instance on one target."""

    arena_bytes: Optional[int]
    total_bytes: Optional[int]
    budget: Optional[int]
    fits: Optional[bool]
    threads: Optional[int]
    blocks_by_smem: Optional[int] = None
    blocks_by_threads: Optional[int] = None
    blocks: Optional[int] = None  # min of the two and the SM's block limit
    fragment_bytes_per_thread: Optional[int] = None
    registers_estimate: Optional[int] = None  # fragments only: a lower bound
    blocks_by_registers: Optional[int] = None
    # what ptxas lets a thread keep of the estimate (targets.register_cap)
    registers_kept: Optional[int] = None


def fragment_bytes_per_thread(kr: KernelResult, env: Optional["Env"] = None) -> Optional[int]:
    """Bytes of ``T.alloc_fragment`` buffers spread over the threads that own
    them (the consumer warpgroups when warp-specialized) plus the per-thread
    ``T.alloc_local``/``alloc_var`` buffers; None when a size or the thread
    count is not known."""
    from .packing import buffer_bytes
    from .values import Env

    threads = kr.threads
    if threads is None or threads <= 0:
        return None
    owners = threads - 128 if kr.warp_specialized and threads > 128 else threads
    if env is None:
        env = Env(exprs=dict(kr.kernel.locals), values=dict(kr.bindings))
    total = 0
    for a in kr.kernel.allocs:
        if a.scope not in ("local.fragment", "local", "local.var"):
            continue
        try:
            n = buffer_bytes(a, env)
        except Exception:  # noqa: BLE001 - an unknown size, not an error
            n = None
        if n is None:
            return None
        total += -(-n // owners) if a.scope == "local.fragment" else n
    return total


def occupancy(kr: KernelResult, target: str, env: Optional["Env"] = None) -> Occupancy:
    total = kr.shared_total
    budget = kr.shared_budget
    fits = None if total is None or budget is None else total <= budget
    occ = Occupancy(arena_bytes=kr.shared_bytes, total_bytes=total, budget=budget, fits=fits,
                    threads=kr.threads)
    if budget is None or targets_mod.sm_limits(target) is None:
        return occ
    frag = fragment_bytes_per_thread(kr, env)
    regs = None if frag is None else -(-frag // REGISTER_WORD)
    res = targets_mod.residency(target, total, kr.threads, regs)
    assert res is not None
    return Occupancy(arena_bytes=kr.shared_bytes, total_bytes=total, budget=budget, fits=fits,
                     threads=kr.threads, blocks_by_smem=res.by_shared,
                     blocks_by_threads=res.by_threads, blocks=res.blocks,
                     fragment_bytes_per_thread=frag, registers_estimate=regs,
                     blocks_by_registers=res.by_registers, registers_kept=res.registers)


# --------------------------------------------------------------------------
# Timeline data
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """A sync call drawn between cells: ``kind`` is syncthreads, commit, wait
    (``cp_async_wait<n>``), mbarrier_wait, arrive, flag_wait or flag_notify."""

    kind: str
    n: int = 0
    label: str = ""

    @property
    def text(self) -> str:
        if self.label:
            return self.label
        return {"syncthreads": "__syncthreads", "commit": "commit",
                "wait": f"wait_group<{self.n}>", "mbarrier_wait": "mbarrier wait",
                "arrive": "mbarrier arrive"}.get(self.kind, self.kind)


@dataclass(frozen=True)
class Cell:
    row: int
    iteration: str
    colour: int  # stage (or role) → STAGE_COLOURS


@dataclass(frozen=True)
class Column:
    """One emitted step: its items in emission order, each a Cell or a Mark."""

    section: str  # prologue | body | epilogue | before | producer/consumer iteration
    title: str
    items: Tuple[object, ...]


@dataclass(frozen=True)
class Timeline:
    rows: Tuple[str, ...]  # statement labels, top to bottom
    columns: Tuple[Column, ...]
    colour_names: Tuple[str, ...]  # legend text per colour index used
    caption: str = ""
    note: str = ""


def _stmt_label(lr: LoopResult, i: int) -> str:
    st = lr.statements[i]
    label = st.stmt.label or st.stmt.kind
    return f"L{st.stmt.span.line} {label}"


class _BufferLayout:
    """``sync_cuda.PackLayout`` over a result's buffers."""

    def __init__(self, buffers: Sequence[BufferInfo]) -> None:
        self._buffers = tuple(buffers)

    @property
    def buffers(self) -> Sequence[BufferInfo]:
        return self._buffers


STEADY_SHOWN = 2  # steady-state iterations drawn


def count_marks(columns: Sequence[Column], sections: Sequence[str]) -> LoopSync:
    """The sync calls drawn in the columns of ``sections`` (each distinct step
    once: the steady state counts one iteration)."""
    st = cm = mw = 0
    waits: List[int] = []
    seen_body = False
    for col in columns:
        if col.section not in sections:
            continue
        if col.section == BODY:
            if seen_body:
                continue
            seen_body = True
        for it in col.items:
            if isinstance(it, Mark):
                if it.kind == "syncthreads":
                    st += 1
                elif it.kind == "commit":
                    cm += 1
                elif it.kind == "wait":
                    waits.append(it.n)
                elif it.kind == "mbarrier_wait":  # not the first-iteration-only waits
                    mw += 1
    return LoopSync(syncthreads=st, cp_async_commit=cm, cp_async_wait=tuple(waits),
                    mbarrier_wait=mw)


InstanceView = Tuple[Kernel, Optional["Env"]]


def instance_envs(a: Analysis, settings: Optional[Settings]
                  ) -> Dict[Tuple[str, int, str], InstanceView]:
    """(kernel name, line, instance label) → the kernel as the passes saw that
    instance (a conditional iterator's serial arm taken) and its values, for
    every instance of ``a`` (``settings``: the analysis' own, for ``--bind``)."""
    from . import loops as loops_mod, pipeline, values

    out: Dict[Tuple[str, int, str], InstanceView] = {}
    done: set = set()
    for kr in a.kernels:
        k = kr.kernel
        if (k.name, k.span.line) in done:
            continue
        done.add((k.name, k.span.line))
        try:
            overrides = pipeline.kernel_overrides(k, settings or Settings())
            for inst in values.instances(a.module, k, overrides, all_calls=True):
                out.setdefault((k.name, k.span.line, inst.label),
                               (loops_mod.active_view(k, inst.env), inst.env))
        except Exception:  # noqa: BLE001 - drawn without the instances' values
            continue
    return out


def cuda_timeline(kr: KernelResult, li: int, target: str,
                  instance: Optional[InstanceView] = None) -> Optional[Timeline]:
    """The timeline of loop ``li`` of a CUDA kernel instance (None: not pipelined,
    rejected, or its schedule is not known).  ``instance``: the kernel as the
    passes saw it and the instance's values (:func:`instance_envs`), as the
    sync model had them; without it the loop is traced without values."""
    lr = kr.loops[li]
    if not lr.pipelined or lr.rejected or not lr.statements:
        return None
    if lr.warp_specialized:
        return _ws_timeline(kr, lr)
    from . import sync_cuda

    kernel, env = instance if instance is not None else (kr.kernel, None)
    try:
        events, _ = sync_cuda.trace(kernel, env, kr.loops, target, False,
                                    _BufferLayout(kr.buffers))
    except Exception:  # noqa: BLE001 - the page shows the loop without a timeline
        return None
    evs = [e for e in events if e.loop_index == li]
    if not any(e.row is not None for e in evs):
        return None
    max_stage = max((s.stage or 0) for s in lr.statements)
    # rows in emission order within a step: by order, then position
    row_of = {idx: pos for pos, idx in enumerate(
        sorted(range(len(lr.statements)),
               key=lambda i: (lr.statements[i].order or 0, i)))}
    labels = [""] * len(lr.statements)
    for idx, pos in row_of.items():
        labels[pos] = _stmt_label(lr, idx)
    # A loop starting at a run-time value: the prologue and the epilogue are
    # guarded loops of max_stage iterations, traced (and drawn) once each.
    rolled = max_stage >= 2 and sync_cuda.rolled_ends(kernel, lr, env)
    # A warp-specialized kernel runs its other pipelined loops in the consumer
    # branch, where the barriers are named barriers over the consumer threads.
    columns = _cuda_columns(evs, row_of, max_stage + STEADY_SHOWN, rolled,
                            named=kr.warp_specialized)
    caption = _cuda_caption(_trip_text(kr, lr, env), max_stage, rolled)
    columns, note = _sync_note(lr, columns)
    stages = sorted({s.stage for s in lr.statements if s.stage is not None})
    return Timeline(tuple(labels), tuple(columns),
                    tuple(f"stage {s}" if s in stages else "" for s in range(max(stages, default=-1) + 1)),
                    caption, note)


def _steps(evs: Sequence[Any], section: str, named: bool) -> List[List[object]]:
    """The section's events split into steps: a wait or a barrier goes with the
    statement after it, a commit with the one before it."""
    sec = [e for e in evs if e.section == section]
    out: Dict[int, List[object]] = {}
    pending: List[Mark] = []
    last_step: Optional[int] = None
    for e in sec:
        if e.row is not None:
            step = e.row.step
            out.setdefault(step, []).extend(pending)
            pending = []
            out[step].append(e.row)
            last_step = step
            continue
        mark = _event_mark(e, named)
        if mark is None:
            continue
        if mark.kind == "commit" and last_step is not None:
            out[last_step].append(mark)
        else:
            pending.append(mark)
    if pending:
        if last_step is None:
            out.setdefault(0, []).extend(pending)
        else:
            out[last_step].extend(pending)
    return [out[k] for k in sorted(out)]


def _cells(items: List[object], base: int, row_of: Dict[int, int]) -> Tuple[object, ...]:
    res: List[object] = []
    for it in items:
        if isinstance(it, Mark):
            res.append(it)
        elif isinstance(it, Row):
            res.append(Cell(row_of[it.index], str(base + it.offset), it.stage))
    return tuple(res)


def _once(items: Tuple[object, ...]) -> Tuple[object, ...]:
    """A rolled prologue or epilogue: its iterations written j."""
    return tuple(Cell(it.row, "j", it.colour) if isinstance(it, Cell) else it for it in items)


def _cuda_columns(evs: Sequence[Any], row_of: Dict[int, int], n_diag: int, rolled: bool,
                  named: bool) -> List[Column]:
    """Before the loop, the prologue steps, STEADY_SHOWN steady-state
    iterations and the epilogue steps (``n_diag`` iterations drawn)."""
    columns: List[Column] = []
    pre = [m for e in evs if e.section == "pre" for m in [_event_mark(e, named)] if m is not None]
    if pre:
        columns.append(Column("before", "before", tuple(pre)))
    for p, items in enumerate(_steps(evs, PROLOGUE, named)):
        cells = _cells(items, 0, row_of)
        columns.append(Column(PROLOGUE, "loop j" if rolled else f"P{p}",
                              _once(cells) if rolled else cells))
    body = _steps(evs, BODY, named)
    if body:
        for k in range(STEADY_SHOWN):
            columns.append(Column(BODY, f"k={k}", _cells(body[0], k, row_of)))
    for e, items in enumerate(_steps(evs, EPILOGUE, named)):
        cells = _cells(items, n_diag, row_of)
        columns.append(Column(EPILOGUE, "loop j" if rolled else f"E{e}",
                              _once(cells) if rolled else cells))
    return columns


def _cuda_caption(trip: str, max_stage: int, rolled: bool) -> str:
    n_diag = max_stage + STEADY_SHOWN
    caption = (f"drawn for n = {n_diag} iterations ({STEADY_SHOWN} of the steady state); "
               f"{trip}")
    if rolled:
        caption += (f"; the loop starts at a run-time value, so the prologue and the epilogue "
                    f"are loops of {max_stage} iterations j (the epilogue's statements "
                    f"guarded), each drawn once")
    return caption


def _sync_note(lr: LoopResult, columns: List[Column]) -> Tuple[List[Column], str]:
    """The columns to draw and the note under them: without a modelled sync
    (tensor memory, user mbarriers, an unknown stage, a kernel of another
    dialect) only the schedule; otherwise whether the marks drawn add up to
    the counts explain gives."""
    if lr.sync is None:
        columns = [Column(c.section, c.title, tuple(it for it in c.items if isinstance(it, Cell)))
                   for c in columns if c.section != "before"]
        return columns, "no sync drawn: tilelint does not model the sync of this kernel"
    drawn = count_marks(columns, (PROLOGUE,)), count_marks(columns, (BODY,)), \
        count_marks(columns, (EPILOGUE,))
    counted = (lr.prologue_sync or LoopSync(), lr.sync, lr.epilogue_sync or LoopSync())
    note = "" if drawn == counted else (
        "the placement drawn here and the counts of explain differ; the counts are the "
        "ones checked against the compiler")
    return columns, note


def _trip_text(kr: KernelResult, lr: LoopResult, env: Optional["Env"]) -> str:
    from .values import Env

    if env is None:
        env = Env(exprs=dict(kr.kernel.locals), values=dict(kr.bindings))
    try:
        stop = env.eval_int(lr.loop.stop)
        start = env.eval_int(lr.loop.start) if lr.loop.start is not None else 0
    except Exception:  # noqa: BLE001
        stop = start = None
    depth = lr.depth or 1
    if stop is None or start is None:
        return "the trip count is not known here"
    n = stop - start
    return f"the loop runs {n} iterations: the steady state repeats {max(0, n - depth + 1)} times"


def _event_mark(e: object, named: bool = False) -> Optional[Mark]:
    kind = getattr(e, "kind", "")
    if kind == "sync":
        return Mark("named_barrier", label="named barrier") if named else Mark("syncthreads")
    if kind == "commit":
        return Mark("commit")
    if kind == "wait":
        return Mark("wait", int(getattr(e, "n", 0)))
    return None


def _ws_timeline(kr: KernelResult, lr: LoopResult) -> Optional[Timeline]:
    """Warp-specialized: ``ws_view``'s split (checked against the compiler's IR
    after ProducerConsumerWarpSpecialized).  Rows: the producer warpgroup's
    statements (TMA copies, cp.async loops, statements it runs ahead), then the
    consumer's; a column is one iteration k of both loops, with every mbarrier
    wait (id and parity), arrive and commit of that iteration in place."""
    from . import ws_view as ws

    view = ws.ws_view(kr, lr)
    if view is None:
        return None
    prod = [ss for ss, _ in view.producers]
    how = {id(ss): h for ss, h in view.producers}
    rows = prod + list(view.consumer)
    row_of = {id(ss): r for r, ss in enumerate(rows)}
    labels = tuple(
        (f"producer ({how[id(ss)]}) · " if id(ss) in how else "consumer · ")
        + f"L{ss.stmt.span.line} {ss.stmt.label or ss.stmt.kind}" for ss in rows)
    ns = view.num_stages
    columns = []
    for k in range(ns + 1):
        items: List[object] = []
        for role, events, colour in (("producer", view.producer_events, 0),
                                     ("consumer", view.consumer_events, 1)):
            runs = [ev for ev in events if ev.kind in ("tma", "stmt") and ev.stmt is not None]
            evaluated = ws.iteration(view, role, k)
            done = 0
            for t in evaluated:
                kind = t[0]
                if kind in ("tma", "stmt"):
                    ev = runs[done]
                    done += 1
                    assert ev.stmt is not None
                    r = row_of.get(id(ev.stmt))
                    if r is not None:
                        items.append(Cell(r, str(k), colour))
                elif kind == "wait":
                    once = role == "consumer" and any(
                        e.kind == "wait" and e.once and e.base == t[1] for e in events)
                    items.append(Mark("mbarrier_wait_once" if once else "mbarrier_wait",
                                      label=f"wait mbar[{t[1]}] p{t[2]}"
                                            + (" once" if once else "")))
                elif kind in ("arrive", "cp_async_arrive"):
                    items.append(Mark("arrive", label=f"arrive mbar[{t[1]}]"))
                elif kind == "commit":
                    items.append(Mark("commit"))
        columns.append(Column(BODY, f"k={k}", tuple(items)))
    cons = view.consumer_threads
    caption = (f"warp-specialized: the producer warpgroup ({view.producer_threads} "
               f"threads) and the consumer ({_num(cons)} threads) each run their own "
               f"loop over k; a column is iteration k of both. {ns} slot(s): slot k % {ns}, "
               f"parity (k / {ns}) % 2; the producer's wait for a free slot lets it run up to "
               f"{ns} iteration(s) ahead")
    return Timeline(labels, tuple(columns),
                    (f"producer warpgroup ({view.producer_threads} threads)",
                     f"consumer ({_num(cons)} threads)"), caption)


_ASC_WAIT = re.compile(r"asc_sync_wait\(\s*PIPE_(\w+),\s*PIPE_(\w+)")
_ASC_NOTIFY = re.compile(r"asc_sync_notify\(\s*PIPE_(\w+),\s*PIPE_(\w+)")
_ASC_STMT = re.compile(r"//\s*(\w+):.*\(line (\d+)\)\s*$")


def ascend_timeline(kr: KernelResult, lp: AscendLoop, first: bool) -> Optional[Timeline]:
    """An Ascend pipelined loop: the auto-scheduler's order down, iterations
    across, each task coloured by its stage in the modulo schedule
    (``start // II``, 0 without start times); the flag waits and notifies of the
    loop body as the preview gives them (the first loop's)."""
    if not lp.statements:
        return None
    ii = lp.ii
    rows = tuple(f"L{st.line} {st.pipe} {st.label}" for st in lp.statements)
    stage = [0 if ii is None or not ii or st.start is None else st.start // ii
             for st in lp.statements]
    before: Dict[int, List[Mark]] = {}
    after: Dict[int, List[Mark]] = {}
    if first and kr.ascend is not None and kr.ascend.preview:
        body = _ascend_loop_body(kr.ascend.preview)
        line_rows = {st.line: i for i, st in enumerate(lp.statements)}
        pending: List[Mark] = []
        last: Optional[int] = None
        for ln in body:
            m = _ASC_STMT.search(ln)
            if m is not None and int(m.group(2)) in line_rows:
                r = line_rows[int(m.group(2))]
                before.setdefault(r, []).extend(pending)
                pending = []
                last = r
                continue
            w = _ASC_WAIT.search(ln)
            if w is not None:
                pending.append(Mark("flag_wait", label=f"wait {w.group(1)}→{w.group(2)}"))
                continue
            nt = _ASC_NOTIFY.search(ln)
            if nt is not None and last is not None and ln.startswith("  ") \
                    and not ln.startswith("    "):
                after.setdefault(last, []).append(
                    Mark("flag_notify", label=f"notify {nt.group(1)}→{nt.group(2)}"))
    columns = []
    for k in range(3):
        items: List[object] = []
        for r in range(len(rows)):
            items.extend(before.get(r, []))
            items.append(Cell(r, str(k), stage[r]))
            items.extend(after.get(r, []))
        columns.append(Column(BODY, f"k={k}", tuple(items)))
    how = (f"the auto-scheduler's order, II {ii} cycles" if lp.exact and ii
           else "the auto-scheduler's order" if lp.exact else f"a predicted order ({lp.note})")
    return Timeline(rows, tuple(columns),
                    tuple(f"stage {s}" if s in stage else "" for s in range(max(stage) + 1)),
                    f"Ascend loop at line {lp.line}: {how}; stage = start // II")


def _ascend_loop_body(preview: str) -> List[str]:
    """The lines inside the preview's first ``for`` loop, at its own depth."""
    lines = preview.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("for (")), None)
    if start is None:
        return []
    out = []
    for ln in lines[start + 1:]:
        if ln.strip() == "}" and not ln.startswith("  "):
            break
        out.append(ln)
    return out


# --------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


ROW_H = 24
MARK_H = 13
COL_W = 96
LABEL_W = 310


def _row_tops(tl: Timeline) -> Tuple[List[int], List[int], int]:
    """(gap heights, row tops, total height below the header): each gap above a
    row (and the one after the last) is as tall as its most marks in a column."""
    n = len(tl.rows)
    gaps = [0] * (n + 1)
    for col in tl.columns:
        counts = [0] * (n + 1)
        for g, _ in _placed_marks(col, n):
            counts[g] += 1
        gaps = [max(a, b) for a, b in zip(gaps, counts, strict=True)]
    tops = []
    y = 0
    for r in range(n):
        y += gaps[r] * MARK_H + 3
        tops.append(y)
        y += ROW_H
    y += gaps[n] * MARK_H + 3
    return gaps, tops, y


def _placed_marks(col: Column, n_rows: int) -> List[Tuple[int, Mark]]:
    """(gap, mark) for each mark of a column: the gap above the next cell, or
    below the last cell when none follows."""
    out: List[Tuple[int, Mark]] = []
    pending: List[Mark] = []
    last_row: Optional[int] = None
    for it in col.items:
        if isinstance(it, Cell):
            out.extend((it.row, m) for m in pending)
            pending = []
            last_row = it.row
        elif isinstance(it, Mark):
            if it.kind in ("commit", "arrive", "flag_notify") and last_row is not None:
                out.append((last_row + 1, it))
            else:
                pending.append(it)
    gap = n_rows if last_row is None else last_row + 1
    if last_row is None and pending:
        gap = 0
    out.extend((gap, m) for m in pending)
    return out


SECTION_NAMES = {PROLOGUE: "prologue", BODY: "steady state", EPILOGUE: "epilogue",
                 "before": "before"}


def timeline_svg(tl: Timeline, title: str = "") -> str:
    gaps, tops, body_h = _row_tops(tl)
    head = 44
    width = LABEL_W + COL_W * len(tl.columns) + 10
    height = head + body_h + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{_e(title or "pipeline timeline")}">']
    # section brackets
    x0 = LABEL_W
    spans: List[Tuple[str, int, int]] = []
    for i, col in enumerate(tl.columns):
        if spans and spans[-1][0] == col.section:
            spans[-1] = (col.section, spans[-1][1], i)
        else:
            spans.append((col.section, i, i))
    for sec, a, b in spans:
        xa, xb = x0 + a * COL_W + 2, x0 + (b + 1) * COL_W - 2
        name = SECTION_NAMES.get(sec, sec)
        out.append(f'<g class="section section-{_e(sec)}"><rect x="{xa}" y="2" width="{xb - xa}" '
                   f'height="16" rx="3" fill="#eef1f5" stroke="#9aa5b1"/>'
                   f'<text x="{(xa + xb) / 2:.1f}" y="14" text-anchor="middle" '
                   f'class="sec">{_e(name)}</text></g>')
    for i, col in enumerate(tl.columns):
        out.append(f'<text x="{x0 + i * COL_W + COL_W / 2:.1f}" y="34" text-anchor="middle" '
                   f'class="colhead">{_e(col.title)}</text>')
    for r, label in enumerate(tl.rows):
        y = head + tops[r] + ROW_H / 2 + 4
        out.append(f'<text x="4" y="{y:.1f}" class="rowlabel">{_e(_clip(label, 42))}'
                   f'<title>{_e(label)}</title></text>')
    n = len(tl.rows)
    for i, col in enumerate(tl.columns):
        cx = x0 + i * COL_W
        if i > 0 and tl.columns[i - 1].section != col.section:
            out.append(f'<line x1="{cx}" y1="20" x2="{cx}" y2="{height - 4}" stroke="#555" '
                       f'stroke-width="1.5"/>')
        out.append(f'<g class="col" data-col="{i}" data-section="{_e(col.section)}" '
                   f'data-title="{_e(col.title)}">')
        for it in col.items:
            if isinstance(it, Cell):
                y = head + tops[it.row]
                fill = STAGE_COLOURS[it.colour % len(STAGE_COLOURS)]
                out.append(f'<g class="cell" data-row="{it.row}" data-colour="{it.colour}">'
                           f'<rect x="{cx + 3}" y="{y}" width="{COL_W - 6}" height="{ROW_H}" '
                           f'rx="3" fill="{fill}"/><text x="{cx + COL_W / 2:.1f}" '
                           f'y="{y + ROW_H / 2 + 4:.1f}" text-anchor="middle" class="it">'
                           f'i={_e(it.iteration)}</text></g>')
        used: Dict[int, int] = {}
        for g, m in _placed_marks(col, n):
            k = used.get(g, 0)
            used[g] = k + 1
            gap_top = (tops[g] - gaps[g] * MARK_H - 3) if g < n else \
                (tops[n - 1] + ROW_H if n else 0)
            y = head + gap_top + k * MARK_H + MARK_H / 2 + 1
            colour, dash = MARK_STYLE.get(m.kind, ("#000", ""))
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<g class="mark mark-{_e(m.kind)}" data-gap="{g}" data-n="{m.n}">'
                       f'<line x1="{cx + 2}" y1="{y:.1f}" x2="{cx + COL_W - 2}" y2="{y:.1f}" '
                       f'stroke="{colour}" stroke-width="2"{dash_attr}/>'
                       f'<text x="{cx + COL_W / 2:.1f}" y="{y - 2:.1f}" text-anchor="middle" '
                       f'class="marktext" fill="{colour}">{_e(_clip(m.text, 20))}</text>'
                       f'<title>{_e(m.text)}</title></g>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


ARENA_W = 760


def arena_svg(kr: KernelResult, target: str) -> Optional[str]:
    """Offset across, lifetime down; a box per buffer version; the limit line."""
    bufs = [b for b in kr.buffers if b.scope != "shared" and b.offset is not None
            and b.bytes and b.live is not None]
    if not bufs or kr.shared_bytes is None:
        return None
    static = kr.shared_static_bytes
    budget = kr.shared_budget
    span_bytes = max(kr.shared_bytes + static, budget or 0, 1)
    scale = (ARENA_W - 60) / (span_bytes * 1.04)
    lo = min(b.live[0] for b in bufs if b.live is not None)
    hi = max(b.live[1] for b in bufs if b.live is not None)
    unit_h = 26
    top = 30
    lanes = hi - lo + 1
    height = top + lanes * unit_h + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="arena" width="{ARENA_W}" '
           f'height="{height}" viewBox="0 0 {ARENA_W} {height}" role="img" '
           f'aria-label="shared-memory arena">']
    x0 = 26
    for u in range(lanes):
        y = top + u * unit_h
        out.append(f'<line x1="{x0}" y1="{y}" x2="{ARENA_W - 10}" y2="{y}" stroke="#eee"/>')
    colour_of: Dict[str, str] = {}
    for b in sorted(bufs, key=lambda b: b.name):
        colour_of[b.name] = BUFFER_COLOURS[len(colour_of) % len(BUFFER_COLOURS)]
    for b in bufs:
        assert b.live is not None and b.offset is not None and b.bytes is not None
        v = max(1, b.versions)
        size = b.bytes / v
        y = top + (b.live[0] - lo) * unit_h + 2
        h = (b.live[1] - b.live[0] + 1) * unit_h - 4
        for k in range(v):
            x = x0 + (b.offset + k * size) * scale
            w = max(1.0, size * scale)
            out.append(f'<g class="buf" data-name="{_e(b.name)}" data-version="{k}" '
                       f'data-offset="{b.offset + int(k * size)}" data-bytes="{int(size)}">'
                       f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" '
                       f'fill="{colour_of[b.name]}" stroke="#333" stroke-width="0.8"/>'
                       f'<text x="{x + 3:.1f}" y="{y + 12}" class="buftext">'
                       f'{_e(_clip(f"{b.name} v{k}" if v > 1 else b.name, max(1, int(w / 6))))}'
                       f'</text><title>{_e(b.name)} version {k}: {int(size)} B at '
                       f'{b.offset + int(k * size)}, live over statements '
                       f'{b.live[0]}..{b.live[1]}</title></g>')
    if static:
        x = x0 + kr.shared_bytes * scale
        out.append(f'<g class="static"><rect x="{x:.1f}" y="{top}" width="'
                   f'{max(2.0, static * scale):.1f}" height="{lanes * unit_h}" fill="#ccc" '
                   f'stroke="#666"/><title>static __shared__ {static} B</title></g>')
    end = x0 + kr.shared_bytes * scale
    out.append(f'<line x1="{end:.1f}" y1="{top - 6}" x2="{end:.1f}" y2="{top + lanes * unit_h}" '
               f'stroke="#333" stroke-dasharray="2,2"/>'
               f'<text x="{end:.1f}" y="{top - 9}" class="axis" text-anchor="middle">'
               f'arena {kr.shared_bytes} B</text>')
    if budget:
        bx = x0 + budget * scale
        over = (kr.shared_total or 0) > budget
        out.append(f'<g class="limit"><line x1="{bx:.1f}" y1="{top - 18}" x2="{bx:.1f}" '
                   f'y2="{top + lanes * unit_h + 6}" stroke="#d62728" stroke-width="2"/>'
                   f'<text x="{bx - 4:.1f}" y="{top - 20}" text-anchor="end" class="axis" '
                   f'fill="#d62728">{_e(target)} limit {budget} B'
                   f'{" — exceeded" if over else ""}</text></g>')
    base = top + lanes * unit_h + 16
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        off = int(span_bytes * frac)
        x = x0 + off * scale
        out.append(f'<text x="{x:.1f}" y="{base}" class="axis" text-anchor="middle">'
                   f'{_kib(off)}</text>')
    out.append(f'<text x="{x0}" y="{base + 16}" class="axis">offset in the dynamic arena → ; '
               f'lifetime ↓ (top-level statements {lo}..{hi} of the lowered kernel)</text>')
    out.append("</svg>")
    return "".join(out)


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n / 1024:.1f} KiB"


# --------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:20px;color:#222;
background:#fff}
h1{font-size:20px;margin:0 0 6px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}
th{background:#f3f4f6}td.l,th.l{text-align:left}
td.ok{background:#e6f4ea}td.no{background:#fde8e8;font-weight:600}
.bind{font-family:ui-monospace,monospace;font-size:11px;color:#444;text-align:left;
min-width:14em;max-width:24em}
details{margin:6px 0 12px;border:1px solid #ddd;border-radius:4px;padding:4px 10px}
summary{cursor:pointer;font-weight:600}
.note{color:#555;font-size:12.5px;margin:2px 0 6px}
.warn{color:#a00}
.legend span{display:inline-block;margin-right:12px;font-size:12.5px}
.sw{display:inline-block;width:14px;height:14px;vertical-align:-2px;margin-right:4px;
border-radius:2px}
svg text{font-family:system-ui,sans-serif}
svg .rowlabel{font-size:11.5px;font-family:ui-monospace,monospace}
svg .it{font-size:11px;fill:#fff;font-weight:600}
svg .sec{font-size:11px;fill:#333}
svg .colhead{font-size:11px;fill:#333}
svg .marktext{font-size:9.5px}
svg .buftext{font-size:10.5px;fill:#111}
svg .axis{font-size:11px;fill:#444}
"""


def _instance_key(kr: KernelResult) -> Tuple[str, int, str]:
    return (kr.kernel.name, kr.kernel.span.line, kr.config_label)


def _bindings_text(kr: KernelResult) -> str:
    return ", ".join(f"{n}={v}" for n, v in kr.bindings)


def _num(x: Optional[int]) -> str:
    return "?" if x is None else str(x)


def table_rows(analyses: Sequence[Analysis], settings: Sequence[Optional[Settings]] = (),
               envs: Optional[Sequence[Dict[Tuple[str, int, str], InstanceView]]] = None
               ) -> List[Dict[str, object]]:
    """One row per instance × target, in the page's order (every instance of
    the first analysis, then each target's)."""
    sets = list(settings) + [None] * (len(analyses) - len(settings))
    views = list(envs) if envs is not None else [instance_envs(a, st)
                                                  for a, st in zip(analyses, sets, strict=False)]
    by_target = [(a.target, v, {_instance_key(kr): kr for kr in a.kernels})
                 for a, v in zip(analyses, views, strict=False)]
    keys: List[Tuple[str, int, str]] = []
    for a in analyses:
        for kr in a.kernels:
            if _instance_key(kr) not in keys:
                keys.append(_instance_key(kr))
    rows = []
    for key in keys:
        for target, view, krs in by_target:
            hit = krs.get(key)
            if hit is None:
                continue
            occ = occupancy(hit, target, view.get(key, (hit.kernel, None))[1])
            rows.append({"kernel": key[0], "line": key[1], "instance": key[2] or "defaults",
                         "target": target, "bindings": _bindings_text(hit), "occ": occ,
                         "warp_specialized": hit.warp_specialized})
    return rows


def _table(analyses: Sequence[Analysis], settings: Sequence[Optional[Settings]],
           envs: Sequence[Dict[Tuple[str, int, str], InstanceView]]) -> str:
    head = ("<tr><th class='l'>kernel</th><th class='l'>instance</th>"
            "<th class='l'>bindings</th><th class='l'>target</th>"
            "<th>threads</th><th>arena B</th><th>shared B<br/>(+ static)</th>"
            "<th>limit B</th><th>fits</th><th>blocks/SM<br/>by shared</th>"
            "<th>blocks/SM<br/>by threads</th><th>blocks<br/>/SM</th>"
            "<th>fragment<br/>B/thread</th><th>registers/<br/>thread (est.)</th>"
            "<th>blocks/SM by<br/>regs (est.)</th></tr>")
    rows = table_rows(analyses, settings, envs)
    span: Dict[Tuple[object, object, object], int] = {}
    for r in rows:
        key = (r["kernel"], r["line"], r["instance"])
        span[key] = span.get(key, 0) + 1
    body = []
    started: set = set()
    for r in rows:
        occ = r["occ"]
        assert isinstance(occ, Occupancy)
        key = (r["kernel"], r["line"], r["instance"])
        fit = ("n/a" if occ.budget is None else "?") if occ.fits is None else \
            ("yes" if occ.fits else "NO")
        fit_cls = "fits" + ("" if occ.fits is None else (" ok" if occ.fits else " no"))
        regs = _na(None, occ) if occ.registers_estimate is None else \
            f"≥ {occ.registers_estimate}"
        if occ.registers_kept is not None and occ.registers_estimate is not None \
                and occ.registers_estimate > occ.registers_kept:
            regs += f" (over {occ.registers_kept}: spills to local memory)"
        threads = _num(occ.threads) + (" (WS)" if r["warp_specialized"] else "")
        first = ""
        if key not in started:
            started.add(key)
            n = span[key]
            first = (f'<td class="l kernel" rowspan="{n}">{_e(r["kernel"])} '
                     f'<small>(line {r["line"]})</small></td>'
                     f'<td class="l instance" rowspan="{n}">{_e(r["instance"])}</td>'
                     f'<td class="bind" rowspan="{n}">{_e(r["bindings"])}</td>')
        body.append(
            f'<tr data-kernel="{_e(r["kernel"])}" data-instance="{_e(r["instance"])}" '
            f'data-target="{_e(r["target"])}">{first}'
            f'<td class="l target">{_e(r["target"])}</td>'
            f'<td class="threads">{_e(threads)}</td>'
            f'<td class="arena">{_na(occ.arena_bytes, occ)}</td>'
            f'<td class="total">{_na(occ.total_bytes, occ)}</td>'
            f'<td class="limit">{_na(occ.budget, occ)}</td>'
            f'<td class="{fit_cls}">{fit}</td>'
            f'<td class="by-shared">{_na(occ.blocks_by_smem, occ)}</td>'
            f'<td class="by-threads">{_na(occ.blocks_by_threads, occ)}</td>'
            f'<td class="blocks"><b>{_na(occ.blocks, occ)}</b></td>'
            f'<td class="fragment">{_na(occ.fragment_bytes_per_thread, occ)}</td>'
            f'<td class="registers">{_e(regs)}</td>'
            f'<td class="by-registers">{_na(occ.blocks_by_registers, occ)}</td></tr>')
    note = ('<p class="note">shared B is what the launch needs (the dynamic arena plus static '
            '<code>__shared__</code>); a block also costs the 1 KB the system reserves, and '
            'shared memory is given in 128-byte units. Blocks per SM: the per-SM limits of '
            'shared memory, threads and blocks of the CUDA Programming Guide, counted as '
            "CUDA's occupancy calculator does. <b>Registers per thread are an estimate</b>: "
            'the fragment bytes '
            'each thread holds divided by 4, a lower bound (the compiler adds addresses, '
            'indices and mma operands); only ptxas knows the real count.</p>')
    return f"<table class='instances'>{head}{''.join(body)}</table>{note}"


def _na(x: Optional[int], occ: Occupancy) -> str:
    if x is None:
        return "n/a" if occ.budget is None or occ.threads is None else "?"
    return str(x)


def _colour_key(tl: Timeline) -> str:
    """The colours this timeline uses and what each means (a stage, a warpgroup)."""
    parts = [f'<span><i class="sw" style="background:{STAGE_COLOURS[i % len(STAGE_COLOURS)]}">'
             f'</i>{_e(name)}</span>' for i, name in enumerate(tl.colour_names) if name]
    return "<p class='legend'>" + "".join(parts) + "</p>" if parts else ""


def _legend() -> str:
    parts = [f'<span><i class="sw" style="background:{c}"></i>stage {i}</span>'
             for i, c in enumerate(STAGE_COLOURS[:4])]
    for kind, text in (("syncthreads", "__syncthreads"), ("wait", "cp_async_wait<N>"),
                       ("commit", "cp_async_commit"), ("mbarrier_wait", "mbarrier wait / arrive"),
                       ("flag_wait", "Ascend flag wait")):
        colour, dash = MARK_STYLE[kind]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<span><svg xmlns="http://www.w3.org/2000/svg" width="22" height="10">'
                     f'<line x1="0" y1="5" x2="22" y2="5" stroke="{colour}" stroke-width="2"'
                     f'{dash_attr}/></svg> {_e(text)}</span>')
    return "<p class='legend'>" + "".join(parts) + "</p>"


OPEN = ' open="open"'


def _instance_section(kr: KernelResult, target: str, open_: bool,
                      view: Optional[InstanceView]) -> str:
    k: Kernel = kr.kernel
    occ = occupancy(kr, target, None if view is None else view[1])
    label = kr.config_label or "defaults"
    if kr.ascend is not None:
        vers = ", ".join(f"{b}×{n}" for b, n in kr.ascend.versions) or "no versioned buffer"
        summary = f"{_e(k.name)} — {_e(label)} — {_e(target)}: {_e(vers)}"
    else:
        summary = (f"{_e(k.name)} — {_e(label)} — shared {_num(occ.total_bytes)} B"
                   + ("" if occ.fits is None else (" fits" if occ.fits else " DOES NOT FIT"))
                   + f" {_e(target)}")
    out = [f'<details class="instance" data-kernel="{_e(k.name)}" data-target="{_e(target)}"'
           f'{OPEN if open_ else ""}><summary>{summary}</summary>']
    out.append(f"<p class='note'>bindings: <code>{_e(_bindings_text(kr)) or '—'}</code></p>")
    if kr.branches:
        from .render import branch_text, open_claim_text
        warn = " class='warn'"
        out.append("<ul class='branches'>" + "".join(
            f"<li{'' if b.decided else warn}>{_e(branch_text(b))}</li>"
            for b in kr.branches) + "".join(
            f"<li{warn}>{_e(open_claim_text(c))}</li>" for c in kr.open_claims) + "</ul>")
    if kr.ascend is not None:
        for n, lp in enumerate(kr.ascend.loops):
            tl = ascend_timeline(kr, lp, n == 0)
            if tl is not None:
                out.append(f"<h3>loop line {lp.line}</h3><p class='note'>{_e(tl.caption)}</p>"
                           + _colour_key(tl))
                out.append(timeline_svg(tl, f"loop line {lp.line}"))
    for li, lr in enumerate(kr.loops if kr.ascend is None else ()):
        head = f"loop line {lr.loop.span.line}"
        if not lr.pipelined:
            out.append(f"<h3>{head}</h3><p class='note'>not pipelined"
                       f"{': ' + _e(lr.note) if lr.note else ''}</p>")
            continue
        if lr.rejected:
            out.append(f"<h3>{head}</h3><p class='note warn'>{_e(lr.note)}</p>")
            continue
        tl = cuda_timeline(kr, li, target, instance=view or (kr.kernel, None))
        desc = (f"num_stages={_num(lr.num_stages)}, depth {_num(lr.depth)}"
                + (", manual order/stage" if lr.manual else "")
                + (", warp-specialized" if lr.warp_specialized else ""))
        out.append(f"<h3>{head} <small>({_e(desc)})</small></h3>")
        if tl is None:
            out.append("<p class='note'>no timeline: the schedule is not known"
                       f"{': ' + _e(lr.note) if lr.note else ''}</p>")
            continue
        out.append(f"<p class='note'>{_e(tl.caption)}</p>" + _colour_key(tl))
        if tl.note:
            out.append(f"<p class='note warn'>{_e(tl.note)}</p>")
        out.append(f'<div class="tl" data-loop="{lr.loop.span.line}">'
                   f'{timeline_svg(tl, head)}</div>')
    arena = arena_svg(kr, target)
    if arena is not None:
        out.append(f"<h3>shared-memory arena</h3><div class='arena-map'>{arena}</div>")
    elif kr.ascend is None:
        out.append("<p class='note'>no arena map: no shared buffer with a known offset</p>")
    out.append("</details>")
    return "".join(out)


def explain_page(analyses: Sequence[Analysis], title: str,
                 settings: Sequence[Optional[Settings]] = ()) -> str:
    """The whole page for one file analysed once per target (``analyses``,
    every instance: ``Settings.all_bindings``; ``settings``: the Settings each
    was analysed with, for the instances' values)."""
    targets = [a.target for a in analyses]
    sets = list(settings) + [None] * (len(analyses) - len(settings))
    envs = [instance_envs(a, st) for a, st in zip(analyses, sets, strict=False)]
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"/>',
           f"<title>tilelint explain — {_e(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>tilelint explain — {_e(title)}</h1>",
           f"<p class='note'>targets: {_e(', '.join(targets))}. Timelines: the emitted steps "
           f"across, the loop's statements down; a cell is the iteration the statement runs "
           f"in that step, coloured by its stage; lines are the sync calls where the "
           f"compiler emits them.</p>", _legend(),
           "<h2>instances × targets</h2>", _table(analyses, sets, envs)]
    for a, views in zip(analyses, envs, strict=True):
        out.append(f"<h2>target {_e(a.target)}</h2>")
        if not a.kernels:
            out.append("<p class='note'>no TileLang kernels found</p>")
        seen: set = set()
        for kr in a.kernels:
            first = kr.kernel.name not in seen
            seen.add(kr.kernel.name)
            try:
                out.append(_instance_section(kr, a.target, first,
                                             views.get(_instance_key(kr))))
            except Exception as exc:  # noqa: BLE001 - a bug of ours: the rest of the page stands
                out.append(f"<p class='note warn'>{_e(kr.kernel.name)}: could not draw this "
                           f"instance ({_e(type(exc).__name__)}: {_e(exc)})</p>")
        if a.diagnostics:
            out.append("<h3>diagnostics</h3><ul class='diags'>")
            for d in a.diagnostics:
                out.append(f"<li>{d.span.line}:{d.span.col + 1}: <b>{_e(d.code)}</b> "
                           f"[{_e(d.severity)}] {_e(d.message)}</li>")
            out.append("</ul>")
    out.append("</body></html>\n")
    return "".join(out)
