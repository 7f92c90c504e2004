"""The pre-commit hook (.pre-commit-hooks.yaml) with the real pre-commit.

A temporary copy of this working tree is committed into its own git repo and
used as the hook repository (repo: <path>, rev: <commit>); pre-commit builds
its virtualenv and pip-installs it (libcst/pygls/lsprotocol come from the
package index).  A project with a kernel that overflows sm_80's shared memory
must fail the hook; the clean kernel must pass.  (About 10 s here: the
hook's virtualenv installs from the local package index.)
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

GIT = ["git", "-c", "user.name=tilelint-test", "-c", "user.email=test@example.invalid",
       "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


def test_hook_file_shape():
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list) and len(hooks) == 1
    h = hooks[0]
    assert h["id"] == "tilelint"
    assert h["language"] == "python"
    assert h["types"] == ["python"]
    assert h["entry"] == "tilelint check"


def _git(cwd, *args):
    return subprocess.run(GIT + list(args), cwd=cwd, check=True, capture_output=True, text=True)


def _copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "node_modules")
    for name in ("analysis", "server", "api", "docs/rules"):  # docs/rules: package data
        shutil.copytree(REPO / name, dst / name, ignore=ignore)
    for name in ("pyproject.toml", ".pre-commit-hooks.yaml", "README.md", "LICENSE"):
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, dst / name)
    if not (dst / "README.md").exists():  # pyproject names it as the readme
        (dst / "README.md").write_text("tilelint\n")


def _pre_commit(cwd: Path, home: Path, *args: str):
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([sys.executable, "-m", "pre_commit", *(args or ("run", "--all-files"))],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def readme_snippet() -> str:
    """The ``.pre-commit-config.yaml`` the README gives."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("**pre-commit.**")
    block = text[text.index("```yaml\n", start) + len("```yaml\n"):]
    return block[:block.index("```")]


def test_readme_snippet_has_a_rev():
    yaml = pytest.importorskip("yaml")
    (repo,) = yaml.safe_load(readme_snippet())["repos"]
    assert repo["rev"] and repo["hooks"] == [{"id": "tilelint"}]
    assert "tilelint/tilelint" not in repo["repo"]


def test_pre_commit_hook_fails_on_bad_kernel_and_passes_on_clean(tmp_path):
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    hook_repo = tmp_path / "hook"
    hook_repo.mkdir()
    _copy_tree(hook_repo)
    _git(hook_repo, "init", "-q")
    _git(hook_repo, "add", "-A")
    _git(hook_repo, "commit", "-q", "-m", "snapshot")
    rev = _git(hook_repo, "rev-parse", "HEAD").stdout.strip()

    proj = tmp_path / "proj"
    proj.mkdir()
    _git(proj, "init", "-q")
    # The README's snippet, pointed at the hook repository; its placeholder rev
    # is filled in by `pre-commit autoupdate`, as the README says.
    snippet = readme_snippet()
    assert "/path/to/tilelint" in snippet
    (proj / ".pre-commit-config.yaml").write_text(snippet.replace("/path/to/tilelint",
                                                                  str(hook_repo)))
    home = tmp_path / "pre-commit-home"
    up = _pre_commit(proj, home, "autoupdate")
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"rev: {rev}" in (proj / ".pre-commit-config.yaml").read_text()
    shutil.copy2(EXAMPLES / "smem_overflow_sm80.py", proj / "kernel.py")
    (proj / "notes.txt").write_text("not python\n")
    # pre-commit's `types: [python]` also passes an executable script with a
    # Python shebang; tilelint must take it (not a usage error).
    script = proj / "run_kernel"
    script.write_text("#!/usr/bin/env python3\nprint('no kernels here')\n")
    script.chmod(0o755)
    _git(proj, "add", "-A")

    bad = _pre_commit(proj, home)
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1, out
    assert "kernel.py:22:13: TL201" in out, out
    assert "Failed" in out

    shutil.copy2(EXAMPLES / "gemm_clean.py", proj / "kernel.py")
    _git(proj, "add", "-A")
    good = _pre_commit(proj, home)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
