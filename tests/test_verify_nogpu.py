"""``tilelint verify`` on a machine without a GPU (issue 12, item 6).

Kernels written for ``@tilelang.jit`` / ``tilelang.compile`` are compiled by
tilelang for the current device, which fails without CUDA.  The verify worker
elaborates them (``JITImpl.get_tir``) and lowers for the target it is given.
Failures of the environment (a module that is not installed, a factory that
asks torch for the GPU, values tilelint does not know) are "could not verify"
with exit code 2, never TL910/TL911.

Expected compiler facts (GEMM 1024^3 fp16, tile 128x128x32, 128 threads) are
the compiler's own, from NOTES.md "CUDA facts": num_stages=3 -> 3 versions of
each tile, 49152 B; num_stages=2 -> 2 versions, 32768 B; num_stages=1 ->
1 version (tightened), 16384 B.  The worker reads them from the lowered IR.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from parity_support import tilelang_available

from tilelint.server.verify import VerifyWorker

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "verify"


@pytest.fixture(scope="module")
def worker():
    why = tilelang_available()
    if why is not None:
        pytest.skip(why)
    w = VerifyWorker(timeout=120, memory_mb=4096)
    yield w
    w.close()


def _facts(res, name):
    return res.raw["kernels"][name]


@pytest.mark.parametrize("fixture, kernel, versions, arena, how", [
    ("jit_factory.py", "jit_gemm", 3, 49152, "matmul.get_tir("),
    ("jit_eager.py", "eager_gemm", 2, 32768, "eager_gemm.get_tir("),
    ("jit_module_level.py", "level_gemm", 1, 16384, "module-level `KERNEL`"),
])
def test_jit_kernels_verify_without_a_gpu(worker, fixture, kernel, versions, arena, how) -> None:
    res = worker.verify(str(FIX / fixture), None, "sm_80")
    assert res.ran, res.error
    assert not res.unverified, res.unverified
    [k] = res.kernels
    assert k.name == kernel and k.lowered, (k, res.notes)
    assert how in (k.instantiated or ""), k.instantiated
    facts = _facts(res, kernel)
    assert facts["error"] is None
    assert facts["versions"] == {"A_shared": versions, "B_shared": versions}
    assert facts["shared"]["bytes"] == arena
    assert k.agrees, k.mismatches
    assert not res.diagnostics


def test_eager_kernel_names_its_placeholders(worker) -> None:
    res = worker.verify(str(FIX / "jit_eager.py"), None, "sm_80")
    how = res.kernels[0].instantiated or ""
    # the problem sizes (T.const) got a placeholder; the order is tilelang's
    names, _, rest = how.partition(": placeholder")
    assert rest, how
    assert sorted(names.rsplit("(", 1)[-1].split(", ")) == ["K", "M", "N"], how


def test_jit_kernel_lowers_for_the_requested_target(worker) -> None:
    """The same jit factory for sm_90: the target reaches the compiler (warp
    specialization there adds a 128-thread producer warpgroup: 256 threads)."""
    res = worker.verify(str(FIX / "jit_factory.py"), None, "sm_90")
    assert res.ran, res.error
    assert _facts(res, "jit_gemm")["threads"] == 256


def test_missing_module_is_could_not_verify(worker) -> None:
    res = worker.verify(str(FIX / "missing_dep.py"), None, "sm_80")
    assert not res.ran
    assert res.error.startswith("could not verify:"), res.error
    assert "tilelint_fixture_module_that_does_not_exist" in res.error
    assert not res.diagnostics


def test_factory_that_needs_the_gpu_is_could_not_verify(worker) -> None:
    res = worker.verify(str(FIX / "needs_gpu_in_factory.py"), None, "sm_80")
    assert res.ran, res.error
    assert "gpu_gemm" in res.unverified and "CUDA" in res.unverified["gpu_gemm"]
    assert not [d for d in res.diagnostics if d.code in ("TL910", "TL911")]


def test_unknown_factory_values_are_could_not_verify(worker) -> None:
    text = (FIX / "needs_gpu_in_factory.py").read_text()
    text = text.replace("# tilelint: bind M=1024 N=1024 K=1024\n", "")
    assert "tilelint: bind" not in text
    res = worker.verify(str(FIX / "needs_gpu_in_factory.py"), text, "sm_80")
    assert res.ran, res.error
    assert "no value for M, N, K" in res.unverified.get("gpu_gemm", ""), res.unverified
    assert not res.diagnostics


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilelint.server.cli", "verify", *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_exit_codes_without_a_gpu(worker) -> None:
    ok = _cli(str(FIX / "jit_factory.py"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "agrees" in ok.stdout
    missing = _cli(str(FIX / "missing_dep.py"))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "could not verify:" in missing.stderr and "TL91" not in missing.stdout + missing.stderr
    assert "Traceback" not in missing.stderr
    gpu = _cli(str(FIX / "needs_gpu_in_factory.py"))
    assert gpu.returncode == 2, gpu.stdout + gpu.stderr
    assert "could not verify" in gpu.stderr and "TL91" not in gpu.stdout
