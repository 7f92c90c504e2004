"""The compiler worker of ``tilelint verify``: a separate, long-lived process
that imports the real tilelang and lowers kernels on request.

This is the ONLY part of tilelint that executes user code, and only when the
user asks for it (``tilelint verify`` or ``tilelint.compiler.verify =
"onSave"``).  It runs in its own process, started by
:class:`tilelint.server.verify.VerifyWorker`:

    python -m tilelint.server.verify_worker [--memory-mb N]

Protocol: JSON lines.  The worker first writes one line
``{"ready": true, "tilelang": "0.1.15", "import_seconds": 2.1}`` (or
``{"ready": false, "missing": true, "error": "..."}`` when tilelang cannot be
imported), then answers each request line with one response line carrying the
same ``id``:

    {"id": 1, "op": "verify", "path": "/abs/k.py", "source": "...",
     "target": "sm_80", "timeout": 60,
     "kernels": [{"name": "gemm", "factory": "matmul", "bindings": {"M": 1024}}]}
    -> {"id": 1, "ok": true, "result": {"import_error": null, "kernels": {...}}}
    {"id": 2, "op": "ping"}  -> {"id": 2, "ok": true}
    {"id": 3, "op": "exit"}  -> (the worker exits)

Only the protocol goes to the real stdout: the worker keeps a private copy of
fd 1 and points fd 1 at stderr, so whatever tilelang, TVM's C++ side or the
user's module prints cannot corrupt a response.  Each request is served in a
``fork()`` of the warm worker (tilelang stays imported, the user's module and
its side effects die with the child); a child that crashes, exceeds its time
or runs out of memory is reported in the response, the worker lives on.
The memory cap (``RLIMIT_AS``) is set on the worker itself, so it holds for
every child.
"""

from __future__ import annotations

import argparse
import json
import linecache
import os
import re
import select
import signal
import sys
import time
import traceback
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

# Passes whose output the worker reads.
PASS_WS = "tl.ProducerConsumerWarpSpecialized"
PASS_PLAN = "tl.PipelinePlanning"
PASS_INJECT = "tl.InjectSoftwarePipeline"
PASS_MERGE = "tl.MergeSharedMemoryAllocations"
WATCHED = (PASS_WS, PASS_PLAN, PASS_INJECT, PASS_MERGE)
PIPELINE_KEYS = ("num_stages", "tl_pipeline_order", "tl_pipeline_stage")

# Compiler messages -> the tilelint code that predicts them.
MESSAGE_CODES = (
    ("TL101", r"cannot have the same order"),
    ("TL102", r"cannot depends? on statement.*in a later stage"),
    ("TL103", r"cannot be reordered"),
    ("TL104", r"pipeline annotation size to match"),
    ("TL107", r"dependency on multiple async stages"),
    ("TL108", r"Multiple writes to overlapping buffer regions"),
    ("TL112", r"number of stages should be equal to the number of pipeline stages"),
    ("TL115", r"InputShape\(\) = \([^)]*\) shape = \("),
    ("TL302", r"mutex_running <= kMaxBufId|total spilled mutex slots"),
    ("TL303", r"cross_core_base >= 0|cross-core flag"),
)
WHERE = re.compile(r"-->\s*([^\n]*?):(\d+):(\d+)")

SYNC_LINE = re.compile(r"__syncthreads\(\)|cp_async_wait<|cp_async_commit\(|__sync_thread_partial\(|"
                       r"bar\.sync|mbarrier|\]\.wait\(|\]\.arrive|fence_proxy|tma_load|expect_tx")
C_FOR = re.compile(r"\bfor\s*\(\s*(?:int|long|int64_t|unsigned|uint)?\s*(\w+)\s*=")
STATIC_SHARED = re.compile(r"(?<!extern )__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w:]*)\s+(\w+)\[(\d+)\]\s*;")
C_BYTES = {"uint64_t": 8, "int64_t": 8, "double": 8, "float": 4, "int": 4, "uint": 4, "int32_t": 4,
           "uint32_t": 4, "half_t": 2, "bfloat16_t": 2, "short": 2, "int16_t": 2, "uint16_t": 2,
           "char": 1, "int8_t": 1, "uint8_t": 1, "fp8_e4_t": 1, "fp8_e5_t": 1}


# --------------------------------------------------------------------------
# small helpers over TVM objects
# --------------------------------------------------------------------------


