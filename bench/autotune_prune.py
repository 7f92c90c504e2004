"""Autotune pruning against the real compiler: what ``tilelint.prune_configs``
removes, what tilelang 0.1.15's arena says, and the lowering time saved.

    .venv/bin/python bench/autotune_prune.py [--targets sm_80,sm_90] [--json OUT]

The examples are ``tests/fixtures/autotune_prune/*.py``, autotuned kernels in the
three styles public TileLang code uses: a literal list of configurations, an
``itertools.product`` of per-parameter lists, and a function that tilelang calls
with the kernel's arguments and that returns a list.  For each example and
target it prints, measured in this run:

* the number of configurations in and kept (``prune_configs``, or
  ``autotune_configs`` for the configuration function, called with the
  example's own arguments as tilelang would);
* for every configuration, the shared memory per block the compiler computes
  (``tilelang.lower(..., enable_device_compile=False)``: the device function's
  ``dyn_shared_memory_buf`` plus the static ``__shared__`` arrays of its CUDA
  source, the mbarriers of sm_90), checked against the target's limit: a removed
  one must exceed it, a kept one must not (``ok`` / ``MISMATCH``);
* the lowering time of the removed configurations (what the autotuner would
  have spent before their launch failed; compiling them to a binary, which the
  autotuner also does, costs more) next to the lowering time of all of them and
  to tilelint's own time.

One warm-up lowering comes first and is not counted.  Not a test: the times
depend on the machine and its load (tests/test_autotune_prune.py checks the
sets).  Needs tilelang 0.1.15; no GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "tests" / "fixtures" / "autotune_prune"
# (file stem, the autotuned kernel's name, the style of its configuration list)
EXAMPLES = (
    ("gemm_list", "gemm_list", "a literal list"),
    ("gemm_product", "gemm_product", "itertools.product"),
    ("attention_fn", "attention_fwd", "a function returning a list"),
)
STATIC_SHARED = re.compile(r"(?<!extern )__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+\w+\[(\d+)\]")
C_TYPE_BYTES = {"uint64_t": 8, "int64_t": 8, "double": 8, "float": 4, "int": 4, "uint": 4,
                "unsigned": 4, "half_t": 2, "half": 2, "bfloat16_t": 2, "uchar": 1, "char": 1,
                "signed char": 1}


def load_example(stem: str) -> Any:
    path = EXAMPLES_DIR / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"_autotune_prune_{stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # inspect.getmodule finds it there
    spec.loader.exec_module(mod)
    return mod


def example_configs(mod: Any, kernel: Any) -> List[Dict[str, Any]]:
    """The configurations tilelang's autotuner would compile, in its order."""
    cfgs = kernel.configs
    return list(cfgs(*mod.ARGS) if callable(cfgs) else cfgs)


def prune(mod: Any, kernel: Any, target: str) -> Any:
    """What tilelint keeps: the configuration function through
    ``autotune_configs`` (called with the kernel's arguments, as tilelang does),
    a list through ``prune_configs``."""
    import tilelint
    if callable(kernel.configs):
        return tilelint.autotune_configs(kernel.configs, target=target)(*mod.ARGS)
    names = list(kernel.jit_impl.signature.parameters)
    return tilelint.prune_configs(kernel, kernel.configs, target=target,
                                  bindings=dict(zip(names, mod.ARGS, strict=False)))


