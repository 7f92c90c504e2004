"""``textDocument/codeAction``: quick fixes from ``Diagnostic.data`` only (the
analysis never runs here), ``# noqa: CODE`` insertion, and
``source.fixAll.tilelint`` (every non-conflicting preferred fix)."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from . import convert

FIX_ALL = "source.fixAll.tilelint"
METHOD = lsp.TEXT_DOCUMENT_CODE_ACTION
OPTIONS = lsp.CodeActionOptions(
    code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll, FIX_ALL],
    resolve_provider=False)

def _wanted(only: Optional[Sequence[str]], kind: str) -> bool:
    if not only:
        return kind.startswith(lsp.CodeActionKind.QuickFix.value) or kind == FIX_ALL
    return any(kind == o or kind.startswith(o + ".") for o in only)


def _edit(ls, uri: str, version: Optional[int], edits: List[lsp.TextEdit]) -> lsp.WorkspaceEdit:
    if ls.capability("workspace.workspace_edit.document_changes"):
        return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=edits)])
    return lsp.WorkspaceEdit(changes={uri: edits})


def _version(doc, diag: lsp.Diagnostic) -> Optional[int]:
    """The document version a diagnostic's fix edits belong to, when known:
    the current version if the newest analysis is of it and still reports
    this diagnostic; otherwise None (an unversioned edit)."""
    if doc is None or doc.analysis_version != doc.version:
        return None
    for d in doc.lsp_diagnostics:
        if d.range == diag.range and d.code == diag.code and d.message == diag.message:
            return doc.version
    return None


def noqa_edit(lines: Sequence[str], line_idx: int, code: str, enc: str) -> Optional[lsp.TextEdit]:
    """Append ``# noqa: CODE`` to a line, or add CODE to its noqa list.

    The analysis reads the first ``# noqa`` of a line; when that one sits in a
    string literal, or the line ends inside a string or with a backslash, no
    edit is offered (it could not work without changing the code)."""
    if not (0 <= line_idx < len(lines)):
        return None
    text = convert.strip_eol(lines[line_idx])
    comment, open_string = _scan(text)
    from tilelint.analysis.directives import NOQA
    m = NOQA.search(text)
    if m is not None:
        if comment is None or m.start() < comment:
            return None
        if m.group("codes") is None:
            return None  # a bare noqa comment (no codes) already silences everything
        codes = [c.strip().upper() for c in m.group("codes").split(",")]
        if code in codes:
            return None
        end = m.end("codes")
        pos = lsp.Position(line=line_idx, character=convert.to_units(text, end, enc))
        return lsp.TextEdit(range=lsp.Range(start=pos, end=pos), new_text=f", {code}")
    if open_string or (comment is None and text.rstrip().endswith("\\")):
        return None
    stripped = text.rstrip()
    sep = "  " if stripped else ""
    pos = lsp.Position(line=line_idx, character=convert.to_units(text, len(stripped), enc))
    end_pos = lsp.Position(line=line_idx, character=convert.to_units(text, len(text), enc))
    return lsp.TextEdit(range=lsp.Range(start=pos, end=end_pos), new_text=f"{sep}# noqa: {code}")


def _scan(text: str) -> Tuple[Optional[int], bool]:
    """(index of the comment's ``#`` or None, does the line end inside a string).

    Only this line is seen: a line that starts inside a multi-line string is
    misread, which at worst offers an edit inside that string's text."""
    from tilelint.analysis.directives import string_end
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            return i, False
        if ch in "'\"":
            i = string_end(text, i)
            if i < 0:
                return None, True
            continue
        i += 1
    return None, False


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    a0, a1 = (a.start.line, a.start.character), (a.end.line, a.end.character)
    b0, b1 = (b.start.line, b.start.character), (b.end.line, b.end.character)
    if a0 == a1 == b0 == b1:
        return True
    return a0 < b1 and b0 < a1 or a0 == b0


async def handler(ls, params: lsp.CodeActionParams):
    uri = params.text_document.uri
    doc = ls.store.get(uri)
    only = params.context.only
    enc = ls.encoding()
    actions: List[lsp.CodeAction] = []
    if _wanted(only, lsp.CodeActionKind.QuickFix.value):
        for diag in params.context.diagnostics:
            if diag.source not in (None, convert.SOURCE):
                continue
            version = _version(doc, diag)
            for fix in convert.data_fixes(diag):
                actions.append(lsp.CodeAction(
                    title=fix["title"], kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag],
                    is_preferred=fix["preferred"] or None,
                    edit=_edit(ls, uri, version, fix["edits"])))
            code = convert.diagnostic_code(diag)
            if code and code != "TL001" and doc is not None:
                te = noqa_edit(doc.lines, diag.range.start.line, code, enc)
                if te is not None:
                    actions.append(lsp.CodeAction(
                        title=f"Suppress {code} on this line (# noqa: {code})",
                        kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag],
                        edit=_edit(ls, uri, doc.version, [te])))
    if doc is not None and (_wanted(only, FIX_ALL) or (only and any(
            o in (lsp.CodeActionKind.Source.value, lsp.CodeActionKind.SourceFixAll.value)
            for o in only))):
        await ls.store.current(doc)
        chosen: List[lsp.TextEdit] = []
        used: List[lsp.Diagnostic] = []
        for diag in doc.lsp_diagnostics:
            fixes = convert.data_fixes(diag)
            if not fixes:
                continue
            fix = next((f for f in fixes if f["preferred"]), fixes[0])
            if any(_overlaps(e.range, c.range) for e in fix["edits"] for c in chosen):
                continue
            chosen.extend(fix["edits"])
            used.append(diag)
        if chosen:
            actions.append(lsp.CodeAction(
                title="tilelint: fix all", kind=FIX_ALL, diagnostics=used,
                edit=_edit(ls, uri, doc.analysis_version, chosen)))
    return actions or None
