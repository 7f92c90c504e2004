"""Compiler-verified mode (issue 7, part 2): ``tilelint verify`` / ``VerifyWorker``.

The expected values of the agreement checks are the compiler's own (the
worker lowers with tilelang 0.1.15); the comparison logic is also tested on
hand-written facts whose meaning is spelled out next to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from parity_support import tilelang_available

from tilelint.analysis import Settings, analyze
from tilelint.server.verify import VerifyWorker, compare

ROOT = Path(__file__).resolve().parent.parent
PARITY = ROOT / "tests" / "fixtures" / "parity"
GEMM = PARITY / "gemm_ns3.py"
UNPREDICTED = ROOT / "tests" / "fixtures" / "verify" / "pipelined_in_parallel.py"


def need_compiler() -> None:
    why = tilelang_available()
    if why is not None:
        pytest.skip(why)


@pytest.fixture(scope="module")
def worker():
    need_compiler()
    w = VerifyWorker(timeout=60, memory_mb=4096)
    yield w
    w.close()


# --------------------------------------------------------------------------
# without the compiler
# --------------------------------------------------------------------------


def _fake_missing_tilelang(tmp_path: Path) -> dict:
    pkg = tmp_path / "shadow" / "tilelang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError(\"No module named 'tilelang'\")\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path / "shadow") + os.pathsep
            + os.environ.get("PYTHONPATH", "")}


def test_missing_compiler_says_how_to_install(tmp_path: Path) -> None:
    env = _fake_missing_tilelang(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "tilelint.server.cli", "verify", str(GEMM)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pip install 'tilelint[compiler]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_compiler_api(tmp_path: Path, monkeypatch) -> None:
    env = _fake_missing_tilelang(tmp_path)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    w = VerifyWorker(timeout=30)
    try:
        res = w.verify(str(GEMM), None, "sm_80")
    finally:
        w.close()
    assert not res.ran and res.missing_compiler
    assert "tilelint[compiler]" in (res.error or "")


def test_linting_does_not_start_a_worker() -> None:
    """Importing the verify module (as the server does) starts nothing and imports no compiler."""
    code = ("import sys\nimport tilelint.server.verify as v\n"
            "print([m for m in sys.modules if m.split('.')[0] in ('tilelang', 'tvm', 'torch')])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


# --------------------------------------------------------------------------
# comparison logic on written-down facts
# --------------------------------------------------------------------------


def _gemm_analysis():
    return analyze(GEMM.read_text(), str(GEMM), Settings(target="sm_80"))


def test_compare_reports_tl911_at_the_compiler_line() -> None:
    a = _gemm_analysis()
    # The compiler rejected the kernel with an error tilelint has no rule for,
    # blaming line 20 (the B copy).  Expect TL911 on line 20 with the location.
    facts = {"kernels": {"gemm_ns3": {
        "error": {"type": "InternalError", "message": "Check failed: something odd",
                  "summary": "something odd", "code": None, "file": str(GEMM),
                  "line": 20, "col": 1},
        "loops": [], "warp_specialized": False}}, "_source": GEMM.read_text()}
    res = compare(a, facts, str(GEMM))
    tl911 = [d for d in res.diagnostics if d.code == "TL911"]
    assert len(tl911) == 1 and tl911[0].severity == "error"
    assert tl911[0].span.line == 20
    assert f"--> {GEMM}:20:1" in tl911[0].message
    assert "something odd" in tl911[0].message
    assert not res.kernels[0].agrees


def test_compare_reports_tl910_naming_both_values() -> None:
    a = _gemm_analysis()
    kr = a.kernels[0]
    # Facts equal to the model's except: A_shared has 2 versions (model: 3),
    # the arena is 1 byte larger, and the kernel has 256 threads.
    loops = [{"line": lr.loop.span.line, "pipelined": lr.pipelined,
              "stage": [s.stage for s in lr.statements], "order": [s.order for s in lr.statements],
              "depth": lr.depth} for lr in kr.loops]
    facts = {"kernels": {"gemm_ns3": {
        "error": None, "warp_specialized": False, "loops": loops, "threads": 256,
        "versions": {"A_shared": 2, "B_shared": 3},
        "shared": {"bytes": kr.shared_bytes + 1, "offsets": {}},
        "sync": None}}, "_source": GEMM.read_text()}
    res = compare(a, facts, str(GEMM))
    msgs = [d.message for d in res.diagnostics if d.code == "TL910"]
    assert any("A_shared" in m and "predicts 3" in m and "gives 2" in m for m in msgs), msgs
    assert any("threads" in m and "128" in m and "256" in m for m in msgs), msgs
    assert any("arena" in m and str(kr.shared_bytes + 1) in m for m in msgs), msgs
    assert not any("B_shared" in m for m in msgs)
    assert all(d.severity == "warning" for d in res.diagnostics)


ASCEND = ROOT / "tests" / "fixtures" / "ascend"


def test_compare_ascend_order_can_disagree() -> None:
    pytest.importorskip("z3")
    path = ASCEND / "vec_n3_v4.py"
    a = analyze(path.read_text(), str(path), Settings(target="ascend"))
    # The compiler's start times (tests/test_ascend_parity.py records them) put
    # the loads of streams 2, 1, 0 first.  Hand-written facts with the three
    # loads in source order instead must give one TL910 naming both orders.
    starts = [0, 2140, 3353, 41, 2151, 3569, 82, 2129, 3785]
    facts = {"kernels": {"main": {"error": None, "ascend_schedule": [
        {"start_times": starts, "buffer_versions": [], "ii": 468}]}},
        "_source": path.read_text()}
    res = compare(a, facts, str(path))
    msgs = [d.message for d in res.diagnostics if d.code == "TL910"]
    assert len(msgs) == 1 and "Ascend loop order" in msgs[0], msgs
    assert "[32, 27, 22," in msgs[0] and "[22, 27, 32," in msgs[0]
    # The compiler's real order: agreement, II compared too.
    facts["kernels"]["main"]["ascend_schedule"][0]["start_times"] = [
        468, 2140, 3353, 370, 2151, 3569, 329, 2129, 3785]
    res = compare(a, facts, str(path))
    assert not res.diagnostics and res.kernels[0].agrees
    assert "ascend II" in res.kernels[0].compared


# --------------------------------------------------------------------------
# with the real compiler
# --------------------------------------------------------------------------


def test_ascend_verify_agrees_and_maps_pool_errors(worker) -> None:
    pytest.importorskip("z3")
    res = worker.verify(str(ASCEND / "vec_n4_v4.py"), None, "ascend")
    assert res.ran, res.error
    k = res.kernels[0]
    assert k.lowered and k.agrees, k.mismatches
    assert "ascend loop order" in k.compared and not res.diagnostics
    # vec_n5_v8 exhausts the mutex pool: the compiler's failure is TL302,
    # which tilelint predicted, so there is nothing to report.
    res = worker.verify(str(ASCEND / "vec_n5_v8.py"), None, "ascend")
    assert res.kernels[0].compiler_error["code"] == "TL302"
    assert res.kernels[0].agrees and not res.diagnostics


def test_gemm_agrees_and_returns_sync_code(worker) -> None:
    res = worker.verify(str(GEMM), None, "sm_80")
    assert res.ran, res.error
    assert [k.name for k in res.kernels] == ["gemm_ns3"]
    k = res.kernels[0]
    assert k.lowered and k.agrees, k.mismatches
    assert len(k.compared) >= 8
    assert not res.diagnostics
    loop_line = next(i for i, ln in enumerate(GEMM.read_text().splitlines(), 1) if "T.Pipelined" in ln)
    codes = [s for s in res.sync_code if s.loop_line == loop_line]
    assert codes and codes[0].scope == "loop"
    assert "cp_async_wait<" in codes[0].code and "__syncthreads()" in codes[0].code


def test_unsaved_editor_text_is_what_gets_lowered(worker) -> None:
    """verify(path, source) lowers the given text, not the file on disk."""
    text = GEMM.read_text().replace("num_stages=3", "num_stages=2")
    res = worker.verify(str(GEMM), text, "sm_80")
    assert res.ran, res.error
    raw = res.raw["kernels"]["gemm_ns3"]
    assert raw["versions"] == {"A_shared": 2, "B_shared": 2}
    assert res.kernels[0].agrees, res.kernels[0].mismatches


def test_factory_called_with_model_bindings(worker) -> None:
    """examples/gemm_clean.py instantiates its kernel only under __main__; the
    worker calls the factory with the bindings the model used."""
    res = worker.verify(str(ROOT / "examples" / "gemm_clean.py"), None, "sm_80")
    assert res.ran, res.error
    k = res.kernels[0]
    assert k.lowered and k.instantiated and "matmul(" in k.instantiated
    assert k.agrees, k.mismatches


def test_predicted_error_agrees(worker) -> None:
    res = worker.verify(str(PARITY / "invalid_tl101_duplicate_order.py"), None, "sm_80")
    assert res.ran, res.error
    assert res.kernels[0].compiler_error["code"] == "TL101"
    assert res.kernels[0].agrees and not res.diagnostics


def test_unpredicted_compiler_error_is_tl911(worker) -> None:
    # The compiler's semantic check rejects this kernel; tilelint has no rule for it.
    res = worker.verify(str(UNPREDICTED), None, "sm_80")
    assert res.ran, res.error
    tl911 = [d for d in res.diagnostics if d.code == "TL911"]
    assert len(tl911) == 1 and "nested inside a parallel loop" in tl911[0].message


def test_layout_inference_failure_is_predicted_by_tl115(worker) -> None:
    # A buffer the loop multi-versions, used before the loop: layout inference
    # fails (InputShape), which TL115 predicts, so verify agrees.
    res = worker.verify(str(PARITY / "start_stop_shared_outside.py"), None, "sm_80")
    assert res.ran, res.error
    assert res.kernels[0].compiler_error["code"] == "TL115"
    assert res.kernels[0].agrees and not res.diagnostics


def test_import_failure_is_tl911_at_its_line(worker, tmp_path: Path) -> None:
    p = tmp_path / "exits.py"
    text = GEMM.read_text() + "\nimport sys\nprint('noise on stdout')\nsys.exit(3)\n"
    p.write_text(text)
    res = worker.verify(str(p), None, "sm_80")
    assert res.ran
    d = [d for d in res.diagnostics if d.code == "TL911"]
    assert d and d[0].span.line == len(text.splitlines()), d
    assert "SystemExit" in d[0].message
    # the worker survived
    assert worker.verify(str(GEMM), None, "sm_80").kernels[0].agrees


def test_timeout_kills_and_recovers(tmp_path: Path) -> None:
    need_compiler()
    p = tmp_path / "hangs.py"
    p.write_text(GEMM.read_text() + "\nwhile True:\n    pass\n")
    w = VerifyWorker(timeout=4)
    try:
        t0 = time.perf_counter()
        res = w.verify(str(p), None, "sm_80")
        assert time.perf_counter() - t0 < 60
        assert not res.ran and "did not" in (res.error or ""), res.error
        good = w.verify(str(GEMM), None, "sm_80")
        assert good.ran and good.kernels[0].agrees, good.error
    finally:
        w.close()


def test_crash_is_reported_not_propagated(worker, tmp_path: Path) -> None:
    p = tmp_path / "crashes.py"
    p.write_text(GEMM.read_text() + "\nimport os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    res = worker.verify(str(p), None, "sm_80")
    assert not res.ran and "crash" in (res.error or ""), res.error
    assert worker.verify(str(GEMM), None, "sm_80").ran


def test_memory_cap(tmp_path: Path) -> None:
    need_compiler()
    p = tmp_path / "hog.py"
    p.write_text(GEMM.read_text() + "\nHOG = bytearray(16 * 1024 ** 3)\n")
    w = VerifyWorker(timeout=60, memory_mb=3072)
    try:
        res = w.verify(str(p), None, "sm_80")
        # MemoryError on import -> reported (TL911 at the line), or the child was killed
        assert (res.ran and any("MemoryError" in d.message for d in res.diagnostics)) or \
            (not res.ran and res.error), (res.ran, res.error, res.diagnostics)
        assert w.verify(str(GEMM), None, "sm_80").ran
    finally:
        w.close()


def test_cli_verify(tmp_path: Path) -> None:
    need_compiler()
    proc = subprocess.run([sys.executable, "-m", "tilelint.server.cli", "verify", "--format", "json",
                           "--timeout", "120", str(GEMM)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["ran"] and data["kernels"][0]["agrees"]
    assert data["sync_code"] and "cp_async_wait" in data["sync_code"][0]["code"]
    proc = subprocess.run([sys.executable, "-m", "tilelint.server.cli", "verify",
                           str(UNPREDICTED)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "TL911" in proc.stdout, proc.stdout + proc.stderr
