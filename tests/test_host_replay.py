"""The incremental engine gives what a fresh analysis gives, after every edit.

Random edits of the kinds people make (seeded, so a failure replays) are
applied to texts built from fixture files, through ``AnalysisHost.edit``;
after each one the host's snapshot analysis must equal ``analyze`` of the
same text: the same diagnostics, the same kernel results, the same module.

The texts join several fixture files into one module, so that kernels share
module constants, ``main()`` functions and call sites (and collide on names),
which is where a missing dependency would show.  The last test shows that the
replay can fail: with the constants left out of the kernels' inputs it finds a
difference.
"""

from __future__ import annotations

import ast
import pathlib
import random
import re
import warnings
from collections import OrderedDict
from typing import List, Tuple

import pytest

from tilelint.analysis import analyze, frontend, host as host_mod, packing
from tilelint.analysis.model import Settings
from tilelint.analysis.text import splice, split_lines

FIX = pathlib.Path(__file__).parent / "fixtures"

MIXES = {
    # Two GEMM kernels with module constants, main() locals, argparse defaults.
    "gemm_main": ["parity/gemm_two_kernels.py", "realworld/rw_main_locals.py",
                  "model/module_level_symbolic.py"],
    # Autotune lists, config functions, parametrize cases, macros.
    "configs": ["realworld/rw_autotune.py", "realworld/rw_config_fn.py",
                "realworld/rw_parametrize.py", "model/alias_macro_bind.py"],
}

STATEMENTS = ["T.copy(A[0, 0], A_shared)", "x_tmp = block_K * 2", "T.clear(C_local)"]
# Texts that leave a file unparsable the ways a half-typed edit does: an open
# bracket or string (the tokenizer then reads on to the end of the file), a
# string or line continued with a backslash, a stray closer, a decorator without
# its def, a clause without its statement, a bad unindent.
BREAKS = ["(", "[", "{", ")", "]", '"""', "'''", "'\\", "\\", "@dec", "else:", "   ", "= ("]
NUMBERS = ["1", "2", "3", "4", "16", "32", "64", "128", "256"]


def _mix(name: str) -> str:
    return "".join((FIX / p).read_text() + "\n\n" for p in MIXES[name])


