"""``tilelint explain FILE --format html`` (analysis/render_html.py, server/cli.py).

Expected values, and where they come from:
- examples/gemm_clean.py (GEMM 1024³ fp16, tile 128×128×32, 128 threads,
  num_stages=3): the compiler gives stage [0, 0, 2], 3 versions, a 49152 B
  dynamic arena on sm_80 and sm_90, 3 cp.async commits and wait_group 2, 1, 0
  on sm_80 (../shared/NOTES.md, "CUDA facts"; tests/test_cli.py's docstring).
  On sm_90 it is warp-specialized: 128 + 128 = 256 threads and 2 × 3 = 6
  mbarriers of 8 bytes (static __shared__, analysis/packing.py's docstring):
  49152 + 48 = 49200 B.
- Blocks per SM (CUDA C++ Programming Guide, per-SM limits; every block also
  takes the 1 KB the system reserves, rounded up to the 128-byte granule of
  CUDA's occupancy calculator, and the opt-in budgets are the SM's shared
  memory less that 1 KB; tests/test_occupancy.py checks the rules against
  cuda_occupancy.h):
  sm_80: shared memory 166912 + 1024 = 167936 B per SM, a block takes
  49152 + 1024 = 50176 B (a multiple of 128): 3 blocks; threads 2048 / 128 = 16.
  sm_90: 49200 + 1024 = 50224 B, rounded to 50304: 233472 // 50304 = 4 blocks;
  threads 2048 / 256 = 8.
- Registers (estimate): C_local is 128×128 float32 = 65536 B over the 128
  threads that hold it (the consumer warpgroup on sm_90) = 512 B = 128
  registers per thread at least.  128 × 32 = 4096 registers per warp; each of
  the 4 sub-partitions holds 16384 / 4096 = 4 warps, 16 warps per SM, i.e. 4
  blocks of 4 warps on sm_80 and 2 blocks of 8 warps on sm_90.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze, render_html
from tilelint.server import cli

REPO = Path(__file__).resolve().parent.parent
GEMM = REPO / "examples" / "gemm_clean.py"
AUTOTUNE = REPO / "tests" / "fixtures" / "autotune" / "autotune_gemm.py"
PARITY = REPO / "tests" / "fixtures" / "parity"
ASCEND = REPO / "tests" / "fixtures" / "ascend" / "gemm_ns2.py"
SVG_NS = "{http://www.w3.org/2000/svg}"
ARTIFACTS = Path(os.environ.get("TILELINT_ARTIFACTS") or REPO / "build" / "test-artifacts")
README_SHOT = REPO / "docs" / "images" / "explain_page.png"


def run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def gemm_page():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(["explain", str(GEMM), "--format", "html", "--targets", "sm_80,sm_90"])
    assert rc == 0
    return buf.getvalue()


def svgs(page):
    """Every top-level <svg> element of the page, parsed (a parse error fails)."""
    out = []
    for m in re.finditer(r"<svg\b.*?</svg>", page, re.S):
        out.append(ET.fromstring(m.group(0)))
    return out


def by_class(root, cls):
    return [e for e in root.iter() if cls in (e.get("class") or "").split()]


def rows_of(page):
    """Each instance × target row of the table: its data attributes and the
    text of each cell, by the cell's first class."""
    out = []
    for m in re.finditer(r"<tr (data-kernel=[^>]*)>(.*?)</tr>", page, re.S):
        row = dict(re.findall(r'data-(\w+)="([^"]*)"', m.group(1)))
        for cls, text in re.findall(r'<td class="([\w-]+)[^"]*"[^>]*>(.*?)</td>', m.group(2)):
            if cls == "l":
                continue
            row[cls] = re.sub(r"<[^>]+>", "", text)
        if "bind" not in row:  # the instance's cells span its targets' rows
            assert out and out[-1]["instance"] == row["instance"]
            row["bind"] = out[-1]["bind"]
        out.append(row)
    return out


