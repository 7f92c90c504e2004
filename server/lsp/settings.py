"""Server configuration: ``[tool.tilelint]`` in the nearest pyproject.toml,
overridden by ``initializationOptions``, overridden by the client's
``workspace/configuration`` section ``tilelint``.

Keys (camelCase or snake_case or kebab-case all accepted):
``target`` (``sm_80``…), ``select`` / ``ignore`` (code prefixes), ``bindings``
(``{name: value}``; a table value is per kernel or factory:
``{gemm = {block_K = 32}}``), ``binding`` (``"first"``: analyse the first
instantiation of each kernel, ``"all"``: every one), ``inlayHints`` (bool, or
``{stages = bool, buffers = bool}``), ``diagnostics`` (``auto`` | ``push`` |
``pull`` | ``both``: how diagnostics reach the client; ``auto`` pushes unless
the client pulls).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from tilelint.analysis.model import Settings

log = logging.getLogger(__name__)

DEFAULTS: Dict[str, Any] = {
    "target": "sm_80",
    "select": [],
    "ignore": [],
    "bindings": {},
    "binding": "first",
    "inlayHints": True,
    "diagnostics": "auto",
}

_ALIASES = {
    "inlay_hints": "inlayHints", "inlay-hints": "inlayHints", "inlayhints": "inlayHints",
    "all_bindings": "binding", "all-bindings": "binding", "allBindings": "binding",
}


def normalise_keys(table: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in table.items():
        k = _ALIASES.get(key, key)
        if k == "binding" and isinstance(value, bool):
            value = "all" if value else "first"
        out[k] = value
    return out


def merge(*layers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Later layers win; ``bindings`` tables are merged key by key."""
    out: Dict[str, Any] = dict(DEFAULTS)
    out["bindings"] = {}
    for layer in layers:
        if not isinstance(layer, Mapping):
            continue
        for key, value in normalise_keys(layer).items():
            if value is None:
                continue
            if key == "bindings" and isinstance(value, Mapping):
                merged = dict(out["bindings"])
                merged.update(value)
                out["bindings"] = merged
            else:
                out[key] = value
    return out


def _frozen(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return tuple((str(k), _frozen(v)) for k, v in value.items())
    return value


def _codes(value: Any) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(str(v).strip().upper() for v in value if str(v).strip())


def to_settings(options: Mapping[str, Any]) -> "Settings":
    from .lazy import model
    bindings = []
    kernel_bindings = []
    raw = options.get("bindings") or {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            if isinstance(value, Mapping):
                kernel_bindings.append((str(name), tuple(
                    (str(k), _frozen(v)) for k, v in value.items())))
            else:
                bindings.append((str(name), _frozen(value)))
    target = options.get("target") or DEFAULTS["target"]
    return model.Settings(
        target=str(target),
        bindings=tuple(bindings),
        kernel_bindings=tuple(kernel_bindings),
        select=_codes(options.get("select")),
        ignore=_codes(options.get("ignore")),
        all_bindings=str(options.get("binding", "first")).lower() == "all",
    )


def inlay_enabled(options: Mapping[str, Any], kind: str) -> bool:
    value = options.get("inlayHints", True)
    if isinstance(value, Mapping):
        v = value.get(kind, value.get("enabled", True))
        return bool(v)
    return bool(value)


# --------------------------------------------------------------------------
# pyproject.toml
# --------------------------------------------------------------------------


def _load_toml(path: str) -> Dict[str, Any]:
    try:
        import tomllib  # type: ignore[import-not-found]
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            log.warning("no TOML parser available; ignoring %s", path)
            return {}
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def _table_from_config_module(path: str) -> Optional[Dict[str, Any]]:
    """Use the CLI's ``server/config.py`` when it provides a loader."""
    try:
        from tilelint.server import config as cfg  # type: ignore
    except Exception:
        return None
    for name in ("load_pyproject_table", "read_pyproject", "load_pyproject"):
        fn = getattr(cfg, name, None)
        if callable(fn):
            try:
                table = fn(path)
            except Exception:
                log.exception("server.config.%s(%s) failed", name, path)
                return None
            if isinstance(table, Mapping):
                return dict(table)
            if hasattr(table, "__dict__"):
                return {k: v for k, v in vars(table).items() if not k.startswith("_")}
    return None


class PyprojectCache:
    """Nearest ``pyproject.toml`` with a ``[tool.tilelint]`` table, per directory."""

    def __init__(self) -> None:
        self._dirs: Dict[str, Tuple[Optional[str], Dict[str, Any]]] = {}

    def clear(self) -> None:
        self._dirs.clear()

    def lookup(self, file_path: Optional[str]) -> Tuple[Optional[str], Dict[str, Any]]:
        if not file_path:
            return None, {}
        directory = os.path.dirname(os.path.abspath(file_path))
        hit = self._dirs.get(directory)
        if hit is not None:
            return hit
        found: Tuple[Optional[str], Dict[str, Any]] = (None, {})
        cur = directory
        while True:
            candidate = os.path.join(cur, "pyproject.toml")
            if os.path.isfile(candidate):
                table = self.read(candidate)
                if table is not None:
                    found = (candidate, table)
                    break
            parent = os.path.dirname(cur)
            if parent == cur:
                break
            cur = parent
        self._dirs[directory] = found
        return found

    @staticmethod
    def read(path: str) -> Optional[Dict[str, Any]]:
        """The ``[tool.tilelint]`` table of ``path`` or None when it has none."""
        table = _table_from_config_module(path)
        if table is not None:
            return table
        try:
            data = _load_toml(path)
        except Exception as exc:
            log.warning("cannot read %s: %s", path, exc)
            return None
        tool = data.get("tool", {}) if isinstance(data, dict) else {}
        table = tool.get("tilelint") if isinstance(tool, dict) else None
        return dict(table) if isinstance(table, dict) else None
