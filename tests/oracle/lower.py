#!/usr/bin/env python3
"""Compiler oracle: lower fixture files with the real tilelang and print facts as JSON.

Usage (run with the interpreter of a venv that has tilelang 0.1.15):

    python tests/oracle/lower.py --target sm_80 FILE [FILE ...]
    python tests/oracle/lower.py --target sm_90 --dump-dir /tmp/cu --jsonl a.py b.py

stdout receives only the JSON (a list with one object per file, or one object
per line with --jsonl); everything the compiler or the fixtures print goes to
stderr.  The oracle imports nothing from tilelint.  See README.md next to this
file for the meaning of every field and how it is obtained.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import sys
import time
import traceback

CUDA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120")
ROCM_ARCHS = ("gfx942", "gfx950")
TARGETS = CUDA_ARCHS + ROCM_ARCHS + ("ascend",)

# Loop annotations written by T.Pipelined (the user's side of the pipeline).
USER_PIPELINE_KEYS = ("num_stages", "tl_pipeline_order", "tl_pipeline_stage")

# Passes whose output we look at.
P_WS = "tl.ProducerConsumerWarpSpecialized"
P_PLAN = "tl.PipelinePlanning"
P_INJECT = "tl.InjectSoftwarePipeline"
P_MERGE = "tl.MergeSharedMemoryAllocations"
CAPTURED_PASSES = (P_WS, P_PLAN, P_INJECT, P_MERGE)

# Compiler message -> tilelint code.  Checked in order, first match wins.
ERROR_CODES = (
    ("TL101", re.compile(r"cannot have the same order")),
    ("TL102", re.compile(r"cannot depends? on statement.*in a later stage", re.S)),
    ("TL103", re.compile(r"cannot be reordered")),
    ("TL104", re.compile(r"pipeline annotation size to match")),
    ("TL107", re.compile(r"dependency on multiple async stages", re.I)),
    ("TL108", re.compile(r"Multiple writes to overlapping buffer regions")),
    ("TL112", re.compile(r"number of stages should be equal to the number of pipeline stages")),
    # Layout inference: a multi-versioned shared buffer also used outside its loop.
    ("TL115", re.compile(r"InputShape\(\) = \([^)]*\) shape = \(")),
)
LOCATION_RE = re.compile(r"-->\s*(?P<file>[^\n]*?):(?P<line>\d+):(?P<col>\d+)")

# CUDA source patterns (tilelang 0.1.15 codegen).
RE_SYNCTHREADS = re.compile(r"__syncthreads\(\)")
RE_SYNC_PARTIAL = re.compile(r"\b__sync_thread_partial\(|\bbar\.sync\b")
RE_CP_COMMIT = re.compile(r"\bcp_async_commit\(\)")
RE_CP_WAIT = re.compile(r"\bcp_async_wait<\s*(\d+)\s*>\(\)")
RE_MBAR_WAIT = re.compile(r"\]\.wait\(|\bmbarrier_wait(?:_parity)?\(")
RE_STATIC_SHARED = re.compile(
    r"(?<!extern )__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w:]*)\s+(\w+)\[(\d+)\]\s*;"
)
RE_DYN_OFFSET = re.compile(r"void\*\s+(\w+)\s*=\s*\(\(void\*\)\(\(char\*\)buf_dyn_shmem\s*\+\s*(\d+)\)\);")
RE_FOR = re.compile(r"\bfor\s*\(\s*(?:int|long|int64_t|unsigned|uint)?\s*(\w+)\s*=")
C_TYPE_BYTES = {
    "uint64_t": 8, "int64_t": 8, "double": 8, "float": 4, "int": 4, "uint": 4, "int32_t": 4,
    "uint32_t": 4, "half_t": 2, "bfloat16_t": 2, "short": 2, "int16_t": 2, "uint16_t": 2,
    "char": 1, "signed char": 1, "uchar": 1, "int8_t": 1, "uint8_t": 1, "fp8_e4_t": 1, "fp8_e5_t": 1,
}


# --------------------------------------------------------------------------------------
# Compiler environment (imported once per process)
# --------------------------------------------------------------------------------------


class Env:
    """The imported compiler modules and a few reflection helpers."""

    def __init__(self) -> None:
        import tilelang  # noqa: F401  (registers the tl passes)
        import tvm
        import tvm_ffi
        from tvm import tirx

        self.tilelang = tilelang
        self.tvm = tvm
        self.tirx = tirx
        # Python's tirx.Stmt class does not expose `span`, but the C++ field is reflected.
        self._span_getter = None
        try:
            info = tvm_ffi.core._lookup_or_register_type_info_from_type_key("tirx.Stmt")
            for field in info.fields or ():
                if field.name == "span":
                    self._span_getter = field.getter
        except Exception:  # pragma: no cover - depends on the tvm_ffi version
            self._span_getter = None

    # -- spans ------------------------------------------------------------------------
    def span(self, node):
        """(line, source file) of a stmt or PrimFunc, or (None, None)."""
        sp = None
        try:
            sp = node.span if hasattr(type(node), "span") or hasattr(node, "span") else None
        except Exception:
            sp = None
        if sp is None and self._span_getter is not None:
            try:
                sp = self._span_getter(node)
            except Exception:
                sp = None
        if sp is None:
            return None, None
        try:
            line = int(sp.line)
        except Exception:
            line = None
        try:
            name = str(sp.source_name.name)
        except Exception:
            name = None
        if line is not None and line <= 0:
            line = None
        return line, name

    # -- traversal --------------------------------------------------------------------
    def preorder(self, stmt, cls):
        out = []

        def visit(node):
            if isinstance(node, cls):
                out.append(node)
            return True

        self.tirx.stmt_functor.pre_order_visit(stmt, visit)
        return out

    def allocations(self, stmt):
        """[(name, shape tuple, scope, dtype)] of SBlock alloc_buffers and AllocBuffer stmts."""
        tirx = self.tirx
        out = []

        def visit(node):
            bufs = []
            if isinstance(node, tirx.SBlock):
                bufs = list(node.alloc_buffers)
            elif isinstance(node, tirx.AllocBuffer):
                bufs = [node.buffer]
            for b in bufs:
                out.append((str(b.name), tuple(as_int(x) for x in b.shape), str(b.scope()), str(b.dtype)))
            return True

        tirx.stmt_functor.pre_order_visit(stmt, visit)
        return out


def as_int(x):
    try:
        if isinstance(x, bool):
            return int(x)
        if isinstance(x, int):
            return x
        v = getattr(x, "value", None)
        if isinstance(v, (int, bool)):
            return int(v)
    except Exception:
        pass
    return None


def int_list(arr):
    if arr is None:
        return None
    try:
        vals = [as_int(x) for x in arr]
    except TypeError:
        return None
    return vals if all(v is not None for v in vals) else None


def ann_get(loop, key):
    try:
        if key in loop.annotations:
            return loop.annotations[key]
    except Exception:
        pass
    return None


def dtype_bytes(dtype: str) -> int | None:
    """Bytes of one element of a TVM dtype string ("float16", "uint8", "float8_e4m3", "int32x4")."""
    if dtype == "bool":
        return 1
    m = re.match(r"^[a-z]+?(\d+)(?:_\w+?)?(?:x(\d+))?$", dtype)
    if not m:
        return None
    return max(1, int(m.group(1)) * int(m.group(2) or 1) // 8)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


def describe_error(exc: BaseException) -> dict:
    """Classify a lowering exception; see README.md ("error")."""
    text = str(exc)
    loc = list(LOCATION_RE.finditer(text))
    body = text[:loc[-1].start()] if loc else text
    kept = []
    for ln in body.splitlines():
        s = ln.strip()
        if not s or s.startswith(("Traceback", "File \"")) or ("repeated" in s and s.startswith("[")):
            continue
        kept.append(ln.rstrip())
    message = "\n".join(kept).strip() or type(exc).__name__
    if len(message) > 2000:
        message = message[:2000] + " ..."
    # One-line summary: drop the ICHECK prefix and the IR dumps of the statements.
    summary = " ".join(message.split())
    summary = re.sub(r"^Check failed: .*? : (?:\w+Error: )?", "", summary)
    summary = re.sub(r"^Check failed: .*? is false: (?:\w+Error: )?", "", summary)
    m = re.search(r"in stage (\d+) cannot depends? on statement .* in a later stage (\d+)", summary)
    if m:
        summary = (f"statement in stage {m.group(1)} cannot depends on statement "
                   f"in a later stage {m.group(2)}")
    if len(summary) > 300:
        summary = summary[:300] + " ..."
    code = None
    for c, rx in ERROR_CODES:
        if rx.search(text):
            code = c
            break
    line = col = loc_file = None
    if loc:
        m = loc[-1]
        line, col, loc_file = int(m.group("line")), int(m.group("col")), m.group("file").strip()
    return {
        "message": message,
        "summary": summary,
        "type": type(exc).__name__,
        "line": line,
        "col": col,
        "file": loc_file,
        "code": code,
    }


# --------------------------------------------------------------------------------------
# Fact extraction
# --------------------------------------------------------------------------------------


def flatten_seq(env, body):
    """Flatten nested SeqStmts the way SeqStmtFlattener does (only SeqStmt nodes)."""
    tirx = env.tirx
    out = []

    def rec(s):
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                rec(c)
        else:
            out.append(s)

    rec(body)
    return out


def scheduled_statements(env, loop):
    """The statements that software_pipeline_stage/order index, after PipelinePlanning.

    PipelinePlanning flattens the loop body's SeqStmt, skips buffer declarations
    (AllocBuffer / DeclBuffer) and, when it sets software_pipeline_replayable_scalar_binds,
    the Bind statements marked 1 in that mask.
    """
    tirx = env.tirx
    stmts = flatten_seq(env, loop.body)
    stmts = [s for s in stmts if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
    mask = int_list(ann_get(loop, "software_pipeline_replayable_scalar_binds"))
    if mask is not None and len(mask) == len(stmts):
        stmts = [s for s, m in zip(stmts, mask, strict=True) if not m]
    return stmts


def pipeline_depth(loop):
    """GetPipelineNumStages (src/transform/common/pipeline_utils.h)."""
    for key in ("num_stages", "tl_pipelined_num_stages"):
        v = as_int(ann_get(loop, key))
        if v is not None:
            return v
    stages = int_list(ann_get(loop, "software_pipeline_stage"))
    if stages:
        return max(stages) + 1
    return None


def line_key_index(env, loops):
    """Group loops by span line, keeping pre-order rank within each line."""
    ranks = {}
    out = []
    for lp in loops:
        line, _ = env.span(lp)
        k = ranks.get(line, 0)
        ranks[line] = k + 1
        out.append((line, k, lp))
    return out


def last_line_in(env, loop):
    """The last source line of ``loop`` (the largest span line of its statements in the
    loop's own file): with the loop's line, the range that tells the pipelined loop's
    code from the kernel's other code in the final IR."""
    line, fname = env.span(loop)
    last = line

    def visit(node):
        nonlocal last
        if isinstance(node, env.tirx.Stmt):
            ln, fn = env.span(node)
            if ln is not None and fn == fname and (last is None or ln > last):
                last = ln
        return True

    env.tirx.stmt_functor.pre_order_visit(loop.body, visit)
    return last


def extract_loops(env, pf, planned_mod, ws_mod, ws_flag):
    user_loops = [lp for lp in env.preorder(pf.body, env.tirx.For)
                  if any(ann_get(lp, k) is not None for k in USER_PIPELINE_KEYS)]
    planned = []
    if planned_mod is not None:
        for _, f in planned_mod.functions.items():
            if isinstance(f, env.tirx.PrimFunc):
                planned.extend(env.preorder(f.body, env.tirx.For))
    planned_by_line = {}
    for line, _k, lp in line_key_index(env, planned):
        planned_by_line.setdefault(line, []).append(lp)
    ws_by_line = {}
    if ws_mod is not None:
        for _, f in ws_mod.functions.items():
            if isinstance(f, env.tirx.PrimFunc):
                for lp in env.preorder(f.body, env.tirx.For):
                    ws_by_line.setdefault(env.span(lp)[0], []).append(lp)

    results = []
    for line, k, lp in line_key_index(env, user_loops):
        entry = {
            "line": line,
            "num_stages": as_int(ann_get(lp, "num_stages")),
            "user_order": int_list(ann_get(lp, "tl_pipeline_order")),
            "user_stage": int_list(ann_get(lp, "tl_pipeline_stage")),
            "pipelined": False,
            "stage": None,
            "order": None,
            "depth": None,
            "statements": [],
            "ws": None,
        }
        entry["end_line"] = last_line_in(env, lp)
        # The same loop after PipelinePlanning: the pipelined loop on the same line (k-th
        # pipelined loop on that line; falls back to the k-th loop on that line).
        cands = planned_by_line.get(line, [])
        piped = [c for c in cands if ann_get(c, "software_pipeline_stage") is not None]
        match = piped[k] if k < len(piped) else None
        if match is not None:
            stage = int_list(ann_get(match, "software_pipeline_stage"))
            order = int_list(ann_get(match, "software_pipeline_order"))
            entry["pipelined"] = True
            entry["stage"] = stage
            entry["order"] = order
            entry["depth"] = pipeline_depth(match)
            stmts = scheduled_statements(env, match)
            if stage is not None and order is not None and len(stmts) == len(stage) == len(order):
                entry["statements"] = [
                    {"line": env.span(s)[0], "file": env.span(s)[1], "stage": st, "order": od}
                    for s, st, od in zip(stmts, stage, order, strict=True)
                ]
            else:
                entry["statements"] = None
                entry["statements_mismatch"] = {
                    "n_stmts": len(stmts), "n_stage": len(stage or []), "n_order": len(order or [])}
        # What the warp-specialization pass (sm_90) did to this loop.  Loops it rewrites
        # lose their span and their annotations; loops it leaves alone keep both.
        if ws_mod is not None:
            kept = [w for w in ws_by_line.get(line, [])
                    if any(ann_get(w, key) is not None for key in USER_PIPELINE_KEYS)]
            if k < len(kept):
                entry["ws"] = "kept"
            elif ws_flag:
                entry["ws"] = "consumed"
            else:
                entry["ws"] = "stripped"
        else:
            entry["ws"] = None
        results.append(entry)
    return results


def declared_shared(env, pf):
    out = {}
    for name, shape, scope, _dtype in env.allocations(pf.body):
        if scope.startswith("shared") and "barrier" not in scope:
            out.setdefault(name, shape)
    return out


def extract_versions(env, pf, inject_mod):
    declared = declared_shared(env, pf)
    if inject_mod is None:
        return None
    after = {}
    for _, f in inject_mod.functions.items():
        if isinstance(f, env.tirx.PrimFunc):
            for name, shape, scope, _dtype in env.allocations(f.body):
                if scope.startswith("shared") and "barrier" not in scope:
                    after.setdefault(name, shape)
    versions = {}
    for name, shape in declared.items():
        new = after.get(name)
        if new is None:
            versions[name] = None  # buffer vanished (should not happen before layout passes)
            continue
        extra = len(new) - len(shape)
        lead = list(new[:extra]) if extra > 0 else []
        if extra > 0 and tuple(new[extra:]) == tuple(shape) and all(isinstance(d, int) for d in lead):
            n = 1
            for d in lead:
                n *= d
            versions[name] = n
        else:
            versions[name] = 1
    return versions


def extract_version_dims(env, pf, inject_mod):
    """{buffer: [leading dims]} for buffers that got more than one leading dimension."""
    declared = declared_shared(env, pf)
    out = {}
    if inject_mod is None:
        return out
    for _, f in inject_mod.functions.items():
        if isinstance(f, env.tirx.PrimFunc):
            for name, shape, _scope, _dtype in env.allocations(f.body):
                if name in declared and name not in out:
                    extra = len(shape) - len(declared[name])
                    out[name] = list(shape[:extra]) if extra > 0 else []
    return {k: v for k, v in out.items() if len(v) > 1}


def device_funcs(env, mod):
    out = []
    if mod is None:
        return out
    for gv, f in mod.functions.items():
        if not isinstance(f, env.tirx.PrimFunc):
            continue
        attrs = f.attrs or {}
        try:
            is_dev = ("thread_extent" in attrs and len(attrs["thread_extent"]) > 0) or \
                     ("tirx.is_global_func" in attrs) or ("dyn_shared_memory_buf" in attrs)
        except Exception:
            is_dev = False
        if is_dev:
            out.append((str(gv.name_hint), f))
    return out


def extract_threads(env, art):
    threads = None
    for _, f in device_funcs(env, art.device_mod):
        ext = f.attrs.get("thread_extent") if f.attrs else None
        if not ext:
            continue
        n = 1
        for axis in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            v = as_int(ext[axis]) if axis in ext else 1
            n *= v if v is not None else 1
        threads = n if threads is None else max(threads, n)
    if threads is None:
        m = re.search(r"__launch_bounds__\((\d+)", art.kernel_source or "")
        if m:
            threads = int(m.group(1))
    return threads


def extract_shared(env, art, merge_mod):
    res = {"bytes": None, "offsets": {}, "static_bytes": 0, "host_dyn_bytes": None, "merged": True,
           "static_buffers": {}, "source_offsets": {}}
    tirx = env.tirx
    # Host-visible record: the device kernel's dyn_shared_memory_buf attribute.
    for _, f in device_funcs(env, art.device_mod):
        v = as_int(f.attrs.get("dyn_shared_memory_buf")) if f.attrs else None
        if v is not None:
            res["host_dyn_bytes"] = (res["host_dyn_bytes"] or 0) + v
    # Arena after MergeSharedMemoryAllocations.
    if merge_mod is not None:
        arena_bytes = None
        for _, f in device_funcs(env, merge_mod):
            unmerged = []
            for name, shape, scope, dtype in env.allocations(f.body):
                if scope != "shared.dyn":
                    continue
                n = 1
                for d in shape:
                    n *= d if d is not None else 0
                nbytes = n * (dtype_bytes(dtype) or 1)
                if name.startswith("buf_dyn_shmem"):
                    arena_bytes = (arena_bytes or 0) + nbytes
                else:
                    unmerged.append((name, nbytes))
            if arena_bytes is None and unmerged:
                # A lone dynamic buffer is not merged: it is the whole dynamic region.
                res["merged"] = False
                arena_bytes = sum(nb for _, nb in unmerged)
                if len(unmerged) == 1:
                    res["offsets"][unmerged[0][0]] = 0

            def visit(node):
                if isinstance(node, tirx.Bind):
                    val = node.value
                    if isinstance(val, tirx.Call) and str(getattr(val.op, "name", "")) == "tirx.handle_add_byte_offset":
                        off = as_int(val.args[1])
                        # Two IR buffers may share a name (each reduction's
                        # ``workspace``): the codegen names the next ones
                        # ``workspace_1``, ``workspace_2``, ... in this order.
                        name, n = str(node.var.name), 0
                        while (name if n == 0 else f"{name}_{n}") in res["offsets"]:
                            n += 1
                        res["offsets"][name if n == 0 else f"{name}_{n}"] = \
                            off if off is not None else str(val.args[1])
                return True

            tirx.stmt_functor.pre_order_visit(f.body, visit)
        res["bytes"] = arena_bytes if arena_bytes is not None else 0
    src = art.kernel_source or ""
    for m in RE_DYN_OFFSET.finditer(src):
        res["source_offsets"][m.group(1)] = int(m.group(2))
    static = 0
    for m in RE_STATIC_SHARED.finditer(src):
        ctype, name, n = m.group(1), m.group(2), int(m.group(3))
        size = C_TYPE_BYTES.get(ctype)
        res["static_buffers"][name] = {"type": ctype, "count": n, "bytes": size * n if size else None}
        static += size * n if size else 0
    res["static_bytes"] = static
    if res["bytes"] is None:
        res["bytes"] = res["host_dyn_bytes"] or 0
    return res


def brace_block(src: str, start: int) -> str:
    """Text of the {...} block that begins at the first '{' at or after start."""
    i = src.find("{", start)
    if i < 0:
        return ""
    depth = 0
    for j in range(i, len(src)):
        ch = src[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return src[i:j + 1]
    return src[i:]


def storage_syncs_in(env, stmt):
    tirx = env.tirx
    count = 0

    def visit(node):
        nonlocal count
        if isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")) == "tirx.tvm_storage_sync":
            if node.args and str(getattr(node.args[0], "value", "")).startswith("shared"):
                count += 1
        return True

    tirx.stmt_functor.pre_order_visit(stmt, visit)
    return count


REGION_KEYS = ("syncthreads", "sync_partial", "cp_async_commit", "cp_async_wait", "mbarrier_wait")


def sync_calls_in(env, stmts):
    """Sync calls of the final device IR inside ``stmts``, counted like the source:
    ``tvm_storage_sync("shared")`` is one ``__syncthreads()`` (with a barrier id and
    a thread count it is a partial sync), ``ptx_commit_group`` one commit,
    ``ptx_wait_group(N)`` one ``cp_async_wait<N>``, any ``*barrier_wait*`` call one
    mbarrier wait."""
    tirx = env.tirx
    out = {"syncthreads": 0, "sync_partial": 0, "cp_async_commit": 0, "cp_async_wait": [],
           "mbarrier_wait": 0}

    def visit(node):
        if isinstance(node, tirx.Call):
            op = str(getattr(node.op, "name", ""))
            if op == "tirx.tvm_storage_sync":
                if node.args and str(getattr(node.args[0], "value", "")).startswith("shared"):
                    out["syncthreads" if len(node.args) == 1 else "sync_partial"] += 1
            elif op.endswith("ptx_commit_group"):
                out["cp_async_commit"] += 1
            elif op.endswith("ptx_wait_group"):
                out["cp_async_wait"].append(as_int(node.args[0]) if node.args else None)
            elif "barrier_wait" in op:
                out["mbarrier_wait"] += 1
        return True

    for st in stmts:
        tirx.stmt_functor.pre_order_visit(st, visit)
    return out


def _reaches(env, node, target):
    """``target`` is ``node`` or sits under single-body wrappers of ``node``."""
    tirx = env.tirx
    while node is not None:
        if node.same_as(target):
            return True
        if isinstance(node, (tirx.For, tirx.SeqStmt, tirx.IfThenElse)):
            return False
        node = getattr(node, "body", None)
    return False


SYNC_BUILTINS = ("tirx.tvm_storage_sync", "tirx.ptx_commit_group", "tirx.ptx_wait_group")


def _is_sync_call(env, node):
    """An ``Evaluate`` of a sync builtin: its span is the enclosing loop's, whichever
    loop that is, so it says nothing about which code it belongs to."""
    if not isinstance(node, env.tirx.Evaluate) or not isinstance(node.value, env.tirx.Call):
        return False
    return str(getattr(node.value.op, "name", "")) in SYNC_BUILTINS


def _stored_buffers(env, stmt):
    """Names of the buffer variables that ``BufferStore`` statements in ``stmt``
    write."""
    return {str(st.buffer.data.name) for st in env.preorder(stmt, env.tirx.BufferStore)}


def _is_all_reduce(env, stmt):
    """``stmt`` holds a reduction's lowered AllReduce (a ``tl::AllReduce<...>``
    extern call): the kernel's own ``T.reduce_*``, whose lowered loop carries no
    span of the user's file."""
    found = False

    def visit(node):
        nonlocal found
        if isinstance(node, env.tirx.Call) and node.args and \
                isinstance(node.args[0], env.tirx.StringImm) and \
                "AllReduce" in str(node.args[0].value):
            found = True
        return not found

    env.tirx.stmt_functor.pre_order_visit(stmt, visit)
    return found


def _epilogue_reduces(entry, kernel_file):
    """The emissions of a loop's reductions in its epilogue: a statement at
    stage s is emitted in s epilogue steps."""
    if not kernel_file:
        return 0
    try:
        with open(kernel_file, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, TypeError):
        return 0
    n = 0
    for st in entry.get("statements") or ():
        ln, fn = st.get("line"), st.get("file") or ""
        # T.reduce_* is a macro: its statement's span is in reduce_op.py
        if os.path.basename(fn) == "reduce_op.py" or (
                isinstance(ln, int) and 0 < ln <= len(lines) and "reduce_" in lines[ln - 1]
                and (not fn or os.path.abspath(fn) == os.path.abspath(kernel_file))):
            n += int(st.get("stage") or 0)
    return n


def pipeline_regions(env, funcs, loop, first, last, kernel_file, extra_lines=(),
                     epilogue_reduces=0):
    """(prologue statements, epilogue statements) of the pipelined loop whose emitted
    steady-state ``For`` is ``loop``.  InjectSoftwarePipeline puts the prologue right
    before that loop and the epilogue right after it, in the same sequence.  A sibling
    belongs to the pipeline when one of its statements has a span in the user's loop
    (lines ``first``..``last`` of the kernel's file, or ``extra_lines``: the lines of
    its scheduled statements, which for a macro are in the macro's body); one with a
    span elsewhere in that
    file is the kernel's own code and ends the region; a sibling without such spans
    (a sync call, a gemm expanded from the library) is kept inside the region, but sync
    calls at its outer edges are not the pipeline's (ThreadSync puts them there for
    the code around it).  ``epilogue_reduces``: how many emissions of the loop's own
    reductions its epilogue holds (the stage of each); their lowered loops carry
    spans outside the loop, so the first that many AllReduce statements after the
    loop are the epilogue's.  Returns None when the loop is not found in a sequence."""
    tirx = env.tirx
    parent = idx = None
    for f in funcs:
        for seq in env.preorder(f.body, tirx.SeqStmt):
            for i, child in enumerate(seq.seq):
                if _reaches(env, child, loop):
                    parent, idx = seq, i
                    break
            if parent is not None:
                break
        if parent is not None:
            break
    if parent is None:
        return None

    # A reduction lowered after the loop carries no span: it is the kernel's
    # own code, unless the loop itself reduces (its epilogue then holds
    # AllReduce calls of its own).
    try:
        with open(kernel_file, encoding="utf-8") as fh:
            src_lines = fh.read().splitlines()
    except (OSError, TypeError):
        src_lines = []
    loop_reduces = not src_lines or any(
        "reduce_" in ln for ln in src_lines[max(first - 1, 0):last])

    def kind(st):
        member = foreign = False

        def visit(node):
            nonlocal member, foreign
            if isinstance(node, tirx.Stmt) and not _is_sync_call(env, node):
                ln, fn = env.span(node)
                if ln is not None and (not kernel_file or not fn or
                                       os.path.abspath(fn) == os.path.abspath(kernel_file)):
                    if first <= ln <= last or ln in extra_lines:
                        member = True
                    else:
                        foreign = True
            return True

        tirx.stmt_functor.pre_order_visit(st, visit)
        if not member and not loop_reduces and _is_all_reduce(env, st):
            return "foreign"
        return "member" if member else ("foreign" if foreign else "neutral")

    seq = list(parent.seq)
    before = []
    for st in reversed(seq[:idx]):
        if kind(st) == "foreign":
            break
        before.insert(0, st)
    # Statements without spans at the region's front are not the pipeline's (sync
    # calls ThreadSync puts there for the code before it, an earlier loop rebuilt
    # by warp specialization), except a lowered statement that stores into a
    # buffer the steady-state loop stores into (a T.Parallel store's loop of
    # the prologue, whose lowering drops the span).
    filled = _stored_buffers(env, loop)
    while before and kind(before[0]) == "neutral" and not (
            _stored_buffers(env, before[0]) & filled):
        before.pop(0)
    after = []
    budget = epilogue_reduces
    for st in seq[idx + 1:]:
        if budget > 0 and _is_all_reduce(env, st):
            budget -= 1
            after.append(st)
            continue
        if kind(st) == "foreign":
            break
        after.append(st)
    while after and isinstance(after[-1], tirx.Evaluate) and kind(after[-1]) == "neutral" \
            and storage_syncs_in(env, after[-1]):
        after.pop()
    return before, after


def extract_sync(env, art, loops, kernel_file):
    src = art.kernel_source or ""
    res = {
        "syncthreads": len(RE_SYNCTHREADS.findall(src)),
        "syncthreads_in_loop": [],
        "sync_partial": len(RE_SYNC_PARTIAL.findall(src)),
        "sync_partial_in_loop": [],
        "cp_async_commit": len(RE_CP_COMMIT.findall(src)),
        "cp_async_wait": [int(x) for x in RE_CP_WAIT.findall(src)],
        "mbarriers": 0,
        "mbarrier_wait": len(RE_MBAR_WAIT.findall(src)),
        "regions": [],
    }
    for m in RE_STATIC_SHARED.finditer(src):
        if m.group(1) == "uint64_t":
            res["mbarriers"] += int(m.group(3))
    # Steady-state loops: in the final device IR, the For whose span line is the
    # user's loop line (and, in the auto path, that still carries tl_pipelined_num_stages).
    dev = device_funcs(env, art.device_mod)
    all_fors = []
    for _, f in dev:
        all_fors.extend(lp for lp in env.preorder(f.body, env.tirx.For)
                        if int(lp.kind) != 2)  # vectorized loops are not emitted as `for`
    src_fors = list(RE_FOR.finditer(src))
    aligned = len(src_fors) == len(all_fors)
    # Loops that share a source line (a Python ``for`` over a list builds the
    # body once per element): the n-th such entry is the n-th steady-state loop
    # on that line, and its regions cannot be told apart by line, so none.
    line_count: dict = {}
    for entry in loops:
        if entry.get("pipelined"):
            line_count[entry["line"]] = line_count.get(entry["line"], 0) + 1
    taken: set = set()
    for entry in loops:
        if not entry.get("pipelined"):
            res["syncthreads_in_loop"].append(None)
            res["sync_partial_in_loop"].append(None)
            res["regions"].append(None)
            continue
        best = None
        cands = []
        for idx, lp in enumerate(all_fors):
            line, fname = env.span(lp)
            if line != entry["line"] or idx in taken:
                continue
            if kernel_file and fname and os.path.abspath(fname) != os.path.abspath(kernel_file):
                continue
            cands.append(idx)
            if best is None or ann_get(lp, "tl_pipelined_num_stages") is not None:
                best = idx
                if ann_get(lp, "tl_pipelined_num_stages") is not None:
                    cands.extend(i for i in range(idx + 1, len(all_fors))
                                 if env.span(all_fors[i])[0] == entry["line"])
                    break
        if best is not None and int(all_fors[best].kind) == 3:
            # A loop whose start is not a constant: InjectSoftwarePipeline emits the
            # prologue and the epilogue as unrolled-kind loops too (their extent
            # `(s + d) - s` is not folded), all three on the loop's line and
            # annotated; the steady state is the one that stays serial.
            later = [i for i in cands if i > best and int(all_fors[i].kind) != 3]
            if later:
                best = later[0]
        if best is None:
            res["syncthreads_in_loop"].append(None)
            res["sync_partial_in_loop"].append(None)
            res["regions"].append(None)
            continue
        taken.add(best)
        ir_count = storage_syncs_in(env, all_fors[best].body)
        regions = None if line_count.get(entry["line"], 0) > 1 else pipeline_regions(env, [f for _, f in dev], all_fors[best], entry["line"],
                                   entry.get("end_line") or entry["line"], kernel_file,
                                   {st.get("line") for st in entry.get("statements") or ()},
                                   _epilogue_reduces(entry, kernel_file))
        if regions is None:
            res["regions"].append(None)
        else:
            res["regions"].append({
                "prologue": sync_calls_in(env, regions[0]),
                "body": sync_calls_in(env, [all_fors[best].body]),
                "epilogue": sync_calls_in(env, regions[1]),
            })
        src_count = partial = None
        if aligned:
            m = src_fors[best]
            name = str(all_fors[best].loop_var.name)
            if re.fullmatch(re.escape(name) + r"(_\d+)?", m.group(1)):
                block = brace_block(src, m.end())
                src_count = len(RE_SYNCTHREADS.findall(block))
                partial = len(RE_SYNC_PARTIAL.findall(block))
        if src_count is None:
            res.setdefault("notes", []).append(
                f"loop line {entry['line']}: source loop not located, count taken from the IR")
        res["syncthreads_in_loop"].append(src_count if src_count is not None else ir_count)
        res["sync_partial_in_loop"].append(partial)
        if src_count is not None and src_count + partial != ir_count:
            res.setdefault("notes", []).append(
                f"loop line {entry['line']}: source count {src_count}+{partial} != IR count {ir_count}")
    return res


def ws_applied(env, ws_mod, art):
    mods = [ws_mod] if ws_mod is not None else []
    mods.append(art.host_mod if art is not None else None)
    for mod in mods:
        if mod is None:
            continue
        for _, f in mod.functions.items():
            attrs = getattr(f, "attrs", None)
            if attrs and "tl_tiled_ws_applied" in attrs and as_int(attrs["tl_tiled_ws_applied"]):
                return True
    return False


# --------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------


def make_target(env, target: str):
    tvm = env.tvm
    if target in CUDA_ARCHS or target.startswith("sm_"):
        return tvm.target.Target({"kind": "cuda", "arch": target})
    if target in ROCM_ARCHS:
        # HIP lowers on the CPU too (no ROCm install: it warns and assumes >= 3.5).
        return tvm.target.Target({"kind": "hip", "mcpu": target})
    if target == "ascend":
        from tilelang.ascend.target import _make_ascend_target
        return _make_ascend_target()
    raise ValueError(f"unknown target {target!r}")


def lower_one(env, pf, target: str, pass_configs: dict, dump_path: str | None):
    tvm = env.tvm
    seen = {}

    @tvm.ir.instrument.pass_instrument
    class Capture:
        def run_after_pass(self, mod, info):
            name = info.name
            if name in CAPTURED_PASSES and name not in seen:
                seen[name] = mod
            elif target == "ascend" and name not in seen and (
                    name.endswith("PipelinePlanning") or name.endswith("InjectSoftwarePipeline")):
                seen[P_PLAN if name.endswith("PipelinePlanning") else P_INJECT] = mod

    kernel_file = env.span(pf)[1]
    out = {
        "def_line": env.span(pf)[0],
        "threads": None,
        "warp_specialized": False,
        "loops": [],
        "versions": None,
        "shared": None,
        "sync": None,
        "error": None,
    }
    tg = make_target(env, target)
    art = None
    t0 = time.perf_counter()
    try:
        with tg, tvm.transform.PassContext(opt_level=3, config=dict(pass_configs or {}),
                                           instruments=[Capture()]):
            art = env.tilelang.lower(pf, target=tg, enable_device_compile=False)
    except Exception as exc:  # the compiler rejected the kernel
        out["error"] = describe_error(exc)
    out["lower_seconds"] = round(time.perf_counter() - t0, 3)
    out["passes_seen"] = [p for p in CAPTURED_PASSES if p in seen]

    # Facts available even when a later pass failed.
    for key, fn in (
        ("warp_specialized", lambda: ws_applied(env, seen.get(P_WS), art)),
        ("loops", lambda: extract_loops(env, pf, seen.get(P_PLAN), seen.get(P_WS), out["warp_specialized"])),
        ("versions", lambda: extract_versions(env, pf, seen.get(P_INJECT))),
        ("version_dims", lambda: extract_version_dims(env, pf, seen.get(P_INJECT))),
    ):
        try:
            out[key] = fn()
        except Exception:
            out.setdefault("extract_errors", {})[key] = traceback.format_exc(limit=3)
    if art is None:
        return out
    if target == "ascend":
        src = getattr(art, "kernel_source", None) or ""
        if dump_path:
            with open(dump_path, "w") as fh:
                fh.write(src)
            out["source_path"] = dump_path
        return out
    for key, fn in (
        ("threads", lambda: extract_threads(env, art)),
        ("shared", lambda: extract_shared(env, art, seen.get(P_MERGE))),
        ("sync", lambda: extract_sync(env, art, out["loops"] or [], kernel_file)),
    ):
        try:
            out[key] = fn()
        except Exception:
            out.setdefault("extract_errors", {})[key] = traceback.format_exc(limit=3)
    if dump_path:
        with open(dump_path, "w") as fh:
            fh.write(art.kernel_source or "")
        out["source_cu"] = dump_path
    return out


def import_fixture(path: str):
    abspath = os.path.abspath(path)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(abspath))[0])
    modname = f"_tl_oracle_fixture_{stem}_{abs(hash(abspath)) % 10**8}"
    spec = importlib.util.spec_from_file_location(modname, abspath)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {abspath}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    fixture_dir = os.path.dirname(abspath)
    added = fixture_dir not in sys.path
    if added:
        sys.path.insert(0, fixture_dir)
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            try:
                sys.path.remove(fixture_dir)
            except ValueError:
                pass
    return module


