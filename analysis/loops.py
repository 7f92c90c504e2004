"""Loop views of a kernel body: the ``T.Pipelined`` loops it holds, and the
kernel as the compiler sees it for one binding (a conditional iterator whose
pipelined arm is not taken is a serial loop).

Shared by the pipeline driver, packing's what-if planning and the tests; it
imports only the data model and the evaluator's types.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Mapping, Optional, Sequence, Tuple

from . import values
from .model import Compare, Kernel, Loop, LoopResult, Name, Stmt, walk_stmts


def pipelined_loops(stmts: Sequence[Stmt]) -> Iterator[Loop]:
    """Every ``T.Pipelined`` loop of a body, outer before inner, in source order."""
    for st in stmts:
        if st.loop is not None and st.loop.kind == "pipelined":
            yield st.loop
        yield from pipelined_loops(st.children)


def loop_result(loop: Loop, loops: Sequence[LoopResult]) -> Optional[LoopResult]:
    """The planned result of ``loop`` among ``loops``: the one planned from this
    very loop, else the one at the same place (a view of the kernel rebuilds
    its loops)."""
    for lr in loops:
        if lr.loop is loop:
            return lr
    for lr in loops:
        if lr.loop.span == loop.span:
            return lr
    return None


class LoopMatcher:
    """:func:`loop_result` for a walk over a kernel view in source order: a
    loop of another view of the same kernel (rebuilt, so not the object
    planned) gets the first result at its place not given yet.  One source
    loop built several times (a Python ``for`` over a list) has several
    results at one place, one per copy, in order."""

    def __init__(self, loops: Sequence[LoopResult]) -> None:
        self.loops = list(loops)
        self.given: dict = {}  # id(loop) -> its result
        self.used: set = set()  # ids of the results given

    def __call__(self, loop: Loop) -> Optional[LoopResult]:
        if id(loop) in self.given:
            return self.given[id(loop)]
        found = next((lr for lr in self.loops if lr.loop is loop), None)
        if found is None:
            same = [lr for lr in self.loops if lr.loop.span == loop.span]
            found = next((lr for lr in same if id(lr) not in self.used),
                         same[0] if same else None)
        self.given[id(loop)] = found
        if found is not None:
            self.used.add(id(found))
        return found


def active_view(kernel: Kernel, env: values.Env,
                choices: Optional[Mapping[Tuple[int, int], int]] = None) -> Kernel:
    """``kernel`` as the compiler sees it in ``env``: every pipelined loop whose
    condition is false turned into the serial loop the compiler sees, and every
    ``if`` (without else) that the block index ranges prove true replaced by its
    body, as Simplify deletes it (``if bx < N // block_N`` with a grid of
    ``N // block_N`` blocks; measured on cond_bx_copy).  The same object when
    neither applies.

    Elaboration comes first (``elaborate.py``): the view holds only what the
    builder builds for ``env``, every Python-valued ``if`` decided (and the
    undecided ones in ``choices`` forced to the arm given there)."""
    from .elaborate import elaborate
    kernel = elaborate(kernel, env, choices).kernel
    proven = _proven_guards(kernel, env)
    if not proven and not any(lp.condition is not None and not loop_active(lp, env)
                              for lp in pipelined_loops(kernel.body)):
        return kernel

    def fix(stmts: Sequence[Stmt]) -> Tuple[Stmt, ...]:
        out: list = []
        for st in stmts:
            children = fix(st.children) if st.children else st.children
            if id(st) in proven:
                out.extend(children)
                continue
            loop = st.loop
            kind = st.kind
            if loop is not None:
                loop = dataclasses.replace(loop, body=children)
                if loop.kind == "pipelined" and not loop_active(loop, env):
                    loop = dataclasses.replace(loop, kind="serial", num_stages=None,
                                               num_stages_span=None, order=None, stage=None,
                                               condition=None)
                    kind = "serial"
            if children is st.children and loop is st.loop:
                out.append(st)
            else:
                out.append(dataclasses.replace(st, kind=kind, children=children, loop=loop))
        return tuple(out)

    return dataclasses.replace(kernel, body=fix(kernel.body))


def _proven_guards(kernel: Kernel, env: values.Env) -> set:
    """ids of the ``if`` statements (no else) whose test compares a block index
    with a bound that its grid extent proves: ``b < X`` with extent <= X,
    ``b <= X`` with extent - 1 <= X (``X > b``, ``X >= b`` alike)."""
    if not kernel.block_vars:
        return set()
    rebound = {name for name, _ in kernel.locals}
    extents = {}
    for name, dim in zip(kernel.block_vars, kernel.grid, strict=False):
        if name not in rebound:
            extents[name] = dim
    if not extents:
        return set()
    out = set()
    for st in walk_stmts(kernel.body):
        if st.kind == "if" and st.else_index is None and isinstance(st.test, Compare) \
                and _guard_true(st.test, extents, env):
            out.add(id(st))
    return out


_FLIP = {">": "<", ">=": "<="}


def _guard_true(test: Compare, extents: dict, env: values.Env) -> bool:
    op, var, bound = test.op, test.left, test.right
    if op in _FLIP:
        op, var, bound = _FLIP[op], test.right, test.left
    if op not in ("<", "<=") or not isinstance(var, Name) or var.id not in extents:
        return False
    extent = env.eval_int(extents[var.id])
    limit = env.eval_int(bound)
    if extent is None or limit is None or extent < 1:
        return False
    return extent <= limit if op == "<" else extent - 1 <= limit


def loop_active(loop: Loop, env: values.Env) -> bool:
    """False when the loop's iterator is a conditional (``T.Pipelined(...) if c
    else T.serial(...)``, directly or through a helper) whose pipelined arm is
    known not to be taken in this binding."""
    if loop.condition is None:
        return True
    c = env.evaluate(loop.condition)
    return c is None or bool(c)
