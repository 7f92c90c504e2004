"""The autotune sweep (TL202) is kept across analyses of a kernel whose model
did not change (``packing._SWEEPS``): typing a statement into a kernel leaves
its model as it was for most keystrokes, or only moves its lines.  What an
analysis with kept sweeps reports must be what a sweep from scratch reports:

* lines moved inside the kernel: the kept packings' buffer spans are those of
  the kernel analysed now (the related locations of TL202 move);
* a helper function called in a buffer shape changed: the kernel's model is
  the same, but its packings are not (an evaluation that consults the file's
  functions is never kept);
* a module constant read by the shapes changed: the names read resolve
  differently, so the kept packings do not apply.

Each case compares the diagnostics after analysing the text before the edit
with those of a fresh analysis (the kept sweeps cleared) of the text after it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze, packing

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "autotune" / "autotune_gemm.py"
BASE = FIXTURE.read_text(encoding="utf-8")


def _tl202(src: str, target: str):
    a = analyze(src, "autotune_gemm.py", Settings(target=target))
    return [(d.span, d.message, d.related) for d in a.diagnostics if d.code == "TL202"]


def _fresh(src: str, target: str):
    packing._SWEEPS.clear()
    return _tl202(src, target)


def _after(before: str, after: str, target: str):
    packing._SWEEPS.clear()
    _tl202(before, target)
    kept = len(packing._SWEEPS)
    got = _tl202(after, target)
    return got, kept


# A helper in a buffer's shape, and a module constant in another.
HELPER = BASE.replace(
    "def get_configs():",
    "def pad(k):\n    return k + 8\n\n\nPAD = 0\n\n\ndef get_configs():").replace(
    "A_shared = T.alloc_shared((block_M, block_K), dtype)",
    "A_shared = T.alloc_shared((block_M, pad(block_K)), dtype)").replace(
    "B_shared = T.alloc_shared((block_K, block_N), dtype)",
    "B_shared = T.alloc_shared((block_K, block_N + PAD), dtype)")


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_moved_lines_move_the_related_spans(target):
    # Two comment lines and a bare attribute (no statement of the model) above
    # the allocations: the kernel's model differs in its spans only.
    after = BASE.replace(
        "            A_shared = T.alloc_shared",
        "            # typing...\n\n            T.cop\n            A_shared = T.alloc_shared")
    got, kept = _after(BASE, after, target)
    assert len(packing._SWEEPS) == kept, "the same model must find the kept sweep"
    want = _fresh(after, target)
    assert want, "the fixture overflows on this target"
    assert got == want
    # The related locations are the allocations' lines in the new text.
    a_line = after.splitlines().index(
        "            A_shared = T.alloc_shared((block_M, block_K), dtype)") + 1
    assert any(r.span.line == a_line or r.span.line == a_line + 1
               for _s, _m, rel in got for r in rel)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_changed_helper_is_not_served_from_the_kept_sweep(target):
    after = HELPER.replace("return k + 8", "return k * 4")
    got, _kept = _after(HELPER, after, target)
    want = _fresh(after, target)
    assert got == want
    assert want != _fresh(HELPER, target), "the helper's change must change TL202"


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_changed_constant_is_not_served_from_the_kept_sweep(target):
    after = HELPER.replace("PAD = 0", "PAD = 64")
    got, _kept = _after(HELPER, after, target)
    want = _fresh(after, target)
    assert got == want
    assert want != _fresh(HELPER, target), "the constant's change must change TL202"
