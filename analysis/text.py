"""Lines of a text and edits on them, with the standard library only (the
language server imports this before the analysis is loaded).

A text is kept as LSP lines: each with its terminator (``\\r\\n``, ``\\r`` or
``\\n``), the last one without (it may be "").  Positions are (0-based line,
code-point column).
"""

from __future__ import annotations

import re
from typing import List, Sequence, Tuple

_EOL = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> List[str]:
    """LSP lines with their terminators; the last entry never has one (it may be "")."""
    out: List[str] = []
    pos = 0
    for m in _EOL.finditer(text):
        out.append(text[pos:m.end()])
        pos = m.end()
    out.append(text[pos:])
    return out


def strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def splice(lines: Sequence[str], start: Tuple[int, int], end: Tuple[int, int],
           text: str) -> Tuple[List[str], int, int, int]:
    """Replace ``start``..``end`` (end exclusive; swapped when reversed,
    clamped to the text) by ``text``.  Returns the new lines, the first and
    last old lines the edit touched, and the change in the line count."""
    last = len(lines) - 1
    if end < start:
        start, end = end, start

    def clamp(line: int, col: int) -> Tuple[int, int]:
        if line > last:
            return last, len(strip_eol(lines[last]))
        return line, min(max(col, 0), len(strip_eol(lines[line])))

    sl, sc = clamp(*start)
    el, ec = clamp(*end)
    block = split_lines(lines[sl][:sc] + text + lines[el][ec:])
    if el < last and block[-1] == "":
        block.pop()  # the block ended with the line's own terminator
    new = list(lines[:sl]) + block + list(lines[el + 1:])
    if not new:
        new = [""]
    if new[-1].endswith(("\n", "\r")):
        new.append("")
    return new, sl, el, len(block) - (el - sl + 1)
