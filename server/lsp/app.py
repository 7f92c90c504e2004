"""The tilelint language server object: state shared by the handlers
(documents, configuration, client capabilities) and handler registration."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Optional

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

if True:  # the analysis is imported lazily (see lazy.py)
    from typing import TYPE_CHECKING
    if TYPE_CHECKING:  # pragma: no cover
        from tilelint.analysis.model import Settings

from . import convert, settings as settings_mod
from .documents import Document, DocumentStore

log = logging.getLogger("tilelint.server")

from .stdio import VERSION  # noqa: E402  (kept with the early initialize answer)


class TilelintProtocol(LanguageServerProtocol):
    """The documents live in our own store (incremental sync, chunk caches), so
    pygls' built-in copy of every document is not kept: these overrides only
    forward the notifications to our handlers."""

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


    def handle_message(self, message):
        """After ``shutdown`` every request but ``exit`` gets an InvalidRequest
        error, as LSP says (pygls drops it, and the client waits forever)."""
        method = getattr(message, "method", None)
        if (self._shutdown or self._shutdown_asked) and method not in (None, lsp.EXIT) \
                and getattr(message, "id", None) is not None:
            from pygls.exceptions import JsonRpcInvalidRequest
            log.warning("%s after shutdown: refused", message.method)
            self._send_response(message.id, error=JsonRpcInvalidRequest(
                "the server is shut down: only `exit` is accepted").to_response_error())
            return
        if method == lsp.SHUTDOWN and getattr(message, "id", None) is not None:
            # pygls sets _shutdown only when its generator resumes, after the
            # messages already queued: a request right behind would still run
            self._shutdown_asked = True
        return super().handle_message(message)

    _shutdown_asked = False

    def _handle_notification(self, method_name: str, params: Any):
        """pygls (2.1) files the future of every generator-handled notification
        (didOpen, didChange, didClose go through the generators above) in
        ``_request_futures`` under a fresh uuid and never takes it out: a day of
        typing kept millions.  A notification gets no response, so its future
        is dropped as soon as it is done."""
        futures = self._request_futures
        before = set(futures)
        super()._handle_notification(method_name, params)
        def drop(key: Any) -> Callable[[Any], None]:
            def done(_fut: Any) -> None:
                futures.pop(key, None)
            return done

        for key in [k for k in futures if k not in before]:
            fut = futures[key]
            if fut.done():
                futures.pop(key, None)
            else:
                fut.add_done_callback(drop(key))

    # The stdio transport may have answered ``initialize`` before pygls was
    # imported (see stdio.py): (id, result sent); pygls' own answer is dropped.
    _early_init: Optional[tuple] = None

    def _send_response(self, msg_id, result=None, error=None):
        early = self._early_init
        if early is not None and msg_id == early[0]:
            self._early_init = None
            if error is not None:
                log.error("initialize failed after it was answered early: %s", error)
                return
            try:
                import json
                ours = json.loads(json.dumps(result, default=self._serialize_message))
            except Exception:  # pragma: no cover - defensive
                ours = None
            if ours != early[1]:
                log.error("the early initialize answer differs from pygls' (update "
                          "stdio.CAPABILITIES): sent %s, pygls %s", early[1], ours)
            return
        super()._send_response(msg_id, result, error)

    def structure_message(self, data):
        """A request whose params do not fit the schema gets an error response
        (pygls alone would only log it and leave the client waiting)."""
        try:
            return super().structure_message(data)
        except Exception as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
                err = exc if isinstance(exc, JsonRpcException) else JsonRpcInvalidParams()
                log.error("invalid %s request: %s", data.get("method"), exc)
                self._send_response(data["id"], error=err.to_response_error())
                return _Ignored()
            raise


class _Ignored:
    """A parsed message that ``handle_message`` drops (wrong jsonrpc version)."""

    jsonrpc = "ignored"


class IdleCollector:
    """Runs the cycle collector when no analysis has run for ``delay`` seconds
    (automatic collection is off, see lsp_main), or at once when more than
    ``valve`` objects were allocated since the last one."""

    def __init__(self, delay: float = 1.0, valve: int = 2_000_000) -> None:
        self.delay = delay
        self.valve = valve
        self._handle: Optional[asyncio.TimerHandle] = None
        self.busy: Any = lambda: False
        self.collections = 0
        # A full pass walks every cached model (hundreds of ms on a large
        # workspace, and an edit arriving meanwhile waits): idle passes collect
        # the young generations, a full one runs at most every ``full_every`` s.
        self.full_every = 30.0
        self._last_full = 0.0

    def poke(self) -> None:
        import gc
        if gc.isenabled():
            return
        if gc.get_count()[0] > self.valve:
            self._collect()
            return
        if self._handle is not None:
            self._handle.cancel()
        try:
            self._handle = asyncio.get_running_loop().call_later(self.delay, self._idle)
        except RuntimeError:  # no loop (tests)
            self._handle = None

    def _idle(self) -> None:
        self._handle = None
        if self.busy():
            self.poke()
            return
        self._collect()

    def _collect(self) -> None:
        import gc
        import time
        t0 = time.perf_counter()
        full = t0 - self._last_full >= self.full_every
        found = gc.collect() if full else gc.collect(1)
        if full:
            self._last_full = t0
        self.collections += 1
        log.debug("idle collection: %d unreachable objects in %.0f ms", found,
                  (time.perf_counter() - t0) * 1000)


class TilelintServer(LanguageServer):
    protocol: TilelintProtocol  # protocol_cls below

    def __init__(self) -> None:
        super().__init__("tilelint", VERSION, protocol_cls=TilelintProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
                         max_workers=2)
        # A roomy stack for the analysis thread: libcst's native parser recurses deeply.
        old_size = threading.stack_size()
        try:
            threading.stack_size(64 * 1024 * 1024)
        except (ValueError, RuntimeError):  # pragma: no cover - platform limits
            pass
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilelint-analysis")
        self.executor.submit(lambda: None).result()  # start the thread with that stack now
        try:
            threading.stack_size(old_size)
        except (ValueError, RuntimeError):  # pragma: no cover
            pass
        self.store = DocumentStore(self.executor, self.settings_for, self.publish, self.encoding,
                                   self.selection_for, self.excluded)
        self.init_options: Dict[str, Any] = {}
        self.client_options: Dict[str, Any] = {}
        # [tool.tilelint] per directory (server/config.py); cleared when a pyproject.toml changes.
        self.pyproject = settings_mod.Configs(lambda exc: self._warn_once(
            f"invalid configuration, using the defaults: {exc}", show=True))
        self._warned: set = set()
        self.initialized = False
        self.gc = IdleCollector()
        self.gc.busy = lambda: any(d.task is not None and not d.task.done()
                                   for d in self.store.docs.values())
        # False when the client said the workspace is untrusted (initializationOptions
        # ``trusted: false``): nothing that runs the user's code is allowed then.
        self.trusted = True
        from .compiler import CompilerVerifier
        self.verifier = CompilerVerifier(self)

    # ---- stdio ------------------------------------------------------------
    def start_stdio(self, framer, early) -> None:
        """Serve over stdin/stdout with the tolerant framing of ``stdio``;
        ``early``: what ``stdio.answer_initialize_early`` already read/answered."""
        import sys

        from pygls.io_ import StdoutWriter

        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
        if early.init_id is not None:
            self.protocol._early_init = (early.init_id, early.init_result)
        code = 0
        try:
            asyncio.run(self._serve_stdio(framer, early))
        except BrokenPipeError:
            log.error("the connection to the client is lost; shutting down")
        except SystemExit as exc:  # ``exit``: 0 after ``shutdown``, else 1 (pygls)
            code = exc.code if isinstance(exc.code, int) else 0
        except KeyboardInterrupt:
            pass
        finally:
            self.verifier.close()
            self.shutdown()
        from .exit import leave
        leave(code)

    async def _serve_stdio(self, framer, early) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        # Frames read but not yet handled: bounds the memory a flooding client can use.
        slots = threading.BoundedSemaphore(64)

        def deliver(item) -> None:
            try:
                self._handle_frame(item)
            finally:
                slots.release()
            if item[0] == "eof" and not done.done():
                done.set_result(None)

        for item in early.frames:
            slots.acquire()
            deliver(item)
        if done.done():
            return

        def reader() -> None:
            while True:
                try:
                    item = framer.next()
                except Exception as exc:  # pragma: no cover - defensive
                    log.exception("reading from stdin failed")
                    item = ("eof", f"reading stdin failed: {exc}")
                slots.acquire()
                try:
                    loop.call_soon_threadsafe(deliver, item)
                except RuntimeError:  # the loop is closed
                    return
                if item[0] == "eof":
                    return

        threading.Thread(target=reader, name="tilelint-stdin", daemon=True).start()
        await done

    def _handle_frame(self, item) -> None:
        from . import stdio
        kind, value = item
        writer = self.protocol.writer
        assert writer is not None  # start_io set it before reading
        if kind == "eof":
            if value:
                log.error("%s", value)
            log.info("stdin closed")
            return
        if kind == "error":
            log.error("malformed message: %s", value)
            writer.write(stdio.error_frame(None, stdio.PARSE_ERROR,
                                           f"tilelint: malformed message frame: {value}"))
            return
        data, err = stdio.decode(value)
        if err is not None:
            log.error("bad message: %s", err[err.find(b"{"):].decode("utf-8", "replace")[:300])
            writer.write(err)
            return
        assert data is not None  # decode gives the message or the error frame
        try:
            message = self.protocol.structure_message(data)
        except Exception as exc:
            log.error("cannot read %s message: %s", data.get("method", "a"), exc)
            return
        try:
            self.protocol.handle_message(message)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            log.exception("handling %s failed", data.get("method", "a message"))

    # ---- client facts ---------------------------------------------------
    def encoding(self) -> str:
        try:
            return convert.encoding_name(self.workspace.position_encoding)
        except RuntimeError:  # before initialize
            return convert.UTF16

    def capability(self, dotted: str, default: Any = None) -> Any:
        cur: Any = getattr(self.protocol, "client_capabilities", None)
        for part in dotted.split("."):
            if cur is None:
                return default
            cur = getattr(cur, part, None)
        return default if cur is None else cur

    def client_pulls(self) -> bool:
        return self.capability("text_document.diagnostic") is not None

    # ---- configuration ----------------------------------------------------
    def editor_options(self) -> Dict[str, Any]:
        """initializationOptions, then workspace/configuration (plain dict)."""
        return settings_mod.merge(self.init_options, self.client_options)

    def config_for(self, doc_or_path: Any):
        """The document's ``config.Config``: its pyproject.toml's, with the
        editor's settings over it (``config.overlay``)."""
        path = doc_or_path.path if isinstance(doc_or_path, Document) else doc_or_path
        return settings_mod.document_config(
            self.pyproject.for_path(path), self.editor_options(),
            lambda msg: self._warn_once(f"tilelint settings: {msg}"))

    def options_for(self, doc_or_path: Any) -> Dict[str, Any]:
        return settings_mod.view(self.config_for(doc_or_path), self.editor_options(),
                                 excluded=self.excluded(doc_or_path))

    def settings_for(self, doc_or_path: Any) -> Settings:
        return settings_mod.settings_of(self.config_for(doc_or_path), doc_or_path)

    def selection_for(self, doc_or_path: Any):
        """The instance labels the ``binding`` setting picks (see settings)."""
        return settings_mod.binding_selection(self.editor_options())

    def excluded(self, doc_or_path: Any) -> bool:
        """Whether the configuration's ``exclude`` covers the document (it then
        gets no diagnostics, as ``tilelint check FILE`` checks nothing)."""
        path = doc_or_path.path if isinstance(doc_or_path, Document) else doc_or_path
        if not path:
            return False
        cfg = self.pyproject.for_path(path)
        try:
            out = cfg.is_excluded(path)
        except Exception:  # pragma: no cover - a setting must never take the server down
            log.exception("checking `exclude` for %s failed", path)
            return False
        if out:
            self._warn_once(f"{path} is excluded by `exclude` in "
                            f"{cfg.path or 'the default excludes'}: no diagnostics", level=logging.INFO)
        return out

    def _warn_once(self, message: str, show: bool = False, level: int = logging.WARNING) -> None:
        """Log a configuration problem once (until the configuration changes)."""
        if message in self._warned:
            return
        self._warned.add(message)
        log.log(level, "%s", message)
        if show and threading.current_thread() is threading.main_thread():
            self.show_message(f"tilelint: {message}", lsp.MessageType.Warning)

    def should_push(self, doc: Optional[Document] = None) -> bool:
        mode = str(self.editor_options().get("diagnostics", "auto")).lower()
        if mode in ("push", "both"):
            return True
        if mode == "pull":
            return False
        return not self.client_pulls()

    def configuration_changed(self) -> None:
        """Re-analyse everything and tell the client to re-pull."""
        self._warned.clear()
        self.store.request_all()
        if self.capability("workspace.diagnostics.refresh_support"):
            try:
                self.workspace_diagnostic_refresh(None)
            except Exception:
                log.exception("diagnostic refresh failed")
        if self.capability("workspace.inlay_hint.refresh_support"):
            try:
                self.workspace_inlay_hint_refresh(None)
            except Exception:
                log.exception("inlay hint refresh failed")

    # ---- results ------------------------------------------------------------
    def publish(self, doc: Document) -> None:
        self.gc.poke()
        if not self.should_push(doc):
            return
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=doc.uri, diagnostics=list(doc.lsp_diagnostics), version=doc.analysis_version))

    def refresh_pull(self) -> None:
        """Tell a pulling client that diagnostics changed outside of an edit."""
        if self.client_pulls() and self.capability("workspace.diagnostics.refresh_support"):
            try:
                self.workspace_diagnostic_refresh(None)
            except Exception:
                log.exception("diagnostic refresh failed")

    def show_message(self, message: str, kind: Any = None) -> None:
        self._window(self.window_show_message, lsp.ShowMessageParams,
                     kind or lsp.MessageType.Info, message, lsp.WINDOW_SHOW_MESSAGE)

    def log_message(self, message: str, kind: Any = None) -> None:
        self._window(self.window_log_message, lsp.LogMessageParams,
                     kind or lsp.MessageType.Log, message, lsp.WINDOW_LOG_MESSAGE)

    @staticmethod
    def _window(send: Callable[[Any], None], params: Callable[..., Any], kind: Any,
                message: str, method: str) -> None:
        """Send a window/ message; a failure is logged, never raised."""
        try:
            send(params(type=kind, message=message))
        except Exception:
            log.exception("%s failed", method)

    def clear(self, uri: str) -> None:
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, diagnostics=[]))

    # ---- errors -------------------------------------------------------------
    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log; a failing notification handler is reported as a log message
        rather than a pop-up, a failing request already gets an error response."""
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        try:
            from pygls.exceptions import FeatureRequestError
            if source is FeatureRequestError:
                return
            self.window_log_message(lsp.LogMessageParams(
                type=lsp.MessageType.Error, message=f"tilelint: {error}"))
        except Exception:
            pass


def create_server() -> TilelintServer:
    from . import (  # noqa: WPS433 - one handler per module
        code_action,
        configuration,
        diagnostic_pull,
        did_change,
        did_close,
        did_open,
        did_save,
        exit as exit_,
        hover,
        initialize,
        initialized,
        inlay_hints,
        shutdown,
        watched_files,
        workspace_diagnostic,
    )

    server = TilelintServer()
    for mod in (initialize, initialized, did_open, did_change, did_close, did_save,
                diagnostic_pull, workspace_diagnostic, hover, inlay_hints, code_action,
                configuration, watched_files, shutdown, exit_):
        server.feature(mod.METHOD, getattr(mod, "OPTIONS", None))(mod.handler)
    return server
