"""Re-parsing an edit inside one token, or inside one simple statement line.

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
from .positions import LEAF_TOKENS, ChunkTree, Leaves, statement_positions
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


def _line_edit(old: ChunkTree, text: str, limit: int) -> Optional[Tuple[int, int, int, int]]:
    """Where ``text`` differs from ``old.text`` when that is inside one line:
    (common prefix length, common suffix length, start of the line, its
    1-based number); None when the texts are equal, differ across lines, by
    more than ``limit`` characters, or ``old`` has no leaves to re-use."""
    before = old.text
    if not old.leaves or text == before or abs(len(text) - len(before)) > limit:
        return None
    p = _common_prefix(before, text)
    q = _common_suffix(before, text, min(len(before), len(text)) - p)
    if "\n" in before[p:len(before) - q] or "\n" in text[p:len(text) - q]:
        return None
    return p, q, before.rfind("\n", 0, p) + 1, before.count("\n", 0, p) + 1


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
    region = _line_edit(old, text, 256)
    if region is None:
        return None
    p, q, line_start, line = region
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


# ---- re-parsing an edit inside one simple statement line -------------------
# Typing a statement into a kernel changes one line at a time: ``T`` becomes
# ``T.c``, then ``T.copy(A[...], A_shared)``.  When the old and new texts of a
# chunk differ on one line only, the old line is one simple statement (not a
# compound header, on one line) and the new line parses on its own as one simple
# statement at the same indentation, the new tree is the old one with that
# statement replaced: libcst reads a statement line by its own tokens, and the
# comment and blank lines above it stay its ``leading_lines``.  Positions change
# on that line only: the new statement's are computed on their own, and the
# ancestors that ended where the old statement ended end where the new one does.


def reparse_line(old: ChunkTree, text: str, start_line: int, aliases: Aliases
                 ) -> Optional[Tuple[ChunkModel, ChunkTree]]:
    """The model of ``text`` (and its tree) when it differs from ``old.text``
    inside one simple statement line, or by a statement typed on a blank line
    (see above and :func:`patch_blank`); None otherwise."""
    tree = patch_line(old, text) or patch_blank(old, text)
    return None if tree is None else (build_model(tree, start_line, aliases), tree)


def _edited_line(old: ChunkTree, text: str) -> Optional[Tuple[str, str, int, int, int]]:
    """When ``text`` differs from ``old.text`` on one line (no ``\\r``): that
    line before and after, the edit's offset, the line's offset and its
    1-based number; else None."""
    before = old.text
    region = None if "\r" in before or "\r" in text else _line_edit(old, text, 512)
    if region is None:
        return None
    p, _q, start, line = region
    old_end, new_end = before.find("\n", p), text.find("\n", p)
    if old_end < 0 or new_end < 0:
        return None
    return before[start:old_end], text[start:new_end], p, start, line


def patch_line(old: ChunkTree, text: str) -> Optional[ChunkTree]:
    """The tree of ``text`` made from ``old``'s (see :func:`reparse_line`)."""
    edited = _edited_line(old, text)
    if edited is None:
        return None
    old_line, new_line, p, start, line = edited
    indent = old_line[:len(old_line) - len(old_line.lstrip(" \t"))]
    if p - start < len(indent) or new_line[len(indent):len(indent) + 1] in (" ", "\t"):
        return None  # the indentation changed
    found = _statement_on(old, line)
    if found is None:
        return None
    stmt, ancestors = found
    try:
        if not parsed_whole(text):
            compile_only(text)
        bare = cst.parse_statement(new_line[len(indent):] + "\n",
                                   config=old.module.config_for_parsing)
        if type(bare) is not cst.SimpleStatementLine or bare.leading_lines:
            return None
        new_stmt = bare.with_changes(leading_lines=cast(cst.SimpleStatementLine, stmt).leading_lines)
        module, replaced = _rebuild([*ancestors, stmt], new_stmt)
    except Exception:  # not one simple statement after all: parse it whole
        return None
    computed, new_leaves = statement_positions(
        bare, line, indent, old.module.default_indent, old.module.default_newline)
    old_r, new_r = old.positions[id(stmt)], computed[id(bare)]
    positions = dict(old.positions)
    renamed: Dict[int, cst.CSTNode] = {}
    for old_node, new_node in replaced[1:]:  # the ancestors
        positions[id(new_node)] = _ancestor_end(positions.pop(id(old_node)), line,
                                                old_r[3], new_r[3])
        renamed[id(old_node)] = new_node
    for node in _subtree(stmt):
        positions.pop(id(node), None)
    positions.update(computed)
    positions[id(new_stmt)] = new_r
    head = tuple(renamed.get(id(a), a) for a in ancestors) + (new_stmt,)
    leaves: Leaves = [
        (x, tuple([renamed.get(id(a), a) for a in chain])) for x, chain in old.leaves
        if not any(a is stmt for a in chain)]
    leaves += [(x, head + chain[1:]) for x, chain in new_leaves]
    return ChunkTree(text, cast(cst.Module, module), positions, leaves)


