"""Output formats of ``tilelint check``: text (with source excerpts), concise,
JSON, SARIF 2.1.0 and GitHub Actions workflow commands.

A ``Finding`` is a diagnostic of the analysis placed in a file and tagged with
the target(s) it was found for.  Positions inside ``Finding`` keep the
analysis' convention: 1-based lines, 0-based code-point columns, end exclusive.
Text, SARIF and GitHub output show 1-based columns; JSON keeps 0-based ones
(the same numbers as ``tilelint explain --format json``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from tilelint.analysis.model import Diagnostic, Fix, Related, Span

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_VERSION = "2.1.0"

# Severities that make ``tilelint check`` exit 1.
FAILING = ("error", "warning")
_SEVERITY_RANK = {"error": 0, "warning": 1, "information": 2, "hint": 3}


@dataclass(frozen=True)
class Finding:
    path: str  # as shown to the user (relative to the working directory when inside it)
    code: str
    severity: str
    message: str
    span: Span
    targets: Tuple[str, ...] = ()
    kernel: Optional[str] = None
    related: Tuple[Related, ...] = ()
    fixes: Tuple[Fix, ...] = ()
    configs: Tuple[str, ...] = ()

    @property
    def target(self) -> Optional[str]:
        return self.targets[0] if self.targets else None

    @classmethod
    def from_diagnostic(cls, path: str, d: Diagnostic, targets: Sequence[str] = ()) -> "Finding":
        return cls(path=path, code=d.code, severity=d.severity, message=d.message, span=d.span,
                   targets=tuple(targets), kernel=d.kernel, related=d.related, fixes=d.fixes,
                   configs=d.configs)

    def sort_key(self) -> Tuple[object, ...]:
        return (self.path, self.span.line, self.span.col, self.code, self.message)


@dataclass(frozen=True)
class FileError:
    """A file that could not be checked (unreadable, not UTF-8, binary)."""

    path: str
    message: str


def merge_targets(per_target: Sequence[Tuple[str, Sequence[Diagnostic]]], path: str) -> List[Finding]:
    """Diagnostics of one file from several targets → findings; a diagnostic
    that several targets report identically becomes one finding tagged with
    all of them."""
    merged: Dict[Tuple[object, ...], Tuple[Diagnostic, List[str]]] = {}
    for target, diags in per_target:
        for d in diags:
            key = (d.code, d.severity, d.span, d.message)
            if key in merged:
                if target not in merged[key][1]:
                    merged[key][1].append(target)
            else:
                merged[key] = (d, [target])
    out = [Finding.from_diagnostic(path, d, ts) for d, ts in merged.values()]
    out.sort(key=Finding.sort_key)
    return out


def display_path(path: os.PathLike | str, cwd: Optional[str] = None) -> str:
    """``path`` relative to the working directory if it is inside it."""
    ap = os.path.abspath(os.fspath(path))
    base = os.path.abspath(cwd or os.getcwd())
    try:
        rel = os.path.relpath(ap, base)
    except ValueError:  # another drive on Windows
        return ap
    return ap if rel.startswith("..") else rel


def is_failing(f: Finding) -> bool:
    return f.severity in FAILING


# --------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------


class Style:
    """ANSI colours, or nothing."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def bold(self, t: str) -> str:
        return self._wrap("1", t)

    def dim(self, t: str) -> str:
        return self._wrap("2", t)

    def cyan(self, t: str) -> str:
        return self._wrap("36", t)

    def blue(self, t: str) -> str:
        return self._wrap("1;34", t)

    def severity(self, sev: str, t: str) -> str:
        code = {"error": "1;31", "warning": "1;33", "information": "1;36", "hint": "1;32"}.get(sev, "1")
        return self._wrap(code, t)


def use_color(stream) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR") or os.environ.get("CLICOLOR_FORCE"):
        return True
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def _target_tag(f: Finding, show_targets: bool) -> str:
    if not show_targets or not f.targets:
        return ""
    return " [" + ", ".join(f.targets) + "]"


