"""The frontend's fast paths give what libcst's own machinery gives.

``frontend`` walks libcst trees itself (``code_children``, ``calls_in``) instead
of ``CSTNode.visit``, and computes node ranges with its own code-generation
state (``fast_positions``) instead of ``MetadataWrapper.resolve(PositionProvider)``.
Both replacements are exact: on every fixture file, the walk visits the same
nodes in the same order as libcst's visitor, and the ranges are libcst's.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from tilelint.analysis import frontend

FIXTURES = sorted((Path(__file__).parent / "fixtures").rglob("*.py"))


def _parse(path: Path):
    try:
        return cst.parse_module(path.read_text(encoding="utf-8"))
    except (cst.ParserSyntaxError, UnicodeDecodeError):
        return None


def _visitor_calls(node: cst.CSTNode) -> List[cst.Call]:
    out: List[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            out.append(call)
            return True

        def visit_FunctionDef(self, fn: cst.FunctionDef) -> bool:
            return False

    node.visit(V())
    return out


def _all_nodes(module: cst.Module):
    stack = [module]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_walk_and_positions_match_libcst(path: Path) -> None:
    module = _parse(path)
    if module is None:
        pytest.skip("not parseable by libcst (a syntax-error fixture)")
    checked = 0
    for node in _all_nodes(module):
        # The code children are libcst's children without white space and
        # punctuation, in the same order.
        mine = frontend.code_children(node)
        theirs = [c for c in node.children if any(c is m for m in mine)]
        assert [id(c) for c in mine] == [id(c) for c in theirs], type(node).__name__
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement,
                             cst.IndentedBlock)) and not isinstance(node, cst.FunctionDef):
            assert [id(c) for c in frontend.calls_in(node, [])] == \
                [id(c) for c in _visitor_calls(node)]
            checked += 1
    assert checked > 0
    # Our ranges are PositionProvider's, for every node.
    ours = frontend.fast_positions(module)[0]
    ref = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert len(ours) == len(ref)
    for node, r in ref.items():
        assert ours[id(node)] == (r.start.line, r.start.column, r.end.line, r.end.column)


def test_walk_follows_source_order_where_fields_do_not() -> None:
    """``a if c else b`` is declared (test, body, orelse) but reads body first,
    ``except E as e:`` is declared (body, type, name); a method's decorators
    precede its parameters' defaults."""
    module = cst.parse_module("x = f() if g() else h()\n"
                              "class C(base()):\n"
                              "    @deco()\n"
                              "    def m(self, a=dflt()):\n"
                              "        inner()\n"
                              "try:\n"
                              "    body()\n"
                              "except errors() as e:\n"
                              "    handler()\n")
    names = [c.func.value for c in frontend.calls_in(module.body[0], [])]
    assert names == ["f", "g", "h"]
    names = [c.func.value for c in frontend.calls_in(module.body[1], [])]
    assert names == ["base"]  # a nested function is not entered
    fn = module.body[1].body.body[0]
    kids = [type(c).__name__ for c in frontend.code_children(fn)]
    assert kids == ["Decorator", "Name", "Parameters", "IndentedBlock"]
    names = [c.func.value for c in frontend.calls_in(module.body[2], [])]
    assert names == ["body", "errors", "handler"]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_chunks_of_a_parsed_file_parse_alone(path: Path) -> None:
    """parse_chunk skips CPython's parser for chunks of a file it accepted
    whole (split_chunks notes them): each such chunk must parse on its own."""
    import ast

    source = frontend.normalise_newlines(path.read_text(encoding="utf-8"))
    try:
        ast.parse(source)
    except SyntaxError:
        pytest.skip("the file does not parse: its chunks are checked one by one")
    for chunk in frontend.split_chunks(source):
        ast.parse(chunk.text)


def _every_chunk_scan_agrees(source: str) -> int:
    checked = 0
    for chunk in frontend.split_chunks(source):
        facts = frontend.parsed_scan(chunk.text)
        if facts is None:
            continue
        assert facts == frontend.scan_tokens(chunk.text), chunk.text
        checked += 1
    return checked


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_parsed_scan_is_what_the_tokenizer_sees(path: Path) -> None:
    """host.split_broken asks the tokenizer about each run of a broken file;
    for chunks of a text CPython parsed, frontend.parsed_scan answers from the
    parse instead.  The answer must be the tokenizer's, field by field."""
    import ast

    source = frontend.normalise_newlines(path.read_text(encoding="utf-8"))
    try:
        ast.parse(source)
    except SyntaxError:
        pytest.skip("the file does not parse: split_chunks notes no chunk of it")
    assert _every_chunk_scan_agrees(source) >= 1


