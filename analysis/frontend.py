"""Frontend: a libcst parse of a kernel file into the immutable kernel model.

Mirrors what tilelang's script parser hands to the passes: the kernels of the
file, their allocations, and for every loop the statement sequence the
pipeline passes schedule.  The file is never imported or executed.

The file is split into top-level statements ("chunks") which are parsed one by
one, so a syntax error only costs the chunk it sits in (TL001 there, the rest
still analysed) and an editor can re-parse just the chunk that changed.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import io
import keyword
import re
import tokenize
import warnings
from dataclasses import dataclass, field, replace as dc_replace
from functools import lru_cache
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import ops as ops_mod, relevance
from .model import (
    Access,
    Alloc,
    Attr,
    Binding,
    BinOp,
    Call,
    CallSite,
    Compare,
    Const,
    Diagnostic,
    DictExpr,
    Expr,
    FuncDef,
    FuncStmt,
    IfExp,
    Kernel,
    Loop,
    Macro,
    Module,
    Name,
    Opaque,
    Param,
    Slice,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
    UnaryOp,
    walk_stmts,
)

# --------------------------------------------------------------------------
# Import aliases
# --------------------------------------------------------------------------

_LANG_IMPORT = re.compile(
    r"^\s*import\s+tilelang\.(?P<asc>ascend\.)?language\s+as\s+(?P<alias>\w+)", re.M)
_LANG_FROM = re.compile(
    r"^\s*from\s+tilelang(?P<asc>\.ascend)?\s+import\s+(?:.*,\s*)?language\s+as\s+(?P<alias>\w+)", re.M)
_LANG_FROM_PLAIN = re.compile(
    r"^\s*from\s+tilelang(?P<asc>\.ascend)?\s+import\s+(?:[^#\n]*,\s*)?language\s*(?:,|$|#)", re.M)
_TL_IMPORT = re.compile(r"^\s*import\s+tilelang(?:\s+as\s+(?P<alias>\w+))?\s*$", re.M)
_IMPORTS_TILELANG = re.compile(r"^\s*(?:import|from)\s+tilelang\b", re.M)
# The tilelang-ascend fork's dialect (not in tilelang 0.1.15): ``T.Kernel(...,
# is_npu=True)``, ``target="npuir"``, and upper-case/UB allocators reached
# through ``tilelang.language`` (0.1.15 has none of them; its own Ascend
# dialect is ``tilelang.ascend.language`` with ``alloc_l1``/``alloc_shared``).
# Each pattern begins with its literal (a leading ``\b`` would make the regex
# engine try every position of the file: ~4 ms on 3,000 lines); the word
# boundary before ``is_npu`` and ``target`` is checked by _npu_fork.
_NPU_WORDS = (re.compile(r"is_npu\s*=\s*True\b"), re.compile(r"target\s*=\s*[\'\"]npuir[\'\"]"))
_NPU_ALLOC = re.compile(r"\.alloc_(?:L1|L0A|L0B|L0C|ub|UB)\s*\(")


def _npu_fork(source: str) -> bool:
    """Does ``source`` use the tilelang-ascend fork's dialect (``\bis_npu=True``,
    ``\btarget="npuir"``, ``.alloc_L1(``...)?"""
    if _NPU_ALLOC.search(source):
        return True
    for rx in _NPU_WORDS:
        for m in rx.finditer(source):
            before = source[m.start() - 1] if m.start() else " "
            if not (before.isalnum() or before == "_"):
                return True
    return False


@dataclass(frozen=True)
class Aliases:
    """Names under which the file reaches ``tilelang.language`` and ``tilelang``."""

    lang: Tuple[str, ...] = ("T",)  # aliases of tilelang.language (normalised to "T")
    tilelang: Tuple[str, ...] = ("tilelang",)
    ascend: bool = False
    imports_tilelang: bool = False
    npu_fork: bool = False  # the tilelang-ascend fork's dialect (kernels: dialect "npu")


def find_aliases(source: str) -> Aliases:
    lang: List[str] = []
    ascend = False
    for rx in (_LANG_IMPORT, _LANG_FROM):
        for m in rx.finditer(source):
            lang.append(m.group("alias"))
            ascend = ascend or bool(m.group("asc"))
    for m in _LANG_FROM_PLAIN.finditer(source):
        lang.append("language")
        ascend = ascend or bool(m.group("asc"))
    tl = ["tilelang"]
    for m in _TL_IMPORT.finditer(source):
        if m.group("alias"):
            tl.append(m.group("alias"))
    if not lang:
        lang = ["T"]
    return Aliases(tuple(dict.fromkeys(lang)), tuple(dict.fromkeys(tl)), ascend,
                   bool(_IMPORTS_TILELANG.search(source)),
                   npu_fork=not ascend and _npu_fork(source))


# --------------------------------------------------------------------------
# Splitting into top-level chunks
# --------------------------------------------------------------------------


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
    tree = _ast_tree(source)
    if tree is None:
        return chunks_at(lines, _token_starts(source, lines))
    starts = _tree_starts(tree)
    ends = _tree_ends(tree)
    chunks = chunks_at(lines, starts, ends)
    _note_parsed(chunks, starts, ends)
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


def _note_parsed(chunks: Sequence[Chunk], starts: Sequence[int], ends: Sequence[int]) -> None:
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


# Keywords that continue the compound statement above them at the same indent.
CLAUSE_KEYWORDS = frozenset({"else", "elif", "except", "finally"})


def _ast_starts(source: str) -> Optional[List[int]]:
    """0-based first lines of the top-level statements, or None when the file
    does not parse (or nests too deeply for CPython's parser)."""
    tree = _ast_tree(source)
    return None if tree is None else _tree_starts(tree)


def _ast_tree(source: str) -> Optional[ast.Module]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _tree_starts(tree: ast.Module) -> List[int]:
    starts: List[int] = []
    for node in tree.body:
        first = node.lineno
        for dec in getattr(node, "decorator_list", ()):
            first = min(first, dec.lineno)
        starts.append(first - 1)
    return starts


def _tree_ends(tree: ast.Module) -> List[int]:
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
    keyword (a decorated def stays with its decorator)."""
    for i in range(first, len(lines)):
        line = lines[i]
        if line[:1] and not line[:1].isspace() and not line.startswith("#") \
                and first_word(line) not in CLAUSE_KEYWORDS:
            if i not in starts:
                if line.startswith("@") or not (starts and _prev_is_decorator(lines, i)):
                    starts.append(i)


def first_word(line: str) -> str:
    m = re.match(r"[A-Za-z_]+", line)
    return m.group(0) if m else ""


def _prev_is_decorator(lines: Sequence[str], i: int) -> bool:
    j = i - 1
    while j >= 0 and (not lines[j].strip() or lines[j].lstrip().startswith("#")):
        j -= 1
    return j >= 0 and lines[j].startswith("@")


# --------------------------------------------------------------------------
# Per-chunk result
# --------------------------------------------------------------------------

# A function returning a loop iterator: (name, parameters, returned expression).
IterHelper = Tuple[str, Tuple[Param, ...], Expr]


@dataclass(frozen=True)
class ChunkModel:
    kernels: Tuple[Kernel, ...] = ()
    constants: Tuple[Tuple[str, Expr], ...] = ()
    call_sites: Tuple[CallSite, ...] = ()
    functions: Tuple[Tuple[str, Tuple[Param, ...]], ...] = ()
    macros: Tuple[Macro, ...] = ()
    problems: Tuple[Diagnostic, ...] = ()
    defs: Tuple[FuncDef, ...] = ()
    argparse: Tuple[Tuple[str, Expr], ...] = ()
    toplevel: Tuple[FuncStmt, ...] = ()
    # Functions that return a loop iterator (``def maybe_pipeline(n, s): return
    # T.Pipelined(n, num_stages=s) if s > 0 else T.serial(n)``): name, params, expr.
    iter_helpers: Tuple[IterHelper, ...] = ()


_NO_MODEL = ChunkModel()


def parse_module(source: str) -> Module:
    """Parse a whole file into a :class:`Module`.  Never raises."""
    big = too_large(source)
    if big is not None:
        return Module(problems=(big,))
    try:
        source = normalise_newlines(source)
        aliases = find_aliases(source)
        tree = _ast_tree(source)
        if tree is None:
            chunks = split_chunks(source)
            models = [parse_chunk(c.text, c.start_line, aliases) for c in chunks]
            return combine(models, aliases)
        # The file parses: the chunks are cut at the statements of CPython's
        # tree, and only those the analysis can read get a libcst model (the
        # others have nothing a kernel reads; see relevance.py).
        starts = _tree_starts(tree)
        ends = _tree_ends(tree)
        chunks = chunks_at(source_lines(source), starts, ends)
        _note_parsed(chunks, starts, ends)
        firsts = [c.start_line for c in chunks]
        nodes: List[List[ast.stmt]] = [[] for _ in chunks]
        for node, first in zip(tree.body, starts, strict=True):
            nodes[bisect.bisect_right(firsts, first + 1) - 1].append(node)
        try:
            keep: Optional[set] = relevance.relevant_chunks(
                [c.text for c in chunks], firsts, source_lines(source), nodes)
        except RecursionError:
            keep = None
        models = [parse_chunk(c.text, c.start_line, aliases) if keep is None or i in keep
                  else _NO_MODEL
                  for i, c in enumerate(chunks)]
        return combine(models, aliases)
    except RecursionError:
        return Module(problems=(_problem("TL001", Span(1, 0, 1, 0),
                                         "the file nests too deeply to analyse"),))


def combine(models: Iterable[ChunkModel], aliases: Aliases) -> Module:
    kernels: List[Kernel] = []
    constants: List[Tuple[str, Expr]] = []
    calls: List[CallSite] = []
    functions: List[Tuple[str, Tuple[Param, ...]]] = []
    macros: List[Macro] = []
    problems: List[Diagnostic] = []
    defs: List[FuncDef] = []
    argp: List[Tuple[str, Expr]] = []
    toplevel: List[FuncStmt] = []
    helpers: List[IterHelper] = []
    for m in models:
        kernels.extend(m.kernels)
        constants.extend(m.constants)
        calls.extend(m.call_sites)
        functions.extend(m.functions)
        macros.extend(m.macros)
        problems.extend(m.problems)
        defs.extend(m.defs)
        argp.extend(m.argparse)
        toplevel.extend(m.toplevel)
        helpers.extend(m.iter_helpers)
    if macros or helpers:
        mtuple = tuple(macros)
        htuple = tuple(helpers)
        kernels = [_link_kernel(k, mtuple, htuple) if _needs_link(k, mtuple, htuple) else k
                   for k in kernels]
    fork = [k for k in kernels if k.dialect == "npu"]
    if fork:  # TL004 once per file: nothing in it is modelled
        problems.append(Diagnostic(
            code="TL004", severity="information", span=fork[0].kernel_span or fork[0].name_span,
            kernel=fork[0].name,
            message="this file is written for the tilelang-ascend fork (`T.Kernel(..., "
                    "is_npu=True)`, `T.alloc_L1`/`T.alloc_ub`, `target=\"npuir\"`), which "
                    "tilelang 0.1.15 does not have; tilelint does not model that dialect, so "
                    f"none of its {len(fork)} kernel(s) is checked"))
    return Module(tuple(kernels), tuple(constants), tuple(calls), tuple(functions),
                  tuple(macros), aliases.imports_tilelang, tuple(problems),
                  defs=tuple(defs), argparse=tuple(argp), toplevel=tuple(toplevel))


@lru_cache(maxsize=4096)
def parse_chunk(text: str, start_line: int, aliases: Aliases) -> ChunkModel:
    """Parse one top-level statement.  Cached by its text, position and aliases."""
    return parse_chunk_tree(text, start_line, aliases, keep=False)[0]


def parse_chunk_tree(text: str, start_line: int, aliases: Aliases, keep: bool = True
                     ) -> Tuple[ChunkModel, Optional["ChunkTree"]]:
    """:func:`parse_chunk`, uncached, with the libcst tree it was built from
    (None when the text did not get one), for :func:`reparse_token`; with
    ``keep`` False the tree has no leaves (nothing to re-parse from)."""
    # CPython's parser first (compile-only, nothing runs): it rejects what it
    # cannot compile fast and with a good message, and it guards libcst, whose
    # native parser overflows the C stack (SIGSEGV) on ~1,300 nested brackets.
    try:
        if text not in _PARSED_TEXTS:
            _compile_only(text)
    except SyntaxError as err:
        return ChunkModel(problems=(_ast_problem(text, start_line, err),)), None
    except (RecursionError, MemoryError):
        return ChunkModel(problems=(_problem(
            "TL001", Span(start_line, 0, start_line, 1),
            "this statement nests too deeply to parse"),)), None
    except ValueError:  # NUL bytes (SyntaxError on newer Pythons)
        return ChunkModel(problems=(_problem(
            "TL001", _nul_span(text, start_line), "the source contains a NUL byte"),)), None
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        return ChunkModel(problems=(_syntax_problem(text, start_line, exc),)), None
    except RecursionError:
        return ChunkModel(problems=(_problem(
            "TL001", Span(start_line, 0, start_line, 1),
            "this statement nests too deeply to parse"),)), None
    try:
        positions, leaves = _positions(module, keep)
    except RecursionError:
        return _too_deep(start_line), None
    tree = ChunkTree(text, module, positions, leaves)
    return _build(tree, start_line, aliases), tree


def _too_deep(start_line: int) -> ChunkModel:
    return ChunkModel(problems=(_problem(
        "TL001", Span(start_line, 0, start_line, 1),
        "this statement nests too deeply to analyse"),))


def _build(tree: "ChunkTree", start_line: int, aliases: Aliases) -> ChunkModel:
    try:
        builder = _Builder(tree.text, start_line, aliases, tree.positions)
        with warnings.catch_warnings():
            # String literals are evaluated (ast.literal_eval) to read dtypes:
            # the user's invalid escapes would warn on our stderr.
            warnings.simplefilter("ignore")
            return builder.build(tree.module)
    except RecursionError:
        return _too_deep(start_line)


# ---- re-parsing an edit inside one token ------------------------------------
# The edits people make while tuning a kernel change one literal or name: a
# default ``num_stages=3`` becomes 4, ``"float16"`` becomes ``"bfloat16"``, a
# name is typed one letter at a time.  When the old and new texts of a chunk
# differ inside one token, and the new text of that token is still one token of
# the same kind, the new libcst tree is the old one with that leaf replaced (and
# its ancestors copied), and positions move only on that line, after the token.
# Nothing else differs, so the chunk model built from it is the one a full parse
# gives (tests/test_frontend_fastpaths.py compares the two).

_LEAF_TOKENS: Dict[type, int] = {
    cst.Name: tokenize.NAME, cst.Integer: tokenize.NUMBER, cst.Float: tokenize.NUMBER,
    cst.Imaginary: tokenize.NUMBER, cst.SimpleString: tokenize.STRING,
}


Leaves = List[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]]


class ChunkTree:
    """A chunk's text, its libcst module, the module's positions (chunk
    lines, 1-based) and its one-token leaves (names, numbers, strings) with
    their ancestors."""

    __slots__ = ("text", "module", "positions", "leaves")

    def __init__(self, text: str, module: cst.Module,
                 positions: Dict[int, Tuple[int, int, int, int]], leaves: "Leaves") -> None:
        self.text = text
        self.module = module
        self.positions = positions
        self.leaves = leaves


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:] == b[len(b) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _one_token(text: str, kind: int) -> bool:
    """Is ``text`` exactly one token of ``kind`` (not a keyword)?"""
    if not text or "\n" in text or "\r" in text:
        return False
    if kind == tokenize.NAME and (keyword.iskeyword(text) or keyword.issoftkeyword(text)):
        return False
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return False
    if not toks or toks[0].type != kind or toks[0].string != text:
        return False
    return all(t.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and not t.string.strip()
               for t in toks[1:])


def reparse_token(old: ChunkTree, text: str, start_line: int, aliases: Aliases
                  ) -> Optional[Tuple[ChunkModel, ChunkTree]]:
    """The model of ``text`` (and its tree) when it differs from ``old.text``
    inside one name, number or string literal on one line, and is the same
    kind of token after the edit; None otherwise (parse it whole)."""
    tree = patch_tree(old, text)
    return None if tree is None else (_build(tree, start_line, aliases), tree)


def patch_tree(old: ChunkTree, text: str) -> Optional[ChunkTree]:
    """The tree of ``text`` made from ``old``'s (see :func:`reparse_token`)."""
    before = old.text
    delta = len(text) - len(before)
    if not old.leaves or text == before or abs(delta) > 256:
        return None
    p = _common_prefix(before, text)
    q = _common_suffix(before, text, min(len(before), len(text)) - p)
    if "\n" in before[p:len(before) - q] or "\n" in text[p:len(text) - q]:
        return None
    line_start = before.rfind("\n", 0, p) + 1
    line = before.count("\n", 0, p) + 1
    c0, c1 = p - line_start, len(before) - q - line_start
    found = [x for x in old.leaves if _covers(old.positions.get(id(x[0])), line, c0, c1)]
    if len(found) != 1:
        return None
    leaf, ancestors = found[0]
    r = old.positions[id(leaf)]
    token = text[line_start + r[1]:line_start + r[3] + delta]
    value = getattr(leaf, "value", None)
    if value != before[line_start + r[1]:line_start + r[3]] or \
            not _one_token(token, _LEAF_TOKENS[type(leaf)]):
        return None
    try:
        if text not in _PARSED_TEXTS:
            _compile_only(text)
        new_leaf = leaf.with_changes(value=token)
        if not ancestors or ancestors[0] is not old.module:
            return None
        module, replaced = _rebuild([*ancestors, leaf], new_leaf)
    except Exception:  # not the same kind of token after all: parse it whole
        return None
    positions = _moved_columns(old.positions, line, r[3], delta)
    renamed = {}
    for old_node, new_node in replaced:
        positions[id(new_node)] = positions.pop(id(old_node))
        renamed[id(old_node)] = new_node
    leaves: Leaves = [
        (renamed.get(id(x), x), tuple([renamed.get(id(a), a) for a in chain]))
        for x, chain in old.leaves]
    return ChunkTree(text, cast(cst.Module, module), positions, leaves)


def _covers(r: Optional[Tuple[int, int, int, int]], line: int, c0: int, c1: int) -> bool:
    return r is not None and r[0] == line == r[2] and r[1] <= c0 and c1 <= r[3]


def _rebuild(path: List[cst.CSTNode], new_leaf: cst.CSTNode
             ) -> Tuple[cst.CSTNode, List[Tuple[cst.CSTNode, cst.CSTNode]]]:
    """Copies of ``path``'s nodes with its last one replaced by ``new_leaf``:
    the new root and (old node, new node) pairs."""
    replaced = [(path[-1], new_leaf)]
    new = new_leaf
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
        changes: Dict[str, Any] = {}
        for f in dataclasses.fields(parent):
            v = getattr(parent, f.name)
            if v is child:
                changes[f.name] = new
                break
            if isinstance(v, (tuple, list)) and any(x is child for x in v):
                changes[f.name] = type(v)(new if x is child else x for x in v)
                break
        if not changes:
            raise ValueError("child not found in its parent")
        new = parent.with_changes(**changes)
        replaced.append((parent, new))
    return new, replaced


def _moved_columns(positions: Dict[int, Tuple[int, int, int, int]], line: int, col: int,
                   delta: int) -> Dict[int, Tuple[int, int, int, int]]:
    """``positions`` with every start or end on ``line`` at or after ``col``
    moved by ``delta`` columns."""
    if not delta:
        return dict(positions)
    out = {}
    for k, r in positions.items():
        if r[0] == line or r[2] == line:
            a = r[1] + delta if r[0] == line and r[1] >= col else r[1]
            b = r[3] + delta if r[2] == line and r[3] >= col else r[3]
            r = (r[0], a, r[2], b)
        out[k] = r
    return out


def _positions(module: cst.Module, leaves: bool = False
               ) -> Tuple[Dict[int, Tuple[int, int, int, int]], "Leaves"]:
    """The ranges of libcst's ``PositionProvider``, faster: ``id(node)`` →
    ``(start line, start column, end line, end column)``.

    ``MetadataWrapper.resolve(PositionProvider)`` runs one code-generation
    pass that tracks line and column, then walks the whole tree a second time
    for batchable providers (there are none here), and its position tracking
    splits every token with a regex and records every node through a
    generator-based context manager.  ``_PositionState`` hooks the same
    code-generation pass (libcst's ``CodegenState`` protocol) with cheaper
    bookkeeping (plain tuples keyed by ``id``: the module keeps every node
    alive while the map is used) and no second walk.  Should libcst's
    internals change, the wrapper is the fallback;
    tests/test_frontend_fastpaths.py checks that both give the same ranges."""
    try:
        state = (_LeafPositionState if leaves else _PositionState)(
            module.default_indent, module.default_newline)
        module._codegen(state)
        return state.computed, state.leaves
    except RecursionError:
        raise
    except Exception:  # pragma: no cover - another libcst version
        return {id(node): (r.start.line, r.start.column, r.end.line, r.end.column)
                for node, r in MetadataWrapper(module, unsafe_skip_copy=True)
                .resolve(PositionProvider).items()}, []


class _Syntactic:
    """``record_syntactic_position`` as a plain context manager (the
    semantic range of a node, optionally from the start/end of child nodes)."""

    __slots__ = ("state", "node", "start_node", "end_node", "line", "column")

    def __init__(self, state: _PositionState, node: cst.CSTNode,
                 start_node: Optional[cst.CSTNode], end_node: Optional[cst.CSTNode]) -> None:
        self.state = state
        self.node = node
        self.start_node = start_node
        self.end_node = end_node

    def __enter__(self) -> None:
        self.line = self.state.line
        self.column = self.state.column

    def __exit__(self, *exc: object) -> None:
        st = self.state
        computed = st.computed
        if self.start_node is not None:
            start = computed[id(self.start_node)][:2]
        else:
            start = (self.line, self.column)
        if self.end_node is not None:
            end = computed[id(self.end_node)][2:]
        else:
            end = (st.line, st.column)
        computed[id(self.node)] = start + end


from libcst._nodes.internal import CodegenState as _CodegenState  # noqa: E402


class _PositionState(_CodegenState):
    """Tracks line/column while libcst generates code."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        # CodegenState is a dataclass; its fields are set here directly.
        self.default_indent = default_indent
        self.default_newline = default_newline
        self.provider = None
        self.indent_tokens: List[str] = []
        self.tokens: List[str] = []
        self.line = 1
        self.column = 0
        self.computed: Dict[int, Tuple[int, int, int, int]] = {}
        self.leaves: Leaves = []
        self._stack: List[Tuple[int, int]] = []

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)  # (Module's codegen looks at whether there are any)
        if "\n" in value or "\r" in value:
            parts = _NEWLINES.split(value)
            self.line += len(parts) - 1
            self.column = len(parts[-1])
        else:
            self.column += len(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:  # the text changes; recorded positions do not
            self.tokens.pop()

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column = self._stack.pop()
        key = id(node)
        if key not in self.computed:
            self.computed[key] = (line, column, self.line, self.column)

    # libcst's is a generator context manager; this one is a plain class (cheaper).
    def record_syntactic_position(  # type: ignore[override]
            self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
            end_node: Optional[cst.CSTNode] = None) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)


class _LeafPositionState(_PositionState):
    """Positions, and the names, numbers and strings, each with its ancestors
    (root first), for reparse_token."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent, default_newline)
        self._nodes: List[cst.CSTNode] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append((self.line, self.column))
        self._nodes.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column = self._stack.pop()
        self._nodes.pop()
        key = id(node)
        if key not in self.computed:
            self.computed[key] = (line, column, self.line, self.column)
        if type(node) in _LEAF_TOKENS:
            self.leaves.append((node, tuple(self._nodes)))


_NEWLINES = re.compile(r"\r\n?|\n")
_EMPTY_MODULE = cst.Module([])


# --------------------------------------------------------------------------
# A fast walk over libcst nodes
# --------------------------------------------------------------------------
# ``CSTNode.visit`` rebuilds every node it passes (``_visit_and_replace_children``
# constructs and validates a copy) and dispatches through getattr per node; the
# builder only reads the tree, so it walks the dataclass fields itself.  Only
# fields that can hold code are followed (whitespace, brackets, commas and
# operators never do), in libcst's own visiting order, which is the source order:
# the dataclass order differs from it for the classes listed in _FIELD_ORDER.
# tests/test_frontend_fastpaths.py checks the order against ``CSTNode.children``.

_NOT_CODE = ("whitespace", "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace",
             "leading_lines", "lines_after_decorators", "header", "footer", "comma",
             "equal", "dot", "colon", "first_colon", "second_colon", "semicolon",
             "operator", "indent", "asynchronous", "star", "encoding", "default_indent",
             "default_newline", "has_trailing_newline", "newline", "trailing_whitespace",
             "relative", "leading_whitespace")
_FIELD_ORDER: Dict[str, Tuple[str, ...]] = {
    "IfExp": ("body", "test", "orelse"),
    "FunctionDef": ("decorators", "name", "type_parameters", "params", "returns", "body"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "Parameters": ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "Lambda": ("params", "body"),
    "Arg": ("keyword", "value"),
    "ExceptHandler": ("type", "name", "body"),
}
_CODE_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _code_fields(cls: type) -> Tuple[str, ...]:
    names = _CODE_FIELDS.get(cls)
    if names is None:
        declared = [f.name for f in dataclasses.fields(cls)]
        order = _FIELD_ORDER.get(cls.__name__)
        if order is not None:
            declared = [n for n in order if n in declared] + \
                [n for n in declared if n not in order]
        names = _CODE_FIELDS[cls] = tuple(
            n for n in declared if n not in _NOT_CODE and not n.startswith("whitespace"))
    return names


# libcst's node classes are abstract-base-class subclasses, for which every
# ``isinstance`` goes through ``ABCMeta.__instancecheck__``; the walk asks by
# exact type instead (node classes are final).
_NODE_TYPES: Dict[type, bool] = {}


def _is_node_type(t: type) -> bool:
    hit = _NODE_TYPES.get(t)
    if hit is None:
        hit = _NODE_TYPES[t] = issubclass(t, cst.CSTNode)
    return hit


def code_children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes of ``node`` that can hold code, in source order."""
    out: List[cst.CSTNode] = []
    for name in _code_fields(type(node)):
        v = getattr(node, name)
        t = type(v)
        if t is tuple or t is list:
            out.extend(x for x in v if _is_node_type(type(x)))
        elif _is_node_type(t):
            out.append(v)
    return out


def _calls_in(node: cst.CSTNode, out: List[cst.Call]) -> List[cst.Call]:
    """Every call under ``node`` in source order (a call before the calls in
    its arguments), not entering function definitions below ``node``."""
    stack = [node]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Call:
            out.append(cast(cst.Call, n))
        elif t is cst.FunctionDef:
            continue
        kids = code_children(n)
        kids.reverse()
        stack.extend(kids)
    return out


def _syntax_problem(text: str, start_line: int, exc: cst.ParserSyntaxError) -> Diagnostic:
    """TL001 at the broken line.  CPython's own parser (compile-only: nothing runs)
    usually names the real culprit ("'(' was never closed") where libcst reports
    the next token, so its message and position are preferred."""
    line = start_line + max(exc.raw_line, 1) - 1
    col = max(exc.raw_column, 0)
    msg = re.sub(r"^error at \d+:\d+: ", "", exc.message.replace("parser error: ", ""))
    try:
        _compile_only(text)
    except SyntaxError as err:
        if err.lineno:
            line = start_line + err.lineno - 1
            col = max((err.offset or 1) - 1, 0)
            msg = err.msg
    except (ValueError, RecursionError, MemoryError):  # NUL bytes, absurd nesting
        pass
    lines = [ln.rstrip("\r\n") for ln in source_lines(text)]
    rel = line - start_line
    width = len(lines[rel]) if 0 <= rel < len(lines) else col + 1
    end = min(max(col + 1, col), max(width, col + 1))
    return _problem("TL001", Span(line, col, line, end), f"syntax error: {msg}")


def _compile_only(text: str) -> None:
    """``ast.parse`` with the user's SyntaxWarnings/DeprecationWarnings (invalid
    escapes, ``is`` with a literal…) kept out of our output: the file is never
    run, so they are not ours to print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ast.parse(text)


def _ast_problem(text: str, start_line: int, err: SyntaxError) -> Diagnostic:
    if "null bytes" in str(err.msg):
        return _problem("TL001", _nul_span(text, start_line), "the source contains a NUL byte")
    line = start_line + max(err.lineno or 1, 1) - 1
    col = max((err.offset or 1) - 1, 0)
    lines = text.split("\n")
    rel = line - start_line
    width = len(lines[rel]) if 0 <= rel < len(lines) else col + 1
    end = max(col + 1, min(width, col + 1))
    return _problem("TL001", Span(line, col, line, end), f"syntax error: {err.msg}")


def _nul_span(text: str, start_line: int) -> Span:
    i = text.find("\x00")
    before = text[:max(i, 0)]
    line = start_line + before.count("\n")
    col = len(before) - (before.rfind("\n") + 1)
    return Span(line, col, line, col + 1)


def _problem(code: str, span: Span, message: str) -> Diagnostic:
    return Diagnostic(code=code, severity="error", span=span, message=message)


# --------------------------------------------------------------------------
# The builder
# --------------------------------------------------------------------------

_GEMM_OPS = ("gemm", "wgmma", "mma")
# ``with ...:`` statements that launch a device kernel.
KERNEL_LAUNCHES = ("T.Kernel", "T.ScopeKernel", "T.ClusterKernel")
_FILL_OPS = ("fill", "clear")
_COPY_OPS = ("copy", "async_copy", "tma_copy", "c2d_im2col", "im2col", "transpose")
_DTYPE_KEY = {"float": "float32", "half": "float16", "double": "float64", "int": "int32"}
_BIND_RX = re.compile(r"#\s*tilelint:\s*bind\s+(?P<body>.*)$")

_ALLOC_SCOPES = {
    "alloc_shared": "shared.dyn",
    "alloc_fragment": "local.fragment",
    "alloc_local": "local",
    "alloc_var": "local.var",
    "alloc_barrier": "shared.barrier",
    # Ascend (tilelang/ascend/language/allocate.py): L1 and L0 have scopes of
    # their own; UB is ``alloc_shared`` (shared.dyn).  The upper-case and
    # ``alloc_ub`` spellings of older adapters map to the same memories.
    "alloc_l1": "shared.l1",
    "alloc_L1": "shared.l1",
    "alloc_l0a": "shared.l0a",
    "alloc_L0A": "shared.l0a",
    "alloc_l0b": "shared.l0b",
    "alloc_L0B": "shared.l0b",
    "alloc_l0c": "shared.l0c",
    "alloc_L0C": "shared.l0c",
    "alloc_ub": "shared.dyn",
    "alloc_UB": "shared.dyn",
    "alloc_tmem": "shared.tmem",
    "alloc_reducer": "local.fragment",
}

_LOOP_KINDS = {
    "Pipelined": "pipelined",
    "serial": "serial",
    "Parallel": "parallel",
    "unroll": "unroll",
    "vectorized": "vectorized",
    "Persistent": "serial",
    "grid": "parallel",
}

# The keyword arguments of tilelang 0.1.15's ``T.Pipelined``
# (tilelang/language/loop.py); anything else (a fork's ``sync=``/``group=``) is
# unsupported.
_PIPELINED_KWARGS = ("start", "stop", "num_stages", "order", "stage", "annotations")


class _Builder:
    def __init__(self, text: str, start_line: int, aliases: Aliases,
                 positions: Dict[int, Tuple[int, int, int, int]]) -> None:
        self.text = text
        self.lines = [ln.rstrip("\r\n") for ln in source_lines(text)]
        self.offset = start_line - 1
        self.aliases = aliases
        self.positions = positions
        self.kernels: List[Kernel] = []
        self.constants: List[Tuple[str, Expr]] = []
        self.calls: List[CallSite] = []
        self.functions: List[Tuple[str, Tuple[Param, ...]]] = []
        self.macros: List[Macro] = []
        self.problems: List[Diagnostic] = []
        self.defs: List[FuncDef] = []
        self.argparse: List[Tuple[str, Expr]] = []
        self.toplevel: List[FuncStmt] = []
        self.iter_helpers: List[IterHelper] = []

    # ---- positions --------------------------------------------------------
    def span(self, node: cst.CSTNode) -> Span:
        r = self.positions.get(id(node))
        if r is None:
            return Span(self.offset + 1, 0, self.offset + 1, 0)
        return Span(r[0] + self.offset, r[1], r[2] + self.offset, r[3])

    def src(self, node: cst.CSTNode) -> str:
        try:
            return _EMPTY_MODULE.code_for_node(node)
        except Exception:  # pragma: no cover - defensive
            return "<?>"

    # ---- names ------------------------------------------------------------
    def dotted(self, node: cst.BaseExpression) -> Optional[str]:
        parts: List[str] = []
        cur = node
        while isinstance(cur, cst.Attribute):
            parts.append(cur.attr.value)
            cur = cur.value
        if not isinstance(cur, cst.Name):
            return None
        parts.append(cur.value)
        parts.reverse()
        return self.normalise(parts)

    def normalise(self, parts: List[str]) -> str:
        head = parts[0]
        if head in self.aliases.lang and len(parts) > 1:
            return "T." + ".".join(parts[1:])
        if head in self.aliases.tilelang and len(parts) > 2 and parts[1] == "language":
            return "T." + ".".join(parts[2:])
        if (head in self.aliases.tilelang and len(parts) > 3 and parts[1] == "ascend"
                and parts[2] == "language"):
            return "T." + ".".join(parts[3:])
        if head in self.aliases.tilelang and len(parts) > 1:
            return "tilelang." + ".".join(parts[1:])
        return ".".join(parts)

    # ---- expressions ------------------------------------------------------
    def expr(self, node: Any) -> Expr:
        # ``node``: a libcst BaseExpression or None.  Typed Any because the
        # dispatch below tests ``type(node) is ...`` once into ``t`` (libcst's
        # classes are final: ``is`` skips ABCMeta's isinstance), which mypy
        # does not narrow on.
        if node is None:
            return Const(None)
        t = type(node)
        if t is cst.Integer:
            try:
                return Const(int(node.value.replace("_", ""), 0))
            except ValueError:
                return Opaque(node.value)
        if t is cst.Float:
            try:
                return Const(float(node.value.replace("_", "")))
            except ValueError:
                return Opaque(node.value)
        if t is cst.SimpleString:
            v = node.value
            if v[0] in "\"'" and "\\" not in v and "\r" not in v:
                # No prefix, no escape: the text between the quotes (what
                # ``evaluated_value``'s ast.literal_eval gives, without a parse).
                q = 3 if v[:3] in ('"""', "'''") else 1
                return Const(v[q:-q])
        if t in (cst.SimpleString, cst.ConcatenatedString):
            try:
                val = node.evaluated_value
            except (SyntaxError, ValueError, MemoryError, UnicodeError):
                # e.g. a half-typed "\x" escape: libcst parses it, Python does not.
                return Opaque(self.src(node))
            if isinstance(val, bytes):
                return Opaque(self.src(node))
            return Const(val)
        if t is cst.Name:
            if node.value in ("True", "False"):
                return Const(node.value == "True")
            if node.value == "None":
                return Const(None)
            return Name(node.value)
        if t is cst.Attribute:
            d = self.dotted(node)
            if d is not None:
                if d.startswith("T.") and d.count(".") == 1:
                    return Attr(Name("T"), d[2:])
                return Attr(self.expr(node.value), node.attr.value)
            return Attr(self.expr(node.value), node.attr.value)
        if t is cst.BinaryOperation:
            return BinOp(_BINOPS.get(type(node.operator), "?"), self.expr(node.left),
                         self.expr(node.right))
        if t is cst.UnaryOperation:
            return UnaryOp(_UNOPS.get(type(node.operator), "?"), self.expr(node.expression))
        if t is cst.BooleanOperation:
            op = "and" if isinstance(node.operator, cst.And) else "or"
            return Compare(op, self.expr(node.left), self.expr(node.right))
        if t is cst.Comparison:
            left = self.expr(node.left)
            result: Optional[Expr] = None
            for target in node.comparisons:
                right = self.expr(target.comparator)
                cmp = Compare(_CMPOPS.get(type(target.operator), "?"), left, right)
                result = cmp if result is None else Compare("and", result, cmp)
                left = right
            return result if result is not None else left
        if t is cst.IfExp:
            return IfExp(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))
        if t is cst.Call:
            func = self.dotted(node.func)
            if func is None and isinstance(node.func, cst.Attribute) and \
                    all(a.keyword is None and not a.star for a in node.args):
                # A method of a computed value (``default_config().items()``):
                # ``Call(".items", (receiver, *args))``.
                return Call("." + node.func.attr.value,
                            (self.expr(node.func.value),)
                            + tuple(self.expr(a.value) for a in node.args))
            if func is None:
                return Opaque(self.src(node))
            args: List[Expr] = []
            kwargs: List[Tuple[str, Expr]] = []
            for a in node.args:
                if a.keyword is not None:
                    kwargs.append((a.keyword.value, self.expr(a.value)))
                elif a.star:
                    args.append(Opaque(self.src(a)))
                else:
                    args.append(self.expr(a.value))
            return Call(func, tuple(args), tuple(kwargs))
        if t in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
            return Call("<listcomp>", (self.expr(node.elt),) + self.comp_gens(node.for_in))
        if t is cst.DictComp:
            return Call("<dictcomp>", (self.expr(node.key), self.expr(node.value))
                        + self.comp_gens(node.for_in))
        if t in (cst.Tuple, cst.List):
            items: List[Expr] = []
            for el in node.elements:
                if isinstance(el, cst.StarredElement):
                    items.append(Opaque(self.src(el)))
                else:
                    items.append(self.expr(el.value))
            return TupleExpr(tuple(items), t is cst.List)
        if t is cst.Dict:
            pairs: List[Tuple[str, Expr]] = []
            for entry in node.elements:
                if isinstance(entry, cst.DictElement):
                    key = self.expr(entry.key)
                    if isinstance(key, Const) and isinstance(key.value, str):
                        pairs.append((key.value, self.expr(entry.value)))
                    elif isinstance(key, Name):
                        # ``{A_l1: 2}`` (annotate_buffer_versions keys are buffers)
                        pairs.append((key.id, self.expr(entry.value)))
                    elif isinstance(key, Attr) and key.base == Name("T"):
                        # ``{T.float16: 2}``: dtypes evaluate to their names.
                        pairs.append((_DTYPE_KEY.get(key.attr, key.attr),
                                      self.expr(entry.value)))
            return DictExpr(tuple(pairs))
        if t is cst.Subscript:
            idx = self.subscript_indices(node)
            return Subscript(self.expr(node.value),
                             idx[0] if len(idx) == 1 else TupleExpr(idx))
        return Opaque(self.src(node))

    def comp_gens(self, f: Optional[cst.CompFor]) -> Tuple[Expr, ...]:
        out: List[Expr] = []
        while f is not None:
            out.append(TupleExpr((self.expr(f.target), self.expr(f.iter),
                                  TupleExpr(tuple(self.expr(i.test) for i in f.ifs)))))
            f = f.inner_for_in
        return tuple(out)

    def subscript_indices(self, node: cst.Subscript) -> Tuple[Expr, ...]:
        out: List[Expr] = []
        for el in node.slice:
            sl = el.slice
            if isinstance(sl, cst.Index):
                out.append(self.expr(sl.value))
            elif isinstance(sl, cst.Slice):
                out.append(Slice(None if sl.lower is None else self.expr(sl.lower),
                                 None if sl.upper is None else self.expr(sl.upper),
                                 None if sl.step is None else self.expr(sl.step)))
        return tuple(out)

    # ---- module level -----------------------------------------------------
    def build(self, module: cst.Module) -> ChunkModel:
        for stmt in module.body:
            self.top_level(stmt, enclosing=None, class_name=None)
            try:
                self.toplevel.extend(self.func_stmts([stmt]))
            except RecursionError:
                pass
        return ChunkModel(tuple(self.kernels), tuple(self.constants), tuple(self.calls),
                          tuple(self.functions), tuple(self.macros), tuple(self.problems),
                          tuple(self.defs), tuple(self.argparse), tuple(self.toplevel),
                          tuple(self.iter_helpers))

    def top_level(self, stmt: cst.CSTNode, enclosing: Optional[str],
                  class_name: Optional[str]) -> None:
        if isinstance(stmt, cst.FunctionDef):
            self.function(stmt, class_name=class_name)
        elif isinstance(stmt, cst.ClassDef):
            for member in stmt.body.body:
                self.top_level(member, enclosing=None, class_name=stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and enclosing is None \
                        and class_name is None:
                    self.module_assign(small)
                self.collect_calls(small, enclosing)
        elif isinstance(stmt, (cst.If, cst.With, cst.For, cst.While, cst.Try)):
            self.collect_calls(stmt, enclosing)
            for inner in _compound_children(stmt):
                if isinstance(inner, (cst.FunctionDef, cst.ClassDef)):
                    self.top_level(inner, enclosing, class_name)
                elif enclosing is None and class_name is None and \
                        isinstance(stmt, (cst.If, cst.With, cst.Try)):
                    self.module_compound(inner)

    def module_compound(self, stmt: cst.CSTNode) -> None:
        """Assignments inside a module-level ``if``/``with``/``try`` (the
        ``if __name__ == "__main__":`` block) are module globals too."""
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)):
                    self.module_assign(small)
        elif isinstance(stmt, (cst.If, cst.With, cst.Try)):
            for inner in _compound_children(stmt):
                self.module_compound(inner)

    def module_assign(self, node: Union[cst.Assign, cst.AnnAssign]) -> None:
        if isinstance(node, cst.AnnAssign):
            if isinstance(node.target, cst.Name) and node.value is not None:
                self.constants.append((node.target.value, self.expr(node.value)))
            return
        value = node.value
        for target in node.targets:
            self.assign_target(target.target, value, self.constants)

    def assign_target(self, target: cst.BaseExpression, value: cst.BaseExpression,
                      out: List[Tuple[str, Expr]]) -> None:
        if isinstance(target, cst.Name):
            out.append((target.value, self.expr(value)))
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = [el.value for el in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(names):
                for n, v in zip(names, value.elements, strict=True):
                    self.assign_target(n, v.value, out)
            else:
                whole = self.expr(value)
                for i, n in enumerate(names):
                    if isinstance(n, cst.Name):
                        out.append((n.value, Subscript(whole, Const(i))))

    def collect_calls(self, node: cst.CSTNode, enclosing: Optional[str],
                      enclosing_class: Optional[str] = None) -> None:
        if isinstance(node, cst.FunctionDef):  # (the visitor this replaces stopped at once)
            return
        for call in _calls_in(node, []):
            self.record_call(call, enclosing, enclosing_class)

    def record_call(self, call: cst.Call, enclosing: Optional[str],
                    enclosing_class: Optional[str] = None) -> None:
        func = call.func
        via = "call"
        call_span = self.span(call)
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            self.record_argument(call)
            return
        name: Optional[str]
        if isinstance(func, cst.Attribute) and func.attr.value in ("compile", "get_tir",
                                                                    "get_kernel_source"):
            via = func.attr.value
            inner = func.value
            if isinstance(inner, cst.Name):
                name = inner.value
            else:
                return
        else:
            name = self.dotted(func)
            if name is None:
                return
            if name in ("functools.partial", "partial") and call.args:
                first = self.dotted(call.args[0].value)
                if first is None:
                    return
                name, via = first, "partial"
                call = call.with_changes(args=call.args[1:])
        args: List[Expr] = []
        kwargs: List[Tuple[str, Expr]] = []
        stars: List[Expr] = []
        for a in call.args:
            if a.keyword is not None:
                kwargs.append((a.keyword.value, self.expr(a.value)))
            elif a.star == "**":
                stars.append(self.expr(a.value))
            elif a.star == "*":
                args.append(Opaque(self.src(a)))
            else:
                args.append(self.expr(a.value))
        self.calls.append(CallSite(name, call_span, tuple(args), tuple(kwargs),
                                   tuple(stars), via, enclosing, enclosing_class))

    def record_argument(self, call: cst.Call) -> None:
        """``parser.add_argument("--num_stages", type=int, default=3)``."""
        names: List[str] = []
        kw: Dict[str, Expr] = {}
        for a in call.args:
            if a.keyword is not None:
                kw[a.keyword.value] = self.expr(a.value)
            elif not a.star:
                v = self.expr(a.value)
                if isinstance(v, Const) and isinstance(v.value, str):
                    names.append(v.value)
        dest = None
        d = kw.get("dest")
        if isinstance(d, Const) and isinstance(d.value, str):
            dest = d.value
        else:
            longs = [n for n in names if n.startswith("--")]
            pick = longs[0] if longs else (names[0] if names else None)
            if pick is not None:
                dest = pick.lstrip("-").replace("-", "_")
        if not dest or not dest.isidentifier():
            return
        default: Expr = kw.get("default", Const(None))
        action = kw.get("action")
        if "default" not in kw and isinstance(action, Const):
            if action.value == "store_true":
                default = Const(False)
            elif action.value == "store_false":
                default = Const(True)
        typ = kw.get("type")
        if isinstance(default, Const) and isinstance(default.value, str) and \
                isinstance(typ, Name) and typ.id in ("int", "float"):
            try:
                default = Const(int(default.value) if typ.id == "int" else float(default.value))
            except ValueError:
                pass
        self.argparse.append((dest, default))

    # ---- functions --------------------------------------------------------
    def decorator_names(self, fn: cst.FunctionDef) -> List[str]:
        names = []
        for dec in fn.decorators:
            d = dec.decorator
            if isinstance(d, cst.Call):
                d = d.func
            name = self.dotted(d)
            if name:
                names.append(name)
        return names

    def params(self, fn: cst.FunctionDef) -> Tuple[Param, ...]:
        out = []
        p = fn.params
        for param in list(p.posonly_params) + list(p.params) + list(p.kwonly_params):
            out.append(Param(param.name.value, self.span(param.name),
                             None if param.default is None else self.expr(param.default),
                             None if param.annotation is None
                             else self.expr(param.annotation.annotation)))
        return tuple(out)

    def function(self, fn: cst.FunctionDef, class_name: Optional[str],
                 factory: Optional[cst.FunctionDef] = None,
                 factory_locals: Optional[List[Tuple[str, Expr]]] = None,
                 factory_macros: Optional[Dict[str, Macro]] = None,
                 chain: Tuple[Param, ...] = ()) -> None:
        """One function.  ``factory`` is the outermost enclosing function (the
        one the file calls); ``chain`` the parameters of every enclosing function,
        outermost first (a prim_func inside a ``@tilelang.jit`` function inside an
        ``lru_cache`` factory sees all of them)."""
        decos = self.decorator_names(fn)
        params = self.params(fn)
        if factory is None:
            self.functions.append((fn.name.value, params))
        if any(d in ("T.prim_func", "tilelang.prim_func", "prim_func") for d in decos):
            self.kernel(fn, "factory" if factory is not None else "module", class_name,
                        factory, factory_locals or [], factory_macros or {}, chain)
            return
        if any(d == "T.macro" or d.endswith(".macro") or d == "macro" for d in decos):
            macro = Macro(fn.name.value, self.span(fn.name), params,
                          tuple(self.block(fn.body, {}, macros=factory_macros or {})))
            if factory_macros is not None:
                factory_macros[fn.name.value] = macro
            else:
                self.macros.append(macro)
            if _contains_kernel_with(fn, self):
                # A macro that opens ``T.Kernel`` itself is a whole kernel body.
                self.kernel(fn, "factory" if factory is not None else "macro", class_name,
                            factory, factory_locals or [], factory_macros or {}, chain)
            return
        is_jit = any(d in ("tilelang.jit", "jit", "tilelang.lazy_jit", "lazy_jit")
                     or d.endswith(".jit") for d in decos)
        if is_jit and _contains_kernel_with(fn, self):
            if factory is None:
                self.record_def(fn, params, class_name)
                self.kernel(fn, "jit", class_name, None, [], {})
            else:
                self.kernel(fn, "jit", class_name, factory, factory_locals or [],
                            factory_macros or {}, _merge_params(chain, params))
            return
        helper = self.iterator_helper(fn)
        if helper is not None:
            self.iter_helpers.append(helper)
        if factory is not None:
            # A function inside a factory (a ``@tilelang.jit`` builder, a
            # ``def kernel(block_M=None, …)`` config closure): a deeper level of
            # the same factory.  Its parameters join the chain.
            if _defines_kernel(fn, self):
                self.factory_body(factory, fn.body.body, class_name,
                                  list(factory_locals or []), dict(factory_macros or {}),
                                  _merge_params(chain, params))
            return
        self.record_def(fn, params, class_name)
        # A plain function: a factory if it defines a prim_func inside.
        self.collect_calls(fn.body, fn.name.value, class_name)
        local: List[Tuple[str, Expr]] = []
        local_macros: Dict[str, Macro] = {m.name: m for m in self.macros}
        self.factory_body(fn, fn.body.body, class_name, local, local_macros, params)

    def factory_body(self, fn: cst.FunctionDef, stmts: Sequence[cst.CSTNode],
                     class_name: Optional[str], local: List[Tuple[str, Expr]],
                     local_macros: Dict[str, Macro], chain: Tuple[Param, ...] = ()) -> None:
        for stmt in stmts:
            if isinstance(stmt, cst.FunctionDef):
                self.function(stmt, class_name, factory=fn, factory_locals=list(local),
                              factory_macros=local_macros, chain=chain)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            self.assign_target(t.target, small.value, local)
                    elif isinstance(small, cst.AnnAssign) and small.value is not None \
                            and isinstance(small.target, cst.Name):
                        local.append((small.target.value, self.expr(small.value)))
            elif isinstance(stmt, (cst.If, cst.With, cst.Try, cst.For, cst.While)):
                self.factory_body(fn, _compound_children(stmt), class_name, local,
                                  local_macros, chain)

    # ---- ordinary functions (for the value resolver) -------------------------
    def record_def(self, fn: cst.FunctionDef, params: Tuple[Param, ...],
                   class_name: Optional[str]) -> None:
        p = fn.params
        vararg = p.star_arg.name.value if isinstance(p.star_arg, cst.Param) else None
        kwarg = p.star_kwarg.name.value if p.star_kwarg is not None else None
        decos = tuple(self.expr(d.decorator) for d in fn.decorators)
        try:
            body = tuple(self.func_stmts(_suite(fn.body)))
        except RecursionError:
            body = ()
        self.defs.append(FuncDef(fn.name.value, self.span(fn.name), params, body, decos,
                                 class_name, vararg, kwarg))

    def func_stmts(self, stmts: Sequence[cst.CSTNode]) -> List[FuncStmt]:
        """A statement summary of ordinary Python code (nested defs left out)."""
        out: List[FuncStmt] = []
        for node in stmts:
            sp = self.span(node)
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    if isinstance(small, cst.Assign):
                        val = self.expr(small.value)
                        for t in small.targets:
                            out.append(FuncStmt("assign", sp, self.expr(t.target), val))
                    elif isinstance(small, cst.AnnAssign) and small.value is not None:
                        out.append(FuncStmt("assign", sp, self.expr(small.target),
                                            self.expr(small.value)))
                    elif isinstance(small, cst.AugAssign):
                        tgt = self.expr(small.target)
                        op = _AUGOPS.get(type(small.operator), "?")
                        out.append(FuncStmt("assign", sp, tgt,
                                            BinOp(op, tgt, self.expr(small.value))))
                    elif isinstance(small, cst.Return):
                        out.append(FuncStmt("return", sp, None,
                                            self.expr(small.value) if small.value is not None
                                            else Const(None)))
                    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                        out.append(FuncStmt("expr", sp, None, self.expr(small.value)))
            elif isinstance(node, cst.If):
                orelse: List[FuncStmt] = []
                if isinstance(node.orelse, cst.If):
                    orelse = self.func_stmts([node.orelse])
                elif node.orelse is not None:
                    orelse = self.func_stmts(_suite(node.orelse.body))
                out.append(FuncStmt("if", sp, None, self.expr(node.test),
                                    tuple(self.func_stmts(_suite(node.body))), tuple(orelse)))
            elif isinstance(node, cst.For):
                out.append(FuncStmt(
                    "for", sp, self.expr(node.target), self.expr(node.iter),
                    tuple(self.func_stmts(_suite(node.body))),
                    tuple(self.func_stmts(_suite(node.orelse.body)))
                    if node.orelse is not None else ()))
            elif isinstance(node, cst.While):
                out.append(FuncStmt("while", sp, None, self.expr(node.test),
                                    tuple(self.func_stmts(_suite(node.body)))))
            elif isinstance(node, cst.With):
                out.extend(self.func_stmts(_suite(node.body)))
            elif isinstance(node, cst.Try):
                out.extend(self.func_stmts(_suite(node.body)))
                if node.orelse is not None:
                    out.extend(self.func_stmts(_suite(node.orelse.body)))
                if node.finalbody is not None:
                    out.extend(self.func_stmts(_suite(node.finalbody.body)))
        return out

    def iterator_helper(self, fn: cst.FunctionDef) -> Optional[IterHelper]:
        """``def maybe_pipeline(n, s): return T.Pipelined(n, num_stages=s) if … else
        T.serial(n)`` (or the same with if/else returns): (name, params, expr)."""
        try:
            e = self._iter_return(list(_suite(fn.body)))
        except RecursionError:
            return None
        if e is None:
            return None
        return (fn.name.value, self.params(fn), e)

    def _iter_return(self, stmts: Sequence[cst.CSTNode]) -> Optional[Expr]:
        for i, st in enumerate(stmts):
            if isinstance(st, cst.SimpleStatementLine):
                for small in st.body:
                    if isinstance(small, cst.Return):
                        e = self.expr(small.value) if small.value is not None else None
                        return e if _is_iter_expr(e) else None
            elif isinstance(st, cst.If):
                a = self._iter_return(list(_suite(st.body)))
                if a is None:
                    return None
                if st.orelse is None:
                    b = self._iter_return(stmts[i + 1:])
                elif isinstance(st.orelse, cst.If):
                    b = self._iter_return([st.orelse])
                else:
                    b = self._iter_return(list(_suite(st.orelse.body)))
                if b is None:
                    return None
                return IfExp(self.expr(st.test), a, b)
            elif isinstance(st, (cst.For, cst.While, cst.With, cst.Try)):
                return None
        return None

    def comment_bindings(self, node: cst.FunctionDef) -> List[Binding]:
        """``# tilelint: bind a=1 b=2`` in the comment lines right above ``node``."""
        out: List[Binding] = []
        first = self.span(node).line - self.offset  # 1-based within chunk (def line)
        if node.decorators:
            first = self.span(node.decorators[0]).line - self.offset
        i = first - 2
        while 0 <= i < len(self.lines):
            line = self.lines[i].strip()
            if not line.startswith("#"):
                break
            m = _BIND_RX.search(line)
            if m:
                out.extend(self.parse_bind_body(m.group("body"), i + 1 + self.offset))
            i -= 1
        return out

    def parse_bind_body(self, body: str, line: int) -> List[Binding]:
        out = []
        for m in re.finditer(r"(\w+)\s*=\s*([^\s,]+)", body):
            try:
                val = cst.parse_expression(m.group(2))
                expr = self.expr(val)
            except Exception:
                expr = Opaque(m.group(2))
            out.append(Binding(m.group(1), expr, "comment",
                               Span(line, 0, line, len(self.lines[line - 1 - self.offset])
                                    if 0 <= line - 1 - self.offset < len(self.lines) else 0)))
        return out

    # ---- kernels ----------------------------------------------------------
    def kernel(self, fn: cst.FunctionDef, style: str, class_name: Optional[str],
               factory: Optional[cst.FunctionDef], factory_locals: List[Tuple[str, Expr]],
               macros: Dict[str, Macro], chain: Tuple[Param, ...] = ()) -> None:
        ctx = _KernelCtx(macros=dict(macros))
        for name, _ in self.params_of(fn):
            ctx.buffers.add(name)
        locals_: List[Tuple[str, Expr]] = list(factory_locals)
        ctx.locals = locals_
        kernel_with: Optional[cst.With] = None
        body: List[Stmt] = []
        threads = None
        threads_span = None
        grid: Tuple[Expr, ...] = ()
        # Statements before ``with T.Kernel`` in the prim_func (jit style puts
        # annotations and T.const here).
        more: List[cst.With] = []  # a second ``with T.Kernel`` is a second device kernel
        for stmt in fn.body.body:
            found = self.find_kernel_with(stmt)
            if found is not None and kernel_with is not None:
                more.append(found)
                continue
            if found is not None and kernel_with is None:
                kernel_with = found
                threads, threads_span, grid = self.kernel_launch(found)
                body = self.block(found.body, ctx, macros=ctx.macros, locals_out=locals_)
                continue
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        ann = self.expr(small.annotation.annotation)
                        ctx.buffers.add(small.target.value)
                        if small.value is not None:
                            locals_.append((small.target.value, self.expr(small.value)))
                        elif isinstance(ann, Call):
                            locals_.append((small.target.value, ann))
                    elif isinstance(small, cst.Assign):
                        val = small.value
                        if isinstance(val, cst.Call) and (self.dotted(val.func) or "") in (
                                "T.empty", "T.Tensor", "T.Buffer"):
                            for t in small.targets:
                                if isinstance(t.target, cst.Name):
                                    ctx.buffers.add(t.target.value)
                        for t in small.targets:
                            self.assign_target(t.target, val, locals_)
            elif isinstance(stmt, cst.FunctionDef):
                self.record_macro(stmt, ctx.macros)
        if kernel_with is None and _has_pipelined(fn, self):
            # A prim_func written at the TIR level (no ``T.Kernel``): its body is
            # what the passes see.
            body = self.block(fn.body, ctx, macros=ctx.macros, locals_out=locals_)
        dialect = "ascend" if self.aliases.ascend else "npu" if self.aliases.npu_fork else "cuda"
        fspan = self.span(fn)
        # The def line, not the decorators.
        def_span = Span(self.span(fn.name).line, 0, fspan.end_line, fspan.end_col)
        bindings = self.comment_bindings(fn)
        if factory is not None:
            bindings = self.comment_bindings(factory) + bindings
        attrs = tuple(ctx.attrs)
        self.kernels.append(Kernel(
            name=fn.name.value,
            span=def_span,
            name_span=self.span(fn.name),
            style=style,
            dialect=dialect,
            factory=None if factory is None else factory.name.value,
            factory_span=None if factory is None else self.span(factory.name),
            factory_params=() if factory is None else (chain or self.params(factory)),
            params=self.params(fn),
            threads=threads,
            threads_span=threads_span,
            kernel_span=None if kernel_with is None else self.span(kernel_with),
            grid=grid,
            allocs=tuple(ctx.allocs),
            body=tuple(body),
            locals=tuple(locals_),
            comment_bindings=tuple(bindings),
            attrs=attrs,
            class_name=class_name,
        ))
        first = self.kernels[-1]
        for i, extra in enumerate(more, start=2):
            ctx2 = _KernelCtx(macros=dict(ctx.macros), buffers=set(ctx.buffers),
                              attrs=list(ctx.attrs))
            locals2 = list(locals_)
            ctx2.locals = locals2
            threads2, threads_span2, grid2 = self.kernel_launch(extra)
            body2 = self.block(extra.body, ctx2, macros=ctx2.macros, locals_out=locals2)
            self.kernels.append(dataclasses.replace(
                first, name=f"{first.name}#{i}", threads=threads2, threads_span=threads_span2,
                kernel_span=self.span(extra), grid=grid2, allocs=tuple(ctx2.allocs),
                body=tuple(body2), locals=tuple(locals2), attrs=tuple(ctx2.attrs)))

    def kernel_launch(self, kernel_with: cst.With
                      ) -> Tuple[Optional[Expr], Optional[Span], Tuple[Expr, ...]]:
        """threads, the span of ``threads=``, and the grid of ``with T.Kernel(...)``."""
        threads = None
        threads_span = None
        grid_args = []
        call = kernel_with.items[0].item
        if isinstance(call, cst.Call):
            for a in call.args:
                if a.keyword is None:
                    grid_args.append(self.expr(a.value))
                elif a.keyword.value == "threads":
                    threads = self.expr(a.value)
                    threads_span = self.span(a)
        return threads, threads_span, tuple(grid_args)

    def params_of(self, fn: cst.FunctionDef) -> List[Tuple[str, Optional[Expr]]]:
        return [(p.name, p.annotation) for p in self.params(fn)]

    def find_kernel_with(self, stmt: cst.CSTNode) -> Optional[cst.With]:
        if isinstance(stmt, cst.With):
            if _is_launch(stmt, self):
                return stmt
            for inner in stmt.body.body:
                found = self.find_kernel_with(inner)
                if found is not None:
                    return found
        return None

    # ---- statements -------------------------------------------------------
    def block(self, body: Union[cst.BaseSuite, Sequence[cst.CSTNode]],
              ctx: Union["_KernelCtx", Dict[str, Macro]], macros: Dict[str, Macro],
              locals_out: Optional[List[Tuple[str, Expr]]] = None,
              pipelined_ancestors: int = 0) -> List[Stmt]:
        if isinstance(ctx, dict):
            ctx = _KernelCtx(macros=dict(macros), loose=True)
        stmts: List[Stmt] = []
        if isinstance(body, cst.SimpleStatementSuite):
            items: Sequence[cst.CSTNode] = [body]
        elif isinstance(body, cst.BaseSuite):
            items = body.body
        else:
            items = body
        for node in items:
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in node.body:
                    st = self.small_stmt(small, ctx, locals_out)
                    if st is not None:
                        stmts.append(st)
            elif isinstance(node, cst.For):
                stmts.append(self.for_stmt(node, ctx, locals_out, pipelined_ancestors))
            elif isinstance(node, cst.If):
                stmts.append(self.if_stmt(node, ctx, locals_out, pipelined_ancestors))
            elif isinstance(node, cst.With):
                # ``with T.block(...)`` / other scopes: statements count inline;
                # each remembers the T.* scopes around it (T.SimtVF, T.Stage).
                inner = self.block(node.body, ctx, ctx.macros, locals_out,
                                   pipelined_ancestors)
                scopes = tuple(name for name in (
                    self.dotted(item.item.func) for item in node.items
                    if isinstance(item.item, cst.Call)) if name and name.startswith("T."))
                if scopes:
                    written = tuple((self.span(c), self.expr(c)) for c in (
                        item.item for item in node.items if isinstance(item.item, cst.Call))
                        if (self.dotted(c.func) or "").startswith("T."))
                    inner = [dc_replace(st, scope=scopes + st.scope,
                                        scope_calls=written + st.scope_calls) for st in inner]
                stmts.extend(inner)
            elif isinstance(node, cst.While):
                children = self.block(node.body, ctx, ctx.macros, locals_out,
                                      pipelined_ancestors)
                stmts.append(self.compound("loop", "while", node, children))
            elif isinstance(node, cst.FunctionDef):
                self.record_macro(node, ctx.macros)
            elif isinstance(node, cst.Try):
                stmts.extend(self.block(node.body, ctx, ctx.macros, locals_out,
                                        pipelined_ancestors))
        return stmts

    def record_macro(self, fn: cst.FunctionDef, macros: Dict[str, Macro]) -> None:
        """A ``@T.macro`` defined in a kernel body: its statements, for the calls
        that inline it (any other nested function is not kernel code)."""
        if any(d.endswith("macro") for d in self.decorator_names(fn)):
            macros[fn.name.value] = Macro(fn.name.value, self.span(fn.name), self.params(fn),
                                          tuple(self.block(fn.body, {}, macros=macros)))

    def compound(self, kind: str, op: str, node: cst.CSTNode, children: List[Stmt],
                 loop: Optional[Loop] = None, extra_reads: Sequence[Access] = ()) -> Stmt:
        reads: List[Access] = list(extra_reads)
        writes: List[Access] = []
        for ch in children:
            reads.extend(ch.reads)
            writes.extend(ch.writes)
        return Stmt(kind=kind, op=op, span=self.span(node), reads=tuple(reads),
                    writes=tuple(writes), label=self.label(node), children=tuple(children),
                    loop=loop)

    def label(self, node: cst.CSTNode) -> str:
        sp = self.span(node)
        idx = sp.line - 1 - self.offset
        if 0 <= idx < len(self.lines):
            text = self.lines[idx].strip()
        else:
            text = ""
        return text if len(text) <= 80 else text[:77] + "..."

    def if_stmt(self, node: cst.If, ctx: "_KernelCtx", locals_out: Optional[List[Tuple[str, Expr]]],
                pa: int) -> Stmt:
        children = self.block(node.body, ctx, ctx.macros, locals_out, pa)
        orelse = node.orelse
        else_index = len(children) if orelse is not None else None
        while orelse is not None:
            if isinstance(orelse, cst.If):
                children.extend(self.block(orelse.body, ctx, ctx.macros, locals_out, pa))
                orelse = orelse.orelse
            else:
                children.extend(self.block(orelse.body, ctx, ctx.macros, locals_out, pa))
                orelse = None
        cond_reads = self.accesses_in(node.test, ctx)
        st = self.compound("if", "if", node, children, extra_reads=cond_reads)
        if not isinstance(node.orelse, cst.If):  # no elif: the branches are known
            st = dataclasses.replace(st, test=self.expr(node.test))
        return st if else_index is None else dataclasses.replace(st, else_index=else_index)

    def for_stmt(self, node: cst.For, ctx: "_KernelCtx", locals_out: Optional[List[Tuple[str, Expr]]],
                 pa: int) -> Stmt:
        var = node.target.value if isinstance(node.target, cst.Name) else self.src(node.target)
        it = node.iter
        condition: Optional[Expr] = None
        if isinstance(it, cst.IfExp):
            # ``T.Pipelined(...) if c else T.serial(...)``: model the pipelined arm.
            body_call, else_call = it.body, it.orelse
            if isinstance(body_call, cst.Call) and \
                    (self.dotted(body_call.func) or "").endswith("Pipelined"):
                condition = self.expr(it.test)
                it = body_call
            elif isinstance(else_call, cst.Call) and \
                    (self.dotted(else_call.func) or "").endswith("Pipelined"):
                condition = UnaryOp("not", self.expr(it.test))
                it = else_call
        kind = "loop"
        start: Optional[Expr] = None
        stop: Optional[Expr] = None
        loop_kwargs: Dict[str, Tuple[Expr, Span, cst.Arg]] = {}
        unsupported: List[Tuple[str, Span]] = []
        iterator: Optional[Expr] = None
        if isinstance(it, cst.Call):
            fname = self.dotted(it.func) or ""
            short = fname[2:] if fname.startswith("T.") else fname
            if short in _LOOP_KINDS:
                kind = _LOOP_KINDS[short]
            elif fname == "range":
                kind = "range"
            elif short in ctx.macros or fname in ctx.helper_iterators:
                kind = "loop"
            if kind == "loop" and fname and not fname.startswith("T.") or short == "Persistent":
                iterator = self.expr(it)
            positional = [a for a in it.args if a.keyword is None and not a.star]
            for a in it.args:
                if a.keyword is not None:
                    key = a.keyword.value
                    loop_kwargs[key] = (self.expr(a.value), self.span(a), a)
                    if kind == "pipelined" and key not in _PIPELINED_KWARGS:
                        unsupported.append((key, self.span(a)))
            if kind in ("pipelined", "serial", "range", "unroll", "vectorized"):
                if len(positional) >= 2:
                    start, stop = self.expr(positional[0].value), self.expr(positional[1].value)
                elif len(positional) == 1:
                    start, stop = Const(0), self.expr(positional[0].value)
                if kind == "pipelined":
                    # T.Pipelined(start, stop, num_stages, order, stage, annotations)
                    for pos, key in ((2, "num_stages"), (3, "order"), (4, "stage")):
                        if len(positional) > pos:
                            loop_kwargs.setdefault(key, (self.expr(positional[pos].value),
                                                         self.span(positional[pos]),
                                                         positional[pos]))
                if "start" in loop_kwargs:
                    start = loop_kwargs["start"][0]
                if "stop" in loop_kwargs:
                    stop = loop_kwargs["stop"][0]
            elif kind == "parallel":
                start = Const(0)
                stop = TupleExpr(tuple(self.expr(a.value) for a in positional)) \
                    if len(positional) != 1 else self.expr(positional[0].value)
        # Only a T.Pipelined that writes a pipeline annotation (num_stages > 0, or
        # an order/stage list) hides the loops inside it from PipelinePlanning;
        # ``T.Pipelined(n)`` alone is a plain loop to the compiler.
        child_pa = pa + (1 if kind == "pipelined" and _annotates(loop_kwargs) else 0)
        ctx.loop_vars.add(var)
        children = self.block(node.body, ctx, ctx.macros, locals_out, child_pa)

        def tuple_of(key: str) -> Tuple[Optional[Tuple[Expr, ...]], Optional[Span]]:
            if key not in loop_kwargs:
                return None, None
            val, sp, arg = loop_kwargs[key]
            if isinstance(val, TupleExpr):
                return val.items, self.span(arg.value)
            return (val,), self.span(arg.value)

        order, order_span = tuple_of("order")
        stage, stage_span = tuple_of("stage")
        order_expr = loop_kwargs["order"][0] if "order" in loop_kwargs else None
        stage_expr = loop_kwargs["stage"][0] if "stage" in loop_kwargs else None
        ns = loop_kwargs.get("num_stages")
        # Buffer views declared at the top of the body (T.decl_buffer): the
        # compiler's "original statement count" includes them (allocations are
        # hoisted out of the loop and do not count, measured on 0.1.15).
        declarations = 0
        if kind == "pipelined" and isinstance(node.body, cst.IndentedBlock):
            for line in node.body.body:
                if not isinstance(line, cst.SimpleStatementLine):
                    continue
                for small in line.body:
                    val = getattr(small, "value", None) \
                        if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
                    if isinstance(val, cst.Call) and \
                            (self.dotted(val.func) or "").split(".")[-1] == "decl_buffer":
                        declarations += 1
        annotations: Tuple[Tuple[str, Expr], ...] = ()
        if "annotations" in loop_kwargs and isinstance(loop_kwargs["annotations"][0], DictExpr):
            annotations = loop_kwargs["annotations"][0].items
        loop = Loop(
            var=var, kind=kind, span=self.span(node), iter_span=self.span(it),
            start=start, stop=stop,
            num_stages=None if ns is None else ns[0],
            num_stages_span=None if ns is None else ns[1],
            order=order, order_span=order_span, stage=stage, stage_span=stage_span,
            annotations=annotations, unsupported_kwargs=tuple(unsupported),
            body=tuple(children), pipelined_ancestors=pa, condition=condition,
            iterator=iterator, order_expr=order_expr, stage_expr=stage_expr,
            declarations=declarations,
        )
        stmt_kind = {"pipelined": "pipelined", "parallel": "parallel",
                     "serial": "serial", "range": "serial", "unroll": "serial",
                     "vectorized": "parallel"}.get(kind, "loop")
        return self.compound(stmt_kind, "for", node, children, loop=loop)

    def small_stmt(self, small: cst.BaseSmallStatement, ctx: "_KernelCtx",
                   locals_out: Optional[List[Tuple[str, Expr]]]) -> Optional[Stmt]:
        if isinstance(small, cst.Expr):
            if isinstance(small.value, cst.Call):
                return self.call_stmt(small.value, small, ctx)
            return None
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            return self.assign_stmt(small, ctx, locals_out)
        return None

    def assign_stmt(self, node: Union[cst.Assign, cst.AnnAssign, cst.AugAssign], ctx: "_KernelCtx",
                    locals_out: Optional[List[Tuple[str, Expr]]]) -> Optional[Stmt]:
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
            value: Optional[cst.BaseExpression] = node.value
        elif isinstance(node, cst.AnnAssign):
            targets = [node.target]
            value = node.value
        else:
            targets = [node.target]
            value = node.value
        if value is None:
            return None
        # Allocation?
        if isinstance(value, cst.Call):
            fname = self.dotted(value.func) or ""
            short = fname[2:] if fname.startswith("T.") else fname
            if short in _ALLOC_SCOPES and len(targets) == 1 and isinstance(targets[0], cst.Name):
                self.alloc(targets[0].value, short, value, node, ctx)
                return None
            if short in ("make_tensor", "Tensor", "Buffer", "empty", "decl_buffer") \
                    and len(targets) == 1 and isinstance(targets[0], cst.Name):
                ctx.buffers.add(targets[0].value)
                return None
        target = targets[0]
        reads = list(self.accesses_in(value, ctx))
        if isinstance(node, cst.AugAssign) and isinstance(target, cst.Subscript):
            reads.extend(self.accesses_in(target, ctx))
        if isinstance(target, cst.Subscript):
            base = self.dotted(target.value)
            idx_reads = []
            for el in target.slice:
                if isinstance(el.slice, cst.Index):
                    idx_reads.extend(self.accesses_in(el.slice.value, ctx))
            if base is not None:
                write = Access(base, self.span(target), self.subscript_indices(target))
                rhs = self.expr(value)
                if isinstance(node, cst.AugAssign):
                    rhs = BinOp(_AUGOPS.get(type(node.operator), "?"), self.expr(target), rhs)
                return Stmt(kind="store", op="=", span=self.span(node),
                            reads=tuple(reads + idx_reads), writes=(write,),
                            label=self.label(node), value=rhs)
        if isinstance(target, cst.Name):
            name = target.value
            if isinstance(node, cst.AugAssign):
                # ``x += ...`` on a local var buffer (alloc_var) is a store.
                if name in ctx.buffers:
                    acc = Access(name, self.span(target))
                    rhs = BinOp(_AUGOPS.get(type(node.operator), "?"), Name(name),
                                self.expr(value))
                    return Stmt(kind="store", op="=", span=self.span(node),
                                reads=tuple(reads) + (acc,), writes=(acc,),
                                label=self.label(node), value=rhs)
                return None
            if name in ctx.buffers and name in ctx.var_buffers:
                acc = Access(name, self.span(target))
                return Stmt(kind="store", op="=", span=self.span(node), reads=tuple(reads),
                            writes=(acc,), label=self.label(node), value=self.expr(value))
            val = self.expr(value)
            if locals_out is not None:
                locals_out.append((name, val))
            return Stmt(kind="bind", op="=", span=self.span(node), reads=tuple(reads),
                        label=self.label(node), target=name, value=val)
        if isinstance(target, (cst.Tuple, cst.List)):
            if locals_out is not None:
                for t in node.targets if isinstance(node, cst.Assign) else []:
                    self.assign_target(t.target, value, locals_out)
            return Stmt(kind="bind", op="=", span=self.span(node), reads=tuple(reads),
                        label=self.label(node), target=self.src(target),
                        value=self.expr(value))
        return None

    def alloc(self, name: str, func: str, call: cst.Call, node: cst.CSTNode,
              ctx: "_KernelCtx") -> None:
        args = [a for a in call.args if a.keyword is None]
        kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
        shape: Tuple[Expr, ...] = ()
        dtype: Expr = Const(None)
        shape_node = args[0].value if args else (kw["shape"].value if "shape" in kw else None)
        if shape_node is not None:
            s = self.expr(shape_node)
            expanded = _expand_shape(s, ctx.locals, 0)
            shape = expanded if expanded is not None else (s,)
        if func in ("alloc_var",):
            dtype = self.expr(args[0].value) if args else (
                self.expr(kw["dtype"].value) if "dtype" in kw else Const(None))
            shape = (Const(1),)
        elif func == "alloc_barrier":
            dtype = Const("uint64")
        else:
            if len(args) >= 2:
                dtype = self.expr(args[1].value)
            elif "dtype" in kw:
                dtype = self.expr(kw["dtype"].value)
            elif func in ("alloc_local", "alloc_fragment", "alloc_shared"):
                dtype = Const(None)
        scope = _ALLOC_SCOPES[func]
        if "scope" in kw:
            s = self.expr(kw["scope"].value)
            if isinstance(s, Const) and isinstance(s.value, str):
                scope = s.value
        elif len(args) >= 3 and func == "alloc_shared":
            s = self.expr(args[2].value)
            if isinstance(s, Const) and isinstance(s.value, str):
                scope = s.value
        ctx.buffers.add(name)
        if func == "alloc_var":
            ctx.var_buffers.add(name)
        ctx.allocs.append(Alloc(name, func, scope, shape, dtype, self.span(node),
                                self.span(call)))

    def call_stmt(self, call: cst.Call, node: cst.CSTNode, ctx: "_KernelCtx") -> Optional[Stmt]:
        """The statement of a call, with the call's arguments as data (``Stmt.call``)."""
        st = self._call_stmt(call, node, ctx)
        if st is None:
            return None
        # An unknown call already holds its parsed form as ``value``.
        parsed = st.value if st.kind == "call" and isinstance(st.value, Call) else self.expr(call)
        return dc_replace(st, call=parsed) if isinstance(parsed, Call) else st

    def _call_stmt(self, call: cst.Call, node: cst.CSTNode, ctx: "_KernelCtx") -> Optional[Stmt]:
        fname = self.dotted(call.func)
        if fname is None:
            reads = self.accesses_in(call, ctx)
            return Stmt(kind="call", op=self.src(call.func), span=self.span(node),
                        reads=tuple(reads), label=self.label(node), roles_known=False)
        short = fname[2:] if fname.startswith("T.") else fname
        args = [a for a in call.args if a.keyword is None and not a.star]
        kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
        span = self.span(node)
        label = self.label(node)
        if fname in ("T.func_attr", "T.annotate_layout", "T.use_swizzle", "T.no_set_max_nreg",
                     "T.annotate_buffer_versions", "T.annotate_l2_hit_ratio",
                     "T.annotate_ws_schedule"):
            if fname == "T.func_attr" and args:
                d = self.expr(args[0].value)
                if isinstance(d, DictExpr):
                    ctx.attrs.extend(d.items)
            if fname == "T.annotate_buffer_versions" and args:
                ctx.attrs.append(("buffer_versions", self.expr(args[0].value)))
            return Stmt(kind="annotation", op=fname, span=span, label=label)
        if short in ctx.macros or (fname in ctx.macros):
            return self.macro_call(ctx.macros[short if short in ctx.macros else fname],
                                   call, node, ctx)
        if fname.startswith("T."):
            if self.aliases.ascend:
                # The Ascend dialect (tilelang.ascend.language) is not in the
                # operator table: its statements keep the name-based roles.
                legacy = self._legacy_tile_stmt(fname, short, args, kw, span, label, ctx)
                if legacy is not None:
                    return legacy
            elif "." not in short:
                spec = ops_mod.lookup(short)
                if spec is not None:
                    stmt = self.op_stmt(spec, fname, call, span, label, ctx)
                    if stmt is not None:
                        return stmt
                elif ops_mod.no_operands(short):
                    return Stmt(kind="call", op=fname, span=span,
                                reads=tuple(self.accesses_in(call, ctx)), label=label)
        # Unknown roles: everything it mentions may be read, nothing is taken
        # as written, and no error is based on it (Stmt.roles_known).
        reads = self.accesses_in(call, ctx)
        value = self.expr(call) if "." not in fname else None
        return Stmt(kind="call", op=fname, span=span, reads=tuple(reads), label=label,
                    value=value, roles_known=False)

    def op_stmt(self, spec: ops_mod.OpSpec, fname: str, call: cst.Call, span: Span, label: str,
                ctx: "_KernelCtx") -> Optional[Stmt]:
        """A call of an operator of ``analysis/ops.py``: its arguments bound to
        the parameter names as Python binds them, reads and writes from the
        roles.  None for ``*args``/``**kwargs`` (nothing can be bound): the
        caller treats it as unknown.  A call that does not fit 0.1.15's
        signature (an argument it does not have, a missing one) keeps the roles
        of what binds, for ordering, but is marked ``roles_known=False``."""
        if any(a.star for a in call.args):
            return None
        pos = [a.value for a in call.args if a.keyword is None]
        kws = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        bound, fits = ops_mod.bind_lenient(spec, pos, kws)
        # ``dst=None`` / ``mbar=None``: the parameter is not given.
        bound = {k: v for k, v in bound.items()
                 if not (isinstance(v, cst.Name) and v.value == "None")}
        flag_value = None
        if spec.clear is not None and spec.clear[1] in bound:
            flag = self.expr(bound[spec.clear[1]])
            if isinstance(flag, Const):
                flag_value = flag.value
        reads: List[Access] = []
        writes: List[Access] = []
        for p in spec.params:
            node = bound.get(p.name)
            if node is None:
                continue
            role = ops_mod.effective_role(spec, p, bound, flag_value)
            if role == ops_mod.IGNORE:
                continue
            if role in (ops_mod.READ, ops_mod.WRITE, ops_mod.READWRITE):
                acc = self.access(node, ctx)
                if acc is None:
                    # Not a buffer operand as written (an expression): what it
                    # mentions is read.
                    reads.extend(self.accesses_in(node, ctx))
                    continue
                if role != ops_mod.WRITE:
                    reads.append(acc)
                if role != ops_mod.READ:
                    writes.append(acc)  # READWRITE: the same Access object in both
                continue
            reads.extend(self.accesses_in(node, ctx))  # VALUE, BARRIER
        return Stmt(kind=spec.kind, op=fname, span=span, reads=tuple(reads),
                    writes=tuple(writes), label=label, roles_known=fits)

    def _legacy_tile_stmt(self, fname: str, short: str, args: Sequence[cst.Arg],
                          kw: Dict[str, cst.Arg], span: Span, label: str,
                          ctx: "_KernelCtx") -> Optional[Stmt]:
        """Name-based operand roles, kept for the Ascend dialect only."""
        base = short.split(".")[-1]
        if base in _COPY_OPS or base.endswith("_copy") or base == "copy":
            src = self.access(args[0].value, ctx) if args else None
            dst = self.access(args[1].value, ctx) if len(args) > 1 else None
            if dst is None and "dst" in kw:
                dst = self.access(kw["dst"].value, ctx)
            if src is None and "src" in kw:
                src = self.access(kw["src"].value, ctx)
            extra = [a for a in args[2:]]
            reads = [x for x in (src,) if x is not None]
            for a in extra:
                reads += self.accesses_in(a.value, ctx)
            return Stmt(kind="copy", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        if any(g in base for g in _GEMM_OPS):
            ops = [self.access(a.value, ctx) for a in args[:3]]
            a_, b_, c_ = (ops + [None, None, None])[:3]
            for key, pos in (("A", 0), ("B", 1), ("C", 2)):
                if key in kw:
                    val = self.access(kw[key].value, ctx)
                    if pos == 0:
                        a_ = val
                    elif pos == 1:
                        b_ = val
                    else:
                        c_ = val
            reads = [x for x in (a_, b_) if x is not None]
            clear = kw.get("clear_accum")
            clear_val = self.expr(clear.value) if clear is not None else Const(False)
            if c_ is not None and not (isinstance(clear_val, Const) and clear_val.value is True):
                reads.append(c_)
            for a in args[3:]:
                reads.extend(self.accesses_in(a.value, ctx))
            return Stmt(kind="gemm", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (c_,) if x is not None), label=label)
        if base in _FILL_OPS:
            dst = self.access(args[0].value, ctx) if args else None
            reads = [a for x in args[1:] for a in self.accesses_in(x.value, ctx)]
            return Stmt(kind="fill", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        if base.startswith("reduce") or base in ("cumsum", "finalize_reducer"):
            src = self.access(args[0].value, ctx) if args else None
            dst = self.access(args[1].value, ctx) if len(args) > 1 else src
            clear = kw.get("clear")
            reads = [x for x in (src,) if x is not None]
            clear_expr = self.expr(clear.value) if clear is not None else None
            if isinstance(clear_expr, Const) and clear_expr.value is False and dst is not None:
                reads.append(dst)
            return Stmt(kind="reduce", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        if base.startswith("atomic"):
            dst = self.access(args[0].value, ctx) if args else None
            reads = [a for x in args[1:] for a in self.accesses_in(x.value, ctx)]
            if dst is not None:
                reads.append(dst)
            return Stmt(kind="atomic", op=fname, span=span, reads=tuple(reads),
                        writes=tuple(x for x in (dst,) if x is not None), label=label)
        return None

    def macro_call(self, macro: Macro, call: cst.Call, node: cst.CSTNode, ctx: "_KernelCtx") -> Stmt:
        """Inline a macro: its statements with parameters renamed to the arguments."""
        mapping: Dict[str, str] = {}
        params = [p.name for p in macro.params]
        pos = [a for a in call.args if a.keyword is None and not a.star]
        for p, a in zip(params, pos, strict=False):
            acc = self.access(a.value, ctx)
            if acc is not None:
                mapping[p] = acc.buffer
        for a in call.args:
            if a.keyword is not None and a.keyword.value in params:
                acc = self.access(a.value, ctx)
                if acc is not None:
                    mapping[a.keyword.value] = acc.buffer
        span = self.span(node)
        scalars = _scalar_args(macro, self.expr(call))
        children = tuple(_rename(s, mapping, span, scalars) for s in macro.body)
        reads: List[Access] = []
        writes: List[Access] = []
        for ch in children:
            reads.extend(ch.reads)
            writes.extend(ch.writes)
        return Stmt(kind="macro", op=macro.name, span=span, reads=tuple(reads),
                    writes=tuple(writes), label=self.label(node), children=children,
                    macro=macro.name)

    # ---- accesses ---------------------------------------------------------
    def access(self, node: cst.BaseExpression, ctx: "_KernelCtx") -> Optional[Access]:
        if isinstance(node, cst.Name):
            if ctx.loose or node.value in ctx.buffers:
                return Access(node.value, self.span(node))
            return None
        if isinstance(node, cst.Subscript):
            base = self.dotted(node.value)
            if base is not None and (ctx.loose or base in ctx.buffers):
                return Access(base, self.span(node), self.subscript_indices(node))
            return None
        if isinstance(node, cst.Call):
            fname = self.dotted(node.func) or ""
            if fname in ("T.region", "T.BufferRegion", "T.access_ptr") and node.args:
                return self.access(node.args[0].value, ctx)
        if isinstance(node, cst.Attribute):
            base = self.dotted(node.value)
            if base is not None and base in ctx.buffers:
                return Access(base, self.span(node))
        return None

    def accesses_in(self, node: cst.CSTNode, ctx: "_KernelCtx") -> List[Access]:
        """The buffer accesses under ``node``, in source order: a subscript of a
        buffer is one access (its indices are searched too), a bare buffer name
        is one unless the context is loose; a call contributes its arguments'
        accesses, an attribute its object's."""
        out: List[Access] = []
        stack: List[cst.CSTNode] = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Subscript):
                acc = self.access(n, ctx)
                if acc is not None:
                    out.append(acc)
                    kids: List[cst.CSTNode] = list(n.slice)
                else:
                    kids = code_children(n)
            elif isinstance(n, cst.Name):
                if n.value in ctx.buffers and not ctx.loose:
                    out.append(Access(n.value, self.span(n)))
                continue
            elif isinstance(n, cst.Attribute):
                kids = [n.value]
            elif isinstance(n, cst.Call):
                kids = [a.value for a in n.args]
            elif isinstance(n, cst.Arg):
                kids = [n.value]
            else:
                kids = code_children(n)
            kids.reverse()
            stack.extend(kids)
        return out


@dataclass
class _KernelCtx:
    macros: Dict[str, Macro] = field(default_factory=dict)
    buffers: set = field(default_factory=set)
    var_buffers: set = field(default_factory=set)
    allocs: List[Alloc] = field(default_factory=list)
    attrs: List[Tuple[str, Expr]] = field(default_factory=list)
    loop_vars: set = field(default_factory=set)
    helper_iterators: set = field(default_factory=set)
    loose: bool = False  # macro bodies: any name may be a buffer parameter
    locals: List[Tuple[str, Expr]] = field(default_factory=list)  # visible assignments


def _rename(stmt: Stmt, mapping: Dict[str, str], span: Span,
            scalars: Optional[Dict[str, Expr]] = None) -> Stmt:
    """A macro statement seen at its call site: buffers renamed, scalar
    parameters replaced by the arguments (in loop bounds, ``num_stages`` and
    indices), positions kept at the macro body (so hovers can point into the
    macro)."""
    sub = scalars or {}

    def acc(a: Access) -> Access:
        idx = a.indices
        if sub and idx is not None:
            idx = tuple(_subst(i, sub) for i in idx)
        return Access(mapping.get(a.buffer, a.buffer), a.span, idx)

    loop = stmt.loop
    children = tuple(_rename(c, mapping, span, scalars) for c in stmt.children)
    if loop is not None:
        changes: Dict[str, object] = {"body": children}
        if sub:
            for f in ("start", "stop", "num_stages", "condition", "iterator"):
                v = getattr(loop, f)
                if v is not None:
                    changes[f] = _subst(v, sub)
            for f in ("order", "stage"):
                v = getattr(loop, f)
                if v is not None:
                    changes[f] = tuple(_subst(x, sub) for x in v)
        loop = Loop(**{**loop.__dict__, **changes})
    return Stmt(kind=stmt.kind, op=stmt.op, span=stmt.span,
                reads=tuple(acc(a) for a in stmt.reads),
                writes=tuple(acc(a) for a in stmt.writes),
                label=stmt.label, children=children, loop=loop, target=stmt.target,
                value=stmt.value, macro=stmt.macro, else_index=stmt.else_index,
                roles_known=stmt.roles_known, call=stmt.call)


def _subst(e: Expr, mapping: Dict[str, Expr], depth: int = 0) -> Expr:
    """``e`` with the names in ``mapping`` replaced by their expressions."""
    if depth > 64 or not mapping:
        return e
    if isinstance(e, Name):
        return mapping.get(e.id, e)
    if isinstance(e, (Const, Opaque)):
        return e
    if isinstance(e, Attr):
        return Attr(_subst(e.base, mapping, depth + 1), e.attr)
    if isinstance(e, BinOp):
        return BinOp(e.op, _subst(e.left, mapping, depth + 1), _subst(e.right, mapping, depth + 1))
    if isinstance(e, UnaryOp):
        return UnaryOp(e.op, _subst(e.operand, mapping, depth + 1))
    if isinstance(e, Compare):
        return Compare(e.op, _subst(e.left, mapping, depth + 1),
                       _subst(e.right, mapping, depth + 1))
    if isinstance(e, IfExp):
        return IfExp(_subst(e.test, mapping, depth + 1), _subst(e.body, mapping, depth + 1),
                     _subst(e.orelse, mapping, depth + 1))
    if isinstance(e, Call):
        return Call(e.func, tuple(_subst(a, mapping, depth + 1) for a in e.args),
                    tuple((k, _subst(v, mapping, depth + 1)) for k, v in e.kwargs))
    if isinstance(e, TupleExpr):
        return TupleExpr(tuple(_subst(a, mapping, depth + 1) for a in e.items))
    if isinstance(e, DictExpr):
        return DictExpr(tuple((k, _subst(v, mapping, depth + 1)) for k, v in e.items))
    if isinstance(e, Subscript):
        return Subscript(_subst(e.value, mapping, depth + 1), _subst(e.index, mapping, depth + 1))
    if isinstance(e, Slice):
        return Slice(*(None if x is None else _subst(x, mapping, depth + 1)
                       for x in (e.lower, e.upper, e.step)))
    return e


def _bind_params(params: Sequence[Param], call: Expr) -> Dict[str, Expr]:
    """Parameter name → argument expression for a call (defaults for the rest)."""
    out: Dict[str, Expr] = {}
    if not isinstance(call, Call):
        return out
    names = [p.name for p in params]
    pos = [a for a in call.args if not isinstance(a, Opaque)]
    if len(pos) != len(call.args):  # ``*args``: positions unknown
        pos = []
    for p, a in zip(names, pos, strict=False):
        out[p] = a
    for k, v in call.kwargs:
        if k in names:
            out[k] = v
    for prm in params:
        if prm.name not in out and prm.default is not None:
            out[prm.name] = prm.default
    return out


def _scalar_args(macro: Macro, call: Expr) -> Dict[str, Expr]:
    """Macro parameters bound to non-buffer arguments (sizes, num_stages)."""
    out: Dict[str, Expr] = {}
    for k, v in _bind_params(macro.params, call).items():
        if isinstance(v, Opaque):
            continue
        out[k] = v
    return out


def _suite(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(body, cst.SimpleStatementSuite):
        return [body]
    return []


_ITER_FUNCS = {"T." + k for k in _LOOP_KINDS} | {"range"}


def _is_iter_expr(e: Optional[Expr]) -> bool:
    if isinstance(e, Call):
        return e.func in _ITER_FUNCS
    if isinstance(e, IfExp):
        return _is_iter_expr(e.body) and _is_iter_expr(e.orelse)
    return False


def _expand_shape(e: Expr, locals_: Sequence[Tuple[str, Expr]], depth: int
                  ) -> Optional[Tuple[Expr, ...]]:
    """A shape written through a local (``A_shared_shape = (block_M, block_K)``,
    ``(K, M) if trans_A else (M, K)``, ``(num_stages,) + tile``) as its dims."""
    if depth > 8:
        return None
    if isinstance(e, TupleExpr):
        return e.items
    if isinstance(e, Name):
        for name, val in reversed(locals_):
            if name == e.id:
                return _expand_shape(val, locals_, depth + 1)
        return None
    if isinstance(e, IfExp):
        a = _expand_shape(e.body, locals_, depth + 1)
        b = _expand_shape(e.orelse, locals_, depth + 1)
        if a is not None and b is not None and len(a) == len(b):
            return tuple(x if x == y else IfExp(e.test, x, y) for x, y in zip(a, b, strict=True))
        return None
    if isinstance(e, BinOp) and e.op == "+":
        a = _expand_shape(e.left, locals_, depth + 1)
        b = _expand_shape(e.right, locals_, depth + 1)
        if a is not None and b is not None:
            return a + b
        return None
    if isinstance(e, BinOp) and e.op == "*":
        a = _expand_shape(e.left, locals_, depth + 1)
        if a is not None and isinstance(e.right, Const) and isinstance(e.right.value, int) \
                and 0 <= e.right.value <= 8:
            return a * e.right.value
        return None
    return None


# --------------------------------------------------------------------------
# Linking across chunks: macros and iterator helpers defined elsewhere
# --------------------------------------------------------------------------

_STMT_KIND = {"pipelined": "pipelined", "parallel": "parallel", "serial": "serial",
              "range": "serial", "unroll": "serial", "vectorized": "parallel"}


def _needs_link(kernel: Kernel, macros: Sequence[Macro], helpers: Sequence[IterHelper]) -> bool:
    mnames = {m.name for m in macros}
    hnames = {h[0] for h in helpers}
    for s in walk_stmts(kernel.body):
        if s.kind == "call" and s.op in mnames and isinstance(s.value, Call):
            return True
        lp = s.loop
        if lp is not None and lp.kind == "loop" and isinstance(lp.iterator, Call) and \
                lp.iterator.func.split(".")[-1] in hnames:
            return True
    return False


@lru_cache(maxsize=1024)
def _link_kernel(kernel: Kernel, macros: Tuple[Macro, ...],
                 helpers: Tuple[IterHelper, ...]) -> Kernel:
    """``kernel`` with calls of macros from other statements inlined and loops
    over iterator helpers turned into the loops they return.  Cached so that an
    unchanged kernel keeps its identity across re-combines."""
    mdict = {m.name: m for m in macros}
    hdict = {h[0]: h for h in helpers}
    try:
        body = tuple(_link_stmts(kernel.body, mdict, hdict, 0))
    except RecursionError:
        return kernel
    return dataclasses.replace(kernel, body=body)


def _link_stmts(stmts: Sequence[Stmt], macros: Dict[str, Macro], helpers: Dict[str, IterHelper],
                depth: int) -> List[Stmt]:
    out: List[Stmt] = []
    for s in stmts:
        out.append(_link_stmt(s, macros, helpers, depth))
    return out


def _link_stmt(s: Stmt, macros: Dict[str, Macro], helpers: Dict[str, IterHelper],
               depth: int) -> Stmt:
    if depth > 16:
        return s
    if s.kind == "call" and s.op in macros and isinstance(s.value, Call):
        macro = macros[s.op]
        bound = _bind_params(macro.params, s.value)
        mapping = {}
        for k, v in bound.items():
            b = _buffer_of(v)
            if b is not None:
                mapping[k] = b
        scalars: Dict[str, Expr] = {k: v for k, v in bound.items() if not isinstance(v, Opaque)}
        body = _link_stmts(macro.body, macros, helpers, depth + 1)
        children = tuple(_rename(c, mapping, s.span, scalars) for c in body)
        reads: List[Access] = []
        writes: List[Access] = []
        for ch in children:
            reads.extend(ch.reads)
            writes.extend(ch.writes)
        return Stmt(kind="macro", op=macro.name, span=s.span, reads=tuple(reads),
                    writes=tuple(writes), label=s.label, children=children, macro=macro.name)
    if not s.children:
        return s
    children = tuple(_link_stmts(s.children, macros, helpers, depth + 1))
    loop = s.loop
    kind = s.kind
    if loop is not None:
        loop = dataclasses.replace(loop, body=children)
        if loop.kind == "loop" and isinstance(loop.iterator, Call):
            h = helpers.get(loop.iterator.func.split(".")[-1])
            if h is not None:
                new = _loop_from_iter(loop, _subst(h[2], _bind_params(h[1], loop.iterator)))
                if new is not None:
                    loop = new
                    kind = _STMT_KIND.get(new.kind, "loop")
    if children == s.children and loop is s.loop:
        return s
    reads = []
    writes = []
    own = len(s.reads) - sum(len(c.reads) for c in s.children)
    reads.extend(s.reads[:max(own, 0)])
    for ch in children:
        reads.extend(ch.reads)
        writes.extend(ch.writes)
    return dataclasses.replace(s, kind=kind, children=children, loop=loop,
                               reads=tuple(reads), writes=tuple(writes))


def _buffer_of(e: Expr) -> Optional[str]:
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Subscript):
        return _buffer_of(e.value)
    if isinstance(e, Call) and e.func in ("T.region", "T.BufferRegion", "T.access_ptr") and e.args:
        return _buffer_of(e.args[0])
    return None


def _loop_from_iter(loop: Loop, it: Expr) -> Optional[Loop]:
    """The loop a helper's returned iterator expression makes."""
    condition: Optional[Expr] = None
    if isinstance(it, IfExp):
        if isinstance(it.body, Call) and it.body.func == "T.Pipelined":
            condition, it = it.test, it.body
        elif isinstance(it.orelse, Call) and it.orelse.func == "T.Pipelined":
            condition, it = UnaryOp("not", it.test), it.orelse
        else:
            it = it.body
    if not isinstance(it, Call):
        return None
    short = it.func[2:] if it.func.startswith("T.") else it.func
    kind = _LOOP_KINDS.get(short) if it.func.startswith("T.") else (
        "range" if it.func == "range" else None)
    if kind is None:
        return None
    pos = list(it.args)
    if any(isinstance(a, Opaque) for a in pos):
        return None
    kw = dict(it.kwargs)
    start: Optional[Expr] = None
    stop: Optional[Expr] = None
    ns = kw.get("num_stages")
    if kind == "parallel":
        start = Const(0)
        stop = TupleExpr(tuple(pos)) if len(pos) != 1 else pos[0]
    else:
        if len(pos) >= 2:
            start, stop = pos[0], pos[1]
        elif len(pos) == 1:
            start, stop = Const(0), pos[0]
        if kind == "pipelined":
            if ns is None and len(pos) >= 3:
                ns = pos[2]
            for i, key in ((3, "order"), (4, "stage")):
                if len(pos) > i:
                    kw.setdefault(key, pos[i])
    start = kw.get("start", start)
    stop = kw.get("stop", stop)

    def tup(key: str) -> Optional[Tuple[Expr, ...]]:
        v = kw.get(key)
        if v is None:
            return None
        return v.items if isinstance(v, TupleExpr) else (v,)

    order, stage = tup("order"), tup("stage")
    ann = kw.get("annotations")
    unsupported = tuple((k, loop.iter_span) for k in kw if k not in _PIPELINED_KWARGS) \
        if kind == "pipelined" else ()
    return dataclasses.replace(
        loop, kind=kind, start=start, stop=stop, num_stages=ns,
        num_stages_span=None if ns is None else loop.iter_span,
        order=order, order_span=None if order is None else loop.iter_span,
        stage=stage, stage_span=None if stage is None else loop.iter_span,
        order_expr=kw.get("order"), stage_expr=kw.get("stage"),
        unsupported_kwargs=unsupported,
        annotations=ann.items if isinstance(ann, DictExpr) else (),
        condition=condition)


def _contains_kernel_with(fn: cst.FunctionDef, builder: _Builder) -> bool:
    """Whether ``fn``'s own body (not a nested function) launches a kernel."""
    return _finds_kernel(fn, builder, nested=False)


def _is_launch(node: cst.With, builder: "_Builder") -> bool:
    """Whether ``with ...:`` launches a device kernel (``T.Kernel`` and kin)."""
    return any(isinstance(item.item, cst.Call)
               and (builder.dotted(item.item.func) or "") in KERNEL_LAUNCHES
               for item in node.items)


def _merge_params(outer: Sequence[Param], inner: Sequence[Param]) -> Tuple[Param, ...]:
    """The parameters seen from a nested function: the enclosing ones in order
    (so a call of the outermost factory binds positionally), an inner parameter
    replacing an outer one of the same name."""
    names = {p.name for p in inner}
    return tuple(p for p in outer if p.name not in names) + tuple(inner)


def _defines_kernel(fn: cst.FunctionDef, builder: "_Builder") -> bool:
    """Whether a prim_func, a ``T.Kernel`` or a macro is defined anywhere inside."""
    return _finds_kernel(fn, builder, nested=True)


def _finds_kernel(fn: cst.FunctionDef, builder: "_Builder", nested: bool) -> bool:
    """A kernel launch (``with T.Kernel(...)``) in ``fn``; with ``nested``, in
    nested functions too, and a ``@prim_func`` / ``@macro`` decorator counts."""
    stack: List[cst.CSTNode] = [fn]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.FunctionDef) and not (nested or n is fn):
            continue
        if isinstance(n, cst.Decorator):
            d = n.decorator
            if isinstance(d, cst.Call):
                d = d.func
            name = builder.dotted(d) or ""
            if nested and (name.endswith("prim_func") or name.endswith("macro")):
                return True
            continue
        if isinstance(n, cst.With) and _is_launch(n, builder):
            return True
        stack.extend(code_children(n))
    return False


def _annotates(loop_kwargs: Dict[str, Tuple]) -> bool:
    """Whether ``T.Pipelined(...)`` with these arguments writes a pipeline
    annotation: tilelang 0.1.15 writes none for ``num_stages=0`` and empty
    ``order``/``stage`` (their defaults)."""
    ns = loop_kwargs.get("num_stages")
    if ns is not None and not (isinstance(ns[0], Const) and ns[0].value == 0):
        return True
    for key in ("order", "stage"):
        v = loop_kwargs.get(key)
        if v is not None and not (isinstance(v[0], TupleExpr) and not v[0].items):
            return True
    return False


def _has_pipelined(fn: cst.FunctionDef, builder: "_Builder") -> bool:
    """Whether a ``for`` under ``fn`` iterates over ``T.Pipelined(...)`` (also as
    either branch of ``a if c else b``)."""
    stack: List[cst.CSTNode] = [fn]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.For):
            it = n.iter
            for e in ((it.body, it.orelse) if isinstance(it, cst.IfExp) else (it,)):
                if isinstance(e, cst.Call) and (builder.dotted(e.func) or "") == "T.Pipelined":
                    return True
        stack.extend(code_children(n))
    return False


