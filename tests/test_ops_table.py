"""Operand roles (analysis/ops.py).

Two parts:
- unit tests: the frontend fills Stmt.reads/writes from the table, and no
  TL107/TL108 is based on a call whose roles are unknown.  Expected roles are
  the ones tilelang 0.1.15's operators declare (see the reasoning next to each
  case and the docstring of analysis/ops.py);
- parity tests: every public callable of ``tilelang.language`` 0.1.15 that
  takes a buffer is either in the table with exactly its real parameter list,
  or listed in ``NOT_MODELLED`` with a reason.  The signatures are read with
  ``inspect.signature`` in a subprocess that imports the real tilelang.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest
from parity_support import PARITY_DIR, require_tilelang

from tilelint.analysis import Settings, analyze, frontend, ops

# --------------------------------------------------------------------------
# Unit tests
# --------------------------------------------------------------------------

HEAD = """\
import tilelang
import tilelang.language as T


@T.prim_func
def k(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
      E: T.Tensor((1024, 64), "int16"), C: T.Tensor((1024, 1024), "float32")):
    with T.Kernel(8, 8, threads=128) as (bx, by):
        A_s = T.alloc_shared((128, 32), "float16")
        E_s = T.alloc_shared((128, 2), "int16")
        B_s = T.alloc_shared((32, 128), "float16")
        C_l = T.alloc_fragment((128, 128), "float32")
        M_l = T.alloc_fragment((128,), "float32")
