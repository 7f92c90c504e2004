"""Where the time of one kernel's analysis goes: the per-kernel path that an
edit re-runs when only that kernel changed.

    python bench/kernel_phases.py [FILE_OR_DIR ...] [--target sm_80] [--repeat 5]
                                  [--profile N]

Default: every file of tests/fixtures/parity.  For each kernel, the best of
``--repeat`` runs (milliseconds, process CPU time) of:

* parse     -- ``frontend.parse_chunk`` of the kernel's top-level chunk, uncached;
* instances -- ``values.instances`` (environments of every binding);
* plan      -- ``packing.plan_loops`` (planning, warp specialization, versions),
               every instance;
* pack+sync -- ``packing.pack_kernel`` and ``sync_cuda.kernel_sync_regions``,
               every instance (CUDA targets);
* kernel    -- ``pipeline.run_kernel``, everything one kernel costs (instances,
               planning, packing, sync, rules, TL202's autotune sweep);

then the median and the largest over kernels, and the same for libcst's bare
``parse_module`` of the chunk, to compare with.  ``--profile N`` prints the N
most expensive functions (cProfile, cumulative) of the ``kernel`` phase.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import libcst as cst

from tilelint.analysis import frontend, packing, pipeline, sync_cuda, targets, values
from tilelint.analysis.loops import active_view
from tilelint.analysis.model import Settings

ROOT = Path(__file__).resolve().parent.parent


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best * 1000.0


def _files(args: List[str]) -> List[Path]:
    out: List[Path] = []
    for a in args or [str(ROOT / "tests" / "fixtures" / "parity")]:
        p = Path(a)
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return out


def _measure(rows: Dict[str, List[float]], prof, repeat: int, settings: Settings,
             target: str, cuda: bool, source: str, module, aliases, chunks, kernel) -> None:
    line = kernel.name_span.line
    chunk = max((c for c in chunks if c.start_line <= line), key=lambda c: c.start_line)
    rows["libcst"].append(_best(lambda: cst.parse_module(chunk.text), repeat))
    rows["parse"].append(_best(
        lambda: frontend.parse_chunk.__wrapped__(chunk.text, chunk.start_line, aliases),
        repeat))
    overrides = pipeline.kernel_overrides(kernel, settings)
    rows["instances"].append(_best(
        lambda: values.instances(module, kernel, overrides), repeat))
    insts = values.instances(module, kernel, overrides)
    views = [(active_view(kernel, i.env), i.env) for i in insts]
    rows["plan"].append(_best(
        lambda: [packing.plan_loops(k, e, target) for k, e in views], repeat))
    if cuda:
        planned = [(k, e, packing.plan_loops(k, e, target)) for k, e in views]

        def pack_sync() -> None:
            for k, e, p in planned:
                pack = packing.pack_kernel(k, e, p.loops, target, p.warp_specialized)
                sync_cuda.kernel_sync_regions(k, e, p.loops, target,
                                              p.warp_specialized, pack=pack)
        rows["pack+sync"].append(_best(pack_sync, repeat))

    def whole() -> None:
        pipeline.run_kernel(module, kernel, target, settings, source)
    rows["kernel"].append(_best(whole, repeat))
    if prof is not None:
        prof.enable()
        whole()
        prof.disable()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--target", default="sm_80")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", type=int, default=0)
    args = ap.parse_args(argv)
    sys.setrecursionlimit(10000)
    settings = Settings(target=args.target)
    target = targets.normalise(args.target)
    cuda = (targets.get(target) is not None and targets.get(target).kind == "cuda")
    rows: Dict[str, List[float]] = {k: [] for k in
                                    ("libcst", "parse", "instances", "plan", "pack+sync", "kernel")}
    prof = cProfile.Profile() if args.profile else None
    for path in _files(args.paths):
        source = frontend.normalise_newlines(path.read_text(encoding="utf-8"))
        module = frontend.parse_module(source)
        aliases = frontend.find_aliases(source)
        chunks = frontend.split_chunks(source)
        for kernel in module.kernels:
            _measure(rows, prof, args.repeat, settings, target, cuda, source, module,
                     aliases, chunks, kernel)
    n = len(rows["kernel"])
    print(f"{n} kernels, target {target}, best of {args.repeat} (ms CPU)")
    print(f"{'phase':<10} {'median':>8} {'max':>8} {'total':>9}")
    for k, v in rows.items():
        if v:
            print(f"{k:<10} {statistics.median(v):8.2f} {max(v):8.2f} {sum(v):9.1f}")
    if rows["libcst"] and rows["parse"]:
        print(f"parse / libcst parse of the same chunks: "
              f"{sum(rows['parse']) / max(sum(rows['libcst']), 1e-9):.2f}x")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
