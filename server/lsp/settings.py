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

``binding`` also picks one instantiation by its label (the labels
``values.instance_labels`` gives, e.g. ``"num_stages=4, block_K=64"``): a
string applies to every kernel that has an instance with that label, a table
``{kernel or factory name: label}`` per kernel.

The target of a document follows ``server/config.py`` (``resolve_targets``):
its ``# tilelint: target`` directive, else the first matching
``per-file-targets`` glob of its pyproject.toml, else an architecture its code
names (``target="cuda -arch=sm_90"``), else the ``target`` setting (any layer:
pyproject, ``initializationOptions``, ``workspace/configuration``), else
sm_80.  Of several targets the server analyses the first.

``compiler.verify`` (``"off"`` | ``"onSave"``; ``[tool.tilelint] verify =
true`` means ``"onSave"``): lower the file with the real tilelang on every
save (in a worker process) and merge its TL910/TL911.  Refused when the
client says the workspace is untrusted (``initializationOptions`` ``trusted:
false``).
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
    "compiler.verify": "off",
}

FIRST, ALL = "first", "all"
VERIFY_OFF, VERIFY_ON_SAVE = "off", "onSave"

_ALIASES = {
    "inlay_hints": "inlayHints", "inlay-hints": "inlayHints", "inlayhints": "inlayHints",
    "all_bindings": "binding", "all-bindings": "binding", "allBindings": "binding",
}


def normalise_keys(table: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in table.items():
        if not isinstance(key, str):
            continue
        k = _ALIASES.get(key, key)
        if k == "binding" and isinstance(value, bool):
            value = ALL if value else FIRST
        if k == "compiler":
            # ``{"compiler": {"verify": "onSave"}}`` (VS Code nests dotted settings)
            if isinstance(value, Mapping):
                for sub, v in value.items():
                    if isinstance(sub, str):
                        out["compiler." + sub] = v
            continue
        if k == "targets":
            # An editor shows one target: the first of the project's list.
            if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
                out.setdefault("target", value[0])
            continue
        if k in ("verify", "compilerVerify", "compiler_verify"):
            k = "compiler.verify"
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
            if value is None or (key == "target" and value == ""):
                continue  # an empty target setting means "not set"
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


# The pyproject.toml a table came from (``PyprojectCache``), so that
# ``per-file-targets`` globs are relative to it.
PYPROJECT_KEY = "__pyproject__"


def _document_text(doc: Any) -> Optional[str]:
    """The text of an open document (its ``lines``) or of a file path."""
    lines = getattr(doc, "lines", None)
    if isinstance(lines, list):
        return "".join(lines)
    path = doc if isinstance(doc, str) else None
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return None
    return None


def document_target(options: Mapping[str, Any], doc: Any = None) -> str:
    """The target the server analyses ``doc`` (a Document or a path) for."""
    configured = options.get("target") or DEFAULTS["target"]
    if doc is None:
        return str(configured)
    path = getattr(doc, "path", None) or (doc if isinstance(doc, str) else None)
    try:
        from tilelint.server import config as cfg_mod
        table = options.get("per-file-targets") or options.get("per_file_targets") or {}
        try:
            pft = cfg_mod.check_per_file_targets(table) if table else ()
        except cfg_mod.ConfigError as exc:
            log.warning("per-file-targets ignored: %s", exc)
            pft = ()
        pyproject = options.get(PYPROJECT_KEY)
        base = os.path.dirname(pyproject) if isinstance(pyproject, str) else (
            os.path.dirname(path) if path else None)
        targets = cfg_mod.resolve_targets(
            path or "<document>", _document_text(doc), per_file_targets=pft, base=base,
            configured=(str(configured),), strict=False)
        return targets[0]
    except Exception:  # a setting must never take the server down
        log.exception("resolving the target of %s failed", path)
        return str(configured)


def to_settings(options: Mapping[str, Any], doc: Any = None) -> "Settings":
    """Settings for a document (``doc``: a Document or a path; None: the
    workspace defaults)."""
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
    target = document_target(options, doc)
    return model.Settings(
        target=str(target),
        bindings=tuple(bindings),
        kernel_bindings=tuple(kernel_bindings),
        select=_codes(options.get("select")),
        ignore=_codes(options.get("ignore")),
        all_bindings=isinstance(options.get("binding"), str)
        and str(options.get("binding")).strip().lower() == ALL,
    )


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


def selected_label(selection: Tuple[Tuple[str, str], ...], kernel_name: str,
                   factory: Optional[str]) -> Optional[str]:
    """The label ``selection`` picks for one kernel (a per-kernel entry beats ``*``)."""
    hit = None
    for name, label in selection:
        if name in (kernel_name, factory):
            return label
        if name == "*":
            hit = label
    return hit


def verify_mode(options: Mapping[str, Any]) -> str:
    """``"onSave"`` or ``"off"``."""
    value = options.get("compiler.verify", VERIFY_OFF)
    if value is True:
        return VERIFY_ON_SAVE
    if isinstance(value, str) and value.strip().lower().replace("-", "").replace("_", "") in (
            "onsave", "save", "on", "true"):
        return VERIFY_ON_SAVE
    if value not in (None, False, VERIFY_OFF) and not (
            isinstance(value, str) and value.strip().lower() in ("off", "false", "never", "")):
        log.warning("tilelint.compiler.verify: unknown value %r, verification stays off", value)
    return VERIFY_OFF


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
            return {**table, PYPROJECT_KEY: os.path.abspath(path)}
        try:
            data = _load_toml(path)
        except Exception as exc:
            log.warning("cannot read %s: %s", path, exc)
            return None
        tool = data.get("tool", {}) if isinstance(data, dict) else {}
        table = tool.get("tilelint") if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            return None
        out = dict(table)
        out[PYPROJECT_KEY] = os.path.abspath(path)
        return out
