"""The server under target "ascend": flag-spill diagnostics and the loop hover
with the auto-scheduler's order and the Ascend C sync preview."""

from __future__ import annotations

import pytest
from lsp_helpers import REPO, close_doc, codes, open_doc, uri_for, wait_published, wait_until
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"
INIT_OPTIONS = {"tilelint": {"target": "ascend"}}


def _pos(text: str, needle: str, offset: int = 0) -> lsp.Position:
    idx = text.index(needle) + offset
    return lsp.Position(line=text.count("\n", 0, idx),
                        character=idx - (text.rfind("\n", 0, idx) + 1))


@pytest.mark.asyncio(loop_scope="module")
async def test_ascend_spill_and_hover(client: LanguageClient):
    # tests/fixtures/ascend/vec_n4_v4.py: the compiler spills MTE3_V and V_MTE3
    # to locks (tests/test_ascend_parity.py), so TL301 is published twice, on
    # the loop.  The server does not solve the loop schedule on its analysis
    # thread: the first publish has the predicted order and says so, and once
    # the solve is done the document is analysed again.
    pytest.importorskip("z3")
    text = (REPO / "tests" / "fixtures" / "ascend" / "vec_n4_v4.py").read_text()
    uri = uri_for("vec_n4_v4.py", "ascend")
    open_doc(client, uri, text)
    first = await wait_published(client, uri, 1)
    # The level-order prediction of this loop misses the spill (measured when
    # it was the only model): the first publish is the provisional one.
    assert codes(first.diagnostics).count("TL301") < 2

    def solved():
        pubs = client.published.get(uri, [])
        return pubs and codes(pubs[-1].diagnostics).count("TL301") == 2 and \
            all("predicted" not in d.message for d in pubs[-1].diagnostics)
    await wait_until(solved, 60, "the re-analysis with the solved schedule")
    assert len(client.published[uri]) >= 2
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=_pos(text, "T.Pipelined", 4)))
    value = h.contents.value
    assert "(Ascend)" in value
    assert "auto-scheduler's order" in value and "II 693 cycles" in value
    assert "```cpp" in value and "asc_lock(PIPE_MTE3" in value
    # InsertSync gave MTE3_V 16 ids; RewriteFlagToBuf turned 8 of them into
    # locks (the asc_lock ×8 above) and 8 stay flags.
    assert "`MTE3_V` 16 → 8 **spilled to locks**" in value
    close_doc(client, uri)


def test_second_ascend_loop_shows_its_own_schedule():
    """Every pipelined loop of an Ascend kernel is modelled: the hover of the
    second one shows that loop's tasks (the lines of its own body), not the
    first one's."""
    import re

    from tilelint.analysis import Settings, analyze
    from tilelint.server.lsp import hover_text
    src = (REPO / "tests" / "fixtures" / "ascend" / "gemm_v2.py").read_text()
    lines = src.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "T.Pipelined" in ln)
    body = [ln for ln in lines[at:] if ln.startswith(" " * 16) or "T.Pipelined" in ln]
    end = at + len(body)
    src2 = "".join(lines[:end] + body + lines[end:])  # the same loop twice
    a = analyze(src2, "x.py", Settings(target="ascend"))
    kr = a.kernels[0]
    first, second = [lr for lr in kr.loops if lr.loop.kind == "pipelined"][:2]
    assert "auto-scheduler" in hover_text.loop_hover(kr, first, "ascend") or \
        "predicted order" in hover_text.loop_hover(kr, first, "ascend")
    text = hover_text.loop_hover(kr, second, "ascend")
    assert "Not modelled" not in text
    own = set(range(second.loop.span.line + 1, second.loop.span.line + len(body)))
    rows = [int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", text, re.M)]
    assert rows and set(rows) <= own