# --------------------------------------------------------------------------
# The page itself
# --------------------------------------------------------------------------


def test_page_is_self_contained(gemm_page):
    low = gemm_page.lower()
    assert low.startswith("<!doctype html>")
    for bad in ("<script", "<link", "@import", "url(", " src=", "href=", "<iframe", "<img",
                "@font-face", "javascript:"):
        assert bad not in low, bad
    # the only address is the SVG namespace (a name, never fetched)
    urls = set(re.findall(r"https?://[^\s\"'<>]+", gemm_page))
    assert urls == {"http://www.w3.org/2000/svg"}


def test_every_svg_is_well_formed(gemm_page):
    roots = svgs(gemm_page)
    assert all(r.tag == SVG_NS + "svg" for r in roots)
    timelines = [r for r in roots if r.get("class") == "timeline"]
    arenas = [r for r in roots if r.get("class") == "arena"]
    # one pipelined loop and one arena per target
    assert len(timelines) == 2 and len(arenas) == 2
    # the whole page parses as XML too once the doctype is dropped (no stray tags)
    ET.fromstring(gemm_page.split(">", 1)[1])


def test_sections_marked(gemm_page):
    tl = [r for r in svgs(gemm_page) if r.get("class") == "timeline"][0]
    secs = [g.get("data-section") for g in by_class(tl, "col")]
    # 2 prologue steps (max stage 2), the steady state, 2 epilogue steps
    assert secs == ["prologue", "prologue", "body", "body", "epilogue", "epilogue"]
    names = [t.text for t in tl.iter(SVG_NS + "text") if t.get("class") == "sec"]
    assert names == ["prologue", "steady state", "epilogue"]


# --------------------------------------------------------------------------
# The table: the same numbers as the JSON output, and the occupancy reasoning
# --------------------------------------------------------------------------


def test_table_values_gemm(gemm_page):
    rows = rows_of(gemm_page)
    cols = ("target", "threads", "arena", "total", "limit", "fits", "by-shared", "by-threads",
            "blocks", "fragment", "registers", "by-registers")
    got = [tuple(r[c] if c != "target" else r["target"] for c in cols) for r in rows]
    assert got == [
        ("sm_80", "128", "49152", "49152", "166912", "yes", "3", "16", "3", "512", "≥ 128", "4"),
        ("sm_90", "256 (WS)", "49152", "49200", "232448", "yes", "4", "8", "4", "512", "≥ 128",
         "2")]
    assert "Registers per thread are an estimate" in gemm_page


def test_table_equals_json_every_autotune_config(capsys):
    rc, out, _ = run(capsys, "explain", AUTOTUNE, "--format", "json", "--all-bindings",
                     "--targets", "sm_80,sm_90")
    assert rc == 0
    docs = json.loads(out)
    rc, page, _ = run(capsys, "explain", AUTOTUNE, "--format", "html",
                      "--targets", "sm_80,sm_90")
    assert rc == 0
    rows = rows_of(page)
    assert len(rows) == 2 * 16  # 16 configurations (2 × 2 × 4) × 2 targets
    for doc in docs:
        mine = [r for r in rows if r["target"] == doc["target"]]
        assert len(mine) == len(doc["kernels"])
        for r, k in zip(mine, doc["kernels"], strict=True):
            assert r["kernel"] == k["name"]
            assert int(r["arena"]) == k["shared"]["bytes"]
            assert int(r["total"]) == k["shared"]["total_bytes"]
            assert r["threads"].split()[0] == str(k["threads"])
            assert r["instance"] in r["bind"] or r["instance"] == "defaults" or all(
                part in r["bind"] for part in r["instance"].split(", "))
    # fits: shared bytes against each budget (the budgets of analysis/targets.py)
    for r in rows:
        budget = {"sm_80": 166912, "sm_90": 232448}[r["target"]]
        assert r["limit"] == str(budget)
        assert (r["fits"] == "yes") == (int(r["total"]) <= budget)
        if r["fits"] == "NO":  # a block that does not fit never launches
            assert r["by-shared"] == "0" and r["blocks"] == "0"
    assert {r["fits"] for r in rows} == {"yes", "NO"}


