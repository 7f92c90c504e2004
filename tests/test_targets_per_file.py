"""Targets per file (issue 12, item 4): the Blackwell targets, tensor memory and
Ascend buffers that are not shared memory, the tilelang-ascend fork's dialect
(TL004), and which targets a file is analysed for (directive, per-file-targets,
the target its code names, the configuration, the command line).

Expected numbers are worked out next to each test from the fixture's shapes;
the parity tests at the end lower the same fixtures with tilelang 0.1.15.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tilelint.analysis import Settings, analyze, directives, planning, targets
from tilelint.analysis.model import Alloc, Const, Span
from tilelint.server import cli
from tilelint.server.config import (
    Config,
    ConfigError,
    DirectiveError,
    config_for,
    load_config,
    resolve_targets,
)
from tilelint.server.lsp import settings as lsp_settings

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures" / "targets"
TMEM = FIX / "tmem_gemm_sm100.py"
FORK = FIX / "npu_fork.py"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes(a):
    return sorted(d.code for d in a.diagnostics)


# A 128x128x32 fp16 GEMM with num_stages=12: A and B tiles are 8 KiB each, so
# 12 versions of both take 12 * 16384 = 196608 bytes.  That is over sm_80's
# 166912 and sm_120's 101376, under the 232448 of sm_90/sm_100/sm_103.
GEMM_196K = '''\
import tilelang
import tilelang.language as T


def matmul(M=1024, N=1024, K=4096, num_stages=12):
    @T.prim_func
    def deep(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 32), "float16")
            B_shared = T.alloc_shared((32, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.clear(C_local)
            for k in T.Pipelined(K // 32, num_stages=num_stages):
                T.copy(A[by * 128, k * 32], A_shared)
                T.copy(B[k * 32, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])

    return deep
'''


# --------------------------------------------------------------------------
# The new targets
# --------------------------------------------------------------------------


def test_blackwell_budgets_from_the_programming_guide():
    # 227 KB = 232448 B (10.0, 10.3), 99 KB = 101376 B (12.0): the SM's shared
    # memory (228 KB / 100 KB) less the 1 KB reserved per block.
    assert targets.budget("sm_100") == 227 * 1024 == 232448
    assert targets.budget("sm_103") == 227 * 1024
    assert targets.budget("sm_120") == 99 * 1024 == 101376
    for t in ("sm_100", "sm_103", "sm_120"):
        assert t in targets.CUDA_TARGETS and t in targets.ALL_TARGETS
        assert targets.get(t).has_tma and targets.get(t).cp_async
        assert not targets.get(t).wgmma  # wgmma is Hopper only
    assert targets.get("sm_100").tmem and targets.get("sm_103").tmem
    assert not targets.get("sm_120").tmem and not targets.get("sm_90").tmem
    assert targets.get("sm_90").wgmma


@pytest.mark.parametrize("spelling,name", [
    ("sm_100a", "sm_100"), ("sm100", "sm_100"), ("SM_103A", "sm_103"), ("sm_100f", "sm_100"),
    ("sm_120a", "sm_120"), ("sm_90a", "sm_90"),
])
def test_arch_variants_normalise_to_their_base(spelling, name):
    assert targets.normalise(spelling) == name


def test_new_targets_accepted_everywhere(tmp_path, capsys):
    f = write(tmp_path / "k.py", GEMM_196K)
    # configuration
    write(tmp_path / "pyproject.toml", '[tool.tilelint]\ntargets = ["sm_100", "sm_103a"]\n')
    assert config_for(f).targets == ("sm_100", "sm_103")
    # command line
    rc = cli.main(["check", "--isolated", "--target", "sm_120", "--format", "json",
                   "--no-progress", str(f)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and [(x["code"], x["target"]) for x in out] == [("TL201", "sm_120")]
    # language-server setting
    s = lsp_settings.to_settings(lsp_settings.merge({"target": "sm_103"}))
    assert s.target == "sm_103"


def test_overflow_per_blackwell_target():
    a100 = analyze(GEMM_196K, "k.py", Settings(target="sm_100"))
    a120 = analyze(GEMM_196K, "k.py", Settings(target="sm_120"))
    assert a100.kernels[0].shared_budget == 232448
    assert "TL201" not in codes(a100)
    assert "TL201" in codes(a120)
    assert a120.kernels[0].shared_bytes >= 196608


# --------------------------------------------------------------------------
# Tensor memory and Ascend buffers are not shared memory
# --------------------------------------------------------------------------


def _alloc(name, scope):
    return Alloc(name=name, span=Span(1, 0, 1, 1), func="x", shape=(Const(1),),
                 dtype=Const("float16"), scope=scope, call_span=Span(1, 0, 1, 1))


@pytest.mark.parametrize("scope,counts", [
    ("shared", True), ("shared.dyn", True), ("shared.tmem", False), ("shared.barrier", False),
    ("shared.cluster_barrier", False), ("shared.l1", False), ("shared.l0a", False),
    ("shared.l0b", False), ("shared.l0c", False), ("local.fragment", False),
])
def test_only_cuda_shared_scopes_count(scope, counts):
    assert planning.is_shared("b", {"b": _alloc("b", scope)}) is counts


def test_tmem_accumulator_is_not_in_the_arena():
    # A: 128x64 bf16 x2 versions = 32768, B: 256x64 bf16 x2 = 65536, C_shared
    # (128x256 bf16 = 65536) is used after the loop and reuses B's bytes; the
    # 128x256 fp32 accumulator (131072 B) lives in tensor memory.  The arena is
    # 32768 + 65536 = 98304 (the compiler's number: test_parity_sm100_tmem).
    a = analyze(TMEM.read_text(), str(TMEM), Settings(target="sm_100"))
    kr = a.kernels[0]
    assert kr.shared_bytes == 98304
    assert "C_tmem" not in {b.name for b in kr.buffers}
    assert not {"TL201", "TL203"} & set(codes(a))
    # Its syncs are not modelled (the compiler emits 2 __syncthreads and 6
    # mbarriers, the sm_90 model would say 1 and 4): no counts are claimed.
    assert kr.sync is None and all(lr.sync is None for lr in kr.loops)
    # A plain GEMM keeps its sync model on sm_100.
    plain = analyze(GEMM_196K, "k.py", Settings(target="sm_100")).kernels[0]
    assert plain.sync is not None


def test_ascend_buffers_never_count_as_cuda_shared_memory():
    # tilelang 0.1.15's own Ascend dialect: 2 x 256 KiB of L1 and a 256 KiB L0C.
    src = '''\
import tilelang.ascend.language as T


def kernel(M=1024, N=512, K=1024, bM=512, bN=512, bK=256):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(2) as bx:
            A_l1 = T.alloc_l1((bM, bK), "float16")
            B_l1 = T.alloc_l1((bN, bK), "float16")
            C_l0c = T.alloc_l0c((bM, bN // 2), "float32")
            for k in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[bx * bM:(bx + 1) * bM, k * bK:(k + 1) * bK], A_l1)
                T.copy(B[0:bN, k * bK:(k + 1) * bK], B_l1)
                T.gemm(A_l1, B_l1, C_l0c, transpose_B=True, clear_accum=(k == 0))
            T.copy(C_l0c, C[bx * bM, 0])

    return main
'''
    for t in ("sm_80", "sm_90", "sm_120"):
        a = analyze(src, "asc.py", Settings(target=t))
        assert not {"TL201", "TL202", "TL203"} & set(codes(a)), t
        assert all(k.shared_bytes in (None, 0) for k in a.kernels), t


# --------------------------------------------------------------------------
# The tilelang-ascend fork: one TL004, nothing else
# --------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm_80", "sm_90", "sm_100", "ascend"])
def test_fork_dialect_gets_one_information_and_nothing_else(target):
    a = analyze(FORK.read_text(), str(FORK), Settings(target=target))
    assert [(d.code, d.severity) for d in a.diagnostics] == [("TL004", "information")]
    assert a.diagnostics[0].span.line == 13  # the first kernel's `with T.Kernel(...)`
    assert {k.kernel.dialect for k in a.kernels} == {"npu"}
    assert all(k.shared_bytes is None and not k.loops for k in a.kernels)


@pytest.mark.parametrize("marker", [
    "with T.Kernel(8, is_npu=True) as (cid, vid):\n            x = T.alloc_shared((64, 64), \"float16\")",
    "with T.Kernel(8) as (cid, vid):\n            x = T.alloc_ub((64, 64), \"float16\")",
    "with T.Kernel(8) as (cid, vid):\n            x = T.alloc_L1((64, 64), \"float16\")",
])
def test_each_fork_marker_alone(marker):
    src = ("import tilelang\nimport tilelang.language as T\n\n\n@T.prim_func\n"
           "def k(A: T.Tensor((512, 64), \"float16\")):\n        " + marker + "\n"
           "            T.copy(A[cid * 64, 0], x)\n")
    a = analyze(src, "m.py", Settings(target="sm_80"))
    assert codes(a) == ["TL004"]


def test_npuir_target_marks_the_file():
    src = GEMM_196K + "\nkernel = tilelang.compile(matmul(), target=\"npuir\")\n"
    a = analyze(src, "m.py", Settings(target="sm_80"))
    assert codes(a) == ["TL004"]  # not the TL201 the CUDA model would give


def test_tl004_can_be_ignored_and_cuda_files_never_get_it():
    a = analyze(FORK.read_text(), str(FORK), Settings(target="sm_80", ignore=("TL004",)))
    assert a.diagnostics == ()
    assert "TL004" not in codes(analyze(GEMM_196K, "k.py", Settings(target="sm_80")))
    assert "TL004" not in codes(analyze(TMEM.read_text(), str(TMEM), Settings(target="sm_100")))


# --------------------------------------------------------------------------
# Reading the file: the directive and the named targets (analysis/directives.py)
# --------------------------------------------------------------------------


def test_directive_in_first_comment_block():
    ft = directives.read_targets("#!/usr/bin/env python\n# Copyright\n\n"
                                 "# tilelint: target sm_90 sm_100a\nimport tilelang\n")
    assert ft.directive == ("sm_90", "sm_100") and ft.directive_line == 4 and not ft.unknown


@pytest.mark.parametrize("src", [
    "import tilelang\n# tilelint: target sm_90\n",  # after the first line of code
    '"""doc"""\n# tilelint: target sm_90\n',  # a docstring is code
    "# tilelint: targets sm_90\n",  # not the syntax
    "# tilelint: bind target=sm_90\n",
])
def test_not_a_directive(src):
    assert directives.read_targets(src).directive == ()
    assert directives.read_targets(src).directive_line is None


def test_unknown_names_in_the_directive():
    ft = directives.read_targets("# tilelint: target sm_75, sm_90\n")
    assert ft.directive == ("sm_90",) and ft.unknown == ("sm_75",) and ft.directive_line == 1
    assert directives.read_targets("# tilelint: target\n").unknown == ("",)


@pytest.mark.parametrize("code,named", [
    ('k = tilelang.compile(f, target="cuda -arch=sm_90")\n', ("sm_90",)),
    ('@tilelang.jit(target="cuda -arch=sm_100a")\ndef f(): pass\n', ("sm_100",)),
    ('k = tilelang.compile(f, target="sm_120")\n', ("sm_120",)),
    ('T = tvm.target.Target({"kind": "cuda", "arch": "sm_103"})\n', ("sm_103",)),
    ('SM90_TARGET = "cuda -arch=sm_90a"\n', ("sm_90",)),
    ('t = Target("cuda -arch=sm_80")\n', ("sm_80",)),
    ('k = tilelang.compile(f, target="hip -mcpu=gfx950")\n', ("gfx950",)),
    ('k = tilelang.compile(f, target="cuda")\n', ()),  # the GPU it finds
    ('k = tilelang.compile(f, target="auto")\n', ()),
    ('# target="cuda -arch=sm_90"\n', ()),  # a comment
    ('def f():\n    """Compile with target="cuda -arch=sm_90"."""\n', ()),  # a docstring
    ('k = tilelang.compile(f, target=f"cuda -arch=sm_{v}")\n', ()),  # not fixed
    ('k = tilelang.compile(f, target="cuda -arch=sm_75")\n', ()),  # unknown to tilelint
    ('a = tilelang.compile(f, target="sm_90")\nb = tilelang.compile(g, target="sm_80")\n'
     'c = tilelang.compile(h, target="sm_90")\n', ("sm_90", "sm_80")),
])
def test_named_targets(code, named):
    assert directives.read_targets(code).named == named


@pytest.mark.parametrize("code,named", [
    # tensor memory and tcgen05 lower on sm_100-sm_110 only, wgmma_gemm on Hopper only
    ('C = T.alloc_tmem([128, 256], "float32")\n', ("sm_100",)),
    ('T.tcgen05_gemm(A_s, B_s, C_t, mbar=m)\n', ("sm_100",)),
    ('T.wgmma_gemm(A_s, B_s, C_l)\n', ("sm_90",)),
    ('T.wgmma_gemm(A_s, B_s, C_l)\nC = T.alloc_tmem([128, 256], "float32")\n',
     ("sm_90", "sm_100")),
    # an architecture the code names comes first
    ('k = tilelang.compile(f, target="sm_103")\nC = T.alloc_tmem([1, 1], "float32")\n',
     ("sm_103",)),
    # not in a comment or a string
    ('# C = T.alloc_tmem([128, 256], "float32")\nx = "T.wgmma_gemm(a)"\n', ()),
    # tilelang 0.1.15's Ascend dialect lowers for Ascend only (its kernels use
    # L1/L0/UB scopes and Ascend pipes; tests/test_ascend_parity.py lowers them
    # under the Ascend target)
    ("import tilelang.ascend.language as T\n", ("ascend",)),
    ("from tilelang.ascend.language import simd as S\n", ("ascend",)),
    ("import tilelang\nimport tilelang.ascend as ta\n", ("ascend",)),
    ('"""import tilelang.ascend.language as T"""\nimport tilelang.language as T\n', ()),
    ('import tilelang.ascend.language as T\nk = tilelang.compile(f, target="sm_90")\n',
     ("sm_90",)),
])
def test_required_targets(code, named):
    assert directives.read_targets(code).named == named


def test_tmem_file_is_judged_on_sm_100_by_default():
    assert Config().targets_for(TMEM, TMEM.read_text()) == ("sm_100",)


def test_ascend_dialect_file_is_judged_on_ascend_by_default():
    path = HERE / "fixtures" / "ascend" / "gemm_ns2.py"
    assert Config().targets_for(path, path.read_text()) == ("ascend",)


def test_reading_never_raises_on_bad_text():
    for src in ("def f(:\n target='sm_90", "'''", "\x00", "", "# tilelint: target \udcff"):
        directives.read_targets(src)


# --------------------------------------------------------------------------
# Precedence: command line > directive > per-file-targets > named > config > default
# --------------------------------------------------------------------------

DIRECTIVE = "# tilelint: target sm_100 sm_90\n"
NAMED = '\nkernel = tilelang.compile(matmul(), target="cuda -arch=sm_120")\n'


def _cfg(tmp_path, table: str) -> Config:
    return load_config(write(tmp_path / "pyproject.toml", "[tool.tilelint]\n" + table))


def test_precedence_each_level(tmp_path):
    src_all = DIRECTIVE + GEMM_196K + NAMED
    src_named = GEMM_196K + NAMED
    hopper = tmp_path / "hopper" / "k.py"
    other = tmp_path / "other" / "k.py"
    cfg = _cfg(tmp_path, 'target = "sm_86"\nper-file-targets = { "hopper/**" = ["sm_89"] }\n')
    # 1. the command line beats everything
    assert cfg.with_overrides(targets=["sm_80"]).targets_for(hopper, src_all) == ("sm_80",)
    # 2. the directive beats per-file-targets and the named target
    assert cfg.targets_for(hopper, src_all) == ("sm_100", "sm_90")
    # 3. per-file-targets beat the named target
    assert cfg.targets_for(hopper, src_named) == ("sm_89",)
    # 4. the named target beats the configuration
    assert cfg.targets_for(other, src_named) == ("sm_120",)
    # 5. the configuration
    assert cfg.targets_for(other, GEMM_196K) == ("sm_86",)
    # 6. the default
    assert Config().targets_for(other, GEMM_196K) == ("sm_80",)
    # settings_for without a target takes the first
    assert cfg.settings_for(hopper, source=src_all).target == "sm_100"
    assert [s.target for s in cfg.settings_list(hopper, src_all)] == ["sm_100", "sm_90"]


def test_per_file_targets_validation_and_first_match(tmp_path):
    cfg = _cfg(tmp_path, 'per-file-targets = { "hopper/**" = "sm90", "hopper/old_*.py" = '
                         '["sm_80"], "*_b.py" = ["sm_100", "sm_120"] }\n')
    assert cfg.per_file_targets[0] == ("hopper/**", ("sm_90",))
    assert cfg.targets_for(tmp_path / "hopper" / "old_x.py", "") == ("sm_90",)  # first match
    assert cfg.targets_for(tmp_path / "x" / "k_b.py", "") == ("sm_100", "sm_120")
    for bad in ('per-file-targets = { "a/**" = ["sm_75"] }\n',
                'per-file-targets = { "a/**" = [] }\n',
                'per-file-targets = ["sm_90"]\n'):
        with pytest.raises(ConfigError):
            _cfg(tmp_path, bad)


def test_unknown_directive_name_is_an_error(tmp_path):
    f = tmp_path / "k.py"
    with pytest.raises(DirectiveError) as info:
        Config().targets_for(f, "# tilelint: target sm_75\n" + GEMM_196K)
    assert "sm_75" in str(info.value) and info.value.line == 1
    # the language server leaves the name out instead
    assert resolve_targets(f, "# tilelint: target sm_75 sm_90\n", strict=False) == ("sm_90",)


def _check(capsys, *argv):
    rc = cli.main(["check", "--no-progress", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else []), err


def test_cli_check_follows_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", '[tool.tilelint]\nper-file-targets = { "hopper/**" = '
                                       '["sm_90"] }\n')
    write(tmp_path / "plain.py", GEMM_196K)  # default sm_80: TL201
    write(tmp_path / "hopper" / "k.py", GEMM_196K)  # per-file-targets sm_90: fits
    write(tmp_path / "directive.py", "# tilelint: target sm_100 sm_120\n" + GEMM_196K)
    write(tmp_path / "named.py", GEMM_196K + NAMED.replace("sm_120", "sm_90"))
    rc, out, _ = _check(capsys, ".")
    got = sorted((Path(x["path"]).name, x["code"], tuple(x["targets"])) for x in out)
    # directive.py: analysed for both of its targets, TL201 only on sm_120
    assert got == [("directive.py", "TL201", ("sm_120",)), ("plain.py", "TL201", ("sm_80",))]
    assert rc == 1
    # --target beats all of them
    rc, out, _ = _check(capsys, "--target", "sm_90", ".")
    assert rc == 0 and not [x for x in out if x["code"] == "TL201"]


def test_cli_bad_directive_is_a_file_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "ok.py", GEMM_196K)
    write(tmp_path / "bad.py", "# tilelint: target sm_999\n" + GEMM_196K)
    rc = cli.main(["check", "--no-progress", "--isolated", "."])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "bad.py" in out + err and "sm_999" in out + err and "Traceback" not in out + err
    # explain names the file and exits 2 (a usage error), no traceback
    rc = cli.main(["explain", "bad.py"])
    out, err = capsys.readouterr()
    assert rc == 2 and "bad.py:1" in err and "Traceback" not in err


def test_cli_stdin_and_explain_follow_the_directive(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = "# tilelint: target sm_90\n" + GEMM_196K
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(read=lambda: text))
    rc, out, _ = _check(capsys, "--isolated", "-")
    assert rc == 0 and out == []
    f = write(tmp_path / "k.py", text)
    rc = cli.main(["explain", "--isolated", "--format", "json", str(f)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["target"] == "sm_90"


# --------------------------------------------------------------------------
# The language server: same order, first target
# --------------------------------------------------------------------------


class _Doc:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines(keepends=True)


def test_lsp_uses_the_directive_then_per_file_targets_then_named(tmp_path):
    pp = write(tmp_path / "pyproject.toml",
               '[tool.tilelint]\ntarget = "sm_86"\nper-file-targets = { "hopper/**" = ["sm_89"] }\n')
    hopper = str(tmp_path / "hopper" / "k.py")
    other = str(tmp_path / "other" / "k.py")
    base = config_for(hopper)
    # the editor's own setting counts as configuration: the file's target wins
    opts = lsp_settings.merge({}, {"target": "sm_80"})

    def target(path, text):
        return lsp_settings.to_settings(opts, _Doc(path, text), base).target

    assert target(hopper, DIRECTIVE + GEMM_196K + NAMED) == "sm_100"  # first of the directive
    assert target(hopper, GEMM_196K + NAMED) == "sm_89"
    assert target(other, GEMM_196K + NAMED) == "sm_120"
    assert target(other, GEMM_196K) == "sm_80"
    # an unknown name is left out, never an exception
    assert target(other, "# tilelint: target sm_75 sm_90\n" + GEMM_196K) == "sm_90"
    assert target(other, "# tilelint: target bogus\n" + GEMM_196K) == "sm_80"
    # a path (an unopened file) is read from disk
    write(Path(other), DIRECTIVE + GEMM_196K)
    assert lsp_settings.to_settings(opts, other, base).target == "sm_100"
    assert pp.exists()


def test_lsp_empty_target_setting_means_unset():
    opts = lsp_settings.merge({"target": "sm_90"}, {}, {"target": ""})
    assert lsp_settings.to_settings(opts).target == "sm_90"


# --------------------------------------------------------------------------
# Parity: the compiler's arena on sm_100 (tensor memory excluded), sm_103, sm_120
# --------------------------------------------------------------------------

PARITY_FILES = (
    TMEM,
    HERE / "fixtures" / "parity" / "mixed_dtypes_smem.py",
    HERE / "fixtures" / "parity" / "bind_reads_written_manual.py",
    HERE / "fixtures" / "parity" / "gemm_ns3.py",
)


def _lowered(target: str):
    from parity_support import oracle_facts, require_tilelang
    require_tilelang()
    files = tuple(str(p) for p in PARITY_FILES
                  if not (p == TMEM and not targets.get(target).tmem))
    return oracle_facts(target, files)


@pytest.mark.parity
@pytest.mark.parametrize("target", ["sm_100", "sm_103", "sm_120"])
def test_parity_blackwell_arena(target):
    """Arena bytes, offsets, warp specialization, threads and versions equal the
    compiler's for the tcgen05 kernel (tensor memory is not in the arena) and
    for gemms lowered to mma.sync (operands aligned to 16, or 1024 when a TMA
    load fills their swizzled layout)."""
    facts = _lowered(target)
    for name, entry in facts.items():
        assert not entry.get("import_error"), entry.get("import_error")
        path = next(p for p in PARITY_FILES if p.name == name)
        a = analyze(path.read_text(), str(path), Settings(target=target))
        for kname, k in entry["kernels"].items():
            assert not k.get("error"), (name, k["error"])
            kr = next(r for r in a.kernels if r.kernel.name == kname)
            shared = k["shared"]
            assert kr.shared_bytes == shared["bytes"], (name, kr.shared_bytes, shared["bytes"])
            ours = {b.name: b.offset for b in kr.buffers if b.scope == "shared.dyn"}
            for buf, off in shared["offsets"].items():
                assert ours.get(buf) == off, (name, buf, ours.get(buf), off)
            assert kr.warp_specialized == k["warp_specialized"], name
            assert kr.threads == k["threads"], name
            ours_v = {b.name: b.versions for b in kr.buffers}
            for buf, n in (k.get("versions") or {}).items():
                if buf in ours_v:
                    assert ours_v[buf] == n, (name, buf)
        if path == TMEM:
            kr = a.kernels[0]
            # the compiler's tensor memory is outside its dynamic arena too
            assert "C_tmem" not in entry["kernels"]["tmem_gemm_kernel"]["shared"]["offsets"]
            assert kr.shared_bytes < 131072  # less than the accumulator alone
