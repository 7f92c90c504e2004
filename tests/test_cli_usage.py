"""Bad command-line input is a usage error: exit 2, one ``tilelint: error: …``
line on stderr naming what is wrong, nothing on stdout, never a traceback.

The cases follow issue 12, item 7: a rule code that is no registered code or
prefix (on the command line and in ``[tool.tilelint]``), a ``--bind`` value
that is not a Python literal of a sensible type, and an explicitly named path
that is missing, unreadable or not a Python file.  The registered codes are
TL001–TL003, TL101–TL113, TL201–TL203, TL301–TL303, TL900, TL910, TL911
(``tilelint rule --all``), so ``TL999``, ``TL4`` and ``XYZ`` start none of them.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilelint.server import cli

REPO = Path(__file__).resolve().parent.parent
CLEAN = (REPO / "examples" / "gemm_clean.py").read_text(encoding="utf-8")
BAD = (REPO / "examples" / "smem_overflow_sm80.py").read_text(encoding="utf-8")


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A directory with one clean kernel (no pyproject above it that matters:
    an empty [tool.tilelint] table stops the search for a configuration)."""
    (tmp_path / "pyproject.toml").write_text("[tool.tilelint]\n")
    (tmp_path / "k.py").write_text(CLEAN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_main(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_usage_error(rc, out, err, *needles):
    assert rc == 2, (rc, out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tilelint: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, err)


# --------------------------------------------------------------------------
# Unknown rule codes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("flag, value", [
    ("--select", "TL999"), ("--select", "XYZ"), ("--select", "TL1,TL4"),
    ("--ignore", "TL999"), ("--ignore", "tl9000"),
    ("--extend-select", "TL98"),
])
def test_unknown_code_on_the_command_line(proj, capsys, flag, value):
    bad = [v for v in value.split(",") if v.upper() not in ("TL1",)][0]
    rc, out, err = run_main(capsys, "check", "k.py", flag, value)
    assert_usage_error(rc, out, err, f"`{flag}`", f"unknown rule code {bad!r}")


@pytest.mark.parametrize("flag, value", [
    ("--select", "TL1"), ("--select", "TL"), ("--ignore", "TL2"), ("--ignore", "tl203"),
    ("--extend-select", "TL900"), ("--select", "TL101,TL201"),
])
def test_codes_and_prefixes_of_registered_rules_are_accepted(proj, capsys, flag, value):
    rc, out, err = run_main(capsys, "check", "k.py", flag, value)
    assert rc == 0 and err == "", err
    assert "All checks passed! (1 file checked)" in out


@pytest.mark.parametrize("table, key", [
    ('select = ["TL1", "TL999"]', "`select`"),
    ('ignore = ["XYZ"]', "`ignore`"),
    ('extend-select = ["TL90", "TL98"]', "`extend-select`"),
    ('per-file-ignores = { "tests/**" = ["TL2", "TL777"] }', "`per-file-ignores.tests/**`"),
])
def test_unknown_code_in_the_configuration(proj, capsys, table, key):
    (proj / "pyproject.toml").write_text(f"[tool.tilelint]\n{table}\n")
    rc, out, err = run_main(capsys, "check", "k.py")
    assert_usage_error(rc, out, err, "invalid configuration", str(proj / "pyproject.toml"), key,
                       "unknown rule code")


def test_known_codes_in_the_configuration(proj, capsys):
    (proj / "pyproject.toml").write_text(
        '[tool.tilelint]\nselect = ["TL1", "TL2"]\nextend-select = ["TL900"]\nignore = ["TL203"]\n'
        'per-file-ignores = { "tests/**" = ["TL002", "TL3"] }\n')
    rc, out, err = run_main(capsys, "check", "k.py")
    assert rc == 0 and err == "", err


# --------------------------------------------------------------------------
# --bind values
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bind, needle", [
    ("num_stages=foo(3)", "not a Python literal"),
    ("num_stages=3 +", "not a Python literal"),
    ("num_stages=1 2", "not a Python literal"),
    ("dtype=float16,bfloat16", "not a Python literal"),
    ("cfg={'a': 1}", "a dict cannot be bound"),
    ("s={1, 2}", "a set cannot be bound"),
    ("raw=b'ab'", "a bytes cannot be bound"),
    ("z=1j", "a complex cannot be bound"),
    ("shape=(1, {2: 3})", "a dict cannot be bound"),
    ("deep=[[[[[1]]]]]", "a list nested more than 4 deep cannot be bound"),
    ("3x=1", "NAME a Python identifier"),
    ("num-stages=3", "NAME a Python identifier"),
    ("=3", "NAME a Python identifier"),
    ("num_stages", "NAME=VALUE"),
    ("num_stages=", "missing value"),
])
def test_bad_bind_values(proj, capsys, bind, needle):
    rc, out, err = run_main(capsys, "check", "k.py", "--bind", bind)
    assert_usage_error(rc, out, err, "--bind", needle)


@pytest.mark.parametrize("bind, value", [
    ("num_stages=3", 3), ("scale=-0.5", -0.5), ("flag=True", True), ("bias=None", None),
    ("dtype='float16'", "float16"), ("dtype=float16", "float16"), ("dtype=T.float16", "T.float16"),
    ("shape=(1, 2)", (1, 2)), ("blocks=[64, [128, None]]", (64, (128, None))),
])
def test_sensible_bind_values(bind, value):
    name = bind.partition("=")[0]
    assert cli.parse_bind(bind) == (name, value)


