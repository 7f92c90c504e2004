#!/usr/bin/env python3
"""Render the README picture: a real hover of the tilelint language server.

    python scripts/render_hover.py [--file examples/gemm_clean.py] [--out docs/images/hover.png]

1. starts ``python -m tilelint.server`` (stdio), sends initialize / didOpen for
   the example and a ``textDocument/hover`` on the word ``Pipelined`` of its
   first pipelined loop, and keeps the Markdown the server answers;
2. writes a small HTML page that looks like an editor: the source around the
   loop, and the hover box with that Markdown (a tiny Markdown subset is turned
   into HTML here: headings, paragraphs, bold, inline code, fenced code,
   tables, lists, rules);
3. takes a screenshot with headless Chromium (``apt-get install chromium``).

``--markdown-only`` prints the hover Markdown and stops (no browser needed).
The Markdown is also written next to the PNG (``hover.md``) so a reader can
see exactly what was rendered.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------
# A minimal LSP client over stdio
# --------------------------------------------------------------------------


class Client:
    def __init__(self, cmd: List[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 1

    def send(self, msg: Dict[str, object]) -> None:
        body = json.dumps(msg).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def read(self) -> Dict[str, object]:
        assert self.proc.stdout is not None
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            line = line.strip()
            if not line:
                break
            key, _, value = line.decode("ascii").partition(":")
            if key.lower() == "content-length":
                length = int(value)
        assert length is not None
        return json.loads(self.proc.stdout.read(length))

    def request(self, method: str, params: object) -> object:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result")
            if "method" in msg and "id" in msg:  # a request from the server
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None
                           if msg["method"] != "workspace/configuration"
                           else [{} for _ in msg.get("params", {}).get("items", [])]})

    def notify(self, method: str, params: object) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def hover_markdown(path: Path, target: str) -> tuple:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    line = next(i for i, ln in enumerate(lines) if "T.Pipelined(" in ln)
    col = lines[line].index("Pipelined") + 2
    uri = path.resolve().as_uri()
    c = Client([sys.executable, "-m", "tilelint.server"])
    try:
        c.request("initialize", {
            "processId": os.getpid(), "rootUri": path.resolve().parent.as_uri(),
            "capabilities": {"textDocument": {"hover": {"contentFormat": ["markdown"]}}},
            "initializationOptions": {"target": target},
        })
        c.notify("initialized", {})
        c.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        res = c.request("textDocument/hover", {"textDocument": {"uri": uri},
                                               "position": {"line": line, "character": col}})
    finally:
        c.close()
    if not res:
        raise SystemExit(f"no hover at {path}:{line + 1}:{col + 1}")
    contents = res["contents"]
    md = contents["value"] if isinstance(contents, dict) else str(contents)
    return md, lines, line, col


# --------------------------------------------------------------------------
# Markdown subset -> HTML
# --------------------------------------------------------------------------


def _inline(s: str) -> str:
    codes: List[str] = []

    def keep(m: "re.Match[str]") -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    e = html.escape(re.sub(r"`([^`]*)`", keep, s), quote=False)
    e = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", e)
    e = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", e)
    e = re.sub(r"(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)", r"<i>\1</i>", e)
    e = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', e)
    return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], e)


def md_to_html(md: str) -> str:
    out: List[str] = []
    # reference-style links ([19][L19] with "[L19]: file:///...#L19" below) become inline ones
    defs = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", md, re.M))
    md = re.sub(r"^\[[^\]]+\]: \S+$\n?", "", md, flags=re.M)
    md = re.sub(r"\[([^\]]+)\]\[([^\]]+)\]",
                lambda m: f"[{m.group(1)}]({defs[m.group(2)]})" if m.group(2) in defs else m.group(0),
                md)
    lines = md.rstrip("\n").splitlines()
    i = 0
    para: List[str] = []

    def flush() -> None:
        if para:
            out.append("<p>" + "<br>".join(_inline(p) for p in para) + "</p>")
            para.clear()

    while i < len(lines):
        ln = lines[i]
        if ln.startswith("```"):
            flush()
            j = i + 1
            body = []
            while j < len(lines) and not lines[j].startswith("```"):
                body.append(lines[j])
                j += 1
            out.append("<pre>" + html.escape("\n".join(body)) + "</pre>")
            i = j + 1
            continue
        if re.match(r"^\s*\|", ln):
            flush()
            rows = []
            while i < len(lines) and re.match(r"^\s*\|", lines[i]):
                rows.append(lines[i].strip().strip("|").split("|"))
                i += 1
            body_rows = [r for r in rows if not all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in r)]
            header = len(rows) > 1 and all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in rows[1])
            t = ["<table>"]
            for k, r in enumerate(body_rows):
                tag = "th" if k == 0 and header else "td"
                t.append("<tr>" + "".join(f"<{tag}>{_inline(c.strip())}</{tag}>" for c in r) + "</tr>")
            t.append("</table>")
            out.append("".join(t))
            continue
        m = re.match(r"^(#{1,6})\s+(.*)$", ln)
        if m:
            flush()
            n = min(len(m.group(1)) + 2, 6)
            out.append(f"<h{n}>{_inline(m.group(2))}</h{n}>")
        elif re.fullmatch(r"\s*(---+|\*\*\*+)\s*", ln):
            flush()
            out.append("<hr>")
        elif re.match(r"^\s*[-*]\s+", ln):
            flush()
            items = []
            while i < len(lines) and re.match(r"^\s*[-*]\s+", lines[i]):
                items.append("<li>" + _inline(re.sub(r"^\s*[-*]\s+", "", lines[i])) + "</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif not ln.strip():
            flush()
        else:
            para.append(ln.rstrip("\\ ").rstrip())
        i += 1
    flush()
    return "\n".join(out)


# --------------------------------------------------------------------------
# Page
# --------------------------------------------------------------------------

_KW = r"\b(def|for|in|with|as|return|import|if|else|from)\b"


def _code_line(s: str) -> str:
    e = html.escape(s)
    e = re.sub(r"(&quot;[^&]*&quot;)", r'<span class="s">\1</span>', e)
    e = re.sub(_KW, r'<span class="k">\1</span>', e)
    e = re.sub(r"\b(\d+)\b", r'<span class="n">\1</span>', e)
    return e


CSS = """
body { margin: 0; background: #1e1e1e; font-family: 'DejaVu Sans', sans-serif; }
.editor { position: relative; padding: 10px 0; width: 920px; }
.ln { display: flex; font: 13px/19px 'DejaVu Sans Mono', monospace; color: #d4d4d4;
      white-space: pre; }
.ln .no { width: 42px; text-align: right; padding-right: 14px; color: #858585; }
.ln.cur { background: #2a2d2e; }
.k { color: #c586c0; } .s { color: #ce9178; } .n { color: #b5cea8; }
.hover { position: absolute; left: 150px; width: 700px; background: #252526;
         border: 1px solid #454545; box-shadow: 0 2px 8px rgba(0,0,0,.6); color: #cccccc;
         font-size: 13px; line-height: 1.4; padding: 4px 10px 6px; }
.hover h3, .hover h4, .hover h5 { margin: 6px 0 4px; font-size: 13px; color: #e0e0e0; }
.hover p { margin: 4px 0; }
.hover code { font-family: 'DejaVu Sans Mono', monospace; font-size: 12px; color: #d7ba7d; }
.hover pre { font: 12px/16px 'DejaVu Sans Mono', monospace; background: #1e1e1e;
             padding: 4px 6px; margin: 4px 0; color: #d4d4d4; white-space: pre; }
.hover table { border-collapse: collapse; margin: 4px 0; font-size: 12px; }
.hover td, .hover th { border: 1px solid #3c3c3c; padding: 1px 6px; text-align: left; }
.hover th { color: #e0e0e0; }
.hover ul { margin: 2px 0; padding-left: 18px; }
.hover hr { border: 0; border-top: 1px solid #454545; margin: 6px 0; }
.hover a { color: #3794ff; text-decoration: none; }
"""


def page(md: str, lines: List[str], line: int, first: int, last: int) -> str:
    rows = []
    for i in range(first, last):
        cls = "ln cur" if i == line else "ln"
        rows.append(f'<div class="{cls}"><span class="no">{i + 1}</span>'
                    f'<span>{_code_line(lines[i])}</span></div>')
    top = 10 + (line - first + 1) * 19 + 2
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{CSS}</style></head>"
            f"<body><div class='editor' id='ed'>{''.join(rows)}"
            f"<div class='hover' style='top:{top}px'>{md_to_html(md)}</div></div></body></html>")


def find_browser() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def screenshot(browser: str, html_text: str, out: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "hover.html"
        page_path.write_text(html_text, encoding="utf-8")
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp}/profile",
               f"--window-size={width},{height}", f"--screenshot={out}",
               page_path.as_uri()]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, default=ROOT / "examples" / "gemm_clean.py")
    ap.add_argument("--target", default="sm_80")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "hover.png")
    ap.add_argument("--height", type=int, default=0, help="picture height (default: estimated)")
    ap.add_argument("--markdown-only", action="store_true")
    args = ap.parse_args(argv)
    md, lines, line, _ = hover_markdown(args.file, args.target)
    if args.markdown_only:
        print(md)
        return 0
    browser = find_browser()
    if browser is None:
        print("no Chromium found (apt-get install chromium)", file=sys.stderr)
        return 2
    first = max(0, line - 3)
    last = min(len(lines), line + 4)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # The hover's height is not known before layout: estimate it generously.
    est = 10 + (line - first + 1) * 19 + 40 + 15 * (md.count("\n") + 1)
    height = args.height or max(est, 10 + (last - first) * 19 + 20)
    screenshot(browser, page(md, lines, line, first, last), args.out, 920, height)
    args.out.with_suffix(".md").write_text(md + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
