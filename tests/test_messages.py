"""Severities and messages (issue 12, item 5): TL002, dtype sizes, columns, and
the shared-memory number.

* TL002: one per kernel, over every instance and target, naming every unknown
  value with why it is unknown, and never offering ``self``/``cls`` or a module
  for binding.  The fixtures in ``tests/fixtures/messages/`` are written for
  this test; the expected names and reasons below are reasoned from their
  source, next to each entry.
* ``DataType(x).bits`` and the other dtype-size spellings are evaluated; the
  values are checked against tilelang 0.1.15 in the parity tests at the end.
* ``explain`` and ``check`` show the same (1-based) column in text and the same
  (0-based) column in JSON.
* The shared-memory number is the same everywhere: the dynamic arena plus the
  static ``__shared__`` bytes (mbarriers on the warp-specialized path), which
  is what a launch needs and what the per-block limit applies to.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from parity_support import oracle_facts, require_tilelang

from tilelint.analysis import Settings, analyze, values
from tilelint.analysis.model import Attr, Call, Const, Name
from tilelint.server import cli
from tilelint.server.lsp import hover_text

REPO = Path(__file__).resolve().parent.parent
MESSAGES = REPO / "tests" / "fixtures" / "messages"
PARITY = REPO / "tests" / "fixtures" / "parity"
EXAMPLES = REPO / "examples"


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def analyse(path: Path, target: str = "sm_80", all_bindings: bool = True, **kw):
    return analyze(path.read_text(), str(path), Settings(target=target,
                                                         all_bindings=all_bindings, **kw))


def tl002(analysis) -> List:
    return [d for d in analysis.diagnostics if d.code == "TL002"]


def listed(message: str) -> Dict[str, str]:
    """name -> why, as a TL002 message lists them: `name` (why), … stay(s) …"""
    return dict(re.findall(r"`([^`]+)` \((.*?)\)(?=, `| stays? symbolic)", message))


def listed_names(message: str) -> List[str]:
    return list(listed(message))


def bind_names(message: str) -> List[str]:
    m = re.search(r"`# tilelint: bind ([^`]*)`", message)
    return [] if m is None else [w.split("=")[0] for w in m.group(1).split()]


# --------------------------------------------------------------------------
# TL002
# --------------------------------------------------------------------------

# file -> what its one TL002 must say.  names: every unknown value, sorted.
# why: a piece of the reason given for a name.  binds: the names the
# `# tilelint: bind` suggestion gives.
TL002_EXPECTED: Dict[str, dict] = {
    # matmul() is never called in the file: block_M/block_N are parameters
    # without defaults and nothing gives them; NUM_STAGES is imported;
    # block_K is assigned from pick_block_k(), which is imported too, so the
    # call cannot be followed.  M, N, K are tensor shapes only (no shared
    # buffer or schedule uses them), so they are not listed.
    "tl002_factory.py": dict(
        names=["NUM_STAGES", "block_K", "block_M", "block_N"],
        why={"NUM_STAGES": "imported from `kernel_config`",
             "block_K": "a call of `pick_block_k`",
             "block_M": "parameter of `matmul` without a default, no call site in this file",
             "block_N": "parameter of `matmul` without a default, no call site in this file"},
        binds=["NUM_STAGES", "block_K", "block_M", "block_N"]),
    # `self` is an object: never offered for binding.  self.block_M is read
    # directly in A_shared's shape (nothing to bind: said so), self.block_K is
    # read through the local block_K, which a binding replaces.  block_N is a
    # parameter of build() without a default and build() is never called.
    # num_stages has a default (2), dtype too.
    "tl002_method.py": dict(
        names=["block_N", "self.block_K", "self.block_M"],
        why={"block_N": "parameter of `build` without a default, no call site in this file",
             "self.block_M": "`self` is a `Gemm` object"},
        binds=["block_K", "block_N"],
        unbindable=["self.block_M"]),
    # Line 19 passes block_N = runtime_block() (imported, unknown there), line
    # 20 passes block_M = runtime_block(): each instance leaves one of them
    # unknown, and the kernel's one TL002 names both.
    "tl002_instances.py": dict(
        names=["block_M", "block_N"],
        why={"block_M": "the call at line 20", "block_N": "the call at line 19"},
        binds=["block_M", "block_N"]),
    # threads is assigned three times, each from the one before; the resolver
    # keeps the last (max(threads, 1)), and the one before it calls
    # `.bit_length()`, which it does not follow.  threads feeds T.Kernel, so it
    # is listed (never silently dropped), with that reason, and can be bound.
    "tl002_reassigned.py": dict(
        names=["threads"],
        why={"threads": "assigned `max(threads, 1)`: computed from its own earlier value"},
        binds=["threads"]),
    # S is a module: S.BLOCK_N (read directly in a shape) cannot be bound,
    # S.THREADS feeds the local `threads`, which can.
    "tl002_module_attr.py": dict(
        names=["S.BLOCK_N", "S.THREADS"],
        why={"S.BLOCK_N": "`S` is imported from `tile_settings`"},
        binds=["threads"],
        unbindable=["S.BLOCK_N"]),
}


@pytest.mark.parametrize("name", sorted(TL002_EXPECTED))
def test_tl002_one_per_kernel_names_every_unknown(name):
    exp = TL002_EXPECTED[name]
    a = analyse(MESSAGES / name)
    diags = tl002(a)
    assert len(diags) == 1, [d.message for d in diags]
    msg = diags[0].message
    assert listed_names(msg) == exp["names"], msg
    for n, why in exp["why"].items():
        assert why in listed(msg)[n], (n, msg)
    assert bind_names(msg) == exp["binds"], msg
    for n in exp.get("unbindable", []):
        assert f"`{n}` is read from an object" in msg or f"`{n}` are read" in msg or \
            re.search(re.escape(f"`{n}`") + r"[^;]*cannot give", msg), msg


@pytest.mark.parametrize("name", sorted(TL002_EXPECTED))
def test_tl002_never_offers_self_cls_or_a_module(name):
    for d in tl002(analyse(MESSAGES / name)):
        binds = bind_names(d.message)
        assert not {"self", "cls", "S", "T"} & set(binds), d.message
        assert not re.search(r"\b(self|cls|S)=", d.message), d.message
        # No quick fix: the values are exactly what is not known, and a fix
        # must clear its diagnostic (tests/test_safe_edits.py).
        assert d.fixes == ()


def _insert_binding(source: str, def_name: str, text: str) -> str:
    """``text`` on the line above ``def def_name`` (above its decorators)."""
    lines = source.splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(f"def {def_name}("))
    while i > 0 and lines[i - 1].lstrip().startswith("@"):
        i -= 1
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines.insert(i, indent + text + "\n")
    return "".join(lines)


@pytest.mark.parametrize("name,factory,given", [
    ("tl002_factory.py", "matmul",
     {"NUM_STAGES": "3", "block_K": "32", "block_M": "128", "block_N": "128"}),
    ("tl002_instances.py", "copy_tiles", {"block_M": "64", "block_N": "64"}),
    ("tl002_module_attr.py", "tl002_module_attr", {"threads": "128"}),
    ("tl002_reassigned.py", "scale_rows", {"threads": "128"}),
])
def test_tl002_suggestion_filled_in_clears_it(name, factory, given):
    """Every name the suggestion lists is one a binding really gives: the
    suggested comment, filled in above the factory, leaves the kernel with no
    TL002 (tl002_module_attr.py: only S.BLOCK_N, which no binding gives)."""
    path = MESSAGES / name
    d = tl002(analyse(path))[0]
    m = re.search(r"`(# tilelint: bind [^`]*)`", d.message)
    comment = m.group(1)
    assert sorted(w.split("=")[0] for w in comment.split("bind ", 1)[1].split()) == sorted(given)
    for n, v in given.items():
        comment = comment.replace(f"{n}=…", f"{n}={v}")
    src = _insert_binding(path.read_text(), factory, comment)
    a = analyze(src, str(path), Settings(target="sm_80", all_bindings=True))
    left = [listed_names(x.message) for x in tl002(a)]
    assert left == ([["S.BLOCK_N"]] if name == "tl002_module_attr.py" else [])
    if not left:
        assert all(kr.shared_bytes for kr in a.kernels)


def test_tl002_bound_through_the_local_name():
    """tl002_method.py: binding block_K and block_N leaves only self.block_M,
    which is read directly from the object."""
    a = analyse(MESSAGES / "tl002_method.py", bindings=(("block_K", 32), ("block_N", 64)))
    (d,) = tl002(a)
    assert listed_names(d.message) == ["self.block_M"]
    assert bind_names(d.message) == []


def test_tl002_one_finding_across_targets(in_repo, capsys):
    rc, out, _ = run(capsys, "check", "--isolated", "--no-progress", "--select", "TL002",
                     "--targets", "sm_80,sm_90", "--format", "json",
                     "tests/fixtures/messages/tl002_factory.py")
    found = json.loads(out)
    assert len(found) == 1 and found[0]["targets"] == ["sm_80", "sm_90"]


def test_tl002_explain_lists_the_same_names(in_repo, capsys):
    rc, out, _ = run(capsys, "explain", "--isolated", "tests/fixtures/messages/tl002_method.py")
    symbolic = [ln for ln in out.splitlines() if ln.strip().startswith("symbolic:")]
    assert symbolic == ["  symbolic: block_N, self.block_K, self.block_M"]


# --------------------------------------------------------------------------
# dtype sizes
# --------------------------------------------------------------------------


def _bits_of(expr) -> object:
    return values.Env().evaluate(expr)


def _datatype(func: str, name: str, attr: str):
    return Attr(Call(func, (Const(name),)), attr)


# name -> (bits, lanes): the element width the dtype's name spells, times the
# lanes of an `xN` suffix; bool and float4_e2m1_unpacked take one byte per value.
DTYPES = {
    "float16": (16, 1), "bfloat16": (16, 1), "float32": (32, 1), "float64": (64, 1),
    "int8": (8, 1), "uint8": (8, 1), "int4": (4, 1), "int1": (1, 1), "int64": (64, 1),
    "bool": (8, 1), "float8_e4m3": (8, 1), "float8_e4m3fn": (8, 1), "float8_e5m2": (8, 1),
    "float8_e8m0fnu": (8, 1), "float6_e2m3fn": (6, 1), "float4_e2m1fn": (4, 1),
    "float16x2": (16, 2), "int32x4": (32, 4),
}


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_dtype_sizes_follow_the_name(name):
    bits, lanes = DTYPES[name]
    for func in ("DataType", "tvm.DataType", "T.dtype"):
        assert _bits_of(_datatype(func, name, "bits")) == bits
        assert _bits_of(_datatype(func, name, "lanes")) == lanes
        # bytes round the whole vector up to a byte: int4 takes 1, float16x2 4.
        assert _bits_of(_datatype(func, name, "bytes")) == (bits * lanes + 7) // 8
    assert _bits_of(Attr(Attr(Name("T"), name), "bits")) == bits


def test_dtype_size_of_something_that_is_no_dtype_stays_unknown():
    assert _bits_of(_datatype("DataType", "not_a_type", "bits")) is None
    assert _bits_of(Attr(Const("float16"), "real")) is None


def test_dtype_sizes_in_a_kernel():
    """gemm_dtype_sizes.py: vec = 128 // 16 = 8, block_M = 16 * 8 = 128,
    block_N = 64 * 4 // 2 = 128, block_K = 512 // 16 = 32, threads = 8 * 16 =
    128, ns = 2 * (16 // 16) = 2.  Two fp16 tiles of 128×32 and 32×128, two
    versions each: (4096 + 4096) × 2 B × 2 = 32768 B."""
    a = analyse(PARITY / "gemm_dtype_sizes.py", all_bindings=False)
    (kr,) = a.kernels
    assert kr.threads == 128 and kr.unresolved == ()
    assert [(b.name, b.shape, b.versions) for b in kr.buffers] == [
        ("A_shared", (128, 32), 2), ("B_shared", (32, 128), 2)]
    assert kr.shared_bytes == 32768
    assert tl002(a) == []


# --------------------------------------------------------------------------
# Columns: explain and check agree
# --------------------------------------------------------------------------

COLUMN_CASES = [
    (EXAMPLES / "duplicate_order.py", "sm_80"),
    (EXAMPLES / "num_stages_with_manual_stage.py", "sm_80"),
    (EXAMPLES / "smem_overflow_sm80.py", "sm_80"),
    (PARITY / "gemm_smem_over_all.py", "sm_90"),
    (MESSAGES / "tl002_method.py", "sm_80"),
]


@pytest.mark.parametrize("path,target", COLUMN_CASES, ids=lambda x: getattr(x, "name", x))
def test_columns_agree_between_explain_and_check(path, target, in_repo, capsys):
    rel = str(path.relative_to(REPO))
    _, concise, _ = run(capsys, "check", "--isolated", "--no-progress", "--target", target,
                        "--output-format", "concise", rel)
    _, check_json, _ = run(capsys, "check", "--isolated", "--no-progress", "--target", target,
                           "--format", "json", rel)
    _, explain, _ = run(capsys, "explain", "--isolated", "--target", target, rel)
    _, explain_json, _ = run(capsys, "explain", "--isolated", "--target", target,
                             "--format", "json", rel)
    # check: `path:line:col: CODE message`; explain: `  line:col: CODE [sev] message`.
    from_check = sorted(re.findall(r"^[^\s:]+:(\d+):(\d+): (TL\d+) ", concise, re.MULTILINE))
    from_explain = sorted(re.findall(r"^  (\d+):(\d+): (TL\d+) \[", explain, re.MULTILINE))
    assert from_check and from_check == from_explain
    cj = sorted((f["line"], f["column"], f["code"]) for f in json.loads(check_json))
    ej = sorted((d["line"], d["column"], d["code"])
                for d in json.loads(explain_json)["diagnostics"])
    assert cj == ej
    # Text columns are 1-based, JSON columns 0-based: one apart, the same finding.
    assert sorted((str(ln), str(c + 1), code) for ln, c, code in cj) == from_check


def test_text_column_is_one_based():
    """examples/smem_overflow_sm80.py line 22 is `            A_shared = …`:
    twelve spaces, so the statement starts in column 13 (1-based)."""
    line = (EXAMPLES / "smem_overflow_sm80.py").read_text().splitlines()[21]
    assert line.index("A_shared") == 12
    a = analyse(EXAMPLES / "smem_overflow_sm80.py", all_bindings=False)
    from tilelint.analysis import render
    text = render.explain_text(a)
    assert "  22:13: TL201 [error]" in text


# --------------------------------------------------------------------------
# One shared-memory number
# --------------------------------------------------------------------------

ARENA_CASES = [
    # sm_80 has no static shared memory here: total = arena.
    (EXAMPLES / "smem_overflow_sm80.py", "sm_80"),
    (EXAMPLES / "gemm_clean.py", "sm_80"),
    # sm_90 warp-specializes these: 2 × num_stages mbarriers of 8 B are static
    # shared memory on top of the arena (num_stages=5: 80 B; 3: 48 B).
    (PARITY / "gemm_smem_over_all.py", "sm_90"),
    (PARITY / "gemm_epilogue_shared.py", "sm_90"),
    (PARITY / "gemm_smem_over_all.py", "sm_80"),
    (PARITY / "mixed_dtypes_smem.py", "sm_90"),
]


@pytest.mark.parametrize("path,target", ARENA_CASES, ids=lambda x: getattr(x, "name", x))
def test_one_shared_memory_number(path, target, in_repo, capsys):
    rel = str(path.relative_to(REPO))
    _, explain, _ = run(capsys, "explain", "--isolated", "--target", target, rel)
    _, explain_json, _ = run(capsys, "explain", "--isolated", "--target", target,
                             "--format", "json", rel)
    _, check_json, _ = run(capsys, "check", "--isolated", "--no-progress", "--target", target,
                           "--extend-select", "TL203", "--format", "json", rel)
    kernels = json.loads(explain_json)["kernels"]
    (k,) = kernels
    sh = k["shared"]
    total = sh["total_bytes"]
    assert total == sh["bytes"] + sh["static_bytes"]
    # explain text: "shared memory: TOTAL B (…) of the TARGET budget of … (arena A B[ + static S B])"
    m = re.search(r"shared memory: (\d+) B .* of the (\w+) budget of (\d+) B .*\(arena (\d+) B"
                  r"(?: \+ static (\d+) B)?\)", explain)
    assert m, explain
    assert (int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)),
            int(m.group(5) or 0)) == (total, target, sh["budget"], sh["bytes"],
                                      sh["static_bytes"])
    # TL201/TL203 say the same total, with the same breakdown.
    for f in json.loads(check_json):
        if f["code"] in ("TL201", "TL203"):
            assert re.match(rf"shared memory {total} B ", f["message"]), f["message"]
        if f["code"] == "TL201":
            breakdown = f"(arena {sh['bytes']} B" + (
                f" + static {sh['static_bytes']} B" if sh["static_bytes"] else "")
            assert breakdown in f["message"], f["message"]
    # The hover on a shared buffer.
    a = analyse(path, target=target, all_bindings=False)
    kr = a.kernels[0]
    md = hover_text.buffer_hover(kr, None, kr.buffers[0])
    assert f"shared memory per block: {total} bytes" in md
    assert kr.shared_total == total


def test_static_bytes_on_sm90_are_the_mbarriers():
    """gemm_smem_over_all.py has num_stages=5: the warp-specialized path uses
    2 × 5 mbarriers of 8 bytes = 80 B of static shared memory."""
    a = analyse(PARITY / "gemm_smem_over_all.py", target="sm_90", all_bindings=False)
    kr = a.kernels[0]
    assert kr.shared_static_bytes == 80
    assert kr.shared_total == kr.shared_bytes + 80


# --------------------------------------------------------------------------
# Parity: dtype sizes and the total against tilelang 0.1.15
# --------------------------------------------------------------------------

_BITS_PROBE = r"""
import json, sys
import tilelang, tvm
import tilelang.language as T
out = {"T": {}, "DataType": {}}
for n in dir(T):
    v = getattr(T, n)
    if isinstance(v, str) and type(v).__name__ == "dtype":
        out["T"][n] = [v.bits, v.lanes, v.bytes]
for n in sys.argv[1:]:
    try:
        d = tvm.DataType(n)
        out["DataType"][n] = [d.bits, d.lanes, d.bytes, T.dtype(n).bits]
    except Exception as exc:
        out["DataType"][n] = None
print(json.dumps(out))
"""


@pytest.mark.parity
def test_dtype_sizes_match_tilelang():
    """Every dtype tilelang.language exports (``T.float8_e4m3.bits`` …) and the
    dtype names above through ``tvm.DataType(name)``: bits, lanes and bytes as
    the resolver evaluates them equal tilelang 0.1.15's."""
    require_tilelang()
    proc = subprocess.run([sys.executable, "-c", _BITS_PROBE, *sorted(DTYPES)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(facts["T"]) > 100
    for n, (bits, lanes, nbytes) in sorted(facts["T"].items()):
        expr = Attr(Name("T"), n)
        got = [_bits_of(Attr(expr, a)) for a in ("bits", "lanes", "bytes")]
        assert got == [bits, lanes, nbytes], (n, got, [bits, lanes, nbytes])
    for n, theirs in sorted(facts["DataType"].items()):
        assert theirs is not None, n
        bits, lanes, nbytes, tbits = theirs
        got = [_bits_of(_datatype("tvm.DataType", n, a)) for a in ("bits", "lanes", "bytes")]
        assert got == [bits, lanes, nbytes] and tbits == bits, (n, got, theirs)
        assert DTYPES[n] == (bits, lanes)


@pytest.mark.parity
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_shared_total_matches_the_compiler(target):
    """The total is the compiler's dynamic arena plus its static __shared__
    bytes (the mbarriers of the warp-specialized path on sm_90)."""
    require_tilelang()
    names = ("gemm_dtype_sizes.py", "gemm_smem_over_all.py", "mixed_dtypes_smem.py")
    facts = oracle_facts(target, tuple(str(PARITY / n) for n in names))
    for n in names:
        a = analyse(PARITY / n, target=target, all_bindings=False)
        for kname, k in facts[n]["kernels"].items():
            kr = next(kr for kr in a.kernels if kr.kernel.name == kname)
            sh = k["shared"]
            assert kr.shared_bytes == sh["bytes"], (n, kname)
            assert kr.shared_total == sh["bytes"] + sh["static_bytes"], (
                n, kname, kr.shared_total, sh)


# --------------------------------------------------------------------------
# TL002 is never silent where values are missing
# --------------------------------------------------------------------------

ALL_FIXTURES = sorted(
    [p for d in ("parity", "model", "realworld", "messages", "autotune", "targets")
     for p in (REPO / "tests" / "fixtures" / d).glob("**/*.py")]
    + list(EXAMPLES.glob("*.py")))


def test_tl002_whenever_the_resolver_misses_a_value():
    """For every fixture of the repository: a kernel whose sizes, dtypes,
    threads or schedule name a value the resolver does not have gets its
    TL002, and a TL002 is only given where one of those is unknown."""
    from tilelint.analysis import frontend, pipeline
    checked = 0
    for path in ALL_FIXTURES:
        src = path.read_text(encoding="utf-8", errors="replace")
        module = frontend.parse_module(src)
        a = analyze(src, str(path), Settings(target="sm_80"), module=module)
        with_tl002 = {d.kernel for d in tl002(a)}
        for kr in a.kernels:
            k = kr.kernel
            if k.kernel_span is None or k.dialect == "npu":
                continue  # modelled, never reported on
            inst = values.instances(module, k)[0]
            view = pipeline.active_view(k, inst.env)
            raw = pipeline._unresolved_names(view, inst.env) - {"<symbolic>"}
            unknown = any(inst.env.evaluate(e) is None and inst.env.reason(e)
                          for e in pipeline._relevant_exprs(view))
            if raw:
                assert k.name in with_tl002, (path.name, k.name, raw)
            if k.name in with_tl002:
                assert unknown, (path.name, k.name)
            checked += 1
    assert checked > 100, checked


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_tl113_names_the_target_it_is_reported_for(target):
    # nested_pipelined is a parity fixture whose loops warp specialization
    # strips (TL113 on sm_90, checked against the compiler in test_parity).
    src = (Path(__file__).parent / "fixtures" / "parity" / "nested_pipelined.py").read_text()
    a = analyze(src, "nested_pipelined.py", Settings(target=target))
    msgs = [d.message for d in a.diagnostics if d.code == "TL113"]
    assert msgs and all(m.startswith(f"on {target} ") for m in msgs)