def header_line(f: Finding, style: Style, show_targets: bool = False) -> str:
    """``path:line:col: CODE message`` with a 1-based column."""
    loc = f"{f.path}:{f.span.line}:{f.span.col + 1}:"
    return (f"{style.bold(loc)} {style.severity(f.severity, f.code)} {f.message}"
            + style.dim(_target_tag(f, show_targets)))


def _expand_tabs(line: str, col: int) -> Tuple[str, int]:
    """Replace tabs by 4 spaces and move ``col`` with them, so carets line up."""
    before = line[:col].replace("\t", "    ")
    return line.replace("\t", "    "), len(before)


def excerpt(f: Finding, lines: Sequence[str], style: Style) -> List[str]:
    """The source line of a finding with a caret underline (and, for a
    multi-line span, the underline runs to the end of the first line)."""
    ln = f.span.line
    if not (1 <= ln <= len(lines)):
        return []
    raw = lines[ln - 1].rstrip("\r\n")
    text, start = _expand_tabs(raw, min(f.span.col, len(raw)))
    if f.span.end_line == ln:
        _, end = _expand_tabs(raw, min(max(f.span.end_col, f.span.col), len(raw)))
    else:
        end = len(text)
    width = max(1, end - start)
    gutter = len(str(ln))
    bar = style.blue("|")
    pad = " " * gutter
    return [
        f"{pad} {bar}",
        f"{style.blue(str(ln))} {bar} {text}",
        f"{pad} {bar} {' ' * start}{style.severity(f.severity, '^' * width)}",
    ]


def format_text(findings: Sequence[Finding], sources: Mapping[str, str], *,
                style: Optional[Style] = None, show_targets: bool = False,
                file_errors: Sequence[FileError] = (), show_source: bool = True,
                files_checked: Optional[int] = None) -> str:
    style = style or Style(False)
    out: List[str] = []
    cache: Dict[str, List[str]] = {}
    for f in findings:
        out.append(header_line(f, style, show_targets))
        if show_source:
            if f.path not in cache:
                cache[f.path] = sources.get(f.path, "").splitlines()
            ex = excerpt(f, cache[f.path], style)
            if ex:
                out.extend(ex)
            for r in f.related:
                out.append(f"{' ' * len(str(f.span.line))} {style.blue('=')} "
                           f"{style.cyan('note')}: {f.path}:{r.span.line}:{r.span.col + 1}: {r.message}")
            for fix in f.fixes[:1]:
                out.append(f"{' ' * len(str(f.span.line))} {style.blue('=')} "
                           f"{style.cyan('help')}: {fix.title}")
            out.append("")
    for e in file_errors:
        out.append(f"{style.bold(e.path + ':')} {style.severity('error', 'error')}: {e.message}")
    if file_errors and show_source:
        out.append("")
    out.append(summary(findings, file_errors, files_checked))
    return "\n".join(out) + "\n"


def format_concise(findings: Sequence[Finding], *, style: Optional[Style] = None,
                   show_targets: bool = False, file_errors: Sequence[FileError] = (),
                   files_checked: Optional[int] = None) -> str:
    return format_text(findings, {}, style=style, show_targets=show_targets,
                       file_errors=file_errors, show_source=False, files_checked=files_checked)


def summary(findings: Sequence[Finding], file_errors: Sequence[FileError] = (),
            files_checked: Optional[int] = None) -> str:
    if not findings and not file_errors:
        checked = "" if files_checked is None else (
            f" ({files_checked} file{'s' if files_checked != 1 else ''} checked)")
        return f"All checks passed!{checked}"
    counts = Counter(f.severity for f in findings)
    parts = []
    for sev, word in (("error", "error"), ("warning", "warning"),
                      ("information", "info"), ("hint", "hint")):
        n = counts.get(sev, 0)
        if n:
            parts.append(f"{n} {word}{'s' if n != 1 and word not in ('info',) else ''}")
    n = len(findings)
    text = f"Found {n} finding{'s' if n != 1 else ''}"
    if parts:
        text += " (" + ", ".join(parts) + ")"
    if file_errors:
        k = len(file_errors)
        text += f"; {k} file{'s' if k != 1 else ''} could not be checked"
    return text + "."


