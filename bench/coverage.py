"""How much of a tree of real kernel files tilelint resolves statically.

    python bench/coverage.py DIR [DIR ...] [--target T] [--json OUT] [--list-symbolic]
                             [--list-unlisted]

With several directories, one block per directory (one repository each), then
the total.

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
* the time taken, next to libcst's bare ``parse_module`` time for the same files;
* independent of tilelint's frontend: every ``for ... in T.Pipelined(...)``
  (any ``<x>.Pipelined(...)`` or bare ``Pipelined(...)`` call used as the
  iterator, also as either branch of ``a if c else b``) that CPython's ``ast``
  finds, and how many of them ``analyze()`` (what ``tilelint check`` runs, with
  the file's own target unless --target is given, every instance) lists under a
  kernel, matched by the ``for`` line; ``--list-unlisted`` prints the others;
* files with a kernel or a shared allocation (``alloc_shared`` per ``ast``) and
  how many of them get concrete shared-memory bytes for at least one instance
  of one of their kernels.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:  # installed (pip install -e .)
    from tilelint.analysis import frontend, pipeline, planning, values, versions
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
    from tilelint.analysis import frontend, pipeline, planning, values, versions

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


# --------------------------------------------------------------------------
# CPython's view: T.Pipelined loops and shared allocations, by ``ast``
# --------------------------------------------------------------------------


def _is_pipelined_call(node: ast.AST) -> bool:
    if isinstance(node, ast.IfExp):
        return _is_pipelined_call(node.body) or _is_pipelined_call(node.orelse)
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "Pipelined") or \
        (isinstance(f, ast.Name) and f.id == "Pipelined")


def ast_facts(text: str) -> Optional[Dict[str, object]]:
    """{'loops': [for-line, ...], 'shared': bool}, or None when CPython rejects the file."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    loops: List[int] = []
    shared = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)) and _is_pipelined_call(node.iter):
            loops.append(node.lineno)
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "alloc_shared":
                shared = True
    return {"loops": sorted(loops), "shared": shared}


def _settings_for(path: Path, text: str, target: Optional[str]):
    """What ``tilelint check`` uses for the file (its configuration, its own
    target unless one is given), with every instance analysed."""
    import dataclasses

    from tilelint.analysis import Settings
    try:
        from tilelint.server.config import ConfigCache
        cfg = ConfigCache().for_path(path)
        s = cfg.settings_for(path, target or cfg.targets_for(path, text)[0])
    except Exception:  # noqa: BLE001 - a broken pyproject or directive: defaults
        s = Settings(target=target or "sm_80")
    return dataclasses.replace(s, all_bindings=True)


def listing(path: Path, text: str, target: Optional[str], stats: Dict,
            unlisted: List[str]) -> None:
    """The ast loops of one file against the loops analyze() lists under kernels."""
    facts = ast_facts(text)
    if facts is None:
        stats["ast_rejected_files"] += 1
        return
    try:
        from tilelint.analysis import analyze
        settings = _settings_for(path, text, target)
        a = analyze(text, str(path), settings)
    except Exception:  # noqa: BLE001
        stats["crashes"] += 1
        stats["crash_list"].append(f"{path}: analyze: {traceback.format_exc(limit=3)}")
        return
    listed = {lr.loop.span.line for kr in a.kernels for lr in kr.loops}
    loops = facts["loops"]
    stats["ast_pipelined_loops"] += len(loops)
    if loops:
        stats["ast_files_with_pipelined"] += 1
    for ln in loops:
        if ln in listed:
            stats["ast_loops_listed"] += 1
        else:
            unlisted.append(f"{path}:{ln}")
    if a.kernels or facts["shared"]:
        stats["smem_files"] += 1
        if any(kr.shared_bytes is not None for kr in a.kernels):
            stats["smem_files_concrete"] += 1


