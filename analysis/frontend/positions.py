"""Node positions of a libcst tree, computed in libcst's own code-generation
pass (faster than ``MetadataWrapper``), optionally with the one-token leaves
(names, numbers, strings) and their ancestors; :class:`ChunkTree` keeps a
chunk's text, tree, positions and leaves together for :mod:`.reparse`."""

from __future__ import annotations

import re
import tokenize
from typing import Dict, List, Optional, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState as _CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider

# The leaves a one-token edit can replace, with the token kind each must stay.

LEAF_TOKENS: Dict[type, int] = {
    cst.Name: tokenize.NAME, cst.Integer: tokenize.NUMBER, cst.Float: tokenize.NUMBER,
    cst.Imaginary: tokenize.NUMBER, cst.SimpleString: tokenize.STRING,
}


Leaves = List[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]]


class ChunkTree:
    """A chunk's text, its libcst module, the module's positions (chunk
    lines, 1-based) and its one-token leaves (names, numbers, strings) with
    their ancestors."""

    __slots__ = ("text", "module", "positions", "leaves")

    def __init__(self, text: str, module: cst.Module,
                 positions: Dict[int, Tuple[int, int, int, int]], leaves: "Leaves") -> None:
        self.text = text
        self.module = module
        self.positions = positions
        self.leaves = leaves


def fast_positions(module: cst.Module, leaves: bool = False
                   ) -> Tuple[Dict[int, Tuple[int, int, int, int]], "Leaves"]:
    """The ranges of libcst's ``PositionProvider``, faster: ``id(node)`` →
    ``(start line, start column, end line, end column)``.

    ``MetadataWrapper.resolve(PositionProvider)`` runs one code-generation
    pass that tracks line and column, then walks the whole tree a second time
    for batchable providers (there are none here), and its position tracking
    splits every token with a regex and records every node through a
    generator-based context manager.  ``_PositionState`` hooks the same
    code-generation pass (libcst's ``CodegenState`` protocol) with cheaper
    bookkeeping (plain tuples keyed by ``id``: the module keeps every node
    alive while the map is used) and no second walk.  Should libcst's
    internals change, the wrapper is the fallback;
    tests/test_frontend_fastpaths.py checks that both give the same ranges."""
    try:
        state = (_LeafPositionState if leaves else _PositionState)(
            module.default_indent, module.default_newline)
        module._codegen(state)
        return state.computed, state.leaves
    except RecursionError:
        raise
    except Exception:  # pragma: no cover - another libcst version
        return {id(node): (r.start.line, r.start.column, r.end.line, r.end.column)
                for node, r in MetadataWrapper(module, unsafe_skip_copy=True)
                .resolve(PositionProvider).items()}, []


class _Syntactic:
    """``record_syntactic_position`` as a plain context manager (the
    semantic range of a node, optionally from the start/end of child nodes)."""

    __slots__ = ("state", "node", "start_node", "end_node", "line", "column")

    def __init__(self, state: _PositionState, node: cst.CSTNode,
                 start_node: Optional[cst.CSTNode], end_node: Optional[cst.CSTNode]) -> None:
        self.state = state
        self.node = node
        self.start_node = start_node
        self.end_node = end_node

    def __enter__(self) -> None:
        self.line = self.state.line
        self.column = self.state.column

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            # Code generation failed inside (a RecursionError on deep nesting):
            # the nodes this range needs were never recorded, and the failure
            # must reach the caller as it is (not as a KeyError from here).
            return
        st = self.state
        computed = st.computed
        if self.start_node is not None:
            start = computed[id(self.start_node)][:2]
        else:
            start = (self.line, self.column)
        if self.end_node is not None:
            end = computed[id(self.end_node)][2:]
        else:
            end = (st.line, st.column)
        computed[id(self.node)] = start + end


class _PositionState(_CodegenState):
    """Tracks line/column while libcst generates code."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        # CodegenState is a dataclass; its fields are set here directly.
        self.default_indent = default_indent
        self.default_newline = default_newline
        self.provider = None
        self.indent_tokens: List[str] = []
        self.tokens: List[str] = []
        self.line = 1
        self.column = 0
        self.computed: Dict[int, Tuple[int, int, int, int]] = {}
        self.leaves: Leaves = []
        self._stack: List[Tuple[int, int]] = []

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)  # (Module's codegen looks at whether there are any)
        if "\n" in value or "\r" in value:
            parts = _NEWLINES.split(value)
            self.line += len(parts) - 1
            self.column = len(parts[-1])
        else:
            self.column += len(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:  # the text changes; recorded positions do not
            self.tokens.pop()

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column = self._stack.pop()
        key = id(node)
        if key not in self.computed:
            self.computed[key] = (line, column, self.line, self.column)

    # libcst's is a generator context manager; this one is a plain class (cheaper).
    def record_syntactic_position(  # type: ignore[override]
            self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
            end_node: Optional[cst.CSTNode] = None) -> _Syntactic:
        return _Syntactic(self, node, start_node, end_node)


class _LeafPositionState(_PositionState):
    """Positions, and the names, numbers and strings, each with its ancestors
    (root first), for reparse_token."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent, default_newline)
        self._nodes: List[cst.CSTNode] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append((self.line, self.column))
        self._nodes.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column = self._stack.pop()
        self._nodes.pop()
        key = id(node)
        if key not in self.computed:
            self.computed[key] = (line, column, self.line, self.column)
        if type(node) in LEAF_TOKENS:
            self.leaves.append((node, tuple(self._nodes)))


_NEWLINES = re.compile(r"\r\n?|\n")


def statement_positions(stmt: cst.CSTNode, line: int, indent: str, default_indent: str,
                        default_newline: str
                        ) -> Tuple[Dict[int, Tuple[int, int, int, int]], Leaves]:
    """:func:`fast_positions` of one statement parsed on its own, as if it
    stood on ``line`` of its chunk after ``indent`` (its leaves' ancestors
    start at ``stmt``)."""
    state = _LeafPositionState(default_indent, default_newline)
    state.line = line
    state.indent_tokens = [indent] if indent else []
    stmt._codegen(state)
    return state.computed, state.leaves