class Compiler:
    """tilelang and tvm, imported once; helpers to read spans and walk IR."""

    def __init__(self) -> None:
        import tilelang
        import tvm
        from tvm import tirx

        self.tilelang = tilelang
        self.tvm = tvm
        self.tirx = tirx
        self.version = str(getattr(tilelang, "__version__", "?"))
        self._stmt_span = None
        try:  # tirx.Stmt's span is reflected in C++ but not exposed in Python
            import tvm_ffi
            info = tvm_ffi.core._lookup_or_register_type_info_from_type_key("tirx.Stmt")
            for f in info.fields or ():
                if f.name == "span":
                    self._stmt_span = f.getter
        except Exception:
            self._stmt_span = None

    def line(self, node) -> Tuple[Optional[int], Optional[str]]:
        sp = None
        try:
            sp = getattr(node, "span", None)
        except Exception:
            sp = None
        if sp is None and self._stmt_span is not None:
            try:
                sp = self._stmt_span(node)
            except Exception:
                sp = None
        if sp is None:
            return None, None
        try:
            ln = int(sp.line)
        except Exception:
            ln = None
        try:
            src = str(sp.source_name.name)
        except Exception:
            src = None
        return (ln if ln and ln > 0 else None), src

    def walk(self, stmt, cls) -> list:
        found = []

        def visit(n):
            if isinstance(n, cls):
                found.append(n)
            return True

        self.tirx.stmt_functor.pre_order_visit(stmt, visit)
        return found

    def funcs(self, mod) -> list:
        if mod is None:
            return []
        return [f for _, f in mod.functions.items() if isinstance(f, self.tirx.PrimFunc)]

    def device_funcs(self, mod) -> list:
        out = []
        for f in self.funcs(mod):
            a = f.attrs or {}
            try:
                dev = ("thread_extent" in a and len(a["thread_extent"]) > 0) or \
                      "tirx.is_global_func" in a or "dyn_shared_memory_buf" in a
            except Exception:
                dev = False
            if dev:
                out.append(f)
        return out

    def buffers(self, stmt) -> List[Tuple[str, tuple, str, str]]:
        out = []
        tirx = self.tirx

        def visit(n):
            bufs = list(n.alloc_buffers) if isinstance(n, tirx.SBlock) else \
                [n.buffer] if isinstance(n, tirx.AllocBuffer) else []
            for b in bufs:
                out.append((str(b.name), tuple(to_int(x) for x in b.shape), str(b.scope()), str(b.dtype)))
            return True

        tirx.stmt_functor.pre_order_visit(stmt, visit)
        return out


def to_int(x) -> Optional[int]:
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    v = getattr(x, "value", None)
    return int(v) if isinstance(v, (int, bool)) else None


def ints(arr) -> Optional[List[int]]:
    if arr is None:
        return None
    try:
        vals = [to_int(x) for x in arr]
    except TypeError:
        return None
    known = [v for v in vals if v is not None]
    return known if len(known) == len(vals) else None


def ann(loop, key):
    try:
        return loop.annotations[key] if key in loop.annotations else None
    except Exception:
        return None