def format_statistics(findings: Sequence[Finding], names: Mapping[str, str],
                      as_json: bool = False) -> str:
    counts = Counter(f.code for f in findings)
    sev = {f.code: f.severity for f in findings}
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if as_json:
        return json.dumps([{"code": c, "name": names.get(c, ""), "count": n,
                            "severity": sev[c]} for c, n in rows], indent=2) + "\n"
    if not rows:
        return ""
    width = max(len(str(n)) for _, n in rows)
    return "".join(f"{n:>{width}}\t{c}\t[{sev[c]}] {names.get(c, '')}".rstrip() + "\n"
                   for c, n in rows)


# --------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------


def _span_json(s: Span) -> Dict[str, int]:
    return {"line": s.line, "column": s.col, "end_line": s.end_line, "end_column": s.end_col}


def finding_json(f: Finding, url: Optional[str] = None) -> Dict[str, object]:
    out: Dict[str, object] = {
        "path": f.path,
        "code": f.code,
        "severity": f.severity,
        "message": f.message,
        **_span_json(f.span),
        "target": f.target,
        "targets": list(f.targets),
        "kernel": f.kernel,
        "fixes": [
            {"title": fx.title, "preferred": fx.preferred,
             "edits": [{**_span_json(e.span), "new_text": e.new_text} for e in fx.edits]}
            for fx in f.fixes
        ],
        "related": [{**_span_json(r.span), "message": r.message} for r in f.related],
    }
    if f.configs:
        out["configs"] = list(f.configs)
    if url:
        out["url"] = url
    return out


def format_json(findings: Sequence[Finding], url_for=None) -> str:
    return json.dumps([finding_json(f, url_for(f.code) if url_for else None) for f in findings],
                      indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------
# SARIF 2.1.0
# --------------------------------------------------------------------------

_SARIF_LEVEL = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}


def _uri(path: str) -> str:
    p = path.replace(os.sep, "/")
    from urllib.parse import quote
    if os.path.isabs(path):
        return Path(path).as_uri()
    return quote(p, safe="/:@-._~!$&'()*+,;=")


def _region(s: Span) -> Dict[str, int]:
    end_line = max(s.end_line, s.line)
    end_col = s.end_col if (end_line > s.line or s.end_col >= s.col) else s.col
    return {"startLine": max(1, s.line), "startColumn": s.col + 1,
            "endLine": max(1, end_line), "endColumn": end_col + 1}


def _location(path: str, s: Span, message: Optional[str] = None) -> Dict[str, object]:
    loc: Dict[str, object] = {"physicalLocation": {
        "artifactLocation": {"uri": _uri(path), **({} if os.path.isabs(path) else {"uriBaseId": "%SRCROOT%"})},
        "region": _region(s),
    }}
    if message:
        loc["message"] = {"text": message}
    return loc


def sarif_rule(rule: Mapping[str, object], url: Optional[str]) -> Dict[str, object]:
    """A reportingDescriptor from a registry entry given as a mapping with
    code, name, severity, summary and (optional) a markdown help text."""
    desc: Dict[str, object] = {"id": rule["code"]}
    if rule.get("name"):
        desc["name"] = rule["name"]
    if rule.get("summary"):
        desc["shortDescription"] = {"text": rule["summary"]}
    if rule.get("what"):
        desc["fullDescription"] = {"text": rule["what"]}
    if url:
        desc["helpUri"] = url
    if rule.get("help"):
        desc["help"] = {"text": rule["help"], "markdown": rule.get("help_markdown") or rule["help"]}
    desc["defaultConfiguration"] = {"level": _SARIF_LEVEL.get(str(rule.get("severity")), "warning")}
    return desc


