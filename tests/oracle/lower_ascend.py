"""Ascend oracle: lower kernels with the real tilelang 0.1.15 and extract the
synchronisation it emitted.

Usage (in the venv that has tilelang)::

    python tests/oracle/lower_ascend.py FILE[:FACTORY] ...   # prints JSON lines

Each FILE defines a factory (default ``kernel``) whose defaults build a
``@T.prim_func`` importing ``tilelang.ascend.language as T``.  The kernel is
lowered with target "ascend" inside ``_make_ascend_target()`` (AscendC codegen
works without an NPU) and the AscendC source is scanned for
``asc_sync_notify/wait``, ``asc_sync_pipe``, ``asc_sync_intra_arrive/wait`` and
``asc_lock`` calls.  Each call is reported with the core whose section it sits
in (AIC/AIV), its pipes and the event ids it takes over the loop it sits in.
Compiler failures are reported with their message.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import time
from typing import Dict, List, Optional, Tuple

_FOR = re.compile(r"for \(int32_t (\w+) = (-?\d+); \1 < (\d+); \+\+\1\)")
_NOTIFY = re.compile(r"asc_sync_(notify|wait)\((PIPE_\w+), (PIPE_\w+), static_cast<event_t>\((.*)\)\);")
_PIPE = re.compile(r"asc_sync_pipe\((PIPE_\w+)\);")
_INTRA = re.compile(r"asc_sync_intra_(arrive|wait)\((PIPE_\w+), (.*)\);")
_LOCK = re.compile(r"asc_lock\((PIPE_\w+), (.*), (ASC_LOCK_\w+)\);")
_VF_FUNC = re.compile(r"__(simt|simd)_vf__")
_KERNEL = re.compile(r'extern "C" __global__ __(cube|vector|mix__\(\d+, \d+\))__ void')


def _values(expr: str, loops: List[Tuple[str, int, int]]) -> Tuple[int, ...]:
    """The values ``expr`` takes over the enclosing loops it mentions (an id
    inside a loop nest is the flattened iteration modulo the ring)."""
    expr = expr.strip()
    used = [lp for lp in loops if re.search(rf"\b{re.escape(lp[0])}\b", expr)]
    # A loop whose iterations may be skipped (T.Persistent's guarded body)
    # counts a buffer's versions with ``<buf>_version_counter_<n>``, the number
    # of iterations run so far: any count from 0 on.
    used += [(c, 0, 64) for c in sorted(set(re.findall(r"\b\w+_version_counter_\d+\b", expr)))]
    envs: List[Dict[str, int]] = [{}]
    for name, first, stop in used:
        envs = [dict(e, **{name: k}) for e in envs for k in range(first, stop)]
    vals = set()
    for e in envs:
        try:
            vals.add(int(eval(expr, {}, e)))
        except Exception:
            return ()
    return tuple(sorted(vals))


def extract(source: str) -> Dict[str, object]:
    """The sync calls of an AscendC source, per core section, in order."""
    calls: List[Tuple[str, str, Tuple[str, ...], Tuple[int, ...], bool]] = []
    lock_modes: List[tuple] = []
    core = None
    stack: List[Tuple[int, Optional[Tuple[str, int, int]]]] = []  # brace depth -> loop
    depth = 0
    in_vf = False
    kernel_kind = None
    for line in source.splitlines():
        s = line.strip()
        km = _KERNEL.search(line)
        if km:
            kernel_kind = km.group(1)
            core = "AIC" if kernel_kind == "cube" else "AIV"
            in_vf = False
        elif _VF_FUNC.search(line):
            in_vf = True
        if "ASC_IS_AIC" in line:
            core = "AIC"
        elif "ASC_IS_AIV" in line:
            core = "AIV"
        loop = None
        fm = _FOR.search(line)
        if fm:
            loop = (fm.group(1), int(fm.group(2)), int(fm.group(3)))
        loops = [lp for _, lp in stack if lp is not None]
        cur = loops[-1] if loops else None
        if not in_vf and core is not None:
            m = _NOTIFY.search(s)
            if m:
                calls.append((core, "asc_sync_" + m.group(1), (m.group(2), m.group(3)),
                              _values(m.group(4), loops), cur is not None))
            m = _PIPE.search(s)
            if m:
                calls.append((core, "asc_sync_pipe", (m.group(1),), (0,), cur is not None))
            m = _INTRA.search(s)
            if m:
                calls.append((core, "asc_sync_intra_" + m.group(1), (m.group(2),),
                              _values(m.group(3), loops), cur is not None))
            m = _LOCK.search(s)
            if m:
                calls.append((core, "asc_lock", (m.group(1),),
                              _values(m.group(2), loops), cur is not None))
                lock_modes.append(calls[-1] + (m.group(3),))
        opens = line.count("{")
        closes = line.count("}")
        for _ in range(opens):
            stack.append((depth, loop))
            loop = None
            depth += 1
        for _ in range(closes):
            if stack:
                stack.pop()
            depth -= 1
            if depth == 0:
                in_vf = False
    return {"calls": calls, "lock_modes": lock_modes}


def summarize(calls, lock_modes=()) -> Dict[str, object]:
    events: Dict[str, set] = {}
    cross: set = set()
    locks: set = set()
    barriers: set = set()
    for _core, name, pipes, ids, _in_loop in calls:
        if name in ("asc_sync_notify", "asc_sync_wait"):
            ev = pipes[0][5:] + "_" + pipes[1][5:]
            events.setdefault(ev, set()).update(ids)
        elif name.startswith("asc_sync_intra"):
            cross.update(i % 16 for i in ids)
        elif name == "asc_lock":
            locks.update(ids)
        elif name == "asc_sync_pipe":
            barriers.add(pipes[0][5:])
    # A spilled flag becomes asc_lock on the producer pipe (NON_BLOCK) and on
    # the consumer pipe (BLOCK) with the same mutex id.
    set_side: Dict[int, str] = {}
    wait_side: Dict[int, str] = {}
    for _core, _name, pipes, ids, _in_loop, mode in lock_modes:
        for i in ids:
            (wait_side if mode == "ASC_LOCK_BLOCK" else set_side)[i] = pipes[0][5:]
    spilled: Dict[str, set] = {}
    for i, prod in set_side.items():
        if i in wait_side:
            spilled.setdefault(prod + "_" + wait_side[i], set()).add(i)
    return {
        "spilled": {k: sorted(v) for k, v in spilled.items()},
        # Event ids still used by asc_sync_notify/wait (after RewriteFlagToBuf)
        # and the ids InsertSync had given (those plus the ones now locks).
        "slots": {k: len(events.get(k, ())) for k in set(events) | set(spilled)},
        "slots_before": {k: len(events.get(k, ())) + len(spilled.get(k, ()))
                         for k in set(events) | set(spilled)},
        "events": {k: sorted(v) for k, v in events.items()},
        "cross_core_slots": sorted(cross),
        "mutex_ids": sorted(locks),
        "pipe_barriers": sorted(barriers),
    }


_SCHEDULER_CALLS: List[Dict[str, object]] = []
_ROOT_CALLS: List[Dict[str, object]] = []


def _ints(x):
    if x is None:
        return None
    if hasattr(x, "__len__"):
        return [_ints(y) for y in x]
    return int(x)


def _record_scheduler() -> None:
    """Wrap the compiler's Z3 loop scheduler so every call's arguments and
    result are recorded in ``_SCHEDULER_CALLS`` (once per process)."""
    if getattr(_record_scheduler, "done", False):
        return
    import tvm_ffi
    from tilelang.ascend.transform import z3_scheduler

    inner = z3_scheduler.z3_schedule_loop_ffi
    names = ("num_stages", "latencies", "iis", "resource_flags", "data_deps",
             "resource_deps", "owner_exclusion_deps", "pipe_order_deps",
             "buffer_sizes", "memory_groups", "stage_order_deps", "enable_offset",
             "manual_stages", "manual_schedule")

    def recorded(*args):
        result = inner(*args)
        call = {n: _ints(a) if not isinstance(a, bool) else a for n, a in zip(names, args, strict=False)}
        call["start_times"] = _ints(result[0])
        call["buffer_versions"] = _ints(result[1])
        call["ii"] = int(result[2])
        _SCHEDULER_CALLS.append(call)
        return result

    tvm_ffi.register_global_func("tl.transform.z3_schedule_loop_python", recorded,
                                 override=True)

    # The straight-line scheduler of the root list (and other ordered lists).
    root_inner = z3_scheduler.z3_schedule_ffi
    root_names = ("latencies", "iis", "resource_flags", "data_deps", "resource_deps",
                  "owner_exclusion_deps", "pipe_order_deps")

    def recorded_root(*args):
        result = root_inner(*args)
        call = {n: _ints(a) for n, a in zip(root_names, args, strict=False)}
        call["start_times"] = _ints(result)
        _ROOT_CALLS.append(call)
        return result

    tvm_ffi.register_global_func("tl.transform.z3_schedule_python", recorded_root,
                                 override=True)
    _record_scheduler.done = True


def lower_file(path: str, factory: str = "kernel") -> Dict[str, object]:
    import tilelang  # noqa: F401
    import tilelang.ascend  # noqa: F401
    _record_scheduler()
    _SCHEDULER_CALLS.clear()
    _ROOT_CALLS.clear()
    spec = importlib.util.spec_from_file_location("ascend_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t0 = time.time()
    try:
        func = getattr(mod, factory)()
        with tilelang.ascend.target._make_ascend_target() as tg:
            art = tilelang.lower(func, target=tg, enable_device_compile=False)
    except Exception as exc:  # the compiler's own failure is a result
        text = str(exc)
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("  File")]
        msg = next((ln for ln in lines if "Check failed" in ln or "Error" in ln), lines[-1] if lines else "")
        return {"path": path, "error": msg.strip(), "error_text": "\n".join(lines[-20:]),
                "seconds": time.time() - t0, "scheduler": list(_SCHEDULER_CALLS),
                "root_scheduler": list(_ROOT_CALLS)}
    src = art.kernel_source
    ex = extract(src)
    calls = ex["calls"]
    out = {"path": path, "error": None, "seconds": time.time() - t0,
           "calls": [list(c[:2]) + [list(c[2]), list(c[3]), c[4]] for c in calls],
           "scheduler": list(_SCHEDULER_CALLS), "root_scheduler": list(_ROOT_CALLS)}
    out.update(summarize(calls, ex["lock_modes"]))
    out["source"] = src
    return out


def main(argv: List[str]) -> int:
    for arg in argv:
        path, _, factory = arg.partition(":")
        res = lower_file(path, factory or "kernel")
        res.pop("source", None)
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
