"""Targets: the one table of per-target facts the other passes consult.

Shared-memory budgets are the opt-in maximum of dynamic shared memory per block
(``cudaDevAttrMaxSharedMemoryPerBlockOptin``) from the CUDA C Programming Guide's
table of compute-capability limits: 163 KB on 8.0, 99 KB on 8.6/8.9, 227 KB on
9.0 (1 KB of each SM's shared memory stays reserved for the system).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # cuda | ascend | rocm
    arch: str
    smem_budget: Optional[int]  # bytes of opt-in dynamic shared memory per block
    has_tma: bool = False  # TMA + mbarrier: the sm_90 warp-specialized path exists
    pipelining: bool = True  # PipelinePlanning keeps num_stages on this target
    cp_async: bool = False
    # Ascend on-chip buffers, bytes.
    buffers: Tuple[Tuple[str, int], ...] = ()


_TARGETS: Dict[str, Target] = {
    "sm_80": Target("sm_80", "cuda", "sm_80", 166912, cp_async=True),
    "sm_86": Target("sm_86", "cuda", "sm_86", 101376, cp_async=True),
    "sm_89": Target("sm_89", "cuda", "sm_89", 101376, cp_async=True),
    "sm_90": Target("sm_90", "cuda", "sm_90", 232448, has_tma=True, cp_async=True),
    # PipelinePlanning drops num_stages on ROCm targets other than gfx950.
    "gfx942": Target("gfx942", "rocm", "gfx942", 65536, pipelining=False),
    "gfx950": Target("gfx950", "rocm", "gfx950", 163840),
    # Ascend 950 (dav-3510): on-chip buffer capacities in bytes.
    "ascend": Target("ascend", "ascend", "dav-3510", None, buffers=(
        ("L1", 512 * 1024), ("UB", 248 * 1024), ("L0A", 64 * 1024), ("L0B", 64 * 1024),
        ("L0C", 256 * 1024))),
}

CUDA_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")
ALL_TARGETS = tuple(_TARGETS)
DEFAULT_TARGET = "sm_80"


def get(name: str) -> Optional[Target]:
    return _TARGETS.get(normalise(name))


def normalise(name: str) -> str:
    n = (name or "").strip().lower()
    if n.startswith("sm") and not n.startswith("sm_"):
        n = "sm_" + n[2:]
    if n in ("hopper", "h100", "h200"):
        n = "sm_90"
    if n in ("ampere", "a100"):
        n = "sm_80"
    return n


def budget(name: str) -> Optional[int]:
    t = get(name)
    return None if t is None else t.smem_budget
