"""Shared machinery for the parity suites: run the compiler oracle once per
target over the fixture files (in a subprocess, with the real tilelang) and
hand its facts to the tests.  Expected values come only from that run."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARITY_DIR = ROOT / "tests" / "fixtures" / "parity"
ORACLE = ROOT / "tests" / "oracle" / "lower.py"
TARGETS = ("sm_80", "sm_90")


def parity_files() -> List[Path]:
    return sorted(p for p in PARITY_DIR.glob("*.py") if not p.name.startswith("_"))


@functools.lru_cache(maxsize=None)
def tilelang_available() -> Optional[str]:
    """None if tilelang 0.1.15 can be imported by this interpreter, else why not."""
    probe = subprocess.run(
        [sys.executable, "-c", "import tilelang, sys; sys.stdout.write(tilelang.__version__)"],
        capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        return "tilelang is not importable: " + (probe.stderr.strip().splitlines() or ["?"])[-1]
    if not probe.stdout.strip().startswith("0.1.15"):
        return f"tilelang {probe.stdout.strip()} is installed, the parity suite needs 0.1.15"
    return None


def require_tilelang() -> None:
    why = tilelang_available()
    if why is None:
        return
    if os.environ.get("TILELINT_REQUIRE_PARITY"):
        pytest.fail(f"parity suite required but {why}")
    pytest.skip(why)


@functools.lru_cache(maxsize=None)
def oracle_facts(target: str, files: tuple) -> Dict[str, dict]:
    """Lower ``files`` for ``target`` with the real compiler; facts keyed by file name."""
    cmd = [sys.executable, str(ORACLE), "--target", target, *files]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3000,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if proc.returncode != 0 and not proc.stdout.strip():
        raise RuntimeError(f"oracle failed for {target}:\n{proc.stderr[-4000:]}")
    data = json.loads(proc.stdout)
    if isinstance(data, dict):
        data = [data]
    return {Path(entry["file"]).name: entry for entry in data}


def all_oracle_facts(target: str) -> Dict[str, dict]:
    return oracle_facts(target, tuple(str(p) for p in parity_files()))
