"""Autotune pruning: which configurations of a kernel can launch on a target.

tilelang's autotuner compiles every configuration it is given; one whose
shared memory exceeds the target's per-block limit compiles and then fails at
launch.  :func:`judge_configs` plans and packs each configuration the way TL202
does (``packing.pack_configs``: the same planning, versions and arena as the
rest of tilelint) and decides, per configuration, whether to keep it:

* ``keep="fits"``: the shared memory per block (dynamic arena plus static
  bytes, the mbarriers of sm_90 included) is at most the target's opt-in limit
  less ``margin`` bytes;
* ``min_blocks_per_sm=N``: at least N blocks fit on one SM by shared memory and
  threads (``targets.residency``); registers are not known before compilation,
  so this is an upper bound and a configuration it removes cannot reach N;
* ``keep="all"``: nothing is removed, every configuration gets its numbers.

A configuration whose arena cannot be computed (a size that depends on a value
tilelint does not know, an error while planning it) is kept, and its reason says
why: pruning never drops what it does not know.

:class:`Pruned` is the answer: a tuple of the kept configurations (what
``tilelang.autotune(configs=...)`` iterates, indexes and hashes into its cache
key) that also carries every :class:`ConfigVerdict`.

Pure: no I/O and no tilelang; never raises on bad code (a file that does not
parse, or holds no such kernel, gives every configuration kept with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import frontend, targets as targets_mod, values
from .model import Call, Const, Kernel, Module, Name, Settings

KEEP_RULES = ("fits", "all")
_PLAIN = (int, float, str, bool, type(None))


@dataclass(frozen=True)
class ConfigVerdict:
    """One configuration on one target: its numbers and whether it is kept."""

    config: Mapping[str, object]
    kept: bool
    reason: str
    arena_bytes: Optional[int] = None  # dynamic shared memory (None: not known)
    static_bytes: Optional[int] = None  # static ``__shared__`` bytes (mbarriers)
    limit: Optional[int] = None  # the target's opt-in limit less the margin
    blocks_per_sm: Optional[int] = None
    threads: Optional[int] = None  # per block, after lowering (producer warps included)

    @property
    def total_bytes(self) -> Optional[int]:
        if self.arena_bytes is None:
            return None
        return self.arena_bytes + (self.static_bytes or 0)

    @property
    def fits(self) -> Optional[bool]:
        """The shared memory is within ``limit`` (None when either is not known)."""
        total = self.total_bytes
        return None if total is None or self.limit is None else total <= self.limit

    def to_json(self) -> Dict[str, object]:
        return {"config": {k: _plain(v) for k, v in self.config.items()}, "kept": self.kept,
                "arena_bytes": self.arena_bytes, "static_bytes": self.static_bytes,
                "total_bytes": self.total_bytes, "limit": self.limit, "fits": self.fits,
                "blocks_per_sm": self.blocks_per_sm, "threads": self.threads,
                "reason": self.reason}


def _plain(v: object) -> object:
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


class Pruned(tuple):
    """The kept configurations, in their order (a tuple: ``tilelang.autotune``
    iterates, indexes and JSON-hashes it like the list it expects; it compares
    equal to a list of the same configurations), with every verdict.

    ``removed``: (configuration, reason) for each configuration left out;
    ``verdicts``: one :class:`ConfigVerdict` per configuration given, in order."""

    verdicts: Tuple[ConfigVerdict, ...]
    target: str

    def __new__(cls, verdicts: Iterable[ConfigVerdict], target: str) -> "Pruned":
        vs = tuple(verdicts)
        self = super().__new__(cls, tuple(v.config for v in vs if v.kept))
        object.__setattr__(self, "verdicts", vs)
        object.__setattr__(self, "target", target)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Pruned is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Pruned is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self) == other
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __reduce__(self) -> Tuple[type, Tuple[Tuple[ConfigVerdict, ...], str]]:
        # pickle and copy rebuild it from its verdicts (tuple's default would
        # call __new__ with the kept configurations only).
        return (Pruned, (self.verdicts, self.target))

    def __repr__(self) -> str:
        return (f"Pruned({len(self)} of {len(self.verdicts)} configs kept on {self.target}: "
                f"{list(self)!r})")

    @property
    def removed(self) -> Tuple[Tuple[Mapping[str, object], str], ...]:
        return tuple((v.config, v.reason) for v in self.verdicts if not v.kept)

    @property
    def kept(self) -> List[Mapping[str, object]]:
        """The kept configurations as a new list."""
        return list(self)


def config_label(cfg: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in cfg.items()
                     if k != "pass_configs") or "{}"


def _kept_all(cfgs: Sequence[Mapping[str, object]], why: str) -> List[ConfigVerdict]:
    return [ConfigVerdict(config=c, kept=True, reason=f"kept: {why}") for c in cfgs]


def check_options(target: str, keep: str, min_blocks_per_sm: Optional[int], margin: int
                  ) -> Optional[str]:
    """Why these options are not usable (None when they are)."""
    if targets_mod.get(target) is None:
        return (f"unknown target {target!r} (one of {', '.join(targets_mod.ALL_TARGETS)})")
    if keep not in KEEP_RULES:
        return f"keep={keep!r}: expected one of {', '.join(map(repr, KEEP_RULES))}"
    if min_blocks_per_sm is not None and (not isinstance(min_blocks_per_sm, int)
                                          or isinstance(min_blocks_per_sm, bool)
                                          or min_blocks_per_sm < 1):
        return f"min_blocks_per_sm={min_blocks_per_sm!r}: expected an integer >= 1 or None"
    if not isinstance(margin, int) or isinstance(margin, bool) or margin < 0:
        return f"margin={margin!r}: expected a number of bytes >= 0"
    return None


def judge_configs(module: Module, kernel: Kernel, cfgs: Sequence[Mapping[str, object]],
                  target: str, keep: str = "fits", min_blocks_per_sm: Optional[int] = None,
                  margin: int = 0, base_bindings: Sequence[Tuple[str, object]] = (),
                  overrides: Optional[Mapping[str, object]] = None) -> List[ConfigVerdict]:
    """One verdict per configuration of ``cfgs`` (in order) for ``kernel`` on
    ``target``.  Each configuration is an instance of the kernel: its values on
    top of ``base_bindings`` (:func:`default_bindings`); ``overrides`` (explicit
    bindings) win over both.  The options must have passed :func:`check_options`."""
    target = targets_mod.normalise(target)
    tinfo = targets_mod.get(target)
    budget = targets_mod.budget(target)
    if tinfo is None or tinfo.kind != "cuda" or budget is None:
        return _kept_all(cfgs, f"no CUDA shared-memory limit is modelled for {target}")
    limit = budget - margin
    from . import packing, sync_cuda
    packed = packing.pack_configs(module, kernel, [dict(c) for c in cfgs], target,
                                  base_bindings, dict(overrides or {}))
    out: List[ConfigVerdict] = []
    for cfg, cp in zip(cfgs, packed, strict=True):
        if isinstance(cp, str):
            out.append(ConfigVerdict(config=cfg, kept=True, limit=limit,
                                     reason=f"kept: the configuration could not be planned ({cp})"))
            continue
        pack = cp.packing
        try:
            threads = sync_cuda.threads(cp.view, cp.env, cp.warp_specialized)
        except Exception:  # noqa: BLE001 - an unknown thread count
            threads = None
        total = pack.total_bytes
        res = targets_mod.residency(target, total, threads)
        blocks = None if res is None else res.blocks
        kept, reason = _decide(pack.unknown, total, limit, margin, target, budget, keep,
                               min_blocks_per_sm, blocks)
        out.append(ConfigVerdict(config=cfg, kept=kept, reason=reason,
                                 arena_bytes=pack.arena_bytes, static_bytes=pack.static_bytes,
                                 limit=limit, blocks_per_sm=blocks, threads=threads))
    return out


def default_bindings(module: Module, kernel: Kernel,
                     overrides: Optional[Mapping[str, object]] = None,
                     bindings: Optional[Mapping[str, object]] = None
                     ) -> Tuple[Tuple[str, object], ...]:
    """The values of the file's default instance of ``kernel`` (its call site,
    defaults), with ``bindings`` (a caller's own arguments) on top."""
    try:
        insts = values.instances(module, kernel, dict(overrides or {}))
        base: Dict[str, object] = dict(insts[0].bindings) if insts else {}
    except Exception:  # noqa: BLE001 - the file's own values are only a default
        base = {}
    base.update(bindings or {})
    return tuple(base.items())


def _decide(unknown: Sequence[str], total: Optional[int], limit: int, margin: int, target: str,
            budget: int, keep: str, min_blocks: Optional[int], blocks: Optional[int]
            ) -> Tuple[bool, str]:
    """``kept`` and ``reason`` of one packed configuration."""
    if total is None:
        what = ", ".join(unknown) if unknown else "some shared buffer"
        return True, (f"kept: the arena is not known (the size of {what} depends on a "
                      "value tilelint does not know)")
    where = f"{target}'s limit of {budget} B" + (f" less the {margin} B margin" if margin else "")
    over = total > limit
    if over and keep == "fits":
        return False, f"{total} B of shared memory per block > {where}"
    low = min_blocks is not None and blocks is not None and blocks < min_blocks
    if low and keep == "fits":
        return False, (f"at most {blocks} block(s) per SM by shared memory ({total} B) and "
                       f"threads, fewer than min_blocks_per_sm={min_blocks}")
    text = (f"{total} B > {where}" if over else f"{total} B <= {where}")
    if min_blocks is not None:
        text += ("; blocks per SM not known (threads not known)" if blocks is None
                 else f"; at most {blocks} block(s) per SM")
    return True, ("kept (keep='all'): " if keep == "all" else "fits: ") + text


def find_kernel(module: Module, name: str, line: Optional[int] = None) -> Optional[Kernel]:
    """The kernel whose factory (or jit function, or prim_func) is called
    ``name``; with several, the one whose definition starts nearest at or after
    ``line`` (1-based: the first decorator's line)."""
    hits = [k for k in module.kernels if name in (k.factory, k.name)]
    if len(hits) <= 1 or line is None:
        return hits[0] if hits else None

    def start(k: Kernel) -> int:
        return (k.factory_span or k.span).line

    after = [k for k in hits if start(k) >= line]
    return min(after, key=start) if after else hits[-1]


def prune_source(source: str, name: str, cfgs: Sequence[Mapping[str, object]], target: str,
                 keep: str = "fits", min_blocks_per_sm: Optional[int] = None, margin: int = 0,
                 bindings: Optional[Mapping[str, object]] = None,
                 line: Optional[int] = None, args: Sequence[object] = ()) -> Pruned:
    """:func:`judge_configs` for the kernel ``name`` of a file's text (see
    :func:`find_kernel` for ``line``).  ``args``: the kernel call's positional
    arguments, bound to its parameters like ``bindings``; only plain values
    (numbers, strings, booleans, None) are used.  The options must have passed
    :func:`check_options`."""
    target = targets_mod.normalise(target)
    try:
        module = frontend.parse_module(source)
    except Exception as exc:  # noqa: BLE001 - the API keeps what it cannot read
        return Pruned(_kept_all(cfgs, f"the source could not be read ({exc})"), target)
    kernel = find_kernel(module, name, line)
    if kernel is None:
        return Pruned(_kept_all(cfgs, f"no TileLang kernel named {name!r} in its source"),
                      target)
    try:
        names = [p.name for p in values.kernel_params(kernel)]
        given = {n: v for n, v in zip(names, args, strict=False) if isinstance(v, _PLAIN)}
        given.update({k: v for k, v in (bindings or {}).items() if isinstance(v, _PLAIN)})
        base = default_bindings(module, kernel, None, given)
        return Pruned(judge_configs(module, kernel, cfgs, target, keep, min_blocks_per_sm,
                                    margin, base), target)
    except Exception as exc:  # noqa: BLE001 - a bug of ours keeps everything
        return Pruned(_kept_all(cfgs, f"tilelint could not analyse {name!r} "
                                      f"({type(exc).__name__}: {exc})"), target)


def wrapped_kernels(module: Module, helper: str) -> List[str]:
    """The functions whose ``@…autotune(configs=…)`` decorator names the
    configuration function ``helper``: ``configs=helper``, ``configs=helper(…)``
    or ``configs=…autotune_configs(helper, …)``."""

    def names_helper(e: object) -> bool:
        if isinstance(e, Name):
            return e.id == helper
        if isinstance(e, Call):
            if e.func == helper:
                return True
            return e.func.split(".")[-1] == "autotune_configs" and bool(e.args) \
                and names_helper(e.args[0])
        return False

    out = []
    for fdef in module.defs:
        for d in fdef.decorators:
            if isinstance(d, Call) and d.func.split(".")[-1] == "autotune" \
                    and names_helper(dict(d.kwargs).get("configs")):
                out.append(fdef.name)
    return out


@dataclass(frozen=True)
class KernelConfigs:
    """A kernel's own autotune list judged on one target (``explain --configs``)."""

    kernel: str
    line: int  # the factory's (or jit function's) def line
    verdicts: Tuple[ConfigVerdict, ...]
    # ``configs=tilelint.autotune_configs(get_configs, ...)`` as written: the
    # wrapper that prunes this list at run time (None for a plain list)
    wrapped_by: Optional[str] = None


def _wrapper_call(module: Module, kernel: Kernel) -> Optional[Call]:
    """The ``…autotune_configs(helper, …)`` call given as ``configs=`` to the
    kernel's ``@…autotune`` decorator, if that is what it is given."""
    for fdef in module.defs:
        if fdef.name != (kernel.factory or kernel.name):
            continue
        for d in fdef.decorators:
            if isinstance(d, Call) and d.func.split(".")[-1] == "autotune":
                cfg = dict(d.kwargs).get("configs")
                if isinstance(cfg, Call) and cfg.func.split(".")[-1] == "autotune_configs":
                    return cfg
    return None


def _call_text(call: Call) -> str:
    def text(e: object) -> str:
        if isinstance(e, Name):
            return e.id
        return repr(e.value) if isinstance(e, Const) else "…"

    parts = [text(a) for a in call.args] + [f"{k}={text(v)}" for k, v in call.kwargs]
    return f"{call.func}({', '.join(parts)})"


def _wrapper_options(call: Call, target: str) -> Tuple[str, Optional[int], int]:
    """The wrapper's ``keep``, ``min_blocks_per_sm`` and ``margin`` where they are
    literals and valid (the defaults otherwise)."""
    kw = {k: v.value for k, v in call.kwargs if isinstance(v, Const)}
    keep, min_blocks, margin = kw.get("keep", "fits"), kw.get("min_blocks_per_sm"), \
        kw.get("margin", 0)
    if isinstance(keep, str) and isinstance(margin, int) \
            and (min_blocks is None or isinstance(min_blocks, int)) \
            and check_options(target, keep, min_blocks, margin) is None:
        return keep, min_blocks, margin
    return "fits", None, 0


def file_configs(module: Module, settings: Settings) -> List[KernelConfigs]:
    """Every kernel of the file with an autotune configuration list of its own,
    judged on ``settings.target`` with ``keep="fits"``.  A list wrapped in
    ``tilelint.autotune_configs(get_configs, ...)`` is judged with the wrapper's
    literal ``keep``, ``min_blocks_per_sm`` and ``margin``, and its table says
    that the wrapper removes what it marks removed before the autotuner sees it."""
    from . import packing
    from .pipeline import kernel_overrides
    target = targets_mod.normalise(settings.target)
    out: List[KernelConfigs] = []
    for kernel in module.kernels:
        try:
            overrides = kernel_overrides(kernel, settings)
            base = default_bindings(module, kernel, overrides)
            cfgs = packing.autotune_configs(module, kernel, base)
            wrapper = None if cfgs else _wrapper_call(module, kernel)
            if wrapper is not None:
                cfgs = packing.autotune_configs(module, kernel, base, through_wrapper=True)
            if not cfgs:
                continue
            keep, min_blocks, margin = ("fits", None, 0) if wrapper is None else \
                _wrapper_options(wrapper, target)
            verdicts = judge_configs(module, kernel, cfgs, target, keep, min_blocks, margin,
                                     base_bindings=base, overrides=overrides)
        except Exception:  # noqa: BLE001 - a kernel we cannot read has no table
            continue
        line = (kernel.factory_span or kernel.name_span).line
        out.append(KernelConfigs(kernel.factory or kernel.name, line, tuple(verdicts),
                                 None if wrapper is None else _call_text(wrapper)))
    return out
