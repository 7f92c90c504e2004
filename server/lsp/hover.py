"""``textDocument/hover``: Markdown about the pipelined loop, scheduled
statement, buffer or ``num_stages=`` under the cursor."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from . import convert, hover_text
from .lazy import model, pipeline

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.model import Analysis, Branch, KernelResult, LoopResult, Settings, Span

METHOD = lsp.TEXT_DOCUMENT_HOVER
log = logging.getLogger(__name__)

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
WHATIF_STAGES = (1, 2, 3, 4, 5)


def word_at(line: str, col: int) -> Tuple[Optional[str], int, int]:
    for m in _WORD.finditer(line):
        if m.start() <= col <= m.end():
            return m.group(0), m.start(), m.end()
    return None, col, col


def _within(span: Optional[Span], line: int, col: int) -> bool:
    return span is not None and span.contains(line, col)


def kernel_at(analysis: Analysis, line: int, col: int) -> Optional[KernelResult]:
    """The kernel under the cursor (the innermost; the first instantiation)."""
    inside = [kr for kr in analysis.kernels if _within(kr.kernel.span, line, col)]
    if not inside:
        inside = [kr for kr in analysis.kernels if _within(kr.kernel.factory_span, line, col)]
    if not inside:
        return None
    top = max(kr.kernel.span.line for kr in inside)
    return next(kr for kr in inside if kr.kernel.span.line == top)


def loop_under(kr: KernelResult, line: int, col: int, attr: str) -> Optional[LoopResult]:
    for lr in kr.loops:
        if _within(getattr(lr.loop, attr), line, col):
            return lr
    return None


def branch_at(kr: KernelResult, line: int, col: int, header: bool
              ) -> Optional[Tuple[Branch, Optional[Span]]]:
    """The Python ``if``/``for`` (``elaborate.py``) whose arm not built holds
    the position, with that arm's span; with ``header``, else the innermost
    one whose first line is the position's line (span None)."""
    for b in kr.branches:
        for sp in b.dropped:
            if sp.line <= line <= sp.end_line:
                return b, sp
    if header:
        on = [b for b in kr.branches if b.span.line == line]
        if on:
            return max(on, key=lambda b: b.span.col), None
    return None


def whatif_rows(module, kernel, config_label: Optional[str], settings: Settings, target: str,
                loop_line: int) -> List[Tuple[int, Dict[str, object]]]:
    """The hovered loop with ``num_stages`` set to 1…5, from the what-if engine
    (``whatif.sweep_num_stages`` on the hovered instance; worker thread)."""
    from tilelint.analysis import pipeline, values, whatif
    if module is None:
        return []
    try:
        (inst,) = values.instances(module, kernel, pipeline.kernel_overrides(kernel, settings),
                                   select=config_label)[:1]
        points = whatif.sweep_num_stages(kernel, inst.env, WHATIF_STAGES, target, loop_line)
    except Exception:  # pragma: no cover - the engine never raises on bad code
        log.exception("what-if of %s", kernel.name)
        return []
    rows = []
    for pt in points:
        lr, sync = pt.loop_at(loop_line)
        row: Dict[str, object] = {}
        if lr is not None:
            if lr.pipelined:
                row["stage"] = ",".join(hover_text.int_text(s.stage) for s in lr.statements)
                row["order"] = ",".join(hover_text.int_text(s.order) for s in lr.statements)
                # only the multiplied buffers (every other one has a single version)
                row["versions"] = ", ".join(f"{v.buffer}×{v.versions}" for v in lr.versions
                                            if v.versions > 1) or "—"
            else:
                row["stage"] = row["order"] = "not pipelined"
            if sync is not None:
                row["sync"] = f"sync×{sync.syncthreads}" + (
                    ", wait " + ", ".join(map(str, sync.cp_async_wait))
                    if sync.cp_async_wait else "")
            row["bytes"] = pt.total_bytes  # what the budget applies to (arena + static)
        rows.append((pt.num_stages, row))
    return rows


def _shown_path(path: str) -> str:
    """``path`` as the user would type it for ``tilelint explain``: relative to
    the server's working directory (the workspace) when it lies below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _verified_for(doc, lines: Sequence[str]):
    """The document's compiler verification when it applies to ``lines``."""
    v = doc.verified
    if v is None or len(lines) != v.line_count or "".join(lines) != v.source:
        return None
    return v


