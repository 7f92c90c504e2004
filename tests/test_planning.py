"""PipelinePlanning mirror, on hand-built loops.

Expected stage/order lists marked "measured" were read from tilelang 0.1.15's
``software_pipeline_stage`` / ``software_pipeline_order`` annotations after
tl.PipelinePlanning (sm_80 unless said otherwise); the others carry their
reasoning in a comment.
"""

import ast

from tilelint.analysis.model import (
    Access,
    Alloc,
    BinOp,
    Call,
    Const,
    Loop,
    Name,
    Span,
    Stmt,
    Subscript,
    TupleExpr,
)
from tilelint.analysis.planning import Region, analyse_body, is_copy_stage, may_conflict, plan_loop
from tilelint.analysis.rules import (
    RULES,
    RULES_BY_CODE,
    remove_argument_edit,
    renumbered_orders,
    validate_loop,
)


def sp(line, col=16, end=60):
    return Span(line, col, line, end)


def acc(buf, line, indices=None):
    return Access(buf, sp(line), indices)


_I0_I1 = (Name("i0"), Name("i1"))


def copy(src, dst, line, src_idx=_I0_I1):
    return Stmt("copy", "T.copy", sp(line), reads=(acc(src, line, src_idx),),
                writes=(acc(dst, line),), label=f"T.copy({src}, {dst})")


def gemm(a, b, c, line):
    return Stmt("gemm", "T.gemm", sp(line), reads=(acc(a, line), acc(b, line), acc(c, line)),
                writes=(acc(c, line),), label=f"T.gemm({a}, {b}, {c})")


def clear(buf, line):
    return Stmt("fill", "T.clear", sp(line), writes=(acc(buf, line),), label=f"T.clear({buf})")


def alloc(name, shape, scope="shared.dyn", dtype="float16"):
    return Alloc(name, "alloc_shared" if scope.startswith("shared") else "alloc_fragment",
                 scope, tuple(Const(s) for s in shape), Const(dtype), sp(1), sp(1))


ALLOCS = {a.name: a for a in (
    alloc("A_s", (128, 32)), alloc("B_s", (32, 128)), alloc("B2_s", (32, 128)),
    alloc("C_l", (128, 128), "local.fragment", "float32"),
)}


def loop(body, num_stages=None, order=None, stage=None, pa=0, source_line=18):
    ns = None if num_stages is None else Const(num_stages)
    return Loop(var="k", kind="pipelined", span=Span(source_line, 12, 30, 0),
                iter_span=Span(source_line, 21, source_line, 70), start=Const(0),
                stop=Const(16), num_stages=ns,
                num_stages_span=None if ns is None else Span(source_line, 40, source_line, 52),
                order=None if order is None else tuple(Const(x) for x in order),
                order_span=None if order is None else Span(source_line, 60, source_line, 69),
                stage=None if stage is None else tuple(Const(x) for x in stage),
                stage_span=None if stage is None else Span(source_line, 77, source_line, 86),
                body=tuple(body), pipelined_ancestors=pa)


GEMM_BODY = [copy("A", "A_s", 19), copy("B", "B_s", 20), gemm("A_s", "B_s", "C_l", 21)]


def stages_orders(res):
    return [s.stage for s in res.statements], [s.order for s in res.statements]


def plan(lp, target="sm_80", ws=False):
    res, diags = plan_loop(lp, None, target, ALLOCS, ws)
    return res, diags


# ---------------------------------------------------------------- auto planning


def test_gemm_num_stages_measured():
    # measured, GEMM fp16 tile 128x128x32 on sm_80
    expected = {
        1: ([0, 0, 1], [1, 2, 0]),
        2: ([0, 0, 1], [0, 1, 2]),
        3: ([0, 0, 2], [0, 1, 2]),
        4: ([0, 0, 3], [0, 1, 2]),
    }
    for ns, want in expected.items():
        res, diags = plan(loop(GEMM_BODY, ns))
        assert res.pipelined and not diags
        assert stages_orders(res) == want, ns
        assert res.depth == ns


