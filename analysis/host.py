"""The incremental analysis engine: text changes in, immutable snapshots out.

An :class:`AnalysisHost` keeps the text of every file it is given, as lines
cut into top-level chunks (:class:`Slot`).  An edit (:meth:`AnalysisHost.edit`)
splices the lines and marks the chunks it touched dirty; nothing is parsed
then.  :meth:`AnalysisHost.snapshot` hands out an immutable
:class:`Snapshot`, and ``snapshot.analysis(path, settings)`` returns exactly
what ``pipeline.analyze(text, path, settings)`` returns for the snapshot's
text.  It gets there with two caches, both owned by the host:

* **Chunks.**  Only dirty regions are re-split into top-level statements
  (:func:`resplit`, with ``frontend.split_chunks``); each chunk's model comes
  from :class:`ParseCache`, keyed by the chunk's text (a chunk that only moved
  is shifted, not re-parsed).  The module is ``frontend.combine`` of the chunk
  models, as in ``frontend.parse_module``.
* **Kernels.**  Each kernel's result (``pipeline.run_kernel``) is kept under
  its own chunk's text and its index in that chunk, together with the values
  it depends on (:func:`kernel_inputs`): the module constants it can reach by
  name, the other chunks holding the functions, macros, call sites and
  caller statements it can reach (with their place, since call-site lines
  show up in labels), the imports, the target, the settings and the chosen
  binding.  When every one of them is equal in a later snapshot the result is
  reused, its spans inside the kernel's own chunk moved by as many lines as
  the chunk moved; so an edit re-analyses only the kernels whose inputs
  changed.

The inputs are found by following names from the kernel's chunk: a name
reaches the constants and functions of that name; the kernel's factory, a
class and each calling function reach their call sites; a calling function is
followed only through the statements that can change the values it passes
(the assignments to those names, the tests and loops around them), not through
unrelated calls, so editing one factory does not invalidate the kernels called
after it in ``main()``.  ``tests/test_host_replay.py`` replays random edits and
compares every snapshot with a fresh ``analyze``.

Pure: no I/O, never raises on bad code.  Not thread-safe by itself except for
what :class:`AnalysisHost` guards with its lock (edits on one thread, analyses
on another is the language server's use).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import typing
from collections import Counter, OrderedDict
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from . import frontend, pipeline, schedule_ascend
from .model import (
    Analysis,
    AscendLoop,
    AscendStatement,
    Call,
    CallSite,
    Diagnostic,
    FuncStmt,
    Kernel,
    KernelResult,
    Module,
    Name,
    Settings,
    Span,
)
from .text import splice, split_lines

# pipeline.run_kernel's result for one kernel: its instances and diagnostics.
KernelOutput = Tuple[List[KernelResult], List[Diagnostic]]

# Characters Python's str.splitlines() treats as line breaks but LSP and the
# tokenizer do not; a region holding one is not split further.
_ODD_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


# --------------------------------------------------------------------------
# Chunk slots
# --------------------------------------------------------------------------


class Slot:
    """A run of lines ``[start, end)`` (0-based) holding one top-level statement."""

    __slots__ = ("start", "end", "dirty")

    def __init__(self, start: int, end: int, dirty: bool = True) -> None:
        self.start = start
        self.end = end
        self.dirty = dirty

    def copy(self) -> "Slot":
        return Slot(self.start, self.end, self.dirty)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Slot({self.start}, {self.end}, dirty={self.dirty})"


def _find(slots: Sequence[Slot], line: int) -> int:
    lo, hi = 0, len(slots) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if slots[mid].start <= line:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _region_needs_next(lines: Sequence[str], start: int, end: int) -> bool:
    """Does the region end where the next top-level statement cannot start
    fresh (a trailing decorator or a backslash continuation)?"""
    i = end - 1
    while i >= start:
        text = lines[i].rstrip("\r\n")
        stripped = text.strip()
        if stripped and not stripped.startswith("#"):
            return text.startswith("@") or text.endswith("\\")
        i -= 1
    return False


def _starts_indented(lines: Sequence[str], start: int) -> bool:
    """Does the code from ``start`` on continue the statement before it: an
    indented line, or a clause (``else``/``elif``/``except``/``finally``) of a
    top-level compound statement?"""
    i = start
    while i < len(lines):
        text = lines[i].rstrip("\r\n")
        if text.strip() and not text.lstrip().startswith("#"):
            return text[:1].isspace() or \
                frontend.first_word(text) in frontend.CLAUSE_KEYWORDS
        i += 1
        if i - start > 1000:
            break
    return False


def _begins_statement(lines: Sequence[str], start: int, end: int) -> bool:
    """Does a statement line follow ``start`` in ``[start, end)`` after nothing
    but column-0 comment lines (which then belong to it)?  A region without
    one holds only what belongs to the statement before it."""
    i = start
    while i < end and lines[i].startswith("#"):
        i += 1
    return i < end and lines[i][:1] not in ("", " ", "\t", "\n", "\r")


def resplit(lines: Sequence[str], slots: List[Slot]) -> List[Slot]:
    """Re-split every dirty slot into top-level statements."""
    out: List[Slot] = []
    i = 0
    n = len(slots)
    while i < n:
        slot = slots[i]
        if not slot.dirty:
            out.append(slot)
            i += 1
            continue
        start, end = slot.start, slot.end
        # A region whose first line is indented continues the statement before
        # it; comment lines right above it belong to its first statement.
        while out and (_starts_indented(lines, start) or lines[start - 1].startswith("#")
                       or not _begins_statement(lines, start, end)):
            prev = out.pop()
            start = prev.start
        # Absorb following slots while the region's end would glue onto them
        # (or ends with comment lines, which belong to the statement after).
        while i + 1 < n and (_region_needs_next(lines, start, end)
                             or _starts_indented(lines, end)
                             or lines[end - 1].startswith("#")):
            i += 1
            end = slots[i].end
        i += 1
        text = "".join(lines[start:end])
        if not text or _ODD_BREAKS.search(text):
            out.append(Slot(start, end, False))
            continue
        pieces: List[Slot] = []
        for c in frontend.split_chunks(text):
            s = start + c.start_line - 1
            if pieces:
                pieces[-1].end = s
            pieces.append(Slot(s, end, False))
        if not pieces:
            pieces = [Slot(start, end, False)]
        pieces[0].start = start
        out.extend(p for p in pieces if p.end > p.start)
    return out


class ScanCache:
    """Text → ``frontend.scan_tokens`` of it (the tokenizer's view of a run of
    top-level statements, wherever it sits)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: "OrderedDict[str, frontend.TokenScan]" = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> frontend.TokenScan:
        hit = self._items.get(text)
        if hit is not None:
            self._items.move_to_end(text)
            self.hits += 1
            return hit
        scan = frontend.parsed_scan(text)
        if scan is not None:
            return scan
        self.misses += 1
        scan = self._items[text] = frontend.scan_tokens(text)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return scan


# Merging a piece with the next one this many times in a row: tokenize the rest.
_MAX_MERGES = 8