class Replay:
    """A text and the host it is fed to, edited in step."""

    def __init__(self, text: str, settings: Settings) -> None:
        self.lines: List[str] = split_lines(text)
        self.settings = settings
        self.host = host_mod.AnalysisHost()
        self.host.set_text("f.py", text)
        self.edits = 0

    def edit(self, line: int, col: int, end_line: int, end_col: int, text: str) -> None:
        self.lines = splice(self.lines, (line, col), (end_line, end_col), text)[0]
        self.host.edit("f.py", (line, col), (end_line, end_col), text)
        self.edits += 1
        self.check()

    def check(self) -> None:
        text = "".join(self.lines)
        snap = self.host.snapshot()
        assert snap.text("f.py") == text
        got = snap.analysis("f.py", self.settings)
        # A fresh analysis: the autotune sweeps kept across analyses
        # (packing._SWEEPS) are neither read nor filled by it.
        kept = packing._SWEEPS
        packing._SWEEPS = OrderedDict()
        try:
            want = analyze(text, "f.py", self.settings)
        finally:
            packing._SWEEPS = kept
        if got != want:
            raise AssertionError(f"after edit {self.edits}: the host differs from analyze\n"
                                 + _diff(got, want))

    # -- the edits ----------------------------------------------------------------
    def indented(self, rng: random.Random) -> int:
        cands = [i for i, ln in enumerate(self.lines) if ln[:1] == " " and ln.strip()]
        return rng.choice(cands) if cands else 0

    def change_number(self, rng: random.Random, module_level: bool = False) -> None:
        pat = re.compile(r"^[A-Za-z_]\w* = \d+\s*$") if module_level else None
        cands = [i for i, ln in enumerate(self.lines) if re.search(r"\b\d+\b", ln)
                 and (pat is None or pat.match(ln))]
        if not cands:
            return
        i = rng.choice(cands)
        m = rng.choice(list(re.finditer(r"\b\d+\b", self.lines[i])))
        self.edit(i, m.start(), i, m.end(), rng.choice(NUMBERS))

    def change_token(self, rng: random.Random) -> None:
        """A string literal or a name edited in place (a dtype switched, a
        name lengthened or cut short): the edits the parser re-uses the old
        tree for (frontend.reparse_token)."""
        cands = [(i, m) for i, ln in enumerate(self.lines)
                 for m in re.finditer(r'"[a-z0-9_]+"|\b[a-z_][a-z0-9_]*\b', ln)]
        if not cands:
            return
        i, m = rng.choice(cands)
        word = m.group()
        if word.startswith('"'):
            new = rng.choice(['"float16"', '"bfloat16"', '"float32"', '"int8"', '""'])
        else:
            new = rng.choice([word + "x", word[:-1] or "y", word + "_2", "block_M"])
        self.edit(i, m.start(), i, m.end(), new)

    def insert_line(self, rng: random.Random) -> None:
        i = self.indented(rng)
        indent = self.lines[i][:len(self.lines[i]) - len(self.lines[i].lstrip())]
        self.edit(i, 0, i, 0, indent + rng.choice(STATEMENTS + ["pass", "# note"]) + "\n")

    def delete_line(self, rng: random.Random) -> None:
        i = self.indented(rng)
        self.edit(i, 0, i + 1, 0, "")

    def type_statement(self, rng: random.Random) -> None:
        i = self.indented(rng)
        indent = self.lines[i][:len(self.lines[i]) - len(self.lines[i].lstrip())]
        end = len(self.lines[i].rstrip("\r\n"))
        self.edit(i, end, i, end, "\n" + indent)
        col = len(indent)
        for ch in rng.choice(STATEMENTS):
            self.edit(i + 1, col, i + 1, col, ch)
            col += 1

    def break_and_fix(self, rng: random.Random) -> None:
        cands = [(i, m.start()) for i, ln in enumerate(self.lines)
                 for m in re.finditer(r"[):]", ln)]
        if not cands:
            return
        i, c = rng.choice(cands)
        ch = self.lines[i][c]
        self.edit(i, c, i, c + 1, "")
        self.edit(i, c, i, c, ch)

    def comment_line(self, rng: random.Random) -> None:
        """A comment in column 0 (it joins the statement right below it)."""
        i = rng.randrange(len(self.lines))
        self.edit(i, 0, i, 0, rng.choice(["#\n", "# note\n", "#"]))

    def broken_stretch(self, rng: random.Random) -> None:
        """Break the file, make a few other edits while it stays broken, then
        take the break out again."""
        i = rng.randrange(len(self.lines))
        col = rng.randrange(len(self.lines[i].rstrip("\r\n")) + 1)
        text = rng.choice(BREAKS)
        self.edit(i, col, i, col, text)
        for _ in range(rng.randrange(1, 4)):
            rng.choice([self.change_number, self.insert_line, self.shift_lines,
                        self.comment_line])(rng)
        for n in range(i, len(self.lines)):  # the break, wherever it moved to
            if self.lines[n][col:col + len(text)] == text:
                self.edit(n, col, n, col + len(text), "")
                break

    def shift_lines(self, rng: random.Random) -> None:
        i = rng.randrange(len(self.lines))
        if rng.random() < 0.5 and self.lines[i].strip() == "":
            self.edit(i, 0, i + 1, 0, "")
        else:
            self.edit(i, 0, i, 0, "\n" if rng.random() < 0.5 else "# moved\n")


def _diff(got, want) -> str:
    out = []
    gd, wd = set(got.diagnostics), set(want.diagnostics)
    out += [f"  only host:    {d.code} {d.span} {d.message[:100]}" for d in gd - wd]
    out += [f"  only analyze: {d.code} {d.span} {d.message[:100]}" for d in wd - gd]
    if got.kernels != want.kernels:
        for a, b in zip(got.kernels, want.kernels, strict=False):
            if a != b:
                out.append(f"  kernel {a.kernel.name}: results differ")
        if len(got.kernels) != len(want.kernels):
            out.append(f"  {len(got.kernels)} kernels vs {len(want.kernels)}")
    if got.module != want.module:
        out.append("  modules differ")
    return "\n".join(out[:20])


KINDS: List[Tuple[str, float]] = [
    ("number", 0.2), ("constant", 0.1), ("insert", 0.1), ("delete", 0.1), ("token", 0.1),
    ("type", 0.1), ("syntax", 0.1), ("shift", 0.1), ("comment", 0.05), ("broken", 0.15),
]


def replay(mix: str, seed: int, n_edits: int, settings: Settings) -> Replay:
    rng = random.Random(seed)
    r = Replay(_mix(mix), settings)
    r.check()
    kinds, weights = zip(*KINDS, strict=True)
    while r.edits < n_edits:
        kind = rng.choices(kinds, weights)[0]
        if kind == "number":
            r.change_number(rng)
        elif kind == "constant":
            r.change_number(rng, module_level=True)
        elif kind == "insert":
            r.insert_line(rng)
        elif kind == "token":
            r.change_token(rng)
        elif kind == "delete":
            r.delete_line(rng)
        elif kind == "type":
            r.type_statement(rng)
        elif kind == "syntax":
            r.break_and_fix(rng)
        elif kind == "comment":
            r.comment_line(rng)
        elif kind == "broken":
            r.broken_stretch(rng)
        else:
            r.shift_lines(rng)
    return r


