"""The public data model of tilelint's analysis: plain frozen dataclasses.

Everything the frontend extracts from a kernel file, and everything the passes
compute from it, is one of these types.  Nothing here knows libcst, LSP or the
compiler.  Positions are 1-based lines and 0-based code-point columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Tuple, Union

# --------------------------------------------------------------------------
# Positions
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A source range: 1-based lines, 0-based code-point columns, end exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int

    def contains(self, line: int, col: int) -> bool:
        if (line, col) < (self.line, self.col):
            return False
        return (line, col) <= (self.end_line, self.end_col)


NO_SPAN = Span(1, 0, 1, 0)

# --------------------------------------------------------------------------
# Symbolic expressions (what a size, a dtype or a schedule entry is made of)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: Union[int, float, str, bool, None]


@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Attr:
    """A dotted name that is not a call, e.g. ``T.float16`` or ``cfg.block_M``."""

    base: "Expr"
    attr: str


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * / // % ** << >> & | ^
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class UnaryOp:
    op: str  # - + not ~
    operand: "Expr"


@dataclass(frozen=True)
class Compare:
    op: str  # < <= > >= == != and or
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class IfExp:
    test: "Expr"
    body: "Expr"
    orelse: "Expr"


@dataclass(frozen=True)
class Call:
    """A call; ``func`` is the dotted callee with the tilelang alias normalised to ``T``."""

    func: str
    args: Tuple["Expr", ...] = ()
    kwargs: Tuple[Tuple[str, "Expr"], ...] = ()


@dataclass(frozen=True)
class TupleExpr:
    items: Tuple["Expr", ...]
    is_list: bool = False  # written ``[...]`` (a mutable list in Python)


@dataclass(frozen=True)
class DictExpr:
    items: Tuple[Tuple[str, "Expr"], ...]


@dataclass(frozen=True)
class Subscript:
    value: "Expr"
    index: "Expr"


@dataclass(frozen=True)
class Slice:
    lower: Optional["Expr"]
    upper: Optional["Expr"]
    step: Optional["Expr"] = None


@dataclass(frozen=True)
class Opaque:
    """Something the frontend could not turn into an expression (kept as text)."""

    text: str


Expr = Union[Const, Name, Attr, BinOp, UnaryOp, Compare, IfExp, Call, TupleExpr,
             DictExpr, Subscript, Slice, Opaque]


def expr_text(e: Optional[Expr]) -> str:
    """Short source-like text of an expression, for messages and for shapes that
    stay symbolic (``block_M * 2``, ``T.ceildiv(K, block_K)``); ``?`` for the
    forms it does not spell out.  The one expression printer of the analysis."""
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, BinOp):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, Attr):
        return f"{expr_text(e.base)}.{e.attr}"
    if isinstance(e, Opaque):
        return e.text
    return "?"


# --------------------------------------------------------------------------
# Kernel structure (frontend output)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """One buffer region read or written by a statement.

    ``indices`` is the subscript as written (``A_shared[0, k]``), a tuple of
    expressions or slices; ``None`` means the whole buffer.
    """

    buffer: str
    span: Span
    indices: Optional[Tuple[Expr, ...]] = None


@dataclass(frozen=True)
class Loop:
    """A ``for`` loop inside a kernel.  ``kind`` is pipelined / serial / parallel /
    unroll / vectorized / range (a plain Python ``range``)."""

    var: str
    kind: str
    span: Span  # the whole for statement
    iter_span: Span  # the iterator call, e.g. ``T.Pipelined(...)``
    start: Optional[Expr]
    stop: Optional[Expr]
    num_stages: Optional[Expr] = None
    num_stages_span: Optional[Span] = None  # the ``num_stages=3`` argument
    order: Optional[Tuple[Expr, ...]] = None
    order_span: Optional[Span] = None
    stage: Optional[Tuple[Expr, ...]] = None
    stage_span: Optional[Span] = None
    annotations: Tuple[Tuple[str, Expr], ...] = ()
    unsupported_kwargs: Tuple[Tuple[str, Span], ...] = ()  # e.g. sync=, group=
    body: Tuple["Stmt", ...] = ()
    # Number of enclosing loops that are pipelined (0 at the top level).
    pipelined_ancestors: int = 0
    # For ``T.Pipelined(...) if c else T.serial(...)`` or a helper iterator: the
    # condition under which this loop is pipelined (None = always).
    condition: Optional[Expr] = None
    # ``for k in helper(...)``: the iterator call as written when it is not a
    # ``T.*`` loop (resolved against the file's iterator helpers after parsing),
    # and a ``T.Persistent(...)`` call (its trip count is computed from it).
    iterator: Optional[Expr] = None
    # ``order=`` / ``stage=`` exactly as written (an inline list, a parameter,
    # ``list(X)``, a comprehension ...), resolved per instance by planning.
    # ``order``/``stage`` above keep the inline items (or the one expression).
    order_expr: Optional[Expr] = None
    stage_expr: Optional[Expr] = None
    # Buffer declarations (``T.decl_buffer`` and other views) at the top level
    # of the body: PipelinePlanning's "original statement count" includes them.
    declarations: int = 0
    # The step of ``range(start, stop, step)`` / ``T.serial(start, stop, step)``
    # / ``T.unroll(...)`` as written (None: no step given).
    step: Optional[Expr] = None


@dataclass(frozen=True)
class Stmt:
    """A statement of a kernel body, as the compiler's statement sequence sees it.

    kind: copy, gemm, fill, reduce, parallel, serial, loop (any other for),
    store, if, atomic, macro (an inlined macro call), call (another T.* call),
    bind (a local scalar binding), alloc, other.
    """

    kind: str
    op: str  # the callee as written with the alias normalised (``T.copy``), or ``if`` / ``for`` / ``=``
    span: Span
    reads: Tuple[Access, ...] = ()
    writes: Tuple[Access, ...] = ()
    label: str = ""  # short source text for display
    children: Tuple["Stmt", ...] = ()  # body of if/else/for/macro
    loop: Optional[Loop] = None  # for kind in (serial, parallel, loop, pipelined)
    # bind only: the name bound and whether the compiler may replay it (a scalar
    # alias that reads no buffer written in the same pipelined body is decided
    # by planning; the frontend records what it reads).
    target: Optional[str] = None
    # bind: the bound value; store: the stored value (``x[i] += y`` is stored
    # as ``x[i] + y``).
    value: Optional[Expr] = None
    # macro only: the macro's name.
    macro: Optional[str] = None
    # if only: index in ``children`` where the else/elif branch starts (None: no else).
    else_index: Optional[int] = None
    # The ``with T.*(...)`` scopes the statement sits in, outermost first, as
    # callee names (``T.SimtVF``, ``T.Stage``); ``with`` bodies count inline.
    scope: Tuple[str, ...] = ()
    # The same scopes as written: (span of the call, the call with its
    # arguments), e.g. ``T.SimdVF(latency=40)``; the span tells two blocks
    # written back to back apart.
    scope_calls: Tuple[Tuple[Span, "Expr"], ...] = ()
    # False for a call whose operand roles are not known (a ``T.*`` name that
    # is not in ``analysis/ops.py``, a helper from another module): its reads
    # are every buffer it mentions, it writes nothing, and no error is ever
    # based on it.
    roles_known: bool = True
    # if only: the condition, when the statement has no ``elif`` (a condition
    # on a factory value such as ``if use_bias:`` is decided when the kernel is
    # traced, and only the taken branch exists for the compiler).
    test: Optional[Expr] = None
    # A statement written as a call (every ``T.*`` operator, annotation, macro
    # or helper call): the call as the frontend parsed it, the callee with the
    # alias normalised and every positional and keyword argument as an
    # expression.  Passes read argument facts here (``disable_tma=True``, the
    # ``annotate_buffer_versions`` dict), never from ``label``.
    call: Optional[Call] = None
    # if only: every arm of an ``if``/``elif``/``else`` chain, in order, as
    # (its test, or None for ``else``; the index in ``children`` where its
    # statements start).  The builder decides each Python-valued test when the
    # kernel is built (``elaborate.py``).
    arms: Tuple[Tuple[Optional["Expr"], int], ...] = ()
    # if only: the indented body of each arm, in the order of ``arms`` (its
    # allocations included: an arm not built allocates nothing).
    arm_spans: Tuple[Span, ...] = ()

    def kwarg(self, name: str) -> Optional[Expr]:
        """The keyword argument ``name=`` of the statement's call as written
        (None: not a call, or not given by keyword)."""
        if self.call is not None:
            for key, value in self.call.kwargs:
                if key == name:
                    return value
        return None

    def kwarg_is_true(self, name: str) -> bool:
        """``name=True`` is written in the statement's call."""
        value = self.kwarg(name)
        return isinstance(value, Const) and value.value is True


