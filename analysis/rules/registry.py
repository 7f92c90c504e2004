"""The rule registry: one :class:`Rule` per diagnostic code, with its
severity and its documentation (what, why, a bad and a good example, the fix).

``server/ruledocs.py`` renders :data:`RULES` as ``docs/rules/``; every pass
that reports a finding builds it with :func:`diagnostic`, which takes the
severity from here.  ``tests/test_ruledocs.py`` runs each rule's examples
through the analysis: the bad one must report the code, the good one must not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from ..model import Diagnostic, Fix, Related, Span


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str  # error | warning | information | hint
    summary: str
    what: str = ""
    why: str = ""
    bad_example: str = ""
    good_example: str = ""
    fix: str = ""
    target: str = ""  # the target the examples are meant for (default sm_80)


# The import lines of the whole-file examples (kept out of the triple-quoted
# texts so no line of this module reads like an import of the compiler).
_CUDA_HEAD = "import tilelang\n" "import tilelang.language as T\n"
_ASCEND_HEAD = "import tilelang.ascend.language as T\n"

_GEMM_BODY = """\
    T.copy(A[by * 128, k * 32], A_shared)
    T.copy(B[k * 32, bx * 128], B_shared)
    T.gemm(A_shared, B_shared, C_local)"""
_GEMM_BODY_NESTED = "\n".join("    " + line for line in _GEMM_BODY.splitlines())

_TL115_BAD = _CUDA_HEAD + '''

@T.prim_func
def main(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
         C: T.Tensor((1024, 1024), "float16")):
    with T.Kernel(8, 8, threads=128) as (bx, by):
        A_shared = T.alloc_shared((128, 32), "float16")
        B_shared = T.alloc_shared((32, 128), "float16")
        C_local = T.alloc_fragment((128, 128), "float32")
        T.clear(C_local)
        T.copy(A[by * 128, 0], A_shared)  # the first tile, outside the loop
        T.copy(B[0, bx * 128], B_shared)
        T.gemm(A_shared, B_shared, C_local)
        for k in T.Pipelined(1, 32, num_stages=2):
            T.copy(A[by * 128, k * 32], A_shared)
            T.copy(B[k * 32, bx * 128], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * 128, bx * 128])
'''
_TL115_GOOD = _TL115_BAD.replace(
    "        T.copy(A[by * 128, 0], A_shared)  # the first tile, outside the loop\n"
    "        T.copy(B[0, bx * 128], B_shared)\n"
    "        T.gemm(A_shared, B_shared, C_local)\n",
    "        A_first = T.alloc_shared((128, 32), \"float16\")  # its own buffers\n"
    "        B_first = T.alloc_shared((32, 128), \"float16\")\n"
    "        T.copy(A[by * 128, 0], A_first)\n"
    "        T.copy(B[0, bx * 128], B_first)\n"
    "        T.gemm(A_first, B_first, C_local)\n")

_TL002_BAD = _CUDA_HEAD + '''

def matmul(M, N, K, block_K):  # called from another module
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, block_K), "float16")
            B_shared = T.alloc_shared((block_K, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[by * 128, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])

    return main
'''

_TL112_BAD = _CUDA_HEAD + '''

@T.prim_func
def gather_gemm(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
                Ids: T.Tensor((32,), "int32"), C: T.Tensor((1024, 1024), "float16")):
    with T.Kernel(8, 8, threads=128) as (bx, by):
        Idx_shared = T.alloc_shared((1,), "int32")
        A_shared = T.alloc_shared((128, 32), "float16")
        B_shared = T.alloc_shared((32, 128), "float16")
        C_local = T.alloc_fragment((128, 128), "float32")
        T.clear(C_local)
        for k in T.Pipelined(32, num_stages=2):
            T.copy(Ids[k], Idx_shared)
            kk = Idx_shared[0]
            T.copy(A[by * 128, kk * 32], A_shared)
            T.copy(B[kk * 32, bx * 128], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * 128, bx * 128])
'''

# Ascend examples (checked with target "ascend"): a cube-only GEMM and a cube ->
# vector epilogue; VERSIONS is replaced by the number of buffer versions.
_ASCEND_GEMM = _ASCEND_HEAD + '''

def kernel(M=512, N=256, K=1024, bM=128, bN=128, bK=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(4) as bx:
            A_l1 = T.alloc_l1((bM, bK), "float16")
            B_l1 = T.alloc_l1((bN, bK), "float16")
            C_l0c = T.alloc_l0c((bM, bN), "float32")
            T.annotate_buffer_versions({A_l1: VERSIONS, B_l1: VERSIONS})
            for k in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[bx * bM:(bx + 1) * bM, k * bK:(k + 1) * bK], A_l1)
                T.copy(B[0:bN, k * bK:(k + 1) * bK], B_l1)
                T.gemm(A_l1, B_l1, C_l0c, transpose_B=True, clear_accum=(k == 0))
            T.copy(C_l0c, C[bx * bM, 0])

    return main
'''

_ASCEND_MIXED = _ASCEND_HEAD + '''

def kernel(M=2048, N=128, K=64, bM=64, nb=4):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), "float32")):
        with T.Kernel(nb) as bx:
            A_l1 = T.alloc_l1((bM, K), "float16")
            B_l1 = T.alloc_l1((N, K), "float16")
            C_l0c = T.alloc_l0c((bM, N), "float32")
            C_ub = T.alloc_shared((bM // 2, N), "float32")
            D_ub = T.alloc_shared((bM // 2, N), "float32")
            T.annotate_buffer_versions({A_l1: 1, C_l0c: 1, C_ub: VERSIONS, D_ub: VERSIONS})
            T.copy(B[0:N, 0:K], B_l1)
            for t in T.Pipelined(M // bM // nb, num_stages=2):
                m = (t * nb + bx) * bM
                T.copy(A[m:m + bM, 0:K], A_l1)
                T.gemm(A_l1, B_l1, C_l0c, transpose_B=True, clear_accum=True)
                T.dual_copy(C_l0c, C_ub)
                T.dual_copy(C_l0c, D_ub)
                T.dual_copy(C_ub, C[m:m + bM, 0:N])
                T.dual_copy(D_ub, D[m:m + bM, 0:N])

    return main
'''

# TL004: the same cube GEMM in the tilelang-ascend fork's spelling (T.Kernel(...,
# is_npu=True), upper-case allocators through tilelang.language), which
# tilelang 0.1.15 cannot import.
_NPU_FORK_GEMM = (_CUDA_HEAD + _ASCEND_GEMM[len(_ASCEND_HEAD):]
                  .replace("with T.Kernel(4) as bx:", "with T.Kernel(4, is_npu=True) as (bx, by):")
                  .replace("T.alloc_l1(", "T.alloc_L1(").replace("T.alloc_l0c(", "T.alloc_L0C(")
                  .replace("            T.annotate_buffer_versions({A_l1: VERSIONS, "
                           "B_l1: VERSIONS})\n", ""))

# TL202: a jit factory autotuned over num_stages; STAGES is the second config's value.
_AUTOTUNE_GEMM = (_CUDA_HEAD + "\n\n"
             "@tilelang.autotune(configs=[{\"num_stages\": 3}, {\"num_stages\": STAGES}])\n"
             "@tilelang.jit(out_idx=[-1])\n"
             "def matmul(M, N, K, num_stages=None):\n"
             "    @T.prim_func\n"
             "    def tuned(A: T.Tensor((M, K), \"float16\"), B: T.Tensor((K, N), \"float16\"),\n"
             "              C: T.Tensor((M, N), \"float16\")):\n"
             "        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):\n"
             "            A_shared = T.alloc_shared((128, 32), \"float16\")\n"
             "            B_shared = T.alloc_shared((32, 128), \"float16\")\n"
             "            C_local = T.alloc_fragment((128, 128), \"float32\")\n"
             "            T.clear(C_local)\n"
             "            for k in T.Pipelined(K // 32, num_stages=num_stages):\n"
             "                T.copy(A[by * 128, k * 32], A_shared)\n"
             "                T.copy(B[k * 32, bx * 128], B_shared)\n"
             "                T.gemm(A_shared, B_shared, C_local)\n"
             "            T.copy(C_local, C[by * 128, bx * 128])\n\n"
             "    return tuned\n\n\n"
             "kernel = matmul(1024, 1024, 1024)\n")

RULES: Tuple[Rule, ...] = (
    Rule("TL001", "syntax-error", "error", "The file does not parse as Python.",
         what="The file has a Python syntax error. It is reported at the position the "
              "parser stops. Each top-level statement is parsed on its own, so the kernels "
              "in the other top-level statements of the file are still analysed.",
         why="Python cannot import the file, so the compiler never sees any of its kernels; "
             "every other finding for the file is provisional until it parses.",
         bad_example="for k in T.Pipelined(n, num_stages=2)\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, num_stages=2):\n" + _GEMM_BODY,
         fix="Fix the syntax error at the reported position (here: the missing `:`)."),
    Rule("TL002", "unresolved-value", "information",
         "A size or schedule value cannot be determined statically.",
         what="A value the analyses need (num_stages, a tile size, a dtype) depends on "
              "something tilelint cannot see, such as a runtime argument. When a Python "
              "`if` in the kernel tests such a value, tilelint builds the kernel each way "
              "the `if` can go (each arm, and no arm without `else`; up to 8 ways per "
              "kernel): an error or warning that holds every way is reported as itself, "
              "one that holds only some ways becomes a TL002 at its place that names the "
              "deciding value and the ways it holds for (`TL201 depends on `USE_BIG`, "
              "whose value is not known here: it holds only when line 27 `if USE_BIG:` "
              "builds its `USE_BIG` arm: ...`). `tilelint explain` lists the facts that "
              "differ under `depends on it:` (JSON: `kernels[].open_claims`).",
         why="Shared-memory size, stage assignment and buffer versions all depend on "
             "these values; without them the results for this kernel are partial.",
         bad_example=_TL002_BAD,
         good_example=_TL002_BAD.replace(
             "\n\ndef matmul(", "\n\n# tilelint: bind block_K=32\ndef matmul("),
         fix="Add a `# tilelint: bind name=value` comment above the kernel or its "
             "factory, call the factory with literal arguments in the file, give the "
             "value under [tool.tilelint.bindings] in pyproject.toml, or pass "
             "`--bind name=value` to `tilelint check`. One TL002 is reported per kernel, "
             "naming every value that is missing."),
    Rule("TL003", "file-too-large", "information",
         "The file is too large to analyse.",
         what="Files over 2 MB are not analysed; one TL003 is reported on the first line "
              "instead, and nothing else is reported for the file.",
         why="Real kernel files are a few hundred lines; parsing a multi-megabyte file "
             "with libcst costs seconds and hundreds of MB on every edit. The limit says "
             "nothing about the compiler, which would import such a file normally.",
         bad_example="# kernels_generated.py: 2.4 MB of generated kernels\n...",
         good_example="# kernels_generated.py excluded in pyproject.toml:\n"
                      "# [tool.tilelint]\n# exclude = [\"kernels_generated.py\"]",
         fix="Split generated code out of the kernel file, or exclude it in "
             "[tool.tilelint] exclude."),
    Rule("TL004", "dialect-not-modelled", "information",
         "The file is written for the tilelang-ascend fork, which is not modelled.",
         what="The file uses the dialect of the tilelang-ascend fork: `T.Kernel(..., "
              "is_npu=True)`, `T.alloc_L1`/`T.alloc_L0A`/`T.alloc_L0B`/`T.alloc_L0C`/"
              "`T.alloc_ub` reached through `tilelang.language`, or `target=\"npuir\"`. "
              "One TL004 is reported for the file (on its first kernel) and nothing else: "
              "no planning, shared-memory or sync finding.",
         why="tilelang 0.1.15 has none of these (its `tilelang.language` cannot import "
             "such a file, and its own Ascend dialect is `tilelang.ascend.language`), so "
             "tilelint has no compiler behaviour to mirror. Checking the kernels as CUDA "
             "would count the L1/L0/UB buffers as shared memory and report overflows and "
             "schedules that the fork's compiler never sees.",
         bad_example=_NPU_FORK_GEMM,
         good_example=_ASCEND_GEMM.replace("VERSIONS", "2"),
         fix="Nothing to fix for the fork's own compiler. To have the kernel checked, write "
             "it in tilelang 0.1.15's Ascend dialect (`import tilelang.ascend.language as "
             "T`, `T.alloc_l1`, `T.alloc_l0c`, `T.alloc_shared` for UB) and run tilelint "
             "with `--target ascend`; or silence the note with `ignore = [\"TL004\"]`.",
         target="ascend"),
    Rule("TL005", "time-budget-used", "warning",
         "tilelint stopped analysing the file: its time budget was used up.",
         what="Analysing one file's kernels took longer than the time budget (60 s by "
              "default). One TL005 is reported on the first kernel left out, and the "
              "kernels from there on are not checked; the findings of those before it, "
              "and every finding of the other files, are reported as usual.",
         why="A file of thousands of generated kernels (under the 2 MB limit) could keep "
             "an editor's language server busy for minutes, and `check` in CI with it. "
             "The budget keeps the server answering and says what was left out; it says "
             "nothing about the compiler.",
         bad_example="# kernels_generated.py: 2,000 generated kernels, 1.9 MB\n...",
         good_example="# pyproject.toml\n# [tool.tilelint]\n# time-budget = 300   # seconds "
                      "per file; 0: no limit",
         fix="Raise `time-budget` in [tool.tilelint] (seconds per file, 0 for no limit), "
             "pass `--time-budget SECONDS` to `tilelint check`, set `tilelint.timeBudget` "
             "in the editor, or exclude the generated file."),
    Rule("TL101", "duplicate-pipeline-order", "error",
         "Two scheduled statements have the same `order` entry.",
         what="The manual `order=` list gives the same position to two statements of "
              "the pipelined body.",
         why="InjectSoftwarePipeline emits the statements of one iteration sorted by "
             "order; a repeated order has no defined emission position, so the compiler "
             "stops with 'Two statements in the software pipeline cannot have the same "
             "order' on the second of them.",
         bad_example="for k in T.Pipelined(n, order=[0, 0, 1], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         fix="Give every scheduled statement a distinct order (the quick fix renumbers "
             "the list, keeping the relative order)."),
    Rule("TL102", "pipeline-stage-inversion", "error",
         "A statement is in an earlier stage than a statement it depends on.",
         what="A statement reads a buffer that an earlier statement of the body writes, "
              "but it was put in an earlier pipeline stage than that writer.",
         why="A stage-s statement of iteration i runs together with stage-0 statements "
             "of iteration i+s; a consumer in an earlier stage than its producer would "
             "read data that has not been produced yet. InjectSoftwarePipeline rejects "
             "it ('... cannot depends on statement ... in a later stage').",
         bad_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[1, 0, 0]):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         fix="Put the consumer in the same or a later stage than every producer it reads."),
    Rule("TL103", "pipeline-reorder-in-stage", "error",
         "Dependent statements in the same stage are reordered.",
         what="Two statements in one stage depend on each other through a buffer, and "
              "the consumer's order comes before the producer's.",
         why="Within one stage the emitted order is the execution order; running the "
             "consumer first would read stale data, so InjectSoftwarePipeline stops with "
             "'two statements with buffer access dependency in the same stage of the "
             "software pipeline cannot be reordered'.",
         bad_example="for k in T.Pipelined(n, order=[1, 2, 0], stage=[0, 0, 0]):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[1, 2, 0], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         fix="Order the producer before the consumer, or move the consumer to a later stage."),
    Rule("TL104", "pipeline-annotation-length", "error",
         "`order`/`stage` have a length the compiler does not accept.",
         what="Each manual schedule list needs one entry per scheduled statement of the "
              "loop body: each T.copy, T.gemm, fill, reduce, T.Parallel or T.serial nest, "
              "`if` (an `if` without `else` counts once per statement in its body), each "
              "statement of an inlined macro, and each scalar bind that reads a buffer the "
              "loop writes (`v = S[0]` after a copy into `S`). Two longer lists are "
              "accepted for compatibility, and their extra entries are dropped: one that "
              "also counts the scalar binds the compiler replays where they are used "
              "(`kk = Ids[k]`, `f = T.cast(k, T.float16)`), and one that also counts "
              "`T.decl_buffer` views at the top of the body. Binds the compiler inlines "
              "before planning (integer arithmetic such as `base = k * 32`, constants, "
              "`j = k`) and allocations never count, and a Python-level `if` on a factory "
              "argument counts only the branch it takes. `order` and `stage` are checked "
              "separately. A list that is not written inline (a parameter, a module "
              "constant, `list(X)`) is resolved like any value; when it stays unknown the "
              "kernel gets a TL002, never a TL104.",
         why="PipelinePlanning filters each list down to the scheduled statements; a "
             "length that matches none of the three counts stops it with 'expected "
             "pipeline annotation size to match the scheduled statement count, executable "
             "statement count, or original statement count'.",
         bad_example="for k in T.Pipelined(n, order=[0, 1], stage=[0, 1]):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         fix="Give one entry per scheduled statement, in source order."),
    Rule("TL105", "pipeline-order-without-stage", "warning",
         "`order` without `stage` (or the reverse): the loop is not pipelined.",
         what="Only one of the two manual-schedule lists is given.",
         why="The compiler uses a manual schedule only when both lists are present; with "
             "one of them the loop silently runs as a plain serial loop (or, with "
             "num_stages, is planned automatically and the list is ignored).",
         bad_example="for k in T.Pipelined(n, order=[0, 1, 2]):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         fix="Add the missing list, or use num_stages= and let the compiler plan."),
    Rule("TL106", "num-stages-with-manual-schedule", "warning",
         "`num_stages` given together with a manual `order`/`stage`.",
         what="The loop has both num_stages= and a manual schedule.",
         why="On sm_80/86/89 the manual schedule is used and num_stages is left on the "
             "loop: buffer versions follow the stages (max stage + 1) while the pipeline "
             "depth used for cp.async waits is num_stages, so the two disagree. On sm_90 "
             "num_stages makes the loop a warp-specialization candidate; when its copies "
             "are TMA-eligible the manual order/stage are ignored and num_stages decides.",
         bad_example="for k in T.Pipelined(n, num_stages=2, order=[0, 1, 2], stage=[0, 0, 2]):\n"
                     + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 2]):\n" + _GEMM_BODY,
         fix="Remove num_stages= (the depth is inferred as max(stage) + 1)."),
    Rule("TL107", "multiple-async-stage-dependency", "error",
         "A statement reads buffers filled by async copies of different stages.",
         what="A consumer reads buffers written by asynchronous (cp.async) copies that "
              "were put in two different stages.",
         why="InjectSoftwarePipeline waits for one async stage's commit groups per "
             "consumer; it cannot wait on two stages and stops with 'A dependency on "
             "multiple async stages is not supported'.",
         bad_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 1, 2]):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 2]):\n" + _GEMM_BODY,
         fix="Put all copies a statement consumes in the same stage."),
    Rule("TL108", "overlapping-stage-writes", "error",
         "A copy stage and a later statement write overlapping parts of one buffer.",
         what="A global-to-shared copy writes a buffer region that a later statement of "
              "the same body writes again.",
         why="PipelinePlanning moves copies to stage 0 of a later iteration; a second "
             "writer would race with it, so planning stops with 'Multiple writes to "
             "overlapping buffer regions detected'.",
         bad_example="for k in T.Pipelined(n, num_stages=2):\n"
                     "    T.copy(A[by * 128, k * 32], A_shared)\n"
                     "    T.clear(A_shared)\n    T.gemm(A_shared, B_shared, C_local)",
         good_example="for k in T.Pipelined(n, num_stages=2):\n" + _GEMM_BODY,
         fix="Write the buffer in one statement, or use separate buffers."),
    Rule("TL109", "nested-pipelined-loop", "warning",
         "A T.Pipelined loop inside another T.Pipelined loop.",
         what="A T.Pipelined loop sits inside the body of another T.Pipelined loop.",
         why="PipelinePlanning schedules the outer loop's body as a whole and does not "
             "look inside it, so the inner loop is not pipelined: its copies are not "
             "multi-buffered and nothing overlaps. With the example the compiler gives "
             "the 128x32 and 32x128 tiles one version each (16 KiB of shared memory); with "
             "an outer T.serial loop the inner loop gets two versions (32 KiB).",
         bad_example="for i in T.Pipelined(m, num_stages=2):\n"
                     "    for k in T.Pipelined(n, num_stages=2):\n"
                     + _GEMM_BODY_NESTED,
         good_example="for i in T.serial(m):\n"
                      "    for k in T.Pipelined(n, num_stages=2):\n"
                      + _GEMM_BODY_NESTED,
         fix="Pipeline only the innermost loop; make the outer one T.serial."),
    Rule("TL110", "pipelining-disabled-on-target", "warning",
         "Software pipelining is disabled on this ROCm target.",
         what="On ROCm targets other than gfx950 (for example gfx942) the compiler drops "
              "num_stages from a T.Pipelined loop that has no manual order/stage.",
         why="PipelinePlanning removes the annotation on ROCm unless the target is gfx950, "
             "the only ROCm target whose async-copy pipeline it treats as validated; the "
             "loop runs unpipelined and its buffers are single-buffered. The same file on "
             "gfx950 or a CUDA target is pipelined.",
         bad_example="for k in T.Pipelined(n, num_stages=3):  # on gfx942\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, num_stages=3):  # on gfx950\n" + _GEMM_BODY,
         fix="Expect no overlap on this target (drop num_stages to say so), or target "
             "gfx950."),
    Rule("TL111", "manual-schedule-ignored-by-warp-specialization", "warning",
         "The manual schedule is ignored: the loop is warp-specialized (sm_90).",
         what="On sm_90 a loop with num_stages and TMA-eligible copies is split into "
              "producer and consumer warp groups before pipeline planning.",
         why="Warp specialization consumes num_stages (num_stages versions, 2 x "
             "num_stages mbarriers) and drops order/stage, so the schedule has no effect.",
         bad_example="for k in T.Pipelined(n, num_stages=3, order=[0, 1, 2], stage=[0, 0, 1]):\n"
                     + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, num_stages=3):\n" + _GEMM_BODY,
         fix="Remove order/stage, or remove num_stages (a manual schedule without "
             "num_stages is not warp-specialized), or set tl.disable_warp_specialized.",
         target="sm_90"),
    Rule("TL112", "pipeline-planning-failure", "error",
         "PipelinePlanning cannot give every statement a stage.",
         what="A statement that only feeds a scalar into the copies (e.g. `kk = "
              "Idx_shared[0]` after `T.copy(Ids[k], Idx_shared)`) is moved to stage 0 "
              "together with the copies, so the copy feeding it is never placed.",
         why="Planning places copies right before their last consumer; when that consumer "
             "is itself a copy producer nothing schedules the copy and the compiler stops "
             "with 'The number of stages should be equal to the number of pipeline stages'.",
         bad_example=_TL112_BAD,
         good_example=_TL112_BAD.replace(
             "            T.copy(Ids[k], Idx_shared)\n            kk = Idx_shared[0]\n",
             "            kk = Ids[k]\n").replace(
             "        Idx_shared = T.alloc_shared((1,), \"int32\")\n", ""),
         fix="Read the index straight from global memory (a replayable alias), or give a "
             "manual order/stage."),
    Rule("TL113", "warp-specialization-fallback", "warning",
         "On sm_90 the kernel's loops lose num_stages: nothing is pipelined.",
         what="The kernel has TMA-eligible copies, so sm_90's warp-specialization pass "
              "takes it, but the first loop with num_stages has no such copy at its top "
              "level (each copy sits in its own `if`, or the loads are T.Parallel nests).",
         why="When the rewriter cannot split that loop into producer and consumer it "
             "removes num_stages from every loop of the kernel, so no loop is software-"
             "pipelined and every copy waits for the previous compute.",
         bad_example="for k in T.Pipelined(n, num_stages=3):\n"
                     "    if k < n:\n        T.copy(A[by * 128, k * 32], A_shared)\n"
                     "    if k < n:\n        T.copy(B[k * 32, bx * 128], B_shared)\n"
                     "    T.gemm(A_shared, B_shared, C_local)",
         good_example="for k in T.Pipelined(n, num_stages=3):\n" + _GEMM_BODY,
         fix="Put the global-to-shared copies at the top level of the loop body, or "
             "disable warp specialization (pass config tl.disable_warp_specialized).",
         target="sm_90"),
    Rule("TL114", "unknown-pipelined-argument", "information",
         "`T.Pipelined` has an argument that tilelang 0.1.15 does not have.",
         what="The loop passes a keyword argument that tilelang 0.1.15's `T.Pipelined("
              "start, stop, num_stages, order, stage, annotations)` does not accept, such "
              "as `sync=` or `group=` from forks like tilescale. One TL114 is reported per "
              "loop, naming each such argument.",
         why="tilelang 0.1.15 stops with a TypeError when it traces the kernel. What a fork "
             "does with the argument (grouping statements, extra synchronisation) is not "
             "modelled, so tilelint reports nothing built on this loop's schedule: no "
             "TL101-TL108 or TL111 for it, and its stages and buffer versions are "
             "listed as unknown.",
         bad_example="for k in T.Pipelined(n, order=[0, 1], stage=[0, 1], group=[[0, 1], [2]]):\n"
                     + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, order=[0, 1, 2], stage=[0, 0, 1]):\n" + _GEMM_BODY,
         fix="Nothing to fix for the fork's own compiler. For tilelang 0.1.15, remove the "
             "argument (and give order/stage one entry per statement), or silence the note "
             "with `ignore = [\"TL114\"]`."),
    Rule("TL115", "pipelined-buffer-used-outside-loop", "error",
         "A shared buffer that a pipelined loop multi-versions is also used outside it.",
         what="A statement outside every T.Pipelined loop (a copy, gemm, fill, reduce, "
              "store or T.Parallel body before or after the loop) reads or writes a shared "
              "buffer that a pipelined loop keeps in two or more versions.",
         why="The loop's versions turn the buffer into an array of tiles (a 128x32 tile at "
             "num_stages=2 becomes (2, 128, 32)) while the statement outside the loop uses "
             "one tile. Layout inference cannot give the buffer both shapes and stops with "
             "'InputShape() = (128, 32) shape = (2, 128, 32)', a failure without a source "
             "line. Measured with tilelang 0.1.15 on sm_80 and sm_90: a use before the loop "
             "or after it fails, a lone copy before it fails too; with num_stages=1 (one "
             "version) the kernel lowers.",
         bad_example=_TL115_BAD,
         good_example=_TL115_GOOD,
         fix="Give the statements outside the loop their own buffers (a first tile "
             "computed before the loop, an epilogue after it), or move that work into the "
             "loop."),
    Rule("TL201", "shared-memory-overflow", "error",
         "Shared memory exceeds the target's per-block limit.",
         what="The kernel's merged shared-memory arena (every multi-versioned buffer, after "
              "MergeSharedMemoryAllocations reuse) is larger than the target's opt-in limit "
              "of dynamic shared memory per block (sm_80: 163 KiB, sm_90: 227 KiB).",
         why="The compiler accepts the kernel and generates code; the launch then fails "
             "because the block asks for more shared memory than the SM can give. Each "
             "pipeline stage multiplies the copied tiles: num_stages=N keeps N versions.",
         bad_example="for k in T.Pipelined(n, num_stages=12):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, num_stages=3):\n" + _GEMM_BODY,
         fix="Lower num_stages (the quick fix proposes the largest value that fits), use "
             "smaller tiles, or reuse a buffer; the message lists every buffer's bytes."),
    Rule("TL202", "autotune-config-overflow", "warning",
         "Autotune configurations exceed the shared-memory limit.",
         what="Some entries of a literal autotune configuration list (`@tilelang.autotune("
              "configs=...)`: a list, a function returning one, a dict of value lists, or a "
              "callable) give the kernel more shared memory than the target allows. One "
              "diagnostic per kernel and target names every such configuration.",
         why="The autotuner compiles and tries every configuration. An overflowing one "
             "fails when its kernel is launched; tilelang 0.1.15's autotuner logs \"An error "
             "occurred while testing config …\" and skips it, so the kernel still works, but "
             "the configuration wastes tuning time and is never a candidate. Only when every "
             "configuration fails does tuning stop (\"Auto-tuning failed: No configuration "
             "successfully compiled and passed benchmarking/validation\"). Hence a warning, "
             "not an error: the tuned kernel is one of the configurations that fit.",
         bad_example=_AUTOTUNE_GEMM.replace("STAGES", "12"),
         good_example=_AUTOTUNE_GEMM.replace("STAGES", "4"),
         fix="Drop the named configurations from the list, or bound the space (e.g. skip "
             "num_stages values whose tiles times stages exceed the budget in the function "
             "that builds the list)."),
    Rule("TL203", "shared-memory-near-budget", "information",
         "Shared memory is close to the target's limit.",
         what="The kernel's shared memory is above 90 % of the target's per-block limit.",
         why="There is no room for one more stage or a larger tile, and with so much "
             "shared memory per block only one block fits on an SM (low occupancy).",
         bad_example="for k in T.Pipelined(n, num_stages=10):\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, num_stages=3):\n" + _GEMM_BODY,
         fix="Usually nothing to fix; consider fewer stages if occupancy matters more "
             "than latency hiding."),
    Rule("TL301", "flag-spill", "warning",
         "Ascend sync flags spill from hardware events into buffer locks.",
         what="One hardware event (a producer/consumer pipe pair such as MTE2→MTE1) needs "
              "more than the 8 event ids a core has. Each multi-buffered handshake takes "
              "one id per buffer version, so a cube GEMM whose L1 tiles have 12 versions "
              "needs 12 ids on MTE1→MTE2 and 12 on MTE2→MTE1.",
         why="The compiler accepts the kernel, but its RewriteFlagToBuf step turns the "
             "handshakes that do not fit into blocking asc_lock/asc_unlock pairs on ids "
             "of a shared mutex pool, which is slower than hardware events and uses up "
             "the pool (TL302).",
         bad_example=_ASCEND_GEMM.replace("VERSIONS", "12"),
         good_example=_ASCEND_GEMM.replace("VERSIONS", "8"),
         fix="Lower the versions in T.annotate_buffer_versions (8 or fewer per buffer of "
             "one handshake), or merge statements that synchronise on the same pipes.",
         target="ascend"),
    Rule("TL302", "mutex-pool-exhausted", "error",
         "The Ascend mutex pool (32 ids) is exhausted.",
         what="The flags that spill (TL301) need more asc_lock ids than the pool's 32; "
              "an L1 GEMM holds ids 0 and 1. With 16 versions per L1 tile each of the two "
              "handshakes spills all 16 ids: 2 + 16 + 16 = 34.",
         why="RewriteFlagToBuf cannot give every spilled handshake its own lock id and "
             "the compiler stops with an error, so the kernel does not build.",
         bad_example=_ASCEND_GEMM.replace("VERSIONS", "16"),
         good_example=_ASCEND_GEMM.replace("VERSIONS", "8"),
         fix="Lower the versions in T.annotate_buffer_versions: with 8 or fewer nothing "
             "spills; up to 12 per L1 tile the spilled ids still fit in the pool (TL301).",
         target="ascend"),
    Rule("TL303", "cross-core-flags-over-limit", "error",
         "More than 16 cross-core flags are needed.",
         what="The handshakes between the cube core and the vector cores (an L0C→UB "
              "T.dual_copy, the release of the UB buffer) need more than the 16 cross-core "
              "flag ids, one per version of each UB buffer the two sides share. Two UB "
              "buffers with 9 versions each need 18.",
         why="InsertSync cannot place the flags in 16 contiguous slots and the compiler "
             "stops ('cannot allocate 9 contiguous cross-core flag slots'), so the kernel "
             "does not build.",
         bad_example=_ASCEND_MIXED.replace("VERSIONS", "9"),
         good_example=_ASCEND_MIXED.replace("VERSIONS", "8"),
         fix="Lower the versions of the UB buffers filled from L0C so that their sum is "
             "16 or less.",
         target="ascend"),
    Rule("TL900", "unused-noqa", "hint",
         "A `# noqa` comment suppresses nothing.",
         what="A `# noqa` or `# noqa: CODE` comment is on a line where no finding (or not "
              "the named code) is reported. TL900 is off by default: enable it with "
              "`extend-select = [\"TL900\"]` in [tool.tilelint], `--extend-select TL900` "
              "on the command line, or any `select` list that covers it (`select = "
              "[\"TL\"]` selects every code, TL900 included).",
         why="A suppression that no longer matches anything hides the next real problem "
             "on that line. Editors show TL900 as unnecessary (faded) code.",
         bad_example="for k in T.Pipelined(n, num_stages=2):  # noqa: TL106\n" + _GEMM_BODY,
         good_example="for k in T.Pipelined(n, num_stages=2):\n" + _GEMM_BODY,
         fix="Remove the comment, or the codes in it that no longer fire."),
    Rule("TL910", "verify-mismatch", "warning",
         "tilelint's prediction disagrees with the real compiler.",
         what="Only from `tilelint verify FILE`, which imports the file in a separate "
              "worker process, lowers every kernel with the installed tilelang 0.1.15 and "
              "compares the compiler's facts with the static model: pipelined or not, "
              "stage, order and depth, buffer versions, arena bytes and offsets, threads, "
              "warp specialization and sync counts. The message names both values.",
         why="The static model missed a compiler behaviour; trust the compiler. Please "
             "report the kernel: a disagreement is a tilelint bug.",
         fix="Nothing to change in the kernel for this finding itself; the other findings "
             "of the file may be wrong where they depend on the mismatching value."),
    Rule("TL911", "unpredicted-compiler-error", "error",
         "The compiler failed where tilelint predicted success.",
         what="Only from `tilelint verify FILE`: lowering a kernel with the installed "
              "tilelang raised an error that no tilelint rule predicted. The finding sits "
              "on the line the compiler blames (its `--> file:LINE:COL`), with the "
              "compiler's message.",
         why="The static model does not cover this failure; the kernel does not build.",
         fix="Read the compiler's message in the finding. If the kernel looks valid, report "
             "it to tilelang; otherwise please report the missing rule to tilelint."),
)

RULES_BY_CODE: Dict[str, Rule] = {r.code: r for r in RULES}


def get_rule(code: str) -> Optional[Rule]:
    return RULES_BY_CODE.get(code)



def diagnostic(code: str, span: Span, message: str, related: Sequence[Related] = (),
               fixes: Sequence[Fix] = (), severity: Optional[str] = None) -> Diagnostic:
    """A finding of rule ``code`` (its registered severity unless ``severity``)."""
    return Diagnostic(code=code, severity=severity or RULES_BY_CODE[code].severity,
                      span=span, message=message, related=tuple(related), fixes=tuple(fixes))
