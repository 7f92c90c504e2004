"""docs/rules/ is generated from the registry and its examples are real:
each bad example produces its code, each good example clears it."""

from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze
from tilelint.analysis.rules import RULES
from tilelint.server import ruledocs

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules"

# Codes that a single file cannot demonstrate: TL900 needs `select`, TL910/TL911
# come from verification with the installed compiler.
NOT_DEMONSTRABLE = {"TL900", "TL910", "TL911"}


def test_every_registered_code_has_a_current_page():
    for r in RULES:
        assert (DOCS / f"{r.code}.md").is_file(), f"no page for {r.code}"
    stale = ruledocs.stale_pages(DOCS)
    assert not stale, ("pages out of date with the registry: " + ", ".join(stale)
                       + " — run `python -m tilelint.server.ruledocs`")


def test_stale_detection_works(tmp_path):
    ruledocs.generate(tmp_path)
    assert ruledocs.stale_pages(tmp_path) == []
    page = tmp_path / "TL101.md"
    page.write_text(page.read_text() + "edited\n")
    (tmp_path / "TL000.md").write_text("old code\n")
    assert ruledocs.stale_pages(tmp_path) == ["TL101.md", "TL000.md"]
    ruledocs.generate(tmp_path)
    assert ruledocs.stale_pages(tmp_path) == [] and not (tmp_path / "TL000.md").exists()


def test_page_content_comes_from_the_registry():
    r = ruledocs.get_rule("TL101")
    page = (DOCS / "TL101.md").read_text()
    assert page.startswith(f"# TL101: {r.name}\n")
    for part in (r.summary, r.what, r.why, r.fix, r.bad_example, r.good_example):
        assert part.strip() in page


def test_rule_url():
    assert ruledocs.rule_url("tl101") == ruledocs.DOCS_BASE_URL + "TL101.md"
    assert ruledocs.rule_path("TL101") == "docs/rules/TL101.md"


def test_rule_url_configurable(monkeypatch):
    monkeypatch.setenv("TILELINT_DOCS_URL", "https://example.org/rules")
    assert ruledocs.rule_url("TL201") == "https://example.org/rules/TL201.md"


def _codes(example: str, target: str):
    a = analyze(ruledocs.runnable_example(example), "example.py", Settings(target=target))
    return [d.code for d in a.diagnostics]


@pytest.mark.parametrize("code", [r.code for r in RULES])
def test_examples_produce_and_clear_the_diagnostic(code):
    rule = ruledocs.get_rule(code)
    if code in NOT_DEMONSTRABLE:
        pytest.skip(f"{code} cannot be shown by one file")
    bad, good = rule.bad_example, rule.good_example
    if not (ruledocs.is_runnable(bad) and ruledocs.is_runnable(good)):
        pytest.xfail(f"{code}: the registry has no runnable bad/good example pair "
                     f"(a whole file, or a T.Pipelined loop snippet without '...')")
    target = ruledocs.example_target(rule)
    assert code in _codes(bad, target), f"{code}: bad example on {target} does not produce it"
    good_codes = _codes(good, ruledocs.example_target(rule, "good")
                        if ruledocs.example_target(rule, "good") != "sm_80" else target)
    assert code not in good_codes, f"{code}: good example still produces it"
    assert "TL000" not in good_codes


def test_runnable_wrapper_is_a_kernel():
    src = ruledocs.runnable_example("for k in T.Pipelined(n, num_stages=2):\n"
                                    "    T.copy(A[by * 128, k * 32], A_shared)\n"
                                    "    T.copy(B[k * 32, bx * 128], B_shared)\n"
                                    "    T.gemm(A_shared, B_shared, C_local)")
    a = analyze(src, "w.py", Settings(target="sm_80"))
    assert a.diagnostics == ()
    # 2 versions of 8 KiB + 8 KiB: 32 KiB (the compiler's ns=2 GEMM row in NOTES).
    assert a.kernels[0].shared_bytes == 32768
