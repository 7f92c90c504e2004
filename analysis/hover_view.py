"""Hover pieces for a pipelined loop: the schedule as one row per statement,
the summary line, and where the sync calls of the emitted code sit around
each statement.  Pure text from analysis results (the server adds Markdown
links and fences)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .model import Kernel, KernelResult, LoopResult, LoopSync, ScheduledStmt
from .schedule import BODY, EPILOGUE, PROLOGUE, modulo_schedule

WIDTH = 100  # the widest hover line


def cut(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _spread(items: Sequence[str]) -> str:
    if not items:
        return "—"
    if len(items) <= 3:
        return ", ".join(items)
    return f"{items[0]} … {items[-1]}"


def _offset(var: str, off: int) -> str:
    if off == 0:
        return var
    return f"{var}+{off}" if off > 0 else f"{var}{off}"


@dataclass(frozen=True)
class ScheduleRow:
    """One statement of a pipelined loop: where it runs in each part of the
    emitted code (``prologue``/``epilogue``: the logical iterations of the
    unrolled steps, ``—`` when it runs in none; ``steady``: the iteration one
    pass of the generated loop runs it for)."""

    stmt: ScheduledStmt
    prologue: str
    steady: str
    epilogue: str


def schedule_rows(lr: LoopResult) -> List[ScheduleRow]:
    """InjectSoftwarePipeline's placement, one row per statement in issue
    order: with max stage M, a statement of stage s runs logical iteration
    p - s at prologue step p (p < M), iteration k + M - s in the generated
    loop, and iteration n - (s - e) at epilogue step e (e < s)."""
    staged = [s for s in lr.statements if s.stage is not None]
    if not staged:
        return []
    max_stage = max(s.stage for s in staged if s.stage is not None)
    ordered = sorted(enumerate(staged), key=lambda p: (p[1].order if p[1].order is not None
                                                       else 0, p[0]))
    var = lr.loop.var
    rows = []
    for _, s in ordered:
        stage = s.stage or 0
        pro = [str(p - stage) for p in range(max_stage) if p >= stage]
        epi = [_offset("n", -(stage - e)) for e in range(max_stage) if stage > e]
        rows.append(ScheduleRow(s, _spread(pro), _offset(var, max_stage - stage), _spread(epi)))
    return rows


def _sync_words(s: LoopSync, short: bool = False) -> List[str]:
    out = []
    if s.syncthreads:
        out.append(f"{s.syncthreads} " + ("sync" if short else "__syncthreads"))
    if s.cp_async_commit:
        out.append(f"{s.cp_async_commit} commit" + ("s" if s.cp_async_commit != 1 else ""))
    if s.cp_async_wait:
        out.append(("wait " if short else "wait_group ")
                   + ", ".join(str(n) for n in s.cp_async_wait))
    if s.mbarrier_wait:
        out.append(f"{s.mbarrier_wait} mbarrier wait" + ("s" if s.mbarrier_wait != 1 else ""))
    return out


def multiplied(lr: LoopResult) -> List[Tuple[int, List[str]]]:
    """(versions, buffers) for the buffers with more than one version, most first."""
    groups: Dict[int, List[str]] = {}
    for v in lr.versions:
        if v.versions > 1:
            groups.setdefault(v.versions, []).append(v.buffer)
    return sorted(groups.items(), key=lambda kv: -kv[0])


def summary_parts(kr: KernelResult, lr: LoopResult, width: int = WIDTH) -> List[str]:
    """The loop's one-line summary as parts (joined with `` · ``): depth, the
    buffers with more than one version, shared memory per block against the
    target's limit, the sync of one iteration of the generated loop.  The
    buffer list and the sync words are shortened until the line fits ``width``."""
    head = [f"depth {lr.depth}" if lr.depth is not None else "depth ?"]
    total = kr.shared_total
    smem = []
    if total is not None:
        smem.append(f"smem {total} of {kr.shared_budget} B" if kr.shared_budget
                    else f"smem {total} B")

    def sync(short: bool) -> List[str]:
        if lr.sync is None:
            return []
        words = _sync_words(lr.sync, short)
        return ["per iteration " + (", ".join(words) if words else "no sync")]

    groups = multiplied(lr)

    def bufs(limit: Optional[int]) -> List[str]:
        out = []
        for n, names in groups:
            shown = names if limit is None else names[:limit]
            more = len(names) - len(shown)
            out.append(f"×{n} " + " ".join(shown) + (f" +{more}" if more else ""))
        return out

    for limit in (None, 3, 2, 1, 0):
        for short in (False, True):
            parts = head + bufs(limit) + smem + sync(short)
            if len(" · ".join(parts)) <= width:
                return parts
    n = sum(len(names) for _, names in groups)
    return head + [f"{n} buffers multiplied"] + smem + sync(True)


# --------------------------------------------------------------------------
# Sync around each statement (from sync_cuda.render_preview's text)
# --------------------------------------------------------------------------

_SYNC = re.compile(r"^(__syncthreads\(\);|cp_async_commit\(\);|cp_async_wait<\d+>\(\);"
                   r"|mbarrier\[.*\]\.(wait|arrive)\(.*\);)")
_STMT = re.compile(r"//\s*iteration |^tma_\w+\(|^/\* .* \*/$")


@dataclass(frozen=True)
class Placement:
    """One emitted instance of a statement: its part of the code (prologue,
    body, epilogue), the unrolled step (0 in the body), the preview's line for
    it, and the sync calls right before and after it (up to the neighbouring
    statements)."""

    section: str
    step: int
    code: str
    before: Tuple[str, ...]
    after: Tuple[str, ...]


def _lines(preview: str) -> List[Tuple[str, str]]:
    """(kind, text) per preview line: sync, stmt or other."""
    out = []
    for raw in preview.splitlines():
        t = raw.strip()
        if _SYNC.match(t):
            out.append(("sync", t))
        elif _STMT.search(t):
            out.append(("stmt", t))
        else:
            out.append(("other", t))
    return out


def placements(kernel: Kernel, lr: LoopResult, preview: str) -> Dict[int, List[Placement]]:
    """Statement index (in ``lr.statements``) → its emitted instances in the
    preview, each with the sync calls right around it.  Empty when the preview
    and the schedule do not line up (the preview is then shown whole)."""
    from .sync_cuda import is_async_copy
    if not preview:
        return {}
    if lr.warp_specialized:
        index = {id(s): i for i, s in enumerate(lr.statements)}
        body = sorted(lr.statements, key=lambda s: s.order or 0)
        seq = [(BODY, 0, index[id(s)]) for s in body if is_async_copy(s.stmt, kernel)]
        seq += [(BODY, 0, index[id(s)]) for s in body if not is_async_copy(s.stmt, kernel)]
    else:
        sched = modulo_schedule(lr)
        if sched is None:
            return {}
        seq = [(PROLOGUE, r.step, r.index) for step in sched.prologue for r in step]
        seq += [(BODY, 0, r.index) for r in sched.body]
        seq += [(EPILOGUE, r.step, r.index) for step in sched.epilogue for r in step]
    lines = _lines(preview)
    stmt_at = [i for i, (kind, _) in enumerate(lines) if kind == "stmt"]
    if len(stmt_at) != len(seq):
        return {}
    out: Dict[int, List[Placement]] = {}
    for (section, step, idx), at in zip(seq, stmt_at, strict=True):
        before: List[str] = []
        i = at - 1
        while i >= 0 and lines[i][0] == "sync":
            before.insert(0, lines[i][1])
            i -= 1
        after: List[str] = []
        i = at + 1
        while i < len(lines) and lines[i][0] == "sync":
            after.append(lines[i][1])
            i += 1
        out.setdefault(idx, []).append(Placement(section, step, lines[at][1], tuple(before),
                                                 tuple(after)))
    return out


def steady_body(preview: str) -> Tuple[str, str, str]:
    """The preview cut in three: the code before the generated loop, the
    loop itself (its ``for`` line to its closing brace, both at column 0),
    the code after it.  A preview without such a loop (warp-specialized:
    the loops sit in the producer and consumer branches) is all body."""
    lines = preview.rstrip("\n").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("for (")), None)
    if start is None:
        return "", "\n".join(lines), ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i] == "}"), len(lines) - 1)
    return ("\n".join(lines[:start]), "\n".join(lines[start:end + 1]),
            "\n".join(lines[end + 1:]))


_CALL = re.compile(r"^\s*(?:tl::)?([A-Za-z_]\w*)\s*[(<]")


def call_counts(code: str) -> List[Tuple[str, int]]:
    """How many times each call starts a line of ``code``, in first-seen order
    (comments, statement placeholders and braces aside)."""
    counts: Dict[str, int] = {}
    for ln in code.splitlines():
        m = _CALL.match(ln)
        if m and m.group(1) not in ("for", "if", "while"):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return list(counts.items())
