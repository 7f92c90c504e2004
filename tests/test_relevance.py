"""parse_module gives a libcst model only to the chunks analysis/relevance.py
keeps; the analysis must find exactly what it finds with every chunk modelled.

The reference here is the module built from every chunk's model
(``frontend.combine`` over ``parse_chunk`` of each ``split_chunks`` chunk, the
way parse_module worked before the relevance pass): same kernels, same
diagnostics on every fixture and example, sm_80 and sm_90.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import pytest

from tilelint.analysis import analyze, frontend
from tilelint.analysis.model import Module, Settings

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for d in ("tests/fixtures", "examples") for p in (ROOT / d).rglob("*.py"))


def full_module(source: str) -> Module:
    source = frontend.normalise_newlines(source)
    aliases = frontend.find_aliases(source)
    return frontend.combine([frontend.parse_chunk(c.text, c.start_line, aliases)
                             for c in frontend.split_chunks(source)], aliases)


def findings(source: str, module: Module, target: str) -> List[Tuple]:
    a = analyze(source, "f.py", Settings(target=target), module=module)
    return [(d.code, d.span, d.kernel, d.message, repr(d.fixes)) for d in a.diagnostics]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_same_analysis_as_every_chunk_modelled(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    fast, full = frontend.parse_module(source), full_module(source)
    assert fast.kernels == full.kernels
    assert fast.problems == full.problems
    for target in ("sm_80", "sm_90"):
        assert findings(source, fast, target) == findings(source, full, target)


# A kernel factory whose sizes come from a constant, a config helper, main()'s
# locals, argparse and the module-level call; next to a reference program, a
# plotting helper and a test of something else, which it never reads.
SOURCE = '''\
import argparse
import torch
import tilelang
import tilelang.language as T

BLOCK = 64
UNUSED = 7


def stages_for(k):
    return 3 if k >= 1024 else 2


def matmul(M, N, K, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK), T.ceildiv(M, BLOCK), threads=128) as (bx, by):
            A_s = T.alloc_shared((BLOCK, 32), dtype)
            B_s = T.alloc_shared((32, BLOCK), dtype)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=stages_for(K)):
                T.copy(A[by * BLOCK, k * 32], A_s)
                T.copy(B[k * 32, bx * BLOCK], B_s)
    return main


def ref_program(A, B):
    return (A.float() @ B.float()).half()


def plot(xs):
    import matplotlib.pyplot as plt
    plt.plot(xs, [x * UNUSED for x in xs])


def test_other():
    assert sum(range(4)) == 6


def run(m, k):
    n = m * 2
    kernel = matmul(m, n, k)
    profiler = kernel.get_profiler()
    profiler.assert_allclose(ref_program)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=256)
    args = parser.parse_args()
    run(args.m, 2048)
'''


def test_unread_chunks_are_skipped_and_nothing_changes() -> None:
    fast, full = frontend.parse_module(SOURCE), full_module(SOURCE)
    # ref_program, plot and test_other are left out: their defs are missing.
    names = {d.name for d in fast.defs}
    assert names == {"stages_for", "matmul", "run"}
    assert {d.name for d in full.defs} == names | {"ref_program", "plot", "test_other"}
    assert fast.kernels == full.kernels
    for target in ("sm_80", "sm_90"):
        assert findings(SOURCE, fast, target) == findings(SOURCE, full, target)
    # The factory resolved through the constant, the helper, run()'s locals
    # and argparse's default: m=256 (argparse), n=512, k=2048 -> 3 stages.
    a = analyze(SOURCE, "f.py", Settings(target="sm_80"), module=fast)
    assert not [d for d in a.diagnostics if d.code == "TL002"], a.diagnostics
