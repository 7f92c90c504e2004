"""``textDocument/inlayHint``: ``stage 0 · order 1`` after each scheduled
statement, ``×3 = 24 KiB @ 0`` after each multi-versioned allocation.
Toggled by the ``inlayHints`` setting (bool, or ``{stages, buffers}``)."""

from __future__ import annotations

from typing import List

from lsprotocol import types as lsp

from . import convert, settings as settings_mod
from .lazy import render

METHOD = lsp.TEXT_DOCUMENT_INLAY_HINT
OPTIONS = lsp.InlayHintOptions(resolve_provider=False)


def _in_range(pos: lsp.Position, rng: lsp.Range) -> bool:
    return (rng.start.line, rng.start.character) <= (pos.line, pos.character) <= (
        rng.end.line, rng.end.character)


async def handler(ls, params: lsp.InlayHintParams) -> List[lsp.InlayHint]:
    doc = ls.store.get(params.text_document.uri)
    if doc is None:
        return []
    options = ls.options_for(doc)
    stages = settings_mod.inlay_enabled(options, "stages")
    buffers = settings_mod.inlay_enabled(options, "buffers")
    if not (stages or buffers):
        return []
    await ls.store.current(doc)
    analysis = doc.analysis
    if analysis is None:
        return []
    lines = doc.analysis_lines
    enc = ls.encoding()
    hints: List[lsp.InlayHint] = []
    seen_kernels = set()
    for kr in analysis.kernels:
        if id(kr.kernel) in seen_kernels:
            continue  # several instantiations: hint the first one only
        seen_kernels.add(id(kr.kernel))
        if stages:
            for lr in kr.loops:
                if not lr.pipelined:
                    continue
                for ss in lr.statements:
                    if ss.stage is None and ss.order is None:
                        continue
                    sp = ss.stmt.span
                    pos = convert.position(lines, sp.end_line, sp.end_col, enc)
                    hints.append(lsp.InlayHint(
                        position=pos,
                        label=f"stage {hover_text_v(ss.stage)} · order {hover_text_v(ss.order)}",
                        kind=None, padding_left=True))
        if buffers:
            by_name = {b.name: b for b in kr.buffers}
            for alloc in kr.kernel.allocs:
                info = by_name.get(alloc.name)
                if info is None or not info.versions or info.versions < 2:
                    continue
                label = f"×{info.versions}"
                if info.bytes is not None:
                    label += f" = {render.kib(info.bytes)}"
                if info.offset is not None:
                    label += f" @ {info.offset}"
                sp = alloc.span
                hints.append(lsp.InlayHint(
                    position=convert.position(lines, sp.end_line, sp.end_col, enc),
                    label=label, kind=None, padding_left=True))
    rng = params.range
    hints = [h for h in hints if _in_range(h.position, rng)]
    hints.sort(key=lambda h: (h.position.line, h.position.character))
    return hints


def hover_text_v(x) -> str:
    return "?" if x is None else str(x)