"""


def _stmts(body: str):
    """The statements of the kernel body after the allocations (one level)."""
    src = HEAD + textwrap.indent(textwrap.dedent(body), " " * 8)
    module = frontend.parse_module(src)
    assert module.kernels, "the test kernel was not found"
    return [s for s in module.kernels[0].body if s.kind not in ("alloc",)]


def _roles(stmt):
    return ([a.buffer for a in stmt.reads], [a.buffer for a in stmt.writes])


@pytest.mark.parametrize("call,kind,reads,writes", [
    # GemmSPNode::GetAccessRegions: A, E and B read, C written; C is also read
    # because clear_accum is not provably true.  B is never written.
    ("T.gemm_sp(A_s, E_s, B_s, C_l)", "gemm", ["A_s", "E_s", "B_s", "C_l"], ["C_l"]),
    ("T.gemm_sp(A_s, E_s, B_s, C_l, False, False, False, T.GemmWarpPolicy.Square, True)",
     "gemm", ["A_s", "E_s", "B_s"], ["C_l"]),
    ("T.gemm_sp(B=B_s, C=C_l, E=E_s, A_sparse=A_s)", "gemm",
     ["A_s", "E_s", "B_s", "C_l"], ["C_l"]),
    ("T.wgmma_gemm_sp(A_s, E_s, B_s, C_l, clear_accum=True)", "gemm",
     ["A_s", "E_s", "B_s"], ["C_l"]),
    # GemmNode: clear_accum literally True drops the read of C; a non-literal
    # flag (k == 0) keeps it (the compiler reads C unless the flag is one).
    ("T.gemm(A_s, B_s, C_l)", "gemm", ["A_s", "B_s", "C_l"], ["C_l"]),
    ("T.gemm(A_s, B_s, C_l, clear_accum=True)", "gemm", ["A_s", "B_s"], ["C_l"]),
    ("T.gemm(A_s, B_s, C_l, False, False, T.GemmWarpPolicy.FullRow, True)", "gemm",
     ["A_s", "B_s"], ["C_l"]),
    ("T.gemm(A_s, B_s, C_l, clear_accum=bx == 0)", "gemm", ["A_s", "B_s", "C_l"], ["C_l"]),
    # ReduceOpNode: the output is read only when clear is False (positional or not).
    ("T.reduce_max(C_l, M_l, dim=1)", "reduce", ["C_l"], ["M_l"]),
    ("T.reduce_max(C_l, M_l, 1, False)", "reduce", ["C_l", "M_l"], ["M_l"]),
    ("T.reduce_sum(C_l, M_l, dim=1, clear=False)", "reduce", ["C_l", "M_l"], ["M_l"]),
    ("T.reduce_abssum(C_l, M_l, 1)", "reduce", ["C_l"], ["M_l"]),
    # Scan: src read, dst written; without dst the scan is in place.
    ("T.cumsum(M_l)", "reduce", ["M_l"], ["M_l"]),
    ("T.cumsum(C_l, dst=C_l, dim=1)", "reduce", ["C_l"], ["C_l"]),
    ("T.cummax(M_l, None)", "reduce", ["M_l"], ["M_l"]),
    # Copies: src read, dst written, keyword or positional.
    ("T.copy(A[by * 128, 0], A_s)", "copy", ["A"], ["A_s"]),
    ("T.copy(dst=A_s, src=A[by * 128, 0])", "copy", ["A"], ["A_s"]),
    ("T.async_copy(A[by * 128, 0], A_s)", "copy", ["A"], ["A_s"]),
    ("T.transpose(A_s, B_s)", "copy", ["A_s"], ["B_s"]),
    # Fill writes only; atomics read and write their destination.
    ("T.fill(C_l, 0)", "fill", [], ["C_l"]),
    ("T.clear(C_l)", "fill", [], ["C_l"]),
    ("T.atomic_add(C[by, bx], C_l[0, 0])", "atomic", ["C", "C_l"], ["C"]),
    ("T.atomic_load(M_l[0])", "call", ["M_l"], []),
])
def test_roles_from_the_table(call, kind, reads, writes):
    (stmt,) = _stmts(call + "\n")
    assert stmt.kind == kind
    assert stmt.roles_known
    assert _roles(stmt) == (reads, writes)


@pytest.mark.parametrize("call", [
    "T.gemm_v2(A_s, B_s, C_l)",          # not in tilelang 0.1.15
    "T.some_future_op(A_s, C_l)",        # not in tilelang 0.1.15
    "T.copy(*pair)",                     # arguments cannot be bound by name
    "T.call_extern('handle', 'f', T.access_ptr(A_s, 'w'))",  # roles follow masks
])
def test_unknown_roles(call):
    (stmt,) = _stmts(call + "\n")
    assert stmt.kind == "call"
    assert not stmt.roles_known
    assert not stmt.writes  # nothing is taken as written


@pytest.mark.parametrize("call,kind,reads,writes", [
    # 0.1.15's T.gemm has no k_pack (other versions do): Python rejects the
    # call, so nothing about it is sure; the operands keep their places for
    # ordering.
    ("T.gemm(A_s, B_s, C_l, k_pack=2)", "gemm", ["A_s", "B_s", "C_l"], ["C_l"]),
    ("T.copy(A_s, B_s, nonsense=1)", "copy", ["A_s"], ["B_s"]),
    ("T.gemm(A_s, B_s)", "gemm", ["A_s", "B_s"], []),  # C missing
    # tcgen05_gemm requires mbar= in 0.1.15
    ("T.tcgen05_gemm(A_s, B_s, C_l, transpose_B=True)", "gemm", ["A_s", "B_s", "C_l"],
     ["C_l"]),
])
def test_calls_that_do_not_fit_the_signature(call, kind, reads, writes):
    (stmt,) = _stmts(call + "\n")
    assert stmt.kind == kind
    assert not stmt.roles_known
    assert _roles(stmt) == (reads, writes)


def test_no_operand_calls_are_known():
    (stmt,) = _stmts("T.sync_threads()\n")
    assert stmt.roles_known and not stmt.reads and not stmt.writes


PIPE = """\
import tilelang
import tilelang.language as T


@T.prim_func
def k(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
      C: T.Tensor((1024, 1024), "float16")):
    with T.Kernel(8, 8, threads=128) as (bx, by):
        A_s = T.alloc_shared((128, 32), "float16")
        B_s = T.alloc_shared((32, 128), "float16")
        C_l = T.alloc_fragment((128, 128), "float32")
        T.clear(C_l)
        for k in T.Pipelined(32, {sched}):
            T.copy(A[by * 128, k * 32], A_s)
            T.copy(B[k * 32, bx * 128], B_s)
            {consumer}
        T.copy(C_l, C[by * 128, bx * 128])
