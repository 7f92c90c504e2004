"""Guards on block indices that the grid proves true (loops.active_view).

tilelang 0.1.15's Simplify deletes ``if bx < N // block_N:`` when the grid has
``N // block_N`` blocks in x (bx < 8 always holds for N=1024, block_N=128), so
every pass sees the copy inside it as a statement of the loop body
(tests/fixtures/parity/cond_bx_copy.py, checked against the compiler by
test_parity and test_ws_parity).  A bound the grid does not prove keeps the
``if``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelint.analysis import analyze
from tilelint.analysis.model import Settings

FIX = Path(__file__).parent / "fixtures" / "parity" / "cond_bx_copy.py"


def _loop_lines(text: str):
    kr = analyze(text, "g.py", Settings(target="sm_80")).kernels[0]
    return [s.stmt.span.line for s in kr.loops[0].statements], \
        [s.stmt.kind for s in kr.loops[0].statements]


def test_proven_guard_is_its_body() -> None:
    lines, kinds = _loop_lines(FIX.read_text())
    # 19: copy A, 21: copy B (the guard on line 20 is gone), 22: gemm.
    assert lines == [19, 21, 22] and kinds == ["copy", "copy", "gemm"]


@pytest.mark.parametrize("guard", ["if bx < 4:", "if by < N // block_N - 1:", "if bx < k:"])
def test_unproven_guard_stays(guard: str) -> None:
    text = FIX.read_text().replace("if bx < N // block_N:", guard)
    lines, kinds = _loop_lines(text)
    assert lines == [19, 20, 22] and kinds == ["copy", "if", "gemm"]


def test_reversed_and_inclusive_bounds() -> None:
    for guard in ("if N // block_N > bx:", "if bx <= N // block_N - 1:"):
        text = FIX.read_text().replace("if bx < N // block_N:", guard)
        assert _loop_lines(text)[0] == [19, 21, 22], guard
