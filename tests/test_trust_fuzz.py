"""No crash on typed input (issue 7, part 3).

While a user types, the editor sends every intermediate state of a file.  Each
of those must go through ``analyze()`` without an exception, without a TL000
("internal error") diagnostic, and quickly.  Inputs:

* every line prefix of every parity fixture (exhaustive);
* token prefixes of every parity fixture (every token for small files, an even
  sample of about ``TOKEN_SAMPLE`` per file otherwise; ``TILELINT_FUZZ_FULL=1``
  takes every token prefix of every file);
* seeded random deletions / duplications / swaps of lines;
* a hypothesis property over arbitrary line-level edits of the fixtures;
* a sample of those through ``tilelint check`` in a subprocess (exit 0 or 1).
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import time
import tokenize
import traceback
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest

from tilelint.analysis import Settings, analyze

ROOT = Path(__file__).resolve().parent.parent
PARITY_DIR = ROOT / "tests" / "fixtures" / "parity"
FIXTURES = sorted(p for p in PARITY_DIR.glob("*.py") if not p.name.startswith("_"))
FULL = bool(os.environ.get("TILELINT_FUZZ_FULL"))
TOKEN_SAMPLE = 40
PER_INPUT_LIMIT_S = 2.0  # generous: a fixture analyses in ~10 ms on the dev machine
TARGETS = ("sm_80", "sm_90")


# --------------------------------------------------------------------------
# Input generators (shared with the standalone scan below)
# --------------------------------------------------------------------------


def line_prefixes(text: str) -> Iterator[str]:
    lines = text.splitlines(keepends=True)
    for i in range(len(lines) + 1):
        yield "".join(lines[:i])
    # the same prefixes cut in the middle of the next line (what typing produces)
    for i, line in enumerate(lines):
        if len(line.strip()) > 2:
            yield "".join(lines[:i]) + line[: len(line) // 2]


def token_offsets(text: str) -> List[int]:
    """Character offsets where each token ends."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            row, col = tok.end
            if row - 1 < len(starts):
                out.append(min(len(text), starts[row - 1] + col))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return sorted(set(out))


def token_prefixes(text: str, sample: Optional[int]) -> Iterator[str]:
    offs = token_offsets(text)
    if sample is not None and len(offs) > sample:
        step = len(offs) / sample
        offs = sorted({offs[int(i * step)] for i in range(sample)} | {offs[-1]})
    for o in offs:
        yield text[:o]


def line_mutations(text: str, seed: int, count: int) -> Iterator[Tuple[str, str]]:
    rng = random.Random(seed)
    lines = text.splitlines(keepends=True)
    if not lines:
        return
    for _ in range(count):
        new = list(lines)
        what = []
        for _ in range(rng.randint(1, 3)):
            if not new:
                break
            i = rng.randrange(len(new))
            op = rng.choice(("delete", "duplicate", "swap", "dedent", "indent"))
            if op == "delete":
                del new[i]
            elif op == "duplicate":
                new.insert(i, new[i])
            elif op == "swap" and len(new) > 1:
                j = rng.randrange(len(new))
                new[i], new[j] = new[j], new[i]
            elif op == "dedent":
                new[i] = new[i].lstrip(" ")
            else:
                new[i] = "    " + new[i]
            what.append(f"{op}@{i + 1}")
        yield ",".join(what), "".join(new)


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------


def run_one(source: str, target: str = "sm_80") -> Optional[str]:
    """None if the input is handled cleanly, else a description of the failure."""
    t0 = time.perf_counter()
    try:
        a = analyze(source, "fuzz.py", Settings(target=target))
    except Exception:
        return "exception:\n" + traceback.format_exc()
    dt = time.perf_counter() - t0
    internal = [d for d in a.diagnostics if d.code == "TL000"]
    if internal:
        return "TL000: " + "; ".join(d.message for d in internal)
    if dt > PER_INPUT_LIMIT_S:
        return f"slow: {dt:.2f} s"
    return None


