"""Hostile protocol input on stdio (issue 7 §4): raw bytes written to the
server's stdin.  Every malformed frame gets a JSON-RPC error (id null) or is
logged, and a well-formed request sent right after it is answered."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List

import pytest
from lsp_helpers import DATA, REPO

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Raw:
    def __init__(self, early_init: bool = True) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
        if not early_init:
            env["TILELINT_NO_EARLY_INIT"] = "1"
        self.proc = subprocess.Popen([sys.executable, "-m", "tilelint.server"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.q: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.seen: List[Dict[str, Any]] = []
        self.n = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            msg = json.loads(out.read(length))
            if msg.get("method") == "workspace/configuration" and "id" in msg:
                self.send(frame({"jsonrpc": "2.0", "id": msg["id"], "result": [None]}))
                continue
            self.q.put(msg)

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, method: str, params: Any = None, raw_suffix: bytes = b"") -> int:
        self.n += 1
        self.send(frame({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
                  + raw_suffix)
        return self.n

    def wait(self, pred: Callable[[Dict[str, Any]], bool], timeout: float = 30.0) -> Dict[str, Any]:
        for m in self.seen:
            if pred(m):
                self.seen.remove(m)
                return m
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            assert left > 0, f"no matching message; got {self.seen[-5:]}"
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if pred(m):
                return m
            self.seen.append(m)

    def response(self, rid: Any, timeout: float = 30.0) -> Dict[str, Any]:
        return self.wait(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def error(self, timeout: float = 30.0) -> Dict[str, Any]:
        return self.wait(lambda m: m.get("id") is None and "error" in m, timeout)

    def alive(self) -> None:
        """A follow-up request is answered."""
        uri = (DATA / "never_opened.py").as_uri()
        rid = self.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                  "position": {"line": 0, "character": 0}})
        assert self.response(rid)["result"] is None

    def close(self) -> None:
        try:
            rid = self.request("shutdown")
            self.response(rid, 10)
            self.send(frame({"jsonrpc": "2.0", "method": "exit"}))
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


@pytest.fixture(scope="module")
def server():
    s = Raw()
    rid = s.request("initialize", {"processId": None, "rootUri": DATA.as_uri(),
                                   "capabilities": {}})
    init = s.response(rid)
    assert init["result"]["capabilities"]["hoverProvider"] is True
    s.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    yield s
    s.close()
    assert s.proc.returncode == 0


def test_invalid_json(server: Raw):
    body = b'{"jsonrpc": "2.0", "id": 99, "method": '
    server.send(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    err = server.error()
    assert err["error"]["code"] == PARSE_ERROR and "invalid JSON" in err["error"]["message"]
    server.alive()


def test_invalid_utf8_and_non_objects(server: Raw):
    for body, code in ((b'{"x": "\xff\xfe"}', PARSE_ERROR), (b"[1, 2]", INVALID_REQUEST),
                       (b"42", INVALID_REQUEST), (b'{"id": 5, "method": "hover"}', INVALID_REQUEST)):
        server.send(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        m = server.wait(lambda m: "error" in m and "method" not in m)
        assert m["error"]["code"] == code, (body, m)
    server.alive()


def test_bad_content_length(server: Raw):
    body = json.dumps({"jsonrpc": "2.0", "id": "lost", "method": "shutdown"}).encode()
    server.send(b"Content-Length: twelve\r\n\r\n" + body)
    err = server.error()
    assert err["error"]["code"] == PARSE_ERROR
    assert "Content-Length" in err["error"]["message"]
    server.alive()  # the junk body is skipped, the next header re-synchronises


def test_missing_content_length(server: Raw):
    server.send(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}")
    assert "without a Content-Length" in server.error()["error"]["message"]
    server.alive()


def test_content_length_too_small(server: Raw):
    body = json.dumps({"jsonrpc": "2.0", "id": "short", "method": "shutdown"}).encode()
    server.send(b"Content-Length: 10\r\n\r\n" + body)
    assert server.error()["error"]["code"] == PARSE_ERROR
    server.alive()


def test_content_length_too_large(server: Raw):
    # The body claims 500 bytes; the next message follows right after the JSON.
    uri = (DATA / "never_opened.py").as_uri()
    body = json.dumps({"jsonrpc": "2.0", "id": "big", "method": "textDocument/hover",
                       "params": {"textDocument": {"uri": uri},
                                  "position": {"line": 0, "character": 0}}}).encode()
    server.send(b"Content-Length: 500\r\n\r\n" + body)
    server.alive()
    assert server.response("big")["result"] is None
    # Nothing follows: answered once the input stalls (2 s).
    server.send(b"Content-Length: 900\r\n\r\n" + body.replace(b'"big"', b'"big2"'))
    assert server.response("big2", 15)["result"] is None
    server.alive()


def test_header_without_body(server: Raw):
    server.send(b"Content-Length: 40\r\n\r\n")
    server.alive()
    assert "without its body" in server.error()["error"]["message"]


def test_over_the_size_limit(server: Raw):
    server.send(b"Content-Length: 999999999999\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 1}')
    assert "over the" in server.error()["error"]["message"]
    server.alive()


def test_junk_is_bounded(server: Raw):
    before = server.rss_kib()
    chunk = b"x" * (1 << 20)
    for _ in range(32):  # 32 MiB without a line break or header
        server.send(chunk)
    server.send(b"\r\n\r\n")
    server.alive()
    assert server.rss_kib() - before < 16 * 1024  # KiB
    server.wait(lambda m: m.get("id") is None and "error" in m)


def test_unknown_methods(server: Raw):
    rid = server.request("tilelint/noSuchMethod", {})
    assert server.response(rid)["error"]["code"] == METHOD_NOT_FOUND
    server.send(frame({"jsonrpc": "2.0", "method": "tilelint/noSuchNotification", "params": {}}))
    server.send(frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 12345}}))
    server.alive()


def test_requests_for_unopened_uri(server: Raw):
    uri = (DATA / "not_open_anywhere.py").as_uri()
    td = {"textDocument": {"uri": uri}}
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}
    rid = server.request("textDocument/inlayHint", {**td, "range": rng})
    assert server.response(rid)["result"] in (None, [])
    rid = server.request("textDocument/codeAction", {**td, "range": rng,
                                                     "context": {"diagnostics": []}})
    assert server.response(rid)["result"] in (None, [])
    rid = server.request("textDocument/hover", {**td, "position": {"line": 3, "character": 1}})
    assert server.response(rid)["result"] is None
    server.alive()


CAPS = [
    {},
    {"general": {"positionEncodings": ["utf-32", "utf-8"]},
     "notebookDocument": {"synchronization": {}},
     "textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": False}},
     "workspace": {"fileOperations": {"didCreate": True}}},
    {"general": {"positionEncodings": ["latin-1", "utf-8"]},
     "textDocument": {"rename": {"prepareSupport": True}, "synchronization": {"willSave": False}}},
]


@pytest.mark.parametrize("caps", CAPS)
def test_early_initialize_matches_pygls(caps):
    """The answer written before pygls is imported equals pygls' own."""
    results = []
    for early in (True, False):
        s = Raw(early_init=early)
        try:
            rid = s.request("initialize", {"processId": None, "rootUri": None,
                                           "capabilities": caps})
            results.append(s.response(rid)["result"])
        finally:
            s.close()
    assert results[0] == results[1]
