"""Text into top-level chunks: newline normalisation, source lines, the size
limit (TL003), and the split of a file into its top-level statements, by
CPython's tree when the file parses and by the tokenizer otherwise."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..model import Diagnostic, Span


def normalise_newlines(source: str) -> str:
    """Bare ``\r`` line ends (old Mac style, which Python accepts) become ``\n``.
    One character for one: offsets, lines and columns are unchanged."""
    return _BARE_CR.sub("\n", source) if "\r" in source else source


_BARE_CR = re.compile(r"\r(?!\n)")


def source_lines(source: str) -> List[str]:
    """Lines with their ends, split only where Python ends a line (``\n``,
    ``\r\n``, ``\r``) — not at form feeds or U+2028 like ``str.splitlines``."""
    text = normalise_newlines(source)
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


# Files larger than this are not analysed (TL003): real kernel files are far
# smaller, and libcst needs seconds and hundreds of MB per MB of source.
MAX_SOURCE_BYTES = 2_000_000


def too_large(source: str) -> Optional[Diagnostic]:
    size = len(source)
    if size <= MAX_SOURCE_BYTES:
        return None
    return Diagnostic(code="TL003", severity="information", span=Span(1, 0, 1, 0),
                      message=f"file not analysed: {size / 1e6:.1f} MB is over tilelint's "
                              f"{MAX_SOURCE_BYTES / 1e6:.0f} MB limit for one file")


@dataclass(frozen=True)
class Chunk:
    start_line: int  # 1-based line of the chunk's first line
    text: str


def split_chunks(source: str) -> List[Chunk]:
    """Split a file into its top-level statements (decorators stay with their def).

    A compound statement is one chunk with all its clauses (``try``/``except``/
    ``finally``, ``if``/``elif``/``else``): a chunk is always something CPython
    can parse on its own when the whole file parses.  When the file parses,
    CPython's own parser gives the statement boundaries; otherwise the tokenizer
    does (brackets and strings spanning lines are respected), and if it fails
    part-way (an unterminated string, say) the rest is cut at lines that start
    in column 0 with something other than a clause keyword.
    """
    source = normalise_newlines(source)
    lines = source_lines(source)
    tree = ast_tree(source)
    if tree is None:
        return chunks_at(lines, _token_starts(source, lines))
    starts = tree_starts(tree)
    ends = tree_ends(tree)
    chunks = chunks_at(lines, starts, ends)
    note_parsed(chunks, starts, ends)
    return chunks


def chunks_at(lines: Sequence[str], starts: Sequence[int],
              ends: Optional[Sequence[int]] = None) -> List[Chunk]:
    """The chunks of ``lines`` (``source_lines``) that begin at the statement
    lines ``starts`` (0-based, ascending when ``ends`` is given).  ``ends``:
    the 1-based last line of each statement, when known (CPython's tree), so
    that a line inside a string that starts with ``#`` is not taken for a
    comment."""
    # Comment lines right above a statement belong to it (``# tilelint: bind``).
    moved = []
    floor = 0
    for k, s in enumerate(starts if ends is not None else sorted(set(starts))):
        while s > floor and lines[s - 1].startswith("#"):
            s -= 1
        moved.append(s)
        if ends is not None:
            floor = max(floor, ends[k])
    starts = sorted(set(moved))
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    chunks: List[Chunk] = []
    for idx, begin in enumerate(starts):
        end = starts[idx + 1] if idx + 1 < len(starts) else len(lines)
        text = "".join(lines[begin:end])
        if text:
            chunks.append(Chunk(begin + 1, text))
    return chunks


# The texts of chunks cut from a file that CPython's parser accepted whole: each
# is a run of complete top-level statements, so it parses on its own too, and
# parse_chunk need not run CPython's parser on it again (on a whole file that
# second parse costs about half of libcst's).  Each maps to what the tokenizer
# sees of it (``parsed_scan``): the 0-based lines where its statements begin and
# the 1-based line where its last one ends.  A bounded map.
_PARSED_TEXTS: Dict[str, Tuple[Tuple[int, ...], Optional[int]]] = {}
_PARSED_MAX = 8192


def note_parsed(chunks: Sequence[Chunk], starts: Sequence[int], ends: Sequence[int]) -> None:
    """Record the chunks of a parsed text; ``starts``/``ends``: 0-based first
    and 1-based last lines of its top-level statements, in order."""
    if len(_PARSED_TEXTS) + len(chunks) > _PARSED_MAX:
        _PARSED_TEXTS.clear()
    k = 0
    for c in chunks:
        begin = c.start_line - 1
        stop = begin + c.text.count("\n") + (0 if c.text.endswith("\n") else 1)
        rel: List[int] = []
        last: Optional[int] = None
        while k < len(starts) and starts[k] < stop:
            if starts[k] >= begin:
                if not rel or rel[-1] != starts[k] - begin:
                    rel.append(starts[k] - begin)
                last = ends[k] - begin
            k += 1
        _PARSED_TEXTS[c.text] = (tuple(rel), last)


def parsed_scan(text: str) -> Optional["TokenScan"]:
    """What :func:`scan_tokens` gives for a chunk text cut from a file that
    parsed (None: not one): a run of complete statements tokenizes to its end
    with every bracket closed, no decorator waiting and its last logical line
    ended, so only where its statements begin and end is needed, and CPython's
    parser gave both."""
    facts = _PARSED_TEXTS.get(text)
    if facts is None:
        return None
    return TokenScan(list(facts[0]), facts[1], None, False, False, False, 0, 0)




def parsed_whole(text: str) -> bool:
    """Was ``text`` cut from a file that CPython's parser accepted whole (so it
    parses on its own, and need not be checked again)?"""
    return text in _PARSED_TEXTS

# Keywords that continue the compound statement above them at the same indent.
CLAUSE_KEYWORDS = frozenset({"else", "elif", "except", "finally"})

def ast_tree(source: str) -> Optional[ast.Module]:
    """CPython's tree of ``source`` (None: it does not parse).  The last two
    are kept: ``parse_module`` and the tracing of unknown values
    (``pipeline._source_facts``) both read the whole file's; neither changes it."""
    for text, tree in _TREES:
        if text is source or text == source:
            return tree
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    _TREES.insert(0, (source, tree))
    del _TREES[2:]
    return tree