def walk_stmt(stmt: Stmt) -> Iterator[Stmt]:
    """``stmt`` and every statement nested in it (``children``), pre-order."""
    yield stmt
    for ch in stmt.children:
        yield from walk_stmt(ch)


def walk_stmts(stmts: Iterable[Stmt]) -> Iterator[Stmt]:
    """Every statement of ``stmts`` and every one nested in them, pre-order."""
    for s in stmts:
        yield from walk_stmt(s)


def is_im2col(stmt: Stmt) -> bool:
    """A ``T.im2col`` (or its deprecated alias): a bounds-tested SIMT gather into
    shared memory, never a cp.async or a TMA load (measured: pipeline_im2col)."""
    return stmt.kind == "copy" and "im2col" in stmt.op


def walk_bodies(stmts: Iterable[Stmt]) -> Iterator[Stmt]:
    """Like :func:`walk_stmts`, but a loop is entered through ``loop.body`` (the
    body as the loop passes see it, e.g. a conditional iterator's) when it has one."""
    for s in stmts:
        yield s
        if s.loop is not None and s.loop.body:
            yield from walk_bodies(s.loop.body)
        else:
            yield from walk_bodies(s.children)


@dataclass(frozen=True)
class Alloc:
    """A buffer allocation: ``X = T.alloc_shared((M, K), dtype, scope=...)``."""

    name: str
    func: str  # alloc_shared, alloc_fragment, alloc_local, alloc_var, alloc_l1, alloc_ub, ...
    scope: str  # shared.dyn, shared, local.fragment, local, local.var, ascend scopes
    shape: Tuple[Expr, ...]
    dtype: Expr
    span: Span  # the whole assignment
    call_span: Span  # the alloc call


