"""A cycle model of what synchronisation costs a software pipeline (pure, no I/O).

This is a *model, not a measurement*: abstract cycles from a greedy
two-lane simulation (a copy lane that issues loads, a compute lane that
consumes them), the model behind the textbook chapter's §5.2 table
("多一个同步为什么掉性能").  The chapter's own script is not available; this is
a reconstruction written from the rules below, and it reproduces the chapter's
table exactly for its parameters (issue=1, latency=30, compute=20, barrier=8,
iterations=16): see ``tests/test_cost.py``.

The rules, per iteration ``i`` of a loop with ``depth`` buffer slots:

* the copy lane issues load ``i`` at ``issue_at[i]``; issuing takes ``issue``
  cycles of the lane, so ``issue_at[i] >= issue_at[i-1] + issue``;
* the data is ready ``latency`` cycles after the issue:
  ``ready[i] = issue_at[i] + latency``;
* compute ``i`` starts when its data is ready and the previous compute is
  done, and takes ``compute`` cycles: ``end[i] = start[i] + compute``.

The variants add barriers (``barrier`` cycles each) on top of that:

``none``
    no synchronisation at all (incorrect; the lower bound);
``war``
    the release barrier: load ``i`` reuses the slot of iteration
    ``i - depth`` and may only be issued ``barrier`` cycles after that
    compute ended;
``war+raw``
    also the acquire barrier: compute ``i`` starts ``barrier`` cycles after
    its data is ready;
``+cb``
    also one barrier more in the consumer chain: compute ``i`` starts at the
    earliest ``barrier`` cycles after compute ``i - 1`` ended;
``sync-copy``
    the copies are synchronous (a barrier after each statement): the copy
    lane cannot issue load ``i`` before load ``i - 1`` has arrived and a
    barrier has passed (plus everything of ``+cb``).

The total is when the last compute ends; the steady-state step is the mean
distance between consecutive compute ends over the second half of the loop
(``iterations // 2`` .. ``iterations - 1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

VARIANTS: Tuple[str, ...] = ("none", "war", "war+raw", "+cb", "sync-copy")

# The chapter's parameters (§5.2).
CHAPTER_PARAMS = dict(issue=1, latency=30, compute=20, barrier=8, iterations=16)

LABEL = "model, not a measurement"


@dataclass(frozen=True)
class CostParams:
    issue: int = 1
    latency: int = 30
    compute: int = 20
    barrier: int = 8
    iterations: int = 16


@dataclass(frozen=True)
class CostResult:
    variant: str
    depth: int
    total: int  # cycles until the last compute ends
    steady: float  # mean step over the second half of the loop
    ends: Tuple[int, ...]  # when each compute ends


def simulate(variant: str, depth: int, params: CostParams = CostParams()) -> CostResult:
    """Run the greedy two-lane model for one variant and pipeline depth."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; one of {', '.join(VARIANTS)}")
    depth = max(1, int(depth))
    n = max(1, int(params.iterations))
    war = variant != "none"
    raw = variant in ("war+raw", "+cb", "sync-copy")
    chain = variant in ("+cb", "sync-copy")
    sync_copy = variant == "sync-copy"
    b = params.barrier
    issue_at: List[int] = []
    ready: List[int] = []
    ends: List[int] = []
    for i in range(n):
        t = 0 if i == 0 else issue_at[i - 1] + params.issue
        if war and i >= depth:
            t = max(t, ends[i - depth] + b)
        if sync_copy and i > 0:
            t = max(t, ready[i - 1] + b)
        issue_at.append(t)
        ready.append(t + params.latency)
        start = ready[i] + (b if raw else 0)
        if i > 0:
            start = max(start, ends[i - 1] + (b if chain else 0))
        ends.append(start + params.compute)
    half = ends[n // 2:]
    if len(half) >= 2:
        steady = (half[-1] - half[0]) / (len(half) - 1)
    else:
        steady = float(ends[-1])
    return CostResult(variant, depth, ends[-1], steady, tuple(ends))


def table(depths: Sequence[int] = (3, 6), params: CostParams = CostParams(),
          variants: Sequence[str] = VARIANTS) -> List[List[CostResult]]:
    """One row per depth, one result per variant."""
    return [[simulate(v, d, params) for v in variants] for d in depths]


def render_table(depths: Sequence[int] = (3, 6), params: CostParams = CostParams(),
                 variants: Sequence[str] = VARIANTS, title: Optional[str] = None) -> str:
    """The chapter-style text table: total cycles, then steady-state steps."""
    rows = table(depths, params, variants)
    head = (title or "sync cost") + (
        f" ({LABEL}: greedy two-lane cycle model, issue={params.issue}, "
        f"latency={params.latency}, compute={params.compute}, barrier={params.barrier}, "
        f"iterations={params.iterations}; abstract cycles)")
    width = max(9, max(len(v) for v in variants) + 1)
    lines = [head, "depth | " + " | ".join(v.rjust(width) for v in variants)]
    for d, row in zip(depths, rows, strict=True):
        lines.append(f"{d:5d} | " + " | ".join(f"{r.total}cyc".rjust(width) for r in row))
    lines.append("steady-state step (mean of the second half of the loop):")
    for d, row in zip(depths, rows, strict=True):
        lines.append(f"  depth={d}: " + "  ".join(f"{r.variant}={r.steady:.1f}" for r in row))
    return "\n".join(lines) + "\n"


def as_dict(depths: Sequence[int] = (3, 6), params: CostParams = CostParams(),
            variants: Sequence[str] = VARIANTS) -> Dict[str, object]:
    rows = table(depths, params, variants)
    return {
        "label": LABEL,
        "params": dict(issue=params.issue, latency=params.latency, compute=params.compute,
                       barrier=params.barrier, iterations=params.iterations),
        "rows": [{"depth": d, "total": {r.variant: r.total for r in row},
                  "steady": {r.variant: round(r.steady, 3) for r in row}}
                 for d, row in zip(depths, rows, strict=True)],
    }

