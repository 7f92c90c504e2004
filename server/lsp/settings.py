"""The editor's settings: the client's JSON into the plain dict that
``server/config.py`` lays over ``[tool.tilelint]``, and the keys only the
language server has.

Layers, later wins: ``[tool.tilelint]`` of the document's nearest
pyproject.toml (loaded by ``server/config.py``, every key as in ``tilelint
check``: ``exclude``, ``per-file-ignores``, ``per-file-targets``,
``extend-select`` included), then ``initializationOptions``, then the
client's ``workspace/configuration`` section ``tilelint``.  ``merge`` joins
the two editor layers; ``config_keys`` names them as in ``[tool.tilelint]``;
``config.overlay`` applies them like command-line options.

Editor keys (camelCase, snake_case or kebab-case):
``target`` / ``targets``, ``select``, ``extendSelect``, ``ignore`` (code
prefixes), ``bindings`` (``{name: value}``; a table value is per kernel or
factory: ``{gemm = {block_K = 32}}``), ``binding``, ``inlayHints``,
``compiler.verify``: see ``config.overlay`` for how each applies.  Only the
language server has:

- ``binding``: ``"first"`` (analyse the first instantiation of each kernel),
  ``"all"`` (every one, like ``all-bindings = true``), or one instantiation
  by its label (``values.instance_labels``, e.g. ``"num_stages=4,
  block_K=64"``): a string for every kernel that has an instance with that
  label, a table ``{kernel or factory name: label}`` per kernel;
- ``inlayHints``: a bool (like ``inlay-hints``) or ``{stages = bool, buffers = bool}``;
- ``diagnostics``: ``auto`` | ``push`` | ``pull`` | ``both``, how diagnostics
  reach the client (``auto`` pushes unless the client pulls);
- ``compiler.verify``: ``"off"`` | ``"onSave"`` (``verify = true`` in
  ``[tool.tilelint]`` means ``"onSave"``): lower the file with the real
  tilelang on every save (in a worker process) and merge its TL910/TL911;
  refused when the client says the workspace is untrusted
  (``initializationOptions`` ``trusted: false``).

The target of a document is ``config.Config.targets_for``'s first (its
``# tilelint: target`` directive, the first matching ``per-file-targets``
glob, an architecture its code names, the ``target`` setting of any layer,
sm_80).  A document its configuration's ``exclude`` covers gets no
diagnostics.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.model import Settings
    from tilelint.server.config import Config, ConfigCache, ConfigError

log = logging.getLogger(__name__)

FIRST, ALL = "first", "all"
VERIFY_OFF, VERIFY_ON_SAVE = "off", "onSave"

# Editor spellings of the keys (after ``normalise_keys``).
_ALIASES = {
    "inlay_hints": "inlayHints", "inlay-hints": "inlayHints", "inlayhints": "inlayHints",
    "all_bindings": "binding", "all-bindings": "binding", "allBindings": "binding",
    "extend_select": "extendSelect", "extend-select": "extendSelect",
    "verify": "compiler.verify", "compilerVerify": "compiler.verify",
    "compiler_verify": "compiler.verify",
    "time_budget": "timeBudget", "time-budget": "timeBudget",
}


def normalise_keys(table: Mapping[str, Any]) -> Dict[str, Any]:
    """One editor layer with the keys spelt one way; ``{"compiler": {"verify":
    …}}`` (VS Code nests dotted settings) becomes ``compiler.verify``."""
    out: Dict[str, Any] = {}
    for key, value in table.items():
        if not isinstance(key, str):
            continue
        k = _ALIASES.get(key, key)
        if k == "binding" and isinstance(value, bool):
            value = ALL if value else FIRST
        if k == "compiler":
            if isinstance(value, Mapping):
                for sub, v in value.items():
                    if isinstance(sub, str):
                        out["compiler." + sub] = v
            continue
        out[k] = value
    return out


def merge(*layers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The editor layers (``initializationOptions``, then
    ``workspace/configuration``) as one dict; later layers win, ``bindings``
    tables are merged key by key, None and an empty ``target`` mean "not set"."""
    out: Dict[str, Any] = {}
    for layer in layers:
        if not isinstance(layer, Mapping):
            continue
        for key, value in normalise_keys(layer).items():
            if value is None or (key in ("target", "targets") and value in ("", [])):
                continue
            if key == "bindings" and isinstance(value, Mapping):
                merged = dict(out.get("bindings") or {})
                merged.update(value)
                out["bindings"] = merged
            else:
                out[key] = value
    return out


def _verify_value(value: Any) -> Optional[bool]:
    """``compiler.verify`` as ``[tool.tilelint]``'s ``verify`` (None: not understood)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower().replace("-", "").replace("_", "")
        if v in ("onsave", "save", "on", "true"):
            return True
        if v in ("off", "false", "never", ""):
            return False
    return None


def config_keys(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The merged editor settings named as in ``[tool.tilelint]`` (the input
    of ``config.overlay``).  Only the editor's own vocabulary is translated
    here (``binding``, ``compiler.verify``, ``inlayHints``); the values are
    checked by ``config.overlay``."""
    out: Dict[str, Any] = {}
    for key in ("target", "targets", "select", "ignore", "bindings"):
        if key in options:
            out[key] = options[key]
    if "extendSelect" in options:
        out["extend-select"] = options["extendSelect"]
    if "binding" in options:
        b = options["binding"]
        out["all-bindings"] = isinstance(b, str) and b.strip().lower() == ALL
    if isinstance(options.get("inlayHints"), bool):
        out["inlay-hints"] = options["inlayHints"]
    if "timeBudget" in options:
        out["time-budget"] = options["timeBudget"]
    if "compiler.verify" in options:
        raw = options["compiler.verify"]
        v = _verify_value(raw)
        out["verify"] = raw if v is None else v  # not understood: overlay reports it
    return out