def compiler_shared(mod: Any, kernel: Any, cfg: Dict[str, Any], target: str
                    ) -> Tuple[Optional[int], float, Optional[str]]:
    """(shared memory per block the compiler gives, lowering seconds, error)."""
    import tilelang
    import tvm
    t0 = time.perf_counter()
    try:
        pf = kernel.jit_impl.get_tir(*mod.ARGS, **cfg)
        tg = tvm.target.Target({"kind": "cuda", "arch": target})
        with tg, tvm.transform.PassContext(opt_level=3):
            art = tilelang.lower(pf, target=tg, enable_device_compile=False)
    except Exception as exc:  # noqa: BLE001 - the compiler's answer is the error
        return None, time.perf_counter() - t0, f"{type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.perf_counter() - t0
    dyn = 0
    for _, f in art.device_mod.functions.items():
        attrs = getattr(f, "attrs", None)
        if attrs is not None and "dyn_shared_memory_buf" in attrs:
            dyn += int(attrs["dyn_shared_memory_buf"])
    static = 0
    for ctype, count in STATIC_SHARED.findall(art.kernel_source or ""):
        if ctype not in C_TYPE_BYTES:
            return None, seconds, f"static __shared__ of unknown type {ctype}"
        static += C_TYPE_BYTES[ctype] * int(count)
    return dyn + static, seconds, None


def label(cfg: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


def run(targets: List[str]) -> List[Dict[str, Any]]:
    from tilelint.analysis import targets as targets_mod
    rows: List[Dict[str, Any]] = []
    loaded = [(load_example(stem), name, style) for stem, name, style in EXAMPLES]
    first_mod, first_name, _ = loaded[0]
    first_kernel = getattr(first_mod, first_name)
    compiler_shared(first_mod, first_kernel, example_configs(first_mod, first_kernel)[0],
                    targets[0])  # warm-up, not counted
    for target in targets:
        limit = targets_mod.budget(target)
        assert limit is not None
        for mod, name, style in loaded:
            kernel = getattr(mod, name)
            cfgs = example_configs(mod, kernel)
            t0 = time.perf_counter()
            kept = prune(mod, kernel, target)
            model_s = time.perf_counter() - t0
            reasons = {label(dict(c)): r for c, r in kept.removed}
            kept_labels = {label(dict(c)) for c in kept}
            print(f"\n{name} ({style}), {target}, limit {limit} B: {len(cfgs)} configs in, "
                  f"{len(kept)} kept, {len(cfgs) - len(kept)} removed "
                  f"(tilelint {model_s:.2f} s)")
            saved = total = 0.0
            for cfg in cfgs:
                lab = label(cfg)
                nbytes, secs, err = compiler_shared(mod, kernel, cfg, target)
                is_kept = lab in kept_labels
                total += secs
                if not is_kept:
                    saved += secs
                if nbytes is None:
                    verdict = f"compiler: {err}"
                    ok = False
                else:
                    over = nbytes > limit
                    ok = over != is_kept
                    verdict = (f"compiler {nbytes} B {'>' if over else '<='} {limit} B "
                               f"{'ok' if ok else 'MISMATCH'}")
                print(f"  {'kept   ' if is_kept else 'removed'} {lab}: {verdict}, "
                      f"lower {secs:.2f} s" + ("" if is_kept else f"  [{reasons.get(lab)}]"))
                rows.append({"example": name, "style": style, "target": target, "config": cfg,
                             "kept": is_kept, "compiler_bytes": nbytes, "limit": limit,
                             "lower_seconds": round(secs, 3), "error": err, "ok": ok,
                             "tilelint_seconds": round(model_s, 3)})
            print(f"  lowering time of the removed configs: {saved:.1f} s of {total:.1f} s "
                  f"for all {len(cfgs)} ({(saved / total if total else 0):.0%}); "
                  f"tilelint took {model_s:.2f} s")
    removed = [r for r in rows if not r["kept"]]
    bad = [r for r in rows if not r["ok"]]
    saved = sum(r["lower_seconds"] for r in removed)
    spent = sum(r["lower_seconds"] for r in rows)
    print(f"\nall examples, {', '.join(targets)}: {len(rows)} configs, {len(removed)} removed, "
          f"{len(bad)} disagreeing with the compiler; lowering time saved {saved:.1f} s "
          f"of {spent:.1f} s")
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="sm_80,sm_90")
    ap.add_argument("--json", metavar="OUT", help="write every row as JSON")
    args = ap.parse_args(argv)
    rows = run([t.strip() for t in args.targets.split(",") if t.strip()])
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