_TREES: List[Tuple[str, Optional[ast.Module]]] = []


def tree_starts(tree: ast.Module) -> List[int]:
    starts: List[int] = []
    for node in tree.body:
        first = node.lineno
        for dec in getattr(node, "decorator_list", ()):
            first = min(first, dec.lineno)
        starts.append(first - 1)
    return starts


def tree_ends(tree: ast.Module) -> List[int]:
    return [node.end_lineno or node.lineno for node in tree.body]


def _token_starts(source: str, lines: Sequence[str]) -> List[int]:
    scan = scan_tokens(source)
    if scan.error is not None:
        fallback_starts(lines, scan.newline_end or 0, scan.starts)
    return scan.starts


@dataclass
class TokenScan:
    """What the tokenizer saw of a text, up to its end or its first error."""

    starts: List[int]  # 0-based lines of the top-level statements it began
    newline_end: Optional[int]  # 0-based line after the last logical line's end
    error: Optional[str]  # None: clean to the end; else "TypeName: message"
    pending_decorator: bool  # the last top-level logical line was a decorator
    line_open: bool  # the last logical line did not end (no NEWLINE after its tokens)
    # A string continued with a backslash ended in an error token: Python's
    # pure tokenizer then keeps its "needs continuation" flag for the rest of
    # the text (a later multi-line string becomes an error token too).
    needcont: bool
    depth: int  # brackets open at the end (of the tokens seen)
    min_depth: int  # the fewest open along the way (negative: a stray closer)


_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")


def scan_tokens(source: str) -> TokenScan:
    """Tokenize ``source``: the lines where top-level statements begin (not a
    decorated def, not a clause), where the last complete logical line ends,
    and how it stopped."""
    starts: List[int] = []  # 0-based line indices where a chunk starts
    depth_ok_line: Optional[int] = None
    error: Optional[str] = None
    depth = min_depth = 0
    needcont = False
    indent = 0
    at_stmt_start = True
    pending_decorator = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            ttype = tok.type
            if ttype == tokenize.INDENT:
                indent += 1
                continue
            if ttype == tokenize.DEDENT:
                indent -= 1
                continue
            if ttype in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING):
                continue
            if ttype == tokenize.NEWLINE:
                at_stmt_start = True
                depth_ok_line = tok.end[0]
                continue
            if ttype == tokenize.ENDMARKER:
                break
            if ttype == tokenize.OP:
                if tok.string in _OPENERS:
                    depth += 1
                elif tok.string in _CLOSERS:
                    depth -= 1
                    min_depth = min(min_depth, depth)
            elif ttype == tokenize.ERRORTOKEN and tok.start[0] != tok.end[0]:
                needcont = True
            if at_stmt_start:
                at_stmt_start = False
                if indent == 0:
                    clause = ttype == tokenize.NAME and tok.string in CLAUSE_KEYWORDS
                    if not pending_decorator and not clause:
                        starts.append(tok.start[0] - 1)
                    pending_decorator = tok.type == tokenize.OP and tok.string == "@"
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    return TokenScan(starts, depth_ok_line, error, pending_decorator, not at_stmt_start,
                     needcont, depth, min_depth)


def fallback_starts(lines: Sequence[str], first: int, starts: List[int]) -> None:
    """After the tokenizer failed: add to ``starts`` the lines from ``first`` on
    that start in column 0 with something other than a comment or a clause
    keyword (a decorated def stays with its decorators: a decorator after a
    complete one-line decorator does not start a statement either)."""
    for i in range(first, len(lines)):
        line = lines[i]
        if line[:1] and not line[:1].isspace() and not line.startswith("#") \
                and first_word(line) not in CLAUSE_KEYWORDS:
            if i not in starts:
                prev = _prev_decorator(lines, i) if starts else None
                if prev is None or (line.startswith("@") and not _one_line(prev)):
                    starts.append(i)


def first_word(line: str) -> str:
    m = re.match(r"[A-Za-z_]+", line)
    return m.group(0) if m else ""


def _prev_decorator(lines: Sequence[str], i: int) -> Optional[str]:
    """The line above ``i`` (blank and comment lines skipped) when it is a
    decorator, else None."""
    j = i - 1
    while j >= 0 and (not lines[j].strip() or lines[j].lstrip().startswith("#")):
        j -= 1
    return lines[j] if j >= 0 and lines[j].startswith("@") else None


def _one_line(line: str) -> bool:
    """Does ``line`` tokenize on its own, brackets closed (a whole decorator)?"""
    try:
        for _tok in tokenize.generate_tokens(io.StringIO(line.rstrip("\r\n") + "\n").readline):
            pass
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return False
    return True
