"""The autotune pruning API (``tilelint.prune_configs``, ``tilelint.autotune_configs``)
and ``tilelint explain --configs``.

The API reads a kernel's source with :mod:`inspect` (the file it was defined
in, so that module constants resolve) and judges each configuration with
``tilelint.analysis.prune``; it never calls the kernel, its factory or tilelang.
What it cannot judge it keeps, with the reason.
"""

from __future__ import annotations

import inspect
import logging
import textwrap
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from tilelint.analysis import frontend, prune as prune_mod, render, targets as targets_mod
from tilelint.analysis.model import Settings
from tilelint.analysis.prune import ConfigVerdict, Pruned

log = logging.getLogger("tilelint.prune")

Config = Mapping[str, Any]


def _python_function(obj: object) -> Optional[Callable[..., Any]]:
    """The Python function behind a kernel object: ``@tilelang.autotune`` →
    its ``jit_impl``; ``@tilelang.jit`` → ``func``; tilelang's ``JITFunc`` →
    ``orig_func``; then ``functools.wraps`` chains.  Attributes are only read."""
    for _ in range(8):
        if inspect.isfunction(obj) or inspect.ismethod(obj):
            return inspect.unwrap(obj)
        nxt = None
        for attr in ("jit_impl", "orig_func", "func", "__wrapped__"):
            try:
                nxt = getattr(obj, attr, None)
            except Exception:  # noqa: BLE001 - a proxy that raises: not this attribute
                nxt = None
            if nxt is not None and nxt is not obj:
                break
        if nxt is None:
            return None
        obj = nxt
    return None


def _source_of(obj: object) -> Tuple[Optional[str], str, Optional[int], str]:
    """(the source to analyse, the function's name, its first line in that
    source or None, why there is no source)."""
    fn = _python_function(obj)
    if fn is None:
        return None, getattr(obj, "__name__", type(obj).__name__), None, (
            f"no Python function found behind {type(obj).__name__}")
    name = fn.__name__
    module = inspect.getmodule(fn)
    if module is not None:
        try:
            return inspect.getsource(module), name, fn.__code__.co_firstlineno, ""
        except (OSError, TypeError):
            pass
    try:
        return textwrap.dedent(inspect.getsource(fn)), name, None, ""
    except (OSError, TypeError) as exc:
        return None, name, None, f"the source of {name!r} is not available ({exc})"


def _configs_list(configs: Iterable[Config]) -> List[Config]:
    if isinstance(configs, Mapping) or isinstance(configs, (str, bytes)):
        raise TypeError("configs must be a list of dicts (one per configuration)")
    out = list(configs)
    for c in out:
        if not isinstance(c, Mapping):
            raise TypeError(f"each configuration must be a dict, got {type(c).__name__}")
    return out


def _checked(target: str, keep: str, min_blocks_per_sm: Optional[int], margin: int) -> str:
    why = prune_mod.check_options(target, keep, min_blocks_per_sm, margin)
    if why is not None:
        raise ValueError(why)
    return targets_mod.normalise(target)


def _prune(source: Optional[str], name: str, line: Optional[int], why: str,
           cfgs: List[Config], target: str, keep: str, min_blocks_per_sm: Optional[int],
           margin: int, args: Sequence[object] = (),
           kwargs: Optional[Mapping[str, object]] = None) -> Pruned:
    if source is None:
        return Pruned([ConfigVerdict(config=c, kept=True, reason=f"kept: {why}") for c in cfgs],
                      target)
    return prune_mod.prune_source(source, name, cfgs, target, keep, min_blocks_per_sm, margin,
                                  bindings=kwargs, line=line, args=args)


def prune_configs(kernel_or_factory: object, configs: Iterable[Config], target: str = "sm_90",
                  keep: str = "fits", min_blocks_per_sm: Optional[int] = None, margin: int = 0,
                  bindings: Optional[Mapping[str, object]] = None) -> Pruned:
    """The configurations of ``configs`` that can launch on ``target``.

    ``kernel_or_factory``: a kernel factory (``def matmul(M, N, K, block_M, …)``
    returning a ``@T.prim_func``), a ``@tilelang.jit`` function or a
    ``@tilelang.autotune`` one.  Its source is read, never run.  Each
    configuration is one instance of it, on top of the values its file gives
    (defaults, its own call sites) and of ``bindings`` (e.g. ``{"M": 4096}``).

    ``keep="fits"`` removes a configuration whose shared memory per block
    exceeds the target's limit less ``margin`` bytes, or, with
    ``min_blocks_per_sm=N``, lets fewer than N blocks reside on one SM;
    ``keep="all"`` removes nothing.  A configuration tilelint cannot size is kept.

    Returns :class:`Pruned`: a tuple of the kept configurations (pass it as
    ``tilelang.autotune(configs=...)``) with ``.removed`` ((config, reason)
    pairs) and ``.verdicts`` (every configuration's numbers and reason)."""
    tgt = _checked(target, keep, min_blocks_per_sm, margin)
    cfgs = _configs_list(configs)
    source, name, line, why = _source_of(kernel_or_factory)
    return _prune(source, name, line, why, cfgs, tgt, keep, min_blocks_per_sm, margin,
                  kwargs=bindings)