def split_broken(lines: Sequence[str], slots: Sequence[Slot], scans: ScanCache) -> List[Slot]:
    """The top-level split ``frontend.split_chunks`` gives the whole text of
    ``lines`` when it does not parse (its tokenizer path), computed from
    ``slots`` (any cover of the lines by runs of whole lines) one run at a time.

    The tokenizer reads line by line; at the start of a line that begins in
    column 0, after a run that it tokenized to its end with no bracket, string
    or backslash continuation open, its last logical line ended, no decorator
    waiting and no string continued with a backslash cut short (Python's
    pure tokenizer keeps a flag then: ``TokenScan.needcont``), its state is
    that of a fresh start (only the indentation stack differs, and column 0
    empties it).  So a run that tokenizes cleanly on its own, followed by such a line,
    gives there what the whole text gives; its tokens are cached by its text
    (:class:`ScanCache`), and the runs are joined.  A run that stops early:
    * on an indentation error, the whole text stops there too;
    * at its end with brackets open ("EOF in multi-line statement"): when every
      later run tokenizes cleanly on its own and never has more closers than
      openers, the brackets are still open at the end of the text (inside
      brackets the tokenizer reads the same tokens, without indentation), so
      the whole text stops there too;
    * otherwise it is joined with the following runs and tokenized again.
    Where the whole text stops, the rest is cut as ``frontend.fallback_starts``
    cuts it, from the end of the last complete logical line."""
    n = len(lines)
    bounds = [s.start for s in slots] + [n]
    k = len(slots)
    starts: List[int] = []
    last_nl = 0
    src_lines = frontend.source_lines(frontend.normalise_newlines("".join(lines)))
    i = 0
    while i < k:
        a = bounds[i]
        j = i + 1
        merges = 0
        while True:
            e = bounds[j]
            scan = scans.get(frontend.normalise_newlines("".join(lines[a:e])))
            if scan.error is None:
                if e < n and scan.needcont:
                    j = k  # the tokenizer's state runs on: tokenize the rest at once
                    continue
                if e < n and (scan.pending_decorator or scan.line_open
                              or not _fresh_at(lines, e, bounds[j + 1])):
                    merges += 1
                    j = k if merges >= _MAX_MERGES else j + 1
                    continue
                break
            if e == n or scan.error.startswith("IndentationError") or \
                    _never_closed(scan, lines, bounds, j, scans):
                break
            j = k  # the tokenizer's state runs on: tokenize the rest at once
        starts.extend(a + st for st in scan.starts)
        if scan.newline_end is not None:
            last_nl = a + scan.newline_end
        if scan.error is not None:
            frontend.fallback_starts(src_lines, last_nl, starts)
            break
        i = j
    begins = [c.start_line - 1 for c in frontend.chunks_at(src_lines, starts)] or [0]
    out = [Slot(b, begins[m + 1] if m + 1 < len(begins) else n, False)
           for m, b in enumerate(begins)]
    out[0].start = 0
    return [sl for sl in out if sl.end > sl.start] or [Slot(0, n, False)]


def _fresh_at(lines: Sequence[str], start: int, end: int) -> bool:
    """Is the first line of ``lines[start:end]`` with a token one that begins
    in column 0?"""
    for i in range(start, end):
        text = lines[i]
        body = text.lstrip(" \t")
        if not body.strip() or body.startswith("#"):
            continue
        return not text[:1].isspace()
    return False


def _never_closed(scan: frontend.TokenScan, lines: Sequence[str], bounds: Sequence[int],
                  j: int, scans: ScanCache) -> bool:
    """Does a run that ended with brackets open leave them open to the end of
    the text: every later run (from ``bounds[j]``) tokenizes cleanly on its own
    and never closes more brackets than it opened?"""
    if scan.depth <= 0 or scan.needcont or scan.error is None or \
            "multi-line statement" not in scan.error:
        return False
    for m in range(j, len(bounds) - 1):
        later = scans.get(frontend.normalise_newlines("".join(lines[bounds[m]:bounds[m + 1]])))
        if later.error is not None or later.min_depth < 0:
            return False
    return True


def _mark(slots: List[Slot], line_count: int, sl: int, el: int, delta: int) -> List[Slot]:
    """The slots after an edit of lines ``sl..el`` that changed the line count
    by ``delta``: the touched ones merged into one dirty slot, the rest moved."""
    if not slots:
        return [Slot(0, line_count)]
    i0 = _find(slots, sl)
    i1 = _find(slots, el)
    merged = Slot(slots[i0].start, slots[i1].end + delta, True)
    rest = [Slot(s.start + delta, s.end + delta, s.dirty) if delta else s
            for s in slots[i1 + 1:]]
    new = slots[:i0] + [merged] + rest
    if new[-1].end != line_count:  # keep the slots covering every line
        new[-1] = Slot(new[-1].start, line_count, True)
    return [s for s in new if s.end > s.start] or [Slot(0, line_count)]


# --------------------------------------------------------------------------
# Moving results
# --------------------------------------------------------------------------

_FIELDS: Dict[type, Tuple[str, ...]] = {}

# Line moves: ((first line, end line (exclusive), delta), ...), 1-based lines,
# sorted and disjoint.
Moves = Tuple[Tuple[int, int, int], ...]


class Unmoved(Exception):
    """A span outside every range of a strict relocation."""


def shift(obj: Any, delta: int, lo: int = 0, hi: Optional[int] = None,
          memo: Optional[Dict[int, Any]] = None) -> Any:
    """A copy of a frozen model value with every Span that starts on a line in
    ``[lo, hi)`` (1-based; ``hi`` None: no end) moved down ``delta`` lines."""
    return relocate(obj, ((lo, _NO_END if hi is None else hi, delta),), False,
                    {} if memo is None else memo)


_NO_END = 1 << 62


def relocate(obj: Any, moves: Moves, strict: bool, memo: Dict[int, Any]) -> Any:
    """A copy of a frozen model value with every Span that starts in one of
    ``moves``' ranges moved by its delta; a Span in none of them stays, or
    with ``strict`` raises :class:`Unmoved`.  ``memo``: id → (dataclass,
    its copy) of those already moved the same way (a value shared in the
    input stays shared; a snapshot shares one between the chunk models it
    moves and the kernel results it moves, which hold nodes of those models)."""
    cls = type(obj)
    if cls is Span:
        line = obj.line
        for lo, hi, delta in moves:
            if lo <= line < hi:
                if not delta:
                    return obj
                return Span(line + delta, obj.col, obj.end_line + delta, obj.end_col)
        if strict:
            raise Unmoved(line)
        return obj
    if cls is tuple:
        if not obj:
            return obj
        new = tuple([relocate(x, moves, strict, memo) for x in obj])
        for a, b in zip(new, obj, strict=True):
            if a is not b:
                return new
        return obj
    if cls is list:
        return [relocate(x, moves, strict, memo) for x in obj]
    if cls in _LEAVES:
        return obj
    fields = _MOVED_FIELDS.get(cls)
    if fields is None:
        if isinstance(obj, tuple):  # a named tuple
            items = tuple(relocate(x, moves, strict, memo) for x in obj)
            return obj if items == obj else cls(*items)
        if not dataclasses.is_dataclass(obj) or isinstance(obj, type) or _spanless(cls):
            _LEAVES.add(cls)
            return obj
        fields = _MOVED_FIELDS[cls] = _fields(obj)
    key = id(obj)
    hit = memo.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    d = obj.__dict__
    changes = None
    for name in fields:
        val = d[name]
        if type(val) in _LEAVES:
            if name in _LINE_INTS.get(cls, ()):
                line = _relocate_line(val, moves, strict)
                if line != val:
                    changes = changes or {}
                    changes[name] = line
            continue
        new = relocate(val, moves, strict, memo)
        if new is not val:
            if changes is None:
                changes = {}
            changes[name] = new
    if changes is None:
        out = obj
    else:
        # A copy with the changed fields (a frozen dataclass without
        # __post_init__; dataclasses.replace would run __init__ again).
        out = object.__new__(cls)
        out.__dict__.update(d)
        out.__dict__.update(changes)
        # What the dependency walk read from it holds for the copy too.
        caches: Tuple[Dict[int, Any], ...] = (_NAMES, _STMTS, _CALLS)
        for cache in caches:
            known = cache.get(key)
            if known is not None and known[0] is obj:
                cache[id(out)] = (out, known[1])
    memo[key] = (obj, out)
    return out


# Types holding no Span (the atoms of model values).
_LEAVES: Set[type] = {str, int, float, bool, type(None), complex, bytes}

# Plain-int fields that are a source line (moved like a Span's first line).
_LINE_INTS: Dict[type, Tuple[str, ...]] = {AscendStatement: ("line",), AscendLoop: ("line",)}


# The fields relocate follows, per dataclass that can hold a Span.
_MOVED_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _spanless(cls: type) -> bool:
    """Can no value of the dataclass ``cls`` hold a Span or a line, by its
    fields' annotations (expressions, for one: thousands of nodes per file
    that relocate need not visit)?  Unknown or loose annotations (``Any``,
    ``object``) count as holding one."""
    return _type_spanless(cls, set())


