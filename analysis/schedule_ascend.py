"""The Ascend auto-schedule of a pipelined loop: EstimateLatency + AutoSchedule.

tilelang 0.1.15 does not keep the source order of an Ascend loop body.  Before
InsertSync runs, ``src/ascend/transform/estimate_latency.cc`` gives every task
(one tile operation) a latency and an initiation interval (II) from a cost
model, and ``auto_schedule.cc`` hands the loop to a modulo scheduler written
with Z3 (``tilelang/ascend/transform/z3_scheduler.py``).  The scheduler looks
for the smallest II (binary search) at which start times ``k * II + r`` exist
that respect

* data dependencies ``start_j - start_i >= latency_i - II * distance``
  (distance 0 inside an iteration, the buffer's version count or 1 across);
* one task at a time per hardware pipe and per core's GM port (a modulo
  resource exclusion);
* every pipe's tasks inside one II window;
* for buffers whose versions are not annotated, a version variable bounded by
  ``num_stages`` and by the memory left in its scope.

The body is then reordered by start time (ties keep source order) and, for
unannotated buffers, the versions are recomputed from the start times.  The
Z3 model is just *a* solution, so the order cannot be derived by reasoning; it
is reproduced by running the same constraint program through Z3 (the
``z3-solver`` package that tilelang itself depends on, a fresh context per
loop, seed 42).  That gives the compiler's order exactly, but only when every
input is the compiler's: the cost model here covers the operations listed in
:func:`task_cost`, and anything else makes the schedule "unmodelled" (the
caller then falls back to a dependency-level prediction and says so).

Cost model parameters are the 0.1.15 defaults (``estimate_latency.h``),
measured against the compiler's scheduler inputs in tests/test_ascend_parity.py.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    TypeVar,
)

from .model import (
    Access,
    BinOp,
    Call,
    Compare,
    Const,
    Expr,
    Kernel,
    Name,
    Slice,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
    UnaryOp,
    walk_stmts,
)
from .values import Env, normalise_dtype

# Resource bits of the scheduler (ResourcePipe).
PIPE_BITS = {"MTE1": 1, "MTE2": 2, "MTE3": 4, "M": 8, "V": 16, "FIX": 32, "S": 64}
_SCALAR_BIT = 64
# GM ports of the scheduler's resource model (HbmPort).
_HBM_AIC, _HBM_AIV, _HBM_STORE = 1, 2, 4

# Memory limits per scope (auto_schedule.cc), in the scheduler's group order.
_SCOPES = ("shared", "shared.l0a", "shared.l0b", "shared.l0c", "shared.l1")
_UB_BYTES = 248 * 1024
_UB_BYTES_WITH_SIMT = 216 * 1024  # a SimtVF block reserves 32 KiB of UB
_LIMITS = {"shared.l0a": 64 * 1024, "shared.l0b": 64 * 1024,
           "shared.l0c": 256 * 1024, "shared.l1": 512 * 1024}
_MEM_SCOPE = {"UB": "shared", "L0A": "shared.l0a", "L0B": "shared.l0b",
              "L0C": "shared.l0c", "L1": "shared.l1"}

# Cost model constants (AscendLatencyParams defaults of 0.1.15).
GM_TO_L1_BASE, GM_TO_L1_BW, GM_TO_L1_MIN_II = 190, 100, 64
GM_TO_UB_BASE, GM_TO_UB_BW, GM_TO_UB_MIN_II = 90, 100, 13
UB_TO_GM_BASE, UB_TO_GM_BW, UB_TO_GM_MIN_II = 180, 115, 10
FIX_DUAL_BASE, FIX_DUAL_BW, FIX_ISSUE = 55, 256, 2
FIX_GM_BASE, FIX_BW = 200, 128
CUBE_BASE, CUBE_FP32_BASE = 8, 67
CUBE_THROUGHPUT = {"float16": 8192, "bfloat16": 8192, "float32": 512}
VALU_BANDWIDTH = 256
OP_THROUGHPUT = {"+": 51, "-": 51, "*": 51, "/": 13, "//": 13, "%": 13,
                 "max": 51, "min": 51, "cmp": 51, "logic": 51}
_MATH_CALLS = {"exp", "exp2", "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan",
            "sinh", "cosh", "tanh", "sqrt", "rsqrt", "pow", "erf", "sigmoid"}
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int32": 4, "int8": 1,
                "uint8": 1, "int16": 2, "float8_e4m3": 1, "float8_e5m2": 1, "int64": 8}


@dataclass(frozen=True)
class SchedulerInput:
    """The arguments of the compiler's loop scheduler, in its order."""

    num_stages: int
    latencies: Tuple[int, ...]
    iis: Tuple[int, ...]
    resource_flags: Tuple[int, ...]
    data_deps: Tuple[Tuple[int, int, int, int], ...]  # (i, j, distance, latency)
    resource_deps: Tuple[Tuple[int, int], ...]
    buffer_sizes: Tuple[int, ...]
    memory_groups: Tuple[Tuple[int, ...], ...]  # (capacity, member ids...)
    version_buffers: Tuple[str, ...] = ()  # buffer of each version variable


@dataclass(frozen=True)
class AscendSchedule:
    """The scheduled loop body: ``order`` lists source positions in scheduled
    order.  ``exact`` is False when the order is a prediction (``reason``)."""

    order: Tuple[int, ...]
    exact: bool
    reason: str = ""
    ii: Optional[int] = None  # None when the order is known without start times
    start_times: Tuple[int, ...] = ()
    versions: Tuple[Tuple[str, int], ...] = ()  # solver-chosen versions
    input: Optional[SchedulerInput] = None


class Unmodelled(Exception):
    """An input of the scheduler this model cannot reproduce exactly."""


class TaskLike(Protocol):
    """What the scheduler reads of a task (``sync_ascend.Task``, whose module
    imports this one)."""

    pipe: str
    core: str
    stmt: Stmt
    reads: Dict[str, Tuple[str, ...]]
    writes: Dict[str, Tuple[str, ...]]


_T = TypeVar("_T", bound=TaskLike)
# conflict(a, b, cross): the (buffer, kind) hazards of task a then task b.
Conflict = Callable[[_T, _T, bool], Iterable[Tuple[str, str]]]
_Allocs = Dict[str, Tuple[Tuple[int, ...], str]]  # buffer -> (shape, dtype)
_Params = Dict[str, Tuple[int, ...]]  # GM parameter -> shape


# --------------------------------------------------------------------------
# Shapes and bytes
# --------------------------------------------------------------------------


def _dtype_of(expr: Optional[Expr], env: Optional[Env]) -> Optional[str]:
    v = env.evaluate(expr) if env is not None else None
    return normalise_dtype(v) if v is not None else None


class _Shapes(_Allocs):
    """buffer -> (shape, dtype); a buffer of unknown shape is outside the model."""

    def __missing__(self, name: str) -> Tuple[Tuple[int, ...], str]:
        raise Unmodelled(f"the shape or dtype of {name} is not known")


def _alloc_info(kernel: Kernel, env: Env) -> _Allocs:
    out = _Shapes()
    for a in kernel.allocs:
        dims = [env.eval_int(d) for d in a.shape]
        shape = tuple(d for d in dims if d is not None)
        dt = _dtype_of(a.dtype, env)
        if len(shape) != len(dims) or dt is None:
            continue
        out[a.name] = (shape, dt)
    return out


def _param_shapes(kernel: Kernel, env: Env) -> _Params:
    out: _Params = {}
    for p in kernel.params:
        ann = p.annotation
        if isinstance(ann, Call) and ann.args and isinstance(ann.args[0], TupleExpr):
            values = [env.eval_int(d) for d in ann.args[0].items]
            dims = tuple(d for d in values if d is not None)
            if len(dims) == len(values):
                out[p.name] = dims
    return out


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    if dtype not in _DTYPE_BYTES:
        raise Unmodelled(f"dtype {dtype}")
    return math.prod(shape) * _DTYPE_BYTES[dtype]


def _whole(acc: Access, shape: Sequence[int], env: Env) -> bool:
    """True when the access covers the whole on-chip buffer."""
    if acc.indices is None:
        return True
    if len(acc.indices) != len(shape):
        return False
    for idx, n in zip(acc.indices, shape, strict=True):
        if not isinstance(idx, Slice) or idx.step is not None:
            return False
        lo = 0 if idx.lower is None else env.eval_int(idx.lower)
        hi = n if idx.upper is None else env.eval_int(idx.upper)
        if lo != 0 or hi != n:
            return False
    return True


def _gm_extents(acc: Access, gm_shape: Tuple[int, ...], onchip: Tuple[int, ...],
                env: Env) -> Optional[List[Tuple[Optional[int], Optional[int]]]]:
    """(extent, start) per dim of a GM region; extent None = the whole dim,
    -1 = partial of unknown size; None when the region cannot be read."""
    extents: List[Optional[int]]
    starts: List[Optional[int]]
    idx = acc.indices
    if idx is None or len(idx) != len(gm_shape):
        return None
    if all(not isinstance(i, Slice) for i in idx):
        # ``C[r, c]``: a start corner, the extents are the on-chip shape.
        if len(onchip) != len(gm_shape):
            return None
        extents, starts = list(onchip), [env.eval_int(i) for i in idx]
    else:
        extents, starts = [], []
        for i in idx:
            if not isinstance(i, Slice):
                extents.append(1)
                starts.append(None)
                continue
            if i.step is not None:
                return None
            if i.lower is None and i.upper is None:
                extents.append(None)  # full
                starts.append(0)
                continue
            extents.append(_extent(i, env))
            starts.append(0 if i.lower is None else env.eval_int(i.lower))
    return list(zip(extents, starts, strict=False))


