"""Dtype names as tilelang 0.1.15 spells them, and their sizes.

The evaluator holds a dtype as its name (a ``str``: tilelang's dtype objects
are ``str`` subclasses), so everything here works on names: the aliases a
kernel may write (``"half"``, ``T.float16``, ``torch.bfloat16``), the bits and
lanes of a name, and the calls that turn a name into a dtype object.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

# The dtype attributes of ``torch`` (``torch.float16``) the evaluator reads.
TORCH_DTYPES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64",
    "bool", "half", "float", "double", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz",
})


_DTYPE_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32",
    "bool": "bool", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
    "fp8": "float8_e4m3", "e4m3_float8": "float8_e4m3", "e5m2_float8": "float8_e5m2",
    "long": "int64", "short": "int16", "uint": "uint32",
}

_DTYPE_BITS = {
    "bool": 8, "int4": 4, "uint4": 4, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16,
    "int32": 32, "uint32": 32, "int64": 64, "uint64": 64, "float16": 16, "bfloat16": 16,
    "float32": 32, "float64": 64, "tfloat32": 32,
}


def normalise_dtype(value: object) -> Optional[str]:
    if not isinstance(value, str):
        return None
    v = _DTYPE_ALIASES.get(value, value)
    return v


def dtype_bits(dtype: Optional[str]) -> Optional[int]:
    """Bits of one element of ``dtype`` (all lanes of a vector type such as
    ``float16x2``), or None if the name is not a dtype."""
    info = dtype_info(dtype)
    return None if info is None else info[0] * info[1]


# ``custom[float4_e2m1_unpacked]8``: tilelang's spelling of a few custom types.
_CUSTOM_DTYPE = re.compile(r"custom\[(?P<name>\w+)\](?P<bits>\d+)")
_LANES = re.compile(r"(?P<base>\w+?)x(?P<lanes>\d+)")
_SIZED = re.compile(r"(?:u?int|float|bfloat)(?P<bits>\d+)")


def dtype_info(dtype: Optional[str]) -> Optional[Tuple[int, int]]:
    """(bits per lane, lanes) of a dtype name, as ``tvm.DataType(name)`` has
    them in tilelang 0.1.15 (``.bits``, ``.lanes``; ``.bytes`` is
    ``(bits * lanes + 7) // 8``): ``float16`` (16, 1), ``int4`` (4, 1),
    ``bool`` (8, 1), ``float8_e4m3fn`` (8, 1), ``float4_e2m1fn`` (4, 1),
    ``float4_e2m1_unpacked`` (8, 1: one byte per value), ``float16x2`` (16, 2).
    None when the name is not a dtype."""
    if not isinstance(dtype, str) or not dtype or len(dtype) > 64:
        return None
    m = _CUSTOM_DTYPE.fullmatch(dtype)
    if m is not None:
        return int(m.group("bits")), 1
    m = _LANES.fullmatch(dtype)  # a vector type: ``float16x2``, ``float4_e2m1fnx16``
    if m is not None:
        bits = _base_bits(m.group("base"))
        lanes = int(m.group("lanes"))
        if bits is not None and 1 <= lanes <= 1024:
            return bits, lanes
    bits = _base_bits(dtype)
    return None if bits is None else (bits, 1)


def _base_bits(name: str) -> Optional[int]:
    if name in _DTYPE_BITS:
        return _DTYPE_BITS[name]
    if name.endswith("_unpacked") and name.startswith("float4"):
        return 8  # one float4 value per byte (tilelang's float4_e2m1_unpacked)
    for prefix, bits in (("float8_", 8), ("float6_", 6), ("float4_", 4)):
        if name.startswith(prefix) and name[len(prefix):].replace("_", "").isalnum():
            return bits
    m = _SIZED.fullmatch(name)
    if m is not None:
        bits = int(m.group("bits"))
        if name.startswith("bfloat"):
            return bits if bits == 16 else None
        if name.startswith("float"):
            return bits if bits in (4, 6, 8, 16, 32, 64) else None
        return bits if 1 <= bits <= 64 else None
    return None


def dtype_attribute(dtype: object, attr: str) -> Optional[int]:
    """``.bits`` / ``.bytes`` / ``.lanes`` of a dtype value (a dtype object of
    tilelang is a ``str`` subclass, which is how the resolver holds it)."""
    info = dtype_info(dtype) if isinstance(dtype, str) else None
    if info is None:
        return None
    bits, lanes = info
    if attr == "bits":
        return bits
    if attr == "lanes":
        return lanes
    if attr == "bytes":
        return (bits * lanes + 7) // 8
    return None


# The calls that turn a dtype name into a dtype object (``tvm.DataType`` is
# ``tvm_ffi.dtype``, a ``str`` subclass, as is ``T.dtype``).
DTYPE_CONSTRUCTORS = frozenset({
    "DataType", "tvm.DataType", "tvm.runtime.DataType", "tvm.ffi.runtime_ctypes.DataType",
    "tilelang.DataType", "tl.DataType", "T.DataType", "T.dtype", "tl.dtype", "tilelang.dtype",
    "tvm_ffi.dtype",
})
