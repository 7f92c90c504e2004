"""How much of a tree of real kernel files tilelint resolves statically.

    python bench/coverage.py DIR [DIR ...] [--target sm_80] [--json OUT] [--list-symbolic]

For every ``*.py`` under the given directories (files that do not mention
tilelang are skipped) it runs the frontend, the value resolver, planning,
versioning and arena packing -- never importing or executing the files -- and
prints:

* files, files with kernels, kernels, pipelined loops;
* pipelined loops whose stage/order is concrete (num_stages known, or a known
  manual order/stage, for at least one binding of the kernel);
* loops whose num_stages stays symbolic, grouped by the names that block it;
* files whose shared-memory arena bytes are concrete for at least one binding
  of every kernel in the file (arena bytes from ``analysis/packing.py``);
* crashes (an exception escaping our code; must be 0);
* the time taken, next to libcst's bare ``parse_module`` time for the same files.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:  # installed (pip install -e .)
    from tilelint.analysis import frontend, values, planning, versions
    from tilelint.analysis import pipeline
except ImportError:  # pragma: no cover - running from a bare checkout
    import importlib
    import types
    pkg = types.ModuleType("tilelint")
    pkg.__path__ = []  # type: ignore[attr-defined]
    sys.modules["tilelint"] = pkg
    spec = importlib.util.spec_from_file_location(
        "tilelint.analysis", ROOT / "analysis" / "__init__.py",
        submodule_search_locations=[str(ROOT / "analysis")])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tilelint.analysis"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    from tilelint.analysis import frontend, values, planning, versions  # noqa: E402
    from tilelint.analysis import pipeline  # noqa: E402

try:
    from tilelint.analysis import packing
except ImportError:  # packing not available: fall back to "all shapes concrete"
    packing = None  # type: ignore[assignment]

import libcst as cst  # noqa: E402


def _files(dirs: List[str]) -> List[Path]:
    out: List[Path] = []
    for d in dirs:
        p = Path(d)
        if p.is_file():
            out.append(p)
            continue
        out.extend(sorted(x for x in p.rglob("*.py") if x.is_file()))
    return out


def _shapes_concrete(kernel, env) -> bool:
    for a in kernel.allocs:
        if not a.scope.startswith("shared") or a.scope == "shared.barrier":
            continue
        if any(env.eval_int(d) is None for d in a.shape):
            return False
        if values.dtype_bits(values.normalise_dtype(env.evaluate(a.dtype))) is None:
            return False
    return True


def _loop_concrete(loop, env) -> Optional[bool]:
    """True: stage/order known; False: symbolic.  None: the loop is not
    pipelined in this binding (a conditional iterator whose condition is false)."""
    if loop.condition is not None:
        c = env.evaluate(loop.condition)
        if c is not None and not c:
            return None
    manual = loop.order is not None and loop.stage is not None
    if manual:
        return all(env.eval_int(e) is not None for e in loop.order + loop.stage)
    if loop.num_stages is None:
        return True  # num_stages=0: not pipelined, nothing symbolic
    return env.eval_int(loop.num_stages) is not None


def _loop_blockers(loop, env) -> List[str]:
    exprs = []
    if loop.order is not None and loop.stage is not None:
        exprs = list(loop.order) + list(loop.stage)
    elif loop.num_stages is not None:
        exprs = [loop.num_stages]
    reasons = []
    for e in exprs:
        r = env.reason(e)
        names = sorted(env.missing(e))
        if names:
            # Where each blocking name came from ("call at line 343 (unknown
            # there: q)"), with line numbers dropped so reasons group.
            import re
            r = ", ".join(f"{n} <- {re.sub(r' at line [0-9]+', '', env.sources.get(n, '?'))}"
                          for n in names)
        if r and r not in reasons:
            reasons.append(r)
    return reasons or ["<not a constant expression>"]


def analyse_file(path: Path, target: str, stats: Dict, symbolic: collections.Counter,
                 examples: Dict[str, str], timing: Dict) -> None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if "tilelang" not in text:
        return
    stats["files"] += 1
    t0 = time.perf_counter()
    try:
        cst.parse_module(text)
    except Exception:
        pass
    timing["libcst"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        module = frontend.parse_module(text)
    except Exception:
        stats["crashes"] += 1
        stats["crash_list"].append(f"{path}: frontend: {traceback.format_exc(limit=3)}")
        return
    if not module.kernels:
        timing["ours"] += time.perf_counter() - t0
        return
    stats["files_with_kernels"] += 1
    file_bytes_ok = True
    file_has_pipelined = False
    for kernel in module.kernels:
        stats["kernels"] += 1
        try:
            insts = values.instances(module, kernel, {}, all_calls=True)
        except Exception:
            stats["crashes"] += 1
            stats["crash_list"].append(f"{path}:{kernel.name}: values: "
                                       f"{traceback.format_exc(limit=3)}")
            file_bytes_ok = False
            continue
        if len(insts) > 1:
            stats["kernels_multi_binding"] += 1
        loops = list(pipeline.pipelined_loops(kernel.body))
        loop_ok = [False] * len(loops)
        loop_active = [False] * len(loops)
        bytes_ok = False
        for inst in insts:
            env = inst.env
            allocs = {a.name: a for a in kernel.allocs}
            results = []
            for i, lp in enumerate(loops):
                c = _loop_concrete(lp, env)
                if c is None:
                    continue
                loop_active[i] = True
                loop_ok[i] = loop_ok[i] or c
                try:
                    lr, _ = planning.plan_loop(lp, env, target, allocs, False)
                    if lr.pipelined:
                        lr = pipeline._replace(lr, versions=versions.compute_versions(lr, allocs))
                    results.append(lr)
                except Exception:
                    stats["crashes"] += 1
                    stats["crash_list"].append(f"{path}:{kernel.name}: planning: "
                                               f"{traceback.format_exc(limit=4)}")
            if packing is not None:
                try:
                    pk = packing.pack_kernel(kernel, env, results, target, False)
                    if pk.arena_bytes is not None:
                        bytes_ok = True
                except Exception:
                    stats["crashes"] += 1
                    stats["crash_list"].append(f"{path}:{kernel.name}: packing: "
                                               f"{traceback.format_exc(limit=4)}")
            elif _shapes_concrete(kernel, env):
                bytes_ok = True
        if not bytes_ok:
            file_bytes_ok = False
            stats["kernels_bytes_symbolic"] += 1
        for i, lp in enumerate(loops):
            file_has_pipelined = True
            stats["pipelined_loops"] += 1
            if not loop_active[i]:
                stats["loops_not_pipelined_by_condition"] += 1
                stats["loops_concrete"] += 1
                continue
            if loop_ok[i]:
                stats["loops_concrete"] += 1
            else:
                env = insts[0].env
                why = ", ".join(_loop_blockers(lp, env))
                symbolic[why] += 1
                examples.setdefault(why, f"{path}:{lp.span.line}")
    if file_bytes_ok:
        stats["files_bytes_concrete"] += 1
    if file_has_pipelined:
        stats["files_with_pipelined"] += 1
    timing["ours"] += time.perf_counter() - t0


def run(dirs: List[str], target: str = "sm_80") -> Dict:
    stats: Dict = collections.Counter()
    stats["crash_list"] = []
    symbolic: collections.Counter = collections.Counter()
    examples: Dict[str, str] = {}
    timing = {"ours": 0.0, "libcst": 0.0}
    frontend.parse_chunk.cache_clear()
    for path in _files(dirs):
        analyse_file(path, target, stats, symbolic, examples, timing)
    crash_list = stats.pop("crash_list")
    return {"stats": dict(stats), "symbolic": symbolic.most_common(), "examples": examples,
            "timing": timing, "crashes": crash_list,
            "bytes_source": "packing" if packing is not None else "shapes (stand-in)"}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f} %" if b else "n/a"


def report(name: str, r: Dict, list_symbolic: bool) -> str:
    s = collections.Counter(r["stats"])
    t = r["timing"]
    lines = [
        f"== {name}",
        f"files mentioning tilelang     {s['files']}",
        f"files with kernels            {s['files_with_kernels']}"
        f"  (kernels {s['kernels']}, with several bindings {s['kernels_multi_binding']})",
        f"pipelined loops               {s['pipelined_loops']}"
        f"  (in {s['files_with_pipelined']} files)",
        f"  concrete stage/order        {s['loops_concrete']}"
        f"  {_pct(s['loops_concrete'], s['pipelined_loops'])}"
        + (f"  (incl. {s['loops_not_pipelined_by_condition']} whose condition is false)"
           if s['loops_not_pipelined_by_condition'] else ""),
        f"  num_stages symbolic         {s['pipelined_loops'] - s['loops_concrete']}",
        f"files with concrete smem      {s['files_bytes_concrete']} / {s['files_with_kernels']}"
        f"  {_pct(s['files_bytes_concrete'], s['files_with_kernels'])}"
        f"  [{r['bytes_source']}]",
        f"crashes                       {len(r['crashes'])}",
        f"time                          {t['ours']:.2f} s  (libcst bare parse {t['libcst']:.2f} s,"
        f" x{t['ours'] / t['libcst']:.2f})" if t["libcst"] else "time n/a",
    ]
    if r["symbolic"]:
        lines.append("symbolic num_stages, by blocking names:")
        for why, n in r["symbolic"][: None if list_symbolic else 15]:
            lines.append(f"  {n:4d}  {why}   e.g. {r['examples'].get(why, '')}")
    for c in r["crashes"][:10]:
        lines.append("CRASH " + c)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--target", default="sm_80")
    ap.add_argument("--json", help="write the raw numbers here")
    ap.add_argument("--separate", action="store_true",
                    help="also report every directory on its own")
    ap.add_argument("--list-symbolic", action="store_true")
    args = ap.parse_args(argv)
    out = {}
    if args.separate and len(args.dirs) > 1:
        for d in args.dirs:
            r = run([d], args.target)
            out[d] = r
            print(report(d, r, args.list_symbolic))
    r = run(args.dirs, args.target)
    out["all"] = r
    print(report(" + ".join(args.dirs), r, args.list_symbolic))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 1 if r["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
