"""How many of tilelint's errors and warnings on a tree of real kernels are true.

    python bench/precision.py DIR [--target T] [--json OUT] [--timeout 120] [--budget 3600]

1. ``tilelint check --format json DIR`` (the CLI itself, in a subprocess) gives
   the findings a user sees.  Information and hints are left out.
2. Each error and warning is checked against tilelang 0.1.15 in the
   ``tilelint verify`` worker (``server/verify_worker.py``: a separate process,
   tilelang imported once, each request served in a fork with its own timeout):
   the kernel the finding names is built with the same bindings the analysis
   used and lowered for the finding's target (``enable_device_compile=False``,
   no GPU needed).

   * a predicted compile error (TL101-TL104, TL107, TL108, TL112, TL115, TL302, TL303)
     is *confirmed* when the compiler fails with that error (the message family
     of ``verify_worker.MESSAGE_CODES``), *refuted* when the kernel lowers;
   * TL201 / TL202: *confirmed* when the compiler's arena (merged dynamic
     shared memory plus static shared memory) exceeds the target's per-block
     limit, *refuted* when it fits; TL202 checks every configuration it names;
   * warnings about silent behaviour, from the compiler's loop annotations
     after PipelinePlanning: TL105 (the loop is not pipelined, or the lone list
     is ignored), TL106 (the compiler uses exactly the manual schedule, or warp
     specialization replaces it), TL109/TL110 (the loop is not pipelined),
     TL111 (the loop is warp-specialized), TL113 (no loop of the kernel is
     pipelined);
   * TL001: CPython's ``ast.parse`` (the parser tilelang's frontend uses);
   * anything else, or a kernel that cannot be built here (a module that is not
     installed, a factory that needs a GPU or values tilelint does not know, a
     kernel class the worker cannot instantiate), is *unverifiable* with the
     reason.

Prints a table per code, the refuted findings (file:line kernel message) and
the reasons of the unverifiable ones, grouped.  Nothing here imports the
user's files: only the worker does.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent

from tilelint.analysis import Settings, analyze, packing, targets as targets_mod  # noqa: E402
from tilelint.server.verify import VerifyWorker  # noqa: E402

COMPILE_ERRORS = ("TL101", "TL102", "TL103", "TL104", "TL107", "TL108", "TL112", "TL115", "TL302",
                  "TL303")
LOOP_WARNINGS = ("TL105", "TL106", "TL109", "TL110", "TL111", "TL113")
CONFIRMED, REFUTED, UNVERIFIABLE = "confirmed", "refuted", "unverifiable"


@dataclass
class Finding:
    path: str
    code: str
    severity: str
    line: int
    message: str
    target: str
    kernel: Optional[str]
    verdict: str = UNVERIFIABLE
    reason: str = ""
    detail: str = ""  # for confirmed/refuted: what the compiler said
    seconds: float = 0.0

    def where(self) -> str:
        return f"{self.path}:{self.line}"


# --------------------------------------------------------------------------
# 1. the findings, from the CLI
# --------------------------------------------------------------------------


def run_check(dirs: Sequence[str], targets: Sequence[str]) -> List[Finding]:
    cmd = [sys.executable, "-m", "tilelint.server.cli", "check", "--format", "json",
           "--exit-zero", "--no-progress", "-j", "1"]
    for t in targets:
        cmd += ["--target", t]
    cmd += list(dirs)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        data = json.loads(proc.stdout or "[]")
    except ValueError:
        raise SystemExit(f"tilelint check gave no JSON (exit {proc.returncode}): "
                         f"{proc.stderr[-2000:]}") from None
    out = []
    for f in data:
        if f.get("severity") not in ("error", "warning"):
            continue
        tlist = f.get("targets") or [f.get("target") or "sm_80"]
        for t in tlist:  # a finding merged over targets is checked on each
            out.append(Finding(path=os.path.abspath(f["path"]), code=f["code"],
                               severity=f["severity"], line=int(f.get("line") or 0),
                               message=f.get("message") or "", target=t,
                               kernel=f.get("kernel")))
    return out


# --------------------------------------------------------------------------
# 2. what to lower for each finding (the analysis, in-process)
# --------------------------------------------------------------------------


def _settings(path: str, target: str) -> Settings:
    try:
        from tilelint.server.config import ConfigCache
        return ConfigCache().for_path(path).settings_for(path, target)
    except Exception:  # noqa: BLE001 - a broken pyproject: plain settings
        return Settings(target=target)


def _scalars(pairs) -> Dict[str, object]:
    return {n: v for n, v in pairs
            if isinstance(v, (int, float, str, bool)) or v is None}


def module_location(path: str, root: str) -> Tuple[Optional[str], List[str]]:
    """(dotted module name when the file sits in a package, extra sys.path
    entries: the package root, DIR and DIR/src)."""
    d = os.path.dirname(path)
    parts = [os.path.splitext(os.path.basename(path))[0]]
    while os.path.exists(os.path.join(d, "__init__.py")) and d.startswith(root) and d != root:
        parts.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    extra = [d, root]
    if os.path.isdir(os.path.join(root, "src")):
        extra.append(os.path.join(root, "src"))
    name = ".".join(parts) if len(parts) > 1 and all(p.isidentifier() for p in parts) else None
    return name, extra


class Lowerer:
    """Requests to the verify worker, cached per kernel instance."""

    def __init__(self, timeout: float, memory_mb: int, python: Optional[str]) -> None:
        self.w = VerifyWorker(python=python, timeout=timeout, memory_mb=memory_mb)
        self.cache: Dict[str, dict] = {}
        self.requests = 0
        self.lower_seconds = 0.0

    def close(self) -> None:
        self.w.close()

    def facts(self, path: str, root: str, target: str, kernel: dict) -> dict:
        """{'ok': bool, 'error': why-not, 'import_error': ..., 'kernel': facts or None}."""
        key = json.dumps([path, target, kernel], sort_keys=True, default=str)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        try:
            source = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            return {"ok": False, "error": f"cannot read the file: {exc}"}
        name, extra = module_location(path, root)
        t0 = time.perf_counter()
        resp = self.w.request({"op": "verify", "path": path, "source": source, "target": target,
                               "kernels": [kernel], "module_name": name, "sys_path": extra})
        self.lower_seconds += time.perf_counter() - t0
        self.requests += 1
        if not resp.get("ok"):
            out = {"ok": False, "error": resp.get("error") or "the compiler process failed"}
        else:
            r = resp.get("result") or {}
            out = {"ok": True, "import_error": r.get("import_error"),
                   "kernel": (r.get("kernels") or {}).get(kernel.get("key") or kernel["name"]),
                   "notes": r.get("notes") or []}
        self.cache[key] = out
        return out


def _first_line(text: str, n: int = 160) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[: n - 1] + "…"


def _kernel_failure(res: dict) -> Optional[str]:
    """Why there are no facts for the kernel (None: there are)."""
    if not res.get("ok"):
        return f"the compiler process: {res.get('error')}"
    imp = res.get("import_error")
    if imp:
        if imp.get("environment"):
            return str(imp["environment"])
        return f"the file fails at import here: {imp.get('type')}: {_first_line(imp.get('summary') or '')}"
    k = res.get("kernel")
    if k is None:
        notes = res.get("notes") or []
        return ("the worker cannot build the kernel (no module-level instance, jit function or "
                "factory to call)" + (f": {notes[0]}" if notes else ""))
    err = k.get("error") or {}
    if err.get("environment"):
        return str(err["environment"])
    if k.get("instantiated") == "factory call" and err:
        return f"the factory call fails: {err.get('type')}: {_first_line(err.get('summary') or '')}"
    return None


# --------------------------------------------------------------------------
# 3. verdicts
# --------------------------------------------------------------------------


def _loop_items(k: dict, lines: Sequence[int]) -> List[dict]:
    return [it for it in (k.get("loops") or []) if it.get("line") in lines]


def _candidate_lines(f: Finding, kr) -> List[int]:
    out = [f.line]
    if kr is not None:
        for lr in kr.loops:
            sp = lr.loop.span
            if sp.line <= f.line <= max(sp.line, lr.loop.iter_span.end_line):
                out.append(sp.line)
    return out


def judge_error(f: Finding, k: dict) -> Tuple[str, str]:
    err = k.get("error")
    if not err:
        return REFUTED, "the compiler lowers the kernel"
    if err.get("code") == f.code:
        return CONFIRMED, _first_line(err.get("summary") or "")
    return UNVERIFIABLE, ("the compiler fails with another error first: "
                          f"{err.get('code') or err.get('type')}: {_first_line(err.get('summary') or '')}")


def arena_total(k: dict) -> Optional[int]:
    sh = k.get("shared")
    if not sh or sh.get("bytes") is None:
        return None
    return int(sh["bytes"]) + int(sh.get("static_bytes") or 0)


def judge_arena(f: Finding, k: dict) -> Tuple[str, str]:
    if k.get("error"):
        return UNVERIFIABLE, ("the kernel does not lower: "
                              f"{_first_line(k['error'].get('summary') or '')}")
    total, budget = arena_total(k), targets_mod.budget(f.target)
    if total is None or budget is None:
        return UNVERIFIABLE, f"no shared-memory facts for {f.target}"
    if total > budget:
        return CONFIRMED, f"compiler arena {total} B > {budget} B"
    return REFUTED, f"compiler arena {total} B <= {budget} B"


def judge_loop(f: Finding, k: dict, kr) -> Tuple[str, str]:
    if k.get("error"):
        return UNVERIFIABLE, ("the kernel does not lower: "
                              f"{_first_line(k['error'].get('summary') or '')}")
    items = _loop_items(k, _candidate_lines(f, kr))
    ws = bool(k.get("warp_specialized"))
    if f.code == "TL113":
        loops = k.get("loops") or []
        if not loops:
            return UNVERIFIABLE, "the compiler saw no annotated loop"
        if any(it.get("pipelined") for it in loops):
            return REFUTED, "the compiler pipelines a loop of the kernel"
        return CONFIRMED, "no loop of the kernel is pipelined"
    if not items:
        return UNVERIFIABLE, "the compiler's loop for this line was not found"
    it = items[0]
    if f.code in ("TL109", "TL110"):
        if it.get("pipelined"):
            return REFUTED, f"the compiler pipelines the loop (stage {it.get('stage')})"
        return CONFIRMED, "the compiler does not pipeline the loop"
    if f.code == "TL111":
        if ws and it.get("ws") == "consumed":
            return CONFIRMED, "the loop is warp-specialized; order/stage are dropped"
        if not ws:
            return REFUTED, "the kernel is not warp-specialized"
        return UNVERIFIABLE, f"warp-specialized kernel, loop state {it.get('ws')}"
    if f.code == "TL105":
        if not it.get("pipelined"):
            return CONFIRMED, "the compiler does not pipeline the loop"
        uo, us = it.get("user_order"), it.get("user_stage")
        if (uo is not None and it.get("order") != uo) or (us is not None and it.get("stage") != us):
            return CONFIRMED, "the loop is planned automatically; the lone list is ignored"
        return REFUTED, (f"the compiler uses the given list (order {it.get('order')}, "
                         f"stage {it.get('stage')})")
    if f.code == "TL106":
        if ws and it.get("ws") == "consumed":
            if "warp" in f.message.lower():
                return CONFIRMED, "warp specialization replaces the manual schedule"
            return REFUTED, "the loop is warp-specialized, which the message does not say"
        if not it.get("pipelined"):
            return UNVERIFIABLE, "the compiler does not pipeline the loop"
        same = it.get("order") == it.get("user_order") and it.get("stage") == it.get("user_stage")
        if same:
            return CONFIRMED, (f"the compiler uses the manual schedule (stage {it.get('stage')}); "
                               f"num_stages={it.get('num_stages')} does not change it")
        return REFUTED, (f"the compiler's schedule (order {it.get('order')}, stage "
                         f"{it.get('stage')}) is not the manual one")
    return UNVERIFIABLE, "no compiler check for this code"


def classify_file(path: str, root: str, findings: List[Finding], low: Lowerer,
                  deadline: float) -> None:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        for f in findings:
            f.reason = f"cannot read the file: {exc}"
        return
    analyses: Dict[str, object] = {}

    def analysis(target: str):
        if target not in analyses:
            analyses[target] = analyze(text, path, _settings(path, target))
        return analyses[target]

    for f in findings:
        t0 = time.perf_counter()
        try:
            _classify(f, text, path, root, analysis, low, deadline)
        except Exception as exc:  # noqa: BLE001 - the bench reports, never stops
            f.verdict, f.reason = UNVERIFIABLE, f"bench error: {type(exc).__name__}: {exc}"
        f.seconds = time.perf_counter() - t0


def _instance(a, f: Finding, d):
    krs = [kr for kr in a.kernels if kr.kernel.name == f.kernel]
    if not krs:
        return None

    def holds(kr, line: int) -> bool:
        spans = [kr.kernel.span] + ([kr.kernel.factory_span] if kr.kernel.factory_span else [])
        return any(sp.line <= line <= sp.end_line for sp in spans)

    # several kernels of one name (``main`` in many factories): the one around the finding
    lines = [f.line] + ([r.span.line for r in d.related] if d is not None else [])
    around = [kr for kr in krs if any(holds(kr, ln) for ln in lines)]
    krs = around or krs
    if d is not None and d.configs:
        for kr in krs:
            if kr.config_label and kr.config_label in d.configs:
                return kr
    return krs[0]


def _request(kr, key: str = "", bindings=None, prefer_factory: bool = False) -> dict:
    return {"name": kr.kernel.name, "factory": kr.kernel.factory,
            "bindings": _scalars(kr.bindings) if bindings is None else bindings,
            "key": key or kr.kernel.name,
            # a module-level prim_func of the same name may be another kernel
            "prefer_factory": prefer_factory or bool(kr.kernel.factory)}


def _classify(f: Finding, text: str, path: str, root: str, analysis, low: Lowerer,
              deadline: float) -> None:
    if f.code == "TL001":
        try:
            ast.parse(text)
        except SyntaxError as exc:
            f.verdict, f.detail = CONFIRMED, f"CPython: {exc.msg} (line {exc.lineno})"
        else:
            f.verdict, f.detail = REFUTED, "CPython's ast.parse accepts the file"
        return
    if f.code not in COMPILE_ERRORS + LOOP_WARNINGS + ("TL201", "TL202"):
        f.reason = f"no compiler check for {f.code} in this bench"
        return
    if time.monotonic() > deadline:
        f.reason = "the bench's time budget is spent"
        return
    if targets_mod.get(f.target) is None:
        f.reason = f"unknown target {f.target}"
        return
    a = analysis(f.target)
    d = next((x for x in a.diagnostics if x.code == f.code and x.span.line == f.line
              and x.message == f.message), None) or \
        next((x for x in a.diagnostics if x.code == f.code and x.span.line == f.line), None)
    kr = _instance(a, f, d)
    if kr is None:
        f.reason = "the finding names no kernel the analysis lists"
        return
    if f.code == "TL202":
        _classify_tl202(f, a, kr, path, root, low)
        return
    res = low.facts(path, root, f.target, _request(kr))
    why = _kernel_failure(res)
    if why:
        f.reason = why
        return
    k = res["kernel"]
    if f.code in COMPILE_ERRORS:
        f.verdict, msg = judge_error(f, k)
    elif f.code == "TL201":
        f.verdict, msg = judge_arena(f, k)
    else:
        f.verdict, msg = judge_loop(f, k, kr)
    if f.verdict == UNVERIFIABLE:
        f.reason = msg
    else:
        f.detail = msg + (f" [{k.get('instantiated')}]" if k.get("instantiated") else "")


def spread(items: list, n: int) -> list:
    """At most n items, evenly spaced, first and last included."""
    if n <= 0 or len(items) <= n:
        return list(items)
    if n == 1:
        return [items[0]]
    idx = sorted({round(i * (len(items) - 1) / (n - 1)) for i in range(n)})
    return [items[i] for i in idx]


MAX_CONFIGS = 6


def _classify_tl202(f: Finding, a, kr, path: str, root: str, low: Lowerer) -> None:
    got = packing.autotune_overflows(a.module, kr.kernel, f.target, kr.bindings)
    if not got or not got[1]:
        f.reason = "the analysis lists no overflowing configuration in-process"
        return
    cfgs, over = got
    keys = {k for c in cfgs for k in c}
    verdicts: List[Tuple[str, str, str]] = []
    checked = spread(list(enumerate(over)), MAX_CONFIGS)
    for i, (cfg, _p) in checked:
        binds = {n: v for n, v in _scalars(kr.bindings).items() if n not in keys}
        binds.update({n: v for n, v in cfg.items() if n != "pass_configs"
                      and (isinstance(v, (int, float, str, bool)) or v is None)})
        label = packing._cfg_label(cfg)
        res = low.facts(path, root, f.target,
                        _request(kr, key=f"{kr.kernel.name}#cfg{i}", bindings=binds,
                                 prefer_factory=True))
        why = _kernel_failure(res)
        if why:
            verdicts.append((UNVERIFIABLE, label, why))
            continue
        v, msg = judge_arena(f, res["kernel"])
        verdicts.append((v, label, msg))
    refuted = [x for x in verdicts if x[0] == REFUTED]
    confirmed = [x for x in verdicts if x[0] == CONFIRMED]
    if refuted:
        f.verdict = REFUTED
        f.detail = "; ".join(f"{lb}: {m}" for _, lb, m in refuted)
    elif confirmed:
        f.verdict = CONFIRMED
        f.detail = (f"{len(confirmed)} of {len(verdicts)} lowered configurations overflow on the "
                    f"compiler ({len(over)} named, {len(verdicts)} checked)"
                    + ("" if len(confirmed) == len(verdicts) else
                       f"; {len(verdicts) - len(confirmed)} could not be lowered"))
    else:
        f.reason = verdicts[0][2] if verdicts else "no configuration to lower"


# --------------------------------------------------------------------------
# 4. report
# --------------------------------------------------------------------------


def reason_group(reason: str) -> str:
    """Reasons with line numbers and long tails cut, so that they group."""
    r = re.sub(r"\s*\(line \d+\)", "", reason)
    r = re.sub(r"\bline \d+\b", "line N", r)
    r = re.sub(r"`[^`]*\.(get_tir|py)\(.*?\)`", "`…`", r)
    return _first_line(r, 140)


def report(name: str, findings: List[Finding], stats: dict) -> str:
    by_code: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for f in findings:
        by_code[f.code][f.verdict] += 1
    lines = [f"== {name}", "",
             f"{'code':6} | {'findings':>8} | {'confirmed':>9} | {'refuted':>7} | {'unverifiable':>12}",
             f"{'-' * 6}-+-{'-' * 8}-+-{'-' * 9}-+-{'-' * 7}-+-{'-' * 12}"]
    tot = collections.Counter()
    for code in sorted(by_code):
        c = by_code[code]
        n = sum(c.values())
        tot.update(c)
        lines.append(f"{code:6} | {n:8d} | {c[CONFIRMED]:9d} | {c[REFUTED]:7d} | {c[UNVERIFIABLE]:12d}")
    lines.append(f"{'all':6} | {sum(tot.values()):8d} | {tot[CONFIRMED]:9d} | {tot[REFUTED]:7d} | "
                 f"{tot[UNVERIFIABLE]:12d}")
    refuted = [f for f in findings if f.verdict == REFUTED]
    lines += ["", f"refuted ({len(refuted)}):"]
    for f in sorted(refuted, key=lambda f: (f.path, f.line, f.code)):
        lines.append(f"  {os.path.relpath(f.path, stats['root'])}:{f.line} {f.code} [{f.target}] "
                     f"{f.kernel or '-'}: {_first_line(f.message, 120)}")
        lines.append(f"      compiler: {f.detail}")
    groups: Dict[str, List[Finding]] = collections.defaultdict(list)
    for f in findings:
        if f.verdict == UNVERIFIABLE:
            groups[reason_group(f.reason)].append(f)
    lines += ["", f"unverifiable ({sum(len(v) for v in groups.values())}), by reason:"]
    for why, fs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        codes = collections.Counter(f.code for f in fs)
        lines.append(f"  {len(fs):4d}  {why}  [{', '.join(f'{c} {n}' for c, n in sorted(codes.items()))}]"
                     f"  e.g. {os.path.relpath(fs[0].path, stats['root'])}:{fs[0].line}")
    lines += ["", f"check {stats['check_s']:.1f} s; {stats['requests']} lowering requests in "
                  f"{stats['lower_s']:.1f} s; total {stats['total_s']:.1f} s"]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    global MAX_CONFIGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--target", action="append", default=[],
                    help="target for `tilelint check` (repeatable; default: the files' own)")
    ap.add_argument("--json", help="write every finding with its verdict here")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds per kernel lowering (default 120)")
    ap.add_argument("--budget", type=float, default=3600.0,
                    help="seconds for the whole run; what is left is unverifiable (default 3600)")
    ap.add_argument("--memory-mb", type=int, default=4096)
    ap.add_argument("--python", default=None, help="interpreter with tilelang 0.1.15")
    ap.add_argument("--codes", default="", help="only these codes (comma-separated)")
    ap.add_argument("--max-configs", type=int, default=MAX_CONFIGS,
                    help="TL202: lower at most this many of the named configurations, evenly "
                         f"spread, first and last included (default {MAX_CONFIGS}; 0: all)")
    args = ap.parse_args(argv)
    MAX_CONFIGS = args.max_configs
    root = os.path.abspath(args.dir)
    t_start = time.monotonic()
    deadline = t_start + args.budget
    t0 = time.perf_counter()
    findings = run_check([root], args.target)
    check_s = time.perf_counter() - t0
    if args.codes:
        keep = {c.strip() for c in args.codes.split(",") if c.strip()}
        findings = [f for f in findings if f.code in keep]
    by_file: Dict[str, List[Finding]] = collections.defaultdict(list)
    for f in findings:
        by_file[f.path].append(f)
    low = Lowerer(args.timeout, args.memory_mb, args.python)
    try:
        for i, (path, fs) in enumerate(sorted(by_file.items())):
            print(f"[{i + 1}/{len(by_file)}] {os.path.relpath(path, root)}: {len(fs)} finding(s)",
                  file=sys.stderr, flush=True)
            classify_file(path, root, fs, low, deadline)
            for f in fs:
                print(f"    {f.code}:{f.line} [{f.target}] {f.verdict}: "
                      f"{_first_line(f.detail or f.reason, 200)} ({f.seconds:.1f} s)",
                      file=sys.stderr, flush=True)
    finally:
        low.close()
    stats = {"root": root, "check_s": check_s, "requests": low.requests,
             "lower_s": low.lower_seconds, "total_s": time.monotonic() - t_start}
    print(report(root, findings, stats))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"root": root, "stats": stats,
             "findings": [f.__dict__ for f in findings]}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