def _full(dim: Tuple[Optional[int], Optional[int]], size: int) -> bool:
    ext, start = dim
    return ext is None or (ext == size and start == 0)


def _gm_contiguous(acc: Access, gm_shape: Optional[Tuple[int, ...]],
                   onchip: Tuple[int, ...], env: Env) -> bool:
    """Whether a GM region is one contiguous run (the "M" copy geometry)."""
    if gm_shape is None or acc.indices is None:
        return acc.indices is None
    dims = _gm_extents(acc, gm_shape, onchip, env)
    if dims is None:
        return False
    seen_run = False
    for d, dim in enumerate(dims):
        full = _full(dim, gm_shape[d])
        if seen_run and not full:
            return False
        if dim[0] is None or dim[0] != 1:  # full, partial, or of unknown size
            seen_run = True
    return True


def _row_elements(acc: Access, gm_shape: Optional[Tuple[int, ...]],
                  onchip: Tuple[int, ...], env: Env) -> int:
    """Elements in one contiguous GM row of a strided region: the innermost
    extents up to and including the first dim (from the right) that is not
    whole."""
    if gm_shape is None:
        raise Unmodelled("GM region")
    dims = _gm_extents(acc, gm_shape, onchip, env)
    if dims is None:
        raise Unmodelled("GM region")
    run = 1
    for d in range(len(dims) - 1, -1, -1):
        ext = gm_shape[d] if dims[d][0] is None else dims[d][0]
        if ext is None or ext < 1:
            raise Unmodelled("GM row width")
        run *= ext
        if not _full(dims[d], gm_shape[d]):
            return run
    return run


