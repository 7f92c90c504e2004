"""pytest-lsp harness: one server per test module (module-scoped fixture).

A module picks its client with module-level variables:
``CLIENT = "push" | "pull"``, ``ENCODINGS = ["utf-16"]``,
``INIT_OPTIONS = {...}``, ``CONFIG = {...}`` (what ``workspace/configuration``
answers for section ``tilelint``), ``WORKSPACE = path`` or
``make_workspace(tmp_path_factory) -> path``.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import List, Optional

import pytest_lsp
from lsp_helpers import DATA, REPO
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features


def record_diagnostics(client: LanguageClient, params: lsp.PublishDiagnosticsParams):
    client.diagnostics[params.uri] = params.diagnostics
    client.published.setdefault(params.uri, []).append(params)


def register_capability(client: LanguageClient, params: lsp.RegistrationParams):
    client.registrations.extend(params.registrations)


def unregister_capability(client: LanguageClient, params: lsp.UnregistrationParams):
    return None


def refresh(client: LanguageClient, params: None):
    return None


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = {}  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record_diagnostics
    features[lsp.CLIENT_REGISTER_CAPABILITY] = register_capability
    features[lsp.CLIENT_UNREGISTER_CAPABILITY] = unregister_capability
    features[lsp.WORKSPACE_INLAY_HINT_REFRESH] = refresh
    register_lsp_features(client, features)
    return client


def capabilities(kind: str, encodings: Optional[List[str]]) -> lsp.ClientCapabilities:
    td = lsp.TextDocumentClientCapabilities(
        synchronization=lsp.TextDocumentSyncClientCapabilities(dynamic_registration=False),
        publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
            version_support=True, related_information=True, code_description_support=True,
            data_support=True),
        hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown]),
        inlay_hint=lsp.InlayHintClientCapabilities(),
        code_action=lsp.CodeActionClientCapabilities(
            code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                code_action_kind=lsp.ClientCodeActionKindOptions(value_set=[
                    lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll,
                    lsp.CodeActionKind.Source])),
            is_preferred_support=True, data_support=True),
    )
    if kind == "pull":
        td.diagnostic = lsp.DiagnosticClientCapabilities(related_document_support=False)
    ws = lsp.WorkspaceClientCapabilities(
        configuration=True,
        workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True),
        did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
            dynamic_registration=True),
        did_change_configuration=lsp.DidChangeConfigurationClientCapabilities(),
        diagnostics=lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True),
        inlay_hint=lsp.InlayHintWorkspaceClientCapabilities(refresh_support=True),
    )
    general = lsp.GeneralClientCapabilities(position_encodings=encodings) if encodings else None
    return lsp.ClientCapabilities(
        text_document=td, workspace=ws, general=general,
        window=lsp.WindowClientCapabilities(work_done_progress=True))


def server_config(*pythonpath: str) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=[sys.executable, "-m", "tilelint.server"] + (
            ["-vv", "--log-file", os.environ["TILELINT_TEST_SERVER_LOG"]]
            if os.environ.get("TILELINT_TEST_SERVER_LOG") else []),
        client_factory=make_client,
        server_env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (*pythonpath, os.environ.get("PYTHONPATH"), str(REPO)) if p)},
    )


SERVER = server_config()
# A server (and compiler worker) whose ``import tilelang`` fails like a missing package.
NO_TILELANG = server_config(str(pathlib.Path(__file__).parent / "stubs" / "no_tilelang"))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, request):
    async for _ in _session(lsp_client, request):
        yield


@pytest_lsp.fixture(scope="module", config=NO_TILELANG)
async def client_without_tilelang(lsp_client: LanguageClient, request):
    async for _ in _session(lsp_client, request):
        yield


async def _session(lsp_client: LanguageClient, request):
    mod = request.module
    kind = getattr(mod, "CLIENT", "push")
    encodings = getattr(mod, "ENCODINGS", None)
    factory = getattr(mod, "make_workspace", None)
    if factory is not None:
        workspace = pathlib.Path(factory(request.getfixturevalue("tmp_path_factory")))
    else:
        workspace = pathlib.Path(getattr(mod, "WORKSPACE", DATA))
    lsp_client.workspace_path = workspace
    config = getattr(mod, "CONFIG", None)
    if config is not None:
        lsp_client.set_configuration(config, section="tilelint")
    lsp_client.init_result = await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities(kind, encodings),
        root_uri=workspace.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
        initialization_options=getattr(mod, "INIT_OPTIONS", None),
    ))
    yield
    await lsp_client.shutdown_session()