def test_parsed_scan_on_tricky_statements() -> None:
    # Comment-only chunk first, a decorator over a def, a clause, two
    # statements on one line, a string whose last line starts with '#', a
    # bracket spanning lines with a column-0 closer, trailing comments.
    source = (
        "# header\n\n"
        "@decorate(\n    1)\n# between\ndef f(x):\n    return x\n    # inside\n"
        "if a:\n    pass\nelse:\n    pass\n"
        "x = 1; y = 2  # two\n"
        's = """\n# not a comment"""\n'
        "lst = [\n1,\n]\n"
        "z = (1 +\n     2)\n\n# tail\n"
    )
    assert _every_chunk_scan_agrees(source) == 7


def test_too_deep_for_the_position_pass_is_tl001() -> None:
    """A kernel loop bound written as a sum of 800 terms is a left-nested chain
    of 800 BinaryOperation nodes: CPython's parser and libcst's accept it, but
    libcst's code-generation pass (which computes the positions) recurses a few
    frames per level and runs past Python's default limit of 1,000 frames.
    That RecursionError must come out as the documented TL001 for the chunk
    ("nests too deeply to analyse"), with the other chunks analysed; it used to
    surface as a KeyError from the position bookkeeping (the range of the ``for``
    statement asked for the end of a body that was never generated), and
    parse_module raised."""
    bound = "+".join(["4"] * 800)
    source = (
        "import tilelang.language as T\n"
        "\n"
        "N = 4\n"
        "\n"
        "\n"
        "@T.prim_func\n"
        "def k(A: T.Tensor((1024,), \"float16\")):\n"
        "    with T.Kernel(8, threads=128) as bx:\n"
        "        S = T.alloc_shared((64,), \"float16\")\n"
        f"        for i in T.Pipelined({bound}, num_stages=2):\n"
        "            T.copy(A[i], S)\n"
        "\n"
        "\n"
        "@T.prim_func\n"
        "def k2(A: T.Tensor((1024,), \"float16\")):\n"
        "    with T.Kernel(8, threads=128) as bx:\n"
        "        S = T.alloc_shared((64,), \"float16\")\n"
        "        for i in T.Pipelined(N, num_stages=2):\n"
        "            T.copy(A[i], S)\n")
    module = frontend.parse_module(source)
    assert [(p.code, p.span.line, p.message) for p in module.problems] == \
        [("TL001", 6, "this statement nests too deeply to analyse")]
    assert [k.name for k in module.kernels] == ["k2"]


# -- re-parsing an edit from the old tree (frontend.reparse) -------------------------------

_PARITY = sorted((Path(__file__).parent / "fixtures" / "parity").glob("*.py"))[::4]
# Statement lines typed over a kernel's statement (as an editor sends them).
_TYPED = ["T", "T.c", "T.copy", "T.copy(A[by * block_M, k * block_K], A_shared)",
          "T.copy(A[by * block_M, k * block_K], A_shared)  # typed", "x = 3", "x = 30",
          "T.clear(C_local)", "pass"]


def _typed_lines(text: str) -> List[int]:
    lines = text.split("\n")
    return [i for i, ln in enumerate(lines)
            if ln.startswith("        ") and ln.lstrip().startswith(("T.copy(", "T.gemm("))
            and ln.rstrip().endswith(")")][:2]


@pytest.mark.parametrize("path", _PARITY, ids=lambda p: p.stem)
def test_reparsed_edits_equal_a_whole_parse(path: Path) -> None:
    """A statement line typed one state at a time (each state re-parsed from the
    tree of the one before, as the host does), and a number and a name edited
    in place: every model equals what parsing the text whole gives."""
    src = frontend.normalise_newlines(path.read_text(encoding="utf-8"))
    aliases = frontend.find_aliases(src)
    patched = 0
    for chunk in frontend.split_chunks(src):
        _model, tree = frontend.parse_chunk_tree(chunk.text, chunk.start_line, aliases)
        if tree is None:
            continue
        lines = chunk.text.split("\n")
        for i in _typed_lines(chunk.text):
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            cur = tree
            for body in _TYPED:
                text = "\n".join(lines[:i] + [indent + body] + lines[i + 1:])
                got = frontend.reparse_token(cur, text, chunk.start_line, aliases) or \
                    frontend.reparse_line(cur, text, chunk.start_line, aliases)
                whole, whole_tree = frontend.parse_chunk_tree(text, chunk.start_line, aliases)
                if got is None:
                    cur = whole_tree
                    continue
                assert got[0] == whole, (path.name, i, body)
                patched += 1
                cur = got[1]
    assert patched > 0


def test_reparse_line_keeps_what_it_cannot_patch_whole() -> None:
    """A compound header, a changed indentation, a line that does not parse on
    its own, or an edit across lines: reparse_line declines (None)."""
    src = ("def f(x):\n    for k in r:\n        T.copy(A, B)\n        y = 1\n    return x\n")
    _m, tree = frontend.parse_chunk_tree(src, 1, frontend.Aliases())
    assert tree is not None
    for new in (src.replace("for k in r:", "for k in s:"),
                src.replace("        y = 1", "          y = 1"),
                src.replace("        y = 1", "        y = (1"),
                src.replace("T.copy(A, B)\n        y = 1", "T.copy(A,\n        B)")):
        assert frontend.reparse_line(tree, new, 1, frontend.Aliases()) is None, new
    ok = frontend.reparse_line(tree, src.replace("y = 1", "y = 10  # ten"), 1, frontend.Aliases())
    assert ok is not None