def _transaction_bw(width: int, transaction: int, peak: int) -> int:
    n = _ceil(width, transaction)
    return max(width * peak // (transaction * n), 1)


def _n_bandwidth(to_ub: bool, width: int) -> int:
    """Bandwidth of an N-strided (row by row) AIV copy with rows of ``width``
    bytes (BandwidthForCopy)."""
    if to_ub:
        if width < 128:
            return 50
        if width >= 256:
            return min(GM_TO_UB_BW, 100)
        return min(GM_TO_UB_BW, _transaction_bw(width, 128, 102))
    if width < 128:
        return 40
    if width >= 512:
        return UB_TO_GM_BW
    if width >= 256:
        return min(UB_TO_GM_BW, 110)
    return min(UB_TO_GM_BW, _transaction_bw(width, 128, 86))


def _extent(s: Slice, env: Env) -> int:
    """The extent of a slice; -1 when it is not known (never "whole")."""
    lo = 0 if s.lower is None else env.eval_int(s.lower)
    hi = env.eval_int(s.upper) if s.upper is not None else None
    if lo is not None and hi is not None:
        return hi - lo
    # ``base:base + n``: the extent is n even when base is symbolic.
    if isinstance(s.upper, BinOp) and s.upper.op == "+" and s.lower is not None \
            and s.upper.left == s.lower:
        n = env.eval_int(s.upper.right)
        return n if n is not None else -1
    return -1


# --------------------------------------------------------------------------
# Task cost (EstimateLatency)
# --------------------------------------------------------------------------


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def task_cost(task: TaskLike, kernel: Kernel, env: Env, memory: Dict[str, str],
              allocs: _Allocs, params: _Params) -> Tuple[int, int]:
    """(latency, II) of one task as the 0.1.15 cost model computes it.

    Modelled: GM->L1 copies; GM<->UB copies of whole UB buffers, contiguous
    in GM or (not dual) strided with rows of known width; the dual L0C->UB
    copy; GEMMs on L1 operands (fp16/bf16/fp32); T.Parallel loops in a
    T.SimtVF block over whole UB buffers with arithmetic bodies; and T.SimdVF
    blocks of register intrinsics (:func:`simd_block_cost`).
    Raises :class:`Unmodelled` otherwise."""
    st: Stmt = task.stmt
    if task.pipe == "V" and st.kind in ("vf", "parallel"):
        given = vf_latency(st, env)
        if given:
            # ``latency=`` of the VF block: the task's latency and II, with no
            # memory term (measured: SimdVF(latency=40) -> 40/40, SimtVF 60 -> 60/60).
            return given, given
    if st.kind == "vf" and any(c.kind == "parallel" for c in st.children):
        return _parallel_block_cost(st, memory, allocs, env)
    if st.kind == "vf":
        return simd_block_cost(st, kernel, env, memory, allocs)
    if st.kind == "copy":
        return _copy_cost(st, memory, allocs, params, env)
    if st.kind == "gemm":
        return _gemm_cost(st, memory, allocs, env)
    if st.kind == "parallel" and task.pipe == "V":
        return _vf_cost(st, memory, allocs, env)
    raise Unmodelled(f"no cost model for {st.op}")


# Where ``latency`` sits among the positional arguments of a VF scope.
_VF_LATENCY_ARG = {"T.SimdVF": 0, "T.SimtVF": 1}


def vf_scope_call(st: Stmt, func: str) -> Optional[Tuple[Span, Call]]:
    """The innermost ``with func(...)`` scope around ``st`` as written (its
    span tells two blocks apart), or None."""
    for span, call in reversed(st.scope_calls):
        if isinstance(call, Call) and call.func == func:
            return span, call
    return None


def vf_latency(st: Stmt, env: Env) -> Optional[int]:
    """``latency=`` of the innermost VF block around ``st`` when it is given
    and positive (0, the default, leaves the cost to the compiler's model);
    raises :class:`Unmodelled` when it is given but its value is not known."""
    for _, call in reversed(st.scope_calls):
        if not isinstance(call, Call) or call.func not in _VF_LATENCY_ARG:
            continue
        pos = _VF_LATENCY_ARG[call.func]
        value = dict(call.kwargs).get("latency")
        if value is None and len(call.args) > pos:
            value = call.args[pos]
        if value is None:
            return None
        n = env.eval_int(value)
        if n is None:
            raise Unmodelled(f"the value of {call.func}(latency=…) is not known")
        return n if n > 0 else None
    return None


def _copy_cost(st: Stmt, memory: Dict[str, str], allocs: _Allocs, params: _Params,
               env: Env) -> Tuple[int, int]:
    if not st.reads or not st.writes:
        raise Unmodelled("copy without regions")
    src, dst = st.reads[0], st.writes[0]
    ms, md = memory.get(src.buffer, "GM"), memory.get(dst.buffer, "GM")
    dual = st.op.endswith("dual_copy")
    if ms == "GM" and md == "L1":
        shape, dt = allocs[dst.buffer]
        if not _whole(dst, shape, env):
            raise Unmodelled("partial L1 copy")
        b = _nbytes(shape, dt)
        return GM_TO_L1_BASE + _ceil(b, GM_TO_L1_BW), max(_ceil(b, GM_TO_L1_BW), GM_TO_L1_MIN_II)
    if (ms, md) in (("GM", "UB"), ("UB", "GM")):
        ub, gm = (dst, src) if md == "UB" else (src, dst)
        shape, dt = allocs[ub.buffer]
        if not _whole(ub, shape, env):
            raise Unmodelled("partial UB copy")
        b = 2 * _nbytes(shape, dt)  # the payload of both vector cores
        if not _gm_contiguous(gm, params.get(gm.buffer), shape, env):
            # N geometry: rows of ``width`` bytes, each a run of transactions.
            if dual:
                raise Unmodelled("strided GM region of a dual copy")
            width = _row_elements(gm, params.get(gm.buffer), shape, env) * _DTYPE_BYTES[dt]
            bw = _n_bandwidth(md == "UB", width)
            if md == "UB":
                return 75 + _ceil(b, bw), max(GM_TO_UB_MIN_II, _ceil(b, bw))
            base = 440 if width < 128 else UB_TO_GM_BASE
            return base + _ceil(b, bw), max(UB_TO_GM_MIN_II, _ceil(b, bw))
        if md == "UB":
            return GM_TO_UB_BASE + _ceil(b, GM_TO_UB_BW), max(GM_TO_UB_MIN_II, _ceil(b, GM_TO_UB_BW))
        return UB_TO_GM_BASE + _ceil(b, UB_TO_GM_BW), max(UB_TO_GM_MIN_II, _ceil(b, UB_TO_GM_BW))
    if ms == "L0C" and md == "UB" and dual:
        shape, dt = allocs[dst.buffer]
        if not _whole(dst, shape, env) or shape[-1] * _DTYPE_BYTES.get(dt, 0) < 128:
            raise Unmodelled("narrow dual L0C copy")
        b = 2 * _nbytes(shape, dt)
        return FIX_DUAL_BASE + _ceil(b, FIX_DUAL_BW), FIX_ISSUE + _ceil(b, FIX_DUAL_BW)
    if ms == "L0C" and md == "GM" and not dual:
        # FixPipe to GM: base 200, 128 B/cycle, 2 cycles of issue per descriptor.
        shape, dt = allocs[src.buffer]
        if not _whole(src, shape, env):
            raise Unmodelled("partial L0C copy")
        b = _nbytes(shape, dt)
        return FIX_GM_BASE + _ceil(b, FIX_BW), FIX_ISSUE + _ceil(b, FIX_BW)
    raise Unmodelled(f"copy {ms}->{md}")


def _gemm_cost(st: Stmt, memory: Dict[str, str], allocs: _Allocs, env: Env) -> Tuple[int, int]:
    if len(st.reads) < 2 or not st.writes:
        raise Unmodelled("gemm operands")
    a, c = st.reads[0].buffer, st.writes[0].buffer
    if memory.get(a) != "L1" or a not in allocs or c not in allocs:
        raise Unmodelled("gemm not on L1 operands")
    (a_shape, dt), (c_shape, _) = allocs[a], allocs[c]
    if len(a_shape) != 2 or len(c_shape) != 2 or dt not in CUBE_THROUGHPUT:
        raise Unmodelled("gemm shape/dtype")
    trans_a = st.kwarg_is_true("transpose_A")
    m, n = c_shape
    k = a_shape[0] if trans_a else a_shape[1]
    k_group = 1 if dt == "float32" else 256 // (8 * _DTYPE_BYTES[dt])
    ops = 2 * _align(m, 16) * _align(n, 16) * _align(k, k_group)
    cycles = _ceil(ops, CUBE_THROUGHPUT[dt])
    base = CUBE_FP32_BASE if dt == "float32" else CUBE_BASE
    return base + cycles, max(1, cycles)


def _align(x: int, g: int) -> int:
    return _ceil(x, g) * g


def _vf_cost(st: Stmt, memory: Dict[str, str], allocs: _Allocs, env: Env) -> Tuple[int, int]:
    """A T.Parallel loop that is the whole of its VF block."""
    cycles, read_bufs = _parallel_cycles(st, memory, allocs, env)
    return _valu_cost(cycles, read_bufs, allocs)


def _parallel_block_cost(st: Stmt, memory: Dict[str, str], allocs: _Allocs, env: Env
                         ) -> Tuple[int, int]:
    """A VF block of several T.Parallel loops (one "vf" task): the counter adds
    the loops' operations and the block reads each buffer once (measured: two
    loops of 11 cycles in one SimdVF or SimtVF block cost 22)."""
    cycles = 0
    read_bufs: List[str] = []
    for child in st.children:
        if child.kind != "parallel":
            raise Unmodelled(f"{child.op} beside a T.Parallel in a VF block")
        n, bufs = _parallel_cycles(child, memory, allocs, env)
        cycles += n
        read_bufs.extend(b for b in bufs if b not in read_bufs)
    return _valu_cost(cycles, read_bufs, allocs)


def _valu_cost(cycles: int, read_bufs: Sequence[str], allocs: _Allocs) -> Tuple[int, int]:
    bw = _ceil(sum(_nbytes(*allocs[b]) for b in read_bufs), VALU_BANDWIDTH)
    lat = max(cycles, bw)
    return lat, max(1, lat)


def _parallel_cycles(st: Stmt, memory: Dict[str, str], allocs: _Allocs, env: Env
                     ) -> Tuple[int, List[str]]:
    """Operations of a T.Parallel loop over whole UB buffers in a VF block, and
    the buffers it reads."""
    simt = vf_scope_call(st, "T.SimtVF") is not None
    if not simt and vf_scope_call(st, "T.SimdVF") is None:
        raise Unmodelled("a T.Parallel outside a VF block")
    loop = st.loop
    assert loop is not None  # a "parallel" statement carries its loop
    vars_ = [v.strip() for v in loop.var.split(",")]
    stops = loop.stop.items if isinstance(loop.stop, TupleExpr) else (loop.stop,)
    known = [env.eval_int(s) for s in stops]
    if None in known or len(known) != len(vars_) or loop.start is not None and \
            env.eval_int(loop.start) not in (0, None):
        raise Unmodelled("VF loop extents")
    extents = [e for e in known if e is not None]  # all of them
    total = math.prod(extents)
    # In a SimtVF block, ParallelLoopFuser fuses a nest of T.Parallel loops
    # into one loop over the product only when every extent is a power of
    # two; the accesses then index with ``f % (prod) // (prod)`` arithmetic,
    # which the counter sees.  A SimdVF block keeps the nest (measured: 16 x 64
    # in SimdVF, z = x * 2 + x: 21 + 21 cycles, no index arithmetic).
    fused = simt and len(extents) > 1 and all(e > 0 and e & (e - 1) == 0 for e in extents)
    if fused and len(extents) > 2:
        raise Unmodelled("index arithmetic of a fused 3-d VF loop")
    cycles = 0
    read_bufs: List[str] = []
    for s in st.children:
        if s.kind != "store" or s.value is None or len(s.writes) != 1:
            raise Unmodelled("VF body")
        for acc in list(s.writes) + list(s.reads):
            if acc.buffer not in allocs or memory.get(acc.buffer) != "UB":
                raise Unmodelled("VF operand")
            shape, _ = allocs[acc.buffer]
            if list(shape) != extents or acc.indices is None or \
                    [i.id if isinstance(i, Name) else None for i in acc.indices] != vars_:
                raise Unmodelled("VF indexing")
            # The fused 2-d loop indexes with ``f % E // n`` and ``f % n``:
            # three div/mod operations per access.
            if fused:
                idx_ops = 2 * (len(vars_) - 1) + 1
                cycles += idx_ops * max(1, _ceil(total, OP_THROUGHPUT["%"]))
        for acc in s.reads:
            if acc.buffer not in read_bufs:
                read_bufs.append(acc.buffer)
        cycles += _expr_cycles(s.value, set(vars_), total)
    return cycles, read_bufs


def _mentions_any(e: Expr, names: Set[str]) -> bool:
    if isinstance(e, Name):
        return e.id in names
    if isinstance(e, (Const,)):
        return False
    if isinstance(e, BinOp) or isinstance(e, Compare):
        return _mentions_any(e.left, names) or _mentions_any(e.right, names)
    if isinstance(e, UnaryOp):
        return _mentions_any(e.operand, names)
    if isinstance(e, Call):
        return any(_mentions_any(a, names) for a in e.args)
    if isinstance(e, Subscript):
        return _mentions_any(e.index, names)
    if isinstance(e, TupleExpr):
        return any(_mentions_any(a, names) for a in e.items)
    return False


def _expr_cycles(e: Expr, loop_vars: Set[str], total: int) -> int:
    """VALU cycles of one stored expression (OperationCounter): each
    operation that depends on the loop costs ceil(total / throughput)."""
    def cost(kind: str, node: Expr) -> int:
        if not _mentions_any(node, loop_vars):
            raise Unmodelled("loop-invariant VF operation")
        return max(1, _ceil(total, OP_THROUGHPUT[kind]))

    if isinstance(e, (Const, Name)):
        return 0
    if isinstance(e, Subscript):
        return 0  # plain loads; index arithmetic is counted by the caller
    if isinstance(e, BinOp):
        if e.op not in OP_THROUGHPUT:
            raise Unmodelled(f"VF operator {e.op}")
        return cost(e.op, e) + _expr_cycles(e.left, loop_vars, total) + \
            _expr_cycles(e.right, loop_vars, total)
    if isinstance(e, Compare):
        kind = "logic" if e.op in ("and", "or") else "cmp"
        return cost(kind, e) + _expr_cycles(e.left, loop_vars, total) + \
            _expr_cycles(e.right, loop_vars, total)
    if isinstance(e, UnaryOp) and e.op == "-" and isinstance(e.operand, Const):
        return 0
    if isinstance(e, Call):
        name = e.func.split(".")[-1]
        if name in ("max", "min"):
            kind = name
        elif name in _MATH_CALLS:
            # The counter looks these up by bare name but TIR calls them
            # ``tir.exp`` etc., so they miss the special-function rate and take
            # the one-cycle fallback (measured: exp over 2048 elements adds 1).
            return 1 + sum(_expr_cycles(a, loop_vars, total) for a in e.args)
        elif name in ("float32", "float16", "bfloat16", "Cast", "cast") and len(e.args) <= 1:
            return sum(_expr_cycles(a, loop_vars, total) for a in e.args if not isinstance(a, Const))
        else:
            raise Unmodelled(f"VF call {e.func}")
        return cost(kind, e) + sum(_expr_cycles(a, loop_vars, total) for a in e.args)
    raise Unmodelled("VF expression")


# --------------------------------------------------------------------------
# A T.SimdVF block of register intrinsics (OperationCounter)
# --------------------------------------------------------------------------
#
# Without ``latency=`` the compiler costs the block on its lowered TIR: the
# latency (and II) is max(operations, UB bytes the block reads / 256).
# Operations: every call node once (an intrinsic, the ``access_ptr`` each
# buffer operand becomes, the ``pset`` of a default mask), and every integer
# + or * of an index at max(1, ceil(f / 51)), f the product of the trip
# counts of the block's loops down to the deepest one whose variable the
# operation mentions.  ``for c in range(a, b, s)`` (s != 1) is lowered to
# ``for _tmp in range(ceil((b - a) / s))`` with c = a + _tmp * s, and Simplify
# writes an index (or update_mask's value) as its linear terms (coefficient 1:
# no product), the constant last, or as a constant minus products.  Bytes: per
# buffer, the hull of the elements its loads read (a load reads one register
# of 256 bytes, a broadcast one element).  Measured on trial blocks, the
# parity fixtures vec_simd_est_*, mixed_simd_relu and mixed_simd_epilogue, and
# random edits of them (docs/compiler-notes.md).

# Intrinsics whose lowering is one call: argument names in order, the
# argument a default mask takes its element width from (None: the mask is
# required), and the result ("bool" for a predicate, "src" for the register
# type of the first argument).
_SIMD_BINARY = ("src0", "src1", "mask", "mode")
_SIMD_UNARY = ("src", "mask", "mode")
_SIMD_SCALAR = ("src", "scalar", "mask", "mode")
_SIMD_OPS: Dict[str, Tuple[Tuple[str, ...], Optional[str], str]] = {
    **{n: (_SIMD_BINARY, "src0", "src") for n in ("vadd", "vsub", "vmul", "vdiv", "vmax",
                                                  "vmin", "vand", "vor", "vxor")},
    **{n: (_SIMD_UNARY, "src", "src") for n in ("vexp", "vln", "vsqrt", "vabs", "vneg",
                                                "vrelu", "vnot", "vcadd", "vcmax", "vcmin",
                                                "vcpadd")},
    **{n: (_SIMD_SCALAR, "src", "src") for n in ("vmuls", "vadds", "vmaxs", "vmins")},
    "vcmp": (("src0", "src1", "mask", "op"), "src0", "bool"),
    "vcmps": (("src", "scalar", "mask", "op"), "src", "bool"),
    "vsel": (("src0", "src1", "mask"), None, "src"),
    "vdupv": (("src", "mask", "pos", "mode"), "src", "src"),
    "pset": (("elem_width", "dist"), None, "bool"),
}
_SIMD_LOAD = ("addr", "dist")
_SIMD_STORE = ("addr", "src", "mask", "dist", "extent")
_SIMD_MODULES = ("S", "T.simd", "simd")
_REGISTER_BYTES = 256
_Linear = Tuple[Tuple[Tuple[str, int], ...], int]  # ((IR var, coefficient)...), constant


def _simd_name(func: str) -> Optional[str]:
    module, _, name = func.rpartition(".")
    return name if module in _SIMD_MODULES else None


def _call_args(call: Call, names: Sequence[str]) -> Dict[str, Expr]:
    if len(call.args) > len(names):
        raise Unmodelled(f"{call.func} with {len(call.args)} arguments")
    out = dict(zip(names, call.args, strict=False))
    for key, value in call.kwargs:
        if key not in names or key in out:
            raise Unmodelled(f"{call.func}({key}=…)")
        out[key] = value
    return out


@dataclass
class _SimdLoop:
    trips: int
    # The Python loop variable as the lowered index sees it, and the IR
    # variable's range (first, last).
    form: _Linear
    first: int
    last: int


class _SimdCounter:
    """OperationCounter and the read hull of one SimdVF block, on the model's
    statements; raises :class:`Unmodelled` on anything it cannot count."""

    def __init__(self, memory: Dict[str, str], allocs: _Allocs, env: Env) -> None:
        self.memory, self.allocs, self.env = memory, allocs, env
        self.ops = 0
        self.loops: List[Tuple[str, _SimdLoop]] = []  # Python name -> loop, outermost first
        self.registers: Dict[str, str] = {}  # bound name -> element dtype or "bool"
        self.frames: List[int] = [0]  # the block, then each open loop body
        self.next_frame = 1
        self.default_masks: Dict[int, int] = {}  # mask width -> frame of its pset
        self.hull: Dict[str, List[Tuple[int, int]]] = {}  # buffer -> per-dim (lo, hi) read

    # -- statements -------------------------------------------------------

    def block(self, stmts: Sequence[Stmt]) -> None:
        for s in stmts:
            if s.kind == "bind" and s.target is not None and s.target.isidentifier() \
                    and isinstance(s.value, Call):
                self.registers[s.target] = self.call(s.value)
            elif s.kind == "call" and s.call is not None:
                self.call(s.call)
            elif s.kind == "serial" and s.loop is not None:
                self.loop(s)
            elif s.loop is not None:
                raise Unmodelled("a loop other than range, T.serial or T.unroll in a "
                                 "T.SimdVF block")
            elif s.kind == "bind":
                raise Unmodelled("a binding in a T.SimdVF block that is not an intrinsic's "
                                 "result")
            else:
                raise Unmodelled(f"{s.op} in a T.SimdVF block")

    def loop(self, s: Stmt) -> None:
        lp = s.loop
        assert lp is not None
        if lp.kind not in ("range", "serial", "unroll") or "," in lp.var:
            raise Unmodelled(f"a {lp.kind} loop in a T.SimdVF block")
        start = self.env.eval_int(lp.start) if lp.start is not None else 0
        stop = self.env.eval_int(lp.stop)
        step = self.env.eval_int(lp.step) if lp.step is not None else 1
        if start is None or stop is None or step is None or step <= 0:
            raise Unmodelled("the bounds of a loop in a T.SimdVF block")
        trips = _ceil(stop - start, step)
        if trips <= 1:  # Simplify may fold a loop of one trip away
            raise Unmodelled("a loop of fewer than two trips in a T.SimdVF block")
        ir_var = f"{lp.var}#{len(self.loops)}"
        if step == 1:  # the loop variable itself, over [start, stop)
            info = _SimdLoop(trips, (((ir_var, 1),), 0), start, stop - 1)
        else:  # start + _tmp * step, _tmp over [0, trips)
            info = _SimdLoop(trips, (((ir_var, step),), start), 0, trips - 1)
        self.loops.append((lp.var, info))
        self.frames.append(self.next_frame)
        self.next_frame += 1
        self.block(s.children)
        self.frames.pop()
        self.loops.pop()

    # -- calls ------------------------------------------------------------

    def call(self, call: Call) -> str:
        """Count ``call`` (an intrinsic) and its arguments; its result type."""
        name = _simd_name(call.func)
        if name == "vld":
            return self.load(call)
        if name == "vsts":
            args = _call_args(call, _SIMD_STORE)
            self.ops += 1
            self.address(args.get("addr"), None)
            src = self.operand(args.get("src"))
            self.mask(args.get("mask"), src)
            for n in ("dist", "extent"):
                self.operand(args.get(n))
            return "void"
        if name == "vdup":  # vdup(scalar, "float32", mask, mode): a register of that type
            args = _call_args(call, ("src", "dtype_str", "mask", "mode"))
            self.ops += 1
            dtype = normalise_dtype(self.env.evaluate(args.get("dtype_str")))
            if dtype not in _DTYPE_BYTES:
                raise Unmodelled("the dtype of a vdup")
            self.operand(args.get("src"))
            self.operand(args.get("mode"))
            self.mask(args.get("mask"), dtype)
            return dtype
        if name == "update_mask":  # lanes [0, value): the value's arithmetic counts
            args = _call_args(call, ("value", "width"))
            if "value" not in args:
                raise Unmodelled("update_mask without its value")
            self.ops += 1 + self.index_ops(self.linear(args["value"]))
            self.operand(args.get("width"))
            return "bool"
        if name not in _SIMD_OPS:
            raise Unmodelled(f"{call.func} in a T.SimdVF block")
        names, mask_from, result = _SIMD_OPS[name]
        args = _call_args(call, names)
        self.ops += 1
        types = {n: self.operand(args[n]) for n in names if n in args and n != "mask"}
        if "mask" in names:
            if mask_from is None and "mask" not in args:
                raise Unmodelled(f"{call.func} without its mask")
            self.mask(args.get("mask"), types.get(mask_from or "", ""))
        if result == "bool":
            return "bool"
        dtype = types.get(names[0], "")
        if name == "vcadd":  # 16-bit integers add up into 32-bit lanes
            return {"int16": "int32", "uint16": "uint32"}.get(dtype, dtype)
        return dtype

    def load(self, call: Call) -> str:
        args = _call_args(call, _SIMD_LOAD)
        dist = args.get("dist", Const("NORM"))
        if not isinstance(dist, Const) or not isinstance(dist.value, str) or \
                dist.value.startswith(("E2B_", "US_", "UNPK", "DS_", "BLK")):
            # Those distributions read another number of elements than a register.
            raise Unmodelled("a vld distribution other than NORM or BRC")
        self.ops += 1
        if dist.value.startswith("BRC_"):
            # A broadcast reads one element of the width its suffix names;
            # only the buffer's own width keeps the register's element type.
            bits = {"BRC_B8": 8, "BRC_B16": 16, "BRC_B32": 32}.get(dist.value)
            return self.address(args.get("addr"), "r", bits)
        return self.address(args.get("addr"), "r")

    def operand(self, e: Optional[Expr]) -> str:
        """Count a non-address argument; the element type of a register."""
        if isinstance(e, Call):
            if _simd_name(e.func) is not None:
                return self.call(e)
            dt = normalise_dtype(e.func[2:]) if e.func.startswith("T.") else None
            if dt in _DTYPE_BYTES and len(e.args) == 1 and not e.kwargs and \
                    isinstance(self.env.evaluate(e.args[0]), (int, float)):
                return ""  # T.float32(2.0): a constant
            raise Unmodelled(f"{e.func} in a T.SimdVF block")
        if isinstance(e, Name) and e.id in self.registers:
            return self.registers[e.id]
        if e is not None and _mentions_any(e, self.loop_vars()):
            raise Unmodelled("a loop variable in an intrinsic's operand")
        if e is None or isinstance(self.env.evaluate(e), (int, float, str)):
            return ""  # a constant (an immediate in the lowered call)
        raise Unmodelled("an operand of a T.SimdVF intrinsic")

    def mask(self, given: Optional[Expr], dtype: str) -> None:
        """A mask argument; without one the intrinsic binds ``pset`` of its
        element width, once per scope that is still open."""
        if given is not None:
            if self.operand(given) != "bool":
                raise Unmodelled("a mask that is not a predicate register")
            return
        bits = _DTYPE_BYTES.get(dtype, 0) * 8
        if not bits:
            raise Unmodelled("the element width of a default mask")
        if self.default_masks.get(bits) not in self.frames:
            self.default_masks[bits] = self.frames[-1]
            self.ops += 1

    # -- addresses and indices ----------------------------------------------

    def address(self, e: Optional[Expr], mode: Optional[str],
                broadcast_bits: Optional[int] = None) -> str:
        """A buffer operand: its ``access_ptr`` call and index arithmetic;
        a read ("r") adds the register's elements (one element for a
        broadcast of ``broadcast_bits``) to the buffer's hull."""
        if not isinstance(e, Subscript) or not isinstance(e.value, Name):
            raise Unmodelled("an intrinsic address that is not buffer[index]")
        buf = e.value.id
        if self.memory.get(buf) != "UB":
            raise Unmodelled(f"an intrinsic address in {buf} (not UB)")
        shape, dtype = self.allocs[buf]
        idx = e.index.items if isinstance(e.index, TupleExpr) else (e.index,)
        if len(idx) != len(shape) or min(shape, default=0) <= 0:
            raise Unmodelled(f"the index of {buf}")
        if dtype not in _DTYPE_BYTES:
            raise Unmodelled(f"dtype {dtype}")
        elements = _REGISTER_BYTES // _DTYPE_BYTES[dtype]
        if broadcast_bits is not None:
            if broadcast_bits != _DTYPE_BYTES[dtype] * 8:
                raise Unmodelled(f"a broadcast load of another width than {buf}'s")
            elements = 1
        forms = [self.linear(i) for i in idx]
        self.ops += 1  # access_ptr
        for f in forms:
            self.ops += self.index_ops(f)
        box = self.footprint(shape, elements, forms)
        if any(lo < 0 or hi >= n for (lo, hi), n in
               zip(box + [self.bounds(f) for f in forms], list(shape) * 2, strict=True)):
            # The compiler's regions of an access outside the buffer are not
            # the hull (measured: a store past the end loses its hand-off).
            raise Unmodelled(f"a register access outside {buf}")
        if mode == "r":
            old = self.hull.get(buf)
            self.hull[buf] = box if old is None else \
                [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, box, strict=True)]
        return dtype

    def linear(self, e: Expr) -> _Linear:
        """An index as linear terms over the IR loop variables."""
        if isinstance(e, Name):
            for var, info in reversed(self.loops):
                if var == e.id:
                    return info.form
        if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
            (lt, lc), (rt, rc) = self.linear(e.left), self.linear(e.right)
            if e.op == "*":
                if lt and rt:
                    raise Unmodelled("a product of loop variables in an index")
                k, (terms, c) = (lc, (rt, rc)) if not lt else (rc, (lt, lc))
                return tuple((v, a * k) for v, a in terms), c * k
            sign = 1 if e.op == "+" else -1
            coef = dict(lt)
            for v, a in rt:
                coef[v] = coef.get(v, 0) + sign * a
            return tuple(coef.items()), lc + sign * rc
        n = None if _mentions_any(e, self.loop_vars()) else self.env.eval_int(e)
        if n is None:
            raise Unmodelled("an index that is not linear in the block's loops")
        return (), n

    def loop_vars(self) -> Set[str]:
        return {v for v, _ in self.loops}

    def op_cost(self, variables: Iterable[str]) -> int:
        depth = max((d for d, (_, info) in enumerate(self.loops)
                     if info.form[0][0][0] in variables), default=-1)
        factor = math.prod(info.trips for _, info in self.loops[:depth + 1])
        return max(1, _ceil(factor, OP_THROUGHPUT["*"]))

    def index_ops(self, form: _Linear) -> int:
        """Cycles of an integer expression (an index, a scalar operand) as
        Simplify writes it: ``a*x + b*y + c`` when every coefficient is
        positive, ``c - a*x - b*y`` when every one is negative and c > 0 (left
        to right; no product for a coefficient of magnitude 1, no sum for a
        constant 0; measured: ``500 - _tmp * 64 - r * 256``)."""
        terms = [(v, a) for v, a in form[0] if a != 0]
        const = form[1]
        if not terms:
            return 0
        negative = all(a < 0 for _, a in terms)
        if negative and const <= 0 or not negative and (any(a < 0 for _, a in terms)
                                                        or const < 0):
            raise Unmodelled("a subtraction in an index")
        cycles = sum(self.op_cost([v]) for v, a in terms if abs(a) != 1)
        every = self.op_cost([v for v, _ in terms])
        if negative:
            # c - t1 - t2: the first difference holds t1 only, and which term
            # comes first is Simplify's choice.
            firsts = {self.op_cost([v]) for v, _ in terms}
            if len(terms) > 1 and (len(firsts) > 1 or len(terms) > 2 and every > 1):
                raise Unmodelled("a difference of loop variables whose order matters")
            return cycles + (len(terms) - 1) * every + firsts.pop()
        adds = len(terms) - 1 + (1 if const else 0)
        if adds and len(terms) > 2 and every > 1:
            # The partial sums' costs depend on the order of the terms.
            raise Unmodelled("an index of three loop variables")
        return cycles + adds * every

    def footprint(self, shape: Sequence[int], elements: int, forms: Sequence[_Linear]
                  ) -> List[Tuple[int, int]]:
        """The rectangle an access of ``elements`` from ``forms`` covers over
        the block's loops (the run of elements spread over the dims from the
        innermost, as the compiler's read regions are)."""
        rem = elements
        box: List[Tuple[int, int]] = [(0, 0)] * len(shape)
        for k in range(len(shape) - 1, -1, -1):
            lo, hi = self.bounds(forms[k])
            if rem <= 1:
                box[k] = (lo, hi)
            elif rem >= shape[k]:
                box[k] = (0, shape[k] - 1)
                rem = _ceil(rem, shape[k])
            else:
                box[k] = (lo, hi + rem - 1)
                rem = 1
        return box

    def bounds(self, form: _Linear) -> Tuple[int, int]:
        ranges = {info.form[0][0][0]: (info.first, info.last) for _, info in self.loops}
        lo = hi = form[1]
        for v, a in form[0]:
            first, last = ranges[v]
            lo += min(a * first, a * last)
            hi += max(a * first, a * last)
        return lo, hi

    def read_bytes(self) -> int:
        return sum(math.prod(hi - lo + 1 for lo, hi in box) * _DTYPE_BYTES[self.allocs[b][1]]
                   for b, box in self.hull.items())


