"""Vector-only kernel: 4 independent UB streams, each copy-in -> SimtVF -> copy-out, versions 4."""
import tilelang.ascend.language as T


def kernel(L=65536, blk=512, nb=8, ns=2):
    tiles = L // blk // nb

    @T.prim_func
    def main(X: T.Tensor((L,), "float32"), Z: T.Tensor((L,), "float32")):
        with T.Kernel(nb) as bx:
            x0 = T.alloc_shared((blk,), "float32")
            z0 = T.alloc_shared((blk,), "float32")
            x1 = T.alloc_shared((blk,), "float32")
            z1 = T.alloc_shared((blk,), "float32")
            x2 = T.alloc_shared((blk,), "float32")
            z2 = T.alloc_shared((blk,), "float32")
            x3 = T.alloc_shared((blk,), "float32")
            z3 = T.alloc_shared((blk,), "float32")
            T.annotate_buffer_versions({x0: 4, z0: 4})
            T.annotate_buffer_versions({x1: 4, z1: 4})
            T.annotate_buffer_versions({x2: 4, z2: 4})
            T.annotate_buffer_versions({x3: 4, z3: 4})
            for t in T.Pipelined(tiles, num_stages=ns):
                base = (t * nb + bx) * blk
                T.copy(X[base:base + blk], x0)
                with T.SimtVF(threads=128):
                    for i in T.Parallel(blk):
                        z0[i] = x0[i] * 2.0
                T.copy(z0, Z[base:base + blk])
                T.copy(X[base:base + blk], x1)
                with T.SimtVF(threads=128):
                    for i in T.Parallel(blk):
                        z1[i] = x1[i] * 3.0
                T.copy(z1, Z[base:base + blk])
                T.copy(X[base:base + blk], x2)
                with T.SimtVF(threads=128):
                    for i in T.Parallel(blk):
                        z2[i] = x2[i] * 4.0
                T.copy(z2, Z[base:base + blk])
                T.copy(X[base:base + blk], x3)
                with T.SimtVF(threads=128):
                    for i in T.Parallel(blk):
                        z3[i] = x3[i] * 5.0
                T.copy(z3, Z[base:base + blk])
    return main
