"""Hostile input (issue 7, part 4): through ``analyze()`` and ``tilelint check``.

Huge files, deep nesting, thousands of kernels, binary garbage, NUL bytes,
non-UTF-8, CRLF / mixed line endings, tabs.  Each must give a clear error or a
diagnostic, in bounded time and memory (the RSS of the CLI subprocess is
measured with ``wait4``), never a traceback or a crash.  Inputs are generated
in ``tmp_path`` at test time (nothing large is committed).
"""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from tilelint.analysis import Settings, analyze

ROOT = Path(__file__).resolve().parent.parent
PARITY = ROOT / "tests" / "fixtures" / "parity"
GEMM = (PARITY / "gemm_ns3.py").read_text()
TL101 = (PARITY / "invalid_tl101_duplicate_order.py").read_text()
RSS_LIMIT_MB = 1024


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def run_cli_rss(*args: str, timeout: float = 300) -> Tuple[int, str, str, float, float]:
    """Like run_cli, with the child's peak RSS from wait4 (output to temp files)."""
    import tempfile
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "tilelint.server.cli", *args],
                                stdout=fo, stderr=fe, env={**os.environ, "NO_COLOR": "1"})
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                pytest.fail(f"tilelint {' '.join(args)} did not finish in {timeout} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        secs = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode("utf-8", "replace")
        err = fe.read().decode("utf-8", "replace")
    return proc.returncode, out, err, secs, ru.ru_maxrss / 1024.0


def assert_clean(rc: int, out: str, err: str, allowed=(0, 1)) -> None:
    assert rc >= 0, f"killed by signal {-rc}\n{err[-2000:]}"
    assert rc in allowed, f"exit {rc}\n{out[-1000:]}\n{err[-2000:]}"
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert "internal error" not in (out + err), (out + err)[-2000:]


def analyze_in_subprocess(path: Path, timeout: float = 120) -> Tuple[int, str, float]:
    """analyze() in a child: a crash of the parser (SIGSEGV) must not kill pytest."""
    code = ("import sys, resource\n"
            "from tilelint.analysis import analyze\n"
            "src = open(sys.argv[1], encoding='utf-8', newline='').read()\n"
            "a = analyze(src, sys.argv[1])\n"
            "bad = [d for d in a.diagnostics if d.code == 'TL000']\n"
            "print('CODES', sorted({d.code for d in a.diagnostics}), 'TL000', len(bad))\n"
            "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def codes(src: str, target: str = "sm_80") -> List[Tuple[str, int]]:
    a = analyze(src, "h.py", Settings(target=target))
    assert not [d for d in a.diagnostics if d.code == "TL000"], a.diagnostics
    return sorted((d.code, d.span.line) for d in a.diagnostics)


# --------------------------------------------------------------------------
# size
# --------------------------------------------------------------------------


def test_ten_megabyte_file(tmp_path: Path) -> None:
    filler = "".join(f"CONST_{i} = {i} * 2  # filler line to make the file large\n"
                     for i in range(200_000))
    src = TL101 + filler
    src = src[: 10_500_000]
    src = src[: src.rindex("\n") + 1]
    p = tmp_path / "big.py"
    p.write_text(src)
    assert p.stat().st_size >= 10_000_000
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", "-j", "1",
                                          "--format", "concise", str(p), timeout=600)
    print(f"10 MB: {secs:.1f} s, RSS {rss:.0f} MB, exit {rc}")
    assert_clean(rc, out, err)
    assert rss < RSS_LIMIT_MB, f"RSS {rss:.0f} MB"
    assert secs < 60, f"a 10 MB file took {secs:.0f} s"
    # a clear message: the analysis reports the file as too large (TL003) or analyses it
    assert "TL003" in out or "TL101" in out, out[-2000:]


def test_five_thousand_kernels(tmp_path: Path) -> None:
    # compact, so that 5,000 kernels stay under the 2 MB per-file limit (TL003)
    one = '''
@T.prim_func
def k{i}(A: T.Tensor(S, h), B: T.Tensor(S, h), C: T.Tensor(S, h)):
 with T.Kernel(8, 8, threads=128) as (x, y):
  As = T.alloc_shared(P, h)
  Bs = T.alloc_shared(Q, h)
  Cl = T.alloc_fragment(R, f)
  for k in T.Pipelined(32, order={order}, stage=[0, 0, 1]):
   T.copy(A[y * 128, k * 32], As)
   T.copy(B[k * 32, x * 128], Bs)
   T.gemm(As, Bs, Cl)
  T.copy(Cl, C[y * 128, x * 128])
'''
    parts = ['import tilelang\nimport tilelang.language as T\nS = (1024, 1024)\nh = "float16"\nf = "float32"\nP = (128, 32)\nQ = (32, 128)\nR = (128, 128)\n']
    bad = 0
    for i in range(5000):
        dup = i % 50 == 0  # every 50th kernel has a duplicated order entry (TL101)
        bad += dup
        parts.append(one.format(i=i, order="[0, 0, 1]" if dup else "[0, 1, 2]"))
    p = tmp_path / "k5000.py"
    p.write_text("".join(parts))
    assert p.stat().st_size < 2_000_000
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", "-j", "1",
                                          "--format", "concise", "-q", str(p), timeout=600)
    print(f"5000 kernels ({p.stat().st_size // 1024} KiB): {secs:.1f} s, RSS {rss:.0f} MB")
    assert_clean(rc, out, err)
    assert rc == 1
    assert out.count("TL101") == bad, out[-2000:]
    assert rss < RSS_LIMIT_MB
    assert secs < 180


