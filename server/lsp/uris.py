"""URI helpers shared by the language server's handlers (no server state here, so
any handler can import them without importing the server that registers it)."""
from __future__ import annotations

from pygls.uris import to_fs_path


def path_of(uri: str) -> str:
    """The file-system path of a document URI; the URI itself when it has none
    (an ``untitled:`` buffer, a malformed URI)."""
    try:
        path = to_fs_path(uri)
    except Exception:
        path = None
    return path or uri
