"""Unit tests of server pieces that need no client: settings parsing, the
idle cycle collector, the stdio framer."""

from __future__ import annotations

import asyncio
import gc
import os

import pytest

from tilelint.analysis import pipeline
from tilelint.server.lsp import settings as S, stdio
from tilelint.server.lsp.app import IdleCollector


@pytest.mark.parametrize("layers, mode", [
    ([], "off"),
    ([{"compiler": {"verify": "onSave"}}], "onSave"),
    ([{"compiler.verify": "onsave"}], "onSave"),
    ([{"verify": True}], "onSave"),  # [tool.tilelint] verify = true
    ([{"verify": True}, {"compiler": {"verify": "off"}}], "off"),  # the client wins
    ([{"compiler": {"verify": "sometimes"}}], "off"),
])
def test_verify_mode(layers, mode):
    assert S.verify_mode(S.merge(*layers)) == mode


def test_trusted():
    assert S.trusted({"tilelint": {}}, None)
    assert not S.trusted({"trusted": False}, {"target": "sm_90"})
    assert not S.trusted({}, {"trusted": False})


def test_binding_selection():
    assert S.binding_selection(S.merge()) == ()
    assert S.binding_selection(S.merge({"binding": "all"})) == ()
    assert S.to_settings(S.merge({"binding": "all"})).all_bindings
    assert S.binding_selection(S.merge({"binding": "num_stages=3"})) == (("*", "num_stages=3"),)
    sel = S.binding_selection(S.merge({"binding": {"gemm": "a", "other": "b"}}))
    assert pipeline.selected_label(sel, "gemm_kernel", "gemm") == "a"
    assert pipeline.selected_label(sel, "x", None) is None
    assert pipeline.selected_label((("*", "c"), ("x", "d")), "x", None) == "d"
    assert not S.to_settings(S.merge({"binding": {"gemm": "a"}})).all_bindings


def test_idle_collector_runs_when_idle():
    was = gc.isenabled()
    gc.disable()
    try:
        async def main():
            c = IdleCollector(delay=0.05)
            busy = [True]
            c.busy = lambda: busy[0]
            c.poke()
            await asyncio.sleep(0.2)
            assert c.collections == 0  # still busy: postponed
            busy[0] = False
            await asyncio.sleep(0.2)
            assert c.collections == 1
        asyncio.run(main())
    finally:
        if was:
            gc.enable()


def _frames(data: bytes):
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    f = stdio.Framer(r)
    out = []
    while True:
        kind, value = f.next()
        out.append((kind, value))
        if kind == "eof":
            break
    os.close(r)
    return out


def test_framer_good_and_bad():
    good = stdio.frame({"jsonrpc": "2.0", "method": "x"})
    out = _frames(b"\r\n" + good + b"content-length: 2\r\nContent-Type: a/b\r\n\r\n{}"
                  + b"Content-Length: -1\r\n\r\n{}" + good
                  + b"Content-Length: 30\r\n\r\n{\"a\": 1}")
    kinds = [k for k, _ in out]
    assert kinds == ["message", "message", "error", "message", "eof"]
    assert out[1][1] == b"{}"
    assert "Content-Length" in out[2][1]
    assert "inside a message body" in out[4][1]  # the declared 30 bytes never came
    # A body cut short by the end of input ends the session.
    out = _frames(b"Content-Length: 50\r\n\r\n{\"a\": ")
    assert out[-1][0] == "eof" and "inside a message body" in out[-1][1]


def test_decode_errors():
    assert stdio.decode(b'{"jsonrpc": "2.0", "method": "m"}')[0] == {"jsonrpc": "2.0",
                                                                    "method": "m"}
    for body in (b"nope", b"[]", b'{"jsonrpc": "1.0", "method": "m"}',
                 b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "m"}',
                 b'{"jsonrpc": "2.0", "method": 5}', b"\xff"):
        data, err = stdio.decode(body)
        assert data is None and err.startswith(b"Content-Length: ")


def test_fast_positions_equal_libcst():
    """frontend.fast_positions (the server's per-chunk hot path) gives exactly
    libcst's PositionProvider map."""
    import pathlib

    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from tilelint.analysis.frontend import fast_positions as _positions

    root = pathlib.Path(__file__).resolve().parents[1]
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "fixtures").rglob("*.py"))]
    texts += ["", "\n", "x", "x\r\ny\r\n", "def f():\n\tpass", "a = '''x\ny'''\n",
              "if x:\n    pass\n# c\n", "x = (1,\n     2)  # c"]
    assert len(texts) > 20
    for text in texts:
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:  # the deliberately broken parsing fixtures
            continue
        ours = _positions(module)[0]  # (positions, leaves)
        # ``_positions`` keys by ``id(node)`` with plain (line, col, end line,
        # end col) tuples; the module keeps every node alive meanwhile.
        theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        assert ours == {id(node): (r.start.line, r.start.column, r.end.line, r.end.column)
                        for node, r in theirs.items()}