def run(dirs: List[str], target: Optional[str] = None) -> Dict:
    stats: Dict = collections.Counter()
    stats["crash_list"] = []
    unlisted: List[str] = []
    symbolic: collections.Counter = collections.Counter()
    examples: Dict[str, str] = {}
    timing = {"ours": 0.0, "libcst": 0.0}
    frontend.parse_chunk.cache_clear()
    for path in _files(dirs):
        analyse_file(path, target or "sm_80", stats, symbolic, examples, timing)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "tilelang" in text:
            listing(path, text, target, stats, unlisted)
    crash_list = stats.pop("crash_list")
    return {"stats": dict(stats), "symbolic": symbolic.most_common(), "examples": examples,
            "timing": timing, "crashes": crash_list, "unlisted": unlisted,
            "bytes_source": "packing" if packing is not None else "shapes (stand-in)"}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f} %" if b else "n/a"


def report(name: str, r: Dict, list_symbolic: bool, list_unlisted: bool = False) -> str:
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
        f"T.Pipelined loops (ast)       {s['ast_pipelined_loops']}"
        f"  (in {s['ast_files_with_pipelined']} files)",
        f"  listed under a kernel       {s['ast_loops_listed']}"
        f"  {_pct(s['ast_loops_listed'], s['ast_pipelined_loops'])}",
        f"files with kernels or smem    {s['smem_files']}",
        f"  concrete smem bytes         {s['smem_files_concrete']}"
        f"  {_pct(s['smem_files_concrete'], s['smem_files'])}  (analyze(), any instance)",
        f"files ast.parse rejects       {s['ast_rejected_files']}",
        f"crashes                       {len(r['crashes'])}",
        f"time                          {t['ours']:.2f} s  (libcst bare parse {t['libcst']:.2f} s,"
        f" x{t['ours'] / t['libcst']:.2f})" if t["libcst"] else "time n/a",
    ]
    if r["symbolic"]:
        lines.append("symbolic num_stages, by blocking names:")
        for why, n in r["symbolic"][: None if list_symbolic else 15]:
            lines.append(f"  {n:4d}  {why}   e.g. {r['examples'].get(why, '')}")
    if list_unlisted and r.get("unlisted"):
        lines.append(f"T.Pipelined loops not listed under a kernel ({len(r['unlisted'])}):")
        lines.extend(f"  {u}" for u in r["unlisted"])
    for c in r["crashes"][:10]:
        lines.append("CRASH " + c)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--target", default=None,
                    help="analyse for this target (default: each file's own, as tilelint check)")
    ap.add_argument("--json", help="write the raw numbers here")
    ap.add_argument("--separate", action="store_true",
                    help="(default with several directories) report every directory on its own")
    ap.add_argument("--list-symbolic", action="store_true")
    ap.add_argument("--list-unlisted", action="store_true",
                    help="print every T.Pipelined loop (file:line) no kernel lists")
    args = ap.parse_args(argv)
    out = {}
    if len(args.dirs) > 1:
        for d in args.dirs:
            r = run([d], args.target)
            out[d] = r
            print(report(d, r, args.list_symbolic, args.list_unlisted))
            print()
        total = collections.Counter()
        for d in args.dirs:
            total.update({k: v for k, v in out[d]["stats"].items() if isinstance(v, int)})
        s = total
        print("== total")
        print(f"T.Pipelined loops (ast) {s['ast_pipelined_loops']}, listed {s['ast_loops_listed']}"
              f" {_pct(s['ast_loops_listed'], s['ast_pipelined_loops'])}; files with concrete smem"
              f" {s['smem_files_concrete']} / {s['smem_files']}"
              f" {_pct(s['smem_files_concrete'], s['smem_files'])}")
        r = {"crashes": [c for d in args.dirs for c in out[d]["crashes"]]}
    else:
        r = run(args.dirs, args.target)
        out["all"] = r
        print(report(" + ".join(args.dirs), r, args.list_symbolic, args.list_unlisted))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 1 if r["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
