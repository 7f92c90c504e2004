"""Schedule arguments of ``T.Pipelined`` resolved like any value, arguments
tilelang 0.1.15 does not have (TL114), and the statement counts TL104 checks.

Each tests/fixtures/schedule_args/X.py has an X.expected.json written by hand;
its "_why" gives the reasoning (and, where the compiler was consulted, what it
did: the same bodies are lowered by the parity fixtures sched_*.py and
invalid_tl104_*.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze

DIR = Path(__file__).parent / "fixtures" / "schedule_args"
CASES = sorted(DIR.glob("*.py"))


def _loops(kr) -> list:
    return [{"line": lr.loop.span.line,
             "stage": [s.stage for s in lr.statements],
             "order": [s.order for s in lr.statements],
             "lines": [s.stmt.span.line for s in lr.statements]}
            for lr in kr.loops]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_schedule_args(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    a = analyze(path.read_text(), str(path),
                Settings(target=expected.get("target", "sm_80"),
                         all_bindings=bool(expected.get("all_bindings"))))
    got_diags = sorted([d.code, d.span.line] for d in a.diagnostics)
    assert got_diags == sorted(expected["diagnostics"])
    for want in expected["instances"]:
        krs = [kr for kr in a.kernels
               if all(dict(kr.bindings).get(k) == v for k, v in want.get("bindings", {}).items())]
        assert krs, f"no instance with bindings {want.get('bindings')}"
        kr = krs[0]
        assert _loops(kr) == want["loops"]
        if "unresolved" in want:
            assert sorted(kr.unresolved) == want["unresolved"]


def test_tl104_names_the_list_and_the_accepted_counts() -> None:
    src = (DIR / "order_expressions.py").read_text()
    a = analyze(src, "order_expressions.py")
    (d,) = [d for d in a.diagnostics if d.code == "TL104"]
    assert d.message.startswith("order has 2 entries but this loop body accepts 3")
    # The span is the value of `order=` (the stage list is fine).
    line = src.splitlines()[d.span.line - 1]
    assert line[d.span.col:d.span.end_col] == "WRONG"


def test_tl114_once_per_loop_and_nothing_else() -> None:
    a = analyze((DIR / "fork_arguments.py").read_text(), "fork_arguments.py")
    msgs = [d.message for d in a.diagnostics if d.code == "TL114"]
    assert len(msgs) == 2
    assert "`group=`, `sync=` are not arguments" in msgs[0]
    assert "`sync=` is not an argument" in msgs[1]


PARITY = Path(__file__).parent / "fixtures" / "parity"
COUNTS = sorted([*PARITY.glob("sched_*.py"), *PARITY.glob("invalid_tl104_*.py")])


@pytest.mark.parametrize("path", COUNTS, ids=[p.stem for p in COUNTS])
def test_tl104_exactly_where_the_compiler_fails(path: Path) -> None:
    """Without the compiler: the parity fixtures' `# expect: TL104` lines (the
    compiler's verdicts, measured and listed in tests/fixtures/parity/README.md;
    tests/test_parity.py checks them against tilelang itself)."""
    src = path.read_text()
    expect = [i for i, line in enumerate(src.splitlines(), start=1) if "# expect: TL104" in line]
    a = analyze(src, str(path), Settings(target="sm_80"))
    assert [d.span.line for d in a.diagnostics if d.code == "TL104"] == expect
    assert not [d for d in a.diagnostics if d.code in ("TL101", "TL102", "TL103", "TL107")]
