"""The tilelint language server object: state shared by the handlers
(documents, configuration, client capabilities) and handler registration."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Optional

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

if True:  # the analysis is imported lazily (see lazy.py)
    from typing import TYPE_CHECKING
    if TYPE_CHECKING:  # pragma: no cover
        from tilelint.analysis.model import Settings

from . import convert, settings as settings_mod
from .documents import Document, DocumentStore

log = logging.getLogger("tilelint.server")

# (importlib.metadata would cost ~90 ms of start-up; keep in step with pyproject.toml)
VERSION = "0.1.0"


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


class TilelintServer(LanguageServer):
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
        self.store = DocumentStore(self.executor, self.settings_for, self.publish, self.encoding)
        self.init_options: Dict[str, Any] = {}
        self.client_options: Dict[str, Any] = {}
        self.pyproject = settings_mod.PyprojectCache()
        self.initialized = False

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
    def options_for(self, doc_or_path: Any) -> Dict[str, Any]:
        path = doc_or_path.path if isinstance(doc_or_path, Document) else doc_or_path
        _, table = self.pyproject.lookup(path)
        return settings_mod.merge(table, self.init_options, self.client_options)

    def settings_for(self, doc_or_path: Any) -> Settings:
        return settings_mod.to_settings(self.options_for(doc_or_path))

    def should_push(self, doc: Optional[Document] = None) -> bool:
        mode = str((self.options_for(doc) if doc is not None else settings_mod.merge(
            self.init_options, self.client_options)).get("diagnostics", "auto")).lower()
        if mode in ("push", "both"):
            return True
        if mode == "pull":
            return False
        return not self.client_pulls()

    def configuration_changed(self) -> None:
        """Re-analyse everything and tell the client to re-pull."""
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
        if not self.should_push(doc):
            return
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=doc.uri, diagnostics=list(doc.lsp_diagnostics), version=doc.analysis_version))

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


def path_of(uri: str) -> str:
    try:
        path = to_fs_path(uri)
    except Exception:
        path = None
    return path or uri


def create_server() -> TilelintServer:
    from . import (  # noqa: WPS433 - one handler per module
        code_action, configuration, diagnostic_pull, did_change, did_close, did_open,
        hover, initialize, initialized, inlay_hints, shutdown, watched_files,
        workspace_diagnostic,
    )

    server = TilelintServer()
    for mod in (initialize, initialized, did_open, did_change, did_close, diagnostic_pull,
                workspace_diagnostic, hover, inlay_hints, code_action, configuration,
                watched_files, shutdown):
        server.feature(mod.METHOD, getattr(mod, "OPTIONS", None))(mod.handler)
    return server
