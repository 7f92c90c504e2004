"""The what-if engine: one kernel instance planned again with other ``num_stages``.

For each value the instance is planned the way ``pipeline.analyze_kernel`` plans
it (the active view, sm_90 warp specialization decided again for that value,
planning, versions: ``packing.plan_instance``), then packed and synchronised.
Each value gives a :class:`WhatIf`: the buffer versions, the arena and static
bytes, whether that fits each CUDA target's budget, the sync the compiler would
emit, and the planned loops themselves (for a per-loop table).

``tilelint explain --sweep num_stages=…`` and the language server's hover over
``num_stages=`` both call :func:`sweep_num_stages`; nothing here re-parses or
re-analyses the file.  Pure and never raising on bad code: a value whose
planning fails is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from . import packing, sync_cuda, targets as targets_mod
from .model import Kernel, KernelSync, LoopResult, LoopSync
from .values import Env


@dataclass(frozen=True)
class WhatIf:
    """One kernel instance with ``num_stages`` forced to one value."""

    num_stages: int
    versions: Tuple[Tuple[str, int], ...]  # (buffer, versions), sorted by buffer
    arena_bytes: Optional[int]  # dynamic shared memory
    static_bytes: int  # static ``__shared__`` bytes (mbarriers included)
    fits: Tuple[Tuple[str, bool], ...]  # (target, total fits its opt-in budget)
    # The sync the compiler emits for this value (sync_cuda.kernel_sync):
    # kernel-wide counts and one LoopSync per pipelined loop; None off CUDA.
    sync: Optional[KernelSync] = None
    loop_sync: Tuple[LoopSync, ...] = ()
    depths: Tuple[Optional[int], ...] = ()  # pipeline depth of each pipelined loop
    loops: Tuple[LoopResult, ...] = ()  # the planned pipelined loops, in order

    @property
    def total_bytes(self) -> Optional[int]:
        """Shared memory per block (arena + static), what the budget applies to."""
        return None if self.arena_bytes is None else self.arena_bytes + self.static_bytes

    def loop_at(self, line: int) -> Tuple[Optional[LoopResult], Optional[LoopSync]]:
        """The planned loop whose ``for`` is on ``line`` and its sync (if modelled)."""
        for i, lr in enumerate(self.loops):
            if lr.loop.span.line == line:
                return lr, (self.loop_sync[i] if i < len(self.loop_sync) else None)
        return None, None


def sweep_num_stages(kernel: Kernel, env: Env, values: Iterable[int], target: str,
                     loop_line: Optional[int] = None,
                     check_targets: Sequence[str] = targets_mod.CUDA_TARGETS) -> List[WhatIf]:
    """One :class:`WhatIf` per value of ``values`` (in order).  ``num_stages`` is
    forced on every pipelined loop, or only on the loop whose ``for`` is on
    ``loop_line``; loops with a manual order/stage keep theirs."""
    tinfo = targets_mod.get(target)
    cuda = tinfo is not None and tinfo.kind == "cuda"
    out: List[WhatIf] = []
    for ns in values:
        try:
            view, loops, ws = packing.plan_instance(kernel, env, target, ns, loop_line)
        except Exception:  # noqa: BLE001 - a value that cannot be planned is left out
            continue
        out.append(_point(view, env, loops, ns, target, ws, cuda, check_targets))
    return out


def _point(view: Kernel, env: Env, loops: Sequence[LoopResult], ns: int, target: str, ws: bool,
           cuda: bool, check_targets: Sequence[str]) -> WhatIf:
    pack = packing.pack_kernel(view, env, loops, target, ws)
    fits = []
    for t in check_targets:
        budget = targets_mod.budget(t)
        fits.append((t, pack.total_bytes is not None and budget is not None
                     and pack.total_bytes <= budget))
    ksync: Optional[KernelSync] = None
    lsync: Sequence[LoopSync] = ()
    if cuda:
        ksync, lsync = sync_cuda.kernel_sync(view, env, loops, target, ws, pack)
    return WhatIf(
        num_stages=ns,
        versions=tuple(sorted(packing.buffer_versions(loops).items())),
        arena_bytes=pack.arena_bytes if cuda else None,
        static_bytes=pack.static_bytes if cuda else 0,
        fits=tuple(fits),
        sync=ksync,
        loop_sync=tuple(lsync),
        depths=tuple(lr.depth if lr.pipelined else None for lr in loops),
        loops=tuple(loops),
    )