def test_num_stages_zero_not_pipelined():
    # T.Pipelined(n, num_stages=0) adds no annotation: a plain serial loop.
    res, _ = plan(loop(GEMM_BODY, 0))
    assert not res.pipelined and "num_stages" in res.note


def test_interleaved_copies_keep_stage_n():
    # measured: copy A, copy B, gemm(A,B), copy B2, gemm(A,B2) with ns=1/2/3 gives
    # stage [0,0,ns,0,ns], order [3,1,0,4,2]: copy A's last consumer is the second
    # gemm, so the copies are not all last in the order and no rotation happens.
    body = [copy("A", "A_s", 19), copy("B", "B_s", 20), gemm("A_s", "B_s", "C_l", 21),
            copy("B", "B2_s", 22), gemm("A_s", "B2_s", "C_l", 23)]
    for ns in (1, 2, 3):
        res, _ = plan(loop(body, ns))
        assert stages_orders(res) == ([0, 0, ns, 0, ns], [3, 1, 0, 4, 2])


def test_flash_attention_body_measured():
    # measured (sm_80): copy K; clear acc_s; gemm(Q,K,acc_s); reduce_max; Parallel
    # exp2; copy acc_s->cast; copy V; gemm(cast,V,acc_o) with ns=2.
    allocs = dict(ALLOCS)
    for n, shp, scope in (("Q_s", (128, 64), "shared.dyn"), ("K_s", (64, 64), "shared.dyn"),
                          ("V_s", (64, 64), "shared.dyn"),
                          ("acc_s", (128, 64), "local.fragment"),
                          ("acc_c", (128, 64), "local.fragment"),
                          ("acc_o", (128, 64), "local.fragment"), ("m", (128,), "local.fragment")):
        allocs[n] = alloc(n, shp, scope)
    i, j = Name("i"), Name("j")
    par = Stmt("parallel", "for", sp(24), children=(
        Stmt("store", "=", sp(25), reads=(acc("acc_s", 25, (i, j)), acc("m", 25, (i,))),
             writes=(acc("acc_s", 25, (i, j)),), label="acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])",
             value=Call("T.exp2", (BinOp("-", Subscript(Name("acc_s"), TupleExpr((i, j))),
                                        Subscript(Name("m"), i)),))),),
        reads=(acc("acc_s", 25, (i, j)), acc("m", 25, (i,))), writes=(acc("acc_s", 25, (i, j)),))
    body = [copy("K", "K_s", 19), clear("acc_s", 20), gemm("Q_s", "K_s", "acc_s", 21),
            Stmt("reduce", "T.reduce_max", sp(22), reads=(acc("acc_s", 22), acc("m", 22)),
                 writes=(acc("m", 22),)),
            par,
            Stmt("copy", "T.copy", sp(26), reads=(acc("acc_s", 26),), writes=(acc("acc_c", 26),)),
            copy("V", "V_s", 27), gemm("acc_c", "V_s", "acc_o", 28)]
    res, _ = plan_loop(loop(body, 2), None, "sm_80", allocs, False)
    assert stages_orders(res) == ([0, 2, 2, 2, 2, 2, 0, 2], [2, 0, 1, 3, 4, 5, 7, 6])


def test_parallel_copy_nest_is_a_copy_stage():
    # measured (sm_80 and sm_90): T.Parallel nests storing A[...] into A_s are copy
    # stages: stage [0, 0, 1] with ns=2, like T.copy.
    i, j = Name("i"), Name("j")

    def pcopy(src, dst, line):
        st = Stmt("store", "=", sp(line + 1), reads=(acc(src, line + 1, (i, j)),),
                  writes=(acc(dst, line + 1, (i, j)),), label=f"{dst}[i, j] = {src}[i, j]",
                  value=Subscript(Name(src), TupleExpr((i, j))))
        return Stmt("parallel", "for", sp(line), reads=st.reads, writes=st.writes, children=(st,))
    body = [pcopy("A", "A_s", 19), pcopy("B", "B_s", 21), gemm("A_s", "B_s", "C_l", 23)]
    assert is_copy_stage(body[0], ALLOCS)
    res, _ = plan(loop(body, 2))
    assert stages_orders(res) == ([0, 0, 1], [0, 1, 2])


