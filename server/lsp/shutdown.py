"""``shutdown``: stop the analysis worker and the compiler process."""

from __future__ import annotations

from lsprotocol import types as lsp

METHOD = lsp.SHUTDOWN


def handler(ls, params) -> None:
    for doc in list(ls.store.docs.values()):
        doc.closed = True
    ls.executor.shutdown(wait=False, cancel_futures=True)
    ls.verifier.close()
