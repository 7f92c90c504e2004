#!/usr/bin/env python3
"""Compiler oracle for warp-specialized loops: lower fixture files for sm_90 with the real
tilelang 0.1.15 and print, per kernel the sm_90 rewriter split, what each warpgroup runs.

    python tests/oracle/lower_ws.py [--iterations N] FILE [FILE ...]

The facts come from the IR right after ``tl.ProducerConsumerWarpSpecialized``:

* ``threads``: the ``kWarpSpecializationScope`` attribute's ``[producer, consumer]``
  thread counts; the producer branch is ``threadIdx.x < producer``.
* ``barrier_init``: the arrive count of every mbarrier (the block's ``barrier_init``).
* ``producer`` / ``consumer``: for each of the first N iterations of the branch's
  pipelined loop (the innermost loop holding mbarrier calls), the events it executes in
  order, with the loop variable substituted and constant ``if`` conditions decided:
  ``["wait", barrier, parity]`` (``mbarrier_wait_parity``), ``["arrive", barrier]``
  (``ptx_arrive_barrier``), ``["tma", buffer, barrier, bytes]`` (a TMA copy: the shared
  buffer it fills, the mbarrier it completes on and the bytes of its destination region) and
  ``["commit"]`` (cp.async commit_group), ``["cp_async_arrive", barrier]``
  (``ptx_cp_async_barrier_noinc``), ``["counter_inc"]`` (the phase counter that
  replaces k under an outer loop or a guarded body; read as k) and ``["stmt", line]`` (any other statement, a
  parallel loop counted once; line None when its span is not in the fixture, e.g. a
  macro of tilelang's own library).

stdout receives only the JSON (one object per file); everything else goes to stderr.
Imports nothing from tilelint; reuses the fixture import and span helpers of lower.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lower import Env, as_int, dtype_bytes, import_fixture, make_target  # noqa: E402

P_WS = "tl.ProducerConsumerWarpSpecialized"


def _call_name(node) -> str:
    op = getattr(node, "op", None)
    return str(getattr(op, "name", "")) if op is not None else ""


def _barrier_index(env, load):
    """The index of an ``mbarrier[i]`` BufferLoad (None if it is something else)."""
    if isinstance(load, env.tirx.BufferLoad) and len(load.indices) == 1:
        return load.indices[0]
    return None


def _is_counter(buffer) -> bool:
    return str(buffer.name).endswith("phase_cnt")


class Walker:
    """Events of iteration ``k`` (from 0) of a loop over ``var`` starting at ``start``.
    A phase counter (``producer_phase_cnt[0]``, used under an outer loop or a guarded
    body) is taken to equal k: it starts at 0 and counts the iterations run."""

    def __init__(self, env, var, start, k: int, fname: str) -> None:
        self.env, self.var, self.k, self.fname = env, var, k, fname
        self.start = start
        self.analyzer = env.tvm.arith.Analyzer()

    def _counters_to_k(self, expr):
        tirx = self.env.tirx
        k = self.k

        def post(node):
            if isinstance(node, tirx.BufferLoad) and _is_counter(node.buffer):
                return tirx.IntImm("int32", k)
            return None

        stmt = tirx.stmt_functor.ir_transform(tirx.Evaluate(expr), None, post,
                                              ["tirx.BufferLoad"])
        return stmt.value

    def value(self, expr):
        e = self.env.tirx.stmt_functor.substitute(self._counters_to_k(expr),
                                                  {self.var: self.start + self.k})
        e = self.analyzer.simplify(e)
        if isinstance(e, self.env.tirx.Call) and _call_name(e).endswith("bitwise_xor"):
            a, b = (self.value(x) for x in e.args)
            return None if a is None or b is None else a ^ b
        return as_int(e)

    def line(self, node):
        line, fname = self.env.span(node)
        return line if fname is None or fname == self.fname else None

    def events(self, stmt, out) -> None:
        tirx = self.env.tirx
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.events(s, out)
            return
        if isinstance(stmt, tirx.IfThenElse):
            cond = self.value(stmt.condition)
            if cond is not None and self._has_barrier_call(stmt):
                branch = stmt.then_case if cond else stmt.else_case
                if branch is not None:
                    self.events(branch, out)
                return
            out.append(["stmt", self.line(stmt)])
            return
        if isinstance(stmt, tirx.BufferStore) and _is_counter(stmt.buffer):
            out.append(["counter_inc"])
            return
        if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call):
            call = stmt.value
            name = _call_name(call)
            if name.endswith("mbarrier_wait_parity"):
                out.append(["wait", self.value(_barrier_index(self.env, call.args[0])),
                            self.value(call.args[1])])
                return
            if name.endswith("ptx_arrive_barrier"):
                out.append(["arrive", self.value(_barrier_index(self.env, call.args[0]))])
                return
            if name.endswith("tma_copy"):
                ann = getattr(call, "annotations", None) or {}
                bar = ann.get("barrier") if hasattr(ann, "get") else None
                out.append(["tma", str(call.args[1].args[0].buffer.name),
                            self.value(_barrier_index(self.env, bar)) if bar is not None else None,
                            self._region_bytes(call.args[1])])
                return
            if name.endswith("ptx_commit_group"):
                out.append(["commit"])
                return
            if name.endswith("ptx_cp_async_barrier_noinc"):
                out.append(["cp_async_arrive", self.value(_barrier_index(self.env, call.args[0]))])
                return
        out.append(["stmt", self.line(stmt)])

    def _region_bytes(self, region_call):
        """Bytes of a ``T.region(buf[...], access, *extents)`` (the TMA destination)."""
        try:
            load = region_call.args[0]
            extents = [as_int(x) for x in region_call.args[2:]]
            n = 1
            for x in extents:
                n *= x
            size = dtype_bytes(str(load.buffer.dtype))
            return n * size if size else None
        except Exception:
            return None

    def _has_barrier_call(self, stmt) -> bool:
        found = []

        def visit(node):
            if isinstance(node, self.env.tirx.Call) and (
                    _call_name(node).endswith("mbarrier_wait_parity")
                    or _call_name(node).endswith("ptx_arrive_barrier")):
                found.append(node)
            return True

        self.env.tirx.stmt_functor.post_order_visit(stmt, visit)
        return bool(found)


def _direct(env, body):
    """The statements of a loop body (SeqStmts flattened, ifs entered)."""
    tirx = env.tirx
    out = []

    def rec(s):
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                rec(c)
        elif isinstance(s, tirx.IfThenElse):
            out.append(s)
            rec(s.then_case)
            if s.else_case is not None:
                rec(s.else_case)
        else:
            out.append(s)

    rec(body)
    return out


def _pipeline_loop(env, branch):
    """The innermost loop of a branch whose own statements include an mbarrier call."""
    tirx = env.tirx
    best = None
    for lp in env.preorder(branch, tirx.For):
        for s in _direct(env, lp.body):
            if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call) and \
                    ("mbarrier" in _call_name(s.value) or "arrive_barrier" in _call_name(s.value)
                     or _call_name(s.value).endswith("tma_copy")):
                best = lp
                break
    return best


def ws_facts(env, mod, fname: str, iterations: int):
    tirx = env.tirx
    for _, f in mod.functions.items():
        attrs = getattr(f, "attrs", None)
        if not (attrs and "tl_tiled_ws_applied" in attrs and as_int(attrs["tl_tiled_ws_applied"])):
            continue
        scopes = [a for a in env.preorder(f.body, tirx.AttrStmt)
                  if str(a.attr_key) == "kWarpSpecializationScope"]
        if not scopes:
            continue
        scope = scopes[0]
        threads = [as_int(x) for x in scope.node]
        split = scope.body
        while not isinstance(split, tirx.IfThenElse) and hasattr(split, "body"):
            split = split.body
        init = []
        for blk in env.preorder(f.body, tirx.SBlock):
            ann = blk.annotations.get("barrier_init") if blk.annotations else None
            if ann is not None:
                for _, counts in ann.items():
                    init = [as_int(c) for c in counts]
        out = {"threads": {"producer": threads[0], "consumer": threads[1]},
               "barrier_init": init}
        for role, branch in (("producer", split.then_case), ("consumer", split.else_case)):
            loop = _pipeline_loop(env, branch)
            if loop is None:
                out[role] = None
                continue
            per_k = []
            for k in range(min(iterations, as_int(loop.extent) or iterations)):
                ev: list = []
                Walker(env, loop.loop_var, loop.min, k, fname).events(loop.body, ev)
                per_k.append(ev)
            out[role] = per_k
            out[role + "_loop_line"] = env.span(loop)[0]
        return out
    return None


def _capture(tvm, seen: dict):
    """A pass instrument keeping the module after the warp-specialization pass."""

    @tvm.ir.instrument.pass_instrument
    class Capture:
        def run_after_pass(self, mod, info):
            if info.name == P_WS and P_WS not in seen:
                seen[P_WS] = mod

    return Capture()


def lower_file(env, path: str, iterations: int) -> dict:
    res = {"file": os.path.abspath(path), "kernels": {}, "import_error": None}
    try:
        module = import_fixture(path)
    except BaseException as exc:  # noqa: BLE001  (a fixture's SystemExit too)
        res["import_error"] = f"{type(exc).__name__}: {exc}"
        return res
    configs = getattr(module, "PASS_CONFIGS", None) or {}
    tvm = env.tvm
    for name, pf in list(vars(module).items()):
        if not isinstance(pf, env.tirx.PrimFunc):
            continue
        seen: dict = {}
        capture = _capture(tvm, seen)

        fname = env.span(pf)[1]
        tg = make_target(env, "sm_90")
        entry = {"ws": None, "error": None}
        try:
            with tg, tvm.transform.PassContext(opt_level=3, config=dict(configs),
                                               instruments=[capture]):
                env.tilelang.lower(pf, target=tg, enable_device_compile=False)
        except Exception as exc:  # noqa: BLE001
            entry["error"] = str(exc).strip().splitlines()[-1:] or ["?"]
        if P_WS in seen:
            try:
                entry["ws"] = ws_facts(env, seen[P_WS], fname, iterations)
            except Exception:  # noqa: BLE001
                entry["error"] = traceback.format_exc(limit=4)
        sym = str(pf.attrs["global_symbol"]) if pf.attrs and "global_symbol" in pf.attrs else name
        res["kernels"].setdefault(sym, entry)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--iterations", type=int, default=8)
    args = ap.parse_args(argv)
    sys.stdout.flush()
    json_fd = os.dup(1)
    os.dup2(2, 1)
    json_out = os.fdopen(json_fd, "w")
    env = Env()
    results = [lower_file(env, p, args.iterations) for p in args.files]
    json.dump(results, json_out, default=str)
    json_out.write("\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
