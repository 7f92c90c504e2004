"""Language-server latency benchmark (not a test).

Starts ``python -m tilelint.server`` over stdio with a minimal JSON-RPC client
of its own, opens a ~300-line and a ~3,000-line kernel file generated from the
parity fixtures, applies 50 single-character edits inside one kernel of each
(waiting for each result), and prints:

* p50 / p95 of didChange → publishDiagnostics (targets: 25 ms / 60 ms p95),
* start → initialize response (target: 300 ms),
* the server's RSS,
* libcst's own parse time of each file, measured in the same run, and the
  latency as a ratio of it;
* when tilelang is installed: the real compiler's lowering time (sm_80) of the
  edited kernel, measured in the same run, and the latency as a ratio of it.

    python bench/lsp_latency.py [--edits 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "parity"
# Plain CUDA kernels in the factory style (the common case in the corpus).
SOURCES = ["gemm_ns2.py", "gemm_ns3.py", "gemm_ns4.py", "gemm_bf16_ns3.py", "gemm_transA_ns3.py",
           "gemm_transB_ns2.py", "gemm_tile64_ns2.py", "two_loops.py", "gemm_epilogue_shared.py",
           "flash_attn_ns2.py", "gemm_threads256_ns3.py", "manual_order_012_stage_001.py"]


# --------------------------------------------------------------------------
# Test files
# --------------------------------------------------------------------------


def _kernel_block(path: pathlib.Path, i: int) -> str:
    text = path.read_text(encoding="utf-8")
    body = [l for l in text.splitlines() if not re.match(r"\s*(import|from)\s", l)
            and not l.startswith("# ")]
    block = "\n".join(body).strip("\n") + "\n"
    names = set(re.findall(r"^\s*def (\w+)\(", block, re.M))
    names |= set(re.findall(r"^(\w+)\s*=", block, re.M))
    for n in sorted(names, key=len, reverse=True):
        # Not after a dot: ``T.gemm`` stays the tile op when a factory is ``gemm``.
        block = re.sub(rf"(?<![.\w]){re.escape(n)}\b", f"{n}_{i}", block)
    return block


def make_file(target_lines: int) -> str:
    parts = ["import tilelang\nimport tilelang.language as T\n"]
    i = 0
    while sum(p.count("\n") for p in parts) < target_lines:
        src = FIXTURES / SOURCES[i % len(SOURCES)]
        parts.append("\n\n" + _kernel_block(src, i))
        i += 1
    return "".join(parts)


# --------------------------------------------------------------------------
# A tiny stdio JSON-RPC client
# --------------------------------------------------------------------------


class Client:
    def __init__(self, cmd: List[str], env: Dict[str, str]) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=str(ROOT))
        self.messages: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self._id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length is None:
                continue
            body = out.read(length)
            msg = json.loads(body)
            msg["_t"] = time.perf_counter()
            self.messages.put(msg)

    def send(self, msg: Dict[str, Any]) -> float:
        msg["jsonrpc"] = "2.0"
        data = json.dumps(msg).encode("utf-8")
        assert self.proc.stdin is not None
        t = time.perf_counter()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()
        return t

    def request(self, method: str, params: Any) -> int:
        self._id += 1
        self.send({"id": self._id, "method": method, "params": params})
        return self._id

    def notify(self, method: str, params: Any) -> float:
        return self.send({"method": method, "params": params})

    def wait(self, pred, timeout: float = 60.0) -> Dict[str, Any]:
        end = time.perf_counter() + timeout
        while True:
            left = end - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no matching message")
            msg = self.messages.get(timeout=left)
            if msg.get("method") in ("workspace/configuration", "client/registerCapability") \
                    and "id" in msg:
                result: Any = [None] if msg["method"] == "workspace/configuration" else None
                self.send({"id": msg["id"], "result": result})
                continue
            if pred(msg):
                return msg

    def rss_kib(self) -> Optional[int]:
        try:
            with open(f"/proc/{self.proc.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def close(self) -> None:
        try:
            rid = self.request("shutdown", None)
            self.wait(lambda m: m.get("id") == rid, 10)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


def pct(values: List[float], p: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def libcst_parse_ms(text: str, repeat: int = 3) -> float:
    import libcst
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        libcst.parse_module(text)
        times.append((time.perf_counter() - t) * 1000)
    return min(times)


def run_file(client: Client, name: str, text: str, edits: int) -> Dict[str, Any]:
    uri = (ROOT / "bench" / name).as_uri()
    t_open = client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": text}})
    first = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                        and m["params"]["uri"] == uri and m["params"].get("version") == 1)
    open_ms = (first["_t"] - t_open) * 1000
    lines = text.splitlines()
    # A line in the middle of a kernel body: a T.copy in the middle of the file.
    candidates = [i for i, l in enumerate(lines) if l.strip().startswith("T.copy(")]
    target = candidates[len(candidates) // 2]
    col = len(lines[target])
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": target, "character": col},
                                      "end": {"line": target, "character": col}},
                            "text": "  # "}]})
    client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri and m["params"].get("version") == 2)
    col += 4
    latencies = []
    version = 2
    for k in range(edits):
        version += 1
        ch = "abcdefghijklmnopqrstuvwxyz"[k % 26]
        t = client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": target, "character": col},
                                          "end": {"line": target, "character": col}},
                                "text": ch}]})
        v = version
        msg = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri and m["params"].get("version") == v)
        latencies.append((msg["_t"] - t) * 1000)
        col += 1
    parse = libcst_parse_ms(text)
    lower = lowering_ms(text, target)
    p50, p95 = pct(latencies, 0.5), pct(latencies, 0.95)
    return {"file": name, "lines": len(lines), "open_ms": round(open_ms, 1),
            "p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "max_ms": round(max(latencies), 2),
            "libcst_parse_ms": round(parse, 1),
            "p50_over_parse": round(p50 / parse, 3), "p95_over_parse": round(p95 / parse, 3),
            "lowering_ms": lower and round(lower, 1),
            "p50_over_lowering": lower and round(p50 / lower, 5)}


def lowering_ms(text: str, line0: int) -> Optional[float]:
    """Lower the edited kernel (its factory and its instantiation) with the real
    tilelang through the compiler oracle; None when tilelang is not installed."""
    import tempfile
    sys.path.insert(0, str(ROOT))
    from tilelint.analysis import frontend
    chunks = frontend.split_chunks(text)
    home = next((c for c in chunks
                 if c.start_line <= line0 + 1 < c.start_line + c.text.count("\n")), None)
    if home is None:
        return None
    m = re.search(r"^def (\w+)\(", home.text, re.M)
    if m is None:
        return None
    factory = m.group(1)
    uses = [c.text for c in chunks if c is not home and re.search(rf"\b{factory}\(", c.text)]
    head = "".join(c.text for c in chunks if re.match(r"(import|from)\s", c.text))
    small = head + "\n\n" + home.text + "\n\n" + "".join(uses)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "edited_kernel.py"
        path.write_text(small)
        proc = subprocess.run([sys.executable, str(ROOT / "tests" / "oracle" / "lower.py"),
                               "--target", "sm_80", str(path)],
                              capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    try:
        entry = json.loads(proc.stdout)[0]
    except (ValueError, IndexError):
        return None
    secs = [k.get("lower_seconds") for k in entry.get("kernels", {}).values()
            if k.get("lower_seconds") is not None and not k.get("error")]
    return secs[0] * 1000 if secs else None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    client = Client([sys.executable, "-m", "tilelint.server"], env)
    rid = client.request("initialize", {
        "processId": os.getpid(), "rootUri": ROOT.as_uri(),
        "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": True}},
                         "general": {"positionEncodings": ["utf-16"]}}})
    init = client.wait(lambda m: m.get("id") == rid)
    start_ms = (init["_t"] - client.t0) * 1000
    client.notify("initialized", {})
    results = [run_file(client, "bench_300.py", make_file(300), args.edits),
               run_file(client, "bench_3000.py", make_file(3000), args.edits)]
    rss = client.rss_kib()
    client.close()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        load = None
    report = {"start_to_initialize_ms": round(start_ms, 1), "rss_mib": rss and round(rss / 1024, 1),
              "load_average": load, "files": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if load is not None:
        print(f"load average (1, 5, 15 min) at the end: {load[0]}, {load[1]}, {load[2]} "
              f"on {os.cpu_count()} CPUs")
    print(f"start → initialize: {report['start_to_initialize_ms']} ms (target ≤ 300)")
    print(f"server RSS after both files: {report['rss_mib']} MiB")
    targets = {"bench_300.py": 25, "bench_3000.py": 60}
    for r in results:
        print(f"{r['file']} ({r['lines']} lines): open {r['open_ms']} ms; "
              f"didChange→publishDiagnostics p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms "
              f"(target p95 ≤ {targets[r['file']]}), max {r['max_ms']} ms; "
              f"libcst parse of the file {r['libcst_parse_ms']} ms → "
              f"p50/parse {r['p50_over_parse']}, p95/parse {r['p95_over_parse']}")
        if r.get("lowering_ms"):
            print(f"    tilelang 0.1.15 lowering of the edited kernel (sm_80): {r['lowering_ms']} ms "
                  f"→ p50/lowering {r['p50_over_lowering']}")
        else:
            print("    tilelang lowering of the edited kernel: not measured (tilelang not installed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