@dataclass(frozen=True)
class Param:
    name: str
    span: Span
    default: Optional[Expr] = None
    annotation: Optional[Expr] = None


@dataclass(frozen=True)
class Binding:
    """A value given to a name from outside the kernel (a call site, a comment,
    configuration); ``source`` says where, for messages."""

    name: str
    value: Expr
    source: str
    span: Optional[Span] = None


@dataclass(frozen=True)
class Branch:
    """An ``if``/``elif`` chain or a ``for`` over a Python iterable that the
    builder (tilelang 0.1.15's eager ``prim_func``) decides when the kernel is
    built, for one instance (``elaborate.py``).

    ``taken`` is the index of the arm built (``len(arms)`` when no arm is:
    every test false and no ``else``), or None when a test's Python value is
    not known: then neither arm is built for certain, ``decided_by`` names the
    values that decide, and no claim rests on either arm.  ``dropped`` are the
    statements not built (whole spans); ``kept`` the ones that are.
    ``conditions`` are the tests as written, one per arm (``else`` for the
    last one without a test).  ``values`` are the names the decision read and
    their values (``trans_A = False``), for messages."""

    span: Span  # the ``if`` statement (or ``for``), whole
    kind: str  # if | for
    conditions: Tuple[str, ...]
    taken: Optional[int]
    dropped: Tuple[Span, ...] = ()
    kept: Tuple[Span, ...] = ()
    decided_by: Tuple[str, ...] = ()
    values: Tuple[Tuple[str, str], ...] = ()
    # for only: how many times the body is built (one copy per element).
    copies: Optional[int] = None

    @property
    def decided(self) -> bool:
        return self.taken is not None


