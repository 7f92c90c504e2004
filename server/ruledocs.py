"""Rule documentation: one Markdown page per registered code, generated from
the rule registry (``tilelint.analysis.rules``), and the help URI of each code.

``python -m tilelint.server.ruledocs`` rewrites ``docs/rules/``;
``python -m tilelint.server.ruledocs --check`` exits 1 if a page is stale.

The pages ship with tilelint: the wheel carries ``docs/rules/*.md`` as
``tilelint/server/rules/`` (package data, see ``pyproject.toml``), and a
checkout (``pip install -e .``) reads ``docs/rules/`` itself.  The help URI of
a code is the ``file://`` URI of the installed page, so every link tilelint
emits (LSP ``codeDescription``, JSON ``url``, SARIF ``helpUri``) points at a
file that exists on the machine that produced it.  ``TILELINT_DOCS_URL``
points the links at a copy of the pages you host yourself instead.

The registry's examples are either whole files (they import tilelang) or a
``for ... in T.Pipelined(...)`` snippet; a snippet is run inside a small GEMM
kernel skeleton (``runnable_example``) so that tests can check that the bad
example produces the rule's diagnostic and the good one does not.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

if TYPE_CHECKING:  # the registry is imported lazily
    from tilelint.analysis.rules import Rule

DOCS_RELATIVE_DIR = "docs/rules"

# Installed from a wheel: the pages are package data next to this module.
PACKAGED_DOCS = Path(__file__).resolve().parent / "rules"
# A checkout (editable install): the repository's docs/rules/.
_REPO_DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules"

_SEVERITY_WORD = {"error": "error", "warning": "warning", "information": "information",
                  "hint": "hint"}


def docs_dir() -> Optional[Path]:
    """The directory of the installed rule pages, or None if there is none."""
    for d in (PACKAGED_DOCS, _REPO_DOCS):
        if (d / "README.md").is_file():
            return d
    return None


def rule_page(code: str) -> Optional[Path]:
    """The installed page of a code, or None (an unregistered code, or pages
    missing from this installation)."""
    d = docs_dir()
    if d is None or not re.fullmatch(r"[A-Za-z]+[0-9]+", code):
        return None
    p = d / f"{code.upper()}.md"
    return p if p.is_file() else None


def base_url() -> Optional[str]:
    """``TILELINT_DOCS_URL`` (with a trailing slash), or None when unset."""
    url = os.environ.get("TILELINT_DOCS_URL")
    if not url:
        return None
    return url if url.endswith("/") else url + "/"


def rule_url(code: str) -> Optional[str]:
    """The help URI of a code (LSP ``codeDescription``, JSON ``url``, SARIF
    ``helpUri``): under ``TILELINT_DOCS_URL`` when it is set, else the
    ``file://`` URI of the installed page; None when there is no page, so
    that no link points at something that does not exist."""
    base = base_url()
    if base is not None:
        return f"{base}{code.upper()}.md" if get_rule(code) is not None else None
    page = rule_page(code)
    return page.as_uri() if page is not None else None


def rule_path(code: str) -> str:
    """The page of a code, relative to the repository root."""
    return f"{DOCS_RELATIVE_DIR}/{code.upper()}.md"


# --------------------------------------------------------------------------
# Registry access
# --------------------------------------------------------------------------


def all_rules() -> List[Rule]:
    from tilelint.analysis import rules as rules_mod

    return list(rules_mod.RULES)


def get_rule(code: str) -> Optional[Rule]:
    from tilelint.analysis import rules as rules_mod

    return rules_mod.get_rule(code.upper())


def off_by_default(code: str) -> bool:
    from tilelint.analysis.pipeline import OFF_BY_DEFAULT
    return code in OFF_BY_DEFAULT


def rule_dict(rule: Rule) -> Dict[str, object]:
    """A registry entry as a plain mapping (the SARIF formatter's input)."""
    code = rule.code
    out: Dict[str, object] = {k: getattr(rule, k) for k in (
        "code", "name", "severity", "summary", "what", "why", "bad_example", "good_example", "fix")}
    out["help"] = terminal_text(rule)
    out["help_markdown"] = markdown(rule)
    url = rule_url(code)
    if url:
        out["url"] = url
    return out


# --------------------------------------------------------------------------
# Runnable examples
# --------------------------------------------------------------------------

_SKELETON = '''\
import tilelang
import tilelang.language as T

n = 32
m = 4


@T.prim_func
def example(
    A: T.Tensor((1024, 1024), "float16"),
    B: T.Tensor((1024, 1024), "float16"),
    C: T.Tensor((1024, 1024), "float16"),
):
    with T.Kernel(8, 8, threads=128) as (bx, by):
        A_shared = T.alloc_shared((128, 32), "float16")
        B_shared = T.alloc_shared((32, 128), "float16")
        C_local = T.alloc_fragment((128, 128), "float32")
        T.clear(C_local)
{body}
        T.copy(C_local, C[by * 128, bx * 128])
'''

_TARGET_HINT = re.compile(r"#\s*(?:on|target:?)\s+(sm_?\d+|gfx\d+|ascend)\b", re.IGNORECASE)


def is_complete_file(example: str) -> bool:
    return bool(re.search(r"^\s*(?:import|from)\s+tilelang", example, re.MULTILINE))


def is_runnable(example: str) -> bool:
    """A whole file, or a loop snippet without ``...`` placeholders."""
    if not example.strip():
        return False
    if is_complete_file(example):
        return True
    if re.search(r"^\s*\.\.\.\s*$", example, re.MULTILINE) or "..." in example:
        return False
    return example.lstrip().startswith("for ")


def runnable_example(example: str) -> str:
    """The example as a whole file that ``analyze`` can check."""
    if is_complete_file(example):
        return example if example.endswith("\n") else example + "\n"
    body = textwrap.indent(textwrap.dedent(example).rstrip("\n"), " " * 8)
    return _SKELETON.format(body=body)


def example_target(rule: Rule, which: str = "bad") -> str:
    """The target the example is meant for: the rule's ``target`` attribute,
    a ``# on sm_90`` / ``# target: sm_90`` comment in it, else sm_80."""
    if rule.target:
        return rule.target
    text = rule.bad_example if which == "bad" else rule.good_example
    m = _TARGET_HINT.search(text)
    return m.group(1).lower() if m else "sm_80"


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------


def _para(text: str) -> str:
    return text.strip()


def markdown(rule: Rule) -> str:
    code = rule.code
    name = rule.name
    sev = rule.severity
    out: List[str] = [f"# {code}: {name}", ""]
    default = "off by default (enable with `select`)" if off_by_default(code) else "on by default"
    out.append(f"**Severity:** {_SEVERITY_WORD.get(sev, sev)} · **{default[0].upper()}{default[1:]}**")
    out.append("")
    summary = rule.summary
    if summary:
        out += [_para(summary), ""]
    what = rule.what
    if what:
        out += ["## What it means", "", _para(what), ""]
    why = rule.why
    if why:
        out += ["## Why the compiler cares", "", _para(why), ""]
    bad = rule.bad_example
    good = rule.good_example
    target = example_target(rule)
    if bad:
        out += ["## Example", "", "```python", bad.rstrip("\n"), "```", ""]
    if good:
        out += ["## Fixed", "", "```python", good.rstrip("\n"), "```", ""]
    if bad and is_runnable(bad) and not is_complete_file(bad):
        out += ["<details><summary>The example as a whole file</summary>", "",
                f"Checked with `tilelint check --target {target}`:", "",
                "```python", runnable_example(bad).rstrip("\n"), "```", "", "</details>", ""]
    fix = rule.fix
    if fix:
        out += ["## How to fix", "", _para(fix), ""]
    out += ["## Suppressing", "",
            f"Add `# noqa: {code}` at the end of the reported line, list `\"{code}\"` under "
            f"`ignore` in `[tool.tilelint]` of `pyproject.toml`, or pass `--ignore {code}`.", ""]
    return "\n".join(out)


def index_markdown(rules: Sequence[Rule]) -> str:
    out = ["# tilelint rules", "",
           "Generated from the rule registry by `python -m tilelint.server.ruledocs`; "
           "do not edit by hand.", "",
           "| Code | Name | Severity | Summary |", "|---|---|---|---|"]
    for r in rules:
        code = r.code
        summary = r.summary.replace("|", "\\|")
        out.append(f"| [{code}]({code}.md) | {r.name} | {r.severity} | {summary} |")
    return "\n".join(out) + "\n"


def terminal_text(rule: Rule) -> str:
    """The rule as plain text for ``tilelint rule CODE``."""
    code = rule.code
    width = 88
    def wrap(t: str, indent: str = "") -> str:
        return "\n".join(textwrap.fill(p, width=width, initial_indent=indent,
                                       subsequent_indent=indent)
                         for p in t.strip().split("\n\n"))
    out = [f"{code} {rule.name} ({rule.severity}"
           f"{', off by default' if off_by_default(code) else ''})", ""]
    if rule.summary:
        out += [wrap(rule.summary), ""]
    for title, attr in (("What it means", "what"), ("Why the compiler cares", "why")):
        t = getattr(rule, attr)
        if t:
            out += [f"{title}:", wrap(t, "  "), ""]
    for title, attr in (("Example", "bad_example"), ("Fixed", "good_example")):
        t = getattr(rule, attr)
        if t:
            out += [f"{title}:", textwrap.indent(t.rstrip("\n"), "    "), ""]
    if rule.fix:
        out += ["How to fix:", wrap(rule.fix, "  "), ""]
    page = rule_page(code)
    more = base_url() and rule_url(code) or (str(page) if page is not None else None)
    if more:
        out.append(f"More: {more}")
    return "\n".join(out) + "\n"


def rule_list_text(rules: Sequence[Rule]) -> str:
    rows = [(r.code, r.name, r.severity, r.summary) for r in rules]
    w1 = max((len(r[1]) for r in rows), default=0)
    w2 = max((len(r[2]) for r in rows), default=0)
    return "".join(f"{c}  {n:<{w1}}  {s:<{w2}}  {t}\n" for c, n, s, t in rows)


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------


def expected_pages(rules: Optional[Sequence[Rule]] = None) -> Dict[str, str]:
    """file name → content of every page (and the index README.md)."""
    rules = list(rules if rules is not None else all_rules())
    pages = {f"{r.code}.md": markdown(r) for r in rules}
    pages["README.md"] = index_markdown(rules)
    return pages


def stale_pages(out_dir: Path, rules: Optional[Sequence[Rule]] = None) -> List[str]:
    """Names of pages that are missing, different, or no longer registered."""
    pages = expected_pages(rules)
    bad = []
    for name, text in pages.items():
        p = out_dir / name
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            bad.append(name)
    if out_dir.is_dir():
        for p in sorted(out_dir.glob("*.md")):
            if p.name not in pages:
                bad.append(p.name)
    return bad


def generate(out_dir: Path, rules: Optional[Sequence[Rule]] = None) -> List[str]:
    """Write every page (and remove pages of codes no longer registered)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = expected_pages(rules)
    written = []
    for name, text in pages.items():
        p = out_dir / name
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            p.write_text(text, encoding="utf-8")
            written.append(name)
    for p in out_dir.glob("*.md"):
        if p.name not in pages and re.fullmatch(r"[A-Z]+[0-9]+\.md", p.name):
            p.unlink()
            written.append(p.name)
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tilelint.server.ruledocs",
                                 description="Regenerate docs/rules/ from the rule registry.")
    ap.add_argument("--out", type=Path, default=_REPO_DOCS, help="output directory (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="only report stale pages; exit 1 if any")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale_pages(args.out)
        for name in bad:
            print(f"stale: {args.out / name}")
        return 1 if bad else 0
    written = generate(args.out)
    print(f"{len(written)} page(s) updated in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
