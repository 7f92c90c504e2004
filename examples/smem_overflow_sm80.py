"""TL201: too much shared memory for sm_80, fine on sm_90.

128x64 + 64x128 fp16 tiles are 32 KiB per stage; num_stages=6 keeps six
versions of each: 196608 bytes.  The A100's opt-in limit per block is 166912
bytes, the H100's 232448.  The compiler accepts the kernel either way; on an
A100 the launch fails.

    tilelint check examples/smem_overflow_sm80.py --targets sm_80,sm_90
"""
import tilelang
import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K, num_stages, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def gemm_deep(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_deep


func = matmul(4096, 4096, 4096, 128, 128, 64, num_stages=6)

if __name__ == "__main__":
    kernel = tilelang.compile(func, out_idx=[2])