def _simd_block_statements(kernel: Kernel, st: Stmt) -> List[Stmt]:
    """The top-level statements of the ``with T.SimdVF()`` block of ``st``."""
    key = vf_scope_call(st, "T.SimdVF")
    out: List[Stmt] = []
    for s in walk_stmts(kernel.body):
        if key is not None and vf_scope_call(s, "T.SimdVF") == key and \
                not any(_inside(s.span, o.span) for o in out):
            out.append(s)
    return out


def _inside(a: Span, b: Span) -> bool:
    return (b.line, b.col) <= (a.line, a.col) and (a.end_line, a.end_col) <= \
        (b.end_line, b.end_col)


def simd_block_cost(st: Stmt, kernel: Kernel, env: Env, memory: Dict[str, str],
                    allocs: _Allocs) -> Tuple[int, int]:
    """(latency, II) of a T.SimdVF block of register intrinsics (``st``, a
    "vf" task whose children are the block's statements) without
    ``latency=``: max(operations, UB bytes read / 256) for both."""
    whole = _simd_block_statements(kernel, st)
    if [s.span for s in whole] != [s.span for s in st.children]:
        raise Unmodelled("a T.SimdVF block that is not one task here")
    counter = _SimdCounter(memory, allocs, env)
    try:
        counter.block(st.children)
        read = counter.read_bytes()
    except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
        # Code this count did not foresee is outside it, never a crash.
        raise Unmodelled(f"a T.SimdVF block the count does not cover "
                         f"({type(exc).__name__})") from None
    latency = max(counter.ops, _ceil(read, VALU_BANDWIDTH))
    return latency, max(1, latency)


