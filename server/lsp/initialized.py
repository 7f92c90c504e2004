"""``initialized``: watch pyproject.toml files and fetch the client's settings."""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from . import configuration, lazy

METHOD = lsp.INITIALIZED
log = logging.getLogger(__name__)

WATCH_ID = "tilelint-watch-pyproject"


def _warm_up() -> None:
    lazy.warm_up()
    import gc
    if not gc.isenabled():
        # What is loaded now lives as long as the server: keep it out of the
        # (idle-time) collections.
        gc.collect()
        gc.freeze()


async def handler(ls, params: lsp.InitializedParams) -> None:
    ls.initialized = True
    # Load the analysis in the worker thread while the client opens documents.
    ls.executor.submit(_warm_up)
    if ls.capability("workspace.did_change_watched_files.dynamic_registration"):
        try:
            await ls.client_register_capability_async(lsp.RegistrationParams(registrations=[
                lsp.Registration(
                    id=WATCH_ID,
                    method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=[
                        lsp.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                    ]),
                ),
            ]))
        except Exception:
            log.exception("could not register the pyproject.toml watcher")
    await configuration.pull(ls)