def _fail_report(fixture: Path, failures: List[Tuple[str, str, str]]) -> str:
    out = [f"{len(failures)} failing inputs from {fixture.name}; first ones:"]
    for kind, src, why in failures[:3]:
        out.append(f"--- {kind} ({len(src)} chars), last line: {src.splitlines()[-1:]!r}\n{why}")
    return "\n".join(out)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_prefixes_and_mutations(fixture: Path) -> None:
    text = fixture.read_text()
    failures = []
    n = 0
    for src in line_prefixes(text):
        n += 1
        why = run_one(src)
        if why:
            failures.append(("line prefix", src, why))
    for src in token_prefixes(text, None if FULL else TOKEN_SAMPLE):
        n += 1
        why = run_one(src, TARGETS[n % 2])
        if why:
            failures.append(("token prefix", src, why))
    for what, src in line_mutations(text, seed=hash(fixture.name) % 1000, count=12):
        n += 1
        why = run_one(src, TARGETS[n % 2])
        if why:
            failures.append((f"mutation {what}", src, why))
    assert n > 0
    assert not failures, _fail_report(fixture, failures)


# --------------------------------------------------------------------------
# Property-based: arbitrary line edits and inserted junk
# --------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st  # noqa: E402

_TEXTS = [p.read_text() for p in FIXTURES]
_JUNK = st.sampled_from([
    "", "(", ")", "[", "]", ":", "T.", "T.Pipelined(", "num_stages=", "order=[0, 0]",
    "stage=[", "T.copy(A, ", "with T.Kernel(", "@T.prim_func", "def ", "for k in ",
    "    ", "\t", "lambda", "**", "0", "-1", "10**100", "None", "'x'", "#", "\\",
    "\"\"\"", "async ", "yield", "T.alloc_shared((", "block_K // 0", "1e309",
])


@st.composite
def edited_fixture(draw) -> str:
    text = draw(st.sampled_from(_TEXTS))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["del", "dup", "junk", "cut"]))
        if op == "del":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "junk":
            line = lines[i]
            c = draw(st.integers(0, len(line)))
            lines[i] = line[:c] + draw(_JUNK) + line[c:]
        else:
            lines = lines[:i] + [lines[i][: draw(st.integers(0, len(lines[i])))]]
    return "".join(lines)


@hsettings(max_examples=150, deadline=None, derandomize=True,
           suppress_health_check=[HealthCheck.too_slow])
@given(src=edited_fixture(), target=st.sampled_from(TARGETS + ("ascend",)))
def test_property_edits_never_crash(src: str, target: str) -> None:
    why = run_one(src, target)
    assert why is None, why


@hsettings(max_examples=60, deadline=None, derandomize=True)
@given(src=st.text(max_size=400))
def test_property_arbitrary_text(src: str) -> None:
    why = run_one("import tilelang.language as T\n" + src)
    assert why is None, why


# --------------------------------------------------------------------------
# A sample through the CLI
# --------------------------------------------------------------------------


def test_cli_sample_exit_codes(tmp_path: Path) -> None:
    rng = random.Random(7)
    written = []
    for fixture in FIXTURES:
        text = fixture.read_text()
        prefixes = list(line_prefixes(text))
        for j, src in enumerate(rng.sample(prefixes, min(2, len(prefixes)))):
            p = tmp_path / f"{fixture.stem}_p{j}.py"
            p.write_text("import tilelang\n" + src)
            written.append(p)
    # one process per batch keeps this fast; several batches check the exit code per file
    batches = [written[i::4] for i in range(4)]
    for batch in batches:
        proc = subprocess.run(
            [sys.executable, "-m", "tilelint.server.cli", "check", "--isolated", "--no-progress",
             "-j", "1", *map(str, batch)],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert "internal error" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


# --------------------------------------------------------------------------
# Standalone scan: python tests/test_trust_fuzz.py [--full] > report
# --------------------------------------------------------------------------


def _scan(full: bool) -> int:
    total = bad = 0
    for fixture in FIXTURES:
        text = fixture.read_text()
        gens = [("line prefix", line_prefixes(text)),
                ("token prefix", token_prefixes(text, None if full else TOKEN_SAMPLE)),
                ("mutation", (s for _, s in line_mutations(text, 1, 50 if full else 12)))]
        for kind, gen in gens:
            for src in gen:
                total += 1
                for target in TARGETS + (("ascend",) if full else ()):
                    why = run_one(src, target)
                    if why:
                        bad += 1
                        print(f"=== {fixture.name} {kind} target={target} len={len(src)}\n"
                              f"{why}\n--- input tail:\n{src[-300:]}\n")
                        break
    print(f"# inputs: {total}, failing: {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(_scan("--full" in sys.argv))