def _type_spanless(tp: Any, seen: Set[type]) -> bool:
    if tp is Span or tp in _LINE_INTS:
        return False
    if tp in _ATOMS:
        return True
    origin = typing.get_origin(tp)
    if origin is not None:  # Optional, Union, Tuple, List, Dict, ...
        if origin is typing.Literal:
            return True
        return all(a is Ellipsis or _type_spanless(a, seen) for a in typing.get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp in seen:  # a recursive type: its other fields decide
            return True
        seen.add(tp)
        hints = _HINTS.get(tp)
        if hints is None:
            try:
                hints = _HINTS[tp] = typing.get_type_hints(tp)
            except Exception:  # an annotation that does not resolve
                return False
        return all(_type_spanless(hints.get(f.name, Any), seen) for f in dataclasses.fields(tp))
    return False


_HINTS: Dict[type, Dict[str, Any]] = {}
_PREPARED = [False]


def prepare_relocation() -> None:
    """Decide once, for every dataclass of the analysis, whether relocate
    must visit it (reading a class's annotations costs about 0.3 ms; without
    this, the first edit that moves lines pays for all of them)."""
    if _PREPARED[0]:
        return
    _PREPARED[0] = True
    import sys
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith(__package__ or "tilelint.analysis"):
            continue
        for obj in list(vars(mod).values()):
            if not isinstance(obj, type) or not dataclasses.is_dataclass(obj) \
                    or obj in _LEAVES or obj in _MOVED_FIELDS:
                continue
            if _spanless(obj):
                _LEAVES.add(obj)
            else:
                _MOVED_FIELDS[obj] = tuple(f.name for f in dataclasses.fields(obj))


_ATOMS = frozenset({str, int, float, bool, type(None), complex, bytes})


def _relocate_line(line: int, moves: Moves, strict: bool) -> int:
    for lo, hi, delta in moves:
        if lo <= line < hi:
            return line + delta
    if strict:
        raise Unmoved(line)
    return line


# --------------------------------------------------------------------------
# Chunk models
# --------------------------------------------------------------------------


def _internal_error(text: str, start_line: int, exc: BaseException) -> frontend.ChunkModel:
    first = text.split("\n", 1)[0]
    return frontend.ChunkModel(problems=(Diagnostic(
        code="TL000", severity="error",
        span=Span(start_line, 0, start_line, len(first.rstrip("\r"))),
        message=f"tilelint internal error while reading this statement: "
                f"{type(exc).__name__}: {exc}. Please report this."),))


_ParseEntry = Tuple[int, frontend.ChunkModel, int, frontend.ChunkModel]


class ParseCache:
    """Chunk text → chunk model, independent of where the chunk sits.  The
    model at the place before is kept too (a line typed and deleted again
    above a chunk moves it there and back)."""

    def __init__(self, size: int = 4096, trees: int = 16) -> None:
        self.size = size
        # (text, aliases) -> (start, model, previous start, its model)
        self._items: "OrderedDict[Tuple[str, frontend.Aliases], _ParseEntry]" = OrderedDict()
        # Chunk text → its libcst tree, for the last chunks parsed: an edit
        # inside one token of one of them re-uses its tree (reparse_token).
        self._trees: "OrderedDict[str, frontend.ChunkTree]" = OrderedDict()
        self.trees = trees
        self.hits = 0
        self.misses = 0
        self.reparsed = 0

    def peek(self, text: str, aliases: frontend.Aliases) -> Optional[frontend.ChunkModel]:
        """The model kept for a text, wherever it sits (None: none kept)."""
        hit = self._items.get((text, aliases))
        return None if hit is None else hit[1]

    def get(self, text: str, start_line: int, aliases: frontend.Aliases,
            memo: Optional[Dict[int, Any]] = None, before: Optional[str] = None
            ) -> frontend.ChunkModel:
        """The chunk's model at ``start_line``; a model cached elsewhere is
        moved (through ``memo``, see :func:`relocate`).  ``before``: the text
        the chunk had before the edit, if known (its tree may be re-used)."""
        key = (text, aliases)
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            base, cached, prev, prev_model = hit
            self.hits += 1
            if base == start_line:
                return cached
            if prev == start_line:
                self._items[key] = (prev, prev_model, base, cached)
                return prev_model
            moved = shift(cached, start_line - base, memo=memo)
            self._items[key] = (start_line, moved, base, cached)
            return moved
        self.misses += 1
        try:
            model_ = self._parse(text, start_line, aliases, before)
        except Exception as exc:  # a frontend bug must not take the editor down
            return _internal_error(text, start_line, exc)
        self._items[key] = (start_line, model_, start_line, model_)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return model_


    def _parse(self, text: str, start_line: int, aliases: frontend.Aliases,
               before: Optional[str]) -> frontend.ChunkModel:
        """Parse a chunk, re-using the tree of the text it had before the edit
        (or of one of the last chunks parsed) when the edit is inside one token
        or one simple statement line.
        After a whole parse, the tree of the text before is made from the new
        one the same way, so that the next edit of the chunk (say, the next
        default changed) finds it."""
        trees = self._trees
        first = trees.get(before) if before is not None else None
        recent = [t for t in list(trees.values())[-2:] if t is not first]
        for old in ([first] if first is not None else []) + recent:
            hit = frontend.reparse_token(old, text, start_line, aliases) or \
                frontend.reparse_line(old, text, start_line, aliases)
            if hit is not None:
                self.reparsed += 1
                self._keep_tree(hit[1])
                return hit[0]
        # A chunk read for the first time (a file opened) keeps no tree: its
        # first edit parses it whole and keeps the trees from then on.
        model_, tree = frontend.parse_chunk_tree(text, start_line, aliases,
                                                 keep=before is not None)
        if tree is not None and tree.leaves:
            if first is None and before is not None and before != text:
                back = frontend.patch_tree(tree, before)
                if back is not None:
                    self._keep_tree(back)
            self._keep_tree(tree)
        return model_

    def _keep_tree(self, tree: frontend.ChunkTree) -> None:
        self._trees[tree.text] = tree
        self._trees.move_to_end(tree.text)
        if len(self._trees) > self.trees:
            self._trees.popitem(last=False)


# --------------------------------------------------------------------------
# What a kernel's result depends on
# --------------------------------------------------------------------------


def _add_func_names(func: str, out: Set[str]) -> None:
    parts = func.split(".")
    out.add(func)
    out.add(parts[0])
    out.add(parts[-1])
    if parts[0] == "self" and len(parts) > 1:
        out.add(parts[1])


def names_in(obj: Any, out: Optional[Set[str]] = None,
             memo: Optional[Set[int]] = None) -> Set[str]:
    """Every name a model value mentions: ``Name`` ids, called function names
    (whole, first and last part), macro/def/parameter names; a superset of
    the names the analysis can look up for it."""
    if out is None:
        out = set()
    if memo is None:
        memo = set()
    stack = [obj]
    while stack:
        o = stack.pop()
        if o is None or isinstance(o, (str, int, float, bool, Span)):
            continue
        if isinstance(o, (tuple, list)):
            stack.extend(o)
            continue
        if not dataclasses.is_dataclass(o) or isinstance(o, type):
            continue
        key = id(o)
        if key in memo:
            continue
        memo.add(key)
        if isinstance(o, Name):
            out.add(o.id)
            continue
        if isinstance(o, (Call, CallSite)):
            _add_func_names(o.func, out)
        name = getattr(o, "name", None)
        if isinstance(name, str):
            out.add(name)
        for fname in _fields(o):
            val = getattr(o, fname)
            if isinstance(val, str):
                if fname in ("factory", "class_name", "id",
                             "vararg", "kwarg"):
                    out.add(val)
                continue
            if val is not None and not isinstance(val, (int, float, bool, Span)):
                stack.append(val)
    return out


def _fields(o: Any) -> Tuple[str, ...]:
    fields = _FIELDS.get(type(o))
    if fields is None:
        fields = tuple(f.name for f in dataclasses.fields(o))
        _FIELDS[type(o)] = fields
    return fields


_NAMES: "OrderedDict[int, Tuple[Any, FrozenSet[str]]]" = OrderedDict()


def _names_cached(obj: Any) -> FrozenSet[str]:
    hit = _NAMES.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    names = frozenset(names_in(obj))
    _NAMES[id(obj)] = (obj, names)
    if len(_NAMES) > 20000:
        _NAMES.popitem(last=False)
    return names


_EMPTY: FrozenSet[str] = frozenset()


def _stmt_names(st: FuncStmt) -> Tuple[FrozenSet[str], FrozenSet[str], Optional[str]]:
    """(names assigned, names read, the base a bare ``x.method(...)`` call mutates)."""
    hit = _STMTS.get(id(st))
    if hit is not None and hit[0] is st:
        return hit[1]
    targets = _names_cached(st.target) if st.target is not None else _EMPTY
    reads = _names_cached(st.value) if st.value is not None else _EMPTY
    v = st.value
    base = v.func.split(".")[0] if st.kind == "expr" and isinstance(v, Call) \
        and "." in v.func else None
    out = (targets, reads, base)
    _STMTS[id(st)] = (st, out)
    if len(_STMTS) > 20000:
        _STMTS.popitem(last=False)
    return out


_STMTS: "OrderedDict[int, Tuple[FuncStmt, Tuple[FrozenSet[str], FrozenSet[str], Optional[str]]]]" \
    = OrderedDict()


def _frame_names(stmts: Sequence[FuncStmt], need: Set[str]) -> bool:
    """Grow ``need`` with the names the statements of a calling function read
    to compute names already in ``need`` (assignments to them, mutations of
    them, every test and loop).  True when something was added."""
    grew = False
    for st in stmts:
        targets, reads, base = _stmt_names(st)
        kind = st.kind
        add: Iterable[str] = ()
        if kind == "assign":
            if not targets.isdisjoint(need):
                add = reads
        elif kind == "expr":
            if base is not None and base in need:
                add = reads
        elif kind in ("if", "while"):
            add = reads
        elif kind == "for":
            add = reads | targets
        if add and not need.issuperset(add):
            need.update(add)
            grew = True
        if st.body and _frame_names(st.body, need):
            grew = True
        if st.orelse and _frame_names(st.orelse, need):
            grew = True
    return grew


@dataclasses.dataclass
class _Index:
    """Where the module's names live, per chunk (built once per snapshot)."""

    chunks: List[Tuple[str, int, frontend.ChunkModel]]  # (text, start line (1-based), model)
    consts: Dict[str, List[Any]]
    const_chunks: Dict[str, List[int]]  # constant name → the chunks assigning it
    owners: Dict[str, List[int]]  # def/class/macro/helper/function name → chunk indices
    defs: Dict[str, List[Any]]  # def name / class name → FuncDefs
    calls: Dict[str, List[Tuple[int, CallSite]]]  # callee name part → (chunk, call)
    toplevel: List[int]  # chunks with module-level statements
    argparse: List[int]
    imports: Tuple[Tuple[str, Tuple[str, bool]], ...]
    whole_parses: bool
    aliases: Any = None
    frames: Dict[int, Tuple[FrozenSet[str], Dict[FrozenSet[str], FrozenSet[str]]]] = \
        dataclasses.field(default_factory=dict)
    classes: Set[str] = dataclasses.field(default_factory=set)
    toplevel_stmts: List[FuncStmt] = dataclasses.field(default_factory=list)
    # relevant_toplevel's tables: (chunks with a test or loop, name → writers)
    _writers: Optional[Tuple[Set[int], Dict[str, List[int]]]] = None
    _texts: Optional[Counter] = None
    _changes: Dict[int, Tuple[Counter, List[str]]] = dataclasses.field(default_factory=dict)
    _starts: Optional[Dict[str, Optional[int]]] = None
    _models: Optional[Dict[str, frontend.ChunkModel]] = None
    _footprints: Dict[str, FrozenSet[str]] = dataclasses.field(default_factory=dict)
    parse_cache: Optional["ParseCache"] = None

    def texts(self) -> Counter:
        """How many chunks hold each text."""
        if self._texts is None:
            self._texts = Counter(t for t, _s, _m in self.chunks)
        return self._texts

    def changed_since(self, before: Counter) -> List[str]:
        """The chunk texts added or removed since an index with ``before``."""
        hit = self._changes.get(id(before))
        if hit is not None and hit[0] is before:
            return hit[1]
        now = self.texts()
        out = list((before - now) + (now - before))
        self._changes[id(before)] = (before, out)
        return out

    def footprint_of(self, text: str) -> FrozenSet[str]:
        """:func:`footprint` of the model of a chunk text of this index, or of
        one that was removed (a chunk's model does not depend on its place,
        except for spans)."""
        hit = self._footprints.get(text)
        if hit is not None:
            return hit
        if self._models is None:
            self._models = {t: cm for t, _s, cm in self.chunks}
        cm = self._models.get(text)
        if cm is None and self.parse_cache is not None:
            cm = self.parse_cache.peek(text, self.aliases)
        if cm is None:
            cm = frontend.parse_chunk(text, 1, self.aliases)
        out = self._footprints[text] = footprint(cm)
        return out

    def unique_starts(self) -> Dict[str, Optional[int]]:
        """Chunk text → its start line (None when several chunks hold it)."""
        if self._starts is None:
            starts: Dict[str, Optional[int]] = {}
            for t, st, _m in self.chunks:
                starts[t] = None if t in starts else st
            self._starts = starts
        return self._starts

    def relevant_toplevel(self, need: Set[str]) -> Set[int]:
        """The chunks whose module-level statements can change what the code
        before a module-level call passes: a test or loop, or a write to a
        name in ``need``."""
        if self._writers is None:
            always: Set[int] = set()
            writers: Dict[str, List[int]] = {}
            for i in self.toplevel:
                names = _toplevel_writes(self.chunks[i][2])
                if names is None:
                    always.add(i)
                else:
                    for n in names:
                        writers.setdefault(n, []).append(i)
            self._writers = (always, writers)
        always, writers = self._writers
        out = set(always)
        for n in need:
            hit = writers.get(n)
            if hit:
                out.update(hit)
        return out

    def call_names(self, c: CallSite) -> FrozenSet[str]:
        """The names a call site's arguments read."""
        hit = _CALLS.get(id(c))
        if hit is not None and hit[0] is c:
            return hit[1]
        names = frozenset(names_in((c.args, c.kwargs, c.star_kwargs)))
        _CALLS[id(c)] = (c, names)
        if len(_CALLS) > 20000:
            _CALLS.popitem(last=False)
        return names


_CALLS: "OrderedDict[int, Tuple[CallSite, FrozenSet[str]]]" = OrderedDict()


def _build_index(chunks: List[Tuple[str, int, frontend.ChunkModel]],
                 imports: Tuple[Tuple[str, Tuple[str, bool]], ...]) -> _Index:
    consts: Dict[str, List[Any]] = {}
    const_chunks: Dict[str, List[int]] = {}
    owners: Dict[str, List[int]] = {}
    defs: Dict[str, List[Any]] = {}
    calls: Dict[str, List[Tuple[int, CallSite]]] = {}
    toplevel: List[int] = []
    argp: List[int] = []
    broken = False
    for i, (_text, _start, cm) in enumerate(chunks):
        if any(p.code in ("TL001", "TL000") for p in cm.problems):
            broken = True
        for name, expr in cm.constants:
            consts.setdefault(name, []).append(expr)
            places = const_chunks.setdefault(name, [])
            if not places or places[-1] != i:
                places.append(i)
        for d in cm.defs:
            owners.setdefault(d.name, []).append(i)
            defs.setdefault(d.name, []).append(d)
            if d.class_name is not None:
                owners.setdefault(d.class_name, []).append(i)
                defs.setdefault(d.class_name, []).append(d)
        for m in cm.macros:
            owners.setdefault(m.name, []).append(i)
        for name, _params in cm.functions:
            owners.setdefault(name, []).append(i)
        for h in cm.iter_helpers:
            owners.setdefault(h[0], []).append(i)
        for k in cm.kernels:
            owners.setdefault(k.name, []).append(i)
        for c in cm.call_sites:
            parts = c.func.split(".")
            for key in {c.func, parts[-1]}:
                calls.setdefault(key, []).append((i, c))
        if cm.toplevel:
            toplevel.append(i)
        if cm.argparse:
            argp.append(i)
    index = _Index(chunks, consts, const_chunks, owners, defs, calls, toplevel, argp, imports,
                   not broken)
    for name, ds in defs.items():
        if any(d.class_name == name for d in ds):
            index.classes.add(name)
    for i in toplevel:
        index.toplevel_stmts.extend(chunks[i][2].toplevel)
    return index


def kernel_inputs(index: _Index, own: int, kernel: Kernel,
                  reads: Optional[Set[str]] = None) -> Tuple[Any, ...]:
    """The values ``kernel`` (of chunk ``own``) can read besides its own
    chunk's text, in a form that compares equal exactly when they are equal:
    (the constants it can reach, each as the chunks assigning it; the other
    chunks it reaches; the imports; its own chunk's start when the chunk holds
    one of its call sites).  A chunk is its (text, start line); a chunk's model
    is a function of these and the aliases, which the cache key holds.

    ``reads`` gets every key under which the walk looked chunks up (names, and
    ``<top-flow>`` / ``<argparse>`` when it read the module-level statements
    and argparse defaults; a module-level assignment matters only to a walk
    that needs a name it assigns, and ends with every needed name read): a
    chunk none of whose keys (:func:`footprint`) is among them cannot change
    the result, wherever it is added or removed."""
    walk = _InputWalk(index, own, kernel)
    walk.run()
    if reads is not None:
        walk.report(reads)
    return walk.result()


class _InputWalk:
    """The fixpoint behind :func:`kernel_inputs`: names needed, the chunks
    and call sites they lead to, and the calling functions' statements."""

    def __init__(self, index: _Index, own: int, kernel: Kernel) -> None:
        self.index = index
        self.own = own
        own_model = index.chunks[own][2]
        starts = [n for n in (kernel.name, kernel.factory, kernel.class_name) if n]
        self.need: Set[str] = set(_names_cached(own_model))
        self.need.update(starts)
        self.other: Set[int] = set()
        self.frames: Set[Optional[str]] = set()
        self.done: Set[str] = set()
        self.own_calls = False
        # Call sites are followed for the kernel itself, the functions and
        # classes its chunk names, and (through them) the functions that call them.
        self.callees: List[str] = list(starts) + [n for n in self.need if n in index.owners]
        self.searched: Set[str] = set()

    def _all_searched(self) -> bool:
        return len(self.searched) == len(set(self.callees))

    def run(self) -> None:
        while True:
            if not (self.need - self.done) and self._all_searched():
                break
            self._follow_names()
            grew_frames = self._follow_calls()
            before = len(self.need)
            self._follow_frames(grew_frames)
            if len(self.need) == before and not (self.need - self.done) and \
                    self._all_searched():
                break

    def _follow_names(self) -> None:
        index = self.index
        for n in self.need - self.done:
            self.done.add(n)
            for i in index.owners.get(n, ()):
                if i != self.own:
                    self.other.add(i)
            for d in index.defs.get(n, ()):
                self.need |= _names_cached(d)
            for e in index.consts.get(n, ()):
                self.need |= _names_cached(e)
            if n in index.classes and n not in self.searched:
                self.callees.append(n)

    def _follow_calls(self) -> bool:
        """Every call site of the callees found so far; True when a new
        calling function (frame) was found."""
        grew_frames = False
        while not self._all_searched():
            for n in [c for c in self.callees if c not in self.searched]:
                self.searched.add(n)
                for i, c in self.index.calls.get(n, ()):
                    if i == self.own:
                        self.own_calls = True
                    else:
                        self.other.add(i)
                    self.need |= self.index.call_names(c)
                    if c.enclosing_class and c.enclosing_class not in self.searched:
                        self.callees.append(c.enclosing_class)
                    if c.enclosing not in self.frames:
                        self.frames.add(c.enclosing)
                        grew_frames = True
                        if c.enclosing is not None and c.enclosing not in self.searched:
                            # Followed through its call sites and the statements
                            # before the call; not called, so its name is not read.
                            self.callees.append(c.enclosing)
        return grew_frames

    def _follow_frames(self, grew_frames: bool) -> None:
        """A calling function: only the statements that compute what it passes."""
        index = self.index
        for f in self.frames:
            if f is None:
                self.need |= _frame_closure(index, None, self.need)
                self.other.update(index.relevant_toplevel(self.need))
            else:
                for i in index.owners.get(f, ()):
                    if i != self.own:
                        self.other.add(i)
                for d in index.defs.get(f, ()):
                    self.need |= _frame_closure(index, d, self.need)
        if self.frames and grew_frames:
            self.other.update(index.argparse)

    def report(self, reads: Set[str]) -> None:
        reads.update(self.done, self.searched, (f for f in self.frames if f is not None))
        if None in self.frames:
            reads.add("<top-flow>")
        if self.frames:
            reads.add("<argparse>")

    def result(self) -> Tuple[Any, ...]:
        index = self.index
        own_text, own_start, _model = index.chunks[self.own]
        consts = tuple((n, tuple(Place(*index.chunks[i][:2]) for i in index.const_chunks[n]))
                       for n in sorted(self.need) if n in index.const_chunks)
        chunks = tuple(Place(*index.chunks[i][:2]) for i in sorted(self.other))
        return (consts, chunks, index.imports,
                Place(own_text, own_start) if self.own_calls else None)


def footprint(cm: frontend.ChunkModel) -> FrozenSet[str]:
    """The keys under which ``_build_index`` files a chunk: the names it
    defines (functions, classes, macros, helpers, kernels, constants), the
    callees of its call sites, the names its module-level statements assign
    or mutate, ``<top-flow>`` when one of them is a test, loop or other
    compound statement (the walk of the code before a module-level call reads
    those whatever they assign) and ``<argparse>`` when it has argparse
    defaults."""
    hit = _FOOTPRINTS.get(id(cm))
    if hit is not None and hit[0] is cm:
        return hit[1]
    out: Set[str] = set()
    for name, _expr in cm.constants:
        out.add(name)
    for d in cm.defs:
        out.add(d.name)
        if d.class_name is not None:
            out.add(d.class_name)
    out.update(m.name for m in cm.macros)
    out.update(name for name, _params in cm.functions)
    out.update(h[0] for h in cm.iter_helpers)
    out.update(k.name for k in cm.kernels)
    for c in cm.call_sites:
        out.add(c.func)
        out.add(c.func.split(".")[-1])
    for st in cm.toplevel:
        if st.kind in ("assign", "expr"):
            targets, _reads, base = _stmt_names(st)
            out.update(targets)
            if base is not None:
                out.add(base)
        else:
            out.add("<top-flow>")
    if cm.argparse:
        out.add("<argparse>")
    names = frozenset(out)
    _FOOTPRINTS[id(cm)] = (cm, names)
    if len(_FOOTPRINTS) > 20000:
        _FOOTPRINTS.popitem(last=False)
    return names


_FOOTPRINTS: "OrderedDict[int, Tuple[frontend.ChunkModel, FrozenSet[str]]]" = OrderedDict()


class InputsCache:
    """``kernel_inputs`` kept from one snapshot to the next.  An entry holds
    the inputs, the keys the walk read and the chunk texts of the index it
    was computed on; in a later index it still holds when every chunk added
    or removed since has no key among those read, and every chunk it names
    is still there once (it is renamed to where it is now, in the same
    order)."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._items: "OrderedDict[Tuple, Tuple[Tuple, FrozenSet[str], Counter]]" = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Tuple, index: _Index, own: int, kernel: Kernel) -> Tuple[Any, ...]:
        entry = self._items.get(key)
        if entry is not None:
            hit = self._reuse(entry, index)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return hit
        self.misses += 1
        reads: Set[str] = set()
        inputs = kernel_inputs(index, own, kernel, reads)
        self._items[key] = (inputs, frozenset(reads), index.texts())
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return inputs

    @staticmethod
    def _reuse(entry: Tuple[Tuple, FrozenSet[str], Counter], index: _Index
               ) -> Optional[Tuple[Any, ...]]:
        inputs, reads, texts = entry
        if len(inputs) != 4 or inputs[2] != index.imports:
            return None
        for text in index.changed_since(texts):
            if not index.footprint_of(text).isdisjoint(reads):
                return None
        where = index.unique_starts()
        consts = []
        for name, places in inputs[0]:
            new = _moved_places(places, where)
            if new is None:
                return None
            consts.append((name, new))
        chunks = _moved_places(inputs[1], where)
        own = _moved_places((inputs[3],), where) if inputs[3] is not None else (None,)
        if chunks is None or own is None:
            return None
        return (tuple(consts), chunks, inputs[2], own[0])


def _moved_places(places: Sequence[Place], where: Dict[str, Optional[int]]
                  ) -> Optional[Tuple[Place, ...]]:
    """``places`` where their texts are now (None: a text gone, held by
    several chunks, or the order changed)."""
    out: List[Place] = []
    for pl in places:
        start = where.get(pl.text)
        if start is None or (out and out[-1].start >= start):
            return None
        out.append(Place(pl.text, start))
    return tuple(out)


class Place(NamedTuple):
    """A chunk among a kernel's inputs: its text and first line (1-based)."""

    text: str
    start: int


def unplace(inputs: Any, own: Place) -> Tuple[Any, Tuple[Place, ...]]:
    """``inputs`` without the chunks' lines: each :class:`Place` becomes its
    text and its rank among the places and ``own`` (the order of the chunks
    stays part of the value, where they are does not), and the places in the
    order they were met, ``own`` first."""
    found: List[Place] = [own]

    def collect(x: Any) -> None:
        if isinstance(x, Place):
            found.append(x)
        elif isinstance(x, tuple):
            for y in x:
                collect(y)

    collect(inputs)
    rank = {st: r for r, st in enumerate(sorted({p.start for p in found}))}

    def strip(x: Any) -> Any:
        if isinstance(x, Place):
            return (x.text, rank[x.start])
        if isinstance(x, tuple):
            return tuple(strip(y) for y in x)
        return x

    return (strip(inputs), rank[own.start]), tuple(found)


def _toplevel_writes(cm: frontend.ChunkModel) -> Optional[Set[str]]:
    """The names a chunk's module-level statements assign or mutate; None
    when one of them is a test or a loop (or a return), which can change what
    the code after it passes whatever it reads."""
    out: Set[str] = set()
    for st in cm.toplevel:
        if st.kind in ("if", "for", "while", "return"):
            return None
        targets, _reads, base = _stmt_names(st)
        out.update(targets)
        if base is not None:
            out.add(base)
    return out


def _frame_closure(index: _Index, d: Any, need: Set[str]) -> FrozenSet[str]:
    """The names a calling function ``d`` reads to compute ``need``: its
    decorators and parameters, and what :func:`_frame_names` adds.  Memoised
    per snapshot on the part of ``need`` the function assigns."""
    body: Sequence[FuncStmt] = index.toplevel_stmts if d is None else d.body
    memo = index.frames.get(id(d))
    if memo is None:
        assigned: Set[str] = set()

        def walk(stmts: Sequence[FuncStmt]) -> None:
            for st in stmts:
                targets, _reads, base = _stmt_names(st)
                assigned.update(targets)
                if base is not None:
                    assigned.add(base)
                walk(st.body)
                walk(st.orelse)

        walk(body)
        memo = index.frames[id(d)] = (frozenset(assigned), {})
    assigned_names, results = memo
    key = frozenset(need & assigned_names)
    hit = results.get(key)
    if hit is None:
        grow = set(key)
        while _frame_names(body, grow):
            pass
        hit = frozenset(grow)
        if d is not None:
            hit |= _names_cached(d.decorators) | _names_cached(d.params)
        results[key] = hit
    return hit


def _lines_above(lines: Sequence[str], start: int) -> Tuple[str, ...]:
    """The lines above a chunk up to the first blank one (``packing.autotune_span``
    walks up over a decorator block from the def)."""
    out: List[str] = []
    i = start - 1
    while i >= 0:
        out.append(lines[i])
        if not lines[i].strip():
            break
        i -= 1
    return tuple(out)


# --------------------------------------------------------------------------
# The kernel cache
# --------------------------------------------------------------------------


# A kept kernel result: (inputs, start line, end line, output, whole_parses).
_KernelEntry = Tuple[Tuple, int, int, KernelOutput, Optional[bool]]


class KernelCache:
    """Per-kernel results of ``pipeline.run_kernel``, keyed by the kernel's own
    chunk and the values it depends on (see :func:`kernel_inputs`).  The
    result for the inputs before is kept too (a value toggled, a line typed
    and deleted again)."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        # key -> (inputs, start line, end line, output, whole_parses)
        self._items: "OrderedDict[Tuple, _KernelEntry]" = OrderedDict()
        self._prev: Dict[Tuple, _KernelEntry] = {}
        # (key, inputs without lines) -> (the places' starts, output, whole_parses)
        self._moved: "OrderedDict[Tuple, Tuple[Tuple[int, ...], KernelOutput, Optional[bool]]]" \
            = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.moved_hits = 0

    def _keep(self, key: Tuple, entry: "_KernelEntry") -> None:
        old = self._items.get(key)
        if old is not None and old[0] != entry[0]:
            self._prev[key] = old
        self._items[key] = entry
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            gone, _entry = self._items.popitem(last=False)
            self._prev.pop(gone, None)

    def get(self, key: Tuple, inputs: Tuple, start: int, whole_parses: bool
            ) -> Optional[KernelOutput]:
        entry = self._items.get(key)
        if entry is None:
            return None
        if entry[0] != inputs:
            prev = self._prev.get(key)
            if prev is None or prev[0] != inputs:
                return None
            entry = prev
        if entry[4] not in (None, whole_parses):
            return None
        self._keep(key, entry)
        self.hits += 1
        _inputs, base, end, out, _parses = entry
        if base == start:
            return out
        if _names_a_line(out):
            # A text of it names a line (the Ascend preview's "(line N)"), which
            # moving its spans would leave stale: analysed again.
            self.hits -= 1
            return None
        delta = start - base
        krs, diags = out
        return ([shift(kr, delta, base, end) for kr in krs],
                [shift(d, delta, base, end) for d in diags])

    def put(self, key: Tuple, inputs: Tuple, start: int, end: int, out: KernelOutput,
            whole_parses: Optional[bool], unplaced: Any = None,
            places: Tuple[Place, ...] = ()) -> None:
        """``whole_parses``: whether the whole file parsed, for a result that
        depends on it (None: one that does not).  With ``unplaced`` (the
        inputs without the chunks' lines, :func:`unplace`) and ``places``,
        the result is also kept for :meth:`get_moved`, unless a text of it
        other than an instance label names a line."""
        self.misses += 1
        self._keep(key, (inputs, start, end, out, whole_parses))
        if unplaced is not None and not _names_a_line(out):
            mkey = (key, unplaced)
            self._moved[mkey] = (tuple(p.start for p in places), out, whole_parses)
            self._moved.move_to_end(mkey)
            if len(self._moved) > self.size:
                self._moved.popitem(last=False)

    def get_moved(self, key: Tuple, inputs: Tuple, start: int, end: int, unplaced: Any,
                  places: Tuple[Place, ...], kernel: Kernel, whole_parses: bool,
                  memo: Dict[int, Any]) -> Optional[KernelOutput]:
        """The result kept for the same inputs with the chunks elsewhere (an
        edit above them moved them): its spans moved as their chunks moved
        and the instance labels that name a call's line (``f(…) at line N``)
        renamed; None when there is none or a span or a label's line is in
        none of the kernel's input chunks.  The result reads the lines only
        through spans and those labels (its other texts name no line: see
        :meth:`put`), so this is what a fresh run gives.  A moved result is
        kept for ``inputs`` (at ``start``..``end``) too."""
        entry = self._moved.get((key, unplaced))
        if entry is None or entry[2] not in (None, whole_parses):
            return None
        starts, (krs, diags), _parses = entry
        moves = _moves(starts, places)
        self._moved.move_to_end((key, unplaced))
        if not any(m[2] for m in moves):  # the same places (kept under other inputs)
            self.moved_hits += 1
            self._keep(key, (inputs, start, end, (krs, diags), entry[2]))
            return [dataclasses.replace(kr, kernel=kernel) if kr.kernel is not kernel else kr
                    for kr in krs], diags
        memo[id(kernel)] = (kernel, kernel)
        try:
            new_krs = [dataclasses.replace(
                relocate(dataclasses.replace(kr, kernel=kernel), moves, True, memo),
                config_label=_relabel(kr.config_label, moves)) for kr in krs]
            new_diags = [dataclasses.replace(
                relocate(d, moves, True, memo),
                configs=tuple(_relabel(c, moves) for c in d.configs)) for d in diags]
        except Unmoved:
            return None
        self.moved_hits += 1
        out = (new_krs, new_diags)
        self._keep(key, (inputs, start, end, out, entry[2]))
        self._moved[(key, unplaced)] = (tuple(p.start for p in places), out, entry[2])
        return out


def _moves(starts: Sequence[int], places: Sequence[Place]) -> Moves:
    """Where the lines of each place were (``starts``) and are now."""
    return tuple(sorted({(old, old + p.text.count("\n") + 1, p.start - old)
                         for old, p in zip(starts, places, strict=True)}))


# An instance label naming its call (``values._label``); a label of bindings
# always holds "=", which a function name cannot.
_CALL_LABEL = re.compile(r"([^=]*)\(…\) at line (\d+)((?: #\d+)?)")


def _relabel(label: str, moves: Moves) -> str:
    m = _CALL_LABEL.fullmatch(label)
    if m is None:
        return label
    line = int(m.group(2))
    for lo, hi, delta in moves:
        if lo <= line < hi:
            return f"{m.group(1)}(…) at line {line + delta}{m.group(3)}" if delta else label
    raise Unmoved(line)


# Fields holding the frontend's model of the kernel (its texts come from the
# chunk's text alone, never from a line number).
_MODEL_FIELDS = frozenset({"kernel", "loop", "stmt", "excluded_binds"})


# A text naming a source line: "the call at line 12", the Ascend preview's
# "(line 12)".
_LINE_TEXT = re.compile(r"\blines? \d")


def _names_a_line(out: Any) -> bool:
    """Does a text of ``out`` other than an instance label and the kernel's
    model name a source line (:data:`_LINE_TEXT`)?"""
    stack: List[Any] = [out]
    seen: Set[int] = set()
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            if _LINE_TEXT.search(o):
                return True
            continue
        if isinstance(o, (tuple, list)):
            stack.extend(o)
            continue
        if not dataclasses.is_dataclass(o) or isinstance(o, type) or id(o) in seen:
            continue
        seen.add(id(o))
        for name in _fields(o):
            if name in _MODEL_FIELDS or (isinstance(o, KernelResult) and name == "config_label") \
                    or (isinstance(o, Diagnostic) and name == "configs"):
                continue
            stack.append(getattr(o, name))
    return False


class CoreCache:
    """Instance cores (``pipeline.instance_core``: planning, versions, packing,
    sync, the loop rules) kept across edits that move chunks without changing
    them.  A core is keyed by its kernel's inputs without the chunks' lines
    (:func:`unplace`) and the instance's index; it reads no call site's line
    (those show only in the labels and TL002 texts, which
    ``pipeline.analyze_kernel`` rebuilds), so a hit is the stored core with
    the spans of each chunk moved as that chunk moved.  A span in none of the
    kernel's input chunks makes the hit a miss."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: "OrderedDict[Tuple, Tuple[Tuple[int, ...], pipeline.InstanceCore]]" = \
            OrderedDict()
        self.hits = 0
        self.misses = 0

    def memo(self, key: Tuple, places: Tuple[Place, ...]) -> "_CoreMemo":
        return _CoreMemo(self, key, places)

    def get(self, key: Tuple, places: Tuple[Place, ...]) -> Optional[pipeline.InstanceCore]:
        entry = self._items.get(key)
        if entry is None:
            return None
        starts, core = entry
        moves = _moves(starts, places)
        if any(m[2] for m in moves):
            if _names_a_line(core):  # a text would keep the old line
                return None
            try:
                core = relocate(core, moves, True, {})
            except Unmoved:
                return None
        self._items.move_to_end(key)
        self.hits += 1
        return core

    def put(self, key: Tuple, places: Tuple[Place, ...], core: pipeline.InstanceCore) -> None:
        self.misses += 1
        self._items[key] = (tuple(p.start for p in places), core)
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)


class _CoreMemo:
    """``pipeline.InstanceMemo`` over a :class:`CoreCache` for one kernel.  A
    core computed while an Ascend schedule was left unsolved (``waiting``
    grew) is provisional and not kept."""

    def __init__(self, cache: CoreCache, key: Tuple, places: Tuple[Place, ...]) -> None:
        self.cache = cache
        self.key = key
        self.places = places
        self.waiting: Optional[List[Any]] = None

    def __call__(self, settings: Settings, n: int,
                 compute: Any) -> pipeline.InstanceCore:
        key = (self.key, settings, n)
        hit = self.cache.get(key, self.places)
        if hit is not None:
            return hit
        before = len(self.waiting) if self.waiting is not None else 0
        core: pipeline.InstanceCore = compute()
        if self.waiting is None or len(self.waiting) == before:
            self.cache.put(key, self.places, core)
        return core


# --------------------------------------------------------------------------
# The host and its snapshots
# --------------------------------------------------------------------------


# Words without which no line matches the expressions of
# ``frontend.find_aliases`` and ``pipeline.imported_names``.
# What frontend.find_aliases and pipeline.imported_names match always holds one
# of these words, or a line that begins ``from tilelang`` (_FROM_TILELANG); a
# chunk without any of them changes neither (see AnalysisHost._imports).
_IMPORT_WORDS = ("import", "is_npu", "npuir", "alloc_L", "alloc_ub", "alloc_UB")
_FROM_TILELANG = re.compile(r"^\s*from\s+tilelang\b", re.M)


def _holds_import_words(text: str) -> bool:
    return any(w in text for w in _IMPORT_WORDS) or bool(_FROM_TILELANG.search(text))


class _File:
    __slots__ = ("lines", "slots", "revision")

    def __init__(self, text: str) -> None:
        self.lines = split_lines(text)
        self.slots: List[Slot] = [Slot(0, len(self.lines))]
        self.revision = 0


class AnalysisHost:
    """Files' texts, changed by whole texts or range edits, and the caches
    every snapshot shares."""

    def __init__(self) -> None:
        prepare_relocation()
        self._files: Dict[str, _File] = {}
        self._lock = threading.Lock()
        self.parse = ParseCache()
        self.kernels = KernelCache()
        self.cores = CoreCache()
        self.scans = ScanCache()
        self.inputs = InputsCache()
        self._revision = 0
        # path → (its chunk texts, aliases, imported names), see ``_imports``.
        self._import_facts: Dict[str, Tuple[Counter, frontend.Aliases, Tuple]] = {}
        # path → {first line: chunk text} of its last module (what a chunk was
        # before an edit, see ParseCache.get).
        self._chunk_texts: Dict[str, Dict[int, str]] = {}

    # ---- changes ----------------------------------------------------------
    def set_text(self, path: str, text: str) -> None:
        with self._lock:
            f = self._files.get(path)
            if f is None:
                self._files[path] = f = _File(text)
            else:
                f.lines = split_lines(text)
                f.slots = [Slot(0, len(f.lines))]
            self._bump(f)

    def edit(self, path: str, start: Tuple[int, int], end: Tuple[int, int], text: str) -> None:
        """Replace the range ``start``..``end`` ((0-based line, code-point
        column), end exclusive; positions past the end are clamped) by ``text``."""
        with self._lock:
            f = self._files.get(path)
            if f is None:
                self._files[path] = f = _File("")
            new, sl, el, delta = splice(f.lines, start, end, text)
            f.lines = new
            f.slots = _mark(f.slots, len(new), sl, el, delta)
            self._bump(f)

    def remove(self, path: str) -> None:
        with self._lock:
            self._files.pop(path, None)
        self._import_facts.pop(path, None)
        self._chunk_texts.pop(path, None)

    def _bump(self, f: _File) -> None:
        self._revision += 1
        f.revision = self._revision

    # ---- reading ----------------------------------------------------------
    def lines(self, path: str) -> List[str]:
        """The current lines (a copy)."""
        with self._lock:
            f = self._files.get(path)
            return list(f.lines) if f is not None else [""]

    def line(self, path: str, n: int) -> str:
        f = self._files.get(path)
        if f is None or not 0 <= n < len(f.lines):
            return ""
        return f.lines[n]

    def snapshot(self) -> "Snapshot":
        with self._lock:
            files = {p: (tuple(f.lines), tuple(s.copy() for s in f.slots), f.revision)
                     for p, f in self._files.items()}
        return Snapshot(self, files)

    def _imports(self, path: str, lines: Sequence[str], slots: Sequence[Slot], text: str
                 ) -> Tuple[frontend.Aliases, Tuple[Tuple[str, Tuple[str, bool]], ...]]:
        """The file's import aliases and imported names.  Both are read from
        import lines by regular expressions over the whole text; they are
        reused when every chunk that changed since the last time (old text and
        new) holds none of the words those expressions need."""
        texts = Counter("".join(lines[sl.start:sl.end]) for sl in slots)
        prev = self._import_facts.get(path)
        if prev is not None:
            gone, new = prev[0] - texts, texts - prev[0]
            if not any(_holds_import_words(t) for t in (*gone, *new)):
                self._import_facts[path] = (texts, prev[1], prev[2])
                return prev[1], prev[2]
        aliases = frontend.find_aliases(text)
        imports = tuple(sorted(pipeline.imported_names(text).items()))
        self._import_facts[path] = (texts, aliases, imports)
        return aliases, imports

    def _store_slots(self, path: str, revision: int, slots: List[Slot]) -> None:
        with self._lock:
            f = self._files.get(path)
            if f is not None and f.revision == revision:
                f.slots = [s.copy() for s in slots]


class Snapshot:
    """The texts of a host's files at one moment; never changes."""

    def __init__(self, host: AnalysisHost, files: Dict[str, Tuple[Tuple[str, ...],
                                                                 Tuple[Slot, ...], int]]) -> None:
        self._host = host
        self._files = files
        self._modules: Dict[str, Tuple[Module, Optional[_Index]]] = {}
        # Ascend loop schedules the last analyses with ``defer_solving`` left
        # to be solved (their kernels' results are provisional and not cached).
        self.pending: List[Any] = []
        # What this snapshot moved: id → (value, its moved copy), see relocate.
        self._moved_nodes: Dict[int, Tuple[Any, Any]] = {}

    def paths(self) -> List[str]:
        return list(self._files)

    def lines(self, path: str) -> Tuple[str, ...]:
        hit = self._files.get(path)
        return hit[0] if hit is not None else ("",)

    def text(self, path: str) -> str:
        return "".join(self.lines(path))

    def revision(self, path: str) -> int:
        hit = self._files.get(path)
        return hit[2] if hit is not None else -1

    def module(self, path: str) -> Module:
        return self._module(path)[0]

    def chunk_starts(self, path: str) -> List[int]:
        """The 0-based first lines of the top-level chunks the file is cut
        into (``frontend.split_chunks`` of its text gives the same)."""
        index = self._module(path)[1]
        if index is None:  # a file too large to analyse: one piece
            return [0]
        return [start - 1 for _text, start, _model in index.chunks]

    def _module(self, path: str) -> Tuple[Module, Optional[_Index]]:
        hit = self._modules.get(path)
        if hit is not None:
            return hit
        lines, slots0, revision = self._files.get(path) or (("",), (), -1)
        text = "".join(lines)
        if frontend.too_large(text) is not None:
            out: Tuple[Module, Optional[_Index]] = (frontend.parse_module(text), None)
            self._modules[path] = out
            return out
        whole = [Slot(0, len(lines))]
        slots = resplit(lines, [s.copy() for s in slots0] or whole)
        aliases, imports = self._host._imports(path, lines, slots, text)
        before = self._host._chunk_texts.get(path, {})
        chunks = self._chunks(lines, slots, aliases, before)
        if len(slots0) > 1 and any(p.code == "TL001" for c in chunks for p in c[2].problems):
            # While the file does not parse, where its statements end depends on
            # the whole file (the tokenizer's view of it): split it as a whole,
            # as ``frontend.parse_module`` does; the chunks that did not change
            # still come from the cache.
            slots = resplit(lines, whole) if _ODD_BREAKS.search(text) else \
                split_broken(lines, slots, self._host.scans)
            chunks = self._chunks(lines, slots, aliases, before)
        self._host._chunk_texts[path] = {start: chunk for chunk, start, _cm in chunks}
        self._host._store_slots(path, revision, slots)
        try:
            module = frontend.combine([c[2] for c in chunks], aliases)
        except Exception:  # pragma: no cover - defensive
            module = frontend.parse_module(text)
            out = (module, None)
        else:
            index = _build_index(chunks, imports)
            index.aliases = aliases
            index.parse_cache = self._host.parse
            out = (module, index)
        self._modules[path] = out
        return out

    def _chunks(self, lines: Sequence[str], slots: Sequence[Slot], aliases: frontend.Aliases,
                before: Dict[int, str]) -> List[Tuple[str, int, frontend.ChunkModel]]:
        out = []
        for slot in slots:
            chunk_text = "".join(lines[slot.start:slot.end])
            out.append((chunk_text, slot.start + 1,
                        self._host.parse.get(chunk_text, slot.start + 1, aliases,
                                             self._moved_nodes, before.get(slot.start + 1))))
        return out

    def analysis(self, path: str, settings: Optional[Settings] = None,
                 selection: Tuple[Tuple[str, str], ...] = (),
                 defer_solving: bool = False, report_as: Optional[str] = None) -> Analysis:
        """What ``pipeline.analyze(text, path, settings, selection=selection)``
        returns for this snapshot's text of ``path`` (named ``report_as`` in
        the result when given).  With ``defer_solving`` an Ascend schedule
        that is not solved yet is left to the caller (``self.pending``,
        ``schedule_ascend.solve``) and the kernel shows its predicted order
        meanwhile."""
        settings = settings or Settings()
        text = self.text(path)
        name = path if report_as is None else report_as
        module, index = self._module(path)
        if index is None:
            return pipeline.analyze_module(module, text, name, settings, selection)
        lines = self.lines(path)
        aliases_key = index.aliases
        # module.kernels are the chunks' kernels in order: (chunk, index in it)
        spots = [(ci, ki) for ci, (_t, _s, cm) in enumerate(index.chunks)
                 for ki in range(len(cm.kernels))]
        counter = [0]
        cache = self._host.kernels
        pending = self.pending

        def run(module_: Module, kernel: Kernel, target: str, settings_: Settings,
                source: Optional[str], select: Optional[str]) -> KernelOutput:
            n = counter[0]
            counter[0] = n + 1
            ci, ki = spots[n] if n < len(spots) else (-1, -1)
            if ci < 0:  # pragma: no cover - every kernel comes from a chunk
                return _run(module_, kernel, target, settings_, source, select, defer_solving,
                            pending)
            chunk_text, start, _cm = index.chunks[ci]
            key = (chunk_text, ki, aliases_key)
            inputs = (self._host.inputs.get(key, index, ci, kernel),
                      _lines_above(lines, start - 1), target, settings_, select)
            hit = cache.get(key, inputs, start, index.whole_parses)
            if hit is not None:
                krs, diags = hit
                return [dataclasses.replace(kr, kernel=kernel) if kr.kernel is not kernel
                        else kr for kr in krs], diags
            unplaced, places = unplace(inputs, Place(chunk_text, start))
            end = start + chunk_text.count("\n") + 1
            moved = cache.get_moved(key, inputs, start, end, unplaced, places, kernel,
                                    index.whole_parses, self._moved_nodes)
            if moved is not None:
                return moved
            before = len(pending)
            memo = self._host.cores.memo((key, unplaced), places)
            out = _run(module_, kernel, target, settings_, source, select, defer_solving,
                       pending, memo)
            if len(pending) == before:
                # Tracing an unknown value reads the functions of the whole file
                # with CPython's parser (``pipeline._source_facts``), which gives
                # nothing while any part of the file does not parse.
                traced = any(kr.unresolved for kr in out[0])
                cache.put(key, inputs, start, end, out,
                          index.whole_parses if traced else None, unplaced, places)
            return out

        return pipeline.analyze_module(module, text, name, settings, selection, run=run)


def _run(module: Module, kernel: Kernel, target: str, settings: Settings, source: Optional[str],
         select: Optional[str], defer: bool, pending: List[Any],
         memo: Optional[_CoreMemo] = None) -> KernelOutput:
    if not defer:
        return pipeline.run_kernel(module, kernel, target, settings, source, select, memo)
    with schedule_ascend.deferred_solving() as waiting:
        if memo is not None:
            memo.waiting = waiting
        out = pipeline.run_kernel(module, kernel, target, settings, source, select, memo)
    for p in waiting:
        if p not in pending:
            pending.append(p)
    return out


def analyze_text(text: str, path: str = "<stdin>", settings: Optional[Settings] = None,
                 selection: Tuple[Tuple[str, str], ...] = (),
                 host: Optional[AnalysisHost] = None) -> Analysis:
    """One file's analysis through a host (a fresh one unless given): the
    file is set to ``text`` and analysed, sharing the host's caches."""
    host = host or AnalysisHost()
    host.set_text(path, text)
    return host.snapshot().analysis(path, settings, selection)

