"""TL202: one warning per kernel and target on the autotune configuration list,
naming exactly the configurations whose shared memory overflows.

The compiler test lowers every configuration of
``tests/fixtures/autotune/autotune_gemm.py`` with the real tilelang (through
the oracle, one generated instantiation per configuration) and takes the
overflowing set from the arena the compiler computes: dynamic arena bytes plus
static shared bytes (mbarriers on sm_90) above the target's opt-in budget."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from parity_support import TARGETS, oracle_facts, require_tilelang

from tilelint.analysis import Settings, analyze, targets as targets_mod

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "autotune" / "autotune_gemm.py"
# The fixture's own call (main): autotune_gemm(1024, 1024, 1024).
CALL_ARGS = (1024, 1024, 1024)
# The fixture's configuration space, written out again from its get_configs().
CONFIGS = [{"block_N": n, "block_K": k, "num_stages": s}
           for n, k, s in itertools.product([128, 256], [32, 64], [3, 4, 5, 6])]


def _label(cfg):
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


def _tl202(src: str, target: str):
    a = analyze(src, "autotune_gemm.py", Settings(target=target))
    return [d for d in a.diagnostics if d.code == "TL202"], a


_GEN = '''\
import importlib.util
_spec = importlib.util.spec_from_file_location("_autotune_fixture_src", {path!r})
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
kernel = _mod.autotune_gemm.jit_impl.get_tir(*{args!r}, **{cfg!r})
'''


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    d = tmp_path_factory.mktemp("autotune_cfgs")
    files = []
    for i, cfg in enumerate(CONFIGS):
        p = d / f"cfg_{i:02d}.py"
        p.write_text(_GEN.format(path=str(FIXTURE), args=CALL_ARGS, cfg=cfg))
        files.append(str(p))
    return files


@pytest.mark.parity
@pytest.mark.parametrize("target", TARGETS)
def test_tl202_names_exactly_the_configs_the_compiler_overflows(generated, target):
    require_tilelang()
    facts = oracle_facts(target, tuple(generated))
    budget = targets_mod.budget(target)
    expected = []
    for f, cfg in zip(generated, CONFIGS, strict=False):
        entry = facts[Path(f).name]
        assert not entry.get("import_error"), entry["import_error"]
        (k,) = entry["kernels"].values()
        assert not k.get("error"), k["error"]
        sh = k["shared"]
        total = sh["bytes"] + (sh.get("static_bytes") or 0)
        if total > budget:
            expected.append(_label(cfg))
    assert len(CONFIGS) >= 12 and expected, "the fixture must have overflowing configs"
    diags, _ = _tl202(FIXTURE.read_text(), target)
    assert len(diags) == 1, [d.message for d in diags]
    d = diags[0]
    assert sorted(d.configs) == sorted(expected)
    assert d.message.startswith(f"{len(expected)} of {len(CONFIGS)} autotune configs overflow {target}")
    assert len(d.related) == len(expected)
    for lab in expected:
        assert lab in d.message


def test_tl202_is_on_the_configs_argument():
    src = FIXTURE.read_text()
    diags, _ = _tl202(src, "sm_80")
    (d,) = diags
    line = src.splitlines()[d.span.line - 1]
    assert "autotune" in line
    assert line[d.span.col:d.span.end_col] == "get_configs()"
    # A warning: tilelang 0.1.15's autotuner logs a failing configuration and
    # skips it (tuner.py, status "error"), so the tuned kernel still builds.
    assert d.severity == "warning"


def _variant(old: str, new: str, extra: str = "") -> str:
    src = FIXTURE.read_text()
    assert old in src
    src = src.replace(old, new)
    if extra:
        src = src.replace("def get_configs", extra + "\n\ndef get_configs")
    return src


DECORATOR = "@tilelang.autotune(configs=get_configs())"


@pytest.mark.parametrize("name,src,n_over,n_all", [
    ("literal list", _variant(DECORATOR, '@tilelang.autotune(configs=[{"block_N": 256, "block_K": 64, '
                              '"num_stages": 6}, {"block_N": 128, "block_K": 32, "num_stages": 3}])'), 1, 2),
    ("module constant", _variant(DECORATOR, "@tilelang.autotune(configs=CONFIGS)",
                                 'CONFIGS = [{"block_N": 256, "block_K": 64, "num_stages": 6}]'), 1, 1),
    ("dict of lists", _variant(DECORATOR, '@tilelang.autotune(configs={"block_N": [128, 256], '
                               '"block_K": [64], "num_stages": [5, 6]})'), 3, 4),
    ("callable", _variant(DECORATOR, "@tilelang.autotune(configs=get_configs)"), 4, 16),
    ("multi-line decorator", _variant(DECORATOR, "@tilelang.autotune(\n    warmup=3,\n"
                                      "    configs=get_configs(),\n    rep=10,\n)"), 4, 16),
])
def test_config_forms(name, src, n_over, n_all):
    # 128x64 + 64x256 fp16 = 48 KiB per stage: 4 stages = 192 KiB > 163 KiB (sm_80);
    # 128x64 + 64x128 = 32 KiB per stage: 6 stages = 192 KiB; 5 = 160 KiB fits.
    diags, _ = _tl202(src, "sm_80")
    assert len(diags) == 1, name
    assert diags[0].message.startswith(f"{n_over} of {n_all} autotune configs"), diags[0].message
    line = src.splitlines()[diags[0].span.line - 1]
    assert "configs" in line


def test_no_tl202_without_autotune_or_when_all_fit():
    src = _variant(DECORATOR, '@tilelang.autotune(configs=[{"block_N": 128, "block_K": 32, '
                              '"num_stages": 3}])')
    assert not _tl202(src, "sm_80")[0]
    plain = FIXTURE.read_text().replace(DECORATOR + "\n", "").replace(
        "autotune_gemm(1024, 1024, 1024)",
        "autotune_gemm(1024, 1024, 1024, block_N=256, block_K=64, num_stages=6)")
    diags, a = _tl202(plain, "sm_80")
    assert not diags
    assert any(d.code == "TL201" for d in a.diagnostics)  # the single instance keeps TL201
