"""Configuration: ``[tool.tilelint]`` in the nearest ``pyproject.toml``.

The CLI and the language server share this module.  ``find_config(path)``
walks up from a file or directory to the nearest ``pyproject.toml`` that has a
``[tool.tilelint]`` table (like ruff, a ``pyproject.toml`` without the table is
passed over), ``load_config(pyproject)`` reads and validates it into a frozen
``Config``, and ``Config.settings_for(file, target)`` gives the
``analysis.Settings`` for one file and one target.

Recognised keys (kebab-case; the snake_case spelling is accepted too)::

    [tool.tilelint]
    target = "sm_80"               # or: targets = ["sm_80", "sm_90"]
    select = ["TL1"]               # code prefixes; empty = the default set
    ignore = ["TL002"]
    exclude = ["generated/", "legacy_*.py"]   # gitignore-style, relative to this file
    per-file-ignores = { "tests/**" = ["TL002"], "bench_*.py" = ["TL3"] }
    per-file-targets = { "hopper/**" = ["sm_90"], "blackwell/*.py" = ["sm_100"] }
    inlay-hints = true
    verify = false                 # cross-check with the real compiler (server only)
    all-bindings = false           # analyse every call site of a kernel factory
    time-budget = 60               # seconds per file, then TL005 (0: no limit)

    [tool.tilelint.bindings]       # name -> value, for every kernel
    block_K = 32

    [tool.tilelint.bindings.matmul]   # only for kernel (or factory) ``matmul``
    num_stages = 3

Anything else is an error that names the key (``ConfigError``).

Which targets a file is analysed for (``Config.targets_for``), first that applies:

1. ``--target``/``--targets`` on the command line;
2. ``# tilelint: target sm_90 [sm_100 ...]`` in the file's first comment block;
3. the first ``per-file-targets`` entry whose glob matches the file;
4. the architectures the file's code names (``target="cuda -arch=sm_90"``,
   ``{"kind": "cuda", "arch": "sm_100"}``), else those its ops require
   (``T.alloc_tmem`` → sm_100, ``T.wgmma_gemm`` → sm_90;
   ``tilelint.analysis.directives``);
5. ``target``/``targets`` of the configuration;
6. sm_80.

The language server follows the same order from 2 on; its ``target`` setting
counts as configuration (5), and it analyses the first of several targets.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from tilelint.analysis import Settings, directives as directives_mod, targets as targets_mod

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as _toml

DEFAULT_TARGET = targets_mod.DEFAULT_TARGET

# Directories never descended into when a directory is checked.
DEFAULT_EXCLUDE: Tuple[str, ...] = (
    ".git/", ".hg/", ".svn/", ".bzr/", ".venv/", "venv/", ".tox/", ".nox/", "__pycache__/",
    ".mypy_cache/", ".pytest_cache/", ".ruff_cache/", "node_modules/", "build/", "dist/",
    "site-packages/", ".eggs/", "*.egg-info/", ".ipynb_checkpoints/",
)

_CODE_RX = re.compile(r"^[A-Z]+[0-9]*$")


class ConfigError(Exception):
    """An invalid configuration; the message names the file and the key."""


class DirectiveError(ConfigError):
    """A bad ``# tilelint:`` directive in a checked file."""

    def __init__(self, path: str, line: int, detail: str) -> None:
        super().__init__(f"{path}:{line}: {detail}")
        self.path, self.line, self.detail = path, line, detail

    @property
    def short(self) -> str:
        """The message without the file name (for a per-file report)."""
        return f"line {self.line}: {self.detail}"