# --------------------------------------------------------------------------
# Scheduler input (AutoSchedule's Z3SchedulePythonLoop)
# --------------------------------------------------------------------------


def _consider_key(a: TaskLike, b: TaskLike, buf: str) -> Tuple[int, int]:
    """Where the compiler meets ``buf`` when it pairs a's accesses with b's:
    writes x reads, then writes x writes, then reads x writes."""
    passes = ((a.writes, b.reads), (a.writes, b.writes), (a.reads, b.writes))
    for p, (lhs, rhs) in enumerate(passes):
        if buf in lhs and buf in rhs:
            return p, list(lhs).index(buf)
    return len(passes), 0


def _memory_vars(tasks: Sequence[TaskLike], kernel: Kernel, allocs: _Allocs,
                 memory: Dict[str, str], copies: Callable[[str], Optional[int]]
                 ) -> Tuple[Dict[str, int], Dict[str, List[int]], List[int], Dict[str, int]]:
    """The on-chip buffers of ``tasks`` (reads first, then writes) against the
    scopes' capacities: ``copies(b)`` is how many copies of b are reserved, or
    None for a version variable.  (capacity left per scope, variable ids per
    scope, variable sizes, buffer -> variable id)."""
    onchip: List[str] = []
    for t in tasks:
        for b in list(t.reads):
            if memory.get(b, "GM") not in ("GM", "REG") and b not in onchip:
                onchip.append(b)
    for t in tasks:
        for b in list(t.writes):
            if memory.get(b, "GM") not in ("GM", "REG") and b not in onchip:
                onchip.append(b)
    simt = any("T.SimtVF" in st.scope for st in walk_stmts(kernel.body))
    caps = {sc: _LIMITS.get(sc, _UB_BYTES_WITH_SIMT if simt else _UB_BYTES) for sc in _SCOPES}
    members: Dict[str, List[int]] = {sc: [] for sc in _SCOPES}
    sizes: List[int] = []
    var_of: Dict[str, int] = {}
    for b in onchip:
        if b not in allocs:
            raise Unmodelled(f"shape of {b}")
        scope = _MEM_SCOPE[memory[b]]
        size = _nbytes(*allocs[b])
        n = copies(b)
        if n is None:
            var_of[b] = len(sizes)
            members[scope].append(len(sizes))
            sizes.append(size)
        else:
            caps[scope] -= size * n
    return caps, members, sizes, var_of


