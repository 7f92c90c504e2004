"""The Ascend model's time next to the real compiler's Ascend lowering.

    /work/venv-tl/bin/python bench/ascend_schedule.py [FILE ...]
        (default: tests/fixtures/ascend/*.py)

For each kernel it prints, measured in this run:

* ``lower s``: tilelang 0.1.15 lowering to AscendC (``tests/oracle/lower_ascend.py``,
  wall time of ``tilelang.lower``, tilelang import excluded);
* ``model first ms``: ``plan_ascend`` with an empty solver cache: the cost
  model, the Z3 loop schedule (the bulk for large loops) and the sync model;
* ``model cached ms``: the same again, with the schedule cached (what an edit
  outside the loop costs in the language server);
* the two ratios lowering / model.

Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "oracle"))


def main(argv):
    from analysis import frontend, values
    from analysis.schedule_ascend import clear_cache
    from analysis.sync_ascend import plan_ascend

    files = [Path(a) for a in argv] or sorted((ROOT / "tests" / "fixtures" / "ascend").glob("*.py"))
    try:
        import lower_ascend
    except Exception:  # pragma: no cover - no tilelang here
        lower_ascend = None
    print(f"{'kernel':<22} {'tasks':>5} {'lower s':>8} {'model first ms':>15} "
          f"{'model cached ms':>16} {'lower/first':>12} {'lower/cached':>13}")
    for f in files:
        module = frontend.parse_module(f.read_text())
        kernel = module.kernels[0]
        env = values.build_env(module, kernel)
        clear_cache()
        t = time.perf_counter()
        plan = plan_ascend(kernel, env)
        first = time.perf_counter() - t
        t = time.perf_counter()
        plan_ascend(kernel, env)
        cached = time.perf_counter() - t
        lower = None
        if lower_ascend is not None:
            lower = lower_ascend.lower_file(str(f))["seconds"]
        n = len([x for x in plan.tasks if x.region == "loop"]) if plan else 0
        lo = f"{lower:8.2f}" if lower is not None else f"{'-':>8}"
        r1 = f"{lower / first:12.1f}" if lower is not None else f"{'-':>12}"
        r2 = f"{lower / cached:13.0f}" if lower is not None else f"{'-':>13}"
        print(f"{f.name:<22} {n:>5} {lo} {first * 1e3:15.1f} {cached * 1e3:16.1f} {r1} {r2}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
