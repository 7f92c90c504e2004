"""Real-world kernel shapes (issue 8): values reaching kernels through call
sites in any function, parametrize cases, config functions, autotune lists,
argparse defaults, ``functools.partial``/``.compile``; schedules inside macros,
helper iterators and conditional iterators.

Each tests/fixtures/realworld/X.py has an X.expected.json written by hand; its
"_why" gives the reasoning.  Only the fields an expectation lists are compared
(``bind`` is a subset of the instance's bindings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilelint.analysis import Settings, analyze, frontend, values
from tilelint.analysis.pipeline import _unresolved_names, loop_active, pipelined_loops

DIR = Path(__file__).parent / "fixtures" / "realworld"
CASES = sorted(DIR.glob("*.py"))


def instance_summary(kernel, inst) -> dict:
    env = inst.env
    return {
        "label": inst.label,
        "bind": dict(inst.bindings),
        "allocs": [[a.name, list(values.shape_value(env, a.shape)),
                    values.normalise_dtype(env.evaluate(a.dtype))]
                   for a in kernel.allocs if a.scope.startswith("shared")],
        "loops": [{"line": lp.span.line, "num_stages": env.eval_int(lp.num_stages),
                   "active": loop_active(lp, env),
                   "body": [s.kind for s in lp.body]}
                  for lp in pipelined_loops(kernel.body)],
        "unresolved": sorted(_unresolved_names(kernel, env)),
    }


def summary(path: Path) -> dict:
    module = frontend.parse_module(path.read_text())
    out = {}
    for k in module.kernels:
        insts = values.instances(module, k, all_calls=True)
        out[k.name] = {
            "default": values.instances(module, k)[0].label,
            "labels": values.instance_labels(module, k),
            "instances": [instance_summary(k, i) for i in insts],
        }
    return out


def _check(got: dict, want: dict, where: str) -> None:
    for key, val in want.items():
        if key.startswith("_"):
            continue
        assert key in got, f"{where}: no {key}"
        if key == "bind":
            sub = {k: got["bind"].get(k, "<missing>") for k in val}
            assert sub == val, f"{where}: bindings"
        elif isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            # instances, loops: same length, each compared on the fields given.
            assert len(got[key]) == len(val), (
                f"{where}: {len(got[key])} {key} "
                f"{[i.get('label', i.get('line')) for i in got[key]]}, expected {len(val)}")
            for i, (g, w) in enumerate(zip(got[key], val, strict=True)):
                _check(g, w, f"{where} {key}[{i}]")
        else:
            assert got[key] == val, f"{where}: {key}"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_realworld_fixture(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    got = summary(path)
    assert sorted(got) == sorted(expected["kernels"]), "kernels found"
    for name, want in expected["kernels"].items():
        _check(got[name], want, name)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_realworld_analyze(path: Path) -> None:
    """The whole pipeline runs over every instance without an internal error,
    and diagnostics carry configuration labels only when several exist."""
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    a = analyze(path.read_text(), str(path), Settings(all_bindings=True))
    assert not [d for d in a.diagnostics if d.code == "TL000"], \
        [d.message for d in a.diagnostics if d.code == "TL000"]
    if "diagnostics" in expected:
        got = sorted([d.code, d.span.line, list(d.configs)] for d in a.diagnostics
                     if d.code in expected.get("_codes", [d.code]))
        assert got == sorted(expected["diagnostics"])


def test_parse_never_raises_on_broken_helpers() -> None:
    src = (
        "import tilelang.language as T\n"
        "def cfg():\n    return cfg()\n"
        "def f(n):\n    while True:\n        n += 1\n    return n\n"
        "def g():\n    x = []\n    for i in range(10**9):\n        x.append(i)\n    return x\n"
        "def k(a, b=cfg(), c=f(1), d=g()):\n"
        "    @T.prim_func\n"
        "    def kern(A: T.Tensor((a,), 'float16')):\n"
        "        with T.Kernel(1, threads=128) as bx:\n"
        "            S = T.alloc_shared((b, c, d), 'float16')\n"
        "            for i in T.Pipelined(4, num_stages=b):\n"
        "                T.copy(A[i], S)\n"
        "    return kern\n"
        "k(1)\n"
    )
    module = frontend.parse_module(src)
    (kernel,) = module.kernels
    inst = values.instances(module, kernel)[0]
    assert inst.env.eval_int(kernel.allocs[0].shape[0]) is None
    analyze(src, "x.py", Settings(all_bindings=True))


def test_select_instance_by_label() -> None:
    path = DIR / "rw_parametrize.py"
    module = frontend.parse_module(path.read_text())
    (kernel,) = module.kernels
    labels = values.instance_labels(module, kernel)
    assert len(labels) == len(set(labels)) == 3
    picked = values.instances(module, kernel, select=labels[-1])
    assert [i.label for i in picked] == [labels[-1]]
    # An unknown label falls back to the default instance.
    assert values.instances(module, kernel, select="nope")[0].label == labels[0]
