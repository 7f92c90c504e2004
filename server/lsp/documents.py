"""Open documents: LSP text synchronisation and the scheduling of their analyses.

The analysis itself, and everything incremental about it, is the analysis
host's (``tilelint.analysis.host``): this module keeps each document's text
for the protocol (positions, code actions), hands its edits to the host and
decides when to analyse.

How an edit flows:

1. ``Document.apply_change`` (on the event loop, microseconds) splices the
   edit into the document's lines and queues it, in code points, for the host.
2. ``DocumentStore.request`` starts an analysis at once when none is running
   for the document; when one is running it only records that a newer version
   exists.  The running analysis, when it finishes, notices it has been
   superseded, drops its result and analyses the latest text: so edits that
   arrive during an analysis are coalesced and only the newest version is
   ever published.  There is no fixed delay.
3. The analysis runs in the worker thread (``compute``): the queued edits go
   to the host, which re-parses only the chunks they touched and re-analyses
   only the kernels whose inputs changed, and the snapshot's analysis is what
   ``analyze`` would return for the same text.
4. An Ascend loop whose auto-schedule is not solved yet (a Z3 run, seconds
   for a large loop) is not solved on the analysis thread: the result shows
   the predicted order, is not cached, and the schedule is solved on a
   background thread; the document is then analysed again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from tilelint.analysis.text import splice, split_lines

from . import convert
from .lazy import model, schedule_ascend

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.host import AnalysisHost
    from tilelint.analysis.model import Analysis, Settings

log = logging.getLogger(__name__)

# A document's queue of edits for the host is replaced by its whole text past this.
_MAX_QUEUED = 512


class Caches:
    """The store's analysis host, built on first use (so that the analysis is
    imported after ``initialize`` was answered).  Used from the analysis
    worker thread only."""

    def __init__(self) -> None:
        self._host: Optional[AnalysisHost] = None

    @property
    def host(self) -> AnalysisHost:
        if self._host is None:
            from tilelint.analysis.host import AnalysisHost
            self._host = AnalysisHost()
        return self._host

    def forget(self, key: str) -> None:
        if self._host is not None:
            self._host.remove(key)


# The host key of one-shot analyses (workspace diagnostics, the what-if table).
_ONE_SHOT = "\0one-shot"


@dataclasses.dataclass
class Snapshot:
    """What the worker needs from a document, taken on the event loop."""

    uri: str
    path: str
    version: int
    generation: int
    lines: List[str]
    edits: List[Tuple[Any, ...]]


@dataclasses.dataclass
class Computed:
    version: int
    generation: int
    lines: List[str]
    analysis: Analysis
    # Ascend schedules this result is provisional on (solve, then analyse again).
    pending: Tuple[Any, ...] = ()


def compute(snap: Snapshot, settings: Settings, caches: Caches,
            selection: Tuple[Tuple[str, str], ...] = ()) -> Computed:
    """Bring the host up to the snapshot's text and analyse it (worker thread)."""
    host = caches.host
    for e in snap.edits:
        if e[0] == "text":
            host.set_text(snap.uri, e[1])
        else:
            host.edit(snap.uri, e[1], e[2], e[3])
    if host.lines(snap.uri) != snap.lines:  # pragma: no cover - a lost edit: resync
        log.warning("resynchronising %s with the analysis host", snap.uri)
        host.set_text(snap.uri, "".join(snap.lines))
    hs = host.snapshot()
    analysis = hs.analysis(snap.uri, settings, selection, defer_solving=True,
                           report_as=snap.path)
    return Computed(snap.version, snap.generation, snap.lines, analysis, tuple(hs.pending))


def analyze_text(text: str, path: str, settings: Settings, caches: Caches,
                 selection: Tuple[Tuple[str, str], ...] = ()) -> Tuple[List[str], Analysis]:
    """One-shot analysis of a text that is no open document (workspace
    diagnostics, the what-if table), sharing the host's caches."""
    host = caches.host
    host.set_text(_ONE_SHOT, text)
    return split_lines(text), host.snapshot().analysis(_ONE_SHOT, settings, selection,
                                                       report_as=path)


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
        # Changes not yet given to the analysis host (worker thread).
        self.edits: List[Tuple[Any, ...]] = [("text", text)]
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
            self.edits = [("text", change.text)]
            return
        lines = self.lines

        def point(pos: Any) -> Tuple[int, int]:
            if pos.line >= len(lines):
                return pos.line, 0  # clamped to the end by splice
            return pos.line, convert.from_units(lines[pos.line], pos.character, encoding)

        start, end = point(rng.start), point(rng.end)
        self.lines = splice(lines, start, end, change.text)[0]
        if len(self.edits) >= _MAX_QUEUED:
            self.edits = [("text", "".join(self.lines))]
        else:
            self.edits.append(("edit", start, end, change.text))

    def snapshot(self) -> Snapshot:
        edits, self.edits = self.edits, []
        return Snapshot(self.uri, self.path, self.version, self.generation, list(self.lines),
                        edits)

    def commit(self, result: Computed, lsp_diags: list) -> None:
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

    def opened(self, uri: str, method: str) -> Optional[Document]:
        """The open document a notification names; None, with a warning, when
        the client sent ``method`` for a document it did not open."""
        doc = self.docs.get(uri)
        if doc is None:
            log.warning("%s for a document that is not open: %s", method, uri)
        return doc

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
            try:
                self.executor.submit(self.caches.forget, uri)
            except RuntimeError:  # the executor is shut down
                pass
        return doc

    def request(self, doc: Document) -> asyncio.Task:
        """Analyse the document's current state as soon as possible; the task that
        does it."""
        doc.generation += 1
        task = doc.task
        if task is None or task.done():
            task = doc.task = asyncio.get_running_loop().create_task(self._run(doc))
        return task

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
                    doc.edits = snap.edits + doc.edits  # the host catches up later
                    result = Computed(snap.version, snap.generation, snap.lines,
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
        if doc.closed or doc.analysis is None or doc.analysis_version is None:
            return False  # (the version is set with the analysis)
        lsp_diags = convert.diagnostics(
            tuple(doc.analysis.diagnostics) + verified_diagnostics(doc, doc.analysis_lines),
            doc.uri, doc.analysis_lines, self.encoding(), doc.analysis_version)
        doc.commit(Computed(doc.analysis_version, doc.analysis_generation, doc.analysis_lines,
                            doc.analysis), lsp_diags)
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
                task = self.request(doc)
            await asyncio.shield(task)
        return doc

    def analyse_file(self, text: str, path: str, settings: Settings, selection=()):
        """Blocking: a one-shot analysis (run through the executor)."""
        if self.excluded(path):
            return split_lines(text), model.Analysis(path=path, target=settings.target)
        return analyze_text(text, path, settings, self.caches, selection)
