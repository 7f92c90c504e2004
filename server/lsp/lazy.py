"""The analysis modules, imported on first use.

Importing anything under ``tilelint.analysis`` runs its ``__init__``, which
loads libcst and every pass (~350 ms).  The server answers ``initialize``
before that and warms these up in the analysis thread right after."""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    __slots__ = ("_name", "_mod")

    def __init__(self, name: str) -> None:
        self._name = name
        self._mod = None

    def load(self) -> Any:
        mod = self._mod
        if mod is None:
            mod = self._mod = importlib.import_module(self._name)
        return mod

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.load(), attr)


frontend = LazyModule("tilelint.analysis.frontend")
pipeline = LazyModule("tilelint.analysis.pipeline")
targets = LazyModule("tilelint.analysis.targets")
model = LazyModule("tilelint.analysis.model")
render = LazyModule("tilelint.analysis.render")


def warm_up() -> None:
    for m in (model, frontend, targets, pipeline, render):
        m.load()
    # The passes pipeline.analyze_kernel imports on first use.
    for name in ("planning", "versions", "packing", "sync_cuda", "rules"):
        try:
            importlib.import_module(f"tilelint.analysis.{name}")
        except Exception:
            pass
