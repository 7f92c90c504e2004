"""``exit``: end the process now, 0 after ``shutdown``, 1 without (LSP).

Runs before pygls' own exit (which only ends the process once its writer has
closed, and then through the interpreter's slow teardown of a large heap)."""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.EXIT


def leave(code: int) -> None:
    """End the process now: the interpreter's own exit frees every cached model
    object by object (4-12 s on a large heap) and waits for an analysis still
    running in the worker thread; nothing is left to save by then."""
    import logging
    import os
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe
            pass
    logging.shutdown()
    os._exit(code)


def handler(ls, params) -> None:
    proto = ls.protocol
    code = 0 if (proto._shutdown or proto._shutdown_asked) else 1
    try:
        ls.executor.shutdown(wait=False, cancel_futures=True)
        ls.verifier.close()
    finally:
        leave(code)
