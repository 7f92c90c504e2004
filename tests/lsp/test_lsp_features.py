"""Hovers, inlay hints and code actions (each quick fix applied and re-checked)."""

from __future__ import annotations

import re

import pytest
from lsp_helpers import (
    apply_edits,
    change,
    close_doc,
    codes,
    edits_of,
    open_doc,
    read,
    uri_for,
    wait_published,
)
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

CLIENT = "push"


def pos_of(text: str, needle: str, nth: int = 0, offset: int = 0) -> lsp.Position:
    """Position of the nth occurrence of needle (ASCII lines: code points = UTF-16)."""
    idx = -1
    for _ in range(nth + 1):
        idx = text.index(needle, idx + 1)
    idx += offset
    line = text.count("\n", 0, idx)
    col = idx - (text.rfind("\n", 0, idx) + 1)
    return lsp.Position(line=line, character=col)


async def hover(client, uri, pos):
    return await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos))


@pytest.fixture(scope="module")
def gemm_text():
    return read("gemm_ns3.py")


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_pipelined_schedule(client: LanguageClient, gemm_text):
    uri = uri_for("gemm_ns3.py", "hover")
    open_doc(client, uri, gemm_text)
    await wait_published(client, uri, 1)
    h = await hover(client, uri, pos_of(gemm_text, "T.Pipelined", offset=4))
    assert h is not None and h.contents.kind == lsp.MarkupKind.Markdown
    md = h.contents.value
    assert "num_stages = 3" in md
    # Compiler (sm_80, ns=3, NOTES.md): depth 3, A_shared and B_shared ×3, 49152 B.
    assert md.splitlines()[1].startswith("depth 3 · ×3 A_shared B_shared · smem 49152 of ")
    # One row per statement (stage [0, 0, 2]): the gemm runs iteration k in the
    # generated loop and n-2, n-1 in the two epilogue steps; its line links to it.
    assert "| line | statement | stage | order | prologue | steady state | epilogue |" in md
    gemm_line = gemm_text[:gemm_text.index("T.gemm(A_shared")].count("\n") + 1
    assert f"| [{gemm_line}][L{gemm_line}] | `T.gemm(" in md, md
    assert "| 2 | 2 | — | k | n-2, n-1 |" in md
    assert f"[L{gemm_line}]: {uri}#L{gemm_line}" in md
    # The steady-state code (wait_group 2 in the loop, NOTES.md); the epilogue's
    # waits 1, 0 are counted, not shown.
    assert "```cuda" in md and "cp_async_wait<2>" in md and "cp_async_wait<0>" not in md
    assert "`cp.async.wait_group` 1, 0" in md
    # The statement under the cursor: T.gemm is stage 2, order 2.
    h = await hover(client, uri, pos_of(gemm_text, "T.gemm(A_shared", offset=2))
    md = h.contents.value
    assert "stage **2** · order **2**" in md, md
    assert "reads:" in md and "`A_shared` (3 versions)" in md
    # compiler (sm_80): commit; wait_group<2>; __syncthreads; gemm at the loop's end
    assert "right before it: `cp_async_commit()` `cp_async_wait<2>()` `__syncthreads()`" in md
    h = await hover(client, uri, pos_of(gemm_text, "T.copy(A[", offset=2))
    assert "stage **0** · order **0**" in h.contents.value
    h = await hover(client, uri, pos_of(gemm_text, "T.copy(B[", offset=2))
    assert "stage **0** · order **1**" in h.contents.value
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_buffer_and_arena(client: LanguageClient, gemm_text):
    uri = uri_for("gemm_ns3.py", "buffer")
    open_doc(client, uri, gemm_text)
    await wait_published(client, uri, 1)
    # On the allocation: 128 × 32 fp16 = 8192 B per version, ×3 = 24576 B at offset 0.
    h = await hover(client, uri, pos_of(gemm_text, "A_shared = T.alloc_shared", offset=1))
    md = h.contents.value
    assert "128 × 32 × float16 × 3 versions = 24576 bytes" in md, md
    assert "arena offset **0**" in md
    assert "```text" in md and "B_shared @ 24576" in md
    # On a use of the name: B_shared sits after A_shared.
    h = await hover(client, uri, pos_of(gemm_text, "B_shared, C_local)", offset=1))
    md = h.contents.value
    assert "arena offset **24576**" in md and "49152 bytes" in md
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_num_stages_what_if(client: LanguageClient, gemm_text):
    uri = uri_for("gemm_ns3.py", "whatif")
    open_doc(client, uri, gemm_text)
    await wait_published(client, uri, 1)
    h = await hover(client, uri, pos_of(gemm_text, "num_stages=num_stages)", offset=3))
    md = h.contents.value
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| (\d)(?: ◀)? \|.*$", md, re.M)}
    assert sorted(rows) == [1, 2, 3, 4, 5], md
    # Dynamic shared memory per num_stages (compiler, NOTES.md): 16384, 32768, 49152.
    assert "16384" in rows[1] and "32768" in rows[2] and "49152" in rows[3]
    assert "◀" in rows[3]
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_outside_kernels_and_unopened(client: LanguageClient, gemm_text):
    uri = uri_for("gemm_ns3.py", "outside")
    open_doc(client, uri, gemm_text)
    await wait_published(client, uri, 1)
    assert await hover(client, uri, lsp.Position(line=0, character=2)) is None
    assert await hover(client, uri_for("gemm_ns3.py", "never-opened"),
                       lsp.Position(line=20, character=16)) is None
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_inlay_hints(client: LanguageClient, gemm_text):
    uri = uri_for("gemm_ns3.py", "inlay")
    open_doc(client, uri, gemm_text)
    await wait_published(client, uri, 1)
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(start=lsp.Position(line=0, character=0),
                        end=lsp.Position(line=200, character=0))))
    labels = {(h.position.line, h.label) for h in hints}
    lines = gemm_text.splitlines()
    def line_of(s):
        return next(i for i, ln in enumerate(lines) if s in ln)
    assert (line_of("T.copy(A["), "stage 0 · order 0") in labels
    assert (line_of("T.copy(B["), "stage 0 · order 1") in labels
    assert (line_of("T.gemm("), "stage 2 · order 2") in labels
    assert (line_of("A_shared = T.alloc"), "×3 = 24 KiB @ 0") in labels
    assert (line_of("B_shared = T.alloc"), "×3 = 24 KiB @ 24576") in labels
    # Hints sit at the end of their statement.
    h = next(h for h in hints if h.label == "stage 2 · order 2")
    assert h.position.character == len(lines[line_of("T.gemm(")])
    close_doc(client, uri)


