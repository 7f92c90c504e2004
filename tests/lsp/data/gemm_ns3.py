# tilelint LSP test document: fp16 GEMM 1024³, tile 128×128×32, num_stages=3 (sm_80).
# Compiler facts (NOTES.md table): stage [0, 0, 2], order [0, 1, 2], 3 versions, 49152 B dynamic smem.
import tilelang
import tilelang.language as T


def gemm(M, N, K, block_M, block_N, block_K, num_stages=3, dtype="float16", accum="float32"):
    @T.prim_func
    def gemm_ns3(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_ns3


kernel = gemm(1024, 1024, 1024, 128, 128, 32, num_stages=3)
