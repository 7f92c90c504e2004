"""Never execute user code by default (issue 7, part 1).

``analyze()``, ``tilelint check`` and ``tilelint explain`` only parse with
libcst.  Each file below has a kernel (with a known defect: a duplicated
``order`` entry, TL101) and a top level that would be noticed if it ran: it
writes a marker file, calls ``sys.exit``, loops forever, or imports a module
that does not exist.  We assert: no marker, the normal TL101 finding, the
normal exit status (1: findings), bounded time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze

KERNEL = '''
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype="float16"):
    @T.prim_func
    def gemm_noexec(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), order=[0, 0, 1], stage=[0, 0, 1]):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_noexec
'''

# The line of the second T.copy (the statement the compiler blames for TL101).
def _tl101_line(src: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if "T.copy(B[k" in ln)


def _hostile_tops(marker: Path):
    m = repr(str(marker))
    return {
        "marker": f"open({m}, 'w').write('ran')\n",
        "sys_exit": f"import sys\nopen({m}, 'w').write('ran')\nsys.exit(3)\n",
        "infinite_loop": f"open({m}, 'w').write('ran')\nwhile True:\n    pass\n",
        "missing_import": f"import tilelint_no_such_module_xyz\nopen({m}, 'w').write('ran')\n",
        "os_system": f"import os\nos.system('touch ' + {m})\n",
        "kill_parent": f"import os, signal\nopen({m}, 'w').write('ran')\nos.kill(os.getppid(), signal.SIGKILL)\n",
    }


def _file(tmp_path: Path, kind: str) -> tuple:
    marker = tmp_path / f"MARKER_{kind}"
    top = _hostile_tops(marker)[kind]
    body = ("import tilelang\nimport tilelang.language as T\n" + top + KERNEL
            + "\nkernel = matmul(1024, 1024, 1024)\n" + top)
    # the hostile code also sits in a `if __name__ == "__main__":` block and in a default argument
    body += ('\nif __name__ == "__main__":\n    ' + top.strip().replace("\n", "\n    ") + "\n")
    path = tmp_path / f"noexec_{kind}.py"
    path.write_text(body)
    return path, marker, body


KINDS = ["marker", "sys_exit", "infinite_loop", "missing_import", "os_system", "kill_parent"]


@pytest.mark.parametrize("kind", KINDS)
def test_analyze_does_not_execute(tmp_path: Path, kind: str) -> None:
    path, marker, src = _file(tmp_path, kind)
    t0 = time.perf_counter()
    for target in ("sm_80", "sm_90"):
        a = analyze(src, str(path), Settings(target=target))
        assert [k.kernel.name for k in a.kernels] == ["gemm_noexec"]
        hits = [d for d in a.diagnostics if d.code == "TL101"]
        assert hits and hits[0].span.line == _tl101_line(src), a.diagnostics
        assert not [d for d in a.diagnostics if d.code == "TL000"]
    assert time.perf_counter() - t0 < 10
    assert not marker.exists(), f"user code ran: {marker}"


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilelint.server.cli", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.parametrize("kind", KINDS)
def test_cli_check_does_not_execute(tmp_path: Path, kind: str) -> None:
    path, marker, src = _file(tmp_path, kind)
    t0 = time.perf_counter()
    proc = _cli("check", "--isolated", "--no-progress", "--format", "json", str(path))
    assert time.perf_counter() - t0 < 60
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    text = json.dumps(data)
    assert "TL101" in text
    assert not marker.exists(), f"user code ran under `tilelint check`: {marker}"


@pytest.mark.parametrize("kind", KINDS)
def test_cli_explain_does_not_execute(tmp_path: Path, kind: str) -> None:
    path, marker, src = _file(tmp_path, kind)
    t0 = time.perf_counter()
    proc = _cli("explain", "--isolated", "--format", "json", str(path))
    assert time.perf_counter() - t0 < 60
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert "gemm_noexec" in json.dumps(data)
    assert not marker.exists(), f"user code ran under `tilelint explain`: {marker}"


def test_check_and_explain_never_import_tilelang() -> None:
    """The linting path must not even import the compiler (it could run plugins)."""
    code = ("import sys\n"
            "from tilelint.analysis import analyze\n"
            "from tilelint.server import cli\n"
            "cli.main(['check', '--isolated', '--no-progress', '-j', '1', sys.argv[1]])\n"
            "cli.main(['explain', '--isolated', sys.argv[1]])\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('tilelang', 'tvm', 'torch')]\n"
            "print('IMPORTED', bad)\n")
    example = Path(__file__).resolve().parent.parent / "examples" / "gemm_clean.py"
    proc = subprocess.run([sys.executable, "-c", code, str(example)],
                          capture_output=True, text=True, timeout=120)
    assert "IMPORTED []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
