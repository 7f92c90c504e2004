"""The modulo schedule of a planned ``T.Pipelined`` loop, as InjectSoftwarePipeline emits it.

The compiler skews the loop: with ``max_stage`` = the largest stage, a statement of
stage ``s`` runs, at skewed step ``i``, the logical iteration ``i - s``.  The emitted
code is

* a prologue of ``max_stage`` unrolled steps ``p = 0 .. max_stage-1``: the statements
  with ``s <= p``, logical iteration ``p - s``;
* the steady-state loop ``for k in range(extent - max_stage)``: every statement,
  logical iteration ``k + max_stage - s`` (buffer version ``(k + max_stage - s) % V``);
* an epilogue of ``max_stage`` unrolled steps ``e = 0 .. max_stage-1``: the statements
  with ``s > e``, logical iteration ``extent + e - s`` (written ``n-1``, ``n-2`` …).

Inside each step statements are emitted in ``order`` order (measured on GEMM/flash
fixtures: prologue ``A0 B0 commit A1 B1 commit``, body copies at ``(k + 2) % 3``, gemm at
``k % 3``).  Plain data; nothing here knows the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .model import LoopResult, ScheduledStmt, Stmt

PROLOGUE = "prologue"
BODY = "body"
EPILOGUE = "epilogue"


@dataclass(frozen=True)
class Row:
    """One emitted statement instance.

    ``section`` is prologue/body/epilogue, ``step`` the unrolled step inside the
    prologue/epilogue (0 in the body), ``index`` the statement's position in
    ``LoopResult.statements``.  The logical iteration is ``base + offset`` where
    ``base`` is ``0`` in the prologue, ``k`` in the body and ``n`` (the trip count)
    in the epilogue: e.g. body ``offset=2`` is iteration ``k+2``, epilogue
    ``offset=-1`` is ``n-1``.
    """

    section: str
    step: int
    index: int
    stmt: Stmt
    stage: int
    order: int
    offset: int

    def iteration_text(self, var: str = "k") -> str:
        if self.section == PROLOGUE:
            return str(self.offset)
        if self.section == BODY:
            return var if self.offset == 0 else f"{var} + {self.offset}"
        return "n" if self.offset == 0 else f"n - {-self.offset}"


@dataclass(frozen=True)
class Schedule:
    var: str
    max_stage: int
    prologue: Tuple[Tuple[Row, ...], ...]  # one tuple per step
    body: Tuple[Row, ...]
    epilogue: Tuple[Tuple[Row, ...], ...]
    trip_count: Optional[int] = None  # extent of the original loop, if known

    @property
    def depth(self) -> int:
        return self.max_stage + 1

    def rows(self) -> Tuple[Row, ...]:
        out: list[Row] = []
        for step in self.prologue:
            out.extend(step)
        out.extend(self.body)
        for step in self.epilogue:
            out.extend(step)
        return tuple(out)


def modulo_schedule(loop_result: LoopResult, trip_count: Optional[int] = None) -> Optional[Schedule]:
    """The schedule of a pipelined loop, or None when it is not pipelined or a
    statement has no stage/order.  ``trip_count`` is only recorded (for display)."""
    if not loop_result.pipelined or not loop_result.statements:
        return None
    # (order, index, stage, statement): stage and order are known here.
    items: list[tuple[int, int, int, ScheduledStmt]] = []
    for idx, st in enumerate(loop_result.statements):
        if st.stage is None or st.order is None:
            return None
        items.append((st.order, idx, st.stage, st))
    items.sort(key=lambda t: (t[0], t[1]))
    max_stage = max(stage for _, _, stage, _ in items)

    def row(section: str, step: int, idx: int, st: ScheduledStmt, stage: int, order: int,
            offset: int) -> Row:
        return Row(section, step, idx, st.stmt, stage, order, offset)

    prologue = []
    for p in range(max_stage):
        prologue.append(tuple(row(PROLOGUE, p, idx, st, stage, order, p - stage)
                              for order, idx, stage, st in items if stage <= p))
    body = tuple(row(BODY, 0, idx, st, stage, order, max_stage - stage)
                 for order, idx, stage, st in items)
    epilogue = []
    for e in range(max_stage):
        epilogue.append(tuple(row(EPILOGUE, e, idx, st, stage, order, e - stage)
                              for order, idx, stage, st in items if stage > e))
    return Schedule(loop_result.loop.var, max_stage, tuple(prologue), body, tuple(epilogue),
                    trip_count)
