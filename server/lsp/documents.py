"""Open documents: text kept as lines, incremental sync, per-chunk reparse,
per-kernel result caching and coalesced background analysis.

How an edit flows:

1. ``Document.apply_change`` (on the event loop, microseconds) splices the
   edit into the line list, merges the top-level chunks the edit touched into
   one *dirty* slot and shifts the slots after it.
2. ``DocumentStore.request`` starts an analysis at once when none is running
   for the document; when one is running it only records that a newer version
   exists.  The running analysis, when it finishes, notices it has been
   superseded, drops its result and analyses the latest text: so edits that
   arrive during an analysis are coalesced and only the newest version is
   ever published.  There is no fixed delay.
3. The analysis runs in a worker thread (``compute``): only dirty slots are
   re-split into top-level statements; every chunk's model comes from a cache
   keyed by its text (shifted when only its line moved), so an edit inside one
   kernel re-parses that kernel only.  Kernel results are cached too, keyed by
   the kernel model and the module context it reads, so only the edited
   kernel is re-analysed.
4. While a chunk does not parse, its last good model still provides the
   module-level names, call sites and macros the other kernels depend on, so
   their results do not change; the broken chunk contributes its TL001.
5. An Ascend loop whose auto-schedule is not solved yet (a Z3 run, seconds
   for a large loop) is not solved on the analysis thread: the result shows
   the predicted order, is not cached, and the schedule is solved on a
   background thread; the document is then analysed again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import threading
from collections import OrderedDict
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import convert
from .lazy import frontend, model, pipeline, schedule_ascend, targets as targets_mod
from .settings import selected_label as _selected_label

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.model import Analysis, Module, Settings

log = logging.getLogger(__name__)

_EOL = re.compile(r"\r\n|\r|\n")
# Characters Python's str.splitlines() treats as line breaks but LSP and the
# tokenizer do not; a region holding one is not split further.
_ODD_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def split_lines(text: str) -> List[str]:
    """LSP lines with their terminators; the last entry never has one (it may be "")."""
    out: List[str] = []
    pos = 0
    for m in _EOL.finditer(text):
        out.append(text[pos:m.end()])
        pos = m.end()
    out.append(text[pos:])
    return out


# --------------------------------------------------------------------------
# Chunk slots
# --------------------------------------------------------------------------


class Slot:
    """A run of lines ``[start, end)`` (0-based) holding one top-level statement."""

    __slots__ = ("start", "end", "dirty", "good")

    def __init__(self, start: int, end: int, dirty: bool = True,
                 good: Optional[frontend.ChunkModel] = None) -> None:
        self.start = start
        self.end = end
        self.dirty = dirty
        self.good = good  # the last model of this chunk that parsed

    def copy(self) -> "Slot":
        return Slot(self.start, self.end, self.dirty, self.good)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Slot({self.start}, {self.end}, dirty={self.dirty})"


# --------------------------------------------------------------------------
# Caches (used from the single analysis worker thread only)
# --------------------------------------------------------------------------


def _shift(obj: Any, delta: int, memo: Dict[int, Any]) -> Any:
    """A copy of a frozen model value with every Span moved down ``delta`` lines."""
    Span = model.Span
    if isinstance(obj, Span):
        return Span(obj.line + delta, obj.col, obj.end_line + delta, obj.end_col)
    if isinstance(obj, tuple):
        if not obj:
            return obj
        new = tuple(_shift(x, delta, memo) for x in obj)
        return new
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        key = id(obj)
        hit = memo.get(key)
        if hit is not None:
            return hit
        fields = _FIELDS.get(type(obj))
        if fields is None:
            fields = tuple(f.name for f in dataclasses.fields(obj))
            _FIELDS[type(obj)] = fields
        changes = {}
        for name in fields:
            val = getattr(obj, name)
            if isinstance(val, (Span, tuple)) or (
                    dataclasses.is_dataclass(val) and not isinstance(val, type)):
                new = _shift(val, delta, memo)
                if new is not val:
                    changes[name] = new
        out = dataclasses.replace(obj, **changes) if changes else obj
        memo[key] = out
        return out
    return obj


_FIELDS: Dict[type, Tuple[str, ...]] = {}


# libcst's native parser overflows the C stack (the process dies) on about
# 1,500 nested brackets; real code stays far below this.
MAX_BRACKET_DEPTH = 200


def _too_deep(text: str) -> Optional[int]:
    """The 0-based line inside ``text`` where bracket nesting passes the limit."""
    opens = text.count("(") + text.count("[") + text.count("{")
    if opens <= MAX_BRACKET_DEPTH:
        return None
    depth = 0
    line = 0
    quote = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
        if quote is not None:
            if ch == "\\":
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ch == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif ch in "'\"":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        elif ch in "([{":
            depth += 1
            if depth > MAX_BRACKET_DEPTH:
                return line
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


class ParseCache:
    """Chunk text → chunk model, independent of where the chunk sits."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: "OrderedDict[Tuple[str, frontend.Aliases], Tuple[int, frontend.ChunkModel]]" = \
            OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, text: str, start_line: int, aliases: frontend.Aliases) -> frontend.ChunkModel:
        key = (text, aliases)
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            base, cached = hit
            self.hits += 1
            if base == start_line:
                return cached
            shifted = _shift(cached, start_line - base, {})
            self._items[key] = (start_line, shifted)
            return shifted
        self.misses += 1
        deep = _too_deep(text)
        if deep is not None:
            model_ = frontend.ChunkModel(problems=(model.Diagnostic(
                code="TL001", severity="error",
                span=model.Span(start_line + deep, 0, start_line + deep, 1),
                message=f"this statement nests brackets more than {MAX_BRACKET_DEPTH} deep; "
                        f"tilelint does not parse it"),))
            self._items[key] = (start_line, model_)
            return model_
        try:
            model_ = frontend.parse_chunk(text, start_line, aliases)
        except Exception as exc:  # a frontend bug must not take the editor down
            log.exception("parsing the chunk at line %d failed", start_line)
            first = text.split("\n", 1)[0]
            return frontend.ChunkModel(problems=(model.Diagnostic(
                code="TL000", severity="error",
                span=model.Span(start_line, 0, start_line, len(first.rstrip("\r"))),
                message=f"tilelint internal error while reading this statement: "
                        f"{type(exc).__name__}: {exc}. Please report this."),))
        self._items[key] = (start_line, model_)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return model_