@pytest.mark.parametrize("mix,seed,settings", [
    ("gemm_main", 1, Settings()),
    ("configs", 2, Settings(target="sm_90", all_bindings=True)),
])
def test_host_matches_analyze_after_every_edit(mix, seed, settings):
    r = replay(mix, seed, 500, settings)
    assert r.edits >= 500
    # The kernel cache was used, also for kernels whose input chunks only moved
    # (their spans and the call lines in their labels moved with them).
    assert r.host.kernels.hits > 0
    assert r.host.kernels.moved_hits > 0
    # Edits inside one token re-used the chunk's old tree.
    assert r.host.parse.reparsed > 0


def test_replay_fails_when_a_reparsed_token_keeps_its_columns(monkeypatch):
    """The re-used tree's positions must move after a token whose length
    changed: with them left in place, the replay finds a difference."""
    monkeypatch.setattr(frontend.reparse, "_moved_columns",
                        lambda positions, line, col, delta: dict(positions))
    with pytest.raises(AssertionError, match="differs from analyze"):
        replay("gemm_main", 1, 500, Settings())


def test_replay_fails_when_a_dependency_is_not_recorded(monkeypatch):
    """Without the module constants among a kernel's inputs, an edit of a
    constant reuses a stale result, and the replay sees it."""
    real = host_mod.kernel_inputs

    def without_constants(index, own, kernel, reads=None):
        return real(index, own, kernel, reads)[1:]

    monkeypatch.setattr(host_mod, "kernel_inputs", without_constants)
    r = Replay(_mix("gemm_main"), Settings())
    r.check()
    # The last one: an earlier assignment of the same name is overridden.
    i = [n for n, ln in enumerate(r.lines) if re.match(r"^[A-Za-z_]\w* = \d+\s*$", ln)][-1]
    with pytest.raises(AssertionError, match="differs from analyze"):
        for value in ("7", "13", "4096"):
            m = re.search(r"\d+", r.lines[i])
            r.edit(i, m.start(), i, m.end(), value)


def _move_everything(r: Replay) -> None:
    """Edits that move every chunk below the first one and change nothing else."""
    for _ in range(3):
        r.edit(0, 0, 0, 0, "# moved\n")


def test_replay_fails_when_moved_labels_keep_their_lines(monkeypatch):
    """A kernel result reused after its call sites moved must name their new
    lines in its instance labels ("matmul(…) at line N"): without the renaming
    the replay sees the old lines."""
    monkeypatch.setattr(host_mod, "_relabel", lambda label, moves: label)
    r = Replay(_mix("gemm_main"), Settings())
    r.check()
    with pytest.raises(AssertionError, match="differs from analyze"):
        _move_everything(r)


def test_replay_fails_when_moved_cores_keep_their_spans(monkeypatch):
    """An instance core (planning, packing, sync, loop rules) reused after its
    kernel moved must have its spans moved: left where they were, the replay
    sees it.  Whole results are not reused here, so the cores are."""
    real = host_mod.relocate

    def strict_does_nothing(obj, moves, strict, memo):
        return obj if strict else real(obj, moves, strict, memo)

    monkeypatch.setattr(host_mod, "relocate", strict_does_nothing)
    monkeypatch.setattr(host_mod.KernelCache, "get_moved", lambda self, *a: None)
    r = Replay(_mix("gemm_main"), Settings())
    r.check()
    with pytest.raises(AssertionError, match="differs from analyze"):
        _move_everything(r)
    assert r.host.cores.hits > 0


def test_broken_split_is_the_whole_file_split():
    """While the file does not parse, the host splits it one run of statements
    at a time (``host.split_broken``); after every edit its chunks must be
    ``frontend.split_chunks`` of the whole text.  Random breaks (BREAKS, cuts)
    pile up on fixture texts, so most states do not parse."""
    texts = [_mix("gemm_main"), _mix("configs")]
    texts += [p.read_text() for p in sorted((FIX / "realworld").glob("*.py"))[:8]]
    rng = random.Random(7)
    broken = 0
    for text in texts:
        host = host_mod.AnalysisHost()
        host.set_text("f.py", text)
        lines = split_lines(text)
        host.snapshot().module("f.py")
        for _ in range(40):
            i = rng.randrange(len(lines))
            c = rng.randrange(len(lines[i].rstrip("\r\n")) + 1)
            if rng.random() < 0.6:
                new, end = rng.choice(BREAKS + ["\n", "#", ":"]), (i, c)
            else:
                new, end = "", (i, min(c + rng.randrange(1, 4), len(lines[i].rstrip("\r\n"))))
            lines = splice(lines, (i, c), end, new)[0]
            host.edit("f.py", (i, c), end, new)
            snap = host.snapshot()
            now = "".join(lines)
            want = [ch.start_line - 1 for ch in frontend.split_chunks(now)]
            assert snap.chunk_starts("f.py") == want, (text[:60], i, c, new)
            broken += not _parses(now)
    assert broken > 200
    assert host.scans.hits > 0


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in the broken texts
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def test_replay_fails_when_a_broken_split_claims_too_much(monkeypatch):
    """An open bracket that a later line closes does not run to the end of the
    file: taken as one that does, the split of the lines between differs from
    the whole file's, and the replay sees it."""
    monkeypatch.setattr(host_mod, "_never_closed", lambda *a: True)
    r = Replay(_mix("gemm_main"), Settings())
    r.check()
    defs = [n for n, ln in enumerate(r.lines) if ln.startswith("def ")]
    with pytest.raises(AssertionError, match="differs from analyze"):
        r.edit(defs[-1] + 1, 0, defs[-1] + 1, 0, ")\n")
        r.edit(defs[0], 0, defs[0], 0, "x = (\n")


