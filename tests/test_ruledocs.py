"""docs/rules/ is generated from the registry and its examples are real:
each bad example produces its code, each good example clears it."""

from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze
from tilelint.analysis.rules import RULES, Rule
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


def test_rule_url_is_the_installed_page(monkeypatch):
    """tilelint has no public site: a rule links to its page as installed
    (here, a checkout: docs/rules/), a file that exists and is current."""
    monkeypatch.delenv("TILELINT_DOCS_URL", raising=False)
    page = ruledocs.rule_page("tl101")
    assert page is not None and page.is_file()
    assert page.read_text(encoding="utf-8") == ruledocs.expected_pages()["TL101.md"]
    url = ruledocs.rule_url("tl101")
    assert url == page.as_uri() and url.startswith("file://")
    assert ruledocs.rule_path("TL101") == "docs/rules/TL101.md"
    # No page, no link.
    assert ruledocs.rule_url("TL999") is None and ruledocs.rule_page("TL999") is None
    assert ruledocs.rule_url("../README") is None
    assert "url" not in ruledocs.rule_dict(Rule("TL999", "no-page", "error", "a rule without a page"))


def test_rule_url_configurable(monkeypatch):
    monkeypatch.setenv("TILELINT_DOCS_URL", "https://example.org/rules")
    assert ruledocs.rule_url("TL201") == "https://example.org/rules/TL201.md"
    assert ruledocs.rule_url("TL999") is None


def test_no_link_to_a_site_that_does_not_exist():
    """No tilelint source names the never-published tilelint/tilelint repository."""
    root = DOCS.parent.parent
    files = [*root.glob("server/**/*.py"), *root.glob("editors/**/*.ts"),
             *root.glob("editors/**/*.lua"), *root.glob("editors/**/*.md"),
             root / "editors/vscode/package.json", root / "README.md"]
    hits = [str(f.relative_to(root)) for f in files
            if f.is_file() and "tilelint/tilelint" in f.read_text(encoding="utf-8")]
    assert hits == []


def test_wheel_ships_the_rule_pages_and_links_to_them(tmp_path):
    """``pip install`` puts docs/rules/*.md into site-packages
    (tilelint/server/rules/) and every output links to that copy."""
    import json
    import os
    import subprocess
    import sys
    import zipfile

    root = DOCS.parent.parent
    wheel_dir = tmp_path / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(wheel_dir), str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{proc.stderr[-2000:]}")
    (wheel,) = wheel_dir.glob("tilelint-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for r in RULES:
        assert f"tilelint/server/rules/{r.code}.md" in names, r.code
    assert "tilelint/server/rules/README.md" in names
    assert "tilelint/server/lsp/convert.py" in names  # the language server ships too
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "TILELINT_DOCS_URL"}
    env["PYTHONPATH"] = str(site)
    installed = site / "tilelint" / "server" / "rules" / "TL201.md"
    assert installed.read_text(encoding="utf-8") == (DOCS / "TL201.md").read_text(encoding="utf-8")

    def cli(*argv):
        return subprocess.run([sys.executable, "-c",
                               "import sys; from tilelint.server.cli import main; "
                               "sys.exit(main(sys.argv[1:]))", *argv],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    example = str(root / "examples" / "smem_overflow_sm80.py")
    out = cli("check", example, "--format", "json")
    assert out.returncode == 1, out.stderr
    tl201 = [f for f in json.loads(out.stdout) if f["code"] == "TL201"]
    assert tl201 and tl201[0]["url"] == installed.as_uri()
    out = cli("check", example, "--format", "sarif")
    rules = json.loads(out.stdout)["runs"][0]["tool"]["driver"]["rules"]
    assert [r["helpUri"] for r in rules if r["id"] == "TL201"] == [installed.as_uri()]
    out = cli("rule", "TL201")
    assert out.returncode == 0 and f"More: {installed}" in out.stdout
    lsp = subprocess.run([sys.executable, "-c", "from tilelint.server.lsp.convert import rule_url; "
                          "print(rule_url('TL201'))"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert lsp.stdout.strip() == installed.as_uri(), lsp.stderr


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