class KernelCache:
    """Results of ``pipeline.analyze_kernel`` keyed by the kernel model and the
    module context it reads (constants, call sites, functions, macros), the
    target and the settings."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: "OrderedDict[int, Tuple[Any, Any, Any]]" = OrderedDict()
        self.hits = 0
        self.misses = 0
        # Ascend loop schedules the last analyses left to be solved (their
        # results are provisional and not cached); drained by ``compute``.
        self.pending: List[Any] = []

    def run(self, module: Module, kernel, target: str, settings: Settings, source: str = "",
            select: Optional[str] = None):
        ctx = (module.constants, module.call_sites, module.functions, module.macros,
               module.defs, module.argparse, module.toplevel,
               module.imports_tilelang, target, settings, select)
        entry = self._items.get(id(kernel))
        if entry is not None and entry[0] is kernel and entry[1] == ctx:
            self._items.move_to_end(id(kernel))
            self.hits += 1
            return entry[2]
        self.misses += 1
        pending: List[Any] = []
        try:
            # The source only serves fixes built from the kernel's own text, which
            # is the same whenever the kernel model is (same chunk, same place).
            # An Ascend loop schedule that is not solved yet is not solved here
            # (it can take seconds): the result is provisional until it is.
            with schedule_ascend.deferred_solving() as pending:
                if select is not None and not settings.all_bindings:
                    out = _analyze_selected(module, kernel, target, settings, source, select)
                else:
                    out = pipeline.analyze_kernel(module, kernel, target, settings, source)
        except Exception as exc:  # a bug of the analysis must not take the editor down
            log.exception("analysis of kernel %s failed", kernel.name)
            out = ([model.KernelResult(kernel=kernel)], [model.Diagnostic(
                code="TL000", severity="error", span=kernel.name_span, kernel=kernel.name,
                message=f"tilelint internal error while analysing `{kernel.name}`: "
                        f"{type(exc).__name__}: {exc}. Please report this.")])
        if pending:
            self.pending.extend(p for p in pending if p not in self.pending)
            self._items.pop(id(kernel), None)
            return out
        # The entry keeps ``kernel`` alive, so its id cannot be reused while cached.
        self._items[id(kernel)] = (kernel, ctx, out)
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return out


def _analyze_selected(module: Module, kernel, target: str, settings: Settings, source: str,
                      select: str):
    """The results of the instance labelled ``select`` (the ``binding``
    setting).  Every instance is analysed and the one asked for is kept, with
    the diagnostics that hold for it; a label the kernel does not have gives
    the default instance."""
    from tilelint.analysis import values
    overrides = pipeline.kernel_overrides(kernel, settings)
    try:
        labels = values.instance_labels(module, kernel, overrides)
    except Exception:  # pragma: no cover - the resolver never raises on bad code
        labels = []
    if select not in labels[1:]:  # the default one, or a label it does not have
        return pipeline.analyze_kernel(module, kernel, target, settings, source)
    krs, diags = pipeline.analyze_kernel(
        module, kernel, target, dataclasses.replace(settings, all_bindings=True), source)
    hit = [kr for kr in krs if kr.config_label == select]
    if not hit:  # pragma: no cover - labels and results come from the same instances
        return pipeline.analyze_kernel(module, kernel, target, settings, source)
    kept = []
    for d in diags:
        if d.configs and select not in d.configs:
            continue
        kept.append(dataclasses.replace(d, configs=()) if d.configs else d)
    return hit[:1], kept


class Caches:
    def __init__(self) -> None:
        self.parse = ParseCache()
        self.kernels = KernelCache()


# --------------------------------------------------------------------------
# The analysis of one snapshot (worker thread)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Snapshot:
    uri: str
    path: str
    version: int
    generation: int
    lines: List[str]
    slots: List[Slot]


@dataclasses.dataclass
class Computed:
    version: int
    generation: int
    lines: List[str]
    slots: List[Slot]
    analysis: Analysis
    # Ascend schedules this result is provisional on (solve, then analyse again).
    pending: Tuple[Any, ...] = ()


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
        start, end, good = slot.start, slot.end, slot.good
        # A region whose first line is indented continues the statement before it.
        while out and _starts_indented(lines, start):
            prev = out.pop()
            start = prev.start
        # Absorb following slots while the region's end would glue onto them.
        while i + 1 < n and (_region_needs_next(lines, start, end)
                             or _starts_indented(lines, end)):
            i += 1
            end = slots[i].end
        i += 1
        text = "".join(lines[start:end])
        if not text:
            out.append(Slot(start, end, False, good))
            continue
        if _ODD_BREAKS.search(text):
            out.append(Slot(start, end, False, good))
            continue
        chunks = frontend.split_chunks(text)
        pieces: List[Slot] = []
        for c in chunks:
            s = start + c.start_line - 1
            if pieces:
                pieces[-1].end = s
            pieces.append(Slot(s, end, False, None))
        if not pieces:
            pieces = [Slot(start, end, False, None)]
        pieces[0].start = start
        # The edited statement is the region's first one; its last good model
        # stands in for it while it does not parse.
        pieces[0].good = good
        out.extend(p for p in pieces if p.end > p.start)
    return out


def _is_broken(model: frontend.ChunkModel) -> bool:
    return any(p.code == "TL001" for p in model.problems) and not model.kernels \
        and not model.functions and not model.constants


def compute(snap: Snapshot, settings: Settings, caches: Caches,
            selection: Tuple[Tuple[str, str], ...] = ()) -> Computed:
    lines = snap.lines
    slots = resplit(lines, snap.slots)
    text = "".join(lines)
    big = frontend.too_large(text)
    if big is not None:
        return Computed(snap.version, snap.generation, lines, slots, model.Analysis(
            path=snap.path, target=targets_mod.normalise(settings.target),
            diagnostics=(big,)))
    aliases = frontend.find_aliases(text)
    models: List[frontend.ChunkModel] = []
    for slot in slots:
        chunk_text = "".join(lines[slot.start:slot.end])
        cm = caches.parse.get(chunk_text, slot.start + 1, aliases)
        if _is_broken(cm):
            if slot.good is not None:
                # Keep what the other kernels read from this statement; its own
                # kernels are dropped (their positions no longer mean anything).
                g = slot.good
                cm = dataclasses.replace(
                    cm, constants=g.constants, call_sites=g.call_sites,
                    functions=g.functions, macros=g.macros, defs=g.defs,
                    argparse=g.argparse, toplevel=g.toplevel, iter_helpers=g.iter_helpers)
        else:
            slot.good = cm
        models.append(cm)
    try:
        module = frontend.combine(models, aliases)
    except Exception:  # pragma: no cover - defensive
        log.exception("combining chunk models failed")
        module = frontend.parse_module(text)
    analysis = analyze_module(text, snap.path, settings, module, caches, selection)
    pending = tuple(caches.kernels.pending)
    caches.kernels.pending.clear()
    return Computed(snap.version, snap.generation, lines, slots, analysis, pending)


def analyze_module(source: str, path: str, settings: Settings, module: Module,
                   caches: Caches, selection: Tuple[Tuple[str, str], ...] = ()) -> Analysis:
    """``pipeline.analyze`` with kernel results cached across edits."""
    target = targets_mod.normalise(settings.target)
    diags: list = list(module.problems)
    results: list = []
    for kernel in module.kernels:
        select = _selected_label(selection, kernel.name, kernel.factory) if selection else None
        krs, kdiags = caches.kernels.run(module, kernel, target, settings, source, select)
        results.extend(krs)
        diags.extend(kdiags)
    diags = pipeline.filter_diagnostics(diags, source, settings)
    return model.Analysis(path=path, target=target, kernels=tuple(results),
                    diagnostics=tuple(diags), module=module)


def analyze_text(text: str, path: str, settings: Settings, caches: Caches,
                 selection: Tuple[Tuple[str, str], ...] = ()) -> Tuple[List[str], Analysis]:
    """One-shot analysis of a file that is not open (workspace diagnostics)."""
    lines = split_lines(text)
    snap = Snapshot("", path, 0, 0, lines, [Slot(0, len(lines))])
    return lines, compute(snap, settings, caches, selection).analysis


# --------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------


class Document:
    def __init__(self, uri: str, path: str, text: str, version: int,
                 language_id: str = "python") -> None:
        self.uri = uri
        self.path = path
        self.language_id = language_id
        self.version = version
        self.lines = split_lines(text)
        self.slots: List[Slot] = [Slot(0, len(self.lines))]
        self.generation = 0  # bumped by every edit and every re-analysis request
        self.closed = False
        # The newest committed analysis and the text it was computed from.
        self.analysis: Optional[Analysis] = None
        self.analysis_version: Optional[int] = None
        self.analysis_generation = -1
        self.analysis_lines: List[str] = []
        self.lsp_diagnostics: list = []
        self.result_id: Optional[str] = None
        self._result_key: Optional[tuple] = None
        self._result_counter = 0
        self.task: Optional[asyncio.Task] = None
        # The last compiler verification (``compiler.verify = "onSave"``): it
        # applies while the text is the one that was saved and verified.
        self.verified: Optional[Any] = None

    @property
    def text(self) -> str:
        return "".join(self.lines)

    # ---- sync -----------------------------------------------------------
    def apply_change(self, change: Any, encoding: str) -> None:
        rng = getattr(change, "range", None)
        if rng is None:
            self.lines = split_lines(change.text)
            self.slots = [Slot(0, len(self.lines))]
            return
        lines = self.lines
        last = len(lines) - 1
        sl, el = rng.start.line, rng.end.line
        if (el, rng.end.character) < (sl, rng.start.character):
            sl, el = el, sl
            start_pos, end_pos = rng.end, rng.start
        else:
            start_pos, end_pos = rng.start, rng.end
        if sl > last:
            sl, sc = last, len(convert.strip_eol(lines[last]))
        else:
            sc = convert.from_units(lines[sl], start_pos.character, encoding)
        if el > last:
            el, ec = last, len(convert.strip_eol(lines[last]))
        else:
            ec = convert.from_units(lines[el], end_pos.character, encoding)
        head = lines[sl][:sc]
        tail = lines[el][ec:]
        if ec > len(convert.strip_eol(lines[el])):  # pragma: no cover - clamped above
            tail = lines[el][len(convert.strip_eol(lines[el])):]
        block = split_lines(head + change.text + tail)
        if el < last and block[-1] == "":
            # The block ended with the line's own terminator: no extra line.
            block.pop()
        self.lines = lines[:sl] + block + lines[el + 1:]
        if not self.lines:
            self.lines = [""]
        if self.lines[-1].endswith(("\n", "\r")):
            self.lines.append("")
        delta = len(block) - (el - sl + 1)
        self._mark(sl, el, delta)

    def _mark(self, sl: int, el: int, delta: int) -> None:
        slots = self.slots
        if not slots:
            self.slots = [Slot(0, len(self.lines))]
            return
        i0 = _find(slots, sl)
        i1 = _find(slots, el)
        orig = _find(slots, sl)
        good = slots[orig].good if orig == i1 else None
        merged = Slot(slots[i0].start, slots[i1].end + delta, True, good)
        rest = []
        for s in slots[i1 + 1:]:
            if delta:
                s = Slot(s.start + delta, s.end + delta, s.dirty, s.good)
            rest.append(s)
        new = slots[:i0] + [merged] + rest
        # Keep the slots covering every line.
        if new[-1].end != len(self.lines):
            new[-1] = Slot(new[-1].start, len(self.lines), True, new[-1].good)
        self.slots = [s for s in new if s.end > s.start] or [Slot(0, len(self.lines))]

    def snapshot(self) -> Snapshot:
        return Snapshot(self.uri, self.path, self.version, self.generation, list(self.lines),
                        [s.copy() for s in self.slots])

    def commit(self, result: Computed, lsp_diags: list) -> None:
        self.slots = result.slots
        self.analysis = result.analysis
        self.analysis_version = result.version
        self.analysis_generation = result.generation
        self.analysis_lines = result.lines
        key = tuple(_diag_key(d) for d in lsp_diags)
        if key != self._result_key or self.result_id is None:
            self._result_counter += 1
            self.result_id = f"{self._result_counter}"
            self._result_key = key
        self.lsp_diagnostics = lsp_diags


def verified_diagnostics(doc: Document, lines: Sequence[str]) -> tuple:
    """The compiler's TL910/TL911 of the last verification, when ``lines`` is
    the text it verified (after an edit their positions mean nothing)."""
    v = doc.verified
    if v is None or not v.diagnostics:
        return ()
    if len(lines) != v.line_count or "".join(lines) != v.source:
        return ()
    return tuple(v.diagnostics)


def _diag_key(d) -> tuple:
    r = d.range
    return (r.start.line, r.start.character, r.end.line, r.end.character, d.code, d.message,
            d.severity, repr(d.data))


def _find(slots: Sequence[Slot], line: int) -> int:
    lo, hi = 0, len(slots) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if slots[mid].start <= line:
            lo = mid
        else:
            hi = mid - 1
    return lo


# --------------------------------------------------------------------------
# The store and its scheduler
# --------------------------------------------------------------------------


class DocumentStore:
    """Open documents and their background analyses.

    ``settings_for(doc)`` gives the settings for a document; ``on_result(doc)``
    is called on the event loop after a new analysis was committed.
    """

    def __init__(self, executor: Executor, settings_for: Callable[[Document], Settings],
                 on_result: Callable[[Document], Any], encoding: Callable[[], str],
                 selection_for: Optional[Callable[[Document], Tuple[Tuple[str, str], ...]]] = None,
                 excluded: Optional[Callable[[Any], bool]] = None) -> None:
        self.executor = executor
        self.settings_for = settings_for
        self.selection_for = selection_for or (lambda doc: ())
        # A document the configuration's ``exclude`` covers gets an empty analysis.
        self.excluded = excluded or (lambda doc: False)
        self.on_result = on_result
        self.encoding = encoding
        self.caches = Caches()
        self.docs: Dict[str, Document] = {}
        # Ascend loop schedules to solve: the newest list per document (a stale
        # one is replaced, never solved), worked off by one background thread.
        self._solve_queue: "OrderedDict[str, Tuple[Any, ...]]" = OrderedDict()
        self._solve_cv = threading.Condition()
        self._solver: Optional[threading.Thread] = None

    def get(self, uri: str) -> Optional[Document]:
        return self.docs.get(uri)

    def open(self, uri: str, path: str, text: str, version: int,
             language_id: str = "python") -> Document:
        old = self.docs.get(uri)
        if old is not None:
            old.closed = True
        doc = Document(uri, path, text, version, language_id)
        self.docs[uri] = doc
        self.request(doc)
        return doc

    def close(self, uri: str) -> Optional[Document]:
        doc = self.docs.pop(uri, None)
        if doc is not None:
            doc.closed = True
        return doc

    def request(self, doc: Document) -> None:
        """Analyse the document's current state as soon as possible."""
        doc.generation += 1
        if doc.task is None or doc.task.done():
            doc.task = asyncio.get_running_loop().create_task(self._run(doc))

    def request_all(self) -> None:
        for doc in list(self.docs.values()):
            self.request(doc)

    async def _run(self, doc: Document) -> None:
        loop = asyncio.get_running_loop()
        while not doc.closed:
            snap = doc.snapshot()
            settings = self.settings_for(doc)
            selection = self.selection_for(doc)
            try:
                if self.excluded(doc):
                    result = Computed(snap.version, snap.generation, snap.lines,
                                      resplit(snap.lines, snap.slots),
                                      model.Analysis(path=snap.path, target=settings.target))
                else:
                    result = await loop.run_in_executor(
                        self.executor, compute, snap, settings, self.caches, selection)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("analysis of %s failed", doc.uri)
                result = None
            if doc.closed:
                return
            if doc.generation != snap.generation:
                continue  # superseded while running: drop it, analyse the latest
            if result is not None:
                lsp_diags = convert.diagnostics(
                    tuple(result.analysis.diagnostics) + verified_diagnostics(doc, result.lines),
                    doc.uri, result.lines, self.encoding(), result.version)
                doc.commit(result, lsp_diags)
                try:
                    self.on_result(doc)
                except Exception:
                    log.exception("publishing results for %s failed", doc.uri)
                if result.pending:
                    self._solve_later(doc, result.pending)
            else:
                doc.analysis_generation = snap.generation
            return

    def _solve_later(self, doc: Document, pending: Sequence[Any]) -> None:
        """Solve Ascend loop schedules on a background thread (seconds for a
        large loop) and analyse the document again when they are solved;
        meanwhile it shows the predicted order."""
        loop = asyncio.get_running_loop()
        with self._solve_cv:
            self._solve_queue[doc.uri] = tuple(pending)
            self._solve_queue.move_to_end(doc.uri)
            self._solve_cv.notify()
        if self._solver is None:
            # A daemon thread: a solve in flight never holds up the server's exit.
            self._solver = threading.Thread(target=self._solver_main, args=(loop,),
                                            name="tilelint-ascend-solver", daemon=True)
            self._solver.start()

    def _solver_main(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            with self._solve_cv:
                while not self._solve_queue:
                    self._solve_cv.wait()
                uri, inputs = self._solve_queue.popitem(last=False)
            ok = True
            for inp in inputs:
                try:
                    schedule_ascend.solve(inp)
                except Exception:  # pragma: no cover - reported, never raised
                    log.exception("solving an Ascend loop schedule failed")
                    ok = False
            try:
                loop.call_soon_threadsafe(self._solved, uri, ok)
            except RuntimeError:  # the event loop is gone (shutdown)
                return

    def _solved(self, uri: str, ok: bool) -> None:
        doc = self.docs.get(uri)
        if ok and doc is not None and not doc.closed:
            self.request(doc)

    def republish(self, doc: Document) -> bool:
        """Re-convert the committed analysis (plus the compiler's findings when
        they apply to its text) and publish; False when nothing is committed."""
        if doc.closed or doc.analysis is None:
            return False
        lsp_diags = convert.diagnostics(
            tuple(doc.analysis.diagnostics) + verified_diagnostics(doc, doc.analysis_lines),
            doc.uri, doc.analysis_lines, self.encoding(), doc.analysis_version)
        doc.commit(Computed(doc.analysis_version, doc.analysis_generation, doc.analysis_lines,
                            doc.slots, doc.analysis), lsp_diags)
        try:
            self.on_result(doc)
        except Exception:
            log.exception("publishing results for %s failed", doc.uri)
        return True

    async def current(self, doc: Document) -> Document:
        """Wait until the document's newest state has been analysed."""
        while not doc.closed and doc.analysis_generation != doc.generation:
            task = doc.task
            if task is None or task.done():
                self.request(doc)
                task = doc.task
            await asyncio.shield(task)  # type: ignore[arg-type]
        return doc

    def analyse_file(self, text: str, path: str, settings: Settings, selection=()):
        """Blocking: a one-shot analysis (run through the executor)."""
        if self.excluded(path):
            return split_lines(text), model.Analysis(path=path, target=settings.target)
        return analyze_text(text, path, settings, self.caches, selection)