def test_register_estimate_past_the_limit():
    """A 256×256 float32 accumulator over 128 threads is 2048 B = 512 registers
    per thread, past the 255 a thread may have: ptxas spills and the thread
    keeps 255: 255 × 32 = 8160 registers per warp, allocated in units of 256:
    8192, so 16384 / 8192 = 2 warps per sub-partition, 8 per SM, 2 blocks of 4
    warps."""
    src = GEMM.read_text().replace("block_M=128, block_N=128", "block_M=256, block_N=256")
    a = analyze(src, str(GEMM), Settings(target="sm_80"))
    occ = render_html.occupancy(a.kernels[0], "sm_80")
    assert occ.fragment_bytes_per_thread == 2048
    assert occ.registers_estimate == 512
    assert occ.blocks_by_registers == 2
    assert occ.registers_kept == 255


def test_occupancy_unknown_target_kinds():
    src = GEMM.read_text()
    a = analyze(src, str(GEMM), Settings(target="gfx942"))
    occ = render_html.occupancy(a.kernels[0], "gfx942")
    # no per-SM table for ROCm: no blocks per SM claimed
    assert occ.blocks is None and occ.blocks_by_smem is None and occ.blocks_by_registers is None


# --------------------------------------------------------------------------
# The timeline: the waits where the model puts them
# --------------------------------------------------------------------------


def _marks(col, kind):
    return [(int(g.get("data-gap")), int(g.get("data-n"))) for g in by_class(col, "mark-" + kind)]


def test_timeline_waits_gemm_sm80(gemm_page):
    tl = [r for r in svgs(gemm_page) if r.get("class") == "timeline"][0]
    cols = by_class(tl, "col")
    rows = [t.text for t in tl.iter(SVG_NS + "text") if t.get("class") == "rowlabel"]
    gemm_row = next(i for i, t in enumerate(rows) if "T.gemm" in t)
    assert gemm_row == 2  # order [0, 1, 2]
    pro = [c for c in cols if c.get("data-section") == "prologue"]
    body = [c for c in cols if c.get("data-section") == "body"][0]
    epi = [c for c in cols if c.get("data-section") == "epilogue"]
    # prologue: the copies of iterations 0 and 1, each step committed, no wait
    assert [len(_marks(c, "commit")) for c in pro] == [1, 1]
    assert all(not _marks(c, "wait") for c in pro)
    # steady state: wait_group<2> then __syncthreads right above the gemm, and the
    # barrier at the top (the slot refilled is the one the previous gemm read)
    assert _marks(body, "wait") == [(gemm_row, 2)]
    assert sorted(g for g, _ in _marks(body, "syncthreads")) == [0, gemm_row]
    assert len(_marks(body, "commit")) == 1
    # epilogue: wait_group<1>, then <0>, each before its gemm
    assert [_marks(c, "wait") for c in epi] == [[(gemm_row, 1)], [(gemm_row, 0)]]
    cells = [(c.get("data-title"), g.get("data-row"), g.find(SVG_NS + "text").text)
             for c in cols for g in by_class(c, "cell")]
    # the gemm of iteration 0 runs in the first steady-state step (stage 2)
    assert ("k=0", "2", "i=0") in cells and ("k=0", "0", "i=2") in cells
    fills = {g.get("data-colour"): g.find(SVG_NS + "rect").get("fill")
             for g in by_class(tl, "cell")}
    assert fills == {"0": render_html.STAGE_COLOURS[0], "2": render_html.STAGE_COLOURS[2]}