def process_file(env, path: str, target: str, dump_dir: str | None) -> dict:
    t0 = time.perf_counter()
    result = {
        "file": os.path.abspath(path),
        "target": target,
        "import_error": None,
        "kernels": {},
        "seconds": None,
    }
    try:
        module = import_fixture(path)
    except BaseException as exc:  # SystemExit from a fixture counts as an import error too
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["import_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        result["seconds"] = round(time.perf_counter() - t0, 3)
        return result
    pass_configs = getattr(module, "PASS_CONFIGS", None) or getattr(module, "pass_configs", None) or {}
    if not isinstance(pass_configs, dict):
        pass_configs = {}
    result["pass_configs"] = {str(k): v for k, v in pass_configs.items()
                              if isinstance(v, (bool, int, float, str))}

    PrimFunc = env.tirx.PrimFunc
    found = []  # (var names, prim_func)
    for var, val in list(vars(module).items()):
        if isinstance(val, PrimFunc):
            for entry in found:
                if entry[1].same_as(val):
                    entry[0].append(var)
                    break
            else:
                found.append(([var], val))
    symbols = {}
    for names, pf in found:
        sym = None
        try:
            sym = str(pf.attrs["global_symbol"]) if pf.attrs and "global_symbol" in pf.attrs else None
        except Exception:
            sym = None
        sym = sym or names[0]
        symbols.setdefault(sym, []).append((names, pf))
    for sym, entries in symbols.items():
        for names, pf in entries:
            key = sym if len(entries) == 1 else f"{sym}@{names[0]}"
            dump_path = None
            if dump_dir:
                stem = os.path.splitext(os.path.basename(path))[0]
                ext = "cpp" if target == "ascend" else "cu"
                dump_path = os.path.join(dump_dir, f"{stem}.{key}.{target}.{ext}")
            try:
                facts = lower_one(env, pf, target, pass_configs, dump_path)
            except Exception as exc:  # an oracle bug must not lose the other kernels
                facts = {"error": describe_error(exc), "oracle_error": traceback.format_exc(limit=5)}
            kernel = {"var": names[0], "vars": names, "global_symbol": sym}
            kernel.update(facts)
            result["kernels"][key] = kernel
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


# --------------------------------------------------------------------------------------
# Process isolation: each file is lowered in a forked child of the (already warm) parent,
# so a crash, hang or global side effect in one fixture cannot affect the others.
# --------------------------------------------------------------------------------------


def run_isolated(env, path, target, dump_dir, timeout):
    rfd, wfd = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        code = 0
        try:
            res = process_file(env, path, target, dump_dir)
            data = json.dumps(res, default=str).encode()
        except BaseException:
            data = json.dumps({"file": os.path.abspath(path), "target": target,
                               "import_error": "oracle failure: " + traceback.format_exc(),
                               "kernels": {}, "seconds": None}).encode()
            code = 1
        try:
            with os.fdopen(wfd, "wb") as fh:
                fh.write(data)
        finally:
            os._exit(code)
    os.close(wfd)
    chunks = []
    deadline = None if not timeout else time.monotonic() + timeout
    import select
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
    if timed_out or not raw:
        why = f"timed out after {timeout}s" if timed_out else (
            f"oracle child died (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status)
            else f"oracle child exited with status {os.WEXITSTATUS(status)} and no output")
        return {"file": os.path.abspath(path), "target": target, "import_error": why,
                "kernels": {}, "seconds": round(time.perf_counter() - t0, 3)}
    return json.loads(raw.decode())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="fixture .py files")
    ap.add_argument("--target", default="sm_80", choices=TARGETS)
    ap.add_argument("--dump-dir", default=None, help="write each kernel's generated source here")
    ap.add_argument("--jsonl", action="store_true", help="one JSON object per line instead of a list")
    ap.add_argument("--no-isolate", action="store_true",
                    help="lower every file in this process (default: one forked child per file)")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-file limit in seconds (isolated mode)")
    ap.add_argument("--indent", type=int, default=None)
    args = ap.parse_args(argv)

    # Keep stdout for the JSON only: anything printed by tilelang, TVM (C++ included)
    # or the fixtures goes to stderr.
    sys.stdout.flush()
    json_fd = os.dup(1)
    os.dup2(2, 1)
    json_out = os.fdopen(json_fd, "w")

    if args.dump_dir:
        os.makedirs(args.dump_dir, exist_ok=True)
    t0 = time.perf_counter()
    env = Env()
    import_seconds = round(time.perf_counter() - t0, 3)
    print(f"[oracle] tilelang imported in {import_seconds}s", file=sys.stderr)

    isolate = not args.no_isolate and hasattr(os, "fork")
    results = []
    for path in args.files:
        if isolate:
            res = run_isolated(env, path, args.target, args.dump_dir, args.timeout)
        else:
            try:
                res = process_file(env, path, args.target, args.dump_dir)
            except Exception:
                res = {"file": os.path.abspath(path), "target": args.target,
                       "import_error": "oracle failure: " + traceback.format_exc(),
                       "kernels": {}, "seconds": None}
        results.append(res)
        if args.jsonl:
            json_out.write(json.dumps(res, default=str) + "\n")
            json_out.flush()
    if not args.jsonl:
        json.dump(results, json_out, indent=args.indent, default=str)
        json_out.write("\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
