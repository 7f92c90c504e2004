"""Buffer versions (InjectSoftwarePipeline) on hand-built loops.

"measured" values are the leading dimension tilelang 0.1.15 gave the shared
buffers after tl.InjectSoftwarePipeline (sm_80, GEMM 512^3, 128x128x32)."""

from tilelint.analysis.model import (
    Access,
    Alloc,
    Const,
    Loop,
    LoopResult,
    ScheduledStmt,
    Slice,
    Span,
    Stmt,
)
from tilelint.analysis.planning import plan_loop
from tilelint.analysis.versions import compute_versions


def sp(line):
    return Span(line, 16, line, 60)


def acc(buf, line, indices=None):
    return Access(buf, sp(line), indices)


def copy(src, dst, line, dst_idx=None):
    return Stmt("copy", "T.copy", sp(line), reads=(acc(src, line, (Const(0), Const(0))),),
                writes=(acc(dst, line, dst_idx),))


def gemm(a, b, c, line, a_idx=None):
    return Stmt("gemm", "T.gemm", sp(line), reads=(acc(a, line, a_idx), acc(b, line), acc(c, line)),
                writes=(acc(c, line),))


def alloc(name, shape, scope="shared.dyn"):
    return Alloc(name, "alloc_shared", scope, tuple(Const(s) for s in shape), Const("float16"),
                 sp(1), sp(1))


ALLOCS = {a.name: a for a in (alloc("A_s", (128, 32)), alloc("B_s", (32, 128)),
                              alloc("B2_s", (32, 128)),
                              alloc("C_l", (128, 128), "local.fragment"))}
GEMM_BODY = (copy("A", "A_s", 19), copy("B", "B_s", 20), gemm("A_s", "B_s", "C_l", 21))


def loop(body, ns=None, order=None, stage=None):
    return Loop("k", "pipelined", Span(18, 12, 22, 0), Span(18, 21, 18, 70), Const(0), Const(16),
                num_stages=None if ns is None else Const(ns),
                num_stages_span=None if ns is None else Span(18, 40, 18, 52),
                order=None if order is None else tuple(Const(x) for x in order),
                order_span=None if order is None else Span(18, 60, 18, 69),
                stage=None if stage is None else tuple(Const(x) for x in stage),
                stage_span=None if stage is None else Span(18, 77, 18, 86), body=tuple(body))


def versions(lp, target="sm_80", ws=False):
    res, _ = plan_loop(lp, None, target, ALLOCS, ws)
    return {v.buffer: v.versions for v in compute_versions(res, ALLOCS)}


def test_gemm_versions_measured():
    # measured: ns=1 -> 1 (use-def+1 = 2, tightened: the gemm (order 0) is ordered
    # before the copies); ns=2 -> 2; ns=3 -> 3; ns=4 -> 4; ns=0 -> 1.
    for ns, want in ((0, 1), (1, 1), (2, 2), (3, 3), (4, 4)):
        v = versions(loop(GEMM_BODY, ns))
        assert v["A_s"] == want and v["B_s"] == want, ns
        assert v["C_l"] == 1


def test_manual_num_stages_ignored_by_versions_measured():
    # measured: num_stages=2 with stage=[0, 0, 3] gives 4 versions on sm_80
    # (use 3 - def 0 + 1 = 4; the copies (order 0, 1, stage 0) precede the gemm
    # (order 2, stage 3) on overlapping regions, so no tightening).
    v = versions(loop(GEMM_BODY, 2, order=[0, 1, 2], stage=[0, 0, 3]))
    assert v["A_s"] == 4


def test_manual_permuted_order_tightens():
    # order=[1, 2, 0], stage=[0, 0, 1]: use-def+1 = 2 but the gemm (reader) has
    # order 0 < the copies' orders, so no writer precedes a reader: 1 version
    # (measured on the manual_order_120_stage_001 fixture).
    v = versions(loop(GEMM_BODY, order=[1, 2, 0], stage=[0, 0, 1]))
    assert v["A_s"] == 1


def test_interleaved_versions_measured():
    # measured: interleaved copies with ns=2 -> 2 versions for A_s, B_s, B2_s
    # (use-def+1 = 3; every copy comes after its readers in the order: tightened).
    body = (copy("A", "A_s", 19), copy("B", "B_s", 20), gemm("A_s", "B_s", "C_l", 21),
            copy("B", "B2_s", 22), gemm("A_s", "B2_s", "C_l", 23))
    v = versions(loop(body, 2))
    assert (v["A_s"], v["B_s"], v["B2_s"]) == (2, 2, 2)


def test_tightening_needs_overlap():
    # Manual: a copy writes A_s rows 0:64 (stage 0, order 0) and the gemm reads from
    # row 64 (stage 1, order 1).  The reader's region the compiler compares is the
    # base point of its operand, A_s[64, 0], which lies outside rows 0:64, so
    # MayConflict is false and one version is removed: 2 - 1 = 1.
    body = (copy("A", "A_s", 19, (Slice(Const(0), Const(64)), Slice(None, None))),
            gemm("A_s", "B_s", "C_l", 20, (Slice(Const(64), Const(128)), Slice(None, None))))
    v = versions(loop(body, order=[0, 1], stage=[0, 1]))
    assert v["A_s"] == 1
    # Same with an overlapping read: the writer precedes the reader in order and
    # stage on overlapping data, so both versions stay.
    body = (body[0], gemm("A_s", "B_s", "C_l", 20))
    assert versions(loop(body, order=[0, 1], stage=[0, 1]))["A_s"] == 2


def test_buffer_not_written_in_loop_keeps_one_version():
    # def == -1: a buffer the loop only reads (Q_s loaded before the loop).
    allocs = dict(ALLOCS, Q_s=alloc("Q_s", (128, 32)))
    body = (copy("B", "B_s", 19), gemm("Q_s", "B_s", "C_l", 20))
    res, _ = plan_loop(loop(body, 3), None, "sm_80", allocs, False)
    v = {x.buffer: x for x in compute_versions(res, allocs)}
    assert v["Q_s"].versions == 1 and v["B_s"].versions == 3


def test_warp_specialized_versions_are_num_stages():
    # measured (sm_90, warp-specialized): versions = num_stages, also 1 for ns=1.
    for ns in (1, 2, 3):
        v = versions(loop(GEMM_BODY, ns), target="sm_90", ws=True)
        assert v["A_s"] == ns and v["B_s"] == ns


def test_not_pipelined_is_one_version():
    res = LoopResult(loop=loop(GEMM_BODY), pipelined=False, num_stages=None, depth=None,
                     statements=tuple(ScheduledStmt(s, None, None) for s in GEMM_BODY))
    assert all(v.versions == 1 for v in compute_versions(res, ALLOCS))
