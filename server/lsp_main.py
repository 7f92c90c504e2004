"""Entry point of the language server: ``tilelint server`` and
``python -m tilelint.server``.

    tilelint server                 # stdio (what editors start)
    tilelint server --tcp 127.0.0.1:2087
    tilelint server --log-file /tmp/tilelint.log -v

Start-up imports pygls and the analysis (libcst) only; never tilelang or torch.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilelint server",
                                description="Run the tilelint language server.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (default)")
    mode.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead")
    p.add_argument("--log-file", metavar="PATH", help="write the server log here (default: stderr)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more logging (-v info, -vv debug)")
    return p


def _host_port(value: str):
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise SystemExit(f"tilelint server: --tcp wants HOST:PORT, got {value!r}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
    level = logging.WARNING - 10 * min(args.verbose, 2)
    handler: logging.Handler
    if args.log_file:
        handler = logging.FileHandler(args.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    if args.verbose < 2:
        # pygls logs every message at INFO; keep that for -vv.
        logging.getLogger("pygls").setLevel(max(level, logging.WARNING))

    # The kernel models of a large file are hundreds of thousands of small
    # objects; automatic collections land in the middle of edits (with the
    # default thresholds p95 of didChange → diagnostics on 3,000 lines was
    # ~170 ms; even a young-generation pass over one edit's objects is ~12 ms).
    # The models are acyclic (freed by reference counting); the cycle
    # collector runs when the server is idle instead (app.IdleCollector).
    import gc
    gc.set_threshold(50_000, 50, 100)
    gc.disable()

    if args.tcp:
        from .lsp.app import create_server
        server = create_server()
        host, port = _host_port(args.tcp)
        server.start_tcp(host, port)
        return 0

    # stdio: answer ``initialize`` before pygls and lsprotocol are imported
    # (~250 ms), then hand the rest of the stream to the server.
    import os

    from .lsp import stdio
    framer = stdio.Framer(sys.stdin.fileno())
    if os.environ.get("TILELINT_NO_EARLY_INIT"):
        early = stdio.Early()
    else:
        early = stdio.answer_initialize_early(framer, sys.stdout.buffer)

    from .lsp.app import create_server

    server = create_server()
    server.start_stdio(framer, early)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
