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

Per-SM residency (:class:`SmLimits`, :func:`residency`): how many blocks of a
given size can be resident on one SM at once, the one computation
``explain --format html`` and the autotune pruning both use.  The numbers and
the rules are NVIDIA's, cited at :data:`_SM_LIMITS` and :func:`residency`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class SmLimits:
    """Per-SM resources of one CUDA compute capability.

    These are the facts the CUDA C++ Programming Guide tabulates in
    "Compute Capabilities" ("Technical Specifications per Compute Capability":
    resident blocks, threads and registers per SM, 255 registers per thread,
    shared memory per SM).  The numbers are taken from NVIDIA's own code:
    ``cuda::arch_traits`` (CCCL, ``libcudacxx/include/cuda/__device/
    arch_traits.h``: ``max_shared_memory_per_multiprocessor``,
    ``max_blocks_per_multiprocessor``, ``max_threads_per_multiprocessor``,
    ``reserved_shared_memory_per_block`` = 1024 from 8.0 on,
    ``max_registers_per_multiprocessor`` = 64 Ki, 255 per thread), and the
    block limits checked against CUDA 13.0's occupancy calculator
    (``cuda_occupancy.h``, ``cudaOccMaxBlocksPerMultiprocessor``), which gives
    the same ones."""

    shared: int  # bytes of shared memory per SM (its largest carveout)
    blocks: int  # resident blocks per SM
    threads: int  # resident threads per SM
    reserved: int = 1024  # bytes the driver reserves per block (8.0 and later)
    registers: int = 64 * 1024  # 32-bit registers per SM, and per block at most
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024

    @property
    def opt_in(self) -> int:
        """The opt-in shared memory one block may have: the SM's less the
        reserved 1 KiB (``cudaDevAttrMaxSharedMemoryPerBlockOptin``)."""
        return self.shared - self.reserved


KIB = 1024
# The disputed row was sm_120's resident blocks: 24, as arch_traits<sm_120>
# (100 KiB, 24 blocks, 1536 threads) and cuda_occupancy.h (CUDA 13.0:
# ``case 12: value = 24``) say; 32 is the data-centre parts' (8.0, 9.0, 10.x).
_SM_LIMITS: Dict[str, SmLimits] = {
    "sm_80": SmLimits(shared=164 * KIB, blocks=32, threads=2048),
    "sm_86": SmLimits(shared=100 * KIB, blocks=16, threads=1536),
    "sm_89": SmLimits(shared=100 * KIB, blocks=24, threads=1536),
    "sm_90": SmLimits(shared=228 * KIB, blocks=32, threads=2048),
    "sm_100": SmLimits(shared=228 * KIB, blocks=32, threads=2048),
    "sm_103": SmLimits(shared=228 * KIB, blocks=32, threads=2048),  # arch_traits: sm_100's
    "sm_120": SmLimits(shared=100 * KIB, blocks=24, threads=1536),
}

# The occupancy calculator's allocation rules for compute capability 8.x-12.x
# (CUDA 13.0 cuda_occupancy.h): shared memory is given to a block in units of
# 128 bytes (cudaOccSMemAllocationGranularity), the reserved 1 KiB counted in
# before rounding; registers to a warp in units of 256
# (cudaOccRegAllocationGranularity); an SM's registers are split over 4
# sub-partitions and a warp's registers come from one of them
# (cudaOccSubPartitionsPerMultiprocessor, cudaOccMaxBlocksPerSMRegsLimit).
SMEM_GRANULE = 128
REGISTER_GRANULE = 256
REGISTER_SUBPARTITIONS = 4
WARP = 32


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
    sm: Optional[SmLimits] = None  # CUDA: per-SM residency limits


def _cuda(name: str, has_tma: bool = False, tmem: bool = False, wgmma: bool = False) -> Target:
    """A CUDA target (cp.async on all of them): its per-block budget is its
    SM's opt-in shared memory."""
    sm = _SM_LIMITS[name]
    return Target(name, "cuda", name, sm.opt_in, has_tma=has_tma, cp_async=True, tmem=tmem,
                  wgmma=wgmma, sm=sm)