def test_timeline_ws_gemm_sm90(gemm_page):
    """sm_90 splits the loop: a producer warpgroup issues both TMA copies, the
    consumer runs the gemm; 2 × 3 mbarriers, "full" 0..2 and "empty" 3..5
    (ws_view's ids, which test_ws_parity checks against the compiler's IR).  In
    iteration k the producer waits on empty[k % 3] with parity ((k / 3) % 2) ^ 1
    (its first pass through the ring does not block), the consumer on
    full[k % 3] with parity (k / 3) % 2 and then arrives on empty[k % 3]."""
    tl = [r for r in svgs(gemm_page) if r.get("class") == "timeline"][1]
    rows = [t.text for t in tl.iter(SVG_NS + "text") if t.get("class") == "rowlabel"]
    assert [r.split(" · ")[0] for r in rows] == ["producer (TMA)", "producer (TMA)", "consumer"]
    cols = by_class(tl, "col")
    assert len(cols) == 4
    for k, col in enumerate(cols):
        waits = [g.find(SVG_NS + "title").text for g in by_class(col, "mark-mbarrier_wait")]
        arrives = [g.find(SVG_NS + "title").text for g in by_class(col, "mark-arrive")]
        assert waits == [f"wait mbar[{3 + k % 3}] p{(k // 3) % 2 ^ 1}",
                         f"wait mbar[{k % 3}] p{(k // 3) % 2}"]
        assert arrives == [f"arrive mbar[{3 + k % 3}]"]
        # the producer's wait sits above its first copy, the consumer's above the gemm
        assert [int(g.get("data-gap")) for g in by_class(col, "mark-mbarrier_wait")] == [0, 2]


def _sections(tl):
    return [render_html.count_marks(tl.columns, (s,)) for s in ("prologue", "body", "epilogue")]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_timeline_counts_equal_loop_sync_on_every_parity_fixture(target):
    """Every pipelined loop of every parity fixture (every instance): the marks
    drawn in the prologue, one steady-state step and the epilogue are the
    loop's ``prologue_sync``, ``sync`` and ``epilogue_sync`` (which the parity
    suite checks against the generated CUDA), waits in the same order."""
    n = 0
    for path in sorted(PARITY.glob("*.py")):
        st = Settings(target=target, all_bindings=True)
        a = analyze(path.read_text(), str(path), st)
        views = render_html.instance_envs(a, st)
        for kr in a.kernels:
            for li, lr in enumerate(kr.loops):
                if lr.sync is None:
                    continue
                view = views[(kr.kernel.name, kr.kernel.span.line, kr.config_label)]
                tl = render_html.cuda_timeline(kr, li, target, view)
                if tl is None:
                    continue
                n += 1
                if lr.warp_specialized:
                    assert _sections(tl)[1].mbarrier_wait == lr.sync.mbarrier_wait, path.name
                    once = sum(1 for c in tl.columns[:1] for m in c.items
                               if getattr(m, "kind", "") == "mbarrier_wait_once")
                    assert once == (lr.prologue_sync.mbarrier_wait if lr.prologue_sync else 0)
                    continue
                from tilelint.analysis.model import LoopSync
                assert _sections(tl) == [lr.prologue_sync or LoopSync(), lr.sync,
                                         lr.epilogue_sync or LoopSync()], (path.name, li)
                assert tl.note == ""
    assert n >= 40


def test_rolled_prologue_and_epilogue(capsys):
    """T.Pipelined(by, n, num_stages=3) starts at a run-time value: the compiler
    emits the prologue and the epilogue as guarded loops (sync_cuda.rolled_ends,
    measured), the prologue ending with wait_group<0> and a barrier, the
    epilogue (the whole body) waiting with wait_group<0>: one column each."""
    rc, page, _ = run(capsys, "explain", PARITY / "start_block_dependent.py", "--format", "html")
    assert rc == 0
    tl = [r for r in svgs(page) if r.get("class") == "timeline"][0]
    cols = by_class(tl, "col")
    assert [(c.get("data-section"), c.get("data-title")) for c in cols] == [
        ("prologue", "loop j"), ("body", "k=0"), ("body", "k=1"), ("epilogue", "loop j")]
    assert [n for _, n in _marks(cols[0], "wait")] == [0]
    assert [n for _, n in _marks(cols[-1], "wait")] == [0]
    assert "prologue and the epilogue are loops" in page