# --------------------------------------------------------------------------
# deep nesting (CPython itself refuses these files)
# --------------------------------------------------------------------------

DEEP = {
    "brackets": "x = " + "[" * 10_000 + "]" * 10_000,
    "parens": "x = " + "(" * 10_000 + ")" * 10_000,
    "unary": "x = " + "-" * 10_000 + "1",
    "sum": "x = " + "+".join(["1"] * 10_000),
    "calls": "x = f" + "()" * 10_000,
    "attrs": "x = a" + ".b" * 10_000,
    "lambdas": "x = " + "lambda: " * 10_000 + "1",
}


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_deep_nesting(tmp_path: Path, kind: str) -> None:
    p = tmp_path / f"deep_{kind}.py"
    p.write_text("import tilelang\nimport tilelang.language as T\n" + DEEP[kind] + "\n" + GEMM)
    rc, text, secs = analyze_in_subprocess(p)
    assert rc == 0, f"analyze() died (exit {rc}) on 10,000 nested {kind}:\n{text[-1500:]}"
    assert "TL001" in text and "TL000 0" in text, text
    rss = int(text.split("RSS")[1].split()[0])
    assert rss < RSS_LIMIT_MB and secs < 30, (rss, secs)
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", "--format",
                                          "concise", str(p), timeout=120)
    assert_clean(rc, out, err)
    assert "TL001" in out


# --------------------------------------------------------------------------
# bytes
# --------------------------------------------------------------------------


def test_binary_garbage(tmp_path: Path) -> None:
    rng = random.Random(0)
    data = bytes(rng.randrange(256) for _ in range(200_000))
    p = tmp_path / "garbage.py"
    p.write_bytes(b"import tilelang\n" + data)
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", str(p))
    assert_clean(rc, out, err, allowed=(1, 2))
    assert "binary" in (out + err).lower() or "utf-8" in (out + err).lower(), out + err
    # the same bytes as text, through analyze(): a diagnostic, never an exception
    codes("import tilelang\n" + data.decode("latin-1"))
    ascii_junk = "".join(chr(rng.randrange(32, 127)) if rng.random() > 0.05 else "\n"
                         for _ in range(100_000))
    assert any(c == "TL001" for c, _ in codes("import tilelang\n" + ascii_junk))


@pytest.mark.parametrize("where", ["statement", "comment",
                                   "string",
                                   "end"])