def test_parallel_with_arithmetic_is_not_a_copy():
    # A store whose value is not a plain load (x * 2) is compute, not a copy.
    i, j = Name("i"), Name("j")
    st = Stmt("store", "=", sp(20), reads=(acc("A", 20, (i, j)),), writes=(acc("A_s", 20, (i, j)),),
              label="A_s[i, j] = A[i, j] * 2",
              value=BinOp("*", Subscript(Name("A"), TupleExpr((i, j))), Const(2)))
    par = Stmt("parallel", "for", sp(19), reads=st.reads, writes=st.writes, children=(st,))
    assert not is_copy_stage(par, ALLOCS)


def test_if_without_else_splits_per_statement():
    # measured: `if bx > 0:` around both copies gives 3 scheduled units on sm_80
    # (IfStmtBinding guards each statement separately), stage [0,0,1] with ns=2.
    cond = Stmt("if", "if", sp(19), children=(copy("A", "A_s", 20), copy("B", "B_s", 21)),
                reads=(), writes=())
    body = [cond, gemm("A_s", "B_s", "C_l", 22)]
    ba = analyse_body(loop(body, 2))
    assert len(ba.scheduled) == 3
    res, _ = plan(loop(body, 2))
    assert stages_orders(res) == ([0, 0, 1], [0, 1, 2])


def test_rocm_drops_pipelining():
    res, _ = plan(loop(GEMM_BODY, 3), target="gfx942")
    assert not res.pipelined
    diags = validate_loop(res, ALLOCS, "gfx942")
    assert [d.code for d in diags] == ["TL110"]
    res, _ = plan(loop(GEMM_BODY, 3), target="gfx950")
    assert res.pipelined


def test_no_copy_stage_is_not_overlappable():
    # Without copies every statement gets stage num_stages; InjectSoftwarePipeline
    # leaves a loop whose statements share one stage unpipelined.
    res, _ = plan(loop([gemm("A_s", "B_s", "C_l", 19)], 2))
    assert not res.pipelined


def test_nested_pipelined_inner_not_planned():
    # measured (nested_pipelined fixture): the inner loop keeps its raw num_stages and
    # is not pipelined; planning never visits the body of a planned loop.
    res, _ = plan(loop(GEMM_BODY, 2, pa=1))
    assert not res.pipelined
    assert [d.code for d in validate_loop(res, ALLOCS, "sm_80")] == ["TL109"]


# ---------------------------------------------------------------- binds


def test_integer_alias_vanishes_and_buffer_alias_is_replayable():
    # `base = k * 32` (integer, pure) is inlined by Simplify before planning;
    # `kk = Ids[k]` reads a buffer the loop never writes: replayable, no slot.
    base = Stmt("bind", "=", sp(19), target="base", value=BinOp("*", Name("k"), Const(32)))
    kk = Stmt("bind", "=", sp(20), reads=(acc("Ids", 20, (Name("k"),)),), target="kk",
              value=Name("Ids"))
    ba = analyse_body(loop([base, kk] + GEMM_BODY, 2))
    assert len(ba.scheduled) == 3 and len(ba.replayable) == 1 and len(ba.inlined) == 1


def test_manual_lists_counting_a_buffer_alias_are_accepted():
    # measured (bind_counted_compat): order=[0,1,2,3] for `kk = Ids[k]` + 3 statements
    # is accepted (executable-count compatibility rule).
    kk = Stmt("bind", "=", sp(19), reads=(acc("Ids", 19, (Name("k"),)),), target="kk",
              value=Name("Ids"))
    res, diags = plan(loop([kk] + GEMM_BODY, order=[0, 1, 2, 3], stage=[0, 0, 0, 1]))
    assert not diags
    assert stages_orders(res) == ([0, 0, 1], [1, 2, 3])


