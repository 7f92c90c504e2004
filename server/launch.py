"""Start the language server: what ``tilelint server`` runs, from the console
script's light dispatcher (``entry``) and from the CLI (``cli server``) alike.

Imports nothing of tilelint's until it is called, so the dispatcher stays light."""

from __future__ import annotations

import sys
from typing import Sequence


def serve(argv: Sequence[str]) -> int:
    """Run the language server with ``argv`` (the arguments after ``server``)."""
    try:
        from .lsp_main import main as server_main
    except ImportError as exc:  # pygls/lsprotocol missing from the environment
        print(f"tilelint: error: the language server is not available: {exc}",
              file=sys.stderr)
        return 2
    try:
        return server_main(list(argv))
    except KeyboardInterrupt:
        return 130
