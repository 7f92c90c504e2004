"""Static values of library helpers the frontend meets in real kernels."""

from tilelint.analysis import frontend, values

SRC = '''
import tilelang.language as T
from tilelang.language.fp8 import determine_fp8_type


def f(dtype, block=128):
    @T.prim_func
    def k(A: T.Tensor((1024, 1024), dtype)):
        with T.Kernel(8, threads=128) as bx:
            S = T.alloc_shared((block, 64), dtype)
            T.copy(A[bx * block, 0], S)
    return k


a = f(determine_fp8_type())
b = f(determine_fp8_type("e5m2"))
c = f(determine_fp8_type(fp8_format="e5m2"))
'''


def test_determine_fp8_type_on_cuda() -> None:
    # tilelang/language/fp8.py: on CUDA (torch.version.hip is None) the helper
    # returns T.float8_e4m3fn for "e4m3" (the default) and T.float8_e5m2 for "e5m2".
    module = frontend.parse_module(SRC)
    (kernel,) = module.kernels
    got = [values.normalise_dtype(i.env.lookup("dtype"))
           for i in values.instances(module, kernel, {}, all_calls=True)]
    # b and c bind the same values, and identical instantiations are merged.
    assert got == ["float8_e4m3fn", "float8_e5m2"]
    only_c = frontend.parse_module(SRC.replace("a = f(determine_fp8_type())", "")
                                   .replace('b = f(determine_fp8_type("e5m2"))', ""))
    (kc,) = only_c.kernels
    assert values.instances(only_c, kc)[0].env.lookup("dtype") == "float8_e5m2"
    assert values.dtype_bits("float8_e4m3fn") == 8
