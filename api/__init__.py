"""tilelint's Python API: prune tilelang autotune configurations before they compile.

``prune_configs(kernel, configs, target=...)`` returns the configurations
whose shared memory fits ``target``; ``autotune_configs(get_configs, target=...)``
does the same for ``@tilelang.autotune(configs=...)``.  Both read the kernel's
source and never run it.  The linter itself is ``tilelint.analysis`` and the
command line and language server ``tilelint.server``.

The names load on first use, so that ``import tilelint.server`` (the command
line, the language server) does not load the pruning code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelint.analysis.prune import ConfigVerdict, Pruned
    from tilelint.server.prune import AutotuneConfigs, autotune_configs, prune_configs

__all__ = ["prune_configs", "autotune_configs", "Pruned", "ConfigVerdict", "AutotuneConfigs"]

_HOME = {"prune_configs": "tilelint.server.prune", "autotune_configs": "tilelint.server.prune",
         "AutotuneConfigs": "tilelint.server.prune", "Pruned": "tilelint.analysis.prune",
         "ConfigVerdict": "tilelint.analysis.prune"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'tilelint' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
