"""TL101: a manual schedule that gives two statements the same order.

The compiler (InjectSoftwarePipeline) stops with "Two statements in the
software pipeline cannot have the same order" on the second copy; tilelint
reports it without compiling:

    tilelint check examples/duplicate_order.py
"""
import tilelang
import tilelang.language as T


def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def gemm_manual(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), order=[0, 0, 1], stage=[0, 0, 1]):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_manual


if __name__ == "__main__":
    kernel = tilelang.compile(matmul(1024, 1024, 1024), out_idx=[2])
