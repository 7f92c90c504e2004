"""The analysis modules, imported on first use.

Importing anything under ``tilelint.analysis`` runs its ``__init__``, which
loads libcst and every pass (~350 ms).  The server answers ``initialize``
before that and warms these up in the analysis thread right after."""

from __future__ import annotations

from typing import Any, Callable


class LazyModule:
    """A module of our own, imported by ``load`` the first time it is used."""

    __slots__ = ("_load", "_mod")

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._mod = None

    def load(self) -> Any:
        mod = self._mod
        if mod is None:
            mod = self._mod = self._load()
        return mod

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.load(), attr)


def _frontend():
    from tilelint.analysis import frontend as m
    return m


def _pipeline():
    from tilelint.analysis import pipeline as m
    return m


def _targets():
    from tilelint.analysis import targets as m
    return m


def _model():
    from tilelint.analysis import model as m
    return m


def _render():
    from tilelint.analysis import render as m
    return m


def _schedule_ascend():
    from tilelint.analysis import schedule_ascend as m
    return m


frontend = LazyModule(_frontend)
pipeline = LazyModule(_pipeline)
targets = LazyModule(_targets)
model = LazyModule(_model)
render = LazyModule(_render)
schedule_ascend = LazyModule(_schedule_ascend)


def warm_up() -> None:
    for m in (model, frontend, targets, pipeline, render):
        m.load()
    # The passes pipeline.analyze_kernel imports on first use.
    from tilelint.analysis import packing, planning, rules, sync_cuda, versions  # noqa: F401