@dataclass(frozen=True)
class Kernel:
    name: str
    span: Span  # the prim_func def (decorators excluded)
    name_span: Span
    style: str  # factory | module | jit
    dialect: str  # cuda | ascend
    factory: Optional[str] = None
    factory_span: Optional[Span] = None
    factory_params: Tuple[Param, ...] = ()
    params: Tuple[Param, ...] = ()  # the prim_func's own parameters (tensors)
    threads: Optional[Expr] = None
    threads_span: Optional[Span] = None
    kernel_span: Optional[Span] = None  # the ``with T.Kernel(...)`` statement
    grid: Tuple[Expr, ...] = ()
    allocs: Tuple[Alloc, ...] = ()
    body: Tuple[Stmt, ...] = ()  # statements inside ``with T.Kernel``, in order
    # Assignments visible to the kernel (module constants are separate):
    # factory-local and kernel-local ``name = expr`` in source order.
    locals: Tuple[Tuple[str, Expr], ...] = ()
    # ``# tilelint: bind a=1 b=2`` comments above the kernel or its factory.
    comment_bindings: Tuple[Binding, ...] = ()
    # ``T.func_attr``/pass-config switches that matter (e.g. tl.disable_warp_specialized).
    attrs: Tuple[Tuple[str, Expr], ...] = ()
    class_name: Optional[str] = None
    # The block indices ``with T.Kernel(...) as (bx, by)`` binds, one per grid
    # dimension in order (empty: not named, or not a plain tuple of names).
    block_vars: Tuple[str, ...] = ()
    # Filled by elaboration (``elaborate.py``) on an instance's view of the
    # kernel, never by the frontend: every Python-valued ``if`` and Python
    # iterable ``for`` the builder decided, in source order.
    branches: Tuple[Branch, ...] = ()


@dataclass(frozen=True)
class CallSite:
    """A call of a function defined in the file (factory instantiation etc.)."""

    func: str
    span: Span
    args: Tuple[Expr, ...] = ()
    kwargs: Tuple[Tuple[str, Expr], ...] = ()
    star_kwargs: Tuple[Expr, ...] = ()  # ``**cfg``
    via: str = "call"  # call | compile | get_tir | partial | parametrize | main
    enclosing: Optional[str] = None  # name of the function the call sits in (None = module)
    enclosing_class: Optional[str] = None  # the class of that function, for a method


@dataclass(frozen=True)
class Macro:
    name: str
    span: Span
    params: Tuple[Param, ...]
    body: Tuple[Stmt, ...]


@dataclass(frozen=True)
class FuncStmt:
    """One statement of an ordinary (non-kernel) function, kept so that the
    value resolver can follow it without executing the file.

    kind: assign (``target = value``), if (``value`` is the test), for
    (``target`` in ``value``), while, return, expr (a bare call), pass.
    """

    kind: str
    span: Span
    target: Optional["Expr"] = None
    value: Optional["Expr"] = None
    body: Tuple["FuncStmt", ...] = ()
    orelse: Tuple["FuncStmt", ...] = ()

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def end_line(self) -> int:
        return self.span.end_line


@dataclass(frozen=True)
class FuncDef:
    """An ordinary function of the file (a factory, ``main``, a test, a config
    helper): its parameters, decorators and a statement summary."""

    name: str
    span: Span
    params: Tuple[Param, ...] = ()
    body: Tuple[FuncStmt, ...] = ()
    decorators: Tuple["Expr", ...] = ()
    class_name: Optional[str] = None
    vararg: Optional[str] = None  # ``*args``
    kwarg: Optional[str] = None  # ``**kwargs``


@dataclass(frozen=True)
class Module:
    kernels: Tuple[Kernel, ...] = ()
    constants: Tuple[Tuple[str, Expr], ...] = ()  # module-level NAME = expr
    call_sites: Tuple[CallSite, ...] = ()
    functions: Tuple[Tuple[str, Tuple[Param, ...]], ...] = ()  # every def: name, params
    macros: Tuple[Macro, ...] = ()
    imports_tilelang: bool = False
    problems: Tuple["Diagnostic", ...] = ()
    # Every ordinary function (top level and methods), for the value resolver.
    defs: Tuple[FuncDef, ...] = ()
    # ``parser.add_argument("--num_stages", type=int, default=3)``: dest → default.
    argparse: Tuple[Tuple[str, Expr], ...] = ()
    # The module's own statements (``if __name__ == "__main__":`` blocks included).
    toplevel: Tuple[FuncStmt, ...] = ()