"""


def _codes(sched: str, consumer: str, target: str = "sm_80"):
    src = PIPE.format(sched=sched, consumer=consumer)
    return sorted(d.code for d in analyze(src, "k.py", Settings(target=target)).diagnostics
                  if d.code in ("TL107", "TL108"))


def test_tl107_needs_known_roles():
    # Control: the real T.gemm reading copies of stages 0 and 1 is rejected by
    # the compiler ('A dependency on multiple async stages', the
    # invalid_tl107_multi_async_stage parity fixture).
    assert _codes("order=[0, 1, 2], stage=[0, 1, 2]", "T.gemm(A_s, B_s, C_l)") == ["TL107"]
    # The same body with an op tilelang 0.1.15 does not have: its roles are
    # unknown, so no TL107 is based on it.
    assert _codes("order=[0, 1, 2], stage=[0, 1, 2]", "T.gemm_v2(A_s, B_s, C_l)") == []


def test_tl108_needs_known_roles():
    # An unknown op that names a copied buffer where a GEMM writes C: before
    # the table this was taken as a write of A_s (TL108); its roles are unknown.
    assert _codes("num_stages=2", "T.gemm_v2(B_s, C_l, A_s)") == []
    # Control: a known write of the copied tile after the copy is TL108.
    # Measured: tilelang 0.1.15 lowering this body for sm_80 stops in
    # PipelinePlanning with "Multiple writes to overlapping buffer regions
    # detected. Stage 0 and stage 2 are both writing to buffer 'A_s'".
    assert _codes("num_stages=2", "T.fill(A_s, 0)") == ["TL108"]
    # The same fill with an argument 0.1.15 does not have: Python rejects the
    # call before any pass runs, so TL108 would not be what the compiler says.
    assert _codes("num_stages=2", "T.fill(A_s, 0, bogus=1)") == []


GEMM_SP = PARITY_DIR / "gemm_sp_ns2.py"


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_gemm_sp_fixture_has_no_tl108(target):
    a = analyze(GEMM_SP.read_text(), str(GEMM_SP), Settings(target=target))
    assert not [d for d in a.diagnostics if d.severity == "error"], \
        [(d.code, d.span.line, d.message) for d in a.diagnostics]
    (kr,) = a.kernels
    (lr,) = kr.loops
    sp = lr.statements[-1].stmt
    assert sp.op == "T.gemm_sp"
    assert [w.buffer for w in sp.writes] == ["C_local"]
    if target == "sm_80":
        # Three global->shared copies feed the gemm_sp; num_stages=2 puts the
        # copies in stage 0 and the consumer in stage 2, and since the copies
        # end up last in the order they are rotated to the front and the
        # consumer drops to stage 1 (the gemm_ns2 rule: [0, 0, 1] / [0, 1, 2]).
        assert [s.stage for s in lr.statements] == [0, 0, 0, 1]
        assert [s.order for s in lr.statements] == [0, 1, 2, 3]


# --------------------------------------------------------------------------
# Parity: the table against the real signatures
# --------------------------------------------------------------------------

_PROBE = r"""
import inspect, json, sys
import tilelang
import tilelang.language as T
out = {"version": tilelang.__version__, "callables": {}}
for name in sorted(T.__all__):
    obj = getattr(T, name, None)
    if obj is None or not callable(obj):
        continue
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        continue
    params = []
    for p in sig.parameters.values():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            ann = ""
        elif not isinstance(ann, str):
            ann = getattr(ann, "__name__", None) or str(ann)
        params.append({"name": p.name, "kind": p.kind.name, "annotation": str(ann),
                       "required": p.default is inspect.Parameter.empty
                                   and p.kind.name not in ("VAR_POSITIONAL", "VAR_KEYWORD")})
    out["callables"][name] = {"params": params, "is_type": isinstance(obj, type),
                              "module": getattr(obj, "__module__", "") or ""}