def _compound_children(stmt: cst.CSTNode) -> List[cst.CSTNode]:
    out: List[cst.CSTNode] = []
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        out.extend(body.body if isinstance(body, cst.IndentedBlock) else [])
    orelse = getattr(stmt, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            out.extend(orelse.body.body if isinstance(orelse.body, cst.IndentedBlock) else [])
            orelse = orelse.orelse
        else:
            b = getattr(orelse, "body", None)
            if isinstance(b, cst.IndentedBlock):
                out.extend(b.body)
            orelse = None
    for h in getattr(stmt, "handlers", ()) or ():
        if isinstance(h.body, cst.IndentedBlock):
            out.extend(h.body.body)
    return out


_BINOPS = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/",
    cst.FloorDivide: "//", cst.Modulo: "%", cst.Power: "**", cst.LeftShift: "<<",
    cst.RightShift: ">>", cst.BitAnd: "&", cst.BitOr: "|", cst.BitXor: "^",
    cst.MatrixMultiply: "@",
}
_UNOPS = {cst.Minus: "-", cst.Plus: "+", cst.Not: "not", cst.BitInvert: "~"}
_AUGOPS = {
    cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*",
    cst.DivideAssign: "/", cst.FloorDivideAssign: "//", cst.ModuloAssign: "%",
    cst.PowerAssign: "**", cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>",
    cst.BitAndAssign: "&", cst.BitOrAssign: "|", cst.BitXorAssign: "^",
}
_CMPOPS: Dict[type, str] = {
    cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=", cst.Equal: "==", cst.NotEqual: "!=",
    cst.In: "in", cst.NotIn: "not in", cst.Is: "is", cst.IsNot: "is not",
}