# --------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Related:
    span: Span
    message: str


@dataclass(frozen=True)
class TextEdit:
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    title: str
    edits: Tuple[TextEdit, ...]
    kind: str = "quickfix"
    preferred: bool = False


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: str  # error | warning | information | hint
    span: Span
    message: str
    related: Tuple[Related, ...] = ()
    fixes: Tuple[Fix, ...] = ()
    kernel: Optional[str] = None
    # The configurations this holds for ("num_stages=4, block_K=64"), if several.
    configs: Tuple[str, ...] = ()


# --------------------------------------------------------------------------
# Analysis results
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduledStmt:
    stmt: Stmt
    stage: Optional[int]
    order: Optional[int]


@dataclass(frozen=True)
class BufferVersion:
    buffer: str
    versions: int
    def_stage: Optional[int] = None
    use_stage: Optional[int] = None
    tightened: bool = False


@dataclass(frozen=True)
class LoopSync:
    syncthreads: int = 0
    cp_async_commit: int = 0
    cp_async_wait: Tuple[int, ...] = ()
    mbarrier_wait: int = 0


@dataclass(frozen=True)
class LoopResult:
    loop: Loop
    pipelined: bool
    num_stages: Optional[int]
    depth: Optional[int]
    statements: Tuple[ScheduledStmt, ...] = ()
    excluded_binds: Tuple[Stmt, ...] = ()  # replayable binds that take no order/stage slot
    versions: Tuple[BufferVersion, ...] = ()
    manual: bool = False
    warp_specialized: bool = False
    # CUDA sync of the loop as the compiler emits it: ``sync`` is one iteration of the
    # generated (steady-state) loop; ``prologue_sync``/``epilogue_sync`` the unrolled
    # steps before/after it (None: no such region).
    sync: Optional[LoopSync] = None
    note: str = ""  # why not pipelined, etc.
    prologue_sync: Optional[LoopSync] = None
    epilogue_sync: Optional[LoopSync] = None
    # The compiler tries to pipeline the loop and rejects its schedule (a TL1xx
    # error says why): the kernel does not lower.
    rejected: bool = False


@dataclass(frozen=True)
class BufferInfo:
    name: str
    span: Span
    scope: str
    dtype: str
    shape: Tuple[Union[int, str], ...]
    versions: int
    bytes: Optional[int]  # all versions
    offset: Optional[int]
    live: Optional[Tuple[int, int]] = None


@dataclass(frozen=True)
class KernelSync:
    syncthreads: int = 0
    cp_async_commit: int = 0
    cp_async_wait: Tuple[int, ...] = ()
    mbarriers: int = 0


@dataclass(frozen=True)
class AscendStatement:
    """One task of the Ascend loop body, in the auto-scheduler's order."""

    line: int
    label: str
    pipe: str  # MTE1 MTE2 MTE3 M FIX V S
    core: str  # AIC | AIV
    start: Optional[int] = None  # start time in the scheduler's model (cycles)
    latency: Optional[int] = None
    ii: Optional[int] = None
    source: int = 0  # position among the loop's tasks in source order


@dataclass(frozen=True)
class AscendLoop:
    """One pipelined loop of an Ascend kernel, its body in the auto-scheduler's
    order (``exact``: the compiler's order; else ``note`` says why not)."""

    line: int
    statements: Tuple[AscendStatement, ...] = ()
    exact: bool = False
    note: str = ""
    ii: Optional[int] = None