def build_input(tasks: Sequence[_T], kernel: Kernel, env: Env, memory: Dict[str, str],
                annotated: Dict[str, int], eligible: Sequence[str], num_stages: int,
                conflict: Conflict[_T]) -> SchedulerInput:
    """The loop scheduler's arguments for ``tasks`` (the loop body in source
    order).  ``conflict(a, b, cross)`` lists the (buffer, kind) hazards of a
    then b; raises :class:`Unmodelled` for inputs outside the cost model."""
    allocs = _alloc_info(kernel, env)
    params = _param_shapes(kernel, env)
    n = len(tasks)
    lat, iis, flags, hbm = [], [], [], []
    for t in tasks:
        if "T.Stage" in t.stmt.scope:
            raise Unmodelled("a manual T.Stage schedule")
        if t.pipe not in PIPE_BITS:
            raise Unmodelled(f"pipe {t.pipe}")
        for acc in list(t.stmt.reads) + list(t.stmt.writes):
            if memory.get(acc.buffer) == "REG":
                raise Unmodelled("register buffers in the loop")
        latency, ii = task_cost(t, kernel, env, memory, allocs, params)
        lat.append(latency)
        iis.append(ii)
        flags.append(PIPE_BITS[t.pipe])
        hbm.append(_hbm(t, memory))

    # Version variables and memory groups.
    caps, members, sizes, var_of = _memory_vars(
        tasks, kernel, allocs, memory,
        lambda b: 1 if b not in eligible else annotated.get(b))
    for s in _SCOPES:
        if members[s] and (caps[s] < 0 or sum(sizes[i] for i in members[s]) > caps[s]):
            raise Unmodelled(f"{s} over capacity (the compiler fails)")

    deps: List[Tuple[int, int, int, int]] = []
    for i in range(n):
        for j in range(n):
            pending: List[Tuple[str, int]] = []
            for buf, _kind in sorted(conflict(tasks[i], tasks[j], i >= j),
                                     key=lambda c: _consider_key(tasks[i], tasks[j], c[0])):
                mem = memory.get(buf, "GM")
                if mem == "GM":
                    d = 0 if i < j else -1
                elif buf in annotated and buf in eligible:
                    d = 0 if i < j else annotated[buf]
                else:
                    d = 0 if i < j else -1
                if (buf, d) not in pending:
                    pending.append((buf, d))
            for buf, d in pending:
                if d < 0:
                    d = -var_of[buf] - 1 if buf in var_of else 1
                deps.append((i, j, d, lat[i]))

    res = []
    for i in range(n):
        for j in range(i + 1, n):
            if (flags[i] & flags[j] & ~_SCALAR_BIT) or (hbm[i] & hbm[j]):
                res.append((i, j))
    groups = tuple((caps[s],) + tuple(members[s]) for s in _SCOPES)
    return SchedulerInput(num_stages, tuple(lat), tuple(iis), tuple(flags), tuple(deps),
                          tuple(res), tuple(sizes), groups,
                          tuple(sorted(var_of, key=lambda b: var_of[b])))


# --------------------------------------------------------------------------
# The modulo scheduler (same constraint program as the compiler's)
# --------------------------------------------------------------------------


# The z3-solver build of the parity runs (the newest tilelang 0.1.15 accepts).
CHECKED_Z3 = "4.15.4"


def solver_version() -> Optional[str]:
    try:
        import z3
        return z3.get_version_string()
    except Exception:
        return None


Solution = Tuple[Tuple[int, ...], Tuple[int, ...], int]  # start times, versions, II
_SOLVED: "Dict[SchedulerInput, Solution]" = {}
_SOLVED_MAX = 256
_CACHE_LOCK = threading.Lock()
_SOLVE_LOCK = threading.Lock()
_DEFER: "contextvars.ContextVar[Optional[List[SchedulerInput]]]" = contextvars.ContextVar(
    "tilelint_ascend_deferred", default=None)


def cached(inp: SchedulerInput) -> Optional[Solution]:
    """The solution of ``inp`` if it was solved in this process."""
    with _CACHE_LOCK:
        return _SOLVED.get(inp)


def clear_cache() -> None:
    with _CACHE_LOCK:
        _SOLVED.clear()
        _ROOT_SOLVED.clear()


@contextlib.contextmanager
def deferred_solving() -> Iterator[List[SchedulerInput]]:
    """Within the block, loops whose schedule is not cached are not solved:
    they get the predicted order (``exact`` False) and their inputs are added
    to the yielded list, for the caller to ``solve`` elsewhere (the language
    server does it off its analysis thread) and analyse again."""
    pending: List[SchedulerInput] = []
    token = _DEFER.set(pending)
    try:
        yield pending
    finally:
        _DEFER.reset(token)


def solve(inp: SchedulerInput) -> Optional[Solution]:
    """(start times, buffer versions, II) for ``inp``, None without z3;
    cached per input (the last 256)."""
    hit = cached(inp)
    if hit is not None:
        return hit
    with _SOLVE_LOCK:  # one solve at a time, as in the compiler
        out = _solve(inp)
    if out is not None:
        with _CACHE_LOCK:
            _SOLVED[inp] = out
            while len(_SOLVED) > _SOLVED_MAX:
                _SOLVED.pop(next(iter(_SOLVED)))
    return out


def _solve(inp: SchedulerInput) -> Optional[Solution]:
    """The compiler's loop scheduler, re-run: a binary search for the
    smallest II whose constraint program is satisfiable.

    The constraints are posted in the compiler's order, into a fresh context
    with the compiler's seed.  Z3's answer also depends on the ids it hands
    out to terms, and those are recycled as the Python wrappers die: the
    checks run with a resource limit, and a check that gives up ("unknown")
    counts as infeasible.  So the lifetimes of the term-holding objects (the
    solver, the per-II variable lists, the last resource-order Bool, the best
    model so far) follow the compiler's scheduler, whose locals they are, one
    for one: ``live`` and ``best`` hold them as those locals would (an item
    replaced when the compiler rebinds its local, never dropped earlier);
    reordering them changes the answer for some loops (measured: a 9-task
    vector loop got II 896 instead of 890)."""
    try:
        import z3
    except Exception:
        return None
    n = len(inp.latencies)
    if n == 0:
        return (), (), 0
    ctx = z3.Context()
    ii_lo = max(inp.iis)
    ii_hi = max(sum(inp.latencies), sum(inp.iis)) + 1
    best: Dict[str, Any] = {"ii": ii_hi, "model": None}
    live: Dict[str, Any] = {}  # the compiler's loop locals of the current II
    while ii_lo < ii_hi:
        ii = (ii_lo + ii_hi) // 2
        _post_program(z3, ctx, inp, ii, live)
        if live["solver"].check() == z3.sat:
            best["ii"] = ii
            best["model"] = live["solver"].model()
            best["starts"] = live["starts"]
            best["ks"] = live["ks"]
            best["bufs"] = live["bufs"]  # kept alive like the compiler's copy
            ii_hi = ii
        else:
            ii_lo = ii + 1
    if best["model"] is None:
        return _serial_schedule(inp)
    return _read_model(inp, best["model"], best["starts"], best["ks"], best["ii"])


def _post_program(z3: Any, ctx: Any, inp: SchedulerInput, ii: int, live: Dict[str, Any]) -> None:
    """A new solver in ``live["solver"]`` holding the scheduler's program for
    ``ii``, its terms created in the compiler's order."""
    live["solver"] = z3.Solver(ctx=ctx)
    live["solver"].set("random_seed", 42)
    live["solver"].set("rlimit", 1000000)
    _post_start_times(z3, ctx, inp, ii, live)
    _post_buffers(z3, ctx, inp, live)
    _post_data_deps(inp, ii, live)
    _post_resources(z3, ctx, inp, ii, live)