def format_sarif(findings: Sequence[Finding], rules: Sequence[Mapping[str, object]] = (),
                 *, url_for=None, version: str = "0", file_errors: Sequence[FileError] = (),
                 root: Optional[str] = None) -> str:
    rule_list: List[Dict[str, object]] = []
    index: Dict[str, int] = {}
    for r in rules:
        code = str(r["code"])
        if code in index:
            continue
        index[code] = len(rule_list)
        rule_list.append(sarif_rule(r, url_for(code) if url_for else None))
    # Codes that are reported but not registered still get a descriptor.
    for f in findings:
        if f.code not in index:
            index[f.code] = len(rule_list)
            rule_list.append(sarif_rule({"code": f.code, "severity": f.severity},
                                        url_for(f.code) if url_for else None))
    results = []
    for f in findings:
        res: Dict[str, object] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": f.message},
            "locations": [_location(f.path, f.span)],
        }
        if f.related:
            res["relatedLocations"] = [
                {"id": i, **_location(f.path, r.span, r.message)} for i, r in enumerate(f.related)]
        if f.fixes:
            res["fixes"] = [{
                "description": {"text": fx.title},
                "artifactChanges": [{
                    "artifactLocation": {"uri": _uri(f.path),
                                         **({} if os.path.isabs(f.path) else {"uriBaseId": "%SRCROOT%"})},
                    "replacements": [{"deletedRegion": _region(e.span),
                                      "insertedContent": {"text": e.new_text}}
                                     for e in fx.edits],
                }],
            } for fx in f.fixes if fx.edits]
            if not res["fixes"]:
                del res["fixes"]
        props: Dict[str, object] = {}
        if f.targets:
            props["targets"] = list(f.targets)
        if f.kernel:
            props["kernel"] = f.kernel
        if f.configs:
            props["configs"] = list(f.configs)
        if props:
            res["properties"] = props
        results.append(res)
    base = Path(root or os.getcwd()).resolve().as_uri().rstrip("/") + "/"
    run: Dict[str, object] = {
        "tool": {"driver": {
            "name": "tilelint",
            "version": version,
            "semanticVersion": version,
            "rules": rule_list,
        }},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": base}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{
            "executionSuccessful": True,
            "toolExecutionNotifications": [
                {"level": "error", "message": {"text": e.message},
                 "locations": [{"physicalLocation": {"artifactLocation": {
                     "uri": _uri(e.path),
                     **({} if os.path.isabs(e.path) else {"uriBaseId": "%SRCROOT%"})}}}]}
                for e in file_errors],
        }],
        "results": results,
    }
    doc = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------
# GitHub Actions workflow commands
# --------------------------------------------------------------------------

_GH_LEVEL = {"error": "error", "warning": "warning", "information": "notice", "hint": "notice"}


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def format_github(findings: Sequence[Finding], file_errors: Sequence[FileError] = (),
                  show_targets: bool = False) -> str:
    out = []
    for f in findings:
        s = f.span
        props = [f"file={_gh_prop(f.path.replace(os.sep, '/'))}", f"line={s.line}",
                 f"col={s.col + 1}"]
        if s.end_line >= s.line:
            props.append(f"endLine={s.end_line}")
            if s.end_line == s.line and s.end_col > s.col:
                props.append(f"endColumn={s.end_col + 1}")
        props.append(f"title={_gh_prop(f.code)}")
        msg = f"{f.code} {f.message}" + _target_tag(f, show_targets)
        out.append(f"::{_GH_LEVEL.get(f.severity, 'warning')} {','.join(props)}::{_gh_data(msg)}")
    for e in file_errors:
        out.append(f"::error file={_gh_prop(e.path.replace(os.sep, '/'))},"
                   f"title=tilelint::{_gh_data(e.message)}")
    return "\n".join(out) + ("\n" if out else "")
