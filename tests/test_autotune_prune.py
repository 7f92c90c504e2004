"""The autotune pruning API (``tilelint.prune_configs`` / ``tilelint.autotune_configs``)
and ``tilelint explain --configs``.

Expected sets come from the compiler (the parity test lowers every example
configuration with tilelang 0.1.15 through bench/autotune_prune.py) or from the
arithmetic written next to them: a GEMM stage holds an fp16 A tile
(block_M x block_K) and B tile (block_K x block_N), num_stages times; sm_80's
per-block limit is 166912 B (163 KiB), sm_90's 232448 B (227 KiB), and on sm_90
the warp-specialized path adds 2 x num_stages mbarriers of 8 B of static shared
memory.  Blocks per SM: sm_80 holds 164 KiB of shared memory per SM, 1 KiB of it
reserved per block, 2048 threads and 32 blocks (CUDA's per-compute-capability
table); the table and its rules (128-byte granule, per-resource limits) are
tested on their own, against CUDA's occupancy calculator, in test_occupancy.py."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest
from parity_support import require_tilelang

import tilelint

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "fixtures" / "autotune_prune"
KIB = 1024


def _stub_tilelang(monkeypatch):
    """A ``tilelang`` whose decorators record their arguments and return the
    function: the fixtures import without the compiler, and a kernel tilelint
    called would fail on the empty ``tilelang.language``."""
    tl = types.ModuleType("tilelang")

    def autotune(configs=None, **_kw):
        def deco(f):
            f.autotune_configs = configs
            return f
        return deco

    def jit(*_a, **_kw):
        return lambda f: f

    tl.autotune, tl.jit = autotune, jit
    lang = types.ModuleType("tilelang.language")
    tl.language = lang
    monkeypatch.setitem(sys.modules, "tilelang", tl)
    monkeypatch.setitem(sys.modules, "tilelang.language", lang)


def _load(monkeypatch, stem):
    _stub_tilelang(monkeypatch)
    path = EXAMPLES / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"_prune_test_{stem}", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    return mod


def _gemm(block_N, num_stages, block_M=128, block_K=64, threads=128):
    return {"block_M": block_M, "block_N": block_N, "block_K": block_K,
            "num_stages": num_stages, "threads": threads}


BIND = {"M": 4096, "N": 4096, "K": 4096}


# --------------------------------------------------------------------------
# prune_configs: keep rules, reasons, margin, occupancy
# --------------------------------------------------------------------------


def test_fits_per_target(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    # 128x64 + 64x128 fp16 = 32 KiB per stage; 128x64 + 64x256 = 48 KiB.
    cfgs = [_gemm(128, 5),   # 160 KiB: fits both
            _gemm(128, 6),   # 192 KiB: sm_90 only
            _gemm(256, 4),   # 192 KiB: sm_90 only
            _gemm(256, 5)]   # 240 KiB: neither
    on80 = tilelint.prune_configs(mod.matmul, cfgs, target="sm_80", bindings=BIND)
    assert on80 == [cfgs[0]]
    assert [c for c, _ in on80.removed] == cfgs[1:]
    on90 = tilelint.prune_configs(mod.matmul, cfgs, target="sm_90", bindings=BIND)
    assert on90 == cfgs[:3]
    (cfg, reason), = on90.removed
    assert cfg == cfgs[3]
    # 240 KiB of tiles + 10 mbarriers x 8 B.
    assert reason == f"{240 * KIB + 80} B of shared memory per block > sm_90's limit of 232448 B"
    v = on80.verdicts[1]
    assert (v.arena_bytes, v.static_bytes, v.total_bytes, v.limit, v.fits, v.kept) == \
        (192 * KIB, 0, 192 * KIB, 166912, False, False)


def test_pruned_is_the_list_tilelang_needs(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    cfgs = [_gemm(128, 3), _gemm(256, 6), _gemm(128, 4)]
    res = tilelint.prune_configs(mod.matmul, cfgs, target="sm_80", bindings=BIND)
    assert isinstance(res, tilelint.Pruned) and isinstance(res, tuple)
    assert res == [cfgs[0], cfgs[2]] and res != [cfgs[0]]
    assert len(res) == 2 and res[1] is cfgs[2] and list(res) == res.kept
    # The autotuner's cache key: json.dumps(configs).
    assert json.loads(json.dumps(res)) == [cfgs[0], cfgs[2]]
    assert len(res.verdicts) == 3 and res.target == "sm_80"
    with pytest.raises(AttributeError):
        res.target = "sm_90"
    for twin in (copy.deepcopy(res), pickle.loads(pickle.dumps(res))):
        assert twin == res and twin.verdicts == res.verdicts and twin.target == "sm_80"


def test_margin(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    cfg = _gemm(128, 5)  # 160 KiB = 163840 B: 3072 B under sm_80's 166912
    assert tilelint.prune_configs(mod.matmul, [cfg], target="sm_80", margin=3072,
                                  bindings=BIND) == [cfg]
    res = tilelint.prune_configs(mod.matmul, [cfg], target="sm_80", margin=3073, bindings=BIND)
    assert res == []
    assert res.removed[0][1] == ("163840 B of shared memory per block > sm_80's limit of "
                                 "166912 B less the 3073 B margin")
    assert res.verdicts[0].limit == 166912 - 3073


def test_min_blocks_per_sm(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    small = _gemm(128, 3, block_K=32)  # 48 KiB: 164 // (48 + 1) = 3 blocks by shared memory
    wide = _gemm(64, 2, block_M=64, block_K=32, threads=1024)  # 16 KiB, but 2048 // 1024 = 2
    res = tilelint.prune_configs(mod.matmul, [small, wide], target="sm_80", bindings=BIND,
                                 min_blocks_per_sm=3)
    assert res == [small]
    assert [v.blocks_per_sm for v in res.verdicts] == [3, 2]
    assert res.removed[0][1] == ("at most 2 block(s) per SM by shared memory (16384 B) and "
                                 "threads, fewer than min_blocks_per_sm=3")
    assert "at most 3 block(s) per SM" in res.verdicts[0].reason
    assert tilelint.prune_configs(mod.matmul, [small], target="sm_80", bindings=BIND,
                                  min_blocks_per_sm=4) == []


def test_keep_all_removes_nothing(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    cfgs = [_gemm(128, 3), _gemm(256, 6)]
    res = tilelint.prune_configs(mod.matmul, cfgs, target="sm_80", keep="all", bindings=BIND)
    assert res == cfgs and not res.removed
    assert res.verdicts[1].fits is False
    assert res.verdicts[1].reason.startswith("kept (keep='all'): 294912 B > sm_80's limit")


def test_what_cannot_be_sized_is_kept(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    # block_K is a parameter without a default and no configuration gives it.
    cfg = {"block_M": 128, "block_N": 128, "num_stages": 3}
    res = tilelint.prune_configs(mod.matmul, [cfg], target="sm_80", bindings=BIND)
    assert res == [cfg]
    assert res.verdicts[0].arena_bytes is None
    assert res.verdicts[0].reason.startswith("kept: the arena is not known")
    # A kernel name the file does not define, an object without Python source,
    # a target without a CUDA shared-memory limit.
    res = tilelint.prune_configs(len, [cfg], target="sm_80")
    assert res == [cfg] and res.verdicts[0].reason.startswith("kept: ")
    res = tilelint.prune_configs(mod.explode, [cfg], target="sm_80")
    assert res == [cfg]
    assert res.verdicts[0].reason == "kept: no TileLang kernel named 'explode' in its source"
    res = tilelint.prune_configs(mod.matmul, [_gemm(256, 6)], target="ascend")
    assert res.verdicts[0].reason == "kept: no CUDA shared-memory limit is modelled for ascend"


@pytest.mark.parametrize("kwargs,text", [
    ({"target": "sm_99"}, "unknown target 'sm_99'"),
    ({"keep": "fastest"}, "keep='fastest'"),
    ({"margin": -1}, "margin=-1"),
    ({"min_blocks_per_sm": 0}, "min_blocks_per_sm=0"),
])
def test_bad_options(monkeypatch, kwargs, text):
    mod = _load(monkeypatch, "factory_gemm")
    with pytest.raises(ValueError, match=text.replace("(", r"\(")):
        tilelint.prune_configs(mod.matmul, [_gemm(128, 3)], **kwargs)
    with pytest.raises(TypeError):
        tilelint.prune_configs(mod.matmul, {"block_N": [128, 256]})


# --------------------------------------------------------------------------
# autotune_configs: the wrapper tilelang calls
# --------------------------------------------------------------------------

# wrapped_gemm's configurations on sm_80: 128x64 + 64xN fp16 per stage,
# N=128: 32 KiB (2..5 stages fit, 6 = 192 KiB does not); N=256: 48 KiB (2 and 3
# stages fit, 4 = 192 KiB does not).
WRAPPED_KEPT = [(128, 2), (128, 3), (128, 4), (128, 5), (256, 2), (256, 3)]


def test_wrapper_finds_its_kernel_and_uses_the_call(monkeypatch):
    mod = _load(monkeypatch, "wrapped_gemm")
    wrapper = mod.wrapped_gemm.autotune_configs
    assert isinstance(wrapper, tilelint.AutotuneConfigs) and callable(wrapper)
    res = wrapper(1024, 1024, 1024)
    assert [(c["block_N"], c["num_stages"]) for c in res] == WRAPPED_KEPT
    assert len(res.verdicts) == 10 and wrapper.last is res
    # The same configurations named by kernel= (the object or its name).
    for kernel in (mod.wrapped_gemm, "wrapped_gemm"):
        again = tilelint.autotune_configs(mod.get_configs, target="sm_80", kernel=kernel)
        assert again(1024, 1024, 1024) == res


def test_wrapper_without_a_kernel_keeps_everything(monkeypatch):
    mod = _load(monkeypatch, "factory_gemm")
    cfgs = [_gemm(256, 6)]
    res = tilelint.autotune_configs(lambda *a: cfgs, target="sm_80")()
    assert res == cfgs
    assert "pass kernel=" in res.verdicts[0].reason
    res = tilelint.autotune_configs(cfgs, target="sm_80", kernel=mod.matmul)()
    assert res == []


_INTERCEPT = r'''
import importlib.util, json, sys
import tilelang
from tilelang.autotuner import tuner

reached = []

def make_compile(self, mode, args, kwargs):
    def jit_compile(**config_arg):
        config_arg.pop(tuner._PASS_CONFIGS_KEY, None)
        reached.append(config_arg)
        raise RuntimeError("intercepted: no GPU, nothing is compiled")
    return jit_compile

tuner.AutoTuneImpl._make_jit_compile_func = make_compile
spec = importlib.util.spec_from_file_location("wrapped_gemm", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
sys.modules["wrapped_gemm"] = mod
spec.loader.exec_module(mod)
try:
    mod.wrapped_gemm(1024, 1024, 1024)
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"reached": reached, "error": error}))
'''


def test_tilelang_autotune_compiles_only_the_kept_configs(tmp_path):
    """tilelang's own autotuner, run on wrapped_gemm up to the compile step: the
    function it calls once per configuration is replaced by one that records the
    configuration and fails (there is no GPU), so the run ends with tilelang's
    "no configuration compiled" error after every configuration it had."""
    require_tilelang()
    script = tmp_path / "intercept.py"
    script.write_text(_INTERCEPT)
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache"),
           "TILELANG_AUTO_TUNING_DISABLE_CACHE": "1"}
    proc = subprocess.run([sys.executable, str(script), str(EXAMPLES / "wrapped_gemm.py")],
                          capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    reached = sorted((c["block_N"], c["num_stages"]) for c in out["reached"])
    assert reached == WRAPPED_KEPT, proc.stderr[-3000:]
    assert all(c["block_M"] == 128 and c["block_K"] == 64 for c in out["reached"])
    assert out["error"] and "No configuration successfully compiled" in out["error"]


# --------------------------------------------------------------------------
# The compiler's arena decides: every example, sm_80 and sm_90
# --------------------------------------------------------------------------


@pytest.mark.parity
def test_pruned_set_is_the_compilers(tmp_path):
    """bench/autotune_prune.py lowers every configuration of every example with
    tilelang 0.1.15 on sm_80 and sm_90; the kept set must be exactly the
    configurations whose shared memory (dynamic arena + static) the compiler
    puts within the limit."""
    require_tilelang()
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "autotune_prune.py"),
                           "--json", str(out)], capture_output=True, text=True, timeout=3000)
    assert out.exists(), proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert {r["example"] for r in rows} == {"gemm_list", "gemm_product", "attention_fwd"}
    for target in ("sm_80", "sm_90"):
        mine = [r for r in rows if r["target"] == target]
        assert all(r["error"] is None for r in mine), [r for r in mine if r["error"]]
        kept = {(r["example"], json.dumps(r["config"])) for r in mine if r["kept"]}
        fits = {(r["example"], json.dumps(r["config"])) for r in mine
                if r["compiler_bytes"] <= r["limit"]}
        assert kept == fits, (target, kept ^ fits)
        assert len(fits) < len(mine), "each target must have configurations that overflow"
    # The examples straddle the two limits: some configurations fit sm_90 only.
    by = {(r["example"], json.dumps(r["config"]), r["target"]): r["kept"] for r in rows}
    assert any(by[(e, c, "sm_90")] and not by[(e, c, "sm_80")] for e, c, _ in by)


# --------------------------------------------------------------------------
# tilelint explain --configs, the package and the install
# --------------------------------------------------------------------------


def _cli(*args, cwd=ROOT):
    exe = Path(sys.executable).parent / "tilelint"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_explain_configs_json_and_text():
    fixture = ROOT / "tests" / "fixtures" / "autotune" / "autotune_gemm.py"
    proc = _cli("explain", str(fixture), "--configs", "--targets", "sm_80,sm_90",
                "--format", "json")
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    tables = {d["configs"]["target"]: d["configs"] for d in docs}
    # The fixture's comment: 128x64 + 64x256 fp16 = 48 KiB per stage, 128x64 +
    # 64x128 = 32 KiB; 163 KiB on sm_80, 227 KiB on sm_90.
    removed = {
        "sm_80": {(128, 64, 6), (256, 64, 4), (256, 64, 5), (256, 64, 6)},
        "sm_90": {(256, 64, 5), (256, 64, 6)},
    }
    for target, want in removed.items():
        (k,) = tables[target]["kernels"]
        assert (k["kernel"], k["line"], len(k["configs"])) == ("autotune_gemm", 22, 16)
        got = {(c["config"]["block_N"], c["config"]["block_K"], c["config"]["num_stages"])
               for c in k["configs"] if not c["kept"]}
        assert got == want
        assert k["kept"] == 16 - len(want)
        assert k["wrapped_by"] is None  # a plain list
        assert all(c["fits"] == c["kept"] for c in k["configs"])
    first = tables["sm_80"]["kernels"][0]["configs"][0]  # 128/32/3: 48 KiB, 3 blocks
    assert (first["total_bytes"], first["blocks_per_sm"], first["threads"]) == (48 * KIB, 3, 128)
    text = _cli("explain", str(fixture), "--configs", "--target", "sm_80").stdout
    assert "autotune configurations of autotune_gemm (line 22) on sm_80, limit 166912 B: " \
           "12 of 16 kept" in text
    row = next(ln for ln in text.splitlines()
               if ln.startswith("block_N=256, block_K=64, num_stages=6"))
    assert row.split()[3:7] == ["294912", "0", "no", "0"]  # arena, static, fits, blocks/SM
    none = _cli("explain", str(EXAMPLES / "factory_gemm.py"), "--configs").stdout
    assert "autotune configurations (sm_80): none in this file" in none


def test_wrapped_configs_explained_not_flagged(tmp_path):
    """``configs=tilelint.autotune_configs(get_configs, target="sm_80")``: the
    wrapper removes what overflows before the autotuner compiles it, so TL202
    (configurations that overflow) stays silent, while the same file with
    ``configs=get_configs`` gets it; ``explain --configs`` shows the list with the
    wrapper named.  wrapped_gemm.py: block_M 128, block_K 64 fp16, block_N in
    (128, 256), num_stages 2..6: a stage is (128x64 + 64xN) x 2 B = 32 KiB (N=128)
    or 48 KiB (N=256); over sm_80's 166912 B: N=128 at 6 stages (192 KiB) and
    N=256 at 4, 5, 6 (192, 240, 288 KiB): 4 of 10 removed."""
    from tilelint.analysis import Settings, analyze

    fixture = EXAMPLES / "wrapped_gemm.py"
    src = fixture.read_text()
    wrapped = analyze(src, str(fixture), Settings(target="sm_80"))
    assert not [d for d in wrapped.diagnostics if d.code == "TL202"]
    plain_src = src.replace("configs=tilelint.autotune_configs(get_configs, target=\"sm_80\")",
                            "configs=get_configs")
    assert plain_src != src
    plain = analyze(plain_src, str(fixture), Settings(target="sm_80"))
    (tl202,) = [d for d in plain.diagnostics if d.code == "TL202"]
    assert tl202.message.startswith("4 of 10 autotune configs overflow sm_80")

    proc = _cli("explain", str(fixture), "--configs", "--target", "sm_80", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (k,) = json.loads(proc.stdout)["configs"]["kernels"]
    assert k["wrapped_by"] == "tilelint.autotune_configs(get_configs, target='sm_80')"
    removed = {(c["config"]["block_N"], c["config"]["num_stages"]) for c in k["configs"]
               if not c["kept"]}
    assert removed == {(128, 6), (256, 4), (256, 5), (256, 6)} and k["kept"] == 6
    text = _cli("explain", str(fixture), "--configs", "--target", "sm_80").stdout
    assert "pruned at run time by tilelint.autotune_configs(get_configs, target='sm_80')" in text
    # The wrapper's own options judge the list: keep="all" removes nothing.
    keep_all = src.replace('target="sm_80")', 'target="sm_80", keep="all")')
    other = tmp_path / "wrapped_keep_all.py"
    other.write_text(keep_all)
    proc = _cli("explain", str(other), "--configs", "--target", "sm_80", "--format", "json")
    (k,) = json.loads(proc.stdout)["configs"]["kernels"]
    assert k["kept"] == 10


@pytest.mark.parametrize("cwd", ["/tmp", str(ROOT)])
def test_import_names_from_anywhere(cwd):
    code = ("import tilelint, tilelint.analysis, tilelint.server; "
            "print(tilelint.prune_configs.__module__, tilelint.autotune_configs.__module__, "
            "tilelint.analysis.__name__, tilelint.server.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["tilelint.server.prune", "tilelint.server.prune",
                                   "tilelint.analysis", "tilelint.server"]
    help_ = _cli("--help", cwd=cwd)
    assert help_.returncode == 0 and "explain" in help_.stdout
