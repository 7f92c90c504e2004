"""tilelint's static analysis time next to the real compiler's lowering time.

    /work/venv-tl/bin/python bench/lower_vs_model.py [--target sm_80] [--repeat 5]
        [--json OUT] [FILE ...]          (default: tests/fixtures/parity/*.py)

For each kernel of each fixture it prints, measured in this run:

* ``lower s``: ``tilelang.lower(..., enable_device_compile=False)`` wall time for
  that kernel, as reported by the compiler oracle (``tests/oracle/lower.py``,
  ``lower_seconds``; import of tilelang and of the fixture excluded);
* ``model ms``: tilelint's ``analyze()`` of the whole file (parse, values,
  planning, versions, packing, sync), best of ``--repeat`` runs, divided evenly
  among the file's kernels; the file's own cold first run is shown too;
* ``ratio``: lowering time / analysis time.

Not a test: numbers depend on the machine and its load.  Needs tilelang 0.1.15
for the compiler column (run with the venv that has it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT.parent))  # so that `tilelint` resolves from a checkout, if needed

ORACLE = ROOT / "tests" / "oracle" / "lower.py"


def compiler_times(files, target):
    cmd = [sys.executable, str(ORACLE), "--target", target, *map(str, files)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if not proc.stdout.strip():
        sys.exit(f"oracle failed:\n{proc.stderr[-2000:]}")
    out = {}
    for entry in json.loads(proc.stdout):
        kernels = {}
        for name, k in (entry.get("kernels") or {}).items():
            err = k.get("error")
            kernels[name] = (k.get("lower_seconds"),
                             None if not err else "compiler error " + str(err.get("code") or "?"))
        out[Path(entry["file"]).name] = (kernels, entry.get("import_error"))
    return out


def model_times(path, target, repeat):
    from tilelint.analysis import Settings, analyze
    text = Path(path).read_text()
    t0 = time.perf_counter()
    a = analyze(text, str(path), Settings(target=target))
    cold = time.perf_counter() - t0
    best = cold
    for _ in range(max(0, repeat - 1)):
        t0 = time.perf_counter()
        analyze(text, str(path), Settings(target=target))
        best = min(best, time.perf_counter() - t0)
    return [k.kernel.name for k in a.kernels], cold, best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--target", default="sm_80")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.files] or sorted(
        p for p in (ROOT / "tests" / "fixtures" / "parity").glob("*.py") if not p.name.startswith("_"))
    print(f"lowering {len(files)} files with the compiler ({args.target}) ...", file=sys.stderr)
    comp = compiler_times(files, args.target)
    rows = []
    for f in files:
        names, cold, best = model_times(f, args.target, args.repeat)
        kernels, err = comp.get(f.name, ({}, "no oracle result"))
        per = best / max(1, len(names))
        for name in names or ["-"]:
            lo, kerr = kernels.get(name, (None, None))
            rows.append({"file": f.name, "kernel": name, "lower_s": lo,
                         "model_ms": round(per * 1000, 3), "model_cold_ms": round(cold * 1000, 3),
                         "ratio": (round(lo / per, 1) if lo and per > 0 else None),
                         "note": err or kerr or ("" if lo is not None else "not lowered")})
    w = max(len(r["file"]) + len(r["kernel"]) + 1 for r in rows)
    print(f"{'file:kernel'.ljust(w)}  {'lower s':>8}  {'model ms':>9}  {'cold ms':>8}  {'ratio':>7}")
    for r in rows:
        lo = "-" if r["lower_s"] is None else f"{r['lower_s']:.3f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.0f}x"
        print(f"{(r['file'] + ':' + r['kernel']).ljust(w)}  {lo:>8}  {r['model_ms']:>9.2f}  "
              f"{r['model_cold_ms']:>8.2f}  {ratio:>7}  {r['note']}")
    lowered = [r for r in rows if r["lower_s"]]
    if lowered:
        tl = sum(r["lower_s"] for r in lowered)
        tm = sum(r["model_ms"] for r in lowered) / 1000
        print(f"\n{len(lowered)} lowered kernels: compiler {tl:.2f} s, tilelint {tm * 1000:.1f} ms "
              f"(warm), ratio {tl / tm:.0f}x  [target {args.target}; one machine, one run]")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
