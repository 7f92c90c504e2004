"""How `tilelint check` grows with the kernels in one file.

Builds one file of N GEMM-style kernels (factories instantiated from a
``main()``, the shape of ``bench/lsp_latency.py``'s GEMM template, about 30
lines each) and runs ``tilelint check`` on it in a fresh process for each N,
recording wall time and the peak resident set (``ru_maxrss`` of the child).
Both should grow linearly: the last column is time and memory per kernel.

    python bench/scale.py [--kernels 100,200,400,800] [--target sm_80]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lsp_latency import GEMM, HEADER  # noqa: E402


def make_kernels_file(n: int) -> str:
    parts = [HEADER.format(seed=0, block_m=128)]
    calls: List[str] = []
    for i in range(n):
        parts.append(GEMM.format(i=i, bn=(128, 64, 256)[i % 3], bk=(32, 64)[i % 2],
                                 ns=(3, 2, 4)[i % 3]))
        calls.append(f"    kernels.append(matmul_{i}(M, N, K))")
    main = ["", "", "def main():", "    M, N, K = 4096, 4096, 4096", "    kernels = []"]
    main += calls + ["    return kernels", ""]
    parts.append("\n".join(main))
    return "".join(parts)


def run_check(path: Path, target: str, exe: List[str]) -> Tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit status) of one ``tilelint check``."""
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([*exe, "check", "--target", target, "--format", "json", str(path)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: run the sizes
    # in increasing order so each row is its own child's peak.
    return wall, max(peak, before) / 1024.0, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="100,200,400,800")
    ap.add_argument("--target", default="sm_80")
    args = ap.parse_args()
    sizes = sorted(int(x) for x in args.kernels.split(","))
    exe = [sys.executable, "-c", "import sys; from tilelint.server.entry import main; sys.exit(main())"]
    print(f"{'kernels':>8} {'lines':>7} {'KB':>6} {'seconds':>8} {'peak MB':>8} "
          f"{'ms/kernel':>10} {'MB/kernel':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            text = make_kernels_file(n)
            path = Path(tmp) / f"kernels_{n}.py"
            path.write_text(text)
            wall, peak, rc = run_check(path, args.target, exe)
            print(f"{n:>8} {text.count(chr(10)):>7} {len(text) // 1024:>6} {wall:>8.2f} "
                  f"{peak:>8.0f} {1000 * wall / n:>10.2f} {peak / n:>10.2f}"
                  + ("" if rc in (0, 1) else f"  (exit {rc})"), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