def _post_start_times(z3: Any, ctx: Any, inp: SchedulerInput, ii: int,
                      live: Dict[str, Any]) -> None:
    """start_i = k_i * II + r_i with k_i >= 0 and 0 <= r_i < II."""
    n = len(inp.latencies)
    solver = live["solver"]
    live["ks"] = [z3.Int(f"k_{i}", ctx) for i in range(n)]
    live["rs"] = [z3.Int(f"r_{i}", ctx) for i in range(n)]
    ks, rs = live["ks"], live["rs"]
    live["starts"] = [ks[i] * ii + rs[i] for i in range(n)]
    for i in range(n):
        solver.add(ks[i] >= 0)
        solver.add(rs[i] >= 0)
        solver.add(rs[i] < ii)


def _post_buffers(z3: Any, ctx: Any, inp: SchedulerInput, live: Dict[str, Any]) -> None:
    """A version variable per free buffer, 1..num_stages, and the memory
    each scope has left for them."""
    solver = live["solver"]
    live["bufs"] = [z3.Int(f"buf_{i}", ctx) for i in range(len(inp.buffer_sizes))]
    bufs = live["bufs"]
    for i in range(len(inp.buffer_sizes)):
        solver.add(bufs[i] >= 1)
        solver.add(bufs[i] <= inp.num_stages)
    for group in inp.memory_groups:
        if len(group) > 1:
            solver.add(z3.Sum([bufs[i] * inp.buffer_sizes[i] for i in group[1:]]) <= group[0])


def _post_data_deps(inp: SchedulerInput, ii: int, live: Dict[str, Any]) -> None:
    """start_v - start_u >= latency - II * distance (a negative distance names
    the version variable of buffer -distance - 1)."""
    solver, starts, bufs = live["solver"], live["starts"], live["bufs"]
    for u, v, dist, latency in inp.data_deps:
        if dist >= 0:
            solver.add(starts[v] - starts[u] >= latency - ii * dist)
        else:
            solver.add(starts[v] - starts[u] >= latency - ii * bufs[-dist - 1])


def _post_resources(z3: Any, ctx: Any, inp: SchedulerInput, ii: int,
                    live: Dict[str, Any]) -> None:
    """A modulo before/after choice per resource pair (``live["first"]`` is
    the compiler's loop local, the last Bool outliving the loop), and every
    pipe's tasks inside one II window."""
    n = len(inp.latencies)
    solver, rs, starts = live["solver"], live["rs"], live["starts"]
    for i, j in inp.resource_deps:
        if i < j:
            live["first"] = z3.Bool(f"O_{i}_{j}", ctx)
            first = live["first"]
            solver.add(z3.Implies(first, rs[j] - rs[i] >= inp.iis[i]))
            solver.add(z3.Implies(first, rs[i] - rs[j] + ii >= inp.iis[j]))
            solver.add(z3.Implies(z3.Not(first), rs[i] - rs[j] >= inp.iis[j]))
            solver.add(z3.Implies(z3.Not(first), rs[j] - rs[i] + ii >= inp.iis[i]))
    for bit in (1, 2, 4, 8, 16, 32, 64):
        members = [i for i in range(n) if inp.resource_flags[i] & bit]
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                p, q = members[x], members[y]
                solver.add(starts[p] - starts[q] < ii)
                solver.add(starts[q] - starts[p] < ii)


def _serial_schedule(inp: SchedulerInput) -> Solution:
    """The compiler's answer when no II is feasible: the tasks one after the
    other, every buffer single-versioned."""
    times, t = [], 0
    for latency in inp.latencies:
        times.append(t)
        t += latency
    return tuple(times), (1,) * len(inp.buffer_sizes), max(sum(inp.latencies), 1)


def _read_model(inp: SchedulerInput, model: Any, starts: List[Any], ks: List[Any],
                ii: int) -> Solution:
    """Start times (shifted so the earliest iteration index is 0) and the
    versions of the free buffers recomputed from them, as the compiler does."""
    n = len(inp.latencies)
    k_min = min(model.evaluate(ks[i]).as_long() for i in range(n))
    times = [model.evaluate(starts[i]).as_long() - k_min * ii for i in range(n)]
    versions = [1] * len(inp.buffer_sizes)
    for u, v, dist, latency in inp.data_deps:
        if dist < 0:
            b = -dist - 1
            versions[b] = max(versions[b], math.ceil((latency + times[u] - times[v]) / ii))
    return tuple(times), tuple(versions), ii


def solve_now_or_later(inp: SchedulerInput) -> Tuple[Optional[Solution], str]:
    """The solution of ``inp``, or None and why: inside :func:`deferred_solving`
    an input not solved yet is queued for the caller instead."""
    pending = _DEFER.get()
    if pending is not None and solver_version() is not None:
        out = cached(inp)
        if out is None:
            if inp not in pending:
                pending.append(inp)
            return None, "the auto-scheduler's order is being computed"
        return out, ""
    out = solve(inp)
    if out is None:
        return None, "z3-solver is not installed: pip install 'tilelint[ascend]'"
    return out, ""


def forced_order(tasks: Sequence[_T], conflict: Conflict[_T]) -> bool:
    """True when the loop's same-iteration dependencies leave one order: each
    task depends on the one before it.  Then every schedule, whatever the
    latencies, issues the tasks in source order (each starts at least one
    cycle after its predecessor), and the order needs no solver."""
    for i in range(len(tasks) - 1):
        if not conflict(tasks[i], tasks[i + 1], False):
            return False
    return True


def _without_times(tasks: Sequence[_T], conflict: Conflict[_T], why: str,
                   inp: Optional[SchedulerInput] = None) -> AscendSchedule:
    """The schedule when the solver's model is not available: exact (with no
    start times) if the dependencies force the order, else a prediction."""
    n = len(tasks)
    manual = any("T.Stage" in t.stmt.scope for t in tasks)
    if n and not manual and forced_order(tasks, conflict):
        return AscendSchedule(tuple(range(n)), True, why, input=inp)
    return AscendSchedule(tuple(range(n)), False, why, input=inp)


def schedule_loop(tasks: Sequence[_T], kernel: Kernel, env: Env, memory: Dict[str, str],
                  annotated: Dict[str, int], eligible: Sequence[str], num_stages: int,
                  conflict: Conflict[_T], loop_annotations: Sequence[str] = (),
                  unseen: Sequence[str] = ()) -> AscendSchedule:
    """The compiler's order of ``tasks`` (source order in), or the reason it
    cannot be reproduced.  ``unseen``: loop statements that do work but are
    not tasks of the model (the compiler schedules them too)."""
    n = len(tasks)
    if any(a in loop_annotations for a in ("enable_offset", "stage", "order")):
        return AscendSchedule(tuple(range(n)), False, "manual stages/offset are not modelled")
    if unseen:
        return AscendSchedule(tuple(range(n)), False, f"{unseen[0]} is not modelled as a task")
    try:
        inp = build_input(tasks, kernel, env, memory, annotated, eligible, num_stages,
                          conflict)
    except Unmodelled as exc:
        return _without_times(tasks, conflict, str(exc))
    except Exception as exc:  # never take the editor down
        return AscendSchedule(tuple(range(n)), False, f"internal: {type(exc).__name__}")
    out, why = solve_now_or_later(inp)
    if out is None:
        return _without_times(tasks, conflict, why, inp)
    times, versions, ii = out
    t0 = min(times) if times else 0
    order = tuple(sorted(range(n), key=lambda i: (times[i] - t0, i)))
    note = ""
    version = solver_version()
    if version != CHECKED_Z3:
        note = (f"solved with z3-solver {version}; the model was checked against "
                f"{CHECKED_Z3}, and another solver build may pick another model")
    return AscendSchedule(order, True, note, ii, tuple(x - t0 for x in times),
                          tuple(zip(inp.version_buffers, versions, strict=False)), inp)


# --------------------------------------------------------------------------
# The root list: the kernel body's statements (tasks and whole loops)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class RootInput:
    """The arguments of the compiler's straight-line scheduler
    (``z3_schedule_python``) for the kernel body's statements."""

    latencies: Tuple[int, ...]
    iis: Tuple[int, ...]
    resource_flags: Tuple[int, ...]
    data_deps: Tuple[Tuple[int, int, int], ...]  # (i, j, latency)
    resource_deps: Tuple[Tuple[int, int], ...]


@dataclass(frozen=True)
class RootNode:
    """One statement of the root list as the scheduler sees it: a task, or a
    scheduled loop (its tasks in scheduled order, each with the time it
    finishes producing, relative to the node's start, minus its latency, and
    the time it starts consuming)."""

    tasks: Tuple[Any, ...]
    produce: Tuple[int, ...]
    consume: Tuple[int, ...]
    task_latency: Tuple[int, ...]
    latency: int
    ii: int
    flags: int
    hbm: int


def _hbm(t: TaskLike, memory: Dict[str, str]) -> int:
    """The GM ports a task holds (GetHbmResourceMask): its core's port when
    it touches GM, and the one store port every GM write shares (measured: a
    FIX copy L0C->GM and a vector core's UB->GM copy exclude each other)."""
    if not any(memory.get(a.buffer, "GM") == "GM"
               for a in list(t.stmt.reads) + list(t.stmt.writes)):
        return 0
    store = _HBM_STORE if any(memory.get(a.buffer, "GM") == "GM" for a in t.stmt.writes) else 0
    return (_HBM_AIC if t.core == "AIC" else _HBM_AIV) | store


