"""Static values: resolve a kernel's symbolic sizes without executing anything.

Four modules, each depending only on the ones above it:

- :mod:`.dtypes`: dtype names, their aliases and sizes (no project imports).
- :mod:`.evaluate`: :class:`Env`, the expression evaluator; what it cannot
  know raises :class:`Unknown` naming the values that block it.
- :mod:`.interpret`: :class:`Program`, the file's own functions, classes and
  argparse defaults, interpreted on demand (never executed); it is the host
  an ``Env`` hands calls of those functions to.
- :mod:`.instances`: every way the file instantiates a kernel
  (:func:`instances`), each with the ``Env`` built by :func:`build_env`.

The rest of the analysis imports these names from here.
"""

from ..model import expr_text
from .dtypes import dtype_attribute, dtype_bits, dtype_info, normalise_dtype
from .evaluate import Env, Host, Symbolic, Unknown, Unresolved, shape_value
from .instances import (
    MAX_INSTANCES,
    Instance,
    build_env,
    call_sites_for,
    instance_labels,
    instances,
    kernel_params,
)
from .interpret import Program, module_exprs, program

__all__ = [
    "MAX_INSTANCES", "Env", "Host", "Instance", "Program", "Symbolic", "Unknown", "Unresolved",
    "build_env", "call_sites_for", "dtype_attribute", "dtype_bits", "dtype_info", "expr_text",
    "instance_labels", "instances", "kernel_params", "module_exprs", "normalise_dtype",
    "program", "shape_value",
]
