"""The distribution layout the design card fixes: import names tilelint.analysis
and tilelint.server (from analysis/ and server/), no top-level `analysis` or
`server` package, and an analysis core that knows neither LSP nor the compiler."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]


@pytest.mark.parametrize("path", sorted((ROOT / "analysis").rglob("*.py")),
                         ids=lambda p: p.relative_to(ROOT / "analysis").as_posix())
def test_analysis_is_pure(path: Path) -> None:
    banned = {"pygls", "lsprotocol", "tilelang", "tvm", "torch", "server"}
    found = banned & set(_imports(path))
    assert not found, f"{path.relative_to(ROOT).as_posix()} imports {sorted(found)}"


def test_wheel_layout_and_import(tmp_path: Path) -> None:
    wheel_dir = tmp_path / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(wheel_dir), str(ROOT)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{proc.stderr[-2000:]}")
    wheels = list(wheel_dir.glob("tilelint-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("tilelint-")}
    assert tops == {"tilelint"}, f"top-level entries in the wheel: {sorted(tops)}"
    assert "tilelint/analysis/pipeline.py" in names
    assert "tilelint/analysis/values/evaluate.py" in names  # the subpackages too
    assert "tilelint/analysis/rules/checks.py" in names
    assert "tilelint/analysis/frontend/kernels.py" in names
    assert "tilelint/server/cli.py" in names
    # api/ is the package "tilelint" itself (package-dir "tilelint" = "api"):
    # its __init__ holds the pruning API, tilelint.prune_configs and friends.
    assert "tilelint/__init__.py" in names
    assert not any(n.startswith(("api/", "tilelint/api/")) for n in names)
    # Install it alone into a directory and run the console entry point from there.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheels[0])], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    example = ROOT / "examples" / "duplicate_order.py"
    run = subprocess.run([sys.executable, "-c",
                          "import tilelint.analysis, sys; "
                          "assert tilelint.analysis.__file__.startswith(sys.argv[1]); "
                          "from tilelint.server.cli import main; sys.exit(main(sys.argv[2:]))",
                          str(target), "check", str(example)],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    # The installed top-level package is api/__init__.py: the pruning API loads from it.
    api = subprocess.run([sys.executable, "-c",
                          "import tilelint, sys; "
                          "assert tilelint.__file__.startswith(sys.argv[1]), tilelint.__file__; "
                          "assert callable(tilelint.prune_configs); "
                          "assert callable(tilelint.autotune_configs)", str(target)],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert api.returncode == 0, api.stdout + api.stderr
    assert "TL101" in run.stdout
