"""TL001 only where CPython's parser rejects the code (issue 12, item 1).

The oracle for parsing is CPython itself: ``ast.parse`` of the same text.
tests/fixtures/parsing/ holds files written for this; the real-code check runs
the same assertion over every fixture of the suite."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tilelint.analysis import frontend

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"


def _tl001(src: str):
    return [p for p in frontend.parse_module(src).problems if p.code == "TL001"]


def test_toplevel_compounds_are_not_split():
    src = (FIXTURES / "parsing" / "toplevel_compounds.py").read_text()
    ast.parse(src)  # CPython accepts it ...
    assert _tl001(src) == []  # ... so tilelint must too
    # and the kernel after the compound statements is found
    assert [k.name for k in frontend.parse_module(src).kernels] == ["main"]


def test_clauses_stay_with_their_statement():
    src = (FIXTURES / "parsing" / "toplevel_compounds.py").read_text()
    chunks = frontend.split_chunks(src)
    for c in chunks:
        first = next((ln for ln in c.text.splitlines()
                      if ln.strip() and not ln.startswith("#")), "")
        assert frontend.first_word(first) not in frontend.CLAUSE_KEYWORDS, c.text[:60]


@pytest.mark.parametrize("src", [
    "try:\n    import x\nexcept ImportError:\n    x = None\n",
    "if a:\n    b = 1\nelif c:\n    b = 2\nelse:\n    b = 3\n",
    "with open('f') as fh:\n    t = fh.read()\n",
    "try:\n    pass\nfinally:\n    done = 1\n",
    "for i in range(3):\n    pass\nelse:\n    j = 1\n",
    "while False:\n    pass\nelse:\n    j = 1\n",
    '"""doc"""\nfrom __future__ import annotations\nimport os\n',
    "import a; import b\nx = 1\n",
])
def test_valid_python_gets_no_tl001(src):
    ast.parse(src)
    assert _tl001(src) == []


def test_one_tl001_per_broken_region_on_cpythons_line():
    src = (FIXTURES / "parsing" / "two_broken_regions.py").read_text()
    with pytest.raises(SyntaxError) as err:
        ast.parse(src)
    got = _tl001(src)
    # the first region is where CPython stops, on CPython's line
    assert got[0].span.line == err.value.lineno
    # the second region (an unclosed bracket in `second`) is reported once,
    # on the line of the bracket CPython would name when parsing it alone
    tail = src[src.index("def second"):]
    with pytest.raises(SyntaxError) as err2:
        ast.parse(tail)
    second_line = src[:src.index("def second")].count("\n") + err2.value.lineno
    assert [p.span.line for p in got] == [err.value.lineno, second_line]


def test_no_fixture_that_cpython_parses_gets_tl001():
    for path in sorted(FIXTURES.rglob("*.py")):
        src = path.read_text()
        try:
            ast.parse(src)
        except SyntaxError:
            continue
        assert _tl001(src) == [], path


STACKED = '''import tilelang
import tilelang.language as T


@tilelang.jit
def first(M, block_M=64):
    @T.prim_func
    def k1(A: T.Tensor((M,), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((block_M,), "float16")
            for i in T.Pipelined(4, num_stages=2):
                T.copy(A[i * block_M], A_shared)
                T.copy(
    return k1


@tilelang.autotune(configs=[{"block_M": 64}, {"block_M": 128}])
@tilelang.jit(out_idx=[-1])
def second(M, block_M=None):
    @T.prim_func
    def k2(A: T.Tensor((M,), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((block_M,), "float16")
            for i in T.Pipelined(4, num_stages=2):
                T.copy(A[i * block_M], A_shared)
    return k2
'''


def test_stacked_decorators_after_an_unclosed_bracket_stay_together():
    # An unclosed bracket (a statement being typed) leaves the tokenizer unable
    # to say where the later statements start; the line-based cut must not split
    # `second`'s two one-line decorators: CPython accepts that function on its
    # own, so the file has one broken region, reported once, where CPython
    # stops, and `second`'s kernel is still read.
    with pytest.raises(SyntaxError) as err:
        ast.parse(STACKED)
    tail = STACKED[STACKED.index("@tilelang.autotune"):]
    ast.parse(tail)
    got = _tl001(STACKED)
    assert [p.span.line for p in got] == [err.value.lineno]
    assert "k2" in [k.name for k in frontend.parse_module(STACKED).kernels]
