"""Loop views of a kernel body: the ``T.Pipelined`` loops it holds, and the
kernel as the compiler sees it for one binding (a conditional iterator whose
pipelined arm is not taken is a serial loop).

Shared by the pipeline driver, packing's what-if planning and the tests; it
imports only the data model and the evaluator's types.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional, Sequence, Tuple

from . import values
from .model import Kernel, Loop, LoopResult, Stmt


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


def active_view(kernel: Kernel, env: values.Env) -> Kernel:
    """``kernel`` with every pipelined loop whose condition is false in ``env``
    turned into the serial loop the compiler sees (the same object when there
    is none)."""
    if not any(lp.condition is not None and not loop_active(lp, env)
               for lp in pipelined_loops(kernel.body)):
        return kernel

    def fix(stmts: Sequence[Stmt]) -> Tuple[Stmt, ...]:
        out = []
        for st in stmts:
            children = fix(st.children) if st.children else st.children
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


def loop_active(loop: Loop, env: values.Env) -> bool:
    """False when the loop's iterator is a conditional (``T.Pipelined(...) if c
    else T.serial(...)``, directly or through a helper) whose pipelined arm is
    known not to be taken in this binding."""
    if loop.condition is None:
        return True
    c = env.evaluate(loop.condition)
    return c is None or bool(c)
