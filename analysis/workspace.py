"""Shared buffers the compiler adds that the source does not name.

LowerTileOp (``src/transform/lower_tile_op.cc``) gives each tile operator an
``add_workspace`` callback that declares a ``shared.dyn`` buffer named
``workspace`` in the innermost block; the codegen names the next ones
``workspace_1``, ``workspace_2``, ...  In tilelang 0.1.15 the CUDA reduce
lowering (``src/backend/common/op/reduce.h``) is the caller that matters:
``T.reduce_*`` over a fragment asks for one element per thread of the block
(the consumer threads under warp specialization) when more than 32 threads
hold one output (``AllReduceNeedsWorkspace``), and the AllReduce it emits is
preceded by a ``__syncthreads()``.  Packing (``packing.py``) places the
buffers, sync (``sync_cuda.py``) counts the barrier.

Pure: reads the model and an :class:`~.values.Env`, never raises on bad code.
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from . import targets as targets_mod
from .elaborate import names_in
from .model import Alloc, Const, Kernel, Stmt, expr_text, walk_bodies
from .values import Env, dtype_bits, normalise_dtype

# ``T.reduce_*`` over a fragment: LowerTileOp's reduce lowering
# (``src/backend/common/op/reduce.h``) asks ``add_workspace`` for a
# ``shared.dyn`` buffer named ``workspace`` (``workspace_1``, ... for the
# next ones) of one element per thread of the block (the consumer threads
# under warp specialization) when more than 32 threads reduce one output
# (``AllReduceNeedsWorkspace`` on CUDA).
REDUCE_OPS = frozenset({"reduce_max", "reduce_min", "reduce_absmax", "reduce_sum",
                        "reduce_abssum", "reduce_bitand", "reduce_bitor", "reduce_bitxor"})
_POLICIES = ("Square", "FullRow", "FullCol")


def gemm_warp_partition(policy: str, m: int, n: int, num_warps: int, wgmma: bool
                        ) -> Optional[Tuple[int, int]]:
    """(warps along M, warps along N) of a ``T.gemm`` on CUDA, as
    ``ComputeDefaultWarpPartition`` (mma.sync: 16 rows and 8 columns per warp
    at least) and ``ComputeWgmmaWarpPartition`` (warpgroups of 4 warps along
    M) compute it in ``src/cuda/op/gemm.cc``; None when no split is valid."""
    group = 4 if wgmma else 1
    if num_warps <= 0 or num_warps % group or m % 16 or n % 8:
        return None

    def valid(mw: int, nw: int) -> bool:
        return mw * nw == num_warps and mw % group == 0 and m % (mw * 16) == 0 and \
            n % (nw * 8) == 0

    if policy == "FullRow":
        for mw in range(num_warps, group - 1, -group):
            if num_warps % mw == 0 and valid(mw, num_warps // mw):
                return mw, num_warps // mw
        return None
    if policy == "FullCol":
        for nw in range(num_warps // group, 0, -1):
            if num_warps % nw == 0 and valid(num_warps // nw, nw):
                return num_warps // nw, nw
        return None
    ideal = m / n if n > 0 else 1.0
    best: Optional[Tuple[int, int]] = None
    best_score = float("inf")
    for mw in range(group, num_warps + 1, group):
        if num_warps % mw:
            continue
        nw = num_warps // mw
        if not valid(mw, nw):
            continue
        score = abs((m / (mw * 16)) / (n / (nw * 8)) - ideal)
        if score < best_score:
            best, best_score = (mw, nw), score
    return best


def _policy(st: Stmt) -> Optional[str]:
    p = st.kwarg("policy")
    if p is None and st.call is not None and len(st.call.args) > 5:
        p = st.call.args[5]
    if p is None:
        return "Square"
    name = expr_text(p).split(".")[-1]
    return name if name in _POLICIES else None


def _reduce_needs_workspace(st: Stmt, kernel: Kernel, env: Env, t: "targets_mod.Target",
                            threads: int) -> Optional[bool]:
    """Whether the reduction ``st`` reduces over more than 32 threads (None:
    not known).  Known for a reduction along the last axis of a 2-D fragment
    that a ``T.gemm`` accumulates (the warps the gemm splits N over all hold
    a row; measured: a 2x2 split needs one, FullRow's 4x1 does not) or that a
    copy or a ``T.Parallel`` loop fills."""
    if st.call is None or not st.call.args:
        return None
    allocs = {a.name: a for a in kernel.allocs}
    src = allocs.get(expr_text(st.call.args[0]))
    if src is None or src.scope != "local.fragment" or len(src.shape) != 2:
        return None
    dim_e = st.kwarg("dim")
    if dim_e is None and len(st.call.args) > 2:
        dim_e = st.call.args[2]
    dim = 1 if dim_e is None else env.eval_int(dim_e)
    if dim not in (1, -1):
        return None
    m, n = (env.eval_int(d) for d in src.shape)
    if m is None or n is None:
        return None
    writers = [g for g in walk_bodies(kernel.body)
               if any(w.buffer == src.name for w in g.writes)]
    gemms = [g for g in writers if g.kind == "gemm"]
    if not gemms:
        if any(g.kind not in ("copy", "fill", "parallel", "store") for g in writers):
            return None
        # A fragment laid out by a copy or a T.Parallel loop: each thread holds
        # 128-bit vectors of a row, the threads of a row side by side
        # (measured on sm_80/sm_90: fp32 rows of 256 need a workspace, of 128
        # do not; fp16 rows of 512 do, of 256 do not).
        bits = dtype_bits(normalise_dtype(env.evaluate(src.dtype)))
        if not bits or 128 % bits or n % (128 // bits):
            return None
        per_row = n // (128 // bits)
        if m * per_row < threads:
            return None  # fewer vectors than threads: another layout
        return min(per_row, threads) > 32
    splits = set()
    for g in gemms:
        policy = _policy(g)
        if policy is None:
            return None
        wgmma = t.wgmma and m >= 64 and (threads // 32) % 4 == 0
        split = gemm_warp_partition(policy, m, n, threads // 32, wgmma)
        if split is None:
            return None
        splits.add(split)
    if len(splits) != 1:
        return None
    return next(iter(splits))[1] > 1


_THREAD_CALLS = ("get_thread_binding", "get_thread_bindings", "thread_binding")


def _under_thread_if(kernel: Kernel) -> Set[Tuple[int, int]]:
    """(line, column) of every statement under an ``if`` that tests a thread
    index (a name bound to ``T.get_thread_binding()``, or ``threadIdx``)."""
    names: Set[str] = set()
    binds = list(kernel.locals) + [(st.target, st.value) for st in walk_bodies(kernel.body)
                                   if st.kind == "bind" and st.target]
    for name, value in binds:
        if value is not None and any(c in expr_text(value) for c in _THREAD_CALLS):
            names.add(name)
    out: Set[Tuple[int, int]] = set()

    def rec(stmts: Sequence[Stmt], inside: bool) -> None:
        for st in stmts:
            here = inside
            if st.kind == "if":
                words: Set[str] = set()
                for t in [t for t, _ in st.arms if t is not None] + [st.test]:
                    names_in(t, words)
                here = inside or bool(words & names) or "threadIdx" in words
            if here:
                out.add((st.span.line, st.span.col))
            rec(st.children, here)
            if st.loop is not None and st.loop.body and st.loop.body is not st.children:
                rec(st.loop.body, here)
    rec(kernel.body, False)
    return out


def reduce_workspaces(kernel: Kernel, env: Env, target: str, warp_specialized: bool
                      ) -> List[Tuple[Tuple[int, int], Alloc]]:
    """The ``workspace`` buffers the reduce lowering adds, in the order it
    lowers the reductions (source order), each with the (line, column) of
    the reduction that uses it.  Only those known to be needed."""
    t = targets_mod.get(target)
    if t is None or t.kind != "cuda" or kernel.dialect != "cuda":
        return []
    threads = env.eval_int(kernel.threads)
    if not threads:
        return []
    allocs = {a.name: a for a in kernel.allocs}
    out: List[Tuple[Tuple[int, int], Alloc]] = []
    seen: Set[Tuple[int, int]] = set()
    partitioned = _under_thread_if(kernel)
    for st in walk_bodies(kernel.body):
        if st.op.split(".")[-1] not in REDUCE_OPS:
            continue
        key = (st.span.line, st.span.col)
        if key in seen or key in partitioned:
            # Under ``if tx < 128:`` the reduction (and its gemm) runs on a part of
            # the block, whose thread range tilelint does not model: no claim
            # (measured: example_warp_specialize_flashmla has no workspace).
            continue
        seen.add(key)
        if st.kwarg("batch") is not None or \
                not _reduce_needs_workspace(st, kernel, env, t, threads):
            continue
        dst = allocs.get(expr_text(st.call.args[1])) if st.call is not None and \
            len(st.call.args) > 1 else None
        if dst is None:
            continue
        name = "workspace" if not out else f"workspace_{len(out)}"
        out.append((key, Alloc(name=name, func="add_workspace", scope="shared.dyn",
                               shape=(Const(threads),), dtype=dst.dtype, span=st.span,
                               call_span=st.span)))
    return out


# ``T.cumsum`` / ``T.cummax`` of a fragment: the ``cumsum_fragment`` macro
# (``tilelang/language/scan_op.py``) stages the fragment through
# ``scan_smem = T.alloc_shared(src.shape, src.dtype, "shared.dyn")``: copy in,
# scan, copy out (the codegen names the next ones ``scan_smem_1``, ...).
SCAN_OPS = frozenset({"cumsum", "cummax"})


def scan_buffers(kernel: Kernel, env: Env, target: str) -> List[Tuple[Tuple[int, int], Alloc]]:
    """The ``scan_smem`` buffers of the scans over a fragment, in source
    order, each with the (line, column) of its scan."""
    t = targets_mod.get(target)
    if t is None or t.kind != "cuda" or kernel.dialect != "cuda":
        return []
    allocs = {a.name: a for a in kernel.allocs}
    out: List[Tuple[Tuple[int, int], Alloc]] = []
    seen: Set[Tuple[int, int]] = set()
    for st in walk_bodies(kernel.body):
        if st.op.split(".")[-1] not in SCAN_OPS or st.call is None or not st.call.args:
            continue
        key = (st.span.line, st.span.col)
        src = allocs.get(expr_text(st.call.args[0]))
        if key in seen or src is None or src.scope != "local.fragment":
            continue
        seen.add(key)
        name = "scan_smem" if not out else f"scan_smem_{len(out)}"
        out.append((key, Alloc(name=name, func="cumsum_fragment", scope="shared.dyn",
                               shape=src.shape, dtype=src.dtype, span=st.span,
                               call_span=st.span)))
    return out


def added_shared(kernel: Kernel, env: Env, target: str, warp_specialized: bool
                 ) -> List[Tuple[Tuple[int, int], Alloc]]:
    """Every shared buffer the compiler adds (reduction workspaces, then scan
    staging buffers), each with the (line, column) of the statement using it."""
    return reduce_workspaces(kernel, env, target, warp_specialized) + \
        scan_buffers(kernel, env, target)


_ADDED_NAME = re.compile(r"^(workspace|scan_smem)(?:_\d+)?$")


def added_group(name: str) -> Optional[str]:
    """``workspace`` for ``workspace``, ``workspace_3``, ...; ``scan_smem`` for
    the scan buffers; None for a buffer the source names."""
    m = _ADDED_NAME.match(name)
    return m.group(1) if m else None


def comparable_offsets(offsets: Mapping[str, Optional[int]]) -> Dict[str, object]:
    """Arena offsets in the form two models of one kernel can be compared in:
    a buffer the source names by its name; the buffers the compiler adds as
    the sorted offsets of each kind (``workspace``: [...]), because the codegen
    numbers the emissions of one reduction in no fixed order (see
    ``packing.pipeline_copies``)."""
    out: Dict[str, object] = {}
    groups: Dict[str, List[int]] = {}
    for name, off in offsets.items():
        base = added_group(name)
        if base is None:
            out[name] = off
        else:
            groups.setdefault(base, []).append(-1 if off is None else off)
    for base, offs in groups.items():
        out[f"{base}*"] = sorted(offs)
    return out