_TARGETS: Dict[str, Target] = {
    "sm_80": _cuda("sm_80"),
    "sm_86": _cuda("sm_86"),
    "sm_89": _cuda("sm_89"),
    "sm_90": _cuda("sm_90", has_tma=True, wgmma=True),
    # Blackwell: data centre (10.0, 10.3; tensor memory) and consumer (12.0).
    "sm_100": _cuda("sm_100", has_tma=True, tmem=True),
    "sm_103": _cuda("sm_103", has_tma=True, tmem=True),
    "sm_120": _cuda("sm_120", has_tma=True),
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


def sm_limits(name: str) -> Optional[SmLimits]:
    t = get(name)
    return None if t is None else t.sm


@dataclass(frozen=True)
class Residency:
    """Blocks of one size that one SM can hold at once, per resource (each
    already capped by the SM's resident-block limit); None where the size is
    not known."""

    by_shared: Optional[int] = None
    by_threads: Optional[int] = None
    by_registers: Optional[int] = None
    # The registers per thread the register limit was computed with: the count
    # given, at most what ptxas lets a thread keep (:func:`register_cap`).
    registers: Optional[int] = None

    @property
    def blocks(self) -> Optional[int]:
        """By shared memory and threads, the sizes known before compilation
        (None unless both are known).  ``by_registers`` stays apart: a
        register count is only known after ptxas."""
        if self.by_shared is None or self.by_threads is None:
            return None
        return min(self.by_shared, self.by_threads)


def register_cap(lim: SmLimits, threads: int) -> int:
    """The most registers per thread ptxas gives a block of ``threads``
    threads.  tilelang emits ``__launch_bounds__(threads, 1)``
    (``src/cuda/codegen/codegen_cuda.cc``), and under launch bounds the
    compiler limits registers so that the block can launch (Programming Guide,
    "Launch Bounds"): at most 255, and a warp's registers, rounded up to 256,
    times the warps rounded up to the 4 sub-partitions, within the SM's (the
    calculator's per-block check, regsAssumedPerCTA).  Measured with ptxas
    (CUDA 13.0, ``-Xptxas -v``) on a kernel that wants more than 255 under
    ``__launch_bounds__(threads, 1)``: 128 and 256 threads 255 registers, 384
    168, 512 128, 640 96, 1024 64 on sm_90 (384 and 640 the same on sm_80 and
    sm_120), the rest spilled: this function's answers."""
    warps = -(-threads // WARP)
    slots = -(-warps // REGISTER_SUBPARTITIONS) * REGISTER_SUBPARTITIONS
    per_warp = lim.registers // slots // REGISTER_GRANULE * REGISTER_GRANULE
    return max(0, min(lim.max_registers_per_thread, per_warp // WARP))


def residency(target: str, shared_bytes: Optional[int], threads: Optional[int],
              registers: Optional[int] = None) -> Optional[Residency]:
    """Resident blocks per SM of a block with ``shared_bytes`` of shared
    memory (dynamic plus static), ``threads`` threads and, optionally,
    ``registers`` per thread, the way CUDA's occupancy calculator counts them
    (``cudaOccMaxActiveBlocksPerMultiprocessor`` with the largest carveout):

    * shared: ``shared // round_up(shared_bytes + 1 KiB reserved, 128)``, 0 past
      the opt-in limit;
    * threads: ``threads_per_SM / 32 // warps``, 0 past 1024 threads a block;
    * registers: ``(registers_per_SM / 4 // round_up(regs × 32, 256)) × 4 //
      warps``, with regs at most :func:`register_cap`;

    each at most the SM's resident-block limit.  None for a target without
    per-SM limits (ROCm, Ascend, an unknown name)."""
    lim = sm_limits(target)
    if lim is None:
        return None
    by_shared = None
    if shared_bytes is not None:
        per_block = -(-(max(shared_bytes, 0) + lim.reserved) // SMEM_GRANULE) * SMEM_GRANULE
        by_shared = 0 if shared_bytes > lim.opt_in else min(lim.blocks, lim.shared // per_block)
    by_threads = by_registers = used = None
    if threads is not None and threads > 0:
        warps = -(-threads // WARP)
        over = threads > lim.max_threads_per_block
        by_threads = 0 if over else min(lim.blocks, lim.threads // WARP // warps)
        if registers is not None:
            used = min(max(registers, 1), register_cap(lim, threads))
            per_warp = -(-used * WARP // REGISTER_GRANULE) * REGISTER_GRANULE
            per_part = lim.registers // REGISTER_SUBPARTITIONS // per_warp
            by_registers = 0 if over or used == 0 else \
                min(lim.blocks, per_part * REGISTER_SUBPARTITIONS // warps)
    return Residency(by_shared, by_threads, by_registers, used)
