"""Per-SM residency (``analysis/targets.py``: ``SmLimits``, ``residency``), the one
table and computation that ``explain --format html`` and the autotune pruning use.

Expected values come from NVIDIA: the per-SM numbers from the CUDA C++
Programming Guide's "Technical Specifications per Compute Capability" and
CCCL's ``cuda::arch_traits`` (cited in analysis/targets.py), and the rules from
CUDA's own occupancy calculator, ``cuda_occupancy.h``: where a CUDA toolkit and
a C++ compiler are installed, ``test_matches_cuda_occupancy_calculator`` builds
a small program on that header and compares every answer with it."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tilelint.analysis import targets

KIB = 1024


def test_the_table():
    # (shared per SM, resident blocks, resident threads): arch_traits.h rows
    # sm_80 164 KiB/32/2048, sm_86 100/16/1536, sm_89 100/24/1536,
    # sm_90 and sm_100 228/32/2048, sm_103 = sm_100, sm_120 100/24/1536.
    want = {"sm_80": (164, 32, 2048), "sm_86": (100, 16, 1536), "sm_89": (100, 24, 1536),
            "sm_90": (228, 32, 2048), "sm_100": (228, 32, 2048), "sm_103": (228, 32, 2048),
            "sm_120": (100, 24, 1536)}
    for name in targets.CUDA_TARGETS:
        lim = targets.sm_limits(name)
        assert lim is not None
        assert (lim.shared // KIB, lim.blocks, lim.threads) == want[name], name
        # the per-block budget every pass uses is the same row less 1 KiB reserved
        assert targets.budget(name) == lim.shared - 1024 == lim.opt_in
    # the opt-in limits NOTES.md measured with the compiler: sm_80 166912,
    # sm_86/sm_89 101376, sm_90 232448
    assert [targets.budget(n) for n in ("sm_80", "sm_86", "sm_89", "sm_90")] == [
        166912, 101376, 101376, 232448]
    assert targets.sm_limits("sm_120a") == targets.sm_limits("sm_120")
    for name in ("gfx942", "ascend", "sm_99"):
        assert targets.sm_limits(name) is None and targets.residency(name, 0, 32) is None


def test_shared_memory_granule_and_reserve():
    # sm_90: 228 KiB per SM, 1 KiB reserved per block; the 227 KiB opt-in block fits once.
    assert targets.residency("sm_90", 232448, 384).by_shared == 1
    assert targets.residency("sm_90", 232449, 384).by_shared == 0
    # 129 B take round_up(129 + 1024, 128) = 1280 B: 167936 // 1280 = 131, capped at 32.
    assert targets.residency("sm_80", 129, 32).by_shared == 32
    # 40 KiB + 1 B: round_up(40961 + 1024, 128) = 42112 B; 167936 // 42112 = 3
    # (without the granule 167936 // 41985 would be 4).
    assert targets.residency("sm_80", 40 * KIB + 1, 32).by_shared == 3
    # 49200 B (sm_90 gemm_clean: 49152 arena + 48 B of mbarriers): 49280 + 1024
    # = 50304 B a block, 233472 // 50304 = 4.
    assert targets.residency("sm_90", 49200, 256).by_shared == 4


def test_threads_and_block_cap():
    # sm_86: 1536 threads, 16 blocks: tiny blocks hit the block cap.
    assert targets.residency("sm_86", 0, 32).by_threads == 16
    assert targets.residency("sm_86", 0, 256).by_threads == 6
    # sm_120 (the disputed row): 24 resident blocks, 1536 threads
    # (arch_traits<sm_120>, cuda_occupancy.h case 12).
    assert targets.residency("sm_120", 0, 32).blocks == 24
    assert targets.residency("sm_120", 0, 128).blocks == 12
    # 33 threads take 2 warps; more than 1024 threads never launch.
    assert targets.residency("sm_80", 0, 33).by_threads == 32
    assert targets.residency("sm_80", 0, 1056).by_threads == 0
    r = targets.residency("sm_80", None, 128)
    assert r.by_shared is None and r.by_threads == 16 and r.blocks is None


def test_registers():
    lim = targets.sm_limits("sm_80")
    # Under __launch_bounds__(threads, 1) one block must fit: a warp's
    # registers (x 32, rounded to 256) times the warps rounded to 4, within 64 Ki.
    # 128 and 256 threads: 255; 384 (12 warps): 65536 // 12 = 5461 -> 5376 -> 168;
    # 512: 128; 1024: 64 (ptxas 13.0 gives these, see register_cap's docstring).
    assert [targets.register_cap(lim, t) for t in (128, 256, 384, 512, 1024)] == [
        255, 255, 168, 128, 64]
    # 128 registers, 128 threads: 4096 a warp, 16384 // 4096 = 4 warps a
    # sub-partition, 16 an SM: 4 blocks of 4 warps.
    assert targets.residency("sm_80", 0, 128, 128).by_registers == 4
    # 200 registers, 1-warp blocks: 6400 a warp, 16384 // 6400 = 2 warps a
    # sub-partition, 8 an SM: 8 blocks (the whole SM's 65536 // 6400 would say 10).
    assert targets.residency("sm_80", 0, 32, 200).by_registers == 8
    # 512 estimated over 128 threads: ptxas keeps 255 (spills the rest):
    # 8192 a warp, 2 a sub-partition, 8 an SM: 2 blocks.
    r = targets.residency("sm_80", 0, 128, 512)
    assert (r.registers, r.by_registers) == (255, 2)
    # 384 threads with 255 estimated: capped at 168: 5376 a warp, 3 a
    # sub-partition, 12 an SM: 1 block (never 0: the launch bound guarantees one).
    r = targets.residency("sm_90", 0, 384, 255)
    assert (r.registers, r.by_registers) == (168, 1)


# --------------------------------------------------------------------------
# NVIDIA's occupancy calculator as the oracle
# --------------------------------------------------------------------------

_PROGRAM = r"""
#include <cstdio>
#include "cuda_occupancy.h"
int main() {
  int major, minor, threads_sm, blocks, regs;
  long smem_sm, dyn;
  while (std::scanf("%d %d %ld %d %ld %d %d", &major, &minor, &smem_sm, &threads_sm,
                    &dyn, &blocks, &regs) == 7) {
    cudaOccDeviceProp p;
    p.computeMajor = major; p.computeMinor = minor;
    p.maxThreadsPerBlock = 1024; p.maxThreadsPerMultiprocessor = threads_sm;
    p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536; p.warpSize = 32;
    p.sharedMemPerBlock = 49152; p.sharedMemPerMultiprocessor = smem_sm; p.numSms = 1;
    p.sharedMemPerBlockOptin = smem_sm - 1024; p.reservedSharedMemPerBlock = 1024;
    cudaOccFuncAttributes a;
    a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = 0;
    a.partitionedGCConfig = PARTITIONED_GC_OFF; a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    a.maxDynamicSharedSizeBytes = (size_t)(smem_sm - 1024); a.numBlockBarriers = 1;
    cudaOccDeviceState s;
    cudaOccResult r;
    cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, blocks, (size_t)dyn);
    std::printf("%d %d %d %d %d %d\n", (int)e, r.activeBlocksPerMultiprocessor,
                r.blockLimitSharedMem, r.blockLimitWarps, r.blockLimitRegs, r.blockLimitBlocks);
  }
  return 0;
}
"""


def _occupancy_header():
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    roots += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for root in roots:
        if root and (Path(root) / "include" / "cuda_occupancy.h").is_file():
            return Path(root) / "include"
    return None


def _capability(name):
    digits = name[3:]
    return int(digits[:-1]), int(digits[-1])


def test_matches_cuda_occupancy_calculator(tmp_path):
    inc = _occupancy_header()
    cxx = shutil.which("c++") or shutil.which("g++")
    if inc is None or cxx is None:
        pytest.skip("no CUDA toolkit (cuda_occupancy.h) or no C++ compiler here")
    src = tmp_path / "occ.cpp"
    src.write_text(_PROGRAM)
    exe = tmp_path / "occ"
    subprocess.run([cxx, "-O1", "-I", str(inc), str(src), "-o", str(exe)], check=True,
                   capture_output=True, timeout=120)
    cases = []
    for name in targets.CUDA_TARGETS:
        lim = targets.sm_limits(name)
        assert lim is not None
        for threads in (32, 96, 128, 256, 384, 512, 640, 1024):
            cap = targets.register_cap(lim, threads)
            for smem in (0, 1, 129, 16 * KIB, 40 * KIB + 1, 49200, 96 * KIB,
                         lim.opt_in, lim.opt_in + 1):
                for regs in sorted({16, 32, 64, 100, 128, 168, 200, 255} & set(range(cap + 1))):
                    cases.append((name, smem, threads, regs))
    lines = []
    for name, smem, threads, regs in cases:
        lim = targets.sm_limits(name)
        major, minor = _capability(name)
        lines.append(f"{major} {minor} {lim.shared} {lim.threads} {smem} {threads} {regs}")
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True, timeout=120).stdout.split("\n")
    checked = 0
    for (name, smem, threads, regs), line in zip(cases, out, strict=False):
        err, active, by_smem, by_warps, by_regs, cap = map(int, line.split())
        assert err == 0, (name, smem, threads, regs)
        mine = targets.residency(name, smem, threads, regs)
        assert mine is not None
        assert cap == mine_cap(name), name
        assert mine.by_shared == min(by_smem, cap), (name, smem, threads, regs)
        assert mine.by_threads == min(by_warps, cap), (name, smem, threads, regs)
        assert mine.by_registers == min(by_regs, cap), (name, smem, threads, regs)
        assert min(mine.blocks, mine.by_registers) == active, (name, smem, threads, regs)
        checked += 1
    assert checked == len(cases) > 1000


def mine_cap(name):
    lim = targets.sm_limits(name)
    assert lim is not None
    return lim.blocks
