"""A soak of the language server: many realistic edits, memory and latency.

Starts ``tilelint server`` over stdio (what VS Code and Neovim launch), opens a
~300-line file of kernels and ``--open-files`` other generated files, then sends
``--edits`` edits to the first, waiting for each publish: the edit cycles of
``bench/lsp_latency.py`` (a factory default toggled, a ``T.copy`` line typed
and deleted character by character, a line inserted and deleted, a module
constant toggled), taken in turn.  It prints the server's RSS every
``--rss-every`` edits and p50/p95/max latency per window of ``--window`` edits,
and at the end checks that the server's last diagnostics equal those of a
fresh server opened on the final text.

    python bench/soak.py [--edits 10000] [--open-files 20] [--lines 300]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lsp_latency import KINDS, LspServer, find_sites, make_file, pct  # noqa: E402


def _diagnostics(server: LspServer, uri: str, version: int, sent: float,
                 timeout: float) -> Optional[List[Dict[str, Any]]]:
    msg = server.wait(server._published(uri, version, sent), timeout)
    if msg is None:
        return None
    return (msg.get("params") or {}).get("diagnostics") or []


def _key(diags: List[Dict[str, Any]]) -> List[Any]:
    return sorted((d.get("code"), d.get("severity"), d.get("message"),
                   d["range"]["start"]["line"], d["range"]["start"]["character"]) for d in diags)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=10000)
    ap.add_argument("--open-files", type=int, default=20)
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--rss-every", type=int, default=500)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args(argv)
    cmd = [sys.executable, "-c", "import sys; from tilelint.server.entry import main; "
           "sys.exit(main(['server']))"]
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        text = make_file(args.lines, seed=0)
        main_path = root / "kernels.py"
        main_path.write_text(text)
        others = []
        for i in range(args.open_files):
            p = root / f"other_{i}.py"
            p.write_text(make_file(args.lines, seed=i + 1))
            others.append(p)
        sites = find_sites(text)
        kinds = [k for k in KINDS if k in sites.cycles]
        server = LspServer(cmd, tmp, "tilelint")
        server.initialize(root)
        for p in others:
            t = server.open(p.as_uri(), p.read_text())
            server.wait_published(p.as_uri(), 1, t, args.timeout)
        uri = main_path.as_uri()
        t = server.open(uri, text)
        server.wait_published(uri, 1, t, args.timeout)
        rss0 = server.rss_kib() or 0
        print(f"kinds: {', '.join(kinds)}; {len(others)} other files open; start RSS "
              f"{rss0 / 1024:.0f} MB", flush=True)
        window: List[float] = []
        timeouts = 0
        rss_rows = []
        last: Optional[List[Dict[str, Any]]] = None
        done = 0
        t_start = time.perf_counter()
        pos = {k: 0 for k in kinds}
        k_i = 0
        while done < args.edits:
            kind = kinds[k_i % len(kinds)]
            cycle = sites.cycles[kind]
            # a whole cycle, so the text comes back to the original
            for edit in cycle:
                version, sent = server.change(uri, edit)
                diags = _diagnostics(server, uri, version, sent, args.timeout)
                if diags is None:
                    timeouts += 1
                else:
                    window.append((time.perf_counter() - sent) * 1000)
                    last = diags
                done += 1
                if done % args.rss_every == 0:
                    rss = server.rss_kib() or 0
                    rss_rows.append((done, rss))
                    print(f"  edit {done:>6}: RSS {rss / 1024:7.1f} MB", flush=True)
                if done % args.window == 0 and window:
                    print(f"  edits {done - args.window + 1:>6}-{done:<6} p50 "
                          f"{pct(window, 0.5):6.1f} ms  p95 {pct(window, 0.95):6.1f} ms  max "
                          f"{max(window):7.1f} ms", flush=True)
                    window = []
            pos[kind] += 1
            k_i += 1
        final_text = server.docs[uri][1]
        server.close()
        fresh = LspServer(cmd, tmp, "fresh")
        fresh.initialize(root)
        t = fresh.open(uri, final_text)
        want = _diagnostics(fresh, uri, 1, t, args.timeout)
        fresh.close()
        same = last is not None and want is not None and _key(last) == _key(want)
        print(f"{done} edits in {time.perf_counter() - t_start:.0f} s; {timeouts} without "
              f"diagnostics in {args.timeout:.0f} s; final diagnostics "
              f"{'equal' if same else 'DIFFER from'} a fresh server's")
        by = dict(rss_rows)
        first = by.get(1000) or (rss_rows[0][1] if rss_rows else None)
        if first and rss_rows:
            end = rss_rows[-1][1]
            print(f"RSS edit {1000 if 1000 in by else rss_rows[0][0]} -> {rss_rows[-1][0]}: "
                  f"{first / 1024:.0f} -> {end / 1024:.0f} MB ({100 * (end - first) / first:+.1f} %)")
        return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
