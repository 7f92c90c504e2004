"""analysis/ imports and runs with tilelang, torch, tvm, z3, pygls and
lsprotocol all unavailable: it never imports the compiler (or the LSP stack),
and the Ascend scheduler's z3 is optional (without it the schedule is a
prediction, never a crash).  Run in a fresh interpreter so that modules other
tests imported do not hide an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCKED = ("tilelang", "torch", "tvm", "tvm_ffi", "z3", "pygls", "lsprotocol")

SCRIPT = r"""
import importlib, importlib.abc, json, pkgutil, sys
blocked, cases = json.loads(sys.argv[1])
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import tilelint.analysis as A
for m in pkgutil.walk_packages(A.__path__, "tilelint.analysis."):
    importlib.import_module(m.name)
from tilelint.analysis import Settings, analyze
for path, target in cases:
    a = analyze(open(path).read(), path, Settings(target=target))
    assert a.kernels and not [d for d in a.diagnostics if d.code == "TL000"], a
print(sorted(k for k in sys.modules if k.split(".")[0] in blocked))
"""

CASES = [(str(ROOT / "tests/fixtures/parity/gemm_ns3.py"), "sm_80"),
         (str(ROOT / "tests/fixtures/parity/gemm_ns3.py"), "sm_90"),
         (str(ROOT / "tests/fixtures/ascend/gemm_ns2.py"), "ascend")]


def _run(blocked):
    return subprocess.run([sys.executable, "-c", SCRIPT, json.dumps([blocked, CASES])],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_analysis_runs_without_the_compiler_or_the_lsp_stack():
    out = _run(BLOCKED)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_the_blocker_blocks():
    """The same script fails when a module analysis/ does need is blocked."""
    out = _run(BLOCKED + ("libcst",))
    assert out.returncode != 0 and "blocked: libcst" in out.stderr