async def actions(client, uri, diags, only=None, rng_=None):
    r = rng_ or (diags[0].range if diags else lsp.Range(
        start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)))
    return await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=r,
        context=lsp.CodeActionContext(diagnostics=list(diags), only=only))) or []


async def apply_and_recheck(client, uri, text, action, version):
    new_text = apply_edits(text, edits_of(action, uri))
    change(client, uri, version, None, new_text)
    pub = await wait_published(client, uri, version)
    assert "TL001" not in codes(pub.diagnostics), pub.diagnostics
    return new_text, pub


def changed_lines(a: str, b: str):
    la, lb = a.splitlines(), b.splitlines()
    assert len(la) == len(lb)
    return [i for i, (x, y) in enumerate(zip(la, lb, strict=True)) if x != y]


@pytest.mark.asyncio(loop_scope="module")
async def test_quickfix_tl201_set_num_stages(client: LanguageClient):
    uri = uri_for("smem_over.py", "qf201")
    text = read("smem_over.py")
    open_doc(client, uri, text)
    pub = await wait_published(client, uri, 1)
    diag = next(d for d in pub.diagnostics if d.code == "TL201")
    acts = await actions(client, uri, [diag])
    fix = next(a for a in acts if "num_stages=5" in a.title)
    assert fix.kind == lsp.CodeActionKind.QuickFix and fix.is_preferred
    new_text, pub = await apply_and_recheck(client, uri, text, fix, 2)
    assert "TL201" not in codes(pub.diagnostics)
    assert changed_lines(text, new_text) == [19]
    assert "num_stages=5" in new_text.splitlines()[19]
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_quickfix_tl101_renumber_orders(client: LanguageClient):
    uri = uri_for("dup_order.py", "qf101")
    text = read("dup_order.py")
    open_doc(client, uri, text)
    pub = await wait_published(client, uri, 1)
    tl101 = [d for d in pub.diagnostics if d.code == "TL101"]
    assert tl101, codes(pub.diagnostics)
    # The compiler blames the second statement with the same order (the B copy).
    assert tl101[0].range.start.line == text.splitlines().index(
        next(ln for ln in text.splitlines() if "T.copy(B[" in ln))
    acts = await actions(client, uri, tl101)
    fix = next(a for a in acts if a.edit and "noqa" not in a.title)
    new_text, pub = await apply_and_recheck(client, uri, text, fix, 2)
    assert "TL101" not in codes(pub.diagnostics)
    assert changed_lines(text, new_text) == [19]
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_quickfix_tl106_remove_num_stages(client: LanguageClient):
    uri = uri_for("manual_ns.py", "qf106")
    text = read("manual_ns.py")
    open_doc(client, uri, text)
    pub = await wait_published(client, uri, 1)
    tl106 = [d for d in pub.diagnostics if d.code == "TL106"]
    assert tl106, codes(pub.diagnostics)
    acts = await actions(client, uri, tl106)
    fix = next(a for a in acts if a.edit and "noqa" not in a.title)
    new_text, pub = await apply_and_recheck(client, uri, text, fix, 2)
    assert "TL106" not in codes(pub.diagnostics)
    assert "num_stages" not in new_text.splitlines()[19]
    assert changed_lines(text, new_text) == [19]
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_noqa_insertion(client: LanguageClient):
    uri = uri_for("smem_over.py", "noqa")
    text = read("smem_over.py")
    open_doc(client, uri, text)
    pub = await wait_published(client, uri, 1)
    diag = next(d for d in pub.diagnostics if d.code == "TL201")
    acts = await actions(client, uri, [diag])
    noqa = next(a for a in acts if "noqa" in a.title)
    new_text, pub = await apply_and_recheck(client, uri, text, noqa, 2)
    assert "TL201" not in codes(pub.diagnostics)
    line = diag.range.start.line
    assert changed_lines(text, new_text) == [line]
    assert new_text.splitlines()[line].endswith("  # noqa: TL201")
    # A second code on the same line extends the list instead of adding a comment.
    fake = lsp.Diagnostic(range=diag.range, message="x", code="TL203", source="tilelint",
                          data={"code": "TL203", "fixes": []})
    acts = await actions(client, uri, [fake])
    noqa2 = next(a for a in acts if "noqa" in a.title)
    newer = apply_edits(new_text, edits_of(noqa2, uri))
    assert newer.splitlines()[line].endswith("# noqa: TL201, TL203")
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_fix_all(client: LanguageClient):
    uri = uri_for("smem_over.py", "fixall")
    # Two kernels' worth of problems: smem overflow and (when the rule lands) TL106.
    text = read("smem_over.py") + "\n\n" + read("manual_ns.py").replace(
        "def gemm(", "def gemm_b(").replace("kernel = gemm(", "kernel_b = gemm_b(")
    open_doc(client, uri, text)
    pub = await wait_published(client, uri, 1)
    fixable = [d for d in pub.diagnostics if d.data and d.data.get("fixes")]
    assert fixable
    acts = await actions(client, uri, [], only=["source.fixAll.tilelint"])
    assert len(acts) == 1 and acts[0].kind == "source.fixAll.tilelint"
    new_text, pub = await apply_and_recheck(client, uri, text, acts[0], 2)
    left = [d for d in pub.diagnostics if d.data and d.data.get("fixes")]
    assert not left, left
    close_doc(client, uri)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_an_arm_the_builder_does_not_build(client: LanguageClient):
    """``if use_bias:`` on a factory default (False) is decided when the kernel
    is built (tilelang 0.1.15's eager builder, elaborate.py): the hover on the
    arm says it is not built and for which value, and shows no buffer hover for
    the allocation inside it (the compiler's arena has no Bias_shared:
    tests/fixtures/parity/README.md); on the ``if`` line, what is built."""
    from pathlib import Path
    text = (Path(__file__).parents[1] / "fixtures" / "parity" / "elab_dropped_alloc.py").read_text()
    uri = uri_for("elab_dropped_alloc.py", "branch")
    open_doc(client, uri, text)
    await wait_published(client, uri, 1)
    h = await hover(client, uri, pos_of(text, "Bias_shared = T.alloc_shared", offset=2))
    assert h is not None
    md = h.contents.value
    assert md.startswith("**Not built**"), md
    assert "use_bias = False" in md and "nothing is built" in md, md
    assert "bytes" not in md, md  # not the buffer hover
    # (occurrence 0 is in the fixture's first-line comment)
    h = await hover(client, uri, pos_of(text, "if use_bias:", nth=1, offset=1))
    md = h.contents.value
    assert md.startswith("**Decided when the kernel is built**"), md
    assert "not built: lines 19–20" in md, md
    h = await hover(client, uri, pos_of(text, "C_local[i, j] += Bias_shared", offset=2))
    md = h.contents.value
    assert md.startswith("**Not built**") and "lines 27–28" in md, md
    # A built statement keeps its own hover.
    h = await hover(client, uri, pos_of(text, "A_shared = T.alloc_shared", offset=1))
    assert "Not built" not in h.contents.value
    close_doc(client, uri)