class AutotuneConfigs:
    """The callable :func:`autotune_configs` returns: tilelang calls it with
    the kernel call's arguments; it calls the wrapped configuration function
    the same way and prunes its answer.  ``last`` holds the latest answer."""

    def __init__(self, get_configs: Union[Callable[..., Iterable[Config]], Iterable[Config]],
                 target: str, keep: str, min_blocks_per_sm: Optional[int], margin: int,
                 kernel: object) -> None:
        self.get_configs = get_configs
        self.target = target
        self.keep = keep
        self.min_blocks_per_sm = min_blocks_per_sm
        self.margin = margin
        self.kernel = kernel
        self.last: Optional[Pruned] = None

    def _where(self) -> Tuple[Optional[str], str, Optional[int], str]:
        if self.kernel is not None and not isinstance(self.kernel, str):
            return _source_of(self.kernel)
        helper = self.get_configs
        if not callable(helper):
            return None, "?", None, ("pass kernel= (a list of configurations does not say "
                                     "which file its kernel is in)")
        source, hname, _line, why = _source_of(helper)
        if source is None:
            return None, "?", None, why
        if isinstance(self.kernel, str):
            return source, self.kernel, None, ""
        try:
            names = prune_mod.wrapped_kernels(frontend.parse_module(source), hname)
        except Exception:  # noqa: BLE001
            names = []
        if len(names) != 1:
            found = "no" if not names else f"{len(names)}"
            return None, "?", None, (f"{found} @autotune decorators name {hname!r} in its file; "
                                     "pass kernel= to say which kernel these configurations "
                                     "are for")
        return source, names[0], None, ""

    def __call__(self, *args: Any, **kwargs: Any) -> Pruned:
        cfgs = _configs_list(self.get_configs(*args, **kwargs) if callable(self.get_configs)
                             else self.get_configs)
        source, name, line, why = self._where()
        res = _prune(source, name, line, why, cfgs, self.target, self.keep,
                     self.min_blocks_per_sm, self.margin, args, kwargs)
        self.last = res
        log.info("tilelint: %d of %d autotune configs kept for %s on %s", len(res),
                 len(res.verdicts), name, self.target)
        for cfg, reason in res.removed:
            log.info("tilelint: removed %s: %s", prune_mod.config_label(cfg), reason)
        return res


def autotune_configs(get_configs: Union[Callable[..., Iterable[Config]], Iterable[Config]],
                     target: str = "sm_90", keep: str = "fits",
                     min_blocks_per_sm: Optional[int] = None, margin: int = 0,
                     kernel: object = None) -> AutotuneConfigs:
    """``get_configs`` (a configuration function, or a list) pruned as by
    :func:`prune_configs` each time tilelang asks for the configurations::

        @tilelang.autotune(configs=tilelint.autotune_configs(get_configs, target="sm_90"))
        @tilelang.jit(out_idx=[-1])
        def matmul(M, N, K, block_M=None, ...): ...

    tilelang calls it with the kernel call's arguments, which become the
    instance's values (``matmul(4096, 4096, 4096)``: M, N, K).  The kernel is the
    one whose ``@autotune`` decorator wraps ``get_configs`` in its file, or
    ``kernel`` (the factory, or its name in ``get_configs``'s file)."""
    tgt = _checked(target, keep, min_blocks_per_sm, margin)
    return AutotuneConfigs(get_configs, tgt, keep, min_blocks_per_sm, margin, kernel)


# --------------------------------------------------------------------------
# tilelint explain --configs
# --------------------------------------------------------------------------


def explain_configs_json(text: str, settings: Settings) -> Dict[str, object]:
    """``{"configs": {"target": …, "limit": …, "kernels": [...]}}`` for one target."""
    tables = prune_mod.file_configs(frontend.parse_module(text), settings)
    target = targets_mod.normalise(settings.target)
    return {"configs": {
        "target": target, "limit": targets_mod.budget(target),
        "kernels": [{"kernel": t.kernel, "line": t.line, "kept": sum(v.kept for v in t.verdicts),
                     "wrapped_by": t.wrapped_by,
                     "configs": [v.to_json() for v in t.verdicts]} for t in tables]}}


def _cell(v: Optional[object]) -> str:
    return "?" if v is None else str(v)


def explain_configs_text(text: str, settings: Settings) -> str:
    tables = prune_mod.file_configs(frontend.parse_module(text), settings)
    target = targets_mod.normalise(settings.target)
    if not tables:
        return f"\nautotune configurations ({target}): none in this file\n"
    out = []
    for t in tables:
        kept = sum(v.kept for v in t.verdicts)
        head = (f"\nautotune configurations of {t.kernel} (line {t.line}) on {target}, "
                f"limit {targets_mod.budget(target)} B: {kept} of {len(t.verdicts)} kept\n")
        if t.wrapped_by:
            head += (f"pruned at run time by {t.wrapped_by}, which removes what does not "
                     "fit its target before the autotuner compiles it\n")
        rows = [[prune_mod.config_label(v.config), _cell(v.arena_bytes), _cell(v.static_bytes),
                 {True: "yes", False: "no", None: "?"}[v.fits], _cell(v.blocks_per_sm), v.reason]
                for v in t.verdicts]
        out.append(head + render.text_table(
            ["config", "arena B", "static B", "fits", "blocks/SM", "reason"], rows) + "\n")
    return "".join(out)
