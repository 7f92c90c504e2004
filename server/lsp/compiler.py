"""Compiler-verified mode in the language server (``compiler.verify =
"onSave"``).

On every save of a document the real tilelang lowers it in the worker process
of :class:`tilelint.server.verify.VerifyWorker` (the only code path that runs
the user's file).  The call runs in a thread of its own, never on the event
loop and never in the analysis thread, so typing stays as fast as without it.
Saves that arrive while a verification runs are coalesced: the newest saved
text is verified next.

The result is kept on the document (``Document.verified``): its TL910/TL911
are merged into the diagnostics while the text is the one verified, and the
compiler's sync code shows in the loop hover, marked as compiler output.

Refused when the client says the workspace is untrusted; without tilelang one
information message says how to install it; a crash or time-out of the worker
is reported (``window/showMessage``) and the worker restarts on the next save.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from lsprotocol import types as lsp

if TYPE_CHECKING:  # the worker's module is imported when first needed
    from tilelint.server.verify import VerifyWorker

from . import settings as settings_mod

log = logging.getLogger(__name__)

INSTALL_MESSAGE = ("tilelint: compiler verification needs tilelang 0.1.15 in the Python that runs "
                   "tilelint: pip install 'tilelint[compiler]' (or set TILELINT_COMPILER_PYTHON "
                   "to an interpreter that has it)")
UNTRUSTED_MESSAGE = ("tilelint: compiler verification is off in an untrusted workspace "
                     "(it imports your file with the real tilelang)")


@dataclasses.dataclass(frozen=True)
class Verified:
    """One verification result, attached to the document."""

    source: str
    line_count: int
    version: Optional[int]
    diagnostics: Tuple[Any, ...]  # model.Diagnostic (TL910 / TL911)
    sync_code: Tuple[Any, ...]  # verify.SyncCode
    compiler: str  # "tilelang 0.1.15"
    seconds: float

    def sync_for(self, kernel: str, loop_line: int):
        for s in self.sync_code:
            if s.kernel == kernel and s.loop_line == loop_line:
                return s
        return None


class CompilerVerifier:
    def __init__(self, server) -> None:
        self.server = server
        self._executor: Optional[ThreadPoolExecutor] = None
        self._worker: Optional[VerifyWorker] = None
        self._lock = threading.Lock()
        self.tasks: Dict[str, asyncio.Task] = {}
        self.pending: Dict[str, Tuple[Any, str]] = {}  # uri -> (doc, source) to verify next
        self.told_missing = False
        self.told_untrusted = False
        self.runs = 0

    # ---- settings ---------------------------------------------------------
    def mode(self, doc) -> str:
        return settings_mod.verify_mode(self.server.options_for(doc))

    # ---- entry point (event loop) -------------------------------------------
    def on_save(self, doc, text: Optional[str]) -> None:
        if self.mode(doc) != settings_mod.VERIFY_ON_SAVE:
            return
        if not self.server.trusted:
            if not self.told_untrusted:
                self.told_untrusted = True
                self.server.show_message(UNTRUSTED_MESSAGE, lsp.MessageType.Warning)
            log.info("verify on save refused: untrusted workspace")
            return
        source = text if text is not None else doc.text
        self.pending[doc.uri] = (doc, source)
        task = self.tasks.get(doc.uri)
        if task is None or task.done():
            self.tasks[doc.uri] = asyncio.get_running_loop().create_task(self._drain(doc.uri))

    async def _drain(self, uri: str) -> None:
        loop = asyncio.get_running_loop()
        while uri in self.pending:
            doc, source = self.pending.pop(uri)
            if doc.closed:
                continue
            settings = self.server.settings_for(doc)
            self.runs += 1
            self.server.log_message(f"tilelint: verifying {doc.path} with the compiler "
                                    f"(target {settings.target})")
            try:
                res = await loop.run_in_executor(self._pool(), self._verify, doc.path, source,
                                                 settings)
            except Exception as exc:  # never propagate into the server
                log.exception("verification of %s failed", doc.path)
                self.server.show_message(f"tilelint: compiler verification failed: {exc}",
                                         lsp.MessageType.Warning)
                continue
            self._apply(doc, source, res)

    # ---- the worker (verify thread) -----------------------------------------
    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilelint-verify")
        return self._executor

    def _verify(self, path: str, source: str, settings):
        from tilelint.server.verify import VerifyWorker
        with self._lock:
            if self._worker is None:
                self._worker = VerifyWorker()
            worker = self._worker
        return worker.verify(path, source, settings.target, settings)

    def compiler_name(self) -> str:
        w = self._worker
        info = (w.ready_info if w is not None else None) or {}
        return f"tilelang {info.get('tilelang') or '0.1.15'}"

    # ---- results (event loop) ---------------------------------------------------
    def _apply(self, doc, source: str, res) -> None:
        if not res.ran:
            if res.missing_compiler:
                if not self.told_missing:
                    self.told_missing = True
                    self.server.show_message(INSTALL_MESSAGE, lsp.MessageType.Info)
                log.info("verify: %s", res.error)
                return
            # crashed, timed out, could not start: report, keep the server going
            log.warning("verify of %s did not run: %s", doc.path, res.error)
            self.server.show_message(f"tilelint: compiler verification of "
                                     f"{doc.path.rsplit('/', 1)[-1]} did not complete: {res.error}",
                                     lsp.MessageType.Warning)
            return
        if doc.closed:
            return
        from .lazy import pipeline
        settings = self.server.settings_for(doc)
        noqa = pipeline.noqa_map(source)
        diags = tuple(d for d in res.diagnostics if pipeline.selected(d.code, settings)
                      and not _suppressed(noqa, d))
        lines_n = source.count("\n") + source.count("\r") - source.count("\r\n") + 1
        doc.verified = Verified(source=source, line_count=lines_n, version=doc.version,
                                diagnostics=diags, sync_code=tuple(res.sync_code),
                                compiler=self.compiler_name(), seconds=res.seconds)
        info = (self._worker.ready_info if self._worker is not None else None) or {}
        self.server.log_message(
            f"tilelint: verified {doc.path} with {doc.verified.compiler} in {res.seconds:.1f} s "
            f"(compiler process {info.get('pid', '?')}): {len(diags)} finding(s)"
            + "".join(f"; {n}" for n in res.notes[:3]))
        if self.server.store.republish(doc):
            self.server.refresh_pull()

    def close(self) -> None:
        """Stop the compiler process at once (called on the event loop at
        shutdown: never waits for a verification in flight)."""
        w, self._worker = self._worker, None
        if w is not None:
            try:
                w._kill()  # SIGKILL to its process group; a running verify sees it died
            except Exception:
                log.exception("stopping the compiler worker failed")
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _suppressed(noqa, d) -> bool:
    if d.span.line not in noqa:
        return False
    codes = noqa.get(d.span.line)
    return codes is None or d.code in codes
