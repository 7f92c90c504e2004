"""Re-parsing an edit inside one token.

The edits people make while tuning a kernel change one literal or name: a
default ``num_stages=3`` becomes 4, ``"float16"`` becomes ``"bfloat16"``, a
name is typed one letter at a time.  When the old and new texts of a chunk
differ inside one token, and the new text of that token is still one token of
the same kind, the new libcst tree is the old one with that leaf replaced (and
its ancestors copied), and positions move only on that line, after the token.
Nothing else differs, so the chunk model built from it is the one a full parse
gives (tests/test_frontend_fastpaths.py compares the two)."""

from __future__ import annotations

import dataclasses
import io
import keyword
import tokenize
from typing import Any, Dict, List, Optional, Tuple, cast

import libcst as cst

from .aliases import Aliases
from .chunks import parsed_whole
from .kernels import ChunkModel, build_model
from .positions import LEAF_TOKENS, ChunkTree, Leaves
from .syntax import compile_only


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:] == b[len(b) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _one_token(text: str, kind: int) -> bool:
    """Is ``text`` exactly one token of ``kind`` (not a keyword)?"""
    if not text or "\n" in text or "\r" in text:
        return False
    if kind == tokenize.NAME and (keyword.iskeyword(text) or keyword.issoftkeyword(text)):
        return False
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return False
    if not toks or toks[0].type != kind or toks[0].string != text:
        return False
    return all(t.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and not t.string.strip()
               for t in toks[1:])


def reparse_token(old: ChunkTree, text: str, start_line: int, aliases: Aliases
                  ) -> Optional[Tuple[ChunkModel, ChunkTree]]:
    """The model of ``text`` (and its tree) when it differs from ``old.text``
    inside one name, number or string literal on one line, and is the same
    kind of token after the edit; None otherwise (parse it whole)."""
    tree = patch_tree(old, text)
    return None if tree is None else (build_model(tree, start_line, aliases), tree)


def patch_tree(old: ChunkTree, text: str) -> Optional[ChunkTree]:
    """The tree of ``text`` made from ``old``'s (see :func:`reparse_token`)."""
    before = old.text
    delta = len(text) - len(before)
    if not old.leaves or text == before or abs(delta) > 256:
        return None
    p = _common_prefix(before, text)
    q = _common_suffix(before, text, min(len(before), len(text)) - p)
    if "\n" in before[p:len(before) - q] or "\n" in text[p:len(text) - q]:
        return None
    line_start = before.rfind("\n", 0, p) + 1
    line = before.count("\n", 0, p) + 1
    c0, c1 = p - line_start, len(before) - q - line_start
    found = [x for x in old.leaves if _covers(old.positions.get(id(x[0])), line, c0, c1)]
    if len(found) != 1:
        return None
    leaf, ancestors = found[0]
    r = old.positions[id(leaf)]
    token = text[line_start + r[1]:line_start + r[3] + delta]
    value = getattr(leaf, "value", None)
    if value != before[line_start + r[1]:line_start + r[3]] or \
            not _one_token(token, LEAF_TOKENS[type(leaf)]):
        return None
    try:
        if not parsed_whole(text):
            compile_only(text)
        new_leaf = leaf.with_changes(value=token)
        if not ancestors or ancestors[0] is not old.module:
            return None
        module, replaced = _rebuild([*ancestors, leaf], new_leaf)
    except Exception:  # not the same kind of token after all: parse it whole
        return None
    positions = _moved_columns(old.positions, line, r[3], delta)
    renamed = {}
    for old_node, new_node in replaced:
        positions[id(new_node)] = positions.pop(id(old_node))
        renamed[id(old_node)] = new_node
    leaves: Leaves = [
        (renamed.get(id(x), x), tuple([renamed.get(id(a), a) for a in chain]))
        for x, chain in old.leaves]
    return ChunkTree(text, cast(cst.Module, module), positions, leaves)


def _covers(r: Optional[Tuple[int, int, int, int]], line: int, c0: int, c1: int) -> bool:
    return r is not None and r[0] == line == r[2] and r[1] <= c0 and c1 <= r[3]


def _rebuild(path: List[cst.CSTNode], new_leaf: cst.CSTNode
             ) -> Tuple[cst.CSTNode, List[Tuple[cst.CSTNode, cst.CSTNode]]]:
    """Copies of ``path``'s nodes with its last one replaced by ``new_leaf``:
    the new root and (old node, new node) pairs."""
    replaced = [(path[-1], new_leaf)]
    new = new_leaf
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
        changes: Dict[str, Any] = {}
        for f in dataclasses.fields(parent):
            v = getattr(parent, f.name)
            if v is child:
                changes[f.name] = new
                break
            if isinstance(v, (tuple, list)) and any(x is child for x in v):
                changes[f.name] = type(v)(new if x is child else x for x in v)
                break
        if not changes:
            raise ValueError("child not found in its parent")
        new = parent.with_changes(**changes)
        replaced.append((parent, new))
    return new, replaced


def _moved_columns(positions: Dict[int, Tuple[int, int, int, int]], line: int, col: int,
                   delta: int) -> Dict[int, Tuple[int, int, int, int]]:
    """``positions`` with every start or end on ``line`` at or after ``col``
    moved by ``delta`` columns."""
    if not delta:
        return dict(positions)
    out = {}
    for k, r in positions.items():
        if r[0] == line or r[2] == line:
            a = r[1] + delta if r[0] == line and r[1] >= col else r[1]
            b = r[3] + delta if r[2] == line and r[3] >= col else r[3]
            r = (r[0], a, r[2], b)
        out[k] = r
    return out
