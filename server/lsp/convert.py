"""The one place where analysis results become LSP types.

The analysis speaks 1-based lines and 0-based *code-point* columns
(:class:`tilelint.analysis.Span`); LSP speaks 0-based lines and columns in
the negotiated position encoding (UTF-16 code units unless the client offered
something else).  Everything that crosses that border goes through here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from tilelint.server.ruledocs import rule_url as _ruledocs_url

if TYPE_CHECKING:  # pragma: no cover - the analysis is imported lazily
    from tilelint.analysis.model import Diagnostic, Fix, Span

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"

SOURCE = "tilelint"

# --------------------------------------------------------------------------
# Rule documentation links
# --------------------------------------------------------------------------


def rule_url(code: str) -> Optional[str]:
    """The documentation page of a rule (``codeDescription.href``): the
    installed page's file URI, or None when there is none (then the
    diagnostic carries no ``codeDescription``).  Kept per code and
    ``TILELINT_DOCS_URL`` (every diagnostic of every edit asks; finding the
    page stats the installation's files)."""
    key = (code, os.environ.get("TILELINT_DOCS_URL"))
    if key in _URLS:
        return _URLS[key]
    url: Optional[str] = None
    try:
        found = _ruledocs_url(code)
        if found:
            url = str(found)
    except Exception:
        pass
    if len(_URLS) < 4096:
        _URLS[key] = url
    return url


_URLS: Dict[Tuple[str, Optional[str]], Optional[str]] = {}


# --------------------------------------------------------------------------
# Columns: code points <-> encoding units
# --------------------------------------------------------------------------


def encoding_name(kind: object) -> str:
    """Normalise a ``PositionEncodingKind`` (or None) to utf-8 / utf-16 / utf-32."""
    value = getattr(kind, "value", kind)
    if value in (UTF8, UTF32):
        return str(value)
    return UTF16


def strip_eol(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n") or line.endswith("\r"):
        return line[:-1]
    return line


def to_units(line: str, col: int, encoding: str) -> int:
    """Code-point column ``col`` of ``line`` as a column in ``encoding`` units."""
    if col <= 0:
        return 0
    text = strip_eol(line)
    if col > len(text):
        col = len(text)
    if encoding == UTF32 or text.isascii():
        return col
    head = text[:col]
    if encoding == UTF16:
        return col + sum(1 for ch in head if ord(ch) > 0xFFFF)
    return len(head.encode("utf-8", "surrogatepass"))


def from_units(line: str, units: int, encoding: str) -> int:
    """A column in ``encoding`` units as a code-point column (clamped to the line)."""
    if units <= 0:
        return 0
    text = strip_eol(line)
    if encoding == UTF32 or text.isascii():
        return min(units, len(text))
    used = 0
    for i, ch in enumerate(text):
        if encoding == UTF16:
            step = 2 if ord(ch) > 0xFFFF else 1
        else:
            step = len(ch.encode("utf-8", "surrogatepass"))
        if used + step > units:
            return i
        used += step
    return len(text)


def line_length_units(line: str, encoding: str) -> int:
    text = strip_eol(line)
    return to_units(text, len(text), encoding)


# --------------------------------------------------------------------------
# Positions and ranges
# --------------------------------------------------------------------------


def _line(lines: Sequence[str], idx: int) -> str:
    if 0 <= idx < len(lines):
        return lines[idx]
    return ""


def position(lines: Sequence[str], line1: int, col: int, encoding: str) -> lsp.Position:
    """1-based line / code-point column → LSP position (clamped into the document)."""
    idx = line1 - 1
    if idx < 0:
        return lsp.Position(line=0, character=0)
    if idx >= len(lines):
        last = max(len(lines) - 1, 0)
        return lsp.Position(line=last, character=line_length_units(_line(lines, last), encoding))
    return lsp.Position(line=idx, character=to_units(lines[idx], col, encoding))


def span_to_range(span: Span, lines: Sequence[str], encoding: str) -> lsp.Range:
    start = position(lines, span.line, span.col, encoding)
    end = position(lines, span.end_line, span.end_col, encoding)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return lsp.Range(start=start, end=end)


def from_position(lines: Sequence[str], pos: lsp.Position, encoding: str) -> Tuple[int, int]:
    """LSP position → (1-based line, code-point column)."""
    idx = max(pos.line, 0)
    return idx + 1, from_units(_line(lines, idx), pos.character, encoding)


def end_of_line(lines: Sequence[str], idx: int, encoding: str) -> lsp.Position:
    return lsp.Position(line=idx, character=line_length_units(_line(lines, idx), encoding))


# --------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------

_SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "information": lsp.DiagnosticSeverity.Information,
    "info": lsp.DiagnosticSeverity.Information,
    "hint": lsp.DiagnosticSeverity.Hint,
}

# Rules whose diagnostics mark code that does nothing (greyed out by editors).
_UNNECESSARY = ("TL900",)


def severity(name: str) -> lsp.DiagnosticSeverity:
    return _SEVERITY.get(name, lsp.DiagnosticSeverity.Warning)


def fix_data(fix: Fix, lines: Sequence[str], encoding: str) -> Dict[str, Any]:
    """A fix as plain JSON: its edits already in LSP coordinates of this version."""
    return {
        "title": fix.title,
        "kind": fix.kind,
        "preferred": bool(fix.preferred),
        "edits": [
            {"range": range_json(span_to_range(e.span, lines, encoding)), "newText": e.new_text}
            for e in fix.edits
        ],
    }


def range_json(r: lsp.Range) -> Dict[str, Any]:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


def range_from_json(obj: Any) -> Optional[lsp.Range]:
    try:
        s, e = obj["start"], obj["end"]
        return lsp.Range(start=lsp.Position(line=int(s["line"]), character=int(s["character"])),
                         end=lsp.Position(line=int(e["line"]), character=int(e["character"])))
    except Exception:
        return None


def diagnostic(d: Diagnostic, uri: str, lines: Sequence[str], encoding: str,
               version: Optional[int] = None) -> lsp.Diagnostic:
    """One analysis diagnostic as an LSP diagnostic.

    ``data`` carries everything a code action needs, so code actions never
    re-analyse: the fixes (edits in this document version's coordinates) and
    the rule code.  (No version: an unchanged pull report keeps the client's
    copy, so the data must not change when only the version does.)
    """
    message = d.message
    if d.configs:
        message += f" (with {'; '.join(d.configs)})"
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=uri, range=span_to_range(r.span, lines, encoding)),
            message=r.message)
        for r in d.related
    ]
    data: Dict[str, Any] = {"code": d.code, "fixes": [fix_data(f, lines, encoding) for f in d.fixes]}
    if d.kernel:
        data["kernel"] = d.kernel
    href = rule_url(d.code)
    return lsp.Diagnostic(
        range=span_to_range(d.span, lines, encoding),
        message=message,
        severity=severity(d.severity),
        code=d.code,
        code_description=lsp.CodeDescription(href=href) if href else None,
        source=SOURCE,
        related_information=related or None,
        tags=[lsp.DiagnosticTag.Unnecessary] if d.code in _UNNECESSARY else None,
        data=data,
    )