def document_config(base: "Config", options: Mapping[str, Any],
                    warn: Optional[Callable[[str], None]] = None) -> "Config":
    """A document's configuration: its pyproject's, with the editor's settings over it."""
    from tilelint.server.config import overlay
    return overlay(base, config_keys(options), warn)


def _document_text(doc: Any) -> Optional[str]:
    """The text of an open document (its ``lines``) or of a file path."""
    if not isinstance(doc, str):
        return "".join(doc.lines)
    try:
        with open(doc, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _document_path(doc: Any) -> Optional[str]:
    """The path of a document, or ``doc`` itself when it is a path (None: none)."""
    if doc is None or isinstance(doc, str):
        return doc or None
    return doc.path or None


def settings_of(cfg: "Config", doc: Any = None) -> "Settings":
    """The analysis settings of ``doc`` (a Document or a path; None: the
    workspace's) under ``cfg``: its first target, per-file ignores."""
    path = _document_path(doc)
    if path is None:
        return cfg.settings_for(None)
    try:
        return cfg.settings_for(path, source=_document_text(doc), strict=False)
    except Exception:  # a setting must never take the server down
        log.exception("resolving the settings of %s failed", path)
        return cfg.settings_for(None)


def to_settings(options: Mapping[str, Any], doc: Any = None,
                base: Optional["Config"] = None) -> "Settings":
    """Settings for a document from merged editor settings over ``base``
    (default: no pyproject.toml)."""
    if base is None:
        from tilelint.server.config import Config
        base = Config()
    return settings_of(document_config(base, options, log.warning), doc)


def view(cfg: "Config", options: Mapping[str, Any], excluded: bool = False) -> Dict[str, Any]:
    """The editor settings with what the configuration decides filled in, for
    the server's own features (``verify_mode``, ``inlay_enabled``,
    ``binding_selection``, ``diagnostics``)."""
    out = dict(options)
    out["compiler.verify"] = VERIFY_ON_SAVE if cfg.verify and not excluded else VERIFY_OFF
    if not isinstance(options.get("inlayHints"), Mapping):
        out["inlayHints"] = cfg.inlay_hints
    if "binding" not in options:
        out["binding"] = ALL if cfg.all_bindings else FIRST
    return out


def binding_selection(options: Mapping[str, Any]) -> Tuple[Tuple[str, str], ...]:
    """The instance labels the ``binding`` setting picks: ``(("*", label),)``
    for every kernel, ``((name, label), ...)`` per kernel or factory; empty
    for ``"first"`` / ``"all"``."""
    value = options.get("binding", FIRST)
    if isinstance(value, str):
        v = value.strip()
        if not v or v.lower() in (FIRST, ALL):
            return ()
        return (("*", v),)
    if isinstance(value, Mapping):
        out = []
        for name, label in value.items():
            if isinstance(label, str) and label.strip() and label.strip().lower() != FIRST:
                out.append((str(name), label.strip()))
        return tuple(out)
    return ()


def verify_mode(options: Mapping[str, Any]) -> str:
    """``"onSave"`` or ``"off"``."""
    value = options.get("compiler.verify", VERIFY_OFF)
    v = _verify_value(value) if value is not None else False
    if v is None:
        log.warning("tilelint.compiler.verify: unknown value %r, verification stays off", value)
    return VERIFY_ON_SAVE if v else VERIFY_OFF


def trusted(*layers: Optional[Mapping[str, Any]]) -> bool:
    """False when any layer says the workspace is untrusted (``trusted: false``)."""
    for layer in layers:
        if isinstance(layer, Mapping):
            for key in ("trusted", "workspaceTrusted", "isTrusted"):
                if key in layer and layer[key] is not None and not layer[key]:
                    return False
    return True


def inlay_enabled(options: Mapping[str, Any], kind: str) -> bool:
    value = options.get("inlayHints", True)
    if isinstance(value, Mapping):
        v = value.get(kind, value.get("enabled", True))
        return bool(v)
    return bool(value)


class Configs:
    """The server's ``config.ConfigCache``, made on first use (importing
    ``server/config.py`` loads the analysis, which the server does after
    answering ``initialize``).  A pyproject.toml that does not load is
    reported to ``on_error`` and gives the defaults."""

    def __init__(self, on_error: Callable[["ConfigError"], None]) -> None:
        self._on_error = on_error
        self._cache: Optional["ConfigCache"] = None

    def clear(self) -> None:
        if self._cache is not None:
            self._cache.clear()

    def for_path(self, path: Optional[str]) -> "Config":
        from tilelint.server.config import Config, ConfigCache
        if not path:
            return Config()
        if self._cache is None:
            self._cache = ConfigCache(on_error=self._on_error)
        return self._cache.for_path(path)