@dataclass(frozen=True)
class AscendResult:
    versions: Tuple[Tuple[str, int], ...] = ()
    versions_exact: bool = False
    # name, event ids still in use after RewriteFlagToBuf, whether some spilled
    hard_events: Tuple[Tuple[str, int, bool], ...] = ()
    # The id ranges RewriteFlagToBuf turned into locks: (event, first id,
    # last id, first mutex id); id e of the range takes mutex id m + e - first.
    spills: Tuple[Tuple[str, int, int, int], ...] = ()
    pipe_barriers: Tuple[str, ...] = ()
    cross_core_slots: int = 0
    mutex_ids: int = 0
    # The loop body in the auto-scheduler's order.  ``schedule_exact`` is True
    # when the order is the compiler's (its Z3 model reproduced); otherwise it
    # is a dependency-level prediction and ``schedule_note`` says why.
    statements: Tuple[AscendStatement, ...] = ()
    schedule_exact: bool = False
    schedule_note: str = ""
    ii: Optional[int] = None
    preview: str = ""  # the Ascend C sync calls of the loop (priming, body, draining)
    loop_line: Optional[int] = None  # the modelled loop (the first pipelined one)
    # Every pipelined loop modelled (the first one's statements are above too).
    loops: Tuple[AscendLoop, ...] = ()


@dataclass(frozen=True)
class OpenClaim:
    """A fact of a kernel that depends on an ``if`` tilelint cannot decide:
    its value for each way the ``if`` can be built (elaborate.choice_variants).
    ``fact``: shared memory | warp specialization | threads; ``values``:
    (the choice, in words; the value, in words), one per way."""

    fact: str
    decided_by: Tuple[str, ...]
    values: Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class KernelResult:
    kernel: Kernel
    bindings: Tuple[Tuple[str, object], ...] = ()
    unresolved: Tuple[str, ...] = ()
    threads: Optional[int] = None
    warp_specialized: bool = False
    shared_bytes: Optional[int] = None  # the dynamic arena (MergeSharedMemoryAllocations)
    shared_budget: Optional[int] = None
    no_reuse_bytes: Optional[int] = None
    buffers: Tuple[BufferInfo, ...] = ()
    loops: Tuple[LoopResult, ...] = ()
    sync: Optional[KernelSync] = None
    ascend: Optional[AscendResult] = None
    config_label: str = ""
    # Static ``__shared__`` bytes (scope="shared" buffers, mbarriers).
    shared_static_bytes: int = 0
    # The Python-valued ``if``s and ``for``s the builder decided for this
    # instance (elaborate.py): what is not built, and what stays undecided.
    branches: Tuple[Branch, ...] = ()
    # The facts above that depend on an undecided ``if`` (shown with every arm
    # kept), with their value for each way it can be built.
    open_claims: Tuple[OpenClaim, ...] = ()

    @property
    def shared_total(self) -> Optional[int]:
        """Shared memory per block: the dynamic arena plus the static bytes.  The
        launch needs this much, the per-block limit applies to it, and every
        output (TL201/TL203, explain, the hover) reports this number."""
        if self.shared_bytes is None:
            return None
        return self.shared_bytes + self.shared_static_bytes


@dataclass(frozen=True)
class Analysis:
    path: str
    target: str
    kernels: Tuple[KernelResult, ...] = ()
    diagnostics: Tuple[Diagnostic, ...] = ()
    module: Module = field(default_factory=Module)


@dataclass(frozen=True)
class Settings:
    """What the caller (CLI, server, tests) tells the analysis."""

    target: str = "sm_80"
    # name → value bindings applied to every kernel (configuration ``bindings``),
    # and per kernel: ((kernel name, ((name, value), ...)), ...).
    bindings: Tuple[Tuple[str, object], ...] = ()
    kernel_bindings: Tuple[Tuple[str, Tuple[Tuple[str, object], ...]], ...] = ()
    select: Tuple[str, ...] = ()  # code prefixes; empty = the default set
    ignore: Tuple[str, ...] = ()
    # Analyse every instantiation of a kernel (call sites, parametrize cases),
    # not only the first.
    all_bindings: bool = False
    # Seconds one file's kernels may take; past it the rest is left out with a
    # TL005 (``time-budget``).  None or 0: no limit.
    time_budget: Optional[float] = 60.0
