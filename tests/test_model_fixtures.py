"""Data-driven frontend/values tests: each tests/fixtures/model/X.py has an
X.expected.json written by hand (the reasoning is in its "_why")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelint.analysis import frontend, values
from tilelint.analysis.pipeline import _unresolved_names, pipelined_loops

DIR = Path(__file__).parent / "fixtures" / "model"
CASES = sorted(DIR.glob("*.py"))


def summary(path: Path) -> dict:
    module = frontend.parse_module(path.read_text())
    out = {"kernels": []}
    for k in module.kernels:
        env = values.instances(module, k)[0].env
        out["kernels"].append({
            "name": k.name, "style": k.style, "dialect": k.dialect,
            "threads": env.eval_int(k.threads),
            "allocs": [[a.name, a.scope, list(values.shape_value(env, a.shape)),
                        values.normalise_dtype(env.evaluate(a.dtype))] for a in k.allocs],
            "body": [s.kind for s in k.body],
            "loops": [{"kind": lp.kind, "num_stages": env.eval_int(lp.num_stages),
                       "line": lp.span.line,
                       "body": [[s.kind, s.span.line, [a.buffer for a in s.reads],
                                 [a.buffer for a in s.writes]] for s in lp.body]}
                      for lp in pipelined_loops(k.body)],
            "unresolved": sorted(_unresolved_names(k, env)),
        })
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_model_matches_expected(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    got = summary(path)
    assert got["kernels"] == expected["kernels"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_expected_diagnostics(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    if "diagnostics" not in expected:
        pytest.skip("no diagnostics expectation for this fixture")
    from tilelint.analysis import analyze
    a = analyze(path.read_text(), str(path))
    assert sorted([d.code, d.span.line] for d in a.diagnostics) == sorted(expected["diagnostics"])