json.dump(out, sys.stdout)
"""


@lru_cache(maxsize=1)
def _real_signatures() -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


# A parameter takes a buffer when its annotation names a buffer type, or, when
# it has no annotation, when its name is one of the usual operand names.
_BUFFER_ANNOTATION = re.compile(r"Buffer|BarrierType|BufferLoad|BufferRegion|\bTensor\b")
_BUFFER_NAME = re.compile(
    r"buf|ptr|desc|data|barrier|mbar|tmem|smem|^(?:src|dst|A|B|C|E|out|obj|img|col|result|"
    r"target|reducer|accumulator|metadata)$|multiplicand")


def _takes_buffer(params) -> bool:
    for p in params:
        ann = p["annotation"]
        if _BUFFER_ANNOTATION.search(ann) or (not ann and _BUFFER_NAME.search(p["name"])):
            return True
    return False


_KIND = {ops.POSITIONAL: "POSITIONAL_OR_KEYWORD", ops.KEYWORD: "KEYWORD_ONLY",
         ops.VARARGS: "VAR_POSITIONAL"}


def _table_params(spec):
    return [(p.name, _KIND[p.kind], p.required) for p in spec.params]


def _real_params(info):
    return [(p["name"], p["kind"], p["required"]) for p in info["params"]
            if p["kind"] != "VAR_KEYWORD"]


@pytest.mark.parity
def test_table_matches_real_signatures():
    require_tilelang()
    real = _real_signatures()
    assert real["version"].startswith("0.1.15")
    wrong = {}
    for name, spec in ops.OPS.items():
        info = real["callables"].get(name)
        if info is None:
            wrong[name] = "not a callable exported by tilelang.language"
            continue
        if _table_params(spec) != _real_params(info):
            wrong[name] = {"table": _table_params(spec), "real": _real_params(info)}
    assert not wrong, json.dumps(wrong, indent=1)


@pytest.mark.parity
def test_every_buffer_op_is_classified():
    require_tilelang()
    real = _real_signatures()["callables"]
    # Classes (intrinsic emitters, warp-specialization schedule records) are
    # not called as statements.
    missing = sorted(name for name, info in real.items()
                     if not info["is_type"] and _takes_buffer(info["params"])
                     and name not in ops.OPS and name not in ops.NOT_MODELLED)
    assert not missing, ("buffer-taking callables of tilelang.language that are neither in "
                         f"analysis/ops.py's table nor in NOT_MODELLED: {missing}")
    overlap = sorted(set(ops.OPS) & set(ops.NOT_MODELLED))
    assert not overlap, overlap


@pytest.mark.parity
def test_lists_name_real_callables():
    require_tilelang()
    real = _real_signatures()["callables"]
    stale = sorted(n for n in set(ops.NOT_MODELLED) | set(ops.NO_OPERANDS) if n not in real)
    assert not stale, f"not exported by tilelang.language 0.1.15: {stale}"
    with_buffers = sorted(n for n in ops.NO_OPERANDS if _takes_buffer(real[n]["params"]))
    assert not with_buffers, f"NO_OPERANDS entries that take a buffer: {with_buffers}"
    for name in ops.NOT_MODELLED:
        assert ops.NOT_MODELLED[name].strip(), f"{name}: no reason given"


def test_table_is_well_formed():
    for name, spec in ops.OPS.items():
        assert spec.name == name
        assert spec.kind in ("copy", "gemm", "fill", "reduce", "atomic", "call")
        names = [p.name for p in spec.params]
        assert len(names) == len(set(names)), name
        assert all(p.role in ops.ROLES for p in spec.params), name
        assert any(p.role in (ops.READ, ops.WRITE, ops.READWRITE, ops.BARRIER, ops.IGNORE)
                   for p in spec.params), f"{name} takes no buffer"
        if spec.clear is not None:
            operand, flag, _ = spec.clear
            assert spec.param(operand).role == ops.READWRITE and spec.param(flag) is not None
        if spec.in_place is not None:
            dst, src = spec.in_place
            assert spec.param(dst).role == ops.WRITE and spec.param(src).role == ops.READ


def test_fixture_is_a_parity_fixture():
    assert GEMM_SP.exists()
    assert Path(GEMM_SP).read_text().splitlines()[0].startswith("# ")
