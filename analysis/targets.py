"""Targets: the one table of per-target facts the other passes consult.

Shared-memory budgets are the opt-in maximum of dynamic shared memory per block
(``cudaDevAttrMaxSharedMemoryPerBlockOptin``) from the CUDA C++ Programming
Guide's table "Technical Specifications per Compute Capability", row "Maximum
amount of shared memory per thread block": 163 KB on 8.0, 99 KB on 8.6/8.9,
227 KB on 9.0, 10.0 and 10.3, 99 KB on 12.0.  Each is the SM's shared memory
less the 1 KB the system reserves per block (228 KB per SM on 9.0/10.x, 100 KB
on 12.0).  The Blackwell rows were checked against NVIDIA's own
``cuda::arch_traits`` table (CCCL, ``libcudacxx/include/cuda/__device/
arch_traits.h``: sm_100 = 228 KiB per SM − 1 KiB reserved; sm_103 copies
sm_100; sm_120 = 100 KiB − 1 KiB).

What tilelang 0.1.15 does per CUDA target (``tilelang/cuda/pipeline.py``,
``src/cuda/target_utils.cc``): warp specialization is tried whenever
``have_tma`` holds (compute capability ≥ 9, so sm_90, sm_100, sm_103 and
sm_120 alike), TMA bulk copies exist from sm_90 on, cp.async from sm_80 on, and
tensor memory (``T.alloc_tmem``) only on sm_100–sm_110.  ``has_tma`` below is
that: the warp-specialized path exists on the target.  ``T.gemm`` picks wgmma
on sm_90–99 only (``src/cuda/op/gemm.cc``); on sm_100/sm_103 a gemm into tensor
memory is tcgen05, any other is mma.sync, as on sm_120.  Lowering the parity
fixtures for sm_100 gives the sm_90 results (warp specialization, planning,
versions, sync) except for that alignment: an mma.sync operand is aligned to
16 bytes, not to the 1024 of a wgmma descriptor.
"""

from __future__ import annotations

import re
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
    tmem: bool = False  # tensor memory (T.alloc_tmem, tcgen05): sm_100 / sm_103
    # T.gemm lowers to wgmma (shared operands through 1024-byte-aligned
    # descriptors): Hopper only.  sm_100/sm_103 use tcgen05 when the
    # accumulator is in tensor memory and mma.sync otherwise; sm_120 mma.sync.
    wgmma: bool = False
    # Ascend on-chip buffers, bytes.
    buffers: Tuple[Tuple[str, int], ...] = ()


_TARGETS: Dict[str, Target] = {
    "sm_80": Target("sm_80", "cuda", "sm_80", 166912, cp_async=True),
    "sm_86": Target("sm_86", "cuda", "sm_86", 101376, cp_async=True),
    "sm_89": Target("sm_89", "cuda", "sm_89", 101376, cp_async=True),
    "sm_90": Target("sm_90", "cuda", "sm_90", 232448, has_tma=True, cp_async=True,
                    wgmma=True),
    # Blackwell: data centre (10.0, 10.3; tensor memory) and consumer (12.0).
    "sm_100": Target("sm_100", "cuda", "sm_100", 232448, has_tma=True, cp_async=True,
                     tmem=True),
    "sm_103": Target("sm_103", "cuda", "sm_103", 232448, has_tma=True, cp_async=True,
                     tmem=True),
    "sm_120": Target("sm_120", "cuda", "sm_120", 101376, has_tma=True, cp_async=True),
    # PipelinePlanning drops num_stages on ROCm targets other than gfx950.
    "gfx942": Target("gfx942", "rocm", "gfx942", 65536, pipelining=False),
    "gfx950": Target("gfx950", "rocm", "gfx950", 163840),
    # Ascend 950 (dav-3510): on-chip buffer capacities in bytes.
    "ascend": Target("ascend", "ascend", "dav-3510", None, buffers=(
        ("L1", 512 * 1024), ("UB", 248 * 1024), ("L0A", 64 * 1024), ("L0B", 64 * 1024),
        ("L0C", 256 * 1024))),
}

CUDA_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120")
ALL_TARGETS = tuple(_TARGETS)
DEFAULT_TARGET = "sm_80"


_VARIANT = re.compile(r"^(sm_\d+)[af]$")


def get(name: str) -> Optional[Target]:
    return _TARGETS.get(normalise(name))


def normalise(name: str) -> str:
    n = (name or "").strip().lower()
    if n.startswith("sm") and not n.startswith("sm_"):
        n = "sm_" + n[2:]
    # Arch-specific and family variants (sm_90a, sm_100a, sm_100f, sm_120a) have
    # the limits of their base architecture; the compiler reads the digits too.
    m = _VARIANT.match(n)
    if m is not None:
        n = m.group(1)
    if n in ("hopper", "h100", "h200"):
        n = "sm_90"
    if n in ("ampere", "a100"):
        n = "sm_80"
    return n


def budget(name: str) -> Optional[int]:
    t = get(name)
    return None if t is None else t.smem_budget
