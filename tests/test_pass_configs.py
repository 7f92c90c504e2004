"""Pass configs given in a decorator: ``@tilelang.jit(pass_configs={
tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})`` turns off the
warp-specialization passes (tilelang 0.1.15 ``cuda/pipeline.py``:
``allow_warp_specialized`` reads ``tl.disable_warp_specialized``).

Expected values: tests/fixtures/parity/gemm_ns3.py lowered by tests/oracle/lower.py
on sm_90 with ``PASS_CONFIGS = {"tl.disable_warp_specialized": True}``: 128
threads, no mbarriers, stages [0, 0, 2], 4 ``__syncthreads``, 3 cp.async commit
groups, ``wait_group`` [2, 1, 0], a 49152 B arena.  Without it the parity table
gives 256 threads, warp-specialized (tests/fixtures/parity/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze

FIXTURE = Path(__file__).parent / "fixtures" / "parity" / "gemm_ns3.py"

DECORATORS = {
    "attribute key": "@tilelang.jit(out_idx=[-1], pass_configs={\n"
                     "    tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,\n"
                     "    tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})\n",
    "string key": '@tilelang.jit(pass_configs={"tl.disable_warp_specialized": True})\n',
}


def _source(decorator: str) -> str:
    text = FIXTURE.read_text()
    return text.replace("\ndef gemm(", "\n" + decorator + "def gemm(", 1)


@pytest.mark.parametrize("how", sorted(DECORATORS))
def test_disable_warp_specialized(how: str) -> None:
    a = analyze(_source(DECORATORS[how]), "k.py", Settings(target="sm_90"))
    (kr,) = a.kernels
    assert not kr.warp_specialized and kr.threads == 128
    assert kr.shared_bytes == 49152
    assert [s.stage for s in kr.loops[0].statements] == [0, 0, 2]
    assert kr.sync is not None
    assert (kr.sync.syncthreads, kr.sync.cp_async_commit, list(kr.sync.cp_async_wait),
            kr.sync.mbarriers) == (4, 3, [2, 1, 0], 0)


def test_without_the_config_the_kernel_is_warp_specialized() -> None:
    a = analyze(_source(""), "k.py", Settings(target="sm_90"))
    (kr,) = a.kernels
    assert kr.warp_specialized and kr.threads == 256