def test_ascend_timeline_has_flag_waits(capsys):
    rc, page, _ = run(capsys, "explain", ASCEND, "--format", "html", "--target", "ascend")
    assert rc == 0
    tl = [r for r in svgs(page) if r.get("class") == "timeline"]
    assert len(tl) == 1
    col = by_class(tl[0], "col")[0]
    waits = [g.find(SVG_NS + "title").text for g in by_class(col, "mark-flag_wait")]
    # the gemm (M) waits for the copies (MTE2 -> MTE1), the copies for the free
    # slot (MTE1 -> MTE2): the hard events PROD_CONS renames (NOTES.md, Ascend)
    assert waits == ["wait MTE1→MTE2", "wait MTE2→MTE1"]


# --------------------------------------------------------------------------
# The arena map
# --------------------------------------------------------------------------


def test_arena_boxes_and_limit(gemm_page):
    arena = [r for r in svgs(gemm_page) if r.get("class") == "arena"][0]
    boxes = [(g.get("data-name"), int(g.get("data-version")), int(g.get("data-offset")),
              int(g.get("data-bytes"))) for g in by_class(arena, "buf")]
    # 3 versions of 128×32 fp16 (8192 B) each for A_shared and B_shared, packed
    # back to back: 6 × 8192 = 49152
    assert sorted(b[3] for b in boxes) == [8192] * 6
    assert sorted(b[2] for b in boxes) == [i * 8192 for i in range(6)]
    limit = by_class(arena, "limit")[0]
    assert "166912" in "".join(limit.itertext())


def test_arena_reuse_visible(capsys):
    """An epilogue-only shared buffer reuses the pipelined tiles' bytes (NOTES:
    "arena offset 0 shared"): its box overlaps theirs in offset, in another
    lifetime."""
    rc, page, _ = run(capsys, "explain", PARITY / "gemm_epilogue_shared.py", "--format", "html")
    assert rc == 0
    arena = [r for r in svgs(page) if r.get("class") == "arena"][0]
    boxes = by_class(arena, "buf")
    ranges = {}
    for g in boxes:
        rect = g.find(SVG_NS + "rect")
        y, h = float(rect.get("y")), float(rect.get("height"))
        off, size = int(g.get("data-offset")), int(g.get("data-bytes"))
        ranges.setdefault(g.get("data-name"), []).append((off, off + size, y, y + h))
    names = list(ranges)
    shared_bytes = [(a, b) for a in names for b in names if a < b
                    and any(x0 < y1 and y0 < x1 for x0, x1, _, _ in ranges[a]
                            for y0, y1, _, _ in ranges[b])]
    assert shared_bytes
    for a, b in shared_bytes:  # sharing bytes means living at different times
        for x0, x1, t0, t1 in ranges[a]:
            for y0, y1, u0, u1 in ranges[b]:
                if x0 < y1 and y0 < x1:
                    assert t1 <= u0 or u1 <= t0


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------


def test_rejected_schedule_has_no_timeline(capsys):
    """examples/duplicate_order.py: InjectSoftwarePipeline rejects the duplicate
    order (tests/test_cli.py's docstring), so no code and no timeline exist; the
    page says why and still maps the arena."""
    rc, page, _ = run(capsys, "explain", REPO / "examples" / "duplicate_order.py",
                      "--format", "html")
    assert rc == 0
    roots = svgs(page)
    assert not [r for r in roots if r.get("class") == "timeline"]
    assert "pipelining fails (TL101)" in page
    assert [r for r in roots if r.get("class") == "arena"]