def root_task_node(t: TaskLike, kernel: Kernel, env: Env, memory: Dict[str, str]) -> RootNode:
    """A task of the root list; raises :class:`Unmodelled` outside the cost model."""
    if t.pipe not in PIPE_BITS:
        raise Unmodelled(f"pipe {t.pipe}")
    latency, ii = task_cost(t, kernel, env, memory, _alloc_info(kernel, env),
                            _param_shapes(kernel, env))
    return RootNode((t,), (0,), (0,), (latency,), latency, ii, PIPE_BITS[t.pipe],
                    _hbm(t, memory))


def compose_loop_node(children: Sequence[RootNode], starts: Sequence[int], ii: int,
                      trip: int) -> RootNode:
    """A scheduled loop as one node of the list around it: ``children`` in
    scheduled order with their start times.  Its latency (and II) is the last
    child's end in one iteration plus II per further iteration, its pipes and
    GM ports the union of its children's.  A producer inside it finishes its
    last iteration (trip - 1) * II after its start in the first."""
    later = (max(trip, 1) - 1) * ii
    tasks: List[Any] = []
    produce: List[int] = []
    consume: List[int] = []
    lat: List[int] = []
    flags = hbm = 0
    end = 0
    for c, st in zip(children, starts, strict=True):
        tasks.extend(c.tasks)
        produce.extend(later + st + x for x in c.produce)
        consume.extend(st + x for x in c.consume)
        lat.extend(c.task_latency)
        flags |= c.flags
        hbm |= c.hbm
        end = max(end, st + c.latency)
    latency = end + later
    return RootNode(tuple(tasks), tuple(produce), tuple(consume), tuple(lat), latency,
                    latency, flags, hbm)


def root_loop_node(tasks: Sequence[TaskLike], sched: AscendSchedule, trip: int,
                   memory: Dict[str, str]) -> RootNode:
    """A scheduled pipelined loop (``tasks`` in source order) as one node."""
    if sched.ii is None or sched.input is None or len(sched.start_times) != len(tasks):
        raise Unmodelled("a loop without start times")
    inp = sched.input
    children = [RootNode((tasks[i],), (0,), (0,), (inp.latencies[i],), inp.latencies[i],
                         inp.iis[i], inp.resource_flags[i], _hbm(tasks[i], memory))
                for i in sched.order]
    return compose_loop_node(children, [sched.start_times[i] for i in sched.order],
                             sched.ii, trip)


def _pair_deps(prod: RootNode, cons: RootNode, conflict: Conflict[Any], cross: bool
               ) -> List[Tuple[str, int]]:
    """(storage, latency) of each dependency of ``cons`` on ``prod``, in the
    order the compiler meets the storages (writes x reads, writes x writes,
    reads x writes, by task); the latency is the largest over the conflicting
    task pairs of (producer's end in its last iteration) - (consumer's start)."""
    latency: Dict[str, int] = {}
    first: List[Tuple[Tuple[int, int, int, int], str]] = []
    for pi, a in enumerate(prod.tasks):
        for ci, b in enumerate(cons.tasks):
            for buf, _ in conflict(a, b, cross):
                key = _consider_key(a, b, buf)
                first.append(((key[0], pi, key[1], ci), buf))
                latency[buf] = max(latency.get(buf, 0), prod.produce[pi]
                                   + prod.task_latency[pi] - cons.consume[ci])
    out: List[Tuple[str, int]] = []
    for _, buf in sorted(first, key=lambda x: x[0]):
        if all(buf != b for b, _ in out):
            out.append((buf, latency[buf]))
    return out


def guard_node() -> RootNode:
    """The ``if`` a T.Persistent loop puts around its body, as a node of the
    loop's scheduler: a scalar task of latency and II 1 (measured)."""
    return RootNode((), (), (), (), 1, 1, PIPE_BITS["S"], 0)


def build_outer_input(nodes: Sequence[RootNode], is_loop: Sequence[bool],
                      annotated: Dict[str, int], free: Sequence[str], kernel: Kernel,
                      env: Env, memory: Dict[str, str], conflict: Conflict[Any],
                      num_stages: int = 1, guards: int = 0) -> SchedulerInput:
    """The loop scheduler's arguments for a serial loop's body whose nodes are
    tasks and whole pipelined loops: a dependency per ordered pair of nodes
    and storage (distance 0 forwards; backwards the annotated versions, the
    version variable of a ``free`` buffer, or 1; a loop's hazards with itself
    are its own), latency as in :func:`build_root_input`.  A serial loop has
    no num_stages (1); ``T.Persistent(..., num_stages=n)`` gives it n.  Its
    memory groups count the inner loops' on-chip buffers once and the serial
    loop's own annotated buffers times their versions (measured: the
    compiler's capacities for the serial loop subtract A_l1's size, not size x
    versions, and 4 x C_ub's for ``C_ub: 4``).  The first ``guards`` nodes
    are guards (:func:`guard_node`), each of which every later node depends on
    (latency 1, measured with one and two guards)."""
    n = len(nodes)
    caps, members, sizes, var_of = _memory_vars(
        [t for node in nodes for t in node.tasks], kernel, _alloc_info(kernel, env), memory,
        lambda b: None if b in free else annotated.get(b, 1))
    deps: List[Tuple[int, int, int, int]] = []
    for i in range(n):
        if i < guards:
            deps.extend((i, j, 0, 1) for j in range(i + 1, n))
            continue
        for j in range(guards, n):
            if i == j and is_loop[i]:
                continue
            cross = i >= j
            for buf, latency in _pair_deps(nodes[i], nodes[j], conflict, cross):
                d = 0 if not cross else (-var_of[buf] - 1 if buf in var_of
                                         else annotated.get(buf, 1))
                deps.append((i, j, d, latency))
    res = []
    for i in range(n):
        for j in range(i + 1, n):
            if (nodes[i].flags & nodes[j].flags & ~_SCALAR_BIT) or (nodes[i].hbm & nodes[j].hbm):
                res.append((i, j))
    groups = tuple((caps[sc],) + tuple(members[sc]) for sc in _SCOPES)
    return SchedulerInput(num_stages, tuple(x.latency for x in nodes),
                          tuple(x.ii for x in nodes),
                          tuple(x.flags for x in nodes), tuple(deps), tuple(res),
                          tuple(sizes), groups, tuple(sorted(var_of, key=lambda b: var_of[b])))


def build_root_input(nodes: Sequence[RootNode], conflict: Conflict[Any]) -> RootInput:
    """The root scheduler's arguments.  A dependency per pair of nodes and
    storage (in the order the compiler meets them: writes x reads, writes x
    writes, reads x writes), its latency the largest over the conflicting task
    pairs of (producer's end) - (consumer's start)."""
    n = len(nodes)
    deps: List[Tuple[int, int, int]] = []
    for i in range(n):
        for j in range(i + 1, n):
            for _, latency in _pair_deps(nodes[i], nodes[j], conflict, False):
                deps.append((i, j, latency))
    res = []
    for i in range(n):
        for j in range(i + 1, n):
            if (nodes[i].flags & nodes[j].flags) or (nodes[i].hbm & nodes[j].hbm):
                res.append((i, j))
    return RootInput(tuple(x.latency for x in nodes), tuple(x.ii for x in nodes),
                     tuple(x.flags for x in nodes), tuple(deps), tuple(res))


_ROOT_SOLVED: "Dict[RootInput, Tuple[int, ...]]" = {}


def solve_root(inp: RootInput) -> Optional[Tuple[int, ...]]:
    """Start times of the root list, None without z3.  The compiler's program:
    start times >= 0, data dependencies, a before/after choice per resource
    pair, and the makespan minimised by ``z3.Optimize`` in a fresh context."""
    with _CACHE_LOCK:
        hit = _ROOT_SOLVED.get(inp)
    if hit is not None:
        return hit
    try:
        import z3
    except Exception:
        return None
    n = len(inp.latencies)
    with _SOLVE_LOCK:
        ctx = z3.Context()
        solver = z3.Optimize(ctx=ctx)
        solver.set("rlimit", 1000000)
        starts = [z3.Int(f"start_{i}", ctx) for i in range(n)]
        for var in starts:
            solver.add(var >= 0)
        for i, j, latency in inp.data_deps:
            solver.add(starts[j] >= starts[i] + latency)
        for i, j in inp.resource_deps:
            if i < j:
                first = z3.Bool(f"O_{i}_{j}", ctx)
                solver.add(z3.Implies(first, starts[j] >= starts[i] + inp.iis[i]))
                solver.add(z3.Implies(z3.Not(first), starts[i] >= starts[j] + inp.iis[j]))
        makespan = z3.Int("makespan", ctx)
        for i in range(n):
            solver.add(makespan >= starts[i] + inp.latencies[i])
        solver.add(makespan >= 0)
        solver.minimize(makespan)
        if solver.check() != z3.sat:
            return None
        model = solver.model()
        out = tuple(model.evaluate(starts[i]).as_long() for i in range(n))
    with _CACHE_LOCK:
        _ROOT_SOLVED[inp] = out
        while len(_ROOT_SOLVED) > _SOLVED_MAX:
            _ROOT_SOLVED.pop(next(iter(_ROOT_SOLVED)))
    return out
