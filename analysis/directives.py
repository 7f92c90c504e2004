"""Targets a file asks for: the ``# tilelint: target`` directive and the
targets its code names.

Pure reading of the source (no I/O, never raises).  Which of them wins over
the command line and the configuration is decided by the one place that
builds per-file settings (``server/config.py``); this module only reports
what the file says.

* **Directive.**  ``# tilelint: target sm_90`` (several: ``# tilelint: target
  sm_90 sm_100``) on a line of the file's first comment block: the lines before
  the first line of code (blank lines, a shebang and an encoding line are part
  of the block).  The same text further down is not a directive.
* **Named targets.**  An architecture written in a string of the code (not in
  a comment or docstring) in one of these spellings:
  ``target="sm_90"`` / ``target="cuda -arch=sm_90"`` (a keyword argument or an
  assignment to a name containing ``target``), ``Target("cuda -arch=sm_90")``,
  ``{"kind": "cuda", "arch": "sm_100"}``, and any ``-arch=sm_NN`` /
  ``-mcpu=gfxNNN`` inside a string.  ``target="cuda"`` or ``"auto"`` name no
  architecture: the compiler takes the GPU it finds.
* **Required targets.**  When the code names no architecture but calls an op
  that tilelang 0.1.15 lowers on one family only, that family is the file's
  target: ``T.alloc_tmem`` and the ``T.tcgen05_*`` ops exist on sm_100–sm_110
  only (``TargetIsSm100`` in ``src/cuda/op/gemm.cc``, ``TargetHasTmem``) →
  sm_100; ``T.wgmma_gemm`` lowers on Hopper only (``AllowWgmma``:
  ``TargetIsHopper``) → sm_90; a file that imports the Ascend dialect
  (``import tilelang.ascend.language as T``) → ascend.  Judging such a kernel
  on sm_80 would report on a build that cannot exist.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

from . import targets as targets_mod

# ``# tilelint: target NAME [NAME ...]`` (names separated by spaces or commas).
_DIRECTIVE = re.compile(r"^#\s*tilelint:\s*target\b(?P<body>[^#]*)", re.IGNORECASE)
_ARCH_IN_STRING = re.compile(r"-arch=(sm_?\d+[af]?)|-mcpu=(gfx\d+[a-z]?)", re.IGNORECASE)
_BARE_ARCH = re.compile(r"^\s*(?:(?:cuda|nvidia|hip|rocm)\s+)?(sm_?\d+[af]?|gfx\d+[a-z]?)\s*$",
                        re.IGNORECASE)
# Cheap test before tokenizing: does the text mention an architecture at all?
_MAYBE = re.compile(r"sm_?\d|gfx\d", re.IGNORECASE)


@dataclass(frozen=True)
class FileTargets:
    """What one file says about its targets (names normalised)."""

    # ``# tilelint: target`` names, known ones only, in the order written.
    directive: Tuple[str, ...] = ()
    # Names of the directive tilelint does not know (``sm_75``, typos).
    unknown: Tuple[str, ...] = ()
    # 1-based line of the directive (None: no directive).
    directive_line: Optional[int] = None
    # Known targets named by the code, first occurrence first.
    named: Tuple[str, ...] = ()


def read_targets(source: str) -> FileTargets:
    """The directive and the named targets of ``source`` (cached per text)."""
    if not isinstance(source, str):
        return FileTargets()
    try:
        return _read_targets(source)
    except Exception:  # pragma: no cover - never let a reading fail the caller
        return FileTargets()


@functools.lru_cache(maxsize=64)
def _read_targets(source: str) -> FileTargets:
    directive, unknown, line = directive_targets(source)
    return FileTargets(directive=directive, unknown=unknown, directive_line=line,
                       named=named_targets(source))


def _leading_lines(source: str) -> Iterator[str]:
    """The lines of ``source`` one at a time (``str.splitlines`` splits all
    of a large file, where only the first comment block is read)."""
    at, n = 0, len(source)
    while at < n:
        m = _LINE_BREAK.search(source, at)
        if m is None:
            yield source[at:]
            return
        yield source[at:m.start()]
        at = m.end()


_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def directive_targets(source: str) -> Tuple[Tuple[str, ...], Tuple[str, ...], Optional[int]]:
    """(known names, unknown names, line) of the first ``# tilelint: target``
    in the first comment block; ``((), (), None)`` without one."""
    for i, raw in enumerate(_leading_lines(source), start=1):
        text = raw.strip()
        if i == 1 and text.startswith("\ufeff"):
            text = text[1:].strip()
        if not text:
            continue
        if not text.startswith("#"):
            break  # the first line of code ends the block
        m = _DIRECTIVE.match(text)
        if m is None:
            continue
        names = [n for n in re.split(r"[\s,]+", m.group("body")) if n]
        known: List[str] = []
        unknown: List[str] = []
        for n in names:
            norm = targets_mod.normalise(n)
            if targets_mod.get(norm) is not None:
                if norm not in known:
                    known.append(norm)
            else:
                unknown.append(n)
        if not names:
            unknown.append("")
        return tuple(known), tuple(unknown), i
    return (), (), None


def _names_an_arch(text: str) -> bool:
    """``_MAYBE.search(text)``, fast on a large text: the regex, case-blind,
    costs about 40 ns a character; ``str.find`` over the lowered text finds
    the few places it could match."""
    low = text.lower()
    for word in ("sm", "gfx"):
        at = low.find(word)
        while at >= 0:
            if _MAYBE.match(low, at):
                return True
            at = low.find(word, at + 1)
    return False


def named_targets(source: str) -> Tuple[str, ...]:
    """Known targets the code names, in order; else the targets its ops
    require (see the module docstring)."""
    out: List[str] = []
    if _names_an_arch(source):
        for value in _target_strings(source):
            for name in _archs_in(value):
                norm = targets_mod.normalise(name)
                if targets_mod.get(norm) is not None and norm not in out:
                    out.append(norm)
    if not out:
        out = list(required_targets(source))
    return tuple(out)


# Ops that lower on one architecture family only (called as ``X.op(``).
_REQUIRES = re.compile(r"\.\s*(?:(?P<tmem>alloc_tmem|tcgen05_\w+)|(?P<wgmma>wgmma_gemm\w*))\s*\(")


# An import of tilelang 0.1.15's Ascend dialect (``tilelang.ascend.language``,
# ``tilelang.ascend``): its kernels lower for Ascend only.
_ASCEND_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+tilelang\.ascend\b", re.MULTILINE)


def required_targets(source: str) -> Tuple[str, ...]:
    """sm_100 for tensor memory / tcgen05, sm_90 for wgmma_gemm, ascend for an
    import of the Ascend dialect (first use first)."""
    if "tcgen05_" not in source and "alloc_tmem" not in source and "wgmma_gemm" not in source \
            and "tilelang.ascend" not in source:
        return ()
    code = _LEXEME.sub(lambda m: " " * len(m.group(0)), source)  # comments, strings out
    found = [(m.start(), "sm_100" if m.group("tmem") else "sm_90")
             for m in _REQUIRES.finditer(code)]
    found += [(m.start(), "ascend") for m in _ASCEND_IMPORT.finditer(code)]
    out: List[str] = []
    for _at, t in sorted(found):
        if t not in out:
            out.append(t)
    return tuple(out)


def _archs_in(value: str) -> List[str]:
    found = [a or b for a, b in _ARCH_IN_STRING.findall(value)]
    if found:
        return found
    m = _BARE_ARCH.match(value)
    return [m.group(1)] if m else []


# A noqa comment at the end of a line, bare (every code) or with a list of
# codes after a colon: the one spelling that the analysis reads
# (``pipeline.noqa_map``) and that the editor's quick fix extends
# (``server/lsp/code_action.py``).
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?",
                  re.IGNORECASE)


def string_end(text: str, i: int) -> int:
    """``text[i]`` is a quote that opens a string literal: the index just past
    the literal, or -1 when ``text`` ends inside it.  Triple quotes and
    backslash escapes are followed; only the closing quote(s) end a literal."""
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j, n = i + len(quote), len(text)
    while j < n:
        if text[j] == "\\":
            j += 2
        elif text.startswith(quote, j):
            return j + len(quote)
        else:
            j += 1
    return -1


# One pass over the text: comments and string literals (other text is skipped).
_LEXEME = re.compile(
    r"#[^\n]*"
    r"|(?P<prefix>[rRbBuUfF]{0,2})(?P<str>'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\""
    r"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\")",
    re.S)
# What stands before a string in a target position.
_BEFORE = re.compile(
    r"(?:\b\w*target\w*\s*=|['\"]arch['\"]\s*:|\bTarget\s*\()\s*$", re.IGNORECASE)


def _target_strings(source: str) -> List[str]:
    """Values of the code's string literals that stand where a target goes."""
    out: List[str] = []
    for m in _LEXEME.finditer(source):
        lit = m.group("str")
        if lit is None:
            continue  # a comment
        if "f" in m.group("prefix").lower() or "b" in m.group("prefix").lower():
            continue
        q = 3 if lit[:3] in ("'''", '"""') else 1
        value = lit[q:-q]
        if not _MAYBE.search(value):
            continue
        start = m.start()
        before = source[max(0, start - 80):start]
        if _BEFORE.search(before):
            out.append(value)
        elif _ARCH_IN_STRING.search(value) and not _standalone(source, start, m.end()):
            out.append(value)
    return out


def _standalone(source: str, start: int, end: int) -> bool:
    """A string that is a statement on its own line (a docstring or a bare
    literal): only blanks before it on its line and after it."""
    line_start = source.rfind("\n", 0, start) + 1
    if source[line_start:start].strip():
        return False
    line_end = source.find("\n", end)
    rest = source[end:len(source) if line_end < 0 else line_end].strip()
    return not rest or rest.startswith("#")
