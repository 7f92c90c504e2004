"""The pipeline checks: TL101–TL111 and TL114 on a planned loop
(:func:`validate_loop`), and the diagnostics for the errors planning returns
as data, TL104/TL108/TL112 (:func:`planning_diagnostic`).

Each check mirrors a compiler behaviour of tilelang 0.1.15: a hard error in
``tl.PipelinePlanning`` / ``tl.InjectSoftwarePipeline``, or a silent decision
(a schedule that is ignored, a loop that is not pipelined) worth a warning.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .. import targets as targets_mod
from ..model import (
    Alloc,
    Diagnostic,
    Fix,
    Loop,
    LoopResult,
    Related,
    ScheduledStmt,
    Span,
    Stmt,
    walk_stmt,
)
from ..planning import (
    Accesses,
    PlanError,
    ScheduleLengthError,
    StageConflict,
    eval_int,
    is_conditional,
    is_copy_stage,
    is_global,
    is_shared,
    known_reads,
    pipelining_kept,
    stmt_accesses,
)
from ..values import Env
from .edits import remove_argument_edit, renumber_order_fix
from .registry import diagnostic


def validate_loop(result: LoopResult, allocs: Dict[str, Alloc], target: str,
                  env: Optional[Env] = None, source: Optional[str] = None) -> List[Diagnostic]:
    """TL101–TL111 for one planned loop (``plan_loop`` reports TL104/TL108/TL112)."""
    allocs = dict(allocs or {})
    loop = result.loop
    if loop.unsupported_kwargs:
        # A fork's T.Pipelined: nothing is built on its schedule (TL114 only).
        return [tl114(loop)]
    out = _argument_checks(result, target, env, source)
    manual = _given(loop.order) and _given(loop.stage)
    if not manual or result.warp_specialized or not result.statements:
        return out

    sts = list(result.statements)
    orders = [s.order for s in sts]
    stages = [s.stage for s in sts]
    duplicates = _duplicate_orders(loop, sts, orders, source)
    out += duplicates
    if any(x is None for x in orders + stages):
        return out
    known_orders = [o for o in orders if o is not None]  # all of them from here on
    known_stages = [s for s in stages if s is not None]
    accs = [stmt_accesses(s.stmt, env, allocs) for s in sts]
    out += _dependency_checks(sts, accs, known_orders, known_stages, bool(duplicates))
    out += _multiple_async_stages(sts, accs, known_stages, allocs, target)
    return out


# Statements that move or compute data in a buffer (layout inference gives each
# buffer they touch a layout); annotations such as T.annotate_layout do not count.
_DATA_KINDS = frozenset({"copy", "gemm", "fill", "reduce", "parallel", "store", "atomic"})


def outside_uses(body: Sequence[Stmt], loops: Sequence[LoopResult]) -> List[List[Diagnostic]]:
    """TL115, per loop of ``loops`` (the kernel's planned pipelined loops, in
    order; ``body`` the kernel's): a shared buffer that the loop keeps in two or
    more versions and that is also touched with another number of versions,
    which layout inference rejects.  Two uses are checked, both measured:
    * a data statement outside every pipelined loop (one version): the first
      such statement gets the finding;
    * an earlier pipelined loop that keeps the buffer in another number of
      versions (3 and 2; on sm_90 the warp-specialized loop's 2 and the next
      loop's 2 x 2): the first statement of this loop touching it does.
    Uses in the other branch of an ``if`` than the loop are not counted: a
    condition known when the kernel is traced keeps only one branch."""
    out: List[List[Diagnostic]] = [[] for _ in loops]
    branches = _branch_paths(body)
    outside = _outside_pipelined(body)
    seen: Dict[str, Tuple[int, LoopResult]] = {}  # buffer -> (versions, its first loop)
    for i, lr in enumerate(loops):
        if not lr.pipelined or lr.rejected or not _versions_known(lr):
            continue
        here = branches.get(lr.loop.span.line, ())
        counts = {bv.buffer: bv.versions for bv in lr.versions}
        multi = {b: n for b, n in counts.items() if n > 1}
        for st in outside:
            touched = sorted({a.buffer for a in st.reads + st.writes} & multi.keys())
            if touched and not _exclusive(here, branches.get(st.span.line, ())):
                out[i].append(_tl115(st, touched, multi, lr, None))
                break
        clash = sorted(b for b, n in counts.items()
                       if b in seen and seen[b][0] != n and max(n, seen[b][0]) > 1
                       and not _exclusive(here, branches.get(seen[b][1].loop.span.line, ())))
        if clash and not out[i]:
            first = next((st for st in _loop_data(lr)
                          if {a.buffer for a in st.reads + st.writes} & set(clash)), None)
            if first is not None:
                out[i].append(_tl115(first, clash, counts, lr, seen[clash[0]]))
        for b, n in counts.items():
            seen.setdefault(b, (n, lr))
    return out


def _versions_known(lr: LoopResult) -> bool:
    """Are the loop's version counts the compiler's: warp-specialized (from
    num_stages), or every statement's stage and order known (an unknown one
    leaves the counts a placeholder)?"""
    return lr.warp_specialized or (bool(lr.statements) and all(
        s.stage is not None and s.order is not None for s in lr.statements))


# A statement's place among the kernel's if/else branches: ((line of the if,
# branch), ...), outermost first; branch 0 is the if's body, 1 its else.
Branches = Tuple[Tuple[int, int], ...]


def _branch_paths(stmts: Sequence[Stmt], path: Branches = ()) -> Dict[int, Branches]:
    """First line of each statement -> its branch path."""
    out: Dict[int, Branches] = {}
    for st in stmts:
        out.setdefault(st.span.line, path)
        if st.kind == "if":
            split = st.else_index if st.else_index is not None else len(st.children)
            out.update(_branch_paths(st.children[:split], path + ((st.span.line, 0),)))
            out.update(_branch_paths(st.children[split:], path + ((st.span.line, 1),)))
        else:
            out.update(_branch_paths(st.children, path))
    return out


def _exclusive(a: Branches, b: Branches) -> bool:
    """Do two branch paths sit in different branches of one if?"""
    sides = dict(a)
    return any(line in sides and sides[line] != side for line, side in b)


def _tl115(st: Stmt, touched: Sequence[str], counts: Dict[str, int], lr: LoopResult,
           other: Optional[Tuple[int, LoopResult]]) -> Diagnostic:
    names = ", ".join(f"`{b}` (x{counts[b]})" for b in touched)
    be = "is" if len(touched) == 1 else "are"
    if other is None:
        where = (f"{names} {be} multi-versioned by the pipelined loop at line "
                 f"{lr.loop.span.line} and also used here, outside it")
        related = [Related(lr.loop.iter_span, "the loop that versions the buffer")]
        fix = "Use separate buffers outside the loop."
    else:
        n0, lr0 = other
        where = (f"{names} {be} versioned here, in the pipelined loop at line "
                 f"{lr.loop.span.line}, and x{n0} in the pipelined loop at line "
                 f"{lr0.loop.span.line}")
        related = [Related(lr0.loop.iter_span, f"the loop that keeps x{n0}")]
        fix = "Use separate buffers in the two loops."
    return diagnostic(
        "TL115", st.span,
        f"{where}: layout inference cannot give one buffer two numbers of versions, so "
        f"lowering fails (InputShape() vs shape). {fix}", related=related)


def _loop_data(lr: LoopResult) -> List[Stmt]:
    """The data statements of a planned loop's body, in order."""
    out: List[Stmt] = []
    for s in lr.statements:
        for st in walk_stmt(s.stmt):
            if st.kind in _DATA_KINDS:
                out.append(st)
    return out


def _outside_pipelined(stmts: Sequence[Stmt]) -> List[Stmt]:
    """The data statements of ``stmts`` that no T.Pipelined loop contains (and
    that contain none: a T.Parallel around a pipelined loop is not one)."""
    out: List[Stmt] = []
    for st in stmts:
        if _is_pipelined(st):
            continue
        if st.kind in _DATA_KINDS and not any(_is_pipelined(x) for x in walk_stmt(st)):
            out.append(st)
        out.extend(_outside_pipelined(st.children))
    return out


def _is_pipelined(st: Stmt) -> bool:
    return st.loop is not None and st.loop.kind == "pipelined"


def _given(entries: Optional[Sequence[object]]) -> bool:
    return entries is not None and len(entries) > 0


def _argument_checks(result: LoopResult, target: str, env: Optional[Env],
                     source: Optional[str]) -> List[Diagnostic]:
    """What the loop's arguments make the compiler do: TL109 (nested
    T.Pipelined), TL105 (order without stage or the reverse), TL110 (no
    pipelining on the target), TL111 (a manual schedule warp specialization
    ignores), TL106 (num_stages next to a manual schedule)."""
    loop = result.loop
    out: List[Diagnostic] = []
    has_order = _given(loop.order)
    has_stage = _given(loop.stage)
    ns = eval_int(env, loop.num_stages) if loop.num_stages is not None else None
    ns_given = loop.num_stages is not None and (ns is None or ns > 0)

    if loop.pipelined_ancestors > 0:
        out.append(diagnostic("TL109", loop.iter_span,
                              "T.Pipelined nested inside another T.Pipelined loop: "
                              "PipelinePlanning plans the outer loop and never looks inside "
                              "it, so this loop is not pipelined"))
    if has_order != has_stage:
        given, span = ("order", loop.order_span) if has_order else ("stage", loop.stage_span)
        missing = "stage" if has_order else "order"
        tail = ("the loop is planned from num_stages and the list is ignored" if ns_given
                else "the loop is silently not pipelined")
        out.append(diagnostic("TL105", span or loop.iter_span,
                              f"{given}= without {missing}=: the compiler uses a manual "
                              f"schedule only when both are given; {tail}"))
    if not pipelining_kept(target) and ns_given and not (has_order and has_stage):
        out.append(diagnostic("TL110", loop.num_stages_span or loop.iter_span,
                              f"software pipelining is disabled on {target}: PipelinePlanning "
                              f"drops num_stages and the loop runs unpipelined"))
    manual = has_order and has_stage
    if result.warp_specialized and manual:
        out.append(diagnostic("TL111", loop.order_span or loop.iter_span,
                              f"this loop is warp-specialized on {target} (TMA copies + "
                              "num_stages): the manual order/stage are ignored and num_stages "
                              "decides",
                              [Related(loop.num_stages_span, "num_stages makes the loop a "
                                       "warp-specialization candidate")]
                              if loop.num_stages_span else []))
    if manual and ns_given and loop.num_stages_span is not None:
        out.append(_tl106(loop, loop.num_stages_span, target, source))
    return out


def _tl106(loop: Loop, span: Span, target: str, source: Optional[str]) -> Diagnostic:
    fixes = []
    if source is not None:
        edit = remove_argument_edit(source, span)
        if edit is not None:
            fixes.append(Fix("Remove num_stages=", (edit,), preferred=True))
    tinfo = targets_mod.get(target)
    if tinfo is not None and tinfo.has_tma:
        how = (f"on {target} it makes the loop a warp-specialization candidate, which "
               "ignores the manual schedule when the copies are TMA-eligible")
    else:
        how = ("the manual schedule is used and num_stages stays on the loop: buffer "
               "versions follow the stages but the pipeline depth is num_stages")
    return diagnostic("TL106", span, f"num_stages given together with order/stage: {how}",
                      fixes=fixes)


def _duplicate_orders(loop: Loop, sts: Sequence[ScheduledStmt],
                      orders: Sequence[Optional[int]], source: Optional[str]
                      ) -> List[Diagnostic]:
    """TL101: duplicate orders, blamed on the later statement (source order)."""
    out: List[Diagnostic] = []
    first_with: Dict[int, int] = {}
    for i, o in enumerate(orders):
        if o is None:
            continue
        if o not in first_with:
            first_with[o] = i
            continue
        j = first_with[o]
        fix = renumber_order_fix(loop, orders, source)
        out.append(diagnostic("TL101", sts[i].stmt.span,
                              f"order {o} is also used by an earlier statement: two statements "
                              f"in the software pipeline cannot have the same order",
                              [Related(sts[j].stmt.span, f"also order {o}: {_short(sts[j].stmt)}"),
                               *([Related(loop.order_span, "the order list")]
                                 if loop.order_span else [])],
                              [fix] if fix is not None else []))
    return out


def _dependency_checks(sts: Sequence[ScheduledStmt], accs: Sequence[Accesses],
                       orders: Sequence[int], stages: Sequence[int],
                       duplicates: bool) -> List[Diagnostic]:
    """TL102 / TL103: read-after-write edges in source order (buffer level);
    one diagnostic per consumer, its offending producers as related
    locations.  TL103 is left out when TL101 already fired (the orders are
    not a schedule then)."""
    out: List[Diagnostic] = []
    for j in range(len(sts)):
        rbufs = {r.buffer for r in accs[j].reads}
        inv: List[Related] = []
        reo: List[Related] = []
        inv_buf = reo_buf = ""
        for i in range(j):
            common = sorted(rbufs & {w.buffer for w in accs[i].writes})
            if not common:
                continue
            buf = common[0]
            if stages[i] > stages[j]:
                inv.append(Related(sts[i].stmt.span, f"writes '{buf}' in stage {stages[i]}"))
                inv_buf = inv_buf or buf
            elif stages[i] == stages[j] and orders[i] >= orders[j]:
                reo.append(Related(sts[i].stmt.span, f"writes '{buf}' (order {orders[i]})"))
                reo_buf = reo_buf or buf
        if inv:
            out.append(diagnostic(
                "TL102", sts[j].stmt.span,
                f"this statement (stage {stages[j]}) reads '{inv_buf}', written by an earlier "
                f"statement in a later stage: a statement cannot depend on a statement in a "
                f"later stage", inv))
        elif reo and not duplicates:
            out.append(diagnostic(
                "TL103", sts[j].stmt.span,
                f"this statement (order {orders[j]}) reads '{reo_buf}', written by an earlier "
                f"statement of the same stage {stages[j]} with a later order: dependent "
                f"statements in one stage cannot be reordered", reo))
    return out


def _multiple_async_stages(sts: Sequence[ScheduledStmt], accs: Sequence[Accesses],
                           stages: Sequence[int], allocs: Dict[str, Alloc],
                           target: str) -> List[Diagnostic]:
    """TL107: a consumer of async copies from more than one stage (on targets
    with cp.async)."""
    tinfo = targets_mod.get(target)
    if tinfo is None or not tinfo.cp_async:
        return []
    out: List[Diagnostic] = []
    async_writes: Dict[int, Dict[str, int]] = {}
    for k, s in enumerate(sts):
        if _async_producer(s.stmt, stages[k], allocs):
            for w in accs[k].writes:
                async_writes.setdefault(stages[k], {}).setdefault(w.buffer, k)
    for j, s in enumerate(sts):
        if _async_producer(s.stmt, stages[j], allocs):
            continue
        hits: Dict[int, int] = {}
        sure = known_reads(s.stmt)  # never based on a call of unknown roles
        for r in accs[j].reads:
            if r.buffer not in sure:
                continue
            for stg, bufs in async_writes.items():
                if stg <= stages[j] and r.buffer in bufs:
                    hits.setdefault(stg, bufs[r.buffer])
        if len(hits) > 1:
            out.append(diagnostic(
                "TL107", s.stmt.span,
                "this statement reads buffers filled by async copies in stages "
                f"{', '.join(str(x) for x in sorted(hits))}: a dependency on multiple "
                "async stages is not supported",
                [Related(sts[k].stmt.span, f"async copy in stage {stg}")
                 for stg, k in sorted(hits.items())]))
    return out


def _async_producer(stmt: Stmt, stage: int, allocs: Dict[str, Alloc]) -> bool:
    if is_conditional(stmt):
        return False
    if is_copy_stage(stmt, allocs):
        return True
    if stage != 0:
        return False
    reads_global = any(is_global(a.buffer, allocs) for s in walk_stmt(stmt) for a in s.reads)
    writes_shared = any(is_shared(a.buffer, allocs) for s in walk_stmt(stmt) for a in s.writes)
    return reads_global and writes_shared


def _short(stmt: Stmt) -> str:
    return stmt.label or stmt.op


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def planning_diagnostic(err: PlanError) -> Diagnostic:
    """The diagnostic for an error ``planning.plan_loop`` returns."""
    if isinstance(err, ScheduleLengthError):
        return tl104(err)
    return tl108(err) if err.kind == "overlap" else tl112(err)


def tl104(err: ScheduleLengthError) -> Diagnostic:
    bad, counts, sched = err.bad, err.counts, err.sched
    replayable, inlined = err.replayable, err.inlined
    span = err.span
    if len(bad) == 2 and bad["order"] == bad["stage"]:
        what = f"order/stage have {_plural(bad['order'], 'entry', 'entries')}"
    else:
        what = " and ".join(f"{k} has {_plural(n, 'entry', 'entries')}"
                            for k, n in sorted(bad.items()))
    ok = [f"{counts.scheduled} (one per scheduled statement)"]
    if counts.executable != counts.scheduled:
        ok.append(f"{counts.executable} (also counting "
                  f"{_plural(counts.executable - counts.scheduled, 'replayable scalar bind')})")
    if counts.original != counts.executable:
        ok.append(f"{counts.original} (also counting "
                  f"{_plural(counts.original - counts.executable, 'buffer declaration')})")
    msg = f"{what} but this loop body accepts {' or '.join(ok)}"
    if inlined:
        msg += (f"; {_plural(len(inlined), 'bind')} inlined before planning "
                f"take{'s' if len(inlined) == 1 else ''} no entry")
    msg += ("; the compiler stops in PipelinePlanning: expected pipeline annotation size to "
            "match the scheduled statement count, executable statement count, or original "
            "statement count")
    related = [Related(s.span, f"scheduled statement {i}: {_short(s)}")
               for i, s in enumerate(sched)]
    related += [Related(s.span, f"replayable scalar bind (an entry only in the longer "
                                f"list): {_short(s)}") for s in replayable]
    related += [Related(s.span, f"inlined before planning, no entry: {_short(s)}")
                for s in inlined]
    return diagnostic("TL104", span, msg, related)


def tl114(loop: Loop) -> Diagnostic:
    names = [k for k, _ in loop.unsupported_kwargs]
    args = ", ".join(f"`{k}=`" for k in names)
    return diagnostic(
        "TL114", loop.unsupported_kwargs[0][1] if loop.unsupported_kwargs else loop.iter_span,
        f"{args} {'is not an argument' if len(names) == 1 else 'are not arguments'} of "
        f"T.Pipelined in tilelang 0.1.15 (a fork's extension, such as tilescale's): 0.1.15 "
        f"stops with a TypeError when it traces this loop, and tilelint does not model "
        f"what the fork does with {'it' if len(names) == 1 else 'them'}, so nothing is "
        f"reported on this loop's schedule")


def tl108(err: StageConflict) -> Diagnostic:
    related = [Related(err.other.span, f"copy stage writing the same region: {_short(err.other)}")] \
        if err.other is not None else []
    return diagnostic("TL108", err.span,
                 f"PipelinePlanning: multiple writes to overlapping buffer regions: "
                 f"{err.message}; this is not supported in pipeline planning", related)


def tl112(err: StageConflict) -> Diagnostic:
    related = [Related(err.other.span, f"its last consumer, moved to stage 0: {_short(err.other)}")] \
        if err.other is not None else []
    return diagnostic("TL112", err.span,
                 err.message + " (compiler: 'The number of stages should be equal to the "
                 "number of pipeline stages')", related)
