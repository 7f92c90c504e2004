"""Smoke test of bench/lsp_latency.py: a tiny run (300-line file only, 2 edits per
kind, no ruff, 2 open files for the RSS line) prints every line of its final
block.  Benchmarks print measurements; nothing here asserts a time."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "lsp_latency.py"


def _bench():
    spec = importlib.util.spec_from_file_location("lsp_latency_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lsp_latency_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_generated_file_has_every_edit_site() -> None:
    b = _bench()
    text = b.make_file(300)
    ast.parse(text)  # the generator writes valid Python
    assert 250 <= text.count("\n") <= 320
    sites = b.find_sites(text)
    assert sorted(sites.cycles) == list("abcde"), sites.missing
    # Every kind is whole cycles: applying one cycle gives the original text back,
    # and (b) passes through texts that do not parse.
    unparsable = 0
    for kind, cycle in sites.cycles.items():
        cur = text
        for s, e, new in cycle:
            cur = cur[:s] + new + cur[e:]
            if kind == "b":
                try:
                    ast.parse(cur)
                except SyntaxError:
                    unparsable += 1
        assert cur == text, kind
    assert unparsable > len(sites.cycles["b"]) // 2
    # (e) is a constant every kernel reads; (d) one that a single kernel reads.
    assert re.search(r"used by (\d+) of \1 kernels", sites.what["e"])
    assert "used by " in sites.what["d"]


def test_small_run_prints_the_final_block() -> None:
    tilelint = Path(sys.executable).parent / "tilelint"
    if not tilelint.exists():
        pytest.skip("no tilelint console script next to this Python (pip install -e .)")
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--edits", "2", "--sizes", "300", "--no-ruff",
         "--init-runs", "1", "--open-files", "2", "--timeout", "120"],
        capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "Traceback" not in out + proc.stderr
    block = out[out.index("\n== lsp_latency: commit "):]
    for kind in "abcde":
        assert re.search(rf"^edit {kind} 300 lines: p50 [\d.]+ ms p95 [\d.]+ ms n=\d+ "
                         rf"\(ruff: skipped\) \[target p95 <= .*: (met|NOT met)\]$", block, re.M), \
            (kind, block)
    assert re.search(r"^initialize: median [\d.]+ ms of 1 \[target <= 100 ms: (met|NOT met)\]$",
                     block, re.M), block
    assert re.search(r"^rss with 2 open files: \d+ MB .*\[target <= 200 MB: (met|NOT met)\]$",
                     block, re.M), block
    assert re.search(r"^check cpu: skipped \(no --corpus DIR\)$", block, re.M), block