def diagnostics(diags: Sequence[Diagnostic], uri: str, lines: Sequence[str], encoding: str,
                version: Optional[int] = None) -> List[lsp.Diagnostic]:
    return [diagnostic(d, uri, lines, encoding, version) for d in diags]


def data_fixes(diag: lsp.Diagnostic) -> List[Dict[str, Any]]:
    """The fixes a published diagnostic carries (tolerates clients that mangle data)."""
    data = diag.data
    if not isinstance(data, dict):
        return []
    fixes = data.get("fixes")
    if not isinstance(fixes, list):
        return []
    out = []
    for f in fixes:
        if not isinstance(f, dict) or not isinstance(f.get("edits"), list):
            continue
        edits: List[lsp.TextEdit] = []
        for e in f["edits"]:
            r = range_from_json(e.get("range")) if isinstance(e, dict) else None
            if r is None or not isinstance(e.get("newText"), str):
                edits = []
                break
            edits.append(lsp.TextEdit(range=r, new_text=e["newText"]))
        if edits:
            out.append({"title": str(f.get("title", "Fix")), "kind": f.get("kind") or "quickfix",
                        "preferred": bool(f.get("preferred")), "edits": edits})
    return out


def diagnostic_code(diag: lsp.Diagnostic) -> Optional[str]:
    if isinstance(diag.code, str) and diag.code:
        return diag.code
    if isinstance(diag.data, dict) and isinstance(diag.data.get("code"), str):
        return diag.data["code"]
    return None