def test_html_with_sweep_is_a_usage_error(capsys):
    rc, out, err = run(capsys, "explain", GEMM, "--format", "html", "--sweep", "num_stages=1..3")
    assert rc == 2 and out == "" and "--sweep" in err


def test_html_with_configs_is_a_usage_error(capsys):
    # The page already has a row per autotune configuration and target; --configs
    # (the pruning verdicts) is a text/json table and is refused, not ignored.
    rc, out, err = run(capsys, "explain", AUTOTUNE, "--format", "html", "--configs")
    assert rc == 2 and out == ""
    assert err.startswith("tilelint: error: --configs is not shown in --format html")
    assert "--format text or json" in err


def test_html_bad_and_empty_files(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import tilelang\nimport tilelang.language as T\n\ndef f(:\n")
    rc, page, err = run(capsys, "explain", bad, "--format", "html")
    assert rc == 0 and "Traceback" not in err
    assert "no TileLang kernels found" in page or "diagnostics" in page
    for r in svgs(page):
        assert r.tag == SVG_NS + "svg"


def test_targets_option_for_explain(capsys):
    rc, out, _ = run(capsys, "explain", GEMM, "--format", "json", "--targets", "sm_80,sm_90")
    assert rc == 0
    assert [d["target"] for d in json.loads(out)] == ["sm_80", "sm_90"]
    rc, out, _ = run(capsys, "explain", GEMM, "--targets", "sm_80,sm_90")
    assert "(target sm_80)" in out and "(target sm_90)" in out


# --------------------------------------------------------------------------
# Headless Chromium renders it
# --------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def read_png(data):
    """(width, height, rows of RGB(A) tuples) of a non-interlaced 8-bit PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and ctype in (2, 6)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    i = 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def _rgb(hex_colour):
    return bytes(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_chromium_renders_the_page(gemm_page, tmp_path):
    html_file = tmp_path / "explain.html"
    html_file.write_text(gemm_page, encoding="utf-8")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "explain_gemm_clean.png"
    if shot.exists():
        shot.unlink()
    w, h = 1280, 1800
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={w},{h}", f"--screenshot={shot}", html_file.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    width, height, bpp, rows = read_png(shot.read_bytes())
    assert (width, height) == (w, h)
    counts = {}
    white = 0
    for row in rows:
        for x in range(0, len(row), bpp):
            px = row[x:x + 3]
            if px == b"\xff\xff\xff":
                white += 1
            else:
                counts[px] = counts.get(px, 0) + 1
    total = width * height
    assert white < 0.95 * total  # not blank
    assert len(counts) > 50  # text, table, pictures
    # stage 0 (the copies) and stage 2 (the gemm) cells, the sm_80 limit line,
    # and the arena's buffer boxes are drawn
    for colour, least in ((render_html.STAGE_COLOURS[0], 2000),
                          (render_html.STAGE_COLOURS[2], 1000),
                          (render_html.MARK_STYLE["syncthreads"][0], 100),
                          (render_html.BUFFER_COLOURS[0], 2000)):
        assert counts.get(_rgb(colour), 0) >= least, colour
    if os.environ.get("TILELINT_UPDATE_SCREENSHOTS"):
        # the README's picture (docs/images/explain_page.png) is this screenshot
        README_SHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, README_SHOT)


def test_page_says_which_arms_are_built(capsys):
    """A Python ``if`` the builder decides (use_bias=False, no else: nothing
    built) is listed with the lines not built; explain text and JSON say the
    same (tests/test_elaborate.py)."""
    rc, page, _ = run(capsys, "explain", PARITY / "elab_dropped_alloc.py", "--format", "html")
    assert rc == 0
    assert "<ul class='branches'>" in page
    assert "(use_bias = False): nothing is built; not built: lines 19–20" in page
    assert "Bias_shared" not in page  # the allocation is never made
