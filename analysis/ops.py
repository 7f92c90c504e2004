"""Operand roles of the ``T.*`` operators of tilelang 0.1.15.

For every operator of ``tilelang.language`` (the CUDA dialect that
``import tilelang.language as T`` gives) that takes buffers, this table says
which parameter is read, which is written, and which is both.  The frontend
maps a call's positional and keyword arguments onto these parameter names and
fills ``Stmt.reads`` / ``Stmt.writes`` from the roles.  A ``T.*`` call whose
name is not here is *unknown*: the frontend records what it mentions as
possible reads, marks the statement ``roles_known=False``, and no error is
ever based on it.

How the roles were decided (tilelang 0.1.15 wheel, read by hand):
- the Python signature of each function (parameter names and order, which are
  keyword-only);
- the access type each function gives its operands when it builds the call
  (``to_buffer_region(x, access_type="r"/"w")``, ``access_ptr(x, "rw")``);
- for the tile operators, the C++ ``GetAccessRegions`` of the operator
  (``src/op/gemm.cc``, ``gemm_sp.cc``, ``reduce.cc``, ``copy.cc``, ``fill.cc``,
  ``scan.cc``, ``reducer.cc``, ``atomic_add.cc``, ``atomic_reduce.cc``), which
  is what ``tl.PipelinePlanning`` uses: a GEMM reads A and B (and E for the
  sparse forms) and writes C, reading C too unless ``clear_accum`` is provably
  true; a reduction reads its output only when ``clear`` is false; an atomic
  reads and writes its destination.

``tests/test_ops_table.py`` checks, in the parity environment, that every
parameter list here equals the real signature and that every buffer-taking
callable of ``tilelang.language`` is either here or in ``NOT_MODELLED``.

Pure data and lookups: no tilelang import, nothing raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple, TypeVar

# Roles of one parameter.
READ = "read"            # a buffer operand the op reads
WRITE = "write"          # a buffer operand the op writes (old contents not read)
READWRITE = "readwrite"  # read and written (an accumulator, an atomic target)
VALUE = "value"          # a value: any buffer element it mentions is read
BARRIER = "barrier"      # an mbarrier handle; the frontend records it as read
IGNORE = "ignore"        # a handle the op neither reads nor writes (fences, frees)

ROLES = frozenset({READ, WRITE, READWRITE, VALUE, BARRIER, IGNORE})
_SHORT = {"r": READ, "w": WRITE, "rw": READWRITE, "v": VALUE, "b": BARRIER, "i": IGNORE}

# How a parameter may be passed (the inspect.Parameter kinds we need).
POSITIONAL = "positional"  # positional or keyword
KEYWORD = "keyword"        # keyword-only
VARARGS = "varargs"        # *args


@dataclass(frozen=True)
class Param:
    name: str
    role: str = VALUE
    kind: str = POSITIONAL
    required: bool = False


@dataclass(frozen=True)
class OpSpec:
    """One operator: ``kind`` is the ``Stmt.kind`` its statement gets.

    ``clear``: ``(operand, flag, default)``.  The operand is READWRITE, but
    only WRITE when ``flag`` is true (``default`` when omitted or not a
    literal).
    ``in_place``: ``(dst, src)``.  When ``dst`` is not given, the op writes
    ``src`` in place (``src`` becomes READWRITE).
    """

    name: str
    kind: str
    params: Tuple[Param, ...]
    clear: Optional[Tuple[str, str, bool]] = None
    in_place: Optional[Tuple[str, str]] = None
    note: str = ""

    def param(self, name: str) -> Optional[Param]:
        for p in self.params:
            if p.name == name:
                return p
        return None


def _spec(name: str, kind: str, params: str, clear: Optional[Tuple[str, str, bool]] = None,
          in_place: Optional[Tuple[str, str]] = None, note: str = "") -> OpSpec:
    """``params``: space-separated ``name[:role]``; a bare name is a VALUE; a
    leading ``!`` marks a required parameter; ``*`` starts the keyword-only
    parameters; ``*name`` is a ``*args`` parameter."""
    out = []
    kind_now = POSITIONAL
    for tok in params.split():
        if tok == "*":
            kind_now = KEYWORD
            continue
        pkind = kind_now
        if tok.startswith("*"):
            pkind, tok = VARARGS, tok[1:]
            kind_now = KEYWORD
        required = tok.startswith("!")
        tok = tok.lstrip("!")
        pname, _, role = tok.partition(":")
        out.append(Param(pname, _SHORT[role] if role else VALUE, pkind, required))
    return OpSpec(name, kind, tuple(out), clear, in_place, note)


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------

_GEMM = "!A:r !B:r !C:rw transpose_A transpose_B policy clear_accum"
_GEMM_SP = "!A_sparse:r !E:r !B:r !C:rw transpose_A transpose_E transpose_B policy clear_accum"
_BLOCKSCALED_KW = "* !k_start !sf_a_granularity_k !sf_b_granularity_k"
_GEMM_CLEAR = ("C", "clear_accum", False)
_REDUCE_CLEAR = ("out", "clear", True)

_SPECS: Tuple[OpSpec, ...] = (
    # ---- data movement (tile operators; src read, dst written) -----------
    _spec("copy", "copy", "!src:r !dst:w * coalesced_width disable_tma eviction_policy "
          "prefer_instruction annotations loop_layout"),
    _spec("async_copy", "copy", "!src:r !dst:w * coalesced_width annotations loop_layout"),
    _spec("tma_copy", "copy", "!src:r !dst:w * barrier:b cluster_mask leader_scope_threads "
          "eviction_policy annotations"),
    _spec("copy_cluster", "copy", "!src:r !dst:w * dst_block cluster_mask remote_barrier:b "
          "eviction_policy coalesced_width annotations loop_layout"),
    _spec("tma_gather4", "copy", "!src:r !dst:w !col !rows * !barrier:b swizzle "
          "eviction_policy annotations"),
    _spec("tma_scatter4", "copy", "!src:r !dst:w !col !rows * swizzle eviction_policy "
          "annotations"),
    _spec("transpose", "copy", "!src:r !dst:w annotations"),
    _spec("im2col", "copy", "!img:r !col:w !nhw_step !c_step !kernel !stride !dilation !pad "
          "eviction_policy annotations"),
    _spec("c2d_im2col", "copy", "!img:r !col:w !nhw_step !c_step !kernel !stride !dilation "
          "!pad eviction_policy annotations", note="deprecated alias of im2col"),
    # ---- matrix multiply (tile operators) --------------------------------
    _spec("gemm", "gemm", _GEMM + " mbar:b annotations", clear=_GEMM_CLEAR),
    _spec("wgmma_gemm", "gemm", _GEMM + " annotations", clear=_GEMM_CLEAR),
    _spec("wgmma_mma", "gemm", _GEMM + " annotations", clear=_GEMM_CLEAR),
    _spec("tcgen05_gemm", "gemm", _GEMM + " * !mbar:b use_2cta annotations",
          clear=_GEMM_CLEAR),
    _spec("tcgen05_mma", "gemm", _GEMM + " * !mbar:b use_2cta annotations",
          clear=_GEMM_CLEAR),
    _spec("gemm_sp", "gemm", _GEMM_SP + " wg_wait annotations", clear=_GEMM_CLEAR,
          note="sparse A with its metadata E; B is the dense operand and is only read"),
    _spec("wgmma_gemm_sp", "gemm", _GEMM_SP + " annotations", clear=_GEMM_CLEAR),
    _spec("tcgen05_gemm_sp", "gemm", _GEMM_SP + " annotations", clear=_GEMM_CLEAR),
    _spec("gemm_blockscaled", "gemm",
          "!A:r !B:r !C:rw !SFA:r !SFB:r transpose_A transpose_B policy clear_accum "
          + _BLOCKSCALED_KW + " mbar:b use_2cta sf_layout annotations", clear=_GEMM_CLEAR),
    _spec("mma_gemm_blockscaled", "gemm",
          "!A:r !B:r !C:rw !SFA:r !SFB:r transpose_A transpose_B policy clear_accum "
          + _BLOCKSCALED_KW + " sf_layout", clear=_GEMM_CLEAR),
    _spec("tcgen05_gemm_blockscaled", "gemm",
          "!A:r !B:r !C:rw !SFA_tmem:r !SFB_tmem:r transpose_A transpose_B clear_accum "
          "wg_wait mbar:b " + _BLOCKSCALED_KW + " use_2cta", clear=_GEMM_CLEAR),
    _spec("tcgen05_mma_blockscaled", "gemm",
          "!A:r !B:r !C:rw !SFA_tmem:r !SFB_tmem:r transpose_A transpose_B clear_accum "
          "wg_wait mbar:b " + _BLOCKSCALED_KW + " use_2cta", clear=_GEMM_CLEAR),
    # ---- fill ------------------------------------------------------------
    _spec("fill", "fill", "!buffer:w !value annotations"),
    _spec("clear", "fill", "!buffer:w annotations"),
    # ---- reductions and scans --------------------------------------------
    _spec("reduce", "reduce", "!buffer:r !out:rw !reduce_type !dim !clear batch annotations",
          clear=_REDUCE_CLEAR),
    *(_spec(f"reduce_{op}", "reduce",
            "!buffer:r !out:rw dim clear batch nan_propagate annotations", clear=_REDUCE_CLEAR)
      for op in ("max", "min", "absmax")),
    *(_spec(f"reduce_{op}", "reduce", "!buffer:r !out:rw dim clear batch annotations",
            clear=_REDUCE_CLEAR)
      for op in ("sum", "bitand", "bitor", "bitxor")),
    _spec("reduce_abssum", "reduce", "!buffer:r !out:w dim batch annotations",
          note="always clears its output"),
    _spec("cumsum", "reduce", "!src:r dst:w dim reverse annotations", in_place=("dst", "src")),
    _spec("cummax", "reduce", "!src:r dst:w dim reverse annotations", in_place=("dst", "src")),
    _spec("reducer_init", "reduce", "!reducer:w init"),
    _spec("finalize_reducer", "reduce", "!reducer:rw dst:w batch annotations"),
    _spec("reducer_update", "call", "!target:rw !value",
          note="element update of a reducer; the compiler sees a load of target"),
    # ---- atomics (destination read and written) --------------------------
    _spec("atomic_add", "atomic", "!dst:rw !value memory_order return_prev use_tma annotations"),
    _spec("atomic_max", "atomic", "!dst:rw !value memory_order return_prev annotations"),
    _spec("atomic_min", "atomic", "!dst:rw !value memory_order return_prev annotations"),
    _spec("atomic_or", "atomic", "!dst:rw !value memory_order"),
    _spec("atomic_addx2", "atomic", "!dst:rw !value:r return_prev"),
    _spec("atomic_addx4", "atomic", "!dst:rw !value:r return_prev"),
    _spec("atomic_load", "call", "!src:r memory_order"),
    _spec("atomic_store", "call", "!dst:w !src memory_order"),
    # ---- element loads and stores through an address ----------------------
    *(_spec(f"ldg{n}", "call", "!src:r pred") for n in (32, 64, 128, 256)),
    *(_spec(f"lds{n}", "call", "!src:r") for n in (32, 64, 128)),
    *(_spec(f"stg{n}", "call", "!dst:w !value pred") for n in (32, 64, 128, 256)),
    *(_spec(f"sts{n}", "call", "!dst:w !value") for n in (32, 64, 128)),
    _spec("__ldg", "call", "!load_or_buf:r index"),
    _spec("all_of", "call", "!buffer:r"),
    _spec("any_of", "call", "!buffer:r"),
    _spec("dp4a", "call", "!A:r !B:r !C:rw"),
    _spec("print", "call", "obj:r msg warp_group_id warp_id"),
    # ---- tensor memory and descriptors -----------------------------------
    _spec("tcgen05_cp_warpx4", "call", "!smem_src:r !tmem_dst:w tmem_col_offset * use_2cta"),
    _spec("tcgen05_sf_warp_transpose", "call", "!smem_src:rw"),
    _spec("deallocate_tmem", "call", "!tmem:i"),
    _spec("warpgroup_fence_operand", "call", "!buffer_or_ptr:i offset num_regs dtype"),
    _spec("initialize_wgmma_descriptor", "call",
          "!descriptor:w !start_address layout_type_ leading_byte_offset stride_byte_offset"),
    _spec("initialize_tcgen05_descriptor", "call",
          "!descriptor:w !start_address !leading_byte_offset !stride_byte_offset base_offset "
          "leading_is_absolute swizzle_mode"),
    # ---- barriers --------------------------------------------------------
    _spec("mbarrier_arrive", "call", "!mbarrier:b cta_id"),
    _spec("mbarrier_arrive_expect_tx", "call", "!mbarrier:b !tx"),
    _spec("mbarrier_expect_tx", "call", "!mbarrier:b !tx"),
    _spec("mbarrier_wait_parity", "call", "!mbarrier:b !parity"),
    _spec("barrier_arrive", "call", "!mbarrier:b"),
    _spec("barrier_wait", "call", "!mbarrier:b !parity"),
    _spec("cp_async_barrier_noinc", "call", "!barrier:b"),
    _spec("ptx_arrive_cluster_barrier", "call", "!mbarrier:b !cta_id"),
    _spec("tcgen05_mma_arrive", "call", "!mbar:b arrive_2cta"),
    # ---- cluster launch control ------------------------------------------
    _spec("clc_try_cancel", "call", "!result:w !mbarrier:b"),
    _spec("clc_try_cancel_multicast", "call", "!result:w !mbarrier:b"),
    _spec("clc_is_canceled", "call", "!result:r"),
    _spec("clc_get_first_ctaid_x", "call", "!result:r"),
    _spec("clc_get_first_ctaid_y", "call", "!result:r"),
    _spec("clc_get_first_ctaid_z", "call", "!result:r"),
)

OPS: Dict[str, OpSpec] = {s.name: s for s in _SPECS}

# Callables of ``tilelang.language`` 0.1.15 that take a buffer (or look like
# they might) but are not operators with fixed operand roles.  A call of one
# of these as a statement is unknown (never the basis of an error).
NOT_MODELLED: Dict[str, str] = {
    **{n: "buffer type used in a parameter annotation or declaration, not an operator"
       for n in ("Buffer", "FragmentBuffer", "LocalBuffer", "SharedBuffer", "StridedTensor",
                 "Tensor", "decl_buffer", "match_buffer", "arg")},
    **{n: "creates a view of a buffer (an alias), reads and writes nothing"
       for n in ("reshape", "view")},
    **{n: "layout or descriptor helper evaluated while tracing, emits no statement"
       for n in ("make_blockscaled_gemm_layout", "make_mma_swizzle_layout",
                 "compute_gmma_descriptor", "compute_umma_descriptor")},
    "annotate_restrict_buffers": "annotation, handled by the frontend as such",
    "access_ptr": "an address expression: the access mask it carries decides the role where "
                  "it is used",
    "address_of": "an address expression, not a statement",
    "TVMBackendFreeWorkspace": "host runtime call",
    "create_barriers": "declares barriers by count, takes no buffer",
    "buffer_store": "element store through the IR builder; tilelint models `buf[i] = v` "
                    "assignments instead",
    **{n: "scalar conversion, takes a value not a buffer"
       for n in ("cast", "reinterpret")},
    **{n: "low-level TVM/PTX intrinsic: operands are raw pointers, descriptors or access "
          "pointers whose masks, not parameter positions, decide the roles"
       for n in ("mma_fill", "mma_store", "ptx_cp_async", "ptx_cp_async_bulk", "ptx_ldmatrix",
                 "ptx_mma", "ptx_mma_block_scale", "ptx_mma_sm70", "ptx_mma_sp",
                 "ptx_tcgen05_mma_blockscaled_ss", "ptx_tcgen05_mma_ss", "ptx_tcgen05_mma_ts",
                 "ptx_wgmma_rs", "ptx_wgmma_sp_rs", "ptx_wgmma_sp_ss", "ptx_wgmma_ss",
                 "tvm_access_ptr", "tvm_fill_fragment", "tvm_load_matrix_sync",
                 "tvm_stack_make_array", "tvm_store_matrix_sync", "tvm_struct_set",
                 "tvm_tuple", "tvm_warp_shuffle", "tvm_warp_shuffle_down",
                 "tvm_warp_shuffle_up", "ptx_arrive_barrier", "ptx_arrive_barrier_expect_tx",
                 "ptx_cp_async_barrier", "ptx_init_barrier_thread_count",
                 "ptx_wait_barrier", "named_barrier_arrive")},
    **{n: "variadic intrinsic: the roles of its arguments are not fixed by position"
       for n in ("tma_load", "tma_load_2sm", "create_tma_descriptor", "call_extern",
                 "call_intrin", "call_pure_extern", "call_packed", "call_llvm_intrin",
                 "call_llvm_pure_intrin")},
}

# Statement-level callables of ``tilelang.language`` 0.1.15 that take no
# buffer at all: their roles are known (they read and write no buffer).
NO_OPERANDS = frozenset({
    "sync_threads", "sync_warp", "sync_grid", "fence_proxy_async", "tma_store_arrive",
    "tma_store_wait", "warpgroup_arrive", "warpgroup_commit_batch", "warpgroup_wait",
    "wait_wgmma", "set_max_nreg", "inc_max_nreg", "dec_max_nreg", "no_set_max_nreg",
    "disable_warp_group_reg_alloc", "annotate_producer_reg_dealloc",
    "annotate_consumer_reg_alloc", "cluster_arrive", "cluster_arrive_relaxed",
    "cluster_wait", "cluster_sync", "pdl_trigger", "pdl_sync", "ptx_fence_barrier_init",
    "tcgen05_before_thread_sync", "tcgen05_after_thread_sync", "loop_break",
    "annotate_min_blocks_per_sm", "annotate_safe_value", "annotate_ws_pipeline_depth",
    "annotate_compile_flags", "annotate_pass_configs", "rng_init",
})


def lookup(name: str) -> Optional[OpSpec]:
    """The spec of ``T.<name>``; None when the name is not a modelled operator."""
    return OPS.get(name)


def no_operands(name: str) -> bool:
    return name in NO_OPERANDS


_A = TypeVar("_A")


def bind(spec: OpSpec, positional: Sequence[_A], keywords: Mapping[str, _A]
         ) -> Optional[Dict[str, _A]]:
    """Arguments by parameter name, as Python would bind the call.  None when
    the call does not fit the signature (too many positional arguments, an
    unknown or repeated keyword, a missing required parameter): the compiler
    rejects such a call before any pass runs, so its roles are unknown."""
    out: Dict[str, _A] = {}
    slots = [p for p in spec.params if p.kind == POSITIONAL]
    varargs = next((p for p in spec.params if p.kind == VARARGS), None)
    for i, value in enumerate(positional):
        if i < len(slots):
            out[slots[i].name] = value
        elif varargs is not None:
            continue  # *args: value-like, not bound by name
        else:
            return None
    names = {p.name for p in spec.params if p.kind != VARARGS}
    for key, value in keywords.items():
        if key not in names or key in out:
            return None
        out[key] = value
    if any(p.required and p.name not in out for p in spec.params):
        return None
    return out


def bind_lenient(spec: OpSpec, positional: Sequence[_A], keywords: Mapping[str, _A]
                 ) -> Tuple[Dict[str, _A], bool]:
    """Like ``bind``, but binds what fits and says whether the whole call fits.
    A call that names an argument 0.1.15 does not have (``k_pack=`` of other
    versions) or lacks a required one still has its operands where the
    signature puts them; the caller keeps those roles for ordering but must not
    base an error on them (the compiler rejects the call before planning)."""
    exact = bind(spec, positional, keywords)
    if exact is not None:
        return exact, True
    out: Dict[str, _A] = {}
    slots = [p for p in spec.params if p.kind == POSITIONAL]
    for p, value in zip(slots, positional, strict=False):
        out[p.name] = value
    names = {p.name for p in spec.params if p.kind != VARARGS}
    for key, value in keywords.items():
        if key in names and key not in out:
            out[key] = value
    return out, False


def effective_role(spec: OpSpec, param: Param, bound: Mapping[str, object],
                   flag_value: object = None) -> str:
    """The role of ``param`` in one call.  ``flag_value``: the literal value of
    the spec's ``clear`` flag in this call (None when it is not a literal)."""
    role = param.role
    if spec.clear is not None and param.name == spec.clear[0]:
        operand, flag, default = spec.clear
        # A flag that is not a literal takes the default: a GEMM whose
        # ``clear_accum`` is an expression such as ``k == 0`` still reads C
        # (the compiler reads it unless the flag is provably one); a reduction
        # whose ``clear`` is not a literal False clears (its default).
        value = flag_value if flag in bound and isinstance(flag_value, bool) else default
        return WRITE if value is True else READWRITE
    if spec.in_place is not None and param.name == spec.in_place[1] and \
            spec.in_place[0] not in bound:
        return READWRITE
    return role