def _ancestor_end(r: Tuple[int, int, int, int], line: int, old_end: int, new_end: int
                  ) -> Tuple[int, int, int, int]:
    """An ancestor that ended where the replaced statement ended ends where
    the new one does."""
    if r[2] == line and r[3] == old_end:
        return (r[0], r[1], r[2], new_end)
    return r


def _statement_on(tree: ChunkTree, line: int
                  ) -> Optional[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]]:
    """The simple statement that is all of ``line`` (one line long) and its
    ancestors (root first), from a leaf on that line."""
    for leaf, chain in tree.leaves:
        r = tree.positions.get(id(leaf))
        if r is None or r[0] != line:
            continue
        for i in range(len(chain) - 1, -1, -1):
            if type(chain[i]) is cst.SimpleStatementLine:
                rs = tree.positions.get(id(chain[i]))
                if rs is None or rs[0] != line or rs[2] != line or chain[0] is not tree.module:
                    return None
                return chain[i], chain[:i]
        return None
    return None


def _subtree(node: cst.CSTNode) -> List[cst.CSTNode]:
    out = [node]
    stack = [node]
    while stack:
        for child in stack.pop().children:
            out.append(child)
            stack.append(child)
    return out


# ---- a statement typed on a blank line --------------------------------------
# Typing a statement starts on a blank line (the editor's Enter indents it).
# libcst keeps that line as an ``EmptyLine``: in the ``leading_lines`` of the
# next statement of the block, or, after a block's last statement, in the
# block's ``footer``.  When the first character is typed, the line becomes a
# statement of that block if it is indented as that block's statements are:
# the new tree has it inserted before the next statement (the empty lines above
# it, which were that statement's leading lines, become its own), or appended
# to the block (the footer lines above it become its leading lines, the ones
# below stay the footer).  The number of lines does not change, so only the new
# statement's positions are computed; a block the statement is appended to, and
# the statements that end there, end where it ends.


def patch_blank(old: ChunkTree, text: str) -> Optional[ChunkTree]:
    """The tree of ``text`` made from ``old``'s when ``text`` differs from it by
    a simple statement typed on a line that is blank in ``old`` (see above)."""
    edited = _edited_line(old, text)
    if edited is None or edited[0].strip(" \t"):
        return None  # not one line, blank before
    new_line, line = edited[1], edited[4]
    body = new_line.lstrip(" \t")
    indent = new_line[:len(new_line) - len(body)]
    if not body or body.startswith("#"):
        return None
    place = _blank_place(old, line)
    if place is None:
        return None
    container, index, in_footer, chain, stmt_indent = place
    if indent != stmt_indent:
        return None  # another block's (or an indentation error)
    try:
        if not parsed_whole(text):
            compile_only(text)
        bare = cst.parse_statement(body + "\n", config=old.module.config_for_parsing)
        if type(bare) is not cst.SimpleStatementLine or bare.leading_lines:
            return None
    except Exception:
        return None
    return _insert_statement(old, text, bare, place, line, indent)


# (container, index of the EmptyLine, in its footer?, ancestors of the
# container (root first), indentation of the container's statements)
_Place = Tuple[Any, int, bool, Tuple[cst.CSTNode, ...], str]


