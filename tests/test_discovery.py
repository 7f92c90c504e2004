"""Kernel discovery in library-style code (issue 12, item 2).

Every ``T.Pipelined`` loop that CPython's ``ast`` finds in a fixture must be
listed under a kernel tilelint reports, and the shared memory of the default
instance is the number reasoned out below (fp16 = 2 bytes; versions =
num_stages for a copy whose consumer runs in the last stage, as measured for
the GEMM in shared/NOTES.md: 128x32 fp16 tiles at num_stages=3 give 49 152 B).
The nested-factory shape is also a parity fixture
(tests/fixtures/parity/disc_nested_if_factory.py), lowered by the compiler."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze

DIR = Path(__file__).parent / "fixtures" / "discovery"

# fixture -> {kernel name: shared bytes of the default instance (None: unknown)}
EXPECTED = {
    # defaults of the jit builder: 128x32 A tile and 128x32 B tile, fp16, 3 versions
    # each: 2 * 3 * 8192 = 49152 (the NOTES table, num_stages=3).
    "nested_jit_lru.py": {"gemm_nt": 49152, "gemm_nn": 49152},
    # the macro opens T.Kernel: one 64x64 fp16 tile (8192 B) in 2 versions.
    "macro_kernel.py": {"body": 16384},
    # two launches, each its own device kernel and arena: 8192 B x 2 versions,
    # then 8192 B x 3 versions.
    "two_launches.py": {"main": 16384, "main#2": 24576},
    # the class's default_config: 64x128 fp16 tile (16384 B) x 3 versions.
    "kernel_class.py": {"_copy_main": 49152},
    # every tile size defaults to None and nothing calls the closure: unknown,
    # but the loop is still listed (with a TL002 naming what is missing).
    "config_closure.py": {"main": None},
}


def _ast_loops(src: str):
    lines = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                getattr(node.iter.func, "attr", None) == "Pipelined":
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_loop_is_listed_under_a_kernel(name):
    src = (DIR / name).read_text()
    a = analyze(src, name, Settings(target="sm_80"))
    listed = sorted(lr.loop.span.line for kr in a.kernels for lr in kr.loops)
    assert listed == _ast_loops(src)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shared_memory_of_default_instance(name):
    a = analyze((DIR / name).read_text(), name, Settings(target="sm_80"))
    got = {kr.kernel.name: kr.shared_total for kr in a.kernels if kr.loops}
    assert got == EXPECTED[name]


def test_unknown_tile_sizes_are_named_once():
    a = analyze((DIR / "config_closure.py").read_text(), "config_closure.py",
                Settings(target="sm_80"))
    tl002 = [d for d in a.diagnostics if d.code == "TL002"]
    assert len(tl002) == 1
    for n in ("block_M", "block_N", "block_K", "num_stages"):
        assert n in tl002[0].message
    assert [d.code for d in a.diagnostics if d.severity in ("error", "warning")] == []


def test_plain_outer_pipelined_hides_nothing():
    """``T.Pipelined(n)`` without num_stages/order/stage writes no annotation
    (tilelang 0.1.15), so the loop inside it is planned: no TL109 (measured:
    parity fixture nested_outer_plain); with num_stages it does hide it."""
    src = (Path(__file__).parent / "fixtures" / "parity" / "nested_outer_plain.py").read_text()
    a = analyze(src, "nested_outer_plain.py", Settings(target="sm_80"))
    assert [d.code for d in a.diagnostics if d.code == "TL109"] == []
    inner = [lr for kr in a.kernels for lr in kr.loops if lr.loop.var == "k"]
    assert inner and inner[0].pipelined
    src2 = (Path(__file__).parent / "fixtures" / "parity" / "nested_pipelined.py").read_text()
    a2 = analyze(src2, "nested_pipelined.py", Settings(target="sm_80"))
    assert [d.code for d in a2.diagnostics if d.code == "TL109"] == ["TL109"]


def test_no_claim_built_on_a_python_if_with_unknown_value():
    """``if k_exact:`` on a factory value decides at trace time which copies
    exist; with K unknown the loop's statements are unknown, so tilelint makes
    no warp-specialization claim (TL113) and no error or warning at all."""
    path = Path(__file__).parent / "fixtures" / "unknown" / "ws_if_unknown_value.py"
    a = analyze(path.read_text(), path.name, Settings(target="sm_90"))
    assert [d.code for d in a.diagnostics if d.severity in ("error", "warning")] == []