def test_nul_bytes(tmp_path: Path, where: str) -> None:
    if where == "statement":
        src = GEMM.replace("T.clear", "T.cl\x00ear")
    elif where == "comment":
        src = GEMM + "# a comment with \x00 in it\n"
    elif where == "string":
        src = GEMM + 'NAME = "a\x00b"\n'
    else:
        src = GEMM + "\x00"
    codes(src)  # no exception, no TL000
    p = tmp_path / "nul.py"
    # NUL after the first 8 KiB too (the CLI's binary sniffing looks at the start only)
    p.write_bytes((src + "#" * 9000 + "\n" + 'LATE = "\x00"\n').encode())
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", str(p))
    assert_clean(rc, out, err, allowed=(1, 2))


_BAD_LITERALS = ['"\\x"', '"\\N{NO SUCH NAME}"', 'b"\xe9"', '"\\u12"', "'''\\xZZ'''"]


@pytest.mark.parametrize("literal", _BAD_LITERALS + ['"\\x00"'])
def test_string_literals_python_rejects(literal: str) -> None:
    """Literals libcst parses but Python's literal evaluation rejects (``"\\x"`` is
    what one types on the way to ``"\\x41"``)."""
    codes(GEMM + "\nNAME = " + literal + "\n")
    codes(GEMM.replace('dtype="float16"', "dtype=" + literal, 1))


def test_non_utf8(tmp_path: Path) -> None:
    p = tmp_path / "latin1.py"
    p.write_bytes(GEMM.encode() + "# café\n".encode("latin-1"))
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", str(p))
    assert_clean(rc, out, err, allowed=(1, 2))
    assert "utf-8" in (out + err).lower(), out + err
    p2 = tmp_path / "utf16.py"
    p2.write_bytes(GEMM.encode("utf-16"))
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", str(p2))
    assert_clean(rc, out, err, allowed=(0, 1, 2))
    # a UTF-8 BOM is fine
    p3 = tmp_path / "bom.py"
    p3.write_bytes(b"\xef\xbb\xbf" + TL101.encode())
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", str(p3))
    assert_clean(rc, out, err)
    assert "TL101" in out


# --------------------------------------------------------------------------
# line endings and tabs: the same findings on the same lines
# --------------------------------------------------------------------------


def test_crlf_same_findings(tmp_path: Path) -> None:
    expected = codes(TL101)
    assert any(c == "TL101" for c, _ in expected)
    assert codes(TL101.replace("\n", "\r\n")) == expected
    p = tmp_path / "crlf.py"
    p.write_bytes(TL101.replace("\n", "\r\n").encode())
    rc, out, err, secs, rss = run_cli_rss("check", "--isolated", "--no-progress", str(p))
    assert_clean(rc, out, err)
    assert "TL101" in out


def test_mixed_line_endings_same_findings(tmp_path: Path) -> None:
    """\n, \r\n and bare \r mixed: the finding sits on the line Python itself
    counts (a bare \r followed by an empty line's \n is ONE line end, \r\n)."""
    lines = TL101.split("\n")
    mixed = "".join(line + ("\n", "\r\n", "\r")[i % 3] for i, line in enumerate(lines[:-1]))
    mixed += lines[-1]
    tree = ast.parse(mixed)
    dup = [n.lineno for n in ast.walk(tree)
           if isinstance(n, ast.Expr) and "B_shared" in ast.unparse(n) and "copy" in ast.unparse(n)]
    assert codes(mixed) == [("TL101", dup[0])]


def test_crlf_lf_mix_same_findings() -> None:
    expected = codes(TL101)
    lines = TL101.split("\n")
    mixed = "".join(line + ("\n", "\r\n")[i % 2] for i, line in enumerate(lines[:-1])) + lines[-1]
    assert codes(mixed) == expected


def test_tabs_same_findings(tmp_path: Path) -> None:
    expected = codes(TL101)
    tabbed = TL101.replace("    ", "\t")
    got = codes(tabbed)
    assert [c for c, _ in got] == [c for c, _ in expected]
    # a file mixing tabs and spaces inconsistently: a syntax error, reported as one
    lines = TL101.splitlines(keepends=True)
    i = next(n for n, ln in enumerate(lines) if "T.copy(B" in ln)
    lines[i] = lines[i].replace("                ", "\t\t    ", 1)
    codes("".join(lines))