def _blank_place(tree: ChunkTree, line: int) -> Optional[_Place]:
    """Where the blank ``line`` is kept: the leading lines of the first
    statement after it, or the footer of the block whose last statement ends
    right above its footer lines; None when it is neither (or not known)."""
    lines = tree.text.split("\n")
    pos = tree.positions
    after = before = None
    a_at = b_at = None
    for leaf, chain in tree.leaves:  # (not in source order after a line patch)
        r = pos.get(id(leaf))
        if r is None:
            continue
        if r[0] > line and (a_at is None or r[:2] < a_at):
            after, a_at = (leaf, chain), r[:2]
        elif r[2] < line and (b_at is None or r[2:] > b_at):
            before, b_at = (leaf, chain), r[2:]
    if after is not None:
        chain = after[1]
        for k, node in enumerate(chain):
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                r = pos.get(id(node))
                if r is None or r[0] <= line:
                    continue
                lead = len(node.leading_lines)
                first = r[0] - lead
                if k == 0 or not first <= line < r[0] or getattr(node, "decorators", None):
                    break
                parent = chain[k - 1]
                if not isinstance(parent, (cst.IndentedBlock, cst.Module)):
                    return None
                row = lines[r[0] - 1]
                return (parent, line - first, False, chain[:k - 1],
                        row[:len(row) - len(row.lstrip(" \t"))])
    if before is not None:
        chain = before[1]
        for k in range(len(chain) - 1, 0, -1):
            block = chain[k]
            if not isinstance(block, cst.IndentedBlock) or not block.body:
                continue
            last = block.body[-1]
            if type(last) is not cst.SimpleStatementLine or len(chain) <= k + 1 \
                    or chain[k + 1] is not last:
                continue
            r = pos.get(id(last))
            if r is None or not r[2] + 1 <= line <= r[2] + len(block.footer):
                continue
            row = lines[r[0] - 1]
            return (block, line - r[2] - 1, True, chain[:k],
                    row[:len(row) - len(row.lstrip(" \t"))])
    return None


def _appended_end(r: Tuple[int, int, int, int], last_end: Tuple[int, int, int, int],
                  new_r: Tuple[int, int, int, int]) -> Tuple[int, int, int, int]:
    """A statement that ended where its block's old last statement ended ends
    where the statement appended to that block does (a ``for`` and its body's
    last line, and the block itself when its range ended there: an ``if``
    arm's span)."""
    if r[2] == last_end[2] and r[3] == last_end[3]:
        return (r[0], r[1], new_r[2], new_r[3])
    return r


def _insert_statement(old: ChunkTree, text: str, bare: cst.SimpleStatementLine,
                      place: _Place, line: int, indent: str) -> Optional[ChunkTree]:
    container, index, in_footer, ancestors, _ind = place
    positions = dict(old.positions)
    renamed: Dict[int, cst.CSTNode] = {}
    if in_footer:
        footer = tuple(container.footer)
        new_stmt = bare.with_changes(leading_lines=footer[:index])
        gone = footer[index]
        new_container = container.with_changes(
            body=tuple(container.body) + (new_stmt,), footer=footer[index + 1:])
    else:
        body = list(container.body)
        nxt = next((i for i, st in enumerate(body)
                    if old.positions.get(id(st), (0,))[0] > line), None)
        if nxt is None:
            return None
        follower = body[nxt]
        lead = tuple(follower.leading_lines)
        new_stmt = bare.with_changes(leading_lines=lead[:index])
        gone = lead[index]
        new_follower = follower.with_changes(leading_lines=lead[index + 1:])
        positions[id(new_follower)] = positions.pop(id(follower))
        renamed[id(follower)] = new_follower
        body[nxt:nxt + 1] = [new_stmt, new_follower]
        new_container = container.with_changes(body=tuple(body))
    try:
        root, replaced = _rebuild([*ancestors, container], new_container) if ancestors \
            else (new_container, [(container, new_container)])
    except ValueError:
        return None
    if not isinstance(root, cst.Module) or (ancestors and ancestors[0] is not old.module):
        return None
    computed, new_leaves = statement_positions(
        bare, line, indent, old.module.default_indent, old.module.default_newline)
    new_r = computed[id(bare)]
    last_end = None
    if in_footer and container.body:
        last_end = positions.get(id(container.body[-1]))
    for old_node, new_node in replaced:
        r = positions.pop(id(old_node))
        if last_end is not None:
            r = _appended_end(r, last_end, new_r)
        positions[id(new_node)] = r
        renamed[id(old_node)] = new_node
    positions.pop(id(gone), None)
    positions.update(computed)
    positions.pop(id(bare), None)  # (new_stmt stands in its place)
    positions[id(new_stmt)] = new_r
    head = tuple(renamed.get(id(a), a) for a in ancestors) + (new_container, new_stmt)
    leaves: Leaves = [
        (x, tuple([renamed.get(id(a), a) for a in chain])) for x, chain in old.leaves]
    leaves += [(x, head + chain[1:]) for x, chain in new_leaves]
    return ChunkTree(text, root, positions, leaves)