def test_manual_lists_counting_an_integer_alias_fail():
    # measured (invalid_tl104_bind_counted): `base: T.int32 = k * 32` is removed before
    # planning, so 4 entries for 3 statements is a PipelinePlanning error.
    base = Stmt("bind", "=", sp(19), target="base", value=BinOp("*", Name("k"), Const(32)))
    res, diags = plan(loop([base] + GEMM_BODY, order=[0, 1, 2, 3], stage=[0, 0, 0, 1]))
    assert [d.code for d in diags] == ["TL104"]
    assert diags[0].span.line == 18
    assert res.note == diags[0].note and "length does not match" in res.note


def test_copy_feeding_a_scalar_producer_cannot_be_placed():
    # measured (bind_reads_written_buffer): T.copy(Ids[k], Idx_s); kk = Idx_s[0];
    # copies using kk; gemm -> "The number of stages should be equal ..." (no span).
    allocs = dict(ALLOCS, Idx_s=alloc("Idx_s", (1,), dtype="int32"))
    kk_use = (BinOp("*", Name("kk"), Const(32)),)
    body = [copy("Ids", "Idx_s", 19, (Name("k"),)),
            Stmt("bind", "=", sp(20), reads=(acc("Idx_s", 20, (Const(0),)),), target="kk",
                 value=Name("Idx_s")),
            copy("A", "A_s", 21, (Name("by"),) + kk_use), copy("B", "B_s", 22, kk_use + (Name("bx"),)),
            gemm("A_s", "B_s", "C_l", 23)]
    res, diags = plan_loop(loop(body, 2), None, "sm_80", allocs, False)
    assert [d.code for d in diags] == ["TL112"] and diags[0].span.line == 19
    # What explain says about the loop: the compiler's complaint is the stage
    # count, not overlapping writes (that is TL108's note, below).
    assert not res.pipelined and res.note == diags[0].note
    assert "cannot place" in res.note and "overlapping" not in res.note


# ---------------------------------------------------------------- manual path


def test_manual_schedule_taken_as_given():
    res, diags = plan(loop(GEMM_BODY, order=[1, 2, 0], stage=[0, 0, 1]))
    assert res.manual and res.pipelined and not diags
    assert stages_orders(res) == ([0, 0, 1], [1, 2, 0])
    assert res.depth == 2  # max(stage) + 1


def test_manual_with_num_stages_depth_is_num_stages():
    # GetPipelineNumStages reads the num_stages annotation first (left on the loop).
    res, _ = plan(loop(GEMM_BODY, 2, order=[0, 1, 2], stage=[0, 0, 3]))
    assert res.depth == 2


def test_order_without_stage_is_silently_not_pipelined():
    res, _ = plan(loop(GEMM_BODY, order=[0, 1, 2]))
    assert not res.pipelined
    assert [d.code for d in validate_loop(res, ALLOCS, "sm_80")] == ["TL105"]


def test_warp_specialized_ignores_manual_schedule():
    # measured (sm_90): num_stages + order/stage with TMA copies -> warp-specialized,
    # even a duplicate order raises nothing.
    lp = loop(GEMM_BODY, 2, order=[0, 0, 1], stage=[0, 0, 1])
    res, diags = plan(lp, target="sm_90", ws=True)
    assert res.warp_specialized and res.pipelined and res.depth == 2
    codes = [d.code for d in validate_loop(res, ALLOCS, "sm_90")]
    assert "TL111" in codes and "TL106" in codes and "TL101" not in codes


# ---------------------------------------------------------------- validation


def test_duplicate_order_blames_second_statement_and_fix_renumbers():
    # measured: error span --> line of `T.copy(B, B_s)` (the second statement with order 0)
    res, _ = plan(loop(GEMM_BODY, order=[0, 0, 1], stage=[0, 0, 1]))
    diags = [d for d in validate_loop(res, ALLOCS, "sm_80") if d.code == "TL101"]
    assert len(diags) == 1 and diags[0].span.line == 20
    edit = diags[0].fixes[0].edits[0]
    assert edit.new_text == "[0, 1, 2]" and edit.span == res.loop.order_span


