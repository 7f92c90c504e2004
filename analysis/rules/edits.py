"""Text edits behind the rules' quick fixes, computed from the source text.

Positions are the model's (1-based lines, code-point columns); the server
converts them for the editor.  An edit that cannot be made safely is None, and
the finding is then reported without a fix.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..frontend import source_lines
from ..model import Fix, Loop, Span, TextEdit, TupleExpr


def _offset(lines: List[str], line: int, col: int) -> int:
    return sum(len(x) for x in lines[:line - 1]) + col


def _pos(lines: List[str], off: int) -> Tuple[int, int]:
    for i, text in enumerate(lines):
        if off <= len(text) or i == len(lines) - 1:
            if off <= len(text):
                return i + 1, off
        off -= len(text)
    return len(lines), len(lines[-1]) if lines else 0


def remove_argument_edit(source: str, span: Span) -> Optional[TextEdit]:
    """An edit deleting the call argument at ``span`` with its separating comma."""
    lines = source_lines(source)
    if not lines or span.line > len(lines) or span.end_line > len(lines):
        return None
    start = _offset(lines, span.line, span.col)
    end = _offset(lines, span.end_line, span.end_col)
    text = source
    j = end
    while j < len(text) and text[j] in " \t":
        j += 1
    if j < len(text) and text[j] == ",":
        j += 1
        while j < len(text) and text[j] in " \t\r\n":
            j += 1
        k = j
        # Keep a trailing-comma layout intact: `f(a, x=1,)` -> `f(a,)` is fine.
        new_start, new_end = start, k
        if k < len(text) and text[k] == ")":
            # `f(a, x=1, )` : drop the comma before too.
            i = start
            while i > 0 and text[i - 1] in " \t\r\n":
                i -= 1
            if i > 0 and text[i - 1] == ",":
                new_start = i - 1
        s_line, s_col = _pos(lines, new_start)
        e_line, e_col = _pos(lines, new_end)
        return TextEdit(Span(s_line, s_col, e_line, e_col), "")
    i = start
    while i > 0 and text[i - 1] in " \t\r\n":
        i -= 1
    if i > 0 and text[i - 1] == ",":
        s_line, s_col = _pos(lines, i - 1)
        e_line, e_col = _pos(lines, end)
        return TextEdit(Span(s_line, s_col, e_line, e_col), "")
    return None


def renumbered_orders(orders: Sequence[int]) -> List[int]:
    """Distinct orders 0..n-1 keeping the relative order (ties: source order)."""
    idx = sorted(range(len(orders)), key=lambda i: (orders[i], i))
    out = [0] * len(orders)
    for rank, i in enumerate(idx):
        out[i] = rank
    return out


def renumber_order_fix(loop: Loop, orders: Sequence[Optional[int]],
                       source: Optional[str]) -> Optional[Fix]:
    """TL101's fix: the loop's ``order=`` list renumbered 0..n-1
    (:func:`renumbered_orders`), in the list's own brackets.  None unless the
    list is written out with one known entry per scheduled statement."""
    if loop.order_span is None or not all(x is not None for x in orders) \
            or len(loop.order or ()) != len(orders) \
            or not (loop.order_expr is None or isinstance(loop.order_expr, TupleExpr)):
        return None
    new = renumbered_orders([x for x in orders if x is not None])  # (all of them)
    text = "[" + ", ".join(str(x) for x in new) + "]"
    if source is not None:
        lines = source_lines(source)
        try:
            old = source[_offset(lines, loop.order_span.line, loop.order_span.col)]
            if old == "(":
                text = "(" + text[1:-1] + ")"
        except IndexError:
            pass
    return Fix(f"Renumber order to {text}", (TextEdit(loop.order_span, text),), preferred=True)