def test_replay_fails_when_kept_inputs_ignore_new_chunks(monkeypatch):
    """A kernel's inputs are kept across snapshots unless a chunk added or
    removed since is filed under a name the kernel's walk read
    (``host.footprint``).  With no chunk filed under anything, a new
    assignment that overrides the constant a kernel pipelines with goes
    unseen."""
    monkeypatch.setattr(host_mod, "footprint", lambda cm: frozenset())
    text = (
        "import tilelang.language as T\n\nSTAGES = 2\n\n\n"
        "@T.prim_func\n"
        "def k(A: T.Tensor((1024, 1024), \"float16\")):\n"
        "    with T.Kernel(8, threads=128) as bx:\n"
        "        S = T.alloc_shared((128, 64), \"float16\")\n"
        "        for i in T.Pipelined(16, num_stages=STAGES):\n"
        "            T.copy(A[bx * 128, i * 64], S)\n")
    r = Replay(text, Settings())
    r.check()
    with pytest.raises(AssertionError, match="differs from analyze"):
        # Its own chunk, right above the kernel's: the other chunks and the
        # lines right above the kernel keep their texts.
        r.edit(5, 0, 5, 0, "STAGES = 64\n\n\n")
    assert r.host.inputs.hits > 0


ASCEND = sorted((pathlib.Path(__file__).resolve().parent / "fixtures" / "ascend").glob("gemm_*.py"))


# One loop, a spilled ring, two loops (AscendResult.loops), an outer serial loop.
ASCEND_MOVED = ("gemm_ns2", "gemm_ns3", "gemm_ring11", "gemm_two_loops", "gemm_outer_tiles",
                "gemm_bf16_v2")


@pytest.mark.parametrize("path", [p for p in ASCEND if p.stem in ASCEND_MOVED],
                         ids=lambda p: p.stem)
def test_ascend_results_after_lines_move(path):
    """Lines inserted and deleted above an Ascend kernel: its results hold
    plain-int statement lines and a preview whose comments name lines
    ("(line 16)"); a reused result must carry the new lines, as a fresh
    analyze() of the same text does."""
    settings = Settings(target="ascend")
    text = path.read_text(encoding="utf-8")
    h = host_mod.AnalysisHost()
    h.set_text(str(path), text)
    assert h.snapshot().analysis(str(path), settings) == analyze(text, str(path), settings)
    for inserted in ("# one\n", "# two\n# three\n"):
        h.edit(str(path), (1, 0), (1, 0), inserted)
        lines = text.split("\n")
        text = "\n".join(lines[:1]) + "\n" + inserted + "\n".join(lines[1:])
        assert h.snapshot().analysis(str(path), settings) == analyze(text, str(path), settings)


def test_import_edits_are_seen():
    """The host re-reads the file's aliases only when a changed chunk holds
    an import word (AnalysisHost._imports): edits of the import lines, and a
    fork-dialect word typed into a kernel, must still match a fresh analysis."""
    r = Replay(_mix("gemm_main"), Settings())
    i = next(n for n, ln in enumerate(r.lines) if ln.startswith("import tilelang.language as T"))
    end = len(r.lines[i].rstrip("\n"))
    r.edit(i, end, i, end, "L")  # this import now names TL (the mix has other T imports)
    r.edit(i, end, i, end + 1, "")
    r.edit(0, 0, 0, 0, "from tilelang import language as T2\n")
    r.edit(0, 0, 1, 0, "")
    k = next(n for n, ln in enumerate(r.lines) if "T.Kernel(" in ln)
    col = r.lines[k].index("T.Kernel(") + len("T.Kernel(")
    r.edit(k, col, k, col, "is_npu=True, ")
    r.edit(k, col, k, col + len("is_npu=True, "), "")
    assert r.edits == 6