def test_bind_value_reaches_the_analysis(proj, capsys):
    # smem_overflow_sm80.py: 6 stages x 32 KiB = 196608 B > 166912 B on sm_80;
    # 5 stages (163840 B) fit (the compiler's arena, tests/test_cli.py).
    (proj / "big.py").write_text(BAD, encoding="utf-8")
    assert run_main(capsys, "check", "big.py", "--bind", "num_stages=5", "--ignore", "TL203")[0] == 0
    assert run_main(capsys, "check", "big.py", "--bind", "num_stages=6")[0] == 1


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------


def test_missing_path(proj, capsys):
    rc, out, err = run_main(capsys, "check", "nope/kernel.py")
    assert_usage_error(rc, out, err, "nope/kernel.py: no such file or directory")


def test_every_bad_path_is_named_once(proj, capsys):
    (proj / "notes.txt").write_text("import tilelang\n")
    rc, out, err = run_main(capsys, "check", "k.py", "gone.py", "notes.txt")
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        "tilelint: error: gone.py: no such file or directory",
        "tilelint: error: notes.txt: not a Python file (tilelint reads .py and .pyi files; for "
        "other text use `tilelint check --stdin-filename NAME.py < notes.txt`)",
    ]


def test_broken_symlink(proj, capsys):
    os.symlink(proj / "absent.py", proj / "link.py")
    rc, out, err = run_main(capsys, "check", "link.py")
    assert_usage_error(rc, out, err, "link.py: broken symbolic link")


@pytest.mark.parametrize("name", ["kernel.cu", "notes.txt", "README", "k.py.orig"])
def test_named_file_that_is_not_python(proj, capsys, name):
    (proj / name).write_text(CLEAN, encoding="utf-8")  # even with Python inside
    rc, out, err = run_main(capsys, "check", name)
    assert_usage_error(rc, out, err, f"{name}: not a Python file")
    rc, out, err = run_main(capsys, "explain", name)
    assert_usage_error(rc, out, err, f"{name}: not a Python file")


def test_python_files_scripts_directories_and_stdin_are_accepted(proj, capsys, monkeypatch):
    (proj / "stub.pyi").write_text("import tilelang\n")
    (proj / "run_kernel").write_text("#!/usr/bin/env python3\n" + BAD, encoding="utf-8")
    (proj / "sub").mkdir()
    (proj / "sub" / "notes.txt").write_text("not checked: only *.py files are collected\n")
    rc, out, err = run_main(capsys, "check", "stub.pyi", "sub", "k.py")
    assert rc == 0 and err == "", err
    rc, out, err = run_main(capsys, "check", "run_kernel")  # a Python script without .py
    assert rc == 1 and "run_kernel:" in out and "TL201" in out, out + err
    # Text that is not in a .py file: through stdin, under any name.
    monkeypatch.setattr(sys, "stdin", io.StringIO(CLEAN))
    rc, out, err = run_main(capsys, "check", "--stdin-filename", "notes.txt")
    assert rc == 0 and err == "", err


def test_explain_needs_one_python_file(proj, capsys):
    rc, out, err = run_main(capsys, "explain", "missing.py")
    assert_usage_error(rc, out, err, "missing.py: no such file or directory")
    rc, out, err = run_main(capsys, "explain", ".")
    assert_usage_error(rc, out, err, ".: is a directory")


def _as_nobody():
    """A prefix that runs a command as an unprivileged user (root reads any
    file, so an unreadable file needs one), or None."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_unreadable_file_and_directory(tmp_path):
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("running as root without setpriv: every file is readable")
    tmp_path.chmod(0o755)
    (tmp_path / "secret.py").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "secret.py").chmod(0o000)
    (tmp_path / "closed").mkdir(mode=0o000)
    code = "import sys; from tilelint.server.cli import main; sys.exit(main(sys.argv[1:]))"
    for arg, needle in (("secret.py", "secret.py: cannot read: Permission denied"),
                        ("closed", "closed: cannot read directory: Permission denied")):
        p = subprocess.run(prefix + [sys.executable, "-c", code, "check", arg], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HOME": str(tmp_path)})
        if p.returncode != 2 and "ModuleNotFoundError" in p.stderr:
            pytest.skip("the unprivileged user cannot import tilelint here")
        assert_usage_error(p.returncode, p.stdout, p.stderr, needle)


# --------------------------------------------------------------------------
# The console script itself
# --------------------------------------------------------------------------


@pytest.mark.parametrize("argv, needle", [
    (["check", "k.py", "--select", "TL999"], "unknown rule code 'TL999'"),
    (["check", "k.py", "--bind", "x=foo()"], "not a Python literal"),
    (["check", "gone.py"], "gone.py: no such file or directory"),
    (["check", "notes.txt"], "notes.txt: not a Python file"),
])
def test_console_script(proj, argv, needle):
    exe = shutil.which("tilelint", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("tilelint console script not installed next to this python")
    (proj / "notes.txt").write_text("x\n")
    p = subprocess.run([exe, *argv], cwd=proj, capture_output=True, text=True, timeout=120)
    assert_usage_error(p.returncode, p.stdout, p.stderr, needle)