def test_reparse_line_fails_when_ancestor_ends_do_not_move(monkeypatch) -> None:
    """The enclosing loop's range ends where its last statement ends: left at
    the old end, the loop's span differs from a whole parse."""
    from tilelint.analysis.frontend import reparse

    src = ("import tilelang.language as T\n\n@T.prim_func\ndef main(A: T.Tensor((64,), 'float16')):\n"
           "    with T.Kernel(1, threads=128) as bx:\n        S = T.alloc_shared((64,), 'float16')\n"
           "        for k in T.Pipelined(4, num_stages=2):\n            T.copy(A[0], S)\n")
    aliases = frontend.find_aliases(src)
    _m, tree = frontend.parse_chunk_tree(src, 1, aliases)
    new = src.replace("T.copy(A[0], S)", "T.copy(A[k * 16], S)")
    whole = frontend.parse_chunk_tree(new, 1, aliases)[0]
    assert frontend.reparse_line(tree, new, 1, aliases)[0] == whole
    monkeypatch.setattr(reparse, "_ancestor_end", lambda r, line, old_end, new_end: r)
    assert frontend.reparse_line(tree, new, 1, aliases)[0] != whole


@pytest.mark.parametrize("path", _PARITY, ids=lambda p: p.stem)
def test_statement_typed_on_a_blank_line_equals_a_whole_parse(path: Path, monkeypatch) -> None:
    """Enter after a kernel statement (a blank line, indented as that block or
    as the enclosing one), then a statement typed on it one state at a time:
    every state re-parsed from the tree of the one before equals a whole parse
    (the model, the tree's text and the tree itself)."""
    from tilelint.analysis.frontend import reparse

    calls = {"blank": 0}
    real = reparse.patch_blank

    def counted(old, text):
        out = real(old, text)
        calls["blank"] += out is not None
        return out

    monkeypatch.setattr(reparse, "patch_blank", counted)
    src = frontend.normalise_newlines(path.read_text(encoding="utf-8"))
    aliases = frontend.find_aliases(src)
    for chunk in frontend.split_chunks(src):
        lines = chunk.text.split("\n")
        for i in _typed_lines(chunk.text):
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            for ind in (indent, indent[:-4]):
                blank = "\n".join(lines[:i + 1] + [ind] + lines[i + 1:])
                cur = frontend.parse_chunk_tree(blank, chunk.start_line, aliases)[1]
                for body in _TYPED:
                    text = "\n".join(lines[:i + 1] + [ind + body] + lines[i + 1:])
                    whole, whole_tree = frontend.parse_chunk_tree(text, chunk.start_line, aliases)
                    got = None if cur is None else (
                        frontend.reparse_token(cur, text, chunk.start_line, aliases)
                        or frontend.reparse_line(cur, text, chunk.start_line, aliases))
                    if got is None:
                        cur = whole_tree
                        continue
                    assert got[0] == whole, (path.name, i, repr(ind), body)
                    assert whole_tree is not None and got[1].module.code == text
                    assert got[1].module.deep_equals(whole_tree.module)
                    cur = got[1]
    assert calls["blank"] > 0


def test_statement_appended_to_a_loop_body_moves_the_loop_end(monkeypatch) -> None:
    """A statement typed on the blank line after a loop body's last statement
    ends the loop there (the loop's span in the model); kept at the old end,
    the model differs from a whole parse."""
    from tilelint.analysis.frontend import reparse

    head = ("import tilelang.language as T\n\n@T.prim_func\n"
            "def main(A: T.Tensor((64,), 'float16')):\n"
            "    with T.Kernel(1, threads=128) as bx:\n"
            "        S = T.alloc_shared((64,), 'float16')\n"
            "        for k in T.Pipelined(4, num_stages=2):\n"
            "            T.copy(A[0], S)\n")
    tail = "        T.clear(S)\n"
    aliases = frontend.find_aliases(head)
    blank = head + "            \n" + tail
    typed = head + "            T.copy(A[k], S)\n" + tail
    tree = frontend.parse_chunk_tree(blank, 1, aliases)[1]
    whole = frontend.parse_chunk_tree(typed, 1, aliases)[0]
    got = frontend.reparse_line(tree, typed, 1, aliases)
    assert got is not None and got[0] == whole
    monkeypatch.setattr(reparse, "_appended_end", lambda r, last_end, new_r: r)
    assert frontend.reparse_line(tree, typed, 1, aliases)[0] != whole
