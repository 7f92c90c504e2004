"""Walking libcst trees without ``CSTNode.visit``: the child nodes that can
hold code, in source order, and the calls and statements under a node."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence, Tuple, cast

import libcst as cst

# ``CSTNode.visit`` rebuilds every node it passes (``_visit_and_replace_children``
# constructs and validates a copy) and dispatches through getattr per node; the
# builder only reads the tree, so it walks the dataclass fields itself.  Only
# fields that can hold code are followed (whitespace, brackets, commas and
# operators never do), in libcst's own visiting order, which is the source order:
# the dataclass order differs from it for the classes listed in _FIELD_ORDER.
# tests/test_frontend_fastpaths.py checks the order against ``CSTNode.children``.

_NOT_CODE = ("whitespace", "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace",
             "leading_lines", "lines_after_decorators", "header", "footer", "comma",
             "equal", "dot", "colon", "first_colon", "second_colon", "semicolon",
             "operator", "indent", "asynchronous", "star", "encoding", "default_indent",
             "default_newline", "has_trailing_newline", "newline", "trailing_whitespace",
             "relative", "leading_whitespace")
_FIELD_ORDER: Dict[str, Tuple[str, ...]] = {
    "IfExp": ("body", "test", "orelse"),
    "FunctionDef": ("decorators", "name", "type_parameters", "params", "returns", "body"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "Parameters": ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "Lambda": ("params", "body"),
    "Arg": ("keyword", "value"),
    "ExceptHandler": ("type", "name", "body"),
}
_CODE_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _code_fields(cls: type) -> Tuple[str, ...]:
    names = _CODE_FIELDS.get(cls)
    if names is None:
        declared = [f.name for f in dataclasses.fields(cls)]
        order = _FIELD_ORDER.get(cls.__name__)
        if order is not None:
            declared = [n for n in order if n in declared] + \
                [n for n in declared if n not in order]
        names = _CODE_FIELDS[cls] = tuple(
            n for n in declared if n not in _NOT_CODE and not n.startswith("whitespace"))
    return names


# libcst's node classes are abstract-base-class subclasses, for which every
# ``isinstance`` goes through ``ABCMeta.__instancecheck__``; the walk asks by
# exact type instead (node classes are final).
_NODE_TYPES: Dict[type, bool] = {}


def _is_node_type(t: type) -> bool:
    hit = _NODE_TYPES.get(t)
    if hit is None:
        hit = _NODE_TYPES[t] = issubclass(t, cst.CSTNode)
    return hit


def code_children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes of ``node`` that can hold code, in source order."""
    out: List[cst.CSTNode] = []
    for name in _code_fields(type(node)):
        v = getattr(node, name)
        t = type(v)
        if t is tuple or t is list:
            out.extend(x for x in v if _is_node_type(type(x)))
        elif _is_node_type(t):
            out.append(v)
    return out


def calls_in(node: cst.CSTNode, out: List[cst.Call]) -> List[cst.Call]:
    """Every call under ``node`` in source order (a call before the calls in
    its arguments), not entering function definitions below ``node``."""
    stack = [node]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Call:
            out.append(cast(cst.Call, n))
        elif t is cst.FunctionDef:
            continue
        kids = code_children(n)
        kids.reverse()
        stack.extend(kids)
    return out

def suite(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(body, cst.SimpleStatementSuite):
        return [body]
    return []


def compound_children(stmt: cst.CSTNode) -> List[cst.CSTNode]:
    out: List[cst.CSTNode] = []
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        out.extend(body.body if isinstance(body, cst.IndentedBlock) else [])
    orelse = getattr(stmt, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            out.extend(orelse.body.body if isinstance(orelse.body, cst.IndentedBlock) else [])
            orelse = orelse.orelse
        else:
            b = getattr(orelse, "body", None)
            if isinstance(b, cst.IndentedBlock):
                out.extend(b.body)
            orelse = None
    for h in getattr(stmt, "handlers", ()) or ():
        if isinstance(h.body, cst.IndentedBlock):
            out.extend(h.body.body)
    return out