def instance_labels(module, kernel, settings: Settings) -> List[str]:
    """Every instance label of ``kernel``, the default one first (worker thread)."""
    from tilelint.analysis import pipeline, values
    try:
        return list(values.instance_labels(module, kernel,
                                           pipeline.kernel_overrides(kernel, settings)))
    except Exception:  # pragma: no cover - the resolver never raises on bad code
        log.exception("instance labels of %s", kernel.name)
        return []


async def _binding_footer(ls, doc, analysis: Analysis, kr: KernelResult) -> Optional[str]:
    """Which instantiation the hover describes and which others exist (the
    ``binding`` setting picks one by label)."""
    module = analysis.module
    if module is None:
        return None
    settings = ls.settings_for(doc)
    cache = doc.__dict__.setdefault("_labels", {})
    key = (id(module), kr.kernel.name, settings)
    labels = cache.get(key)
    if labels is None:
        loop = asyncio.get_running_loop()
        labels = await loop.run_in_executor(ls.executor, instance_labels, module, kr.kernel,
                                            settings)
        cache.clear()  # one module at a time
        cache[key] = labels
        cache["_module"] = module  # keeps id(module) from being reused while cached
    chosen = pipeline.selected_label(ls.selection_for(doc), kr.kernel.name, kr.kernel.factory)
    return hover_text.binding_footer(kr, labels, chosen, settings.all_bindings)


async def handler(ls, params: lsp.HoverParams) -> Optional[lsp.Hover]:
    doc = ls.store.get(params.text_document.uri)
    if doc is None:
        return None
    await ls.store.current(doc)
    analysis = doc.analysis
    if analysis is None:
        return None
    lines = doc.analysis_lines
    enc = ls.encoding()
    line, col = convert.from_position(lines, params.position, enc)
    kr = kernel_at(analysis, line, col)
    if kr is None:
        return None
    text: Optional[str] = None
    span: Optional[Span] = None

    dropped = branch_at(kr, line, col, header=False)
    if dropped is not None:
        # Not built for this instance: no loop, buffer or statement hover.
        text = hover_text.branch_hover(kr, dropped[0], dropped[1])
        span = dropped[1]
    lr = None if text is not None else loop_under(kr, line, col, "num_stages_span")
    if lr is not None:
        span = lr.loop.num_stages_span
        rows = await asyncio.get_running_loop().run_in_executor(
            ls.executor, whatif_rows, analysis.module, kr.kernel, kr.config_label,
            ls.settings_for(doc), analysis.target, lr.loop.span.line)
        text = hover_text.whatif_hover(lr, rows, kr.shared_budget)
    if text is None:
        lr = loop_under(kr, line, col, "iter_span")
        if lr is not None:
            span = lr.loop.iter_span
            text = hover_text.loop_hover(kr, lr, analysis.target, uri=doc.uri,
                                         path=_shown_path(analysis.path))
            verified = _verified_for(doc, lines)
            if verified is not None:
                sc = verified.sync_for(kr.kernel.name, lr.loop.span.line)
                if sc is not None:
                    text += "\n\n" + hover_text.fit(
                        hover_text.compiler_sync(sc, verified.compiler))
    if text is None:
        word, ws, we = word_at(convert.strip_eol(lines[line - 1]) if line - 1 < len(lines) else "", col)
        allocs = {a.name: a for a in kr.kernel.allocs}
        alloc = next((a for a in kr.kernel.allocs if _within(a.span, line, col)
                      and (word is None or word == a.name or word not in allocs)), None)
        if alloc is None and word in allocs:
            alloc = allocs[word]
            span = model.Span(line, ws, line, we)
        if alloc is not None:
            info = next((b for b in kr.buffers if b.name == alloc.name), None)
            text = hover_text.buffer_hover(kr, alloc, info)
            span = span or alloc.span
    if text is None:
        for lr in kr.loops:
            if not lr.pipelined:
                continue
            ss = next((s for s in lr.statements if _within(s.stmt.span, line, col)), None)
            if ss is not None:
                span = ss.stmt.span
                text = hover_text.statement_hover(kr, lr, ss, analysis.target, uri=doc.uri)
                break
    if text is None:
        header = branch_at(kr, line, col, header=True)
        if header is not None:
            text = hover_text.branch_hover(kr, header[0], None)
            span = model.Span(line, header[0].span.col, line,
                              len(convert.strip_eol(lines[line - 1])) if line - 1 < len(lines)
                              else header[0].span.col)
    if text is None:
        return None
    footer = await _binding_footer(ls, doc, analysis, kr)
    if footer:
        text += "\n\n" + footer
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text),
        range=convert.span_to_range(span, lines, enc) if span is not None else None)
