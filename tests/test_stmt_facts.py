"""Facts the passes read from a statement's arguments, never from its label.

``Stmt.label`` is display text: the statement's first source line, cut to 80
characters.  Each case here writes the fact after column 80, or on a later line
of the statement, so a pass that parsed the label would miss it; the passes
read ``Stmt.call`` / ``Stmt.value`` instead.  Expected values are the
compiler's (tilelang 0.1.15, measured with tests/oracle/lower.py; the parity
suite checks them again on every run) or, where said, what the source writes.
"""

from __future__ import annotations

from pathlib import Path

from tilelint.analysis import Settings, analyze, frontend, values
from tilelint.analysis.model import walk_stmts
from tilelint.analysis.planning import is_tma_load
from tilelint.analysis.sync_ascend import annotated_versions

PARITY = Path(__file__).resolve().parent / "fixtures" / "parity"


def _kernel(source: str, name: str):
    module = frontend.parse_module(source)
    kernel = next(k for k in module.kernels if k.name == name)
    return module, kernel


def _schedule(path: Path, target: str):
    analysis = analyze(path.read_text(), str(path), Settings(target=target))
    return {kr.kernel.name: [([s.stage for s in lr.statements], [s.order for s in lr.statements],
                              lr.warp_specialized) for lr in kr.loops]
            for kr in analysis.kernels}


def test_disable_tma_after_column_80_is_read():
    path = PARITY / "long_call_disable_tma.py"
    # Measured, sm_90: no TMA copy, so no warp specialization; PipelinePlanning
    # gives stage [0, 0, 1], order [0, 1, 2] (the sm_80 schedule).
    assert _schedule(path, "sm_90") == {"long_call_disable_tma": [([0, 0, 1], [0, 1, 2], False)]}
    module, kernel = _kernel(path.read_text(), "long_call_disable_tma")
    env = values.build_env(module, kernel)
    allocs = {a.name: a for a in kernel.allocs}
    loads = [s for s in walk_stmts(kernel.body) if s.op == "T.copy" and s.writes
             and s.writes[0].buffer in ("A_shared", "B_shared")]
    assert len(loads) == 2
    for s in loads:
        assert "disable_tma" not in s.label  # cut at column 80 / on the call's third line
        assert s.kwarg_is_true("disable_tma")
        assert not is_tma_load(s, kernel, env, allocs)


def test_the_same_copy_without_disable_tma_is_a_tma_load():
    # The fixture's copies with the keyword removed are TMA loads on sm_90
    # (gemm_ns2.py, the same copies, is warp-specialized there).
    source = (PARITY / "long_call_disable_tma.py").read_text()
    source = source.replace(", disable_tma=True)", ")").replace(",\n                       disable_tma=True)", ")")
    assert "disable_tma=" not in source.split("@T.prim_func")[1]
    module, kernel = _kernel(source, "long_call_disable_tma")
    env = values.build_env(module, kernel)
    allocs = {a.name: a for a in kernel.allocs}
    loads = [s for s in walk_stmts(kernel.body) if s.op == "T.copy" and s.writes
             and s.writes[0].buffer in ("A_shared", "B_shared")]
    assert [is_tma_load(s, kernel, env, allocs) for s in loads] == [True, True]


def test_store_value_after_column_80_is_read():
    # Measured, sm_80.  long_store_scaled: `A_shared[i, j] = A[...] * T.cast(2) - T.cast(1)`
    # (the subtraction starts after column 80) is compute, not a copy: the nest is
    # scheduled with the gemm, stage [1, 0, 1], order [1, 0, 2].
    # multiline_store_cast: `A_shared[i, j] = T.cast(\n A[...], dtype)` is a pure
    # (cast) load from global, a copy stage: stage [0, 0, 1], order [0, 1, 2].
    got = _schedule(PARITY / "long_store_rhs.py", "sm_80")
    assert got == {"long_store_scaled": [([1, 0, 1], [1, 0, 2], False)],
                   "multiline_store_cast": [([0, 0, 1], [0, 1, 2], False)]}


_ASCEND_MACRO = '''
import tilelang.ascend.language as T


def kernel(M=512, N=256, K=1024, bM=128, bN=128, bK=64, ns=2, nb=4):
    @T.macro
    def versions(A_l1, B_l1):
        T.annotate_buffer_versions({A_l1: 2, B_l1: 2, A_l1_second_operand_buffer: 3, B_l1_last: 4})

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(nb) as bx:
            A_l1 = T.alloc_l1((bM, bK), "float16")
            B_l1 = T.alloc_l1((bN, bK), "float16")
            C_l0c = T.alloc_l0c((bM, bN), "float32")
            versions(A_l1, B_l1)
            for k in T.Pipelined(K // bK, num_stages=ns):
                T.copy(A[bx * bM:(bx + 1) * bM, k * bK:(k + 1) * bK], A_l1)
                T.copy(B[0:bN, k * bK:(k + 1) * bK], B_l1)
                T.gemm(A_l1, B_l1, C_l0c, transpose_B=True, clear_accum=(k == 0), transpose_A=True)
            T.copy(C_l0c, C[bx * bM, 0])

    return main
'''


def test_version_map_after_column_80_is_read():
    # An annotation inside a macro is a statement (the kernel's attributes hold
    # the top-level calls only).  Expected: every entry the source writes,
    # the last two of which start after column 80.
    module, kernel = _kernel(_ASCEND_MACRO, "main")
    ann = [s for s in walk_stmts(kernel.body) if s.op == "T.annotate_buffer_versions"]
    assert len(ann) == 1 and "B_l1_last" not in ann[0].label
    assert annotated_versions(kernel, values.build_env(module, kernel)) == {
        "A_l1": 2, "B_l1": 2, "A_l1_second_operand_buffer": 3, "B_l1_last": 4}


def test_gemm_keyword_after_column_80_is_read():
    # What the source writes: transpose_A=True, after column 80.
    _, kernel = _kernel(_ASCEND_MACRO, "main")
    gemm = next(s for s in walk_stmts(kernel.body) if s.op == "T.gemm")
    assert "transpose_A=True" not in gemm.label
    assert gemm.kwarg_is_true("transpose_A") and gemm.kwarg_is_true("transpose_B")
    assert not gemm.kwarg_is_true("clear_accum")  # written, but not the literal True
