"""What a target does is read from its ``targets.Target`` fields, not from its name.

The fixture is tests/fixtures/parity/invalid_tl106_num_stages_with_manual.py: a
GEMM with order/stage and num_stages.  Measured with tilelang 0.1.15
(tests/oracle/lower.py): on sm_90 and on sm_100 the loop is warp-specialized
(256 threads, no PipelinePlanning annotation); on sm_80 the manual schedule is
used.  sm_100's name does not start with ``sm_9``, but it has TMA
(``Target.has_tma``), which is what makes num_stages a warp-specialization
switch there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze, targets as targets_mod

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "parity" / \
    "invalid_tl106_num_stages_with_manual.py"


def _message(target: str, code: str = "TL106") -> str:
    analysis = analyze(FIXTURE.read_text(), str(FIXTURE), Settings(target=target))
    (msg,) = [d.message for d in analysis.diagnostics if d.code == code]
    return msg


def _tl106(target: str) -> str:
    return _message(target)


@pytest.mark.parametrize("target", ["sm_90", "sm_100", "sm_103", "sm_120"])
def test_num_stages_beside_a_manual_schedule_on_tma_targets(target: str) -> None:
    assert targets_mod.get(target).has_tma
    assert f"on {target} it makes the loop a warp-specialization candidate" in _tl106(target)


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_the_warp_specialized_loop_names_its_target(target: str) -> None:
    # Measured on both: warp-specialized, the manual lists ignored (TL111).
    assert _message(target, "TL111").startswith(f"this loop is warp-specialized on {target} ")


@pytest.mark.parametrize("target", ["sm_80", "sm_86", "sm_89"])
def test_num_stages_beside_a_manual_schedule_without_tma(target: str) -> None:
    assert not targets_mod.get(target).has_tma
    assert "the manual schedule is used" in _tl106(target)
