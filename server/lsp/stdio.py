"""The stdio transport of the language server: tolerant message framing and
an early answer to ``initialize``.  Standard library only: this module is
imported before pygls and lsprotocol (which take ~250 ms to import).

Framing (``Framer``), one message at a time from a file descriptor:

* headers are read line by line (a line is capped at ``MAX_HEADER_LINE``
  bytes); ``Content-Length`` is matched case-insensitively, other headers are
  ignored;
* a missing or malformed ``Content-Length``, stray bytes where a header
  should be, a header without its body, or a declared length over
  ``MAX_BODY`` give an ``error`` frame (the server answers it with a
  JSON-RPC error whose id is null) and the reader re-synchronises on the next
  ``Content-Length:`` header, even when the junk before it has no line break;
* a body that ends before its declared length at the end of input is
  reported and ends the session; a body that is longer than the data the
  client sent (a too large ``Content-Length``) is cut at the end of its JSON
  value when the input stalls or the next header shows up inside it.

Memory stays bounded: at most one body (``MAX_BODY``) plus one read chunk is
buffered, junk at most ``MAX_HEADER_LINE`` bytes at a time; the server lets
at most 64 frames wait for the event loop.

``answer_initialize_early`` reads the first message; when it is
``initialize`` the response (capabilities below, the position encoding
negotiated like pygls does) is written at once, and the server replays the
request to pygls later with its response suppressed.  The capabilities here
must equal what pygls computes from the registered features; a test checks
that, and the server logs an error at run time if they ever differ.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Dict, List, Optional, Tuple

log = logging.getLogger("tilelint.server.stdio")

VERSION = "0.1.0"  # keep in step with pyproject.toml (importlib.metadata costs ~90 ms)
SERVER_INFO = {"name": "tilelint", "version": VERSION}

MAX_HEADER_LINE = 8 * 1024
MAX_BODY = 64 * 1024 * 1024
CHUNK = 1 << 16
STALL_SECONDS = 2.0

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

# What ``ServerCapabilitiesBuilder`` gives for tilelint's features (the
# position encoding is filled in per client).
CAPABILITIES: Dict[str, Any] = {
    "codeActionProvider": {
        "codeActionKinds": ["quickfix", "source.fixAll", "source.fixAll.tilelint"],
        "resolveProvider": False,
    },
    "diagnosticProvider": {
        "identifier": "tilelint", "interFileDependencies": False, "workspaceDiagnostics": True,
    },
    "executeCommandProvider": {"commands": []},
    "hoverProvider": True,
    "inlayHintProvider": {"resolveProvider": False},
    "textDocumentSync": {"change": 2, "openClose": True, "save": {"includeText": False}},
    "workspace": {
        "fileOperations": {},
        "workspaceFolders": {"changeNotifications": True, "supported": True},
    },
}
_ENCODINGS = ("utf-8", "utf-16", "utf-32")


def negotiate_encoding(params: Any) -> str:
    """The client's first supported position encoding (UTF-16 by default)."""
    try:
        offered = params["capabilities"]["general"]["positionEncodings"]
    except (KeyError, TypeError):
        return "utf-16"
    if isinstance(offered, list):
        for enc in offered:
            if enc in _ENCODINGS:
                return enc
    return "utf-16"


def _client_cap(params: Any, *path: str) -> Any:
    cur = params.get("capabilities") if isinstance(params, dict) else None
    for part in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def initialize_result(params: Any) -> Dict[str, Any]:
    caps = json.loads(json.dumps(CAPABILITIES))
    caps["positionEncoding"] = negotiate_encoding(params)
    # pygls answers "false" (rather than leaving them out) for what the client
    # offers and tilelint does not do.
    sync = caps["textDocumentSync"]
    for key in ("willSave", "willSaveWaitUntil"):
        if _client_cap(params, "textDocument", "synchronization", key) is not None:
            sync[key] = False
    return {"capabilities": caps, "serverInfo": dict(SERVER_INFO)}


