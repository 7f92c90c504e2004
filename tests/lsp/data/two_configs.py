# tilelint LSP test document: one kernel factory instantiated two ways.
# 128×128 tiles in fp16: block_K=32 is 16 KiB per stage (×3 stages = 49152 B),
# block_K=64 is 32 KiB per stage (×6 stages = 196608 B, over sm_80's 166912 B).
import tilelang
import tilelang.language as T


def gemm(M, N, K, block_M, block_N, block_K, num_stages=3, dtype="float16", accum="float32"):
    @T.prim_func
    def gemm_two(
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

    return gemm_two


small = gemm(1024, 1024, 1024, 128, 128, 32, num_stages=3)
big = gemm(1024, 1024, 1024, 128, 128, 64, num_stages=6)