def test_renumber_keeps_relative_order():
    assert renumbered_orders([2, 0, 2, 1]) == [2, 0, 3, 1]


def test_stage_inversion_blames_consumer():
    # measured: stage=[1, 0, 0] -> error --> line of the gemm
    res, _ = plan(loop(GEMM_BODY, order=[0, 1, 2], stage=[1, 0, 0]))
    diags = validate_loop(res, ALLOCS, "sm_80")
    assert [(d.code, d.span.line) for d in diags] == [("TL102", 21)]
    assert diags[0].related[0].span.line == 19


def test_reorder_in_stage_blames_consumer():
    # measured: order=[1, 2, 0], stage=[0, 0, 0] -> error --> line of the gemm
    res, _ = plan(loop(GEMM_BODY, order=[1, 2, 0], stage=[0, 0, 0]))
    diags = validate_loop(res, ALLOCS, "sm_80")
    assert [(d.code, d.span.line) for d in diags] == [("TL103", 21)]


def test_multiple_async_stages():
    # measured: order=[0,1,2], stage=[0,1,2] -> "A dependency on multiple async stages"
    res, _ = plan(loop(GEMM_BODY, order=[0, 1, 2], stage=[0, 1, 2]))
    assert [(d.code, d.span.line) for d in validate_loop(res, ALLOCS, "sm_80")] == [("TL107", 21)]


def test_overlapping_copy_and_later_write():
    # measured (invalid_tl108_overlap_write): a copy into A_s and a later write of A_s
    # -> "Multiple writes to overlapping buffer regions" in planning (no span).
    body = [copy("A", "A_s", 19), clear("A_s", 20), gemm("A_s", "B_s", "C_l", 21)]
    res, diags = plan(loop(body, 2))
    assert [(d.code, d.span.line) for d in diags] == [("TL108", 20)]
    assert res.note == "compile error: overlapping writes in different stages"


def test_num_stages_with_manual_fix_leaves_valid_python():
    src = ("for k in T.Pipelined(n, num_stages=2, order=[0, 1, 2], stage=[0, 0, 3]):\n"
           "    pass\n")
    start = src.index("num_stages")
    span = Span(1, start, 1, start + len("num_stages=2"))
    edit = remove_argument_edit(src, span)
    new = src[:edit.span.col] + edit.new_text + src[edit.span.end_col:]
    assert new.startswith("for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 3]):")
    ast.parse(new)
    # last argument: the comma before goes
    src2 = "for k in T.Pipelined(n, order=[0, 1], stage=[0, 1], num_stages=2):\n    pass\n"
    start = src2.index("num_stages")
    edit = remove_argument_edit(src2, Span(1, start, 1, start + len("num_stages=2")))
    new2 = src2[:edit.span.col] + edit.new_text + src2[edit.span.end_col:]
    assert "num_stages" not in new2 and "stage=[0, 1])" in new2
    ast.parse(new2)


def test_region_conflict():
    full = Region("S", ((0, 64), (0, 32)))
    assert may_conflict(full, Region("S", ((0, 1), (0, 1))))
    assert not may_conflict(Region("S", ((0, 32), (0, 32))), Region("S", ((32, 64), (0, 32))))
    assert may_conflict(Region("S", ((None, None), (0, 32))), Region("S", ((32, 64), (0, 32))))


def test_registry_complete():
    codes = {"TL001", "TL002", *(f"TL1{i:02d}" for i in range(1, 12)), "TL201", "TL202",
             "TL203", "TL301", "TL302", "TL303", "TL900", "TL910", "TL911"}
    assert codes <= set(RULES_BY_CODE)
    for r in RULES:
        assert r.severity in ("error", "warning", "information", "hint")
        assert r.name == r.name.lower() and " " not in r.name
        if r.code.startswith("TL1"):
            assert r.what and r.why and r.bad_example and r.good_example and r.fix