def frame(obj: Any) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def error_frame(msg_id: Any, code: int, message: str) -> bytes:
    return frame({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


class Framer:
    """Reads LSP frames from a file descriptor (blocking; one reader thread)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.eof = False
        self.errors = 0
        self._can_poll = os.name == "posix"

    # ---- low level ------------------------------------------------------
    def _fill(self, timeout: Optional[float] = None) -> Optional[bool]:
        """Read more input: True when some came, False at EOF, None on timeout."""
        if self.eof:
            return False
        if timeout is not None and self._can_poll:
            import select
            try:
                ready, _, _ = select.select([self.fd], [], [], timeout)
            except (OSError, ValueError):
                ready = [self.fd]
            if not ready:
                return None
        try:
            data = os.read(self.fd, CHUNK)
        except InterruptedError:  # pragma: no cover
            return True
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _line(self) -> Optional[bytes]:
        """The next line (with its terminator); an over-long run without a
        line break comes back as one truncated line.  None at EOF."""
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                line = bytes(self.buf[:i + 1])
                del self.buf[:i + 1]
                return line
            if len(self.buf) > MAX_HEADER_LINE:
                # Keep the tail: a header may be starting at the end of the junk.
                j = self.buf.lower().rfind(b"content-length:")
                if j > 0:
                    line = bytes(self.buf[:j])
                    del self.buf[:j]
                    return line
                line = bytes(self.buf[:-32])
                del self.buf[:-32]
                return line
            start = max(len(self.buf) - 1, 0)
            if not self._fill():
                if self.buf:
                    line = bytes(self.buf)
                    self.buf.clear()
                    return line
                return None

    def _body(self, n: int) -> Tuple[Optional[bytes], Optional[str], bool]:
        """``(body, note, ok)``: ``n`` bytes, or a shorter JSON value when the
        declared length overshoots (see the module docstring); ``(None, why,
        False)`` when the input ended, ``(None, why, True)`` when the header
        came without a body (the next message follows at once)."""
        scan = 0
        while True:
            head = bytes(self.buf[:64]).lstrip()
            if head[:15].lower() == b"content-length:":
                return None, "a message header without its body", True
            if len(self.buf) >= n and (len(head) >= 15 or len(self.buf) >= 64):
                break
            if len(self.buf) >= n and not b"content-length:".startswith(head.lower()):
                break
            j = self.buf[scan:].lower().find(b"content-length:")
            if j >= 0 and scan + j > 0:
                cut = self._json_end()
                if cut is not None and cut <= scan + j:
                    body = bytes(self.buf[:cut])
                    del self.buf[:cut]
                    return body, f"Content-Length {n} is larger than the message ({cut} bytes)", True
            scan = max(len(self.buf) - 15, 0)
            got = self._fill(STALL_SECONDS if self.buf else None)
            if got is None:  # the input stalled with a partial body
                cut = self._json_end()
                if cut is not None:
                    body = bytes(self.buf[:cut])
                    del self.buf[:cut]
                    return body, (f"Content-Length {n} is larger than the message "
                                  f"({cut} bytes; no more input came)"), True
                continue
            if got is False:
                have = len(self.buf)
                self.buf.clear()
                return None, f"the input ended inside a message body ({have} of {n} bytes)", False
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return body, None, True

    def _json_end(self) -> Optional[int]:
        """Where the JSON value at the start of the buffer ends (None if it
        does not parse)."""
        try:
            text = self.buf.decode("utf-8", "replace")
            _, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return None
        return len(text[:end].encode("utf-8", "replace"))

    # ---- frames ---------------------------------------------------------------
    def next(self) -> Tuple[str, Any]:
        """``("message", body_bytes)``, ``("error", why)`` (answer it, go on),
        ``("eof", why_or_None)``."""
        length: Optional[int] = None
        problem: Optional[str] = None
        seen = 0
        while True:
            line = self._line()
            if line is None:
                return "eof", ("the input ended inside a message header" if seen else None)
            stripped = line.strip()
            if not stripped:
                if seen == 0:
                    continue  # stray blank line between messages
                break
            seen += 1
            low = stripped.lower()
            j = low.find(b"content-length:")
            if j > 0:
                # junk (e.g. the rest of a mis-framed body) glued to a header
                problem = problem or f"unexpected bytes before a header: {_show(stripped[:j])}"
                # a fresh message starts here: forget what came before
                length, problem, seen = None, None, 1
                stripped, low = stripped[j:], low[j:]
                self.errors += 1
                log.warning("skipped %d bytes of junk before a header", j)
            if low.startswith(b"content-length:"):
                value = stripped[len(b"content-length:"):].strip()
                if value.isdigit() and len(value) < 19:
                    length = int(value)
                else:
                    problem = f"invalid Content-Length: {_show(value)}"
            elif b":" in stripped and low.split(b":", 1)[0].replace(b"-", b"").isalnum():
                pass  # Content-Type and friends
            else:
                problem = problem or f"not a message header: {_show(stripped)}"
        if problem is None and length is None:
            problem = "a message without a Content-Length header"
        if problem is not None:
            self.errors += 1
            return "error", problem
        assert length is not None
        if length > MAX_BODY:
            # Not read at all (a client that means it would make us wait for,
            # and hold, gigabytes): what follows is junk up to the next header.
            self.errors += 1
            return "error", f"a message of {length} bytes is over the {MAX_BODY}-byte limit"
        body, why, ok = self._body(length)
        if body is None:
            if ok:
                self.errors += 1
                return "error", why
            return "eof", why
        if why is not None:
            self.errors += 1
            log.warning("%s", why)
        return "message", body


def _show(data: bytes, limit: int = 60) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return repr(text + ("…" if len(data) > limit else ""))


def decode(body: bytes) -> Tuple[Optional[dict], Optional[bytes]]:
    """A message body as a JSON object, or the error frame to answer it with."""
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        return None, error_frame(None, PARSE_ERROR, "tilelint: the message is not valid UTF-8")
    except ValueError as exc:
        return None, error_frame(None, PARSE_ERROR, f"tilelint: invalid JSON: {exc}")
    if not isinstance(data, dict):
        return None, error_frame(None, INVALID_REQUEST,
                                 "tilelint: a JSON-RPC message must be a JSON object "
                                 "(batches are not supported)")
    if data.get("jsonrpc") != "2.0" or not (
            "method" in data or "result" in data or "error" in data):
        msg_id = data.get("id") if isinstance(data.get("id"), (int, str)) else None
        return None, error_frame(msg_id, INVALID_REQUEST,
                                 "tilelint: not a JSON-RPC 2.0 request, notification or response")
    method = data.get("method")
    if "method" in data and not isinstance(method, str):
        msg_id = data.get("id") if isinstance(data.get("id"), (int, str)) else None
        return None, error_frame(msg_id, INVALID_REQUEST, "tilelint: `method` must be a string")
    if "id" in data and "method" in data and not isinstance(data["id"], (int, str)):
        return None, error_frame(None, INVALID_REQUEST, "tilelint: a request id must be a number "
                                                        "or a string")
    return data, None


class Early:
    """What ``answer_initialize_early`` did."""

    def __init__(self) -> None:
        self.frames: List[Tuple[str, Any]] = []  # read, not yet handled (in order)
        self.init_id: Any = None
        self.init_result: Optional[Dict[str, Any]] = None
        self.seconds = 0.0


def answer_initialize_early(framer: Framer, out) -> Early:
    """Read up to the first message; answer it at once when it is ``initialize``."""
    early = Early()
    t0 = time.perf_counter()
    while True:
        kind, value = framer.next()
        early.frames.append((kind, value))
        if kind != "message":
            if kind == "eof":
                return early
            continue  # an error frame: handled (answered) later, in order
        data, _ = decode(value)
        if data is None or data.get("method") != "initialize" or "id" not in data \
                or not isinstance(data.get("params"), dict):
            return early
        result = initialize_result(data["params"])
        try:
            out.write(frame({"jsonrpc": "2.0", "id": data["id"], "result": result}))
            out.flush()
        except (OSError, ValueError):
            return early
        early.init_id = data["id"]
        early.init_result = result
        early.seconds = time.perf_counter() - t0
        return early