def elem_bytes(dtype: str) -> int:
    if dtype == "bool":
        return 1
    m = re.match(r"^[a-z]+?(\d+)(?:_\w+?)?(?:x(\d+))?$", dtype)
    return max(1, int(m.group(1)) * int(m.group(2) or 1) // 8) if m else 1


def block_at(text: str, pos: int) -> Tuple[int, int]:
    """(start, end) of the brace block opening at or after pos."""
    i = text.find("{", pos)
    if i < 0:
        return pos, pos
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return i, j + 1
    return i, len(text)


# --------------------------------------------------------------------------
# compiler errors
# --------------------------------------------------------------------------


def describe(exc: BaseException, path: str) -> Dict[str, object]:
    text = str(exc)
    locs = list(WHERE.finditer(text))
    body = text[:locs[-1].start()] if locs else text
    lines = [ln.rstrip() for ln in body.splitlines()
             if ln.strip() and not ln.strip().startswith(("Traceback", 'File "'))]
    message = "\n".join(lines).strip() or type(exc).__name__
    summary = " ".join(message.split())
    summary = re.sub(r"^Check failed: .*? (?:: |is false: )(?:\w+Error: )?", "", summary)
    summary = re.sub(r"(in stage \d+ cannot depends? on statement) .* (in a later stage \d+)",
                     r"\1 \2", summary)
    code = next((c for c, rx in MESSAGE_CODES if re.search(rx, text, re.S | re.I)), None)
    line = col = None
    where_file = None
    if locs:
        where_file, line, col = locs[-1].group(1).strip(), int(locs[-1].group(2)), int(locs[-1].group(3))
    else:  # a Python-level error: the innermost frame in the user's file
        for fr in reversed(traceback.extract_tb(exc.__traceback__)):
            if os.path.abspath(fr.filename) == os.path.abspath(path):
                where_file, line, col = path, fr.lineno, 1
                break
    return {"type": type(exc).__name__, "message": message[:3000], "summary": summary[:400],
            "code": code, "file": where_file, "line": line, "col": col}


# --------------------------------------------------------------------------
# facts of one lowering
# --------------------------------------------------------------------------


def loop_facts(c: Compiler, pf, planned, ws_mod, ws_applied) -> List[dict]:
    tirx = c.tirx
    users = [lp for lp in c.walk(pf.body, tirx.For) if any(ann(lp, k) is not None for k in PIPELINE_KEYS)]
    by_line: Dict[Optional[int], list] = {}
    for f in c.funcs(planned):
        for lp in c.walk(f.body, tirx.For):
            if ann(lp, "software_pipeline_stage") is not None:
                by_line.setdefault(c.line(lp)[0], []).append(lp)
    ws_kept: Dict[Optional[int], int] = {}
    for f in c.funcs(ws_mod):
        for lp in c.walk(f.body, tirx.For):
            if any(ann(lp, k) is not None for k in PIPELINE_KEYS):
                ln = c.line(lp)[0]
                ws_kept[ln] = ws_kept.get(ln, 0) + 1
    rank: Dict[Optional[int], int] = {}
    out = []
    for lp in users:
        ln = c.line(lp)[0]
        k = rank.get(ln, 0)
        rank[ln] = k + 1
        item: Dict[str, Any] = {"line": ln, "num_stages": to_int(ann(lp, "num_stages")),
                "user_order": ints(ann(lp, "tl_pipeline_order")),
                "user_stage": ints(ann(lp, "tl_pipeline_stage")),
                "pipelined": False, "stage": None, "order": None, "depth": None,
                "statement_lines": None, "ws": None}
        cands = by_line.get(ln, [])
        if k < len(cands):
            p = cands[k]
            item["pipelined"] = True
            item["stage"] = ints(ann(p, "software_pipeline_stage"))
            item["order"] = ints(ann(p, "software_pipeline_order"))
            depth = to_int(ann(p, "num_stages"))
            if depth is None:
                depth = to_int(ann(p, "tl_pipelined_num_stages"))
            if depth is None and item["stage"]:
                depth = max(item["stage"]) + 1
            item["depth"] = depth
            stmts: List[Any] = []

            def flat(s, out):
                if isinstance(s, tirx.SeqStmt):
                    for x in s.seq:
                        flat(x, out)
                elif not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
                    out.append(s)

            flat(p.body, stmts)
            mask = ints(ann(p, "software_pipeline_replayable_scalar_binds"))
            if mask is not None and len(mask) == len(stmts):
                stmts = [s for s, m in zip(stmts, mask, strict=True) if not m]
            if item["stage"] is not None and len(stmts) == len(item["stage"]):
                item["statement_lines"] = [c.line(s)[0] for s in stmts]
        if ws_mod is not None:
            if ws_kept.get(ln, 0) > k:
                item["ws"] = "kept"
            else:
                item["ws"] = "consumed" if ws_applied else "stripped"
        out.append(item)
    return out


def version_facts(c: Compiler, pf, inject) -> Optional[Dict[str, int]]:
    if inject is None:
        return None
    declared: Dict[str, tuple] = {}
    for name, shape, scope, _ in c.buffers(pf.body):
        if scope.startswith("shared") and "barrier" not in scope:
            declared.setdefault(name, shape)
    after: Dict[str, tuple] = {}
    for f in c.funcs(inject):
        for name, shape, _scope, _ in c.buffers(f.body):
            if name in declared:
                after.setdefault(name, shape)
    out = {}
    for name, shape in declared.items():
        new = after.get(name, shape)
        extra = len(new) - len(shape)
        lead = new[:extra] if extra > 0 else ()
        n = 1
        if extra > 0 and tuple(new[extra:]) == tuple(shape) and all(isinstance(d, int) for d in lead):
            for d in lead:
                n *= d
        out[name] = n
    return out


def shared_facts(c: Compiler, art, merged) -> dict:
    res: Dict[str, Any] = {"bytes": None, "offsets": {}, "static_bytes": 0}
    for f in c.device_funcs(merged):
        arena = None
        single = []
        for name, shape, scope, dtype in c.buffers(f.body):
            if scope != "shared.dyn":
                continue
            n = 1
            for d in shape:
                n *= d or 0
            nbytes = n * elem_bytes(dtype)
            if name.startswith("buf_dyn_shmem"):
                arena = (arena or 0) + nbytes
            else:
                single.append((name, nbytes))
        if arena is None and single:
            arena = sum(b for _, b in single)
            if len(single) == 1:
                res["offsets"][single[0][0]] = 0

        def visit(n):
            if isinstance(n, c.tirx.Bind) and isinstance(n.value, c.tirx.Call) and \
                    str(getattr(n.value.op, "name", "")) == "tirx.handle_add_byte_offset":
                off = to_int(n.value.args[1])
                if off is not None:
                    # Two buffers may share a name (each reduction's
                    # ``workspace``): the codegen names the next ones
                    # ``workspace_1``, ``workspace_2``, ... in this order.
                    name, k = str(n.var.name), 0
                    while (name if k == 0 else f"{name}_{k}") in res["offsets"]:
                        k += 1
                    res["offsets"][name if k == 0 else f"{name}_{k}"] = off
            return True

        c.tirx.stmt_functor.pre_order_visit(f.body, visit)
        if arena is not None:
            res["bytes"] = (res["bytes"] or 0) + arena
    if res["bytes"] is None:
        for f in c.device_funcs(art.device_mod):
            v = to_int(f.attrs.get("dyn_shared_memory_buf")) if f.attrs else None
            if v is not None:
                res["bytes"] = (res["bytes"] or 0) + v
    for m in STATIC_SHARED.finditer(art.kernel_source or ""):
        res["static_bytes"] += C_BYTES.get(m.group(1), 0) * int(m.group(3))
    if res["bytes"] is None:
        res["bytes"] = 0
    return res


def thread_count(c: Compiler, art) -> Optional[int]:
    best = None
    for f in c.device_funcs(art.device_mod):
        ext = f.attrs.get("thread_extent") if f.attrs else None
        if not ext:
            continue
        n = 1
        for axis in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            n *= (to_int(ext[axis]) or 1) if axis in ext else 1
        best = n if best is None else max(best, n)
    if best is None:
        m = re.search(r"__launch_bounds__\((\d+)", art.kernel_source or "")
        best = int(m.group(1)) if m else None
    return best


def sync_facts(c: Compiler, art, loops: List[dict], path: str) -> Tuple[dict, List[dict]]:
    """Sync counts of the generated CUDA, and the real sync code around each
    pipelined loop (for a hover "compiler output")."""
    src = art.kernel_source or ""
    res: Dict[str, Any] = {
        "syncthreads": src.count("__syncthreads()"),
        "cp_async_commit": len(re.findall(r"\bcp_async_commit\(\)", src)),
        "cp_async_wait": [int(x) for x in re.findall(r"\bcp_async_wait<\s*(\d+)\s*>\(\)", src)],
        "mbarriers": sum(int(m.group(3)) for m in STATIC_SHARED.finditer(src) if m.group(1) == "uint64_t"),
        "mbarrier_wait": len(re.findall(r"\]\.wait\(|\bmbarrier_wait(?:_parity)?\(", src)),
        "syncthreads_in_loop": [],
    }
    fors: List[Any] = []
    for f in c.device_funcs(art.device_mod):
        fors.extend(lp for lp in c.walk(f.body, c.tirx.For) if int(lp.kind) != 2)  # not vectorized
    c_fors = list(C_FOR.finditer(src))
    aligned = len(c_fors) == len(fors)
    snippets = []
    lines = src.splitlines()
    for item in loops:
        if not item.get("pipelined"):
            res["syncthreads_in_loop"].append(None)
            continue
        pick = None
        for i, lp in enumerate(fors):
            ln, fname = c.line(lp)
            if ln != item["line"] or (fname and os.path.abspath(fname) != os.path.abspath(path)):
                continue
            if pick is None or ann(lp, "tl_pipelined_num_stages") is not None:
                pick = i
        count = None
        code = None
        if pick is not None and aligned:
            m = c_fors[pick]
            if re.fullmatch(re.escape(str(fors[pick].loop_var.name)) + r"(_\d+)?", m.group(1)):
                a, b = block_at(src, m.end())
                count = src[a:b].count("__syncthreads()")
                first = src.count("\n", 0, m.start())
                last = src.count("\n", 0, b)
                code = excerpt(lines, first, last)
        if count is None and pick is not None:
            count = 0
            for n in c.walk(fors[pick].body, c.tirx.Call):
                if str(getattr(n.op, "name", "")) == "tirx.tvm_storage_sync" and n.args and \
                        str(getattr(n.args[0], "value", "")).startswith("shared"):
                    count += 1
        res["syncthreads_in_loop"].append(count)
        snippets.append({"loop_line": item["line"], "code": code or excerpt(lines, 0, len(lines) - 1),
                         "scope": "loop" if code else "kernel"})
    return res, snippets


def excerpt(lines: List[str], first: int, last: int, limit: int = 40) -> str:
    """The loop header and every sync line (with one line of context) of lines[first..last]."""
    keep = {first}
    for i in range(first, min(last, len(lines) - 1) + 1):
        if SYNC_LINE.search(lines[i]):
            keep.update((i - 1, i, i + 1))
    ordered = sorted(i for i in keep if first <= i <= last and i < len(lines))
    out: List[str] = []
    prev = None
    for i in ordered:
        if prev is not None and i > prev + 1:
            out.append("    ...")
        out.append(lines[i].rstrip())
        prev = i
        if len(out) >= limit:
            out.append("    ...")
            break
    return "\n".join(out)


def make_target(c: Compiler, target: str):
    if target.startswith("sm_"):
        return c.tvm.target.Target({"kind": "cuda", "arch": target})
    if target.startswith("gfx"):
        return c.tvm.target.Target({"kind": "hip", "mcpu": target})
    if target == "ascend":
        from tilelang.ascend.target import _make_ascend_target
        return _make_ascend_target()
    raise ValueError(f"unknown target {target!r}")


def _record_ascend_schedules(sink: List[dict]) -> None:
    """Make the compiler's Z3 loop scheduler report each result into ``sink``
    (the registration is replaced in this worker process only)."""
    import tvm_ffi
    from tilelang.ascend.transform import z3_scheduler

    inner = z3_scheduler.z3_schedule_loop_ffi

    def recorded(*args):
        result = inner(*args)
        sink.append({"start_times": [int(x) for x in result[0]],
                     "buffer_versions": [int(x) for x in result[1]],
                     "ii": int(result[2])})
        return result

    tvm_ffi.register_global_func("tl.transform.z3_schedule_loop_python", recorded,
                                 override=True)


def lower(c: Compiler, pf, target: str, configs: dict, path: str) -> dict:
    seen: Dict[str, object] = {}
    tvm = c.tvm

    @tvm.ir.instrument.pass_instrument
    class Keep:
        def run_after_pass(self, mod, info):
            if info.name in WATCHED and info.name not in seen:
                seen[info.name] = mod

    out: dict = {"def_line": c.line(pf)[0], "error": None, "threads": None, "warp_specialized": False,
                 "loops": [], "versions": None, "shared": None, "sync": None, "sync_code": []}
    art = None
    t0 = time.perf_counter()
    scheduled: List[dict] = []
    try:
        tg = make_target(c, target)
        if target == "ascend":
            _record_ascend_schedules(scheduled)
        with tg, tvm.transform.PassContext(opt_level=3, config=dict(configs), instruments=[Keep()]):
            art = c.tilelang.lower(pf, target=tg, enable_device_compile=False)
    except Exception as exc:
        out["error"] = describe(exc, path)
    if target == "ascend":
        out["ascend_schedule"] = scheduled
    out["seconds"] = round(time.perf_counter() - t0, 3)
    problems = {}

    def attempt(key, fn):
        try:
            out[key] = fn()
        except Exception:
            problems[key] = traceback.format_exc(limit=4)

    def ws_flag():
        for mod in (seen.get(PASS_WS), getattr(art, "host_mod", None)):
            for f in c.funcs(mod):
                a = f.attrs
                if a and "tl_tiled_ws_applied" in a and to_int(a["tl_tiled_ws_applied"]):
                    return True
        return False

    attempt("warp_specialized", ws_flag)
    attempt("loops", lambda: loop_facts(c, pf, seen.get(PASS_PLAN), seen.get(PASS_WS), out["warp_specialized"]))
    attempt("versions", lambda: version_facts(c, pf, seen.get(PASS_INJECT)))
    if art is not None and target.startswith("sm_"):
        attempt("threads", lambda: thread_count(c, art))
        attempt("shared", lambda: shared_facts(c, art, seen.get(PASS_MERGE)))

        def sync():
            s, code = sync_facts(c, art, out["loops"] or [], path)
            out["sync_code"] = code
            return s

        attempt("sync", sync)
    if problems:
        out["extract_errors"] = problems
    return out


# --------------------------------------------------------------------------
# one request (runs in a forked child)
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# kernels that tilelang would compile for the current device (@tilelang.jit,
# tilelang.compile): take their prim_func, lower it for the requested target
# --------------------------------------------------------------------------


class NeedsDevice(RuntimeError):
    """Raised by a kernel that verify only lowered, when the file tries to run it."""


class UnknownValues(RuntimeError):
    """A factory parameter the model has no value for: the kernel cannot be built."""


class LoweredOnly:
    """What ``tilelang.compile`` / ``JITImpl.compile`` return inside the verify
    child: the prim_func (and the pass configs it was given), never a compiled
    kernel.  Running it raises :class:`NeedsDevice`."""

    def __init__(self, prim_func, pass_configs=None) -> None:
        self.prim_func = prim_func
        self.pass_configs = dict(pass_configs or {})

    def __call__(self, *args, **kwargs):
        raise NeedsDevice("the file runs a compiled kernel; tilelint verify only lowers "
                          "(no GPU, no nvcc), so it cannot run kernels")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NeedsDevice(f"the file uses `.{name}` of a compiled kernel; tilelint verify only "
                          "lowers (no GPU, no nvcc)")


def _jit_classes() -> tuple:
    out = []
    try:
        import importlib
        out.append(importlib.import_module("tilelang.jit").JITImpl)
    except Exception:
        pass
    return tuple(out)


def as_jit(obj, depth: int = 0):
    """The ``JITImpl`` behind obj (an autotune wrapper, an ``lru_cache``), or None."""
    if obj is None or depth > 6:
        return None
    jits = _jit_classes()
    if jits and isinstance(obj, jits):
        return obj
    inner = getattr(obj, "jit_impl", None)  # tilelang.autotuner's AutoTuneImpl
    if inner is not None and jits and isinstance(inner, jits):
        return inner
    wrapped = getattr(obj, "__wrapped__", None) if not isinstance(obj, type) else None
    if wrapped is not None and wrapped is not obj:
        return as_jit(wrapped, depth + 1)
    return None


def lowering_only_compile() -> None:
    """In the forked child: ``tilelang.compile`` and ``@tilelang.jit`` kernels
    give their prim_func instead of compiling for the current device (which
    needs a GPU).  The child dies with the request, so nothing leaks."""
    import importlib

    import tilelang
    tjit: Any = importlib.import_module("tilelang.jit")  # ``tilelang.jit`` the attribute is the decorator

    def compile_(func=None, *args, **kwargs):
        return LoweredOnly(func, kwargs.get("pass_configs"))

    def jit_compile(self, *args, **kwargs):
        return LoweredOnly(self.get_tir(*args, **kwargs), getattr(self, "pass_configs", None))

    def jit_par_compile(self, configs, *args, **kwargs):
        out = []
        for cfg in configs:
            pf = self.get_tir(*cfg) if isinstance(cfg, tuple) else self.get_tir(**cfg)
            out.append(LoweredOnly(pf, getattr(self, "pass_configs", None)))
        return out

    for holder in (tilelang, tjit):
        if hasattr(holder, "compile"):
            holder.compile = compile_
    if hasattr(tjit, "JITImpl"):
        tjit.JITImpl.compile = jit_compile
        tjit.JITImpl.par_compile = jit_par_compile


CONSTEXPR_MISSING = re.compile(r"Cannot find value for constexpr variable `(\w+)`")
PLACEHOLDER = 1024  # a problem size tilelint never needs (T.const); only the grid depends on it


def jit_prim_func(jit, kwargs: dict) -> Tuple[object, dict, List[str]]:
    """(prim_func, the kwargs used, names given a placeholder) of a JITImpl,
    elaborated without compiling.  An eager-style kernel (``T.const("M N K")``)
    needs values for its problem sizes: missing ones get PLACEHOLDER."""
    import inspect
    missing: List[str] = []
    try:
        params = jit.signature.parameters
        kw = {n: v for n, v in kwargs.items() if n in params}
        tensors = set(getattr(jit.func, "tensor_args", None) or ())  # eager: annotated tensors
        missing = [n for n, p in params.items() if n not in kw and n not in tensors
                   and p.default is inspect.Parameter.empty
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except Exception:
        kw = dict(kwargs)
    if missing:
        raise UnknownValues(f"tilelint has no value for {', '.join(missing)} "
                            "(give them with --bind NAME=VALUE or `# tilelint: bind`)")
    placeholders: List[str] = []
    for _ in range(32):
        try:
            return jit.get_tir(**kw), kw, placeholders
        except ValueError as exc:
            m = CONSTEXPR_MISSING.search(str(exc))
            if not m or m.group(1) in kw:
                raise
            name = m.group(1)
            kw[name] = kwargs.get(name, PLACEHOLDER)
            if name not in kwargs:
                placeholders.append(name)
    return jit.get_tir(**kw), kw, placeholders


# Errors of the environment, not of the kernel: verify says "could not verify".
ENV_TEXT = re.compile(
    r"No registered target detector|not compiled with CUDA|CUDA driver|no CUDA-capable|"
    r"NVIDIA driver|\bnvcc\b|libcuda|nvrtc|\bNVML\b|cudaGetDevice|CUDA_HOME|CUDA error|"
    r"torch\.cuda|cuda runtime|\bGPU\b|device-side|Found no NVIDIA|hipErrorNoDevice|"
    r"ROCm|bisheng|torch_npu|cannot open shared object file|device propert", re.I)


def environment_reason(exc: BaseException) -> Optional[str]:
    """Why exc is a failure of this environment (a missing module, no GPU, ...),
    or None when it is the file's own error."""
    if isinstance(exc, (NeedsDevice, UnknownValues)):
        return str(exc)
    if isinstance(exc, ImportError):
        name = getattr(exc, "name", None)
        if isinstance(exc, ModuleNotFoundError) and name:
            return f"the file needs the module `{name}`, which is not installed here"
        return f"an import of the file fails here: {' '.join(str(exc).split())[:300]}"
    text = " ".join(str(exc).split())
    if ENV_TEXT.search(text) or ENV_TEXT.search(type(exc).__name__):
        return f"the file needs a GPU or a device toolchain here: {type(exc).__name__}: {text[:300]}"
    return None


def describe_env(exc: BaseException, path: str) -> Dict[str, object]:
    d = describe(exc, path)
    why = environment_reason(exc)
    if why:
        line = d.get("line")
        d["environment"] = why + (f" (line {line})" if line else "")
    return d


def load_module(path: str, source: str, serial: int, module_name: Optional[str] = None,
                extra_path: Sequence[str] = ()) -> types.ModuleType:
    """Execute the user's file from ``source`` (the editor's text) as a module.
    linecache gets the same text so that TVMScript's inspect-based parser sees it
    and spans point into it.  ``module_name`` (``pkg.sub.mod``) lets relative
    imports work; ``extra_path`` is appended to ``sys.path`` (after the
    installed packages, so a checkout of tilelang never shadows the real one)."""
    lines = source.splitlines(keepends=True)
    linecache.cache[path] = (len(source), None, lines, path)
    for p in extra_path:
        if p and p not in sys.path:
            sys.path.append(p)
    name = module_name or f"_tilelint_verify_{serial}"
    mod = types.ModuleType(name)
    mod.__file__ = path
    if module_name and "." in module_name:
        import importlib
        parent = module_name.rpartition(".")[0]
        mod.__package__ = parent
        importlib.import_module(parent)
    sys.modules[name] = mod
    here = os.path.dirname(path)
    if here and here not in sys.path:
        sys.path.insert(0, here)
    code = compile(source, path, "exec", dont_inherit=True)
    exec(code, mod.__dict__)
    return mod


def _symbol(pf, default: str) -> str:
    try:
        if pf.attrs and "global_symbol" in pf.attrs:
            return str(pf.attrs["global_symbol"])
    except Exception:
        pass
    return default


def instantiate(c: Compiler, mod, k: dict) -> Tuple[object, Optional[str], dict]:
    """(prim_func or None, how it was obtained, extra pass configs) for a
    kernel the model found that has no module-level instance: the jit kernel
    of that name, or its factory called with the model's bindings.  Raises
    what the user's code raises."""
    import inspect
    PrimFunc = c.tirx.PrimFunc
    name = k["name"]
    bindings = dict(k.get("bindings") or {})

    def from_jit(jit, label):
        pf, kw, ph = jit_prim_func(jit, bindings)
        how = f"`{label}.get_tir(" + ", ".join(f"{a}={v!r}" for a, v in kw.items()
                                                if a not in ph) + ")`"
        if ph:
            how += f" ({', '.join(ph)}: placeholder {PLACEHOLDER}, problem sizes only)"
        return pf, how, dict(getattr(jit, "pass_configs", None) or {})

    # 1. a jit-style kernel: the module attribute of the kernel's own name
    jit = as_jit(getattr(mod, name, None))
    if jit is not None and not k.get("factory"):
        return from_jit(jit, name)
    fac = k.get("factory")
    fn = getattr(mod, fac, None) if fac else None
    if fn is None and jit is not None:
        return from_jit(jit, name)
    if not callable(fn):
        return None, None, {}
    # 2. a @tilelang.jit (or autotuned) factory: elaborate, never compile
    jit = as_jit(fn)
    if jit is not None:
        return from_jit(jit, fac)
    # 3. a plain factory
    target_fn = inspect.unwrap(fn) if hasattr(fn, "__wrapped__") else fn
    try:
        params = inspect.signature(target_fn).parameters
        kwargs = {n: v for n, v in bindings.items() if n in params}
        missing = [n for n, p in params.items() if n not in kwargs
                   and p.default is inspect.Parameter.empty
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        kwargs, missing = {}, []
    if missing:
        raise UnknownValues(f"tilelint has no value for {', '.join(missing)} of `{fac}` "
                            "(give them with --bind NAME=VALUE or `# tilelint: bind`)")
    made = fn(**kwargs)
    how = f"`{fac}(" + ", ".join(f"{a}={v!r}" for a, v in kwargs.items()) + ")`"
    extra: dict = {}
    if isinstance(made, LoweredOnly):
        extra = made.pass_configs
        made = made.prim_func
    inner = as_jit(made)
    if inner is not None:
        pf, how2, extra = from_jit(inner, f"{fac}(...)")
        return pf, how + " then " + how2, extra
    if isinstance(made, PrimFunc):
        return made, how, extra
    return None, None, {}


def serve(c: Compiler, req: dict) -> dict:
    path = os.path.abspath(req.get("path") or "<verify>.py")
    source = req.get("source")
    if source is None:
        with open(path, encoding="utf-8-sig") as fh:
            source = fh.read()
    target = str(req.get("target") or "sm_80")
    result: Dict[str, Any] = {"path": path, "target": target, "import_error": None, "kernels": {},
                              "notes": []}
    try:
        lowering_only_compile()
    except Exception as exc:  # an unexpected tilelang layout: jit kernels then compile as usual
        result["notes"].append(f"could not intercept tilelang.compile: {type(exc).__name__}: {exc}")
    try:
        mod = load_module(path, source, int(req.get("id") or 0), req.get("module_name"),
                          req.get("sys_path") or ())
    except BaseException as exc:  # SystemExit / KeyboardInterrupt from user code too
        result["import_error"] = describe_env(exc, path)
        return result
    configs = getattr(mod, "PASS_CONFIGS", None) or getattr(mod, "pass_configs", None) or {}
    if not isinstance(configs, dict):
        configs = {}
    PrimFunc = c.tirx.PrimFunc
    by_name: Dict[str, list] = {}
    for var, val in list(vars(mod).items()):
        extra: dict = {}
        if isinstance(val, LoweredOnly):  # kernel = tilelang.compile(...) / jit_factory(...)
            extra, val = val.pass_configs, val.prim_func
        if isinstance(val, PrimFunc):
            lst = by_name.setdefault(_symbol(val, var), [])
            if not any(x.same_as(val) for _, x, _ in lst):
                lst.append((var, val, extra))
    wanted = req.get("kernels")
    if wanted is None:
        wanted = [{"name": n} for n in by_name]
    for k in wanted:
        name = k["name"]
        key = str(k.get("key") or name)  # several instances of one kernel: distinct keys
        found = [] if k.get("prefer_factory") and k.get("factory") else by_name.get(name) or []
        how = f"module-level `{found[0][0]}`" if found else None
        pf = found[0][1] if found else None
        extra = dict(found[0][2]) if found else {}
        if pf is None:
            try:
                pf, how, extra = instantiate(c, mod, k)
            except BaseException as exc:
                result["kernels"][key] = {"error": describe_env(exc, path),
                                          "instantiated": "factory call"}
                continue
        if pf is None:
            result["notes"].append(f"`{name}`: no module-level instance and no factory to call; not lowered")
            continue
        try:
            facts = lower(c, pf, target, {**configs, **extra}, path)
        except Exception as exc:
            facts = {"error": describe(exc, path), "worker_error": traceback.format_exc(limit=5)}
        facts["instantiated"] = how
        result["kernels"][key] = facts
    return result


def serve_forked(c: Compiler, req: dict, timeout: Optional[float]) -> dict:
    if not hasattr(os, "fork"):
        return serve(c, req)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        status = 0
        try:
            data = json.dumps({"ok": True, "result": serve(c, req)}, default=str).encode()
        except BaseException:
            data = json.dumps({"ok": False, "error": "worker failure: " + traceback.format_exc(limit=6)}).encode()
            status = 1
        try:
            with os.fdopen(wfd, "wb") as fh:
                fh.write(data)
        finally:
            os._exit(status)
    os.close(wfd)
    chunks = []
    deadline = None if not timeout else time.monotonic() + timeout
    timed_out = False
    with os.fdopen(rfd, "rb") as fh:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fh], [], [], wait)
            if not ready:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(fh.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    raw = b"".join(chunks)
    if timed_out:
        return {"ok": False, "timeout": True, "error": f"the compiler did not finish in {timeout:g} s"}
    if not raw:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            why = "killed (out of memory?)" if sig == signal.SIGKILL else f"crashed (signal {sig})"
        else:
            why = f"exited with status {os.WEXITSTATUS(status)}"
        return {"ok": False, "crashed": True, "error": f"the compiler process {why}"}
    try:
        return json.loads(raw.decode())
    except ValueError:
        return {"ok": False, "error": "unreadable reply from the compiler process"}


# --------------------------------------------------------------------------
# main loop
# --------------------------------------------------------------------------


def set_memory_cap(mb: int) -> None:
    if mb and mb > 0:
        try:
            import resource
            cap = mb * 1024 * 1024
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ImportError, ValueError, OSError):
            pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tilelint-verify-worker")
    ap.add_argument("--memory-mb", type=int, default=0)
    args = ap.parse_args(argv)
    sys.stdout.flush()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    inp = sys.stdin

    def send(obj) -> None:
        proto.write(json.dumps(obj, default=str) + "\n")
        proto.flush()

    set_memory_cap(args.memory_mb)
    t0 = time.perf_counter()
    try:
        c = Compiler()
    except BaseException as exc:
        missing = isinstance(exc, ImportError)
        send({"ready": False, "missing": missing,
              "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()})
        return 2
    send({"ready": True, "tilelang": c.version, "import_seconds": round(time.perf_counter() - t0, 2),
          "pid": os.getpid()})
    for raw in inp:
        raw = raw.strip()
        if not raw:
            continue
        try:
            req = json.loads(raw)
        except ValueError:
            send({"id": None, "ok": False, "error": "bad request (not JSON)"})
            continue
        op = req.get("op", "verify")
        if op == "exit":
            break
        if op == "ping":
            send({"id": req.get("id"), "ok": True})
            continue
        if op != "verify":
            send({"id": req.get("id"), "ok": False, "error": f"unknown op {op!r}"})
            continue
        timeout = req.get("timeout")
        t1 = time.perf_counter()
        resp = serve_forked(c, req, float(timeout) if timeout else None)
        resp["id"] = req.get("id")
        resp["seconds"] = round(time.perf_counter() - t1, 3)
        send(resp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
