"""The hover reads at a glance (issue 19): a summary line first, the schedule
as one row per statement, the steady-state code first, every line at most 100
characters, and the sync calls right around a statement.

Expected values are the compiler's (tilelang 0.1.15), not tilelint's output:
- gemm_ns3 (GEMM 1024³, 128×128×32, num_stages=3) on sm_80, NOTES.md: stage
  [0, 0, 2], order [0, 1, 2], 3 versions of A_shared and B_shared, 49152 B of
  dynamic shared memory (sm_80 allows 166912 B per block), per iteration of
  the generated loop 1 cp.async commit, wait_group<2> and 2 __syncthreads.
  Its CUDA (tests/oracle/lower.py --dump-dir, sm_80) reads, in order:
    prologue: copy A, copy B, commit; copy A, copy B, commit
    loop:     __syncthreads; copy A; copy B; commit; wait<2>; __syncthreads; gemm
    epilogue: wait<1>; __syncthreads; gemm; wait<0>; __syncthreads; gemm
- gemm_ns2 on sm_80, NOTES.md: stage [0, 0, 1], order [0, 1, 2], 2 versions,
  32768 B, 2 commits in all with waits [1, 0], 2 of its 3 __syncthreads in the
  loop (one commit and wait_group<1> per iteration).
- gemm_ns3 on sm_90 is warp-specialized (NOTES.md): the copies go to a producer
  warpgroup (TMA), the gemm stays with the consumers, paced by mbarriers.
- flash_attn_ns2 on sm_80, lowered with tests/oracle/lower.py --dump-dir on
  2026-12-01: (line, stage, order) (33, 0, 2) (34, 2, 0) (35, 2, 1) (36, 2, 3)
  (37, 2, 4) (38, 2, 5) (40, 2, 6) (42, 2, 7) (43, 2, 8) (45, 2, 9) (47, 2, 10)
  (48, 0, 12) (49, 2, 11) (the oracle names the two reduce lines by
  tilelang's reduce_op.py); versions K_shared 2, V_shared 2, Q_shared 1;
  49152 B; generated loop: clear(acc_s); wait<3>; __syncthreads; gemm(Q, K);
  __syncthreads; copy K; commit; copy(m_cur, m_prev) ... copy(acc_s, acc_s_cast);
  wait<3>; __syncthreads; gemm(acc_s_cast, V); __syncthreads; copy V; commit.
  Epilogue: wait<3>, wait<2>, wait<1>, wait<0>, each with a __syncthreads, before
  the gemms of iterations n-2 (Q·K, then ·V) and n-1.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from tilelint.analysis.model import Settings
from tilelint.analysis.pipeline import analyze
from tilelint.server.lsp import hover_text

ROOT = Path(__file__).resolve().parent.parent
PARITY = ROOT / "tests" / "fixtures" / "parity"
ASCEND = ROOT / "tests" / "fixtures" / "ascend"
URI = "file:///home/someone/a/fairly/long/project/path/kernels/attention/fwd.py"


def _analysis(path: Path, target: str):
    return analyze(path.read_text(encoding="utf-8"), str(path), Settings(target=target))


def _loop(name: str, target: str = "sm_80"):
    a = _analysis(PARITY / name, target)
    kr = a.kernels[0]
    return kr, next(lr for lr in kr.loops if lr.pipelined)


def _rows(md: str):
    """Table rows of the schedule: line, statement, stage, order, prologue, steady, epilogue."""
    out = []
    for ln in md.splitlines():
        cells = [c.strip() for c in ln.strip("|").split(" | ")]
        if ln.startswith("| ") and len(cells) == 7 and cells[0] != "line":
            out.append(cells)
    return out


def test_gemm_ns3_sm80_summary_and_table():
    kr, lr = _loop("gemm_ns3.py")
    md = hover_text.loop_hover(kr, lr, "sm_80", uri=URI, path="gemm_ns3.py")
    first, summary = md.splitlines()[:2]
    assert first.startswith("**`T.Pipelined` loop over `k`**")
    parts = summary.split(" · ")
    assert parts[0] == "depth 3"
    assert parts[1] == "×3 A_shared B_shared"  # C_local has one version: not listed
    assert parts[2] == "smem 49152 of 166912 B"
    assert parts[3] == "per iteration 2 sync, 1 commit, wait 2"
    rows = _rows(md)
    # issue order = order [0, 1, 2]; with max stage 2 a stage-0 statement runs
    # iterations 0 and 1 in the prologue and k+2 in the loop, the stage-2 gemm
    # iteration k in the loop and n-2, n-1 in the epilogue.
    assert [r[2:] for r in rows] == [["0", "0", "0, 1", "k+2", "—"],
                                     ["0", "1", "0, 1", "k+2", "—"],
                                     ["2", "2", "—", "k", "n-2, n-1"]]
    lines = (PARITY / "gemm_ns3.py").read_text().splitlines()
    for r, needle in zip(rows, ("T.copy(A", "T.copy(B", "T.gemm("), strict=True):
        m = re.fullmatch(r"\[(\d+)\]\[L(\d+)\]", r[0])
        assert m and m.group(1) == m.group(2), r[0]
        assert needle in lines[int(m.group(1)) - 1]
        assert f"[L{m.group(1)}]: {URI}#L{m.group(1)}" in md.splitlines()
    # The steady state comes first and alone; prologue and epilogue are counts.
    code = md[md.index("```cuda"):]
    code = code[:code.index("```", 3)]
    assert code.splitlines()[1].startswith("for (int k = 0; k < n - 2; ++k)")
    assert [c for c in code.splitlines() if "cp_async" in c or "sync" in c] == [
        "  __syncthreads();", "  cp_async_commit();", "  cp_async_wait<2>();",
        "  __syncthreads();"]
    assert "prologue: `__syncthreads()` ×0, `cp.async` commit ×2" in md
    assert "epilogue: `__syncthreads()` ×2, `cp.async.wait_group` 1, 0" in md
    assert "`tilelint explain gemm_ns3.py`" in md


def test_gemm_ns2_sm80_table_and_summary():
    kr, lr = _loop("gemm_ns2.py")
    md = hover_text.loop_hover(kr, lr, "sm_80")
    summary = md.splitlines()[1].split(" · ")
    assert summary[:3] == ["depth 2", "×2 A_shared B_shared", "smem 32768 of 166912 B"]
    assert summary[3] == "per iteration 2 sync, 1 commit, wait 1"
    assert [r[2:] for r in _rows(md)] == [["0", "0", "0", "k+1", "—"],
                                          ["0", "1", "0", "k+1", "—"],
                                          ["1", "2", "—", "k", "n-1"]]


def _statement(kr, lr, needle: str, target: str = "sm_80") -> str:
    ss = next(s for s in lr.statements if s.stmt.label.startswith(needle))
    return hover_text.statement_hover(kr, lr, ss, target, uri=URI)


def test_statement_hovers_gemm_ns3_sm80():
    kr, lr = _loop("gemm_ns3.py")
    md = _statement(kr, lr, "T.gemm")
    assert "stage **2** · order **2** of 3" in md
    assert "reads: `A_shared` (3 versions), `B_shared` (3 versions), `C_local`" in md
    assert "writes: `C_local`" in md
    # compiler: commit; wait<2>; __syncthreads; gemm — the end of the loop body
    assert ("Steady state, right before it: `cp_async_commit()` `cp_async_wait<2>()` "
            "`__syncthreads()`") in md
    assert "right after it: —" in md
    # compiler epilogue: wait<1>; __syncthreads; gemm; wait<0>; __syncthreads; gemm
    assert ("- epilogue step 0: before `cp_async_wait<1>()` `__syncthreads()` · after "
            "`cp_async_wait<0>()`") in md
    assert "- epilogue step 1: before `cp_async_wait<0>()` `__syncthreads()` · after —" in md
    md = _statement(kr, lr, "T.copy(A")
    assert "stage **0** · order **0** of 3" in md and "writes: `A_shared` (3 versions)" in md
    assert "Steady state, right before it: `__syncthreads()`  \nright after it: —" in md
    md = _statement(kr, lr, "T.copy(B")
    assert "stage **0** · order **1** of 3" in md
    assert ("right after it: `cp_async_commit()` `cp_async_wait<2>()` `__syncthreads()`"
            in md)
    # prologue: copy A, copy B, commit (twice)
    assert "- prologue step 0: before — · after `cp_async_commit()`" in md
    assert "- prologue step 1: before — · after `cp_async_commit()`" in md


def test_statement_hovers_warp_specialized_sm90():
    # The compiler's CUDA for gemm_ns3 on sm_90 (tests/oracle/lower.py --dump-dir):
    #   producer (threadIdx.x < 128): mbarrier[((k % 3) + 3)].wait((((k % 6) / 3) ^ 1));
    #     tma_load(A_desc, mbarrier[(k % 3)], ...); tma_load(B_desc, mbarrier[(k % 3)], ...)
    #   consumer: mbarrier[(k_1 % 3)].wait(((k_1 % 6) / 3)); wgmma ...;
    #     mbarrier[((k_1 % 3) + 3)].arrive();
    # ((k % 6) / 3 is (k / 3) % 2.)  6 mbarriers, 256 threads.
    kr, lr = _loop("gemm_ns3.py", "sm_90")
    assert lr.warp_specialized
    md = hover_text.loop_hover(kr, lr, "sm_90")
    table = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert table[0] == "| line | statement | warpgroup | issues | waits on | signals |"
    rows = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in table[1:4]]
    assert [r[2] for r in rows] == ["producer", "producer", "consumer"]
    assert [r[3] for r in rows] == ["TMA", "TMA", ""]
    assert rows[0][4] == "empty [3+k%3]" and rows[0][5] == "full [k%3]"
    assert rows[2][4] == "full [k%3]" and rows[2][5] == "empty [3+k%3]"
    assert "256 threads: producer threadIdx.x 0–127 (128), consumer 128–255 (128)" in md
    assert "6 mbarriers = 1 group × 3 stages × (full + empty)" in md
    md = _statement(kr, lr, "T.gemm", "sm_90")
    assert "right before it: `mbarrier[k % 3].wait((k / 3) % 2)`" in md
    assert "right after it: `mbarrier[3 + k % 3].arrive()`" in md
    md = _statement(kr, lr, "T.copy(A", "sm_90")
    assert "The producer warpgroup (threads 0–127) issues it as a TMA load" in md
    assert "right before it: `mbarrier[3 + k % 3].wait(((k / 3) % 2) ^ 1)`" in md


def _cases() -> Iterator[Tuple[Path, str]]:
    for p in sorted(PARITY.glob("*.py")):
        for t in ("sm_80", "sm_90"):
            yield p, t
    for p in sorted(ASCEND.glob("*.py")):
        yield p, "ascend"


def _too_wide(md: str):
    return [ln for ln in md.splitlines() if hover_text.visible_width(ln) > hover_text.WIDTH]


def test_visible_width_counts_what_a_reader_sees():
    assert hover_text.visible_width("[12][L12] x") == 4
    assert hover_text.visible_width(f"[L12]: {URI}#L12") == 0
    assert hover_text.visible_width("`a` (b)") == 7


def test_every_hover_line_fits_100_columns():
    """Loop, statement and buffer hovers of every kernel of the parity fixtures
    (sm_80 and sm_90) and the Ascend fixtures (target ascend)."""
    wide = []
    count = 0
    for path, target in _cases():
        a = _analysis(path, target)
        for kr in a.kernels:
            mds = [hover_text.buffer_hover(kr, None, b) for b in kr.buffers]
            for lr in kr.loops:
                mds.append(hover_text.loop_hover(kr, lr, target, uri=URI, path=str(path)))
                if lr.pipelined:
                    mds += [hover_text.statement_hover(kr, lr, ss, target, uri=URI)
                            for ss in lr.statements]
            count += len(mds)
            wide += [(path.name, target, ln) for md in mds for ln in _too_wide(md)]
    assert count > 900
    assert not wide, wide[:5]


@pytest.mark.parametrize("name", ["flash_attn_ns2.py", "mixed_dtypes_smem.py", "gemm_sp_ns2.py"])
def test_whatif_hover_fits(name):
    from tilelint.server.lsp import hover
    st = Settings(target="sm_80")
    a = _analysis(PARITY / name, "sm_80")
    for kr in a.kernels:
        for lr in kr.loops:
            if lr.loop.num_stages_span is None:
                continue
            rows = hover.whatif_rows(a.module, kr.kernel, kr.config_label, st, "sm_80",
                                     lr.loop.span.line)
            md = hover_text.whatif_hover(lr, rows, kr.shared_budget)
            assert len(rows) == 5 and not _too_wide(md), md


def test_flash_attention_sm80_rows_summary_and_statement_sync():
    kr, lr = _loop("flash_attn_ns2.py")
    md = hover_text.loop_hover(kr, lr, "sm_80", uri=URI)
    assert md.splitlines()[1] == ("depth 2 · ×2 K_shared V_shared · smem 49152 of 166912 B · "
                                  "per iteration 4 sync, 2 commits, wait 3, 3")
    rows = _rows(md)
    got = [(int(re.match(r"\[(\d+)\]", r[0]).group(1)), int(r[2]), int(r[3])) for r in rows]
    assert got == [(34, 2, 0), (35, 2, 1), (33, 0, 2), (36, 2, 3), (37, 2, 4), (38, 2, 5),
                   (40, 2, 6), (42, 2, 7), (43, 2, 8), (45, 2, 9), (47, 2, 10), (49, 2, 11),
                   (48, 0, 12)]
    assert all(len(r[1]) <= 38 for r in rows)  # long statements are cut
    code = md[md.index("```cuda"):]
    assert [c.strip() for c in code.splitlines() if "cp_async" in c or "sync" in c][:4] == [
        "cp_async_wait<3>();", "__syncthreads();", "__syncthreads();", "cp_async_commit();"]
    md = _statement(kr, lr, "T.gemm(acc_s_cast")
    assert ("Steady state, right before it: `cp_async_wait<3>()` `__syncthreads()`  \n"
            "right after it: `__syncthreads()`") in md
    assert "- epilogue step 0: before `cp_async_wait<2>()` `__syncthreads()` · after —" in md
    assert "- epilogue step 1: before `cp_async_wait<0>()` `__syncthreads()` · after —" in md
    assert "reads: `acc_s_cast`, `V_shared` (2 versions)" in md
    md = _statement(kr, lr, "T.copy(V[")
    assert "stage **0** · order **12** of 13" in md
    assert "right before it: `__syncthreads()`  \nright after it: `cp_async_commit()`" in md
    md = _statement(kr, lr, "T.copy(acc_s, acc_s_cast)")
    assert "right before it: —  \nright after it: `cp_async_wait<3>()` `__syncthreads()`" in md
    md = _statement(kr, lr, "for i in T.Parallel(block_M)")
    assert "stage **2** · order **5** of 13" in md
    assert "right before it: —  \nright after it: —" in md


def test_ascend_second_loop_has_its_own_schedule():
    """An Ascend kernel with two pipelined loops (the second at line 23, its
    body on lines 24-26): hovering the second loop shows that loop's tasks,
    not a "not modelled" note (every loop is scheduled; the parity suite
    compares each loop's order with the compiler's)."""
    a = _analysis(ASCEND / "gemm_two_loops.py", "ascend")
    (kr,) = a.kernels
    second = next(lr for lr in kr.loops if lr.loop.span.line == 23)
    md = hover_text.loop_hover(kr, second, "ascend", uri=URI, path="gemm_two_loops.py")
    assert "Not modelled" not in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "T." in ln]
    assert sorted(int(re.match(r"\| (\d+)", r).group(1)) for r in rows) == [24, 25, 26]
    assert not _too_wide(md)