# --------------------------------------------------------------------------
# gitignore-style patterns (used for ``exclude``, ``.gitignore`` files and
# ``per-file-ignores``)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """One gitignore-style pattern, relative to ``base`` (a directory)."""

    text: str
    base: str  # absolute, '/'-separated, no trailing slash
    regex: "re.Pattern[str]"
    negated: bool = False
    dir_only: bool = False

    def matches(self, abspath: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        base = self.base
        if abspath == base:
            return False
        prefix = base + "/" if base != "/" else "/"
        if not abspath.startswith(prefix):
            return False
        rel = abspath[len(prefix):]
        return self.regex.fullmatch(rel) is not None


def _glob_to_regex(glob: str) -> str:
    """Translate the body of a gitignore pattern (no leading ``!``, no trailing
    ``/``) to a regex over a '/'-separated relative path."""
    anchored = "/" in glob
    if glob.startswith("/"):
        glob = glob[1:]
    out: List[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                before_ok = i == 0 or glob[i - 1] == "/"
                after = glob[i + 2:i + 3]
                if before_ok and after == "/":
                    out.append("(?:.*/)?")  # '**/' : zero or more directories
                    i += 3
                    continue
                if before_ok and i + 2 == n:
                    out.append(".*")  # trailing '/**' : everything inside
                    i += 2
                    continue
                out.append("[^/]*")  # '**' elsewhere acts like '*'
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "^", "]") else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = glob[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    body = "".join(out)
    if not anchored:
        body = "(?:.*/)?" + body  # a bare name matches at any depth
    # A match of a directory covers what is inside it (for explicit paths).
    return body + "(?:/.*)?"


def _posix(path: os.PathLike | str) -> str:
    p = os.path.abspath(os.fspath(path))
    return p.replace(os.sep, "/") if os.sep != "/" else p


def compile_pattern(text: str, base: os.PathLike | str) -> Optional[Pattern]:
    """A gitignore line → Pattern (None for blank lines and comments)."""
    return _compile_pattern(text, _posix(base))


@functools.lru_cache(maxsize=1024)
def _compile_pattern(text: str, base: str) -> Optional[Pattern]:
    """:func:`compile_pattern` with ``base`` absolute: the language server asks
    for the same patterns on every edit."""
    line = text.rstrip("\n").rstrip("\r")
    # Trailing spaces are ignored unless escaped.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negated = False
    if line.startswith("!"):
        negated, line = True, line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    try:
        rx = re.compile(_glob_to_regex(line))
    except re.error:
        return None
    return Pattern(text, base, rx, negated, dir_only)


class Matcher:
    """An ordered list of patterns; the last one that matches decides."""

    def __init__(self, patterns: Iterable[Pattern] = ()) -> None:
        self.patterns: List[Pattern] = list(patterns)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def extend(self, patterns: Iterable[Pattern]) -> "Matcher":
        return Matcher(self.patterns + list(patterns))

    def match_one(self, abspath: str, is_dir: bool) -> Optional[bool]:
        """True: ignored, False: re-included by a ``!`` pattern, None: no pattern."""
        verdict: Optional[bool] = None
        for p in self.patterns:
            if p.matches(abspath, is_dir):
                verdict = not p.negated
        return verdict

    def ignored(self, path: os.PathLike | str, is_dir: Optional[bool] = None) -> bool:
        """Whether ``path`` or one of its parent directories is ignored.

        As in git, once a directory is ignored nothing inside it can be
        re-included."""
        ap = _posix(path)
        if is_dir is None:
            is_dir = os.path.isdir(ap)
        parts = ap.split("/")
        # Check each ancestor directory first (outermost first).
        for k in range(2, len(parts)):
            anc = "/".join(parts[:k])
            if self.match_one(anc, True):
                return True
        return bool(self.match_one(ap, is_dir))


def read_ignore_file(path: Path) -> List[Pattern]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        p = compile_pattern(line, path.parent)
        if p is not None:
            out.append(p)
    return out


# --------------------------------------------------------------------------
# The configuration
# --------------------------------------------------------------------------

Pairs = Tuple[Tuple[str, object], ...]


@dataclass(frozen=True)
class Config:
    """The validated ``[tool.tilelint]`` table (or the defaults)."""

    path: Optional[Path] = None  # the pyproject.toml it came from
    root: Optional[Path] = None  # its directory: where relative patterns start
    targets: Tuple[str, ...] = (DEFAULT_TARGET,)
    select: Tuple[str, ...] = ()  # empty: the default set
    extend_select: Tuple[str, ...] = ()  # added to ``select`` (or to the default set)
    ignore: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    per_file_targets: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    # Where ``targets`` came from: "default", "config" (target/targets in the
    # file) or "cli" (--target/--targets); see ``targets_for``.
    targets_origin: str = "default"
    exclude: Tuple[str, ...] = ()
    bindings: Pairs = ()
    kernel_bindings: Tuple[Tuple[str, Pairs], ...] = ()
    inlay_hints: bool = True
    verify: bool = False
    all_bindings: bool = False
    time_budget: float = 60.0  # seconds per file (0: no limit)

    @property
    def target(self) -> str:
        return self.targets[0]

    # -- derived -----------------------------------------------------------

    def _base(self) -> Path:
        return self.root if self.root is not None else Path.cwd()

    def exclude_matcher(self) -> Matcher:
        base = self._base()
        pats = [compile_pattern(p, base) for p in DEFAULT_EXCLUDE + self.exclude]
        return Matcher(p for p in pats if p is not None)

    def is_excluded(self, path: os.PathLike | str) -> bool:
        return self.exclude_matcher().ignored(path)

    def ignores_for(self, path: os.PathLike | str) -> Tuple[str, ...]:
        """The codes ``per-file-ignores`` switches off for ``path``."""
        base = self._base()
        out: List[str] = []
        for glob, codes in self.per_file_ignores:
            pat = compile_pattern(glob, base)
            if pat is not None and Matcher([pat]).ignored(path, is_dir=False):
                out.extend(codes)
        return tuple(dict.fromkeys(out))

    def targets_for(self, path: os.PathLike | str, source: Optional[str] = None,
                    strict: bool = True) -> Tuple[str, ...]:
        """The targets ``path`` is analysed for, in the order of the module
        docstring.  ``source`` is the file's text (None: not read; the
        directive and the named targets then do not apply).  An unknown name
        in a ``# tilelint: target`` raises ``ConfigError`` (``strict``, the
        CLI) or is left out (the language server)."""
        return resolve_targets(
            path, source, explicit=self.targets if self.targets_origin == "cli" else (),
            per_file_targets=self.per_file_targets, base=self._base(),
            configured=self.targets, strict=strict)

    def settings_list(self, path: os.PathLike | str, source: Optional[str] = None
                      ) -> List[Settings]:
        """One ``Settings`` per target of ``targets_for``."""
        return [self.settings_for(path, t) for t in self.targets_for(path, source)]

    def per_file(self, path: os.PathLike | str) -> "FileSettings":
        """The settings of ``path`` once its text is known (picklable)."""
        return FileSettings(self, str(path))

    def rule_selection(self) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
        """(``Settings.select``, codes to ignore) for ``select`` plus
        ``extend-select``.  ``extend-select`` without ``select`` adds to the
        default set: every code is selected and the codes that are off by
        default stay off unless ``extend-select`` names them."""
        if not self.extend_select:
            return self.select, ()
        if self.select:
            return tuple(dict.fromkeys(self.select + self.extend_select)), ()
        from tilelint.analysis.pipeline import OFF_BY_DEFAULT

        still_off = tuple(c for c in OFF_BY_DEFAULT
                          if not any(c.startswith(p) for p in self.extend_select))
        return ("TL",), still_off

    def settings_for(self, path: Optional[os.PathLike | str], target: Optional[str] = None,
                     source: Optional[str] = None, strict: bool = True) -> Settings:
        """The analysis settings for one file and one target (without
        ``target``: the first of ``targets_for(path, source, strict)``).
        ``path`` None: no file (the configured target, no per-file ignores)."""
        if not target:
            target = (self.targets_for(path, source, strict) if path is not None
                      else self.targets)[0]
        select, off = self.rule_selection()
        per_file = self.ignores_for(path) if path is not None else ()
        return Settings(
            target=targets_mod.normalise(target),
            bindings=self.bindings,
            kernel_bindings=self.kernel_bindings,
            select=select,
            ignore=tuple(dict.fromkeys(self.ignore + per_file + off)),
            all_bindings=self.all_bindings,
            time_budget=self.time_budget or None,
        )

    def with_overrides(self, *, targets: Optional[Sequence[str]] = None,
                       select: Optional[Sequence[str]] = None,
                       extend_select: Sequence[str] = (),
                       ignore: Sequence[str] = (),
                       exclude: Sequence[str] = (),
                       bindings: Sequence[Tuple[str, object]] = (),
                       all_bindings: Optional[bool] = None,
                       time_budget: Optional[float] = None) -> "Config":
        """Command-line options on top of the file: ``targets``/``select``
        replace, ``ignore``/``exclude``/``bindings`` add (later wins)."""
        changes: Dict[str, Any] = {}  # field -> new value (fields differ in type)
        if targets:
            changes["targets"] = tuple(dict.fromkeys(check_target(t, "--target") for t in targets))
            changes["targets_origin"] = "cli"
        if select is not None:
            # A later ``select`` starts over: the file's ``extend-select`` goes too.
            changes["select"] = tuple(check_codes(select, "--select"))
            changes["extend_select"] = ()
        if extend_select:
            base = changes.get("extend_select", self.extend_select)
            changes["extend_select"] = tuple(base) + tuple(
                check_codes(extend_select, "--extend-select"))
        if ignore:
            changes["ignore"] = self.ignore + tuple(check_codes(ignore, "--ignore"))
        if exclude:
            changes["exclude"] = self.exclude + tuple(exclude)
        if bindings:
            merged = dict(self.bindings)
            merged.update(dict(bindings))
            changes["bindings"] = tuple(merged.items())
            # The command line beats the file, per-kernel tables included.
            given = dict(bindings)
            changes["kernel_bindings"] = tuple(
                (kernel, tuple((n, v) for n, v in pairs if n not in given))
                for kernel, pairs in self.kernel_bindings)
        if all_bindings is not None:
            changes["all_bindings"] = all_bindings
        if time_budget is not None:
            changes["time_budget"] = check_time_budget(time_budget, "--time-budget")
        return replace(self, **changes) if changes else self


@dataclass(frozen=True)
class FileSettings:
    """A file's settings before its text is read (the CLI builds these in the
    main process and resolves them in the worker that reads the file)."""

    config: Config
    path: str

    def resolve(self, source: Optional[str]) -> List[Settings]:
        return self.config.settings_list(self.path, source)


def per_file_targets_for(path: os.PathLike | str,
                         table: Sequence[Tuple[str, Sequence[str]]],
                         base: os.PathLike | str) -> Tuple[str, ...]:
    """The targets of the first ``per-file-targets`` glob that matches."""
    for glob, names in table:
        pat = compile_pattern(glob, base)
        if pat is not None and Matcher([pat]).ignored(path, is_dir=False):
            return tuple(names)
    return ()


def resolve_targets(path: os.PathLike | str, source: Optional[str], *,
                    explicit: Sequence[str] = (),
                    per_file_targets: Sequence[Tuple[str, Sequence[str]]] = (),
                    base: Optional[os.PathLike | str] = None,
                    configured: Sequence[str] = (DEFAULT_TARGET,),
                    strict: bool = True) -> Tuple[str, ...]:
    """The targets of one file, first that applies: ``explicit`` (the
    command line), the file's ``# tilelint: target``, ``per-file-targets``,
    the targets the code names, ``configured`` (configuration or default).

    ``strict``: an unknown name in the directive raises ``ConfigError``;
    otherwise it is left out."""
    ft = directives_mod.read_targets(source) if source else directives_mod.FileTargets()
    if ft.unknown and strict:
        bad = ", ".join(repr(n) for n in ft.unknown if n)
        what = f"unknown target {bad}" if bad else "no target named"
        raise DirectiveError(
            os.fspath(path), ft.directive_line or 1,
            f"`# tilelint: target`: {what} (known: {', '.join(targets_mod.ALL_TARGETS)})")
    if explicit:
        return tuple(explicit)
    if ft.directive:
        return ft.directive
    pft = per_file_targets_for(path, per_file_targets,
                               base if base is not None else Path.cwd())
    if pft:
        return pft
    if ft.named:
        return ft.named
    return tuple(configured) or (DEFAULT_TARGET,)


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------

_KEYS = ("target", "targets", "select", "ignore", "per-file-ignores", "per-file-targets",
         "exclude", "bindings", "inlay-hints", "verify", "all-bindings", "extend-select",
         "time-budget")


def check_time_budget(value: object, key: str) -> float:
    """Seconds per file: a number >= 0 (0: no limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value < 0:
        raise ConfigError(f"`{key}` must be a number of seconds >= 0 (0: no limit), "
                          f"got {value!r}")
    return float(value)


def check_target(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"`{key}` must be a target name such as \"sm_80\", got {value!r}")
    name = targets_mod.normalise(value)
    if targets_mod.get(name) is None:
        known = ", ".join(targets_mod.ALL_TARGETS)
        raise ConfigError(f"`{key}`: unknown target {value!r} (known: {known})")
    return name


def check_per_file_targets(value: object, key: str = "per-file-targets"
                           ) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    """``{glob = [targets]}`` (a single target may be a string)."""
    if not isinstance(value, dict):
        raise ConfigError(f"`{key}` must be a table of glob = [targets], got {value!r}")
    out = []
    for glob, names in value.items():
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names:
            raise ConfigError(f"`{key}.{glob}` must be a non-empty list of target names, "
                              f"got {names!r}")
        out.append((glob, tuple(dict.fromkeys(check_target(n, f"{key}.{glob}")
                                              for n in names))))
    return tuple(out)


def check_codes(value: object, key: str) -> List[str]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"`{key}` must be a list of rule codes, got {value!r}")
    out = []
    for v in value:
        if not isinstance(v, str) or not _CODE_RX.match(v.strip().upper()):
            raise ConfigError(f"`{key}`: {v!r} is not a rule code or prefix (like \"TL101\" or \"TL1\")")
        code = v.strip().upper()
        if not _is_known_code(code):
            raise ConfigError(f"`{key}`: unknown rule code {v!r}: no rule is {code} or starts "
                              f"with it (`tilelint rule --all` lists them)")
        out.append(code)
    return out


def _is_known_code(code: str) -> bool:
    """Whether a registered rule's code is ``code`` or starts with it."""
    from tilelint.analysis.rules import RULES

    return any(r.code.startswith(code) for r in RULES)


def _check_bool(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"`{key}` must be true or false, got {value!r}")
    return value


def _check_strings(value: object, key: str) -> List[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"`{key}` must be a list of strings, got {value!r}")
    return list(value)


_BIND_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_value(value: object, key: str) -> object:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return tuple(value)
    raise ConfigError(f"`{key}` must be a number, a string, a boolean or a list of them, "
                      f"got {value!r}")


def _check_bindings(table: object, key: str) -> Tuple[Pairs, Tuple[Tuple[str, Pairs], ...]]:
    if not isinstance(table, dict):
        raise ConfigError(f"`{key}` must be a table of name = value")
    common: List[Tuple[str, object]] = []
    per_kernel: List[Tuple[str, Pairs]] = []
    for name, value in table.items():
        if not _BIND_NAME.match(name):
            raise ConfigError(f"`{key}.{name}`: not a Python identifier")
        if isinstance(value, dict):
            pairs = []
            for n2, v2 in value.items():
                if not _BIND_NAME.match(n2):
                    raise ConfigError(f"`{key}.{name}.{n2}`: not a Python identifier")
                pairs.append((n2, _check_value(v2, f"{key}.{name}.{n2}")))
            per_kernel.append((name, tuple(pairs)))
        else:
            common.append((name, _check_value(value, f"{key}.{name}")))
    return tuple(common), tuple(per_kernel)


def config_from_table(table: object, path: Optional[Path] = None) -> Config:
    """Validate a ``[tool.tilelint]`` table (anything else is a ConfigError)."""
    if not isinstance(table, dict):
        raise ConfigError("[tool.tilelint] must be a table")
    norm: Dict[str, object] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        if key not in _KEYS:
            hint = ""
            close = [k for k in _KEYS if k.replace("-", "") == key.replace("-", "")]
            if close:
                hint = f" (did you mean `{close[0]}`?)"
            raise ConfigError(f"unknown key `{raw_key}` in [tool.tilelint]{hint}; known keys: "
                              + ", ".join(_KEYS))
        if key in norm:
            raise ConfigError(f"`{raw_key}` is given twice in [tool.tilelint]")
        norm[key] = value
    cfg: Dict[str, Any] = {}  # Config field -> value (fields differ in type)
    if "target" in norm and "targets" in norm:
        raise ConfigError("give either `target` or `targets` in [tool.tilelint], not both")
    if "target" in norm:
        cfg["targets"] = (check_target(norm["target"], "target"),)
        cfg["targets_origin"] = "config"
    if "targets" in norm:
        ts = norm["targets"]
        if not isinstance(ts, list) or not ts:
            raise ConfigError(f"`targets` must be a non-empty list of target names, got {ts!r}")
        cfg["targets"] = tuple(dict.fromkeys(check_target(t, "targets") for t in ts))
        cfg["targets_origin"] = "config"
    if "select" in norm:
        cfg["select"] = tuple(check_codes(norm["select"], "select"))
    if "extend-select" in norm:
        cfg["extend_select"] = tuple(check_codes(norm["extend-select"], "extend-select"))
    if "ignore" in norm:
        cfg["ignore"] = tuple(check_codes(norm["ignore"], "ignore"))
    if "exclude" in norm:
        cfg["exclude"] = tuple(_check_strings(norm["exclude"], "exclude"))
    if "per-file-ignores" in norm:
        pfi = norm["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError("`per-file-ignores` must be a table of glob = [codes]")
        cfg["per_file_ignores"] = tuple(
            (glob, tuple(check_codes(codes, f"per-file-ignores.{glob}")))
            for glob, codes in pfi.items())
    if "per-file-targets" in norm:
        cfg["per_file_targets"] = check_per_file_targets(norm["per-file-targets"])
    if "bindings" in norm:
        cfg["bindings"], cfg["kernel_bindings"] = _check_bindings(norm["bindings"], "bindings")
    if "inlay-hints" in norm:
        cfg["inlay_hints"] = _check_bool(norm["inlay-hints"], "inlay-hints")
    if "verify" in norm:
        cfg["verify"] = _check_bool(norm["verify"], "verify")
    if "all-bindings" in norm:
        cfg["all_bindings"] = _check_bool(norm["all-bindings"], "all-bindings")
    if "time-budget" in norm:
        cfg["time_budget"] = check_time_budget(norm["time-budget"], "time-budget")
    root = path.parent if path is not None else None
    return Config(path=path, root=root, **cfg)


# Keys the editor may set on top of ``[tool.tilelint]`` (the language
# server's ``initializationOptions`` and ``workspace/configuration``), in the
# order they apply: ``target`` beats ``targets``, ``select`` comes before
# ``extend-select``.
OVERLAY_KEYS = ("targets", "target", "select", "extend-select", "ignore", "bindings",
                "all-bindings", "inlay-hints", "verify", "time-budget")


def overlay(config: Config, editor: Mapping[str, object],
            warn: Optional[Callable[[str], None]] = None) -> Config:
    """Editor settings on top of a loaded configuration.

    ``editor`` is a plain dict with the keys of ``[tool.tilelint]``
    (``OVERLAY_KEYS``; server/lsp/settings.py turns the client's JSON into
    it).  They apply like the command line's options: ``target``/``targets``
    and ``select`` replace (``select`` drops the file's ``extend-select``),
    ``extend-select``, ``ignore`` and ``bindings`` add (a binding given here
    beats the file's, per-kernel tables included), the booleans replace.  A
    target set here counts as configuration (rule 5 of ``targets_for``): a
    file's directive, ``per-file-targets`` and the targets its code names
    still come first.  ``exclude``, ``per-file-ignores`` and
    ``per-file-targets`` come from the file only.

    A key or value that is not valid is left out and reported through
    ``warn`` with the message ``tilelint check`` gives for it; never raises."""
    given: Dict[str, object] = {}
    for raw_key, value in editor.items():
        key = str(raw_key).replace("_", "-")
        if value is None:
            continue
        if key not in OVERLAY_KEYS:
            if warn is not None:
                warn(f"unknown setting `{raw_key}`; known: " + ", ".join(OVERLAY_KEYS))
            continue
        given[key] = value
    cfg = config
    for key in OVERLAY_KEYS:
        if key not in given:
            continue
        try:
            cfg = _overlay_one(cfg, key, given[key])
        except ConfigError as exc:
            if warn is not None:
                warn(f"setting ignored: {exc}")
    return cfg


def _overlay_one(cfg: Config, key: str, value: object) -> Config:
    if key in ("target", "targets"):
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, (list, tuple)) or not names:
            raise ConfigError(f"`{key}` must be a target name or a non-empty list of them, "
                              f"got {value!r}")
        targets = tuple(dict.fromkeys(check_target(t, key) for t in names))
        return replace(cfg, targets=targets, targets_origin="config")
    if key == "select":
        return replace(cfg, select=tuple(check_codes(value, key)), extend_select=())
    if key == "extend-select":
        return replace(cfg, extend_select=tuple(dict.fromkeys(
            cfg.extend_select + tuple(check_codes(value, key)))))
    if key == "ignore":
        return replace(cfg, ignore=tuple(dict.fromkeys(cfg.ignore + tuple(check_codes(value, key)))))
    if key == "bindings":
        common, per_kernel = _check_bindings(value, key)
        merged = dict(cfg.bindings)
        merged.update(common)
        names = {n for n, _ in common}
        tables: Dict[str, Dict[str, object]] = {
            k: {n: v for n, v in pairs if n not in names} for k, pairs in cfg.kernel_bindings}
        for kernel, pairs in per_kernel:
            tables.setdefault(kernel, {}).update(pairs)
        return replace(cfg, bindings=tuple(merged.items()),
                       kernel_bindings=tuple((k, tuple(t.items())) for k, t in tables.items()))
    if key == "time-budget":
        return replace(cfg, time_budget=check_time_budget(value, key))
    field_name = {"all-bindings": "all_bindings", "inlay-hints": "inlay_hints",
                  "verify": "verify"}[key]
    flag: Dict[str, Any] = {field_name: _check_bool(value, key)}
    return replace(cfg, **flag)


def _read_toml(path: Path) -> Dict[str, object]:
    try:
        with open(path, "rb") as f:
            return _toml.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except _toml.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _tilelint_table(data: Mapping[str, object]) -> Optional[object]:
    tool = data.get("tool")
    if not isinstance(tool, dict):
        return None
    return tool.get("tilelint")


def load_config(pyproject: os.PathLike | str) -> Config:
    """Read ``[tool.tilelint]`` of one ``pyproject.toml`` (defaults if absent).
    Raises ``ConfigError`` naming the file and key."""
    path = Path(pyproject).resolve()
    data = _read_toml(path)
    table = _tilelint_table(data)
    if table is None:
        return Config(path=path, root=path.parent)
    try:
        return config_from_table(table, path)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _has_table(pyproject: Path) -> bool:
    try:
        data = pyproject.read_bytes()
    except OSError:
        return False
    if b"tilelint" not in data:
        return False
    try:
        return _tilelint_table(_toml.loads(data.decode("utf-8", "replace"))) is not None
    except _toml.TOMLDecodeError:
        return True  # let load_config report the error


def find_config(start: os.PathLike | str) -> Optional[Path]:
    """The nearest ``pyproject.toml`` with a ``[tool.tilelint]`` table, from
    ``start`` (a file or a directory) upward; None if there is none."""
    p = Path(os.path.abspath(os.fspath(start)))
    d = p if p.is_dir() else p.parent
    for cand_dir in [d, *d.parents]:
        cand = cand_dir / "pyproject.toml"
        if cand.is_file() and _has_table(cand):
            return cand
    return None


class ConfigCache:
    """Config per directory, so a run over many files reads each pyproject once."""

    def __init__(self, explicit: Optional[os.PathLike | str] = None, isolated: bool = False,
                 on_error: Optional[Callable[[ConfigError], None]] = None) -> None:
        """``on_error``: a pyproject.toml that does not load is reported to it
        and its directory gets the defaults (the language server), instead of
        the ``ConfigError`` (the CLI)."""
        self._on_error = on_error
        self._explicit = load_config(explicit) if explicit is not None else None
        self._isolated = isolated
        self._by_dir: Dict[str, Config] = {}
        self._by_file: Dict[Path, Config] = {}

    def clear(self) -> None:
        """Forget what was read (a pyproject.toml changed)."""
        self._by_dir.clear()
        self._by_file.clear()

    def _load(self, found: Path) -> Config:
        try:
            return load_config(found)
        except ConfigError as exc:
            if self._on_error is None:
                raise
            self._on_error(exc)
            return Config(path=found, root=found.parent)

    def for_path(self, path: os.PathLike | str) -> Config:
        if self._explicit is not None:
            return self._explicit
        if self._isolated:
            return Config()
        p = os.path.abspath(os.fspath(path))
        d = p if os.path.isdir(p) else os.path.dirname(p)
        hit = self._by_dir.get(d)
        if hit is None:
            found = find_config(d)
            if found is None:
                hit = Config()
            else:
                hit = self._by_file.get(found)
                if hit is None:
                    hit = self._load(found)
                    self._by_file[found] = hit
            self._by_dir[d] = hit
        return hit


def config_for(path: os.PathLike | str) -> Config:
    """The configuration that applies to ``path`` (a file or directory)."""
    found = find_config(path)
    return load_config(found) if found is not None else Config()


# A bare word after ``--bind NAME=`` is taken as a string (``dtype=float16``),
# so that the shell's quotes are not needed for dtype names.
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_BIND_SCALARS = (bool, int, float, str, type(None))


def _unbindable(value: object, depth: int = 0) -> Optional[str]:
    """None for a number, a string, True/False/None or a (nested) tuple/list
    of them; else the name of the first type that is none of these."""
    if isinstance(value, _BIND_SCALARS):
        return None
    if isinstance(value, (tuple, list)):
        if depth >= 4:
            return f"{type(value).__name__} nested more than 4 deep"
        for v in value:
            bad = _unbindable(v, depth + 1)
            if bad:
                return bad
        return None
    return type(value).__name__


def _freeze(value: object) -> object:
    return tuple(_freeze(v) for v in value) if isinstance(value, (list, tuple)) else value


def parse_binding(text: str) -> Tuple[str, object]:
    """``--bind NAME=VALUE`` (``check``, ``explain``, ``verify``) → (name, value).
    VALUE is a Python literal: a number, a string, True/False/None, or a
    tuple/list of them; a bare word (``float16``) is a string.  Anything else
    is a ConfigError (a usage error on the command line)."""
    import ast

    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not _BIND_NAME.match(name):
        raise ConfigError(f"--bind expects NAME=VALUE with NAME a Python identifier, got {text!r}")
    raw = raw.strip()
    if not raw:
        raise ConfigError(f"--bind {name}=: missing value (e.g. --bind {name}=3)")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        if _BARE_WORD.match(raw):
            return name, raw
        raise ConfigError(f"--bind {name}={raw}: the value is not a Python literal (give a "
                          f"number, a quoted string, True/False/None, or a tuple/list of "
                          f"them)") from None
    bad = _unbindable(value)
    if bad:
        raise ConfigError(f"--bind {name}={raw}: a {bad} cannot be bound (give a number, a "
                          f"string, True/False/None, or a tuple/list of them)")
    return name, _freeze(value)
