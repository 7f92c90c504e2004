"""The ``tilelint`` command line.

    tilelint check [PATHS...]      lint files and directories
    tilelint explain FILE          schedule, buffer versions, arena and sync of each kernel
    tilelint rule CODE | --all     rule documentation
    tilelint server [--tcp H:P]    the language server (stdio by default)

Exit codes: 0 no error/warning findings, 1 findings (or files that could not
be read), 2 usage, configuration or internal error.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from . import sources
from .config import (
    Config,
    ConfigCache,
    ConfigError,
    Matcher,
    check_codes,
    check_target,
    compile_pattern,
    parse_binding,
    read_ignore_file,
)

if TYPE_CHECKING:  # the analysis is imported when a command needs it
    from tilelint.analysis.model import KernelSync, LoopSync

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

# Below this many files a process pool costs more than it saves.
PARALLEL_MIN_FILES = 8
PROGRESS_AFTER_S = 1.0

_IMPORTS_TILELANG = re.compile(rb"^[ \t]*(?:from[ \t]+tilelang\b|import[ \t]+[^\n#]*\btilelang\b)",
                               re.MULTILINE)


class UsageError(Exception):
    pass


def version() -> str:
    try:
        from importlib.metadata import version as _v
        return _v("tilelint")
    except Exception:
        return "0+unknown"


# --------------------------------------------------------------------------
# File discovery
# --------------------------------------------------------------------------


def _git_root(start: Path) -> Optional[Path]:
    for d in [start, *start.parents]:
        if (d / ".git").exists():
            return d
    return None


class Discovery:
    """Python files under the given paths, minus default excludes, the
    configuration's ``exclude`` and ``.gitignore`` rules."""

    def __init__(self, configs: ConfigCache, respect_gitignore: bool = True,
                 extra_exclude: Sequence[str] = ()) -> None:
        self.configs = configs
        self.respect_gitignore = respect_gitignore
        self.extra_exclude = tuple(extra_exclude)
        self._gitignore_cache: Dict[Path, List] = {}

    def _cfg_matcher(self, path: Path) -> Matcher:
        cfg = self.configs.for_path(path)
        m = cfg.exclude_matcher()
        if self.extra_exclude:
            base = Path.cwd()
            m = m.extend(p for p in (compile_pattern(x, base) for x in self.extra_exclude) if p)
        return m

    def _ignore_patterns(self, directory: Path) -> List:
        """.gitignore patterns of ``directory`` and its parents up to the git root."""
        if not self.respect_gitignore:
            return []
        hit = self._gitignore_cache.get(directory)
        if hit is not None:
            return hit
        root = _git_root(directory)
        pats: List = []
        if root is not None:
            chain = []
            d = directory
            while True:
                chain.append(d)
                if d == root or d.parent == d:
                    break
                d = d.parent
            for d in reversed(chain):
                pats.extend(read_ignore_file(d / ".gitignore"))
            pats.extend(read_ignore_file(root / ".git" / "info" / "exclude"))
        else:
            pats.extend(read_ignore_file(directory / ".gitignore"))
        self._gitignore_cache[directory] = pats
        return pats

    def files(self, paths: Sequence[str]) -> Tuple[List[Path], List[str]]:
        """(files to check, paths that do not exist)."""
        out: List[Path] = []
        missing: List[str] = []
        seen = set()
        for raw in paths:
            p = Path(raw)
            if not p.exists():
                missing.append(raw)
                continue
            p = Path(os.path.abspath(p))
            if p.is_dir():
                found = self._walk(p)
            else:
                # An explicitly named file is checked unless the configuration
                # excludes it (so pre-commit honours ``exclude``).
                found = [] if self._cfg_matcher(p).ignored(p, is_dir=False) else [p]
            for f in found:
                if f not in seen:
                    seen.add(f)
                    out.append(f)
        return out, missing

    def _walk(self, top: Path) -> List[Path]:
        out: List[Path] = []
        git_pats = self._ignore_patterns(top)
        cfg_m = self._cfg_matcher(top)
        if cfg_m.ignored(top, is_dir=True) and top != Path.cwd():
            return out
        stack: List[Tuple[Path, List]] = [(top, git_pats)]
        while stack:
            d, pats = stack.pop()
            local = pats + (read_ignore_file(d / ".gitignore") if self.respect_gitignore and d != top else [])
            m = Matcher(local)
            cfg_m = self._cfg_matcher(d)
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for e in entries:
                path = Path(e.path)
                try:
                    is_dir = e.is_dir()
                except OSError:
                    continue
                if is_dir:
                    if e.is_symlink():
                        continue
                    if m.match_one(e.path, True) or cfg_m.match_one(e.path, True):
                        continue
                    subdirs.append((path, local))
                elif e.name.endswith(".py"):
                    if m.match_one(e.path, False) or cfg_m.match_one(e.path, False):
                        continue
                    out.append(path)
            stack.extend(reversed(subdirs))
        out.sort()
        return out


# --------------------------------------------------------------------------
# Checking one file (runs in worker processes)
# --------------------------------------------------------------------------


@dataclass
class FileResult:
    path: str  # absolute
    source: Optional[str] = None  # None when skipped or unreadable
    diagnostics: List[Tuple[str, tuple]] = field(default_factory=list)  # (target, diagnostics)
    error: Optional[str] = None
    skipped: bool = False


def read_source(path: str, explicit: bool) -> Tuple[Optional[str], Optional[str], bool]:
    """(text, error, skipped).  Files that do not import tilelang are skipped."""
    data, why = sources.read_bytes(path)
    if data is None:
        return None, why, False
    if b"tilelang" not in data:
        return None, None, True
    if b"\x00" in data[:8192]:
        return None, "binary file (contains NUL bytes), not checked", False
    text, why = sources.decode(data)
    if text is None:
        return None, why, False
    if not _IMPORTS_TILELANG.search(data):
        return None, None, True
    return text, None, False


def check_file(path: str, settings_list: Sequence, explicit: bool = False) -> FileResult:
    """Analyse one file for each Settings (one per target)."""
    text, error, skipped = read_source(path, explicit)
    if text is None:
        return FileResult(path=path, error=error, skipped=skipped)
    if hasattr(settings_list, "resolve"):  # per-file targets: the file's text decides
        try:
            settings_list = settings_list.resolve(text)
        except ConfigError as exc:
            return FileResult(path=path, source=text, error=getattr(exc, "short", str(exc)))
    from tilelint.analysis import analyze, frontend

    res = FileResult(path=path, source=text)
    try:
        module = frontend.parse_module(text)
    except Exception:  # analyze() reports what it can
        module = None
    for settings in settings_list:
        try:
            a = analyze(text, path, settings, module=module) if module is not None else \
                analyze(text, path, settings)
        except Exception as exc:  # analyze() promises not to raise; be safe anyway
            return FileResult(path=path, source=text,
                              error=f"internal error: {type(exc).__name__}: {exc}")
        res.diagnostics.append((settings.target, tuple(a.diagnostics)))
    return res


def _check_job(job):
    return check_file(*job)


# --------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr, shown only on a TTY and only once a
    run has taken more than PROGRESS_AFTER_S."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and total > 1
        self.start = time.monotonic()
        self.shown = False
        self.done = 0

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if not self.shown and time.monotonic() - self.start < PROGRESS_AFTER_S:
            return
        self.shown = True
        width = 30
        filled = int(width * self.done / max(1, self.total))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def _pool_context() -> Any:
    """``fork`` where the platform has it (a worker is ready at once, with
    everything the parent imported); the platform's default elsewhere."""
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None


def _job_size(job: tuple) -> int:
    try:
        return os.path.getsize(job[0])
    except OSError:
        return 0


# A batch run keeps its caches (chunk models, CPython and libcst trees) alive
# for the whole run, and with the default thresholds (700, 10, 10) the cyclic
# collector scans them again and again: on a fetched tile-ai/tilelang that was
# a fifth of the CPU (50.2 s against 38.9 s with these, measured back to back
# in one process), for a memory peak that barely moved (168 MB against 179 MB).
_BATCH_GC_THRESHOLD = (50_000, 20, 20)


def run_checks(jobs: Sequence[tuple], workers: int, progress: Progress) -> List[FileResult]:
    """Check every job, in worker processes when there are enough of them
    (forked workers keep the collector's thresholds set here)."""
    before = gc.get_threshold()
    gc.set_threshold(*_BATCH_GC_THRESHOLD)
    try:
        return _run_checks(jobs, workers, progress)
    finally:
        gc.set_threshold(*before)


def _run_checks(jobs: Sequence[tuple], workers: int, progress: Progress) -> List[FileResult]:
    results: List[FileResult] = []
    if workers <= 1 or len(jobs) < PARALLEL_MIN_FILES:
        for job in jobs:
            results.append(_check_job(job))
            progress.step()
        return results
    # The analysis is imported here, once: forked workers start as copies of
    # this process and import nothing.  Largest files first, so the pool does
    # not wait at the end on one big file that started last.
    import tilelint.analysis.pipeline  # noqa: F401

    ordered = sorted(jobs, key=_job_size, reverse=True)
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)),
                                 mp_context=_pool_context()) as pool:
            futs = [pool.submit(_check_job, job) for job in ordered]
            for fut in as_completed(futs):
                results.append(fut.result())
                progress.step()
    except (OSError, ImportError, NotImplementedError):
        # No process support (sandbox, missing sem_open): serial.
        results = [_check_job(job) for job in jobs]
    return results


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------


def _split_list(values: Optional[Sequence[str]]) -> List[str]:
    out: List[str] = []
    for v in values or ():
        out.extend(x for x in re.split(r"[,\s]+", v) if x)
    return out


PYTHON_SUFFIXES = (".py", ".pyi")


def is_python_file(path: str) -> bool:
    """A ``.py``/``.pyi`` file, or a script whose first line is a Python
    shebang (pre-commit's ``types: [python]`` passes those too)."""
    if path.endswith(PYTHON_SUFFIXES):
        return True
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def path_problem(path: str, *, directory_ok: bool = True) -> Optional[str]:
    """Why an explicitly named path cannot be checked (``"PATH: reason"``), or
    None: it does not exist, cannot be read, or is a file that is not Python."""
    if not os.path.exists(path):
        if os.path.islink(path):
            return f"{path}: broken symbolic link"
        return f"{path}: no such file or directory"
    if os.path.isdir(path):
        if not directory_ok:
            return f"{path}: is a directory (give one Python file)"
        try:
            with os.scandir(path):
                pass
        except OSError as exc:
            return f"{path}: cannot read directory: {exc.strerror or exc}"
        return None
    if not os.path.isfile(path):
        return f"{path}: not a regular file"
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"{path}: cannot read: {exc.strerror or exc}"
    if not is_python_file(path):
        return (f"{path}: not a Python file (tilelint reads .py and .pyi files; for other "
                f"text use `tilelint check --stdin-filename NAME.py < {path}`)")
    return None


def _load_configs(args) -> ConfigCache:
    return ConfigCache(explicit=args.config, isolated=args.isolated)


def parse_bind(text: str) -> Tuple[str, object]:
    """``--bind NAME=VALUE`` → (name, value) (``config.parse_binding``); a bad
    one is a usage error."""
    try:
        return parse_binding(text)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _codes_arg(values: Sequence[str], flag: str) -> List[str]:
    """Codes given on the command line: each must be, or start, a registered code."""
    try:
        return check_codes(list(values), flag)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _overrides(args: argparse.Namespace) -> Dict[str, Any]:
    """Config.with_overrides' keyword arguments from the command line."""
    targets = _split_list(args.target) + _split_list(args.targets)
    for t in targets:
        try:
            check_target(t, "--target")
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    select = _codes_arg(_split_list(args.select), "--select") if args.select is not None else None
    extend_select = _codes_arg(_split_list(args.extend_select), "--extend-select")
    ignore = _codes_arg(_split_list(args.ignore), "--ignore")
    bindings = [parse_bind(b) for b in (args.bind or ())]
    return dict(
        targets=targets or None,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        bindings=bindings,
        all_bindings=True if args.all_bindings else None,
        time_budget=getattr(args, "time_budget", None),
    )


def cmd_check(args) -> int:
    from . import output

    configs = _load_configs(args)
    overrides = _overrides(args)
    paths = args.paths or ["."]
    if args.stdin_filename is not None or paths == ["-"]:
        return _check_stdin(args, configs, overrides)
    problems = [msg for msg in (path_problem(p) for p in paths) if msg]
    if problems:
        for msg in problems:
            print(f"tilelint: error: {msg}", file=sys.stderr)
        return EXIT_ERROR
    disc = Discovery(configs, respect_gitignore=not args.no_respect_gitignore,
                     extra_exclude=_split_list(args.exclude))
    files, missing = disc.files(paths)
    if missing:  # removed since path_problem looked
        for m in missing:
            print(f"tilelint: error: {m}: no such file or directory", file=sys.stderr)
        return EXIT_ERROR
    explicit = {Path(os.path.abspath(p)) for p in paths if Path(p).is_file()}
    jobs = []
    cfg_by_file: Dict[Path, Config] = {}
    for f in files:
        cfg = configs.for_path(f).with_overrides(**overrides)
        cfg_by_file[f] = cfg
        jobs.append((str(f), cfg.per_file(f), f in explicit))
    workers = args.jobs if args.jobs else (os.cpu_count() or 1)
    progress = Progress(len(jobs), enabled=not args.no_progress and _isatty(sys.stderr))
    try:
        results = run_checks(jobs, workers, progress)
    finally:
        progress.close()
    results.sort(key=lambda r: r.path)

    findings: List[output.Finding] = []
    errors: List[output.FileError] = []
    sources: Dict[str, str] = {}
    checked = 0
    many_targets = False
    for r in results:
        shown = output.display_path(r.path)
        if r.error is not None:
            errors.append(output.FileError(shown, r.error))
            continue
        if r.skipped:
            continue
        checked += 1
        sources[shown] = r.source or ""
        if len(r.diagnostics) > 1:
            many_targets = True
        findings.extend(output.merge_targets(r.diagnostics, shown))
    findings.sort(key=output.Finding.sort_key)
    _emit_check(args, findings, errors, sources, checked, many_targets)
    if args.exit_zero:
        return EXIT_OK
    if errors or any(output.is_failing(f) for f in findings):
        return EXIT_FINDINGS
    return EXIT_OK


def _check_stdin(args, configs: ConfigCache, overrides) -> int:
    from tilelint.analysis import analyze

    from . import output

    name = args.stdin_filename or "<stdin>"
    text = sys.stdin.read()
    cfg = configs.for_path(name if args.stdin_filename else Path.cwd()).with_overrides(**overrides)
    per_target = []
    for s in cfg.settings_list(name, text):
        a = analyze(text, name, s)
        per_target.append((a.target, a.diagnostics))
    shown = output.display_path(name) if args.stdin_filename else name
    findings = output.merge_targets(per_target, shown)
    _emit_check(args, findings, [], {shown: text}, 1, len(per_target) > 1)
    if args.exit_zero:
        return EXIT_OK
    return EXIT_FINDINGS if any(output.is_failing(f) for f in findings) else EXIT_OK


def _rule_names() -> Dict[str, str]:
    try:
        from tilelint.analysis import rules
        return {r.code: r.name for r in rules.RULES}
    except Exception:
        return {}


def _emit_check(args, findings, errors, sources, checked: int, many_targets: bool) -> None:
    from . import output
    from .ruledocs import rule_url

    out = sys.stdout
    fmt = args.format
    if args.statistics:
        out.write(output.format_statistics(findings, _rule_names(), as_json=(fmt == "json")))
        for e in errors:
            print(f"{e.path}: error: {e.message}", file=sys.stderr)
        return
    if fmt in ("text", "full", "concise"):
        style = output.Style(_use_color(args, out))
        if fmt == "concise":
            text = output.format_concise(findings, style=style, show_targets=many_targets,
                                         file_errors=errors, files_checked=checked)
        else:
            text = output.format_text(findings, sources, style=style, show_targets=many_targets,
                                      file_errors=errors, files_checked=checked)
        if args.quiet:
            text = "".join(line + "\n" for line in text.splitlines()[:-1]) if findings or errors else ""
        out.write(text)
    elif fmt == "json":
        out.write(output.format_json(findings, url_for=rule_url))
        for e in errors:
            print(f"{e.path}: error: {e.message}", file=sys.stderr)
    elif fmt == "sarif":
        rules = []
        try:
            from .ruledocs import all_rules, rule_dict
            rules = [rule_dict(r) for r in all_rules()]
        except Exception:
            pass
        out.write(output.format_sarif(findings, rules, url_for=rule_url, version=version(),
                                      file_errors=errors))
    elif fmt == "github":
        out.write(output.format_github(findings, errors, show_targets=many_targets))


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _use_color(args, stream) -> bool:
    from . import output
    if args.color == "always":
        return True
    if args.color == "never":
        return False
    return output.use_color(stream)


def _parse_sweep(spec: str) -> Tuple[str, List[int]]:
    """``num_stages=1..5`` or ``block_K=32,64`` → (name, values)."""
    name, sep, rng = spec.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise UsageError(f"--sweep expects NAME=LO..HI or NAME=V1,V2,…, got {spec!r}")
    rng = rng.strip()
    m = re.fullmatch(r"(-?\d+)\s*\.\.\s*(-?\d+)", rng)
    try:
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise UsageError(f"--sweep {spec}: empty range")
            if hi - lo > 256:
                raise UsageError(f"--sweep {spec}: at most 257 values")
            return name, list(range(lo, hi + 1))
        return name, [int(x) for x in rng.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--sweep {spec}: values must be integers") from None


def cmd_explain(args) -> int:
    import json as _json

    from tilelint.analysis import analyze, render

    from . import prune

    path = args.file
    problem = path_problem(path, directory_ok=False)
    if problem:
        print(f"tilelint: error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    text, why = sources.read_text(path)
    if text is None:
        print(f"tilelint: error: {path}: {why}", file=sys.stderr)
        return EXIT_ERROR
    configs = _load_configs(args)
    cfg = configs.for_path(path).with_overrides(**_overrides(args))
    if args.format == "html":
        return _explain_html(args, path, text, cfg)
    sweep = args.sweep
    cost = args.cost
    outputs_json = []
    outputs_text = []
    for settings in cfg.settings_list(path, text):
        a = analyze(text, path, settings)
        if args.format == "json":
            doc = render.explain_json(a)
            if sweep or cost:
                doc.update(_sweep_json(text, path, settings, sweep, cost))
            if args.configs:
                doc.update(prune.explain_configs_json(text, settings))
            outputs_json.append(doc)
        else:
            outputs_text.append(render.explain_text(a))
            if sweep or cost:
                outputs_text.append(_sweep_text(text, path, settings, sweep, cost))
            if args.configs:
                outputs_text.append(prune.explain_configs_text(text, settings))
    if args.format == "json":
        payload = outputs_json[0] if len(outputs_json) == 1 else outputs_json
        sys.stdout.write(_json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(outputs_text))
    return EXIT_OK


def _explain_html(args, path: str, text: str, cfg: Config) -> int:
    """One self-contained page (inline SVG and CSS) on stdout: every instance
    of every kernel (call sites, autotune configurations) on every target."""
    import dataclasses

    from tilelint.analysis import analyze, render_html

    from . import output

    if args.sweep or args.cost:
        raise UsageError("--sweep and --cost are not shown in --format html "
                         "(use --format text or json)")
    if args.configs:
        raise UsageError("--configs is not shown in --format html: the page's table already "
                         "has a row per autotune configuration and target (shared bytes, fits, "
                         "blocks per SM); use --format text or json for the pruning verdicts")
    settings = [dataclasses.replace(s, all_bindings=True) for s in cfg.settings_list(path, text)]
    analyses = [analyze(text, path, s) for s in settings]
    sys.stdout.write(render_html.explain_page(analyses, output.display_path(path), settings))
    return EXIT_OK


@dataclass
class SweepRow:
    kernel: str
    value: int
    arena_bytes: Optional[int]
    static_bytes: Optional[int]
    versions: Tuple[Tuple[str, int], ...]
    fits: Tuple[Tuple[str, bool], ...]
    # sync the compiler emits for this value (None when not modelled)
    syncthreads: Optional[int] = None
    cp_async_commit: Optional[int] = None
    cp_async_wait: Tuple[int, ...] = ()
    mbarriers: Optional[int] = None
    loop_syncthreads: Tuple[int, ...] = ()  # __syncthreads inside each steady-state loop
    depths: Tuple[Optional[int], ...] = ()


def _sync_fields(ksync: Optional[KernelSync], lsyncs: Sequence[LoopSync],
                 depths: Sequence[Optional[int]] = ()) -> Dict[str, Any]:
    """SweepRow's sync fields (keyword arguments of several types)."""
    if ksync is None:
        return {}
    return dict(syncthreads=ksync.syncthreads, cp_async_commit=ksync.cp_async_commit,
                cp_async_wait=tuple(ksync.cp_async_wait), mbarriers=ksync.mbarriers,
                loop_syncthreads=tuple(ls.syncthreads for ls in lsyncs), depths=tuple(depths))


def sweep_rows(text: str, path: str, settings, name: str, values: Sequence[int]) -> List[SweepRow]:
    """One row per kernel and value.  ``num_stages`` is forced on every pipelined
    loop (the what-if engine, ``whatif.sweep_num_stages``: warp specialization is
    re-decided per value);
    any other name is re-bound like ``--bind``.  Each row carries the sync counts
    (``__syncthreads``, cp.async commits, the wait_group list, mbarriers)."""
    import dataclasses

    from tilelint.analysis import (
        analyze,
        frontend,
        pipeline,
        targets as targets_mod,
        values as values_mod,
        whatif,
    )

    tinfo = targets_mod.get(settings.target)
    if tinfo is None or tinfo.kind != "cuda":
        raise UsageError(f"--sweep needs a CUDA target ({', '.join(targets_mod.CUDA_TARGETS)}), "
                         f"not {settings.target}")
    module = frontend.parse_module(text)
    rows: List[SweepRow] = []
    if name == "num_stages":
        for kernel in module.kernels:
            overrides = pipeline.kernel_overrides(kernel, settings)
            inst = values_mod.instances(module, kernel, overrides)[0]
            points = whatif.sweep_num_stages(kernel, inst.env, values, settings.target)
            for pt in points:
                rows.append(SweepRow(kernel.name, pt.num_stages, pt.arena_bytes, pt.static_bytes,
                                     tuple(pt.versions), tuple(pt.fits),
                                     **_sync_fields(pt.sync, pt.loop_sync, pt.depths)))
        return rows
    for v in values:
        s2 = dataclasses.replace(settings, bindings=tuple(settings.bindings) + ((name, v),))
        a = analyze(text, path, s2, module=module)
        for kr in a.kernels:
            fits = []
            total = None if kr.shared_bytes is None else kr.shared_bytes + sum(
                b.bytes or 0 for b in kr.buffers if b.scope == "shared")
            for t in targets_mod.CUDA_TARGETS:
                b = targets_mod.budget(t)
                fits.append((t, total is not None and b is not None and total <= b))
            rows.append(SweepRow(kr.kernel.name, v, kr.shared_bytes, None,
                                 tuple((b.name, b.versions) for b in kr.buffers), tuple(fits),
                                 **_sync_fields(kr.sync, [lr.sync or _no_sync() for lr in kr.loops],
                                                [lr.depth if lr.pipelined else None
                                                 for lr in kr.loops])))
    return rows


def _no_sync():
    from tilelint.analysis.model import LoopSync
    return LoopSync()


def _sweep_data(text, path, settings, sweep, cost) -> Tuple[str, List[SweepRow]]:
    name, values = _parse_sweep(sweep) if sweep else ("num_stages", list(range(1, 6)))
    return name, sweep_rows(text, path, settings, name, values)


def _row_sync_json(r: SweepRow) -> Optional[Dict[str, object]]:
    if r.syncthreads is None:
        return None
    return {"syncthreads": r.syncthreads, "cp_async_commit": r.cp_async_commit,
            "cp_async_wait": list(r.cp_async_wait), "mbarriers": r.mbarriers,
            "syncthreads_in_loop": list(r.loop_syncthreads)}


def _row_sync_text(r: SweepRow) -> Tuple[str, str]:
    """(syncthreads total / in loops, cp.async commits + waits or mbarriers)."""
    if r.syncthreads is None:
        return "?", "?"
    st = f"{r.syncthreads}" + (f" ({'/'.join(map(str, r.loop_syncthreads))} in loop)"
                               if r.loop_syncthreads else "")
    if r.mbarriers:
        return st, f"{r.mbarriers} mbarriers"
    if r.cp_async_commit:
        return st, f"{r.cp_async_commit} commits, wait {list(r.cp_async_wait)}"
    return st, "-"


def _cost_depths(rows: Sequence[SweepRow]) -> List[int]:
    ds = sorted({d for r in rows for d in r.depths if d})
    return ds or [3, 6]


def _cost_json(rows: Sequence[SweepRow]) -> Dict[str, object]:
    from tilelint.analysis import cost as cost_mod
    doc = cost_mod.as_dict(depths=sorted({3, 6} | set(_cost_depths(rows))))
    doc["note"] = ("the chapter's section 5.2 greedy cycle model of sync cost; abstract cycles, "
                   "model, not a measurement")
    return doc


def _cost_text(rows: Sequence[SweepRow]) -> str:
    from tilelint.analysis import cost as cost_mod
    depths = sorted({3, 6} | set(_cost_depths(rows)))
    return ("\n" + cost_mod.render_table(depths, title="sync cost per pipeline depth")
            + "variants: none = no sync (incorrect lower bound); war = release barrier before a "
              "slot is refilled; war+raw = also an acquire barrier before the consumer; +cb = one "
              "more barrier on the consumer chain; sync-copy = synchronous copies.\n"
              "This is a MODEL, NOT A MEASUREMENT: compare the sync counts above with it, then "
              "measure on hardware.\n")


def _sweep_json(text, path, settings, sweep, cost) -> Dict[str, object]:
    name, rows = _sweep_data(text, path, settings, sweep, cost)
    out = []
    prev: Dict[str, Optional[int]] = {}
    for r in rows:
        d: Dict[str, object] = {"kernel": r.kernel, name: r.value, "arena_bytes": r.arena_bytes,
                                "versions": dict(r.versions), "fits": dict(r.fits)}
        if r.static_bytes is not None:
            d["static_bytes"] = r.static_bytes
        sync = _row_sync_json(r)
        if sync is not None:
            d["sync"] = sync
        if r.depths:
            d["depths"] = list(r.depths)
        if cost:
            p = prev.get(r.kernel)
            d["delta_bytes"] = (None if p is None or r.arena_bytes is None
                                else r.arena_bytes - p)
            from tilelint.analysis import targets as targets_mod
            b = targets_mod.budget(settings.target)
            d["budget_fraction"] = (None if not b or r.arena_bytes is None
                                    else round(r.arena_bytes / b, 4))
        prev[r.kernel] = r.arena_bytes
        out.append(d)
    doc: Dict[str, object] = {"sweep": {"name": name, "target": settings.target, "points": out}}
    if cost:
        doc["sync_cost_model"] = _cost_json(rows)
    return doc


def _sweep_text(text, path, settings, sweep, cost) -> str:
    from tilelint.analysis import render, targets as targets_mod

    name, rows = _sweep_data(text, path, settings, sweep, cost)
    if not rows:
        return f"sweep of {name}: no kernels\n"
    budget = targets_mod.budget(settings.target)
    fit_targets = [t for t, _ in rows[0].fits]
    header = ["kernel", name, "arena", "versions", "syncthreads", "async sync"] \
        + (["+bytes", f"% of {settings.target}"] if cost else []) \
        + [f"fits {t}" for t in fit_targets]
    table = []
    prev: Dict[str, Optional[int]] = {}
    for r in rows:
        cells = [r.kernel, str(r.value),
                 "?" if r.arena_bytes is None else f"{r.arena_bytes} ({render.kib(r.arena_bytes)})",
                 ", ".join(f"{b}×{n}" for b, n in r.versions) or "-"]
        cells += list(_row_sync_text(r))
        if cost:
            p = prev.get(r.kernel)
            cells.append("" if p is None or r.arena_bytes is None else f"{r.arena_bytes - p:+d}")
            cells.append("?" if not budget or r.arena_bytes is None
                         else f"{100 * r.arena_bytes / budget:.1f}%")
        cells += ["yes" if ok else "NO" for _, ok in r.fits]
        prev[r.kernel] = r.arena_bytes
        table.append(cells)
    out = f"\nsweep of {name} (target {settings.target}):\n" + render.text_table(header, table) + "\n"
    if cost:
        out += _cost_text(rows)
    return out


def cmd_rule(args) -> int:
    from . import ruledocs

    if args.all or not args.code:
        rules = ruledocs.all_rules()
        if args.format == "json":
            import json as _json
            sys.stdout.write(_json.dumps([
                {k: v for k, v in ruledocs.rule_dict(r).items() if k not in ("help", "help_markdown")}
                for r in rules], indent=2) + "\n")
        else:
            sys.stdout.write(ruledocs.rule_list_text(rules))
        return EXIT_OK
    rule = ruledocs.get_rule(args.code)
    if rule is None:
        print(f"tilelint: error: unknown rule code {args.code!r} (see `tilelint rule --all`)",
              file=sys.stderr)
        return EXIT_ERROR
    if args.format == "json":
        import json as _json
        sys.stdout.write(_json.dumps({k: v for k, v in ruledocs.rule_dict(rule).items()
                                      if k != "help_markdown"}, indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(ruledocs.markdown(rule))
    else:
        sys.stdout.write(ruledocs.terminal_text(rule))
    return EXIT_OK


def cmd_server(argv: Sequence[str]) -> int:
    """The language server (the console script starts it without this module:
    ``entry.main``); imported only here, so ``check`` never loads pygls."""
    from .launch import serve
    return int(serve(argv) or 0)


# --------------------------------------------------------------------------
# Argument parsing
# --------------------------------------------------------------------------


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", metavar="TARGET",
                   help="target to analyse for (sm_80, sm_86, sm_89, sm_90, sm_100, sm_103, "
                        "sm_120, gfx942, gfx950, ascend); repeat or comma-separate for several; "
                        "beats the file's own target")
    p.add_argument("--targets", action="append", metavar="T1,T2",
                   help="several targets: run once per target and merge the findings")
    p.add_argument("--select", action="append", metavar="CODES",
                   help="only these codes or prefixes (comma-separated), replacing the configuration")
    p.add_argument("--extend-select", action="append", metavar="CODES",
                   help="codes or prefixes to enable in addition (e.g. TL900)")
    p.add_argument("--ignore", action="append", metavar="CODES",
                   help="codes or prefixes to ignore (added to the configuration)")
    p.add_argument("--bind", action="append", metavar="NAME=VALUE",
                   help="give a kernel parameter a value (repeatable), e.g. --bind num_stages=3")
    p.add_argument("--all-bindings", action="store_true",
                   help="analyse every call site of a kernel factory, not only the first")
    p.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="seconds of analysis per file before the rest of it is left out "
                        "with a TL005 (default 60; 0: no limit)")
    p.add_argument("--config", metavar="PYPROJECT",
                   help="use this pyproject.toml instead of the nearest one")
    p.add_argument("--isolated", action="store_true", help="ignore all configuration files")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tilelint",
        description="A linter and language server for TileLang kernels.")
    ap.add_argument("--version", action="version", version=f"tilelint {version()}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    pc = sub.add_parser("check", help="lint files and directories",
                        description="Lint TileLang kernel files. Only Python files that import "
                                    "tilelang are analysed.")
    pc.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .)")
    _add_common(pc)
    pc.add_argument("--format", "--output-format", dest="format", default="text",
                    choices=("text", "concise", "json", "sarif", "github"),
                    help="output format (default: text)")
    pc.add_argument("--statistics", action="store_true", help="print the count of each code only")
    pc.add_argument("--exit-zero", action="store_true", help="exit 0 even if there are findings")
    pc.add_argument("--exclude", action="append", metavar="PATTERNS",
                    help="extra gitignore-style patterns to skip (comma-separated)")
    pc.add_argument("--no-respect-gitignore", action="store_true",
                    help="do not skip files matched by .gitignore")
    pc.add_argument("--stdin-filename", metavar="PATH",
                    help="read the source from stdin and report it under this name")
    pc.add_argument("-j", "--jobs", type=int, default=0, metavar="N",
                    help="worker processes (default: all cores)")
    pc.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    pc.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    pc.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    pc.set_defaults(func=cmd_check)

    pe = sub.add_parser("explain", help="show the pipeline schedule, buffer versions, "
                                        "shared-memory arena and sync of each kernel")
    pe.add_argument("file", metavar="FILE")
    _add_common(pe)
    pe.add_argument("--format", default="text", choices=("text", "json", "html"),
                    help="text, json (docs/explain-schema.md) or html (one self-contained "
                         "page: pipeline timelines, arena maps, every instance × target)")
    pe.add_argument("--sweep", metavar="NAME=LO..HI",
                    help="re-run the analysis for each value, e.g. num_stages=1..5")
    pe.add_argument("--cost", action="store_true",
                    help="add the shared-memory cost of each configuration and the "
                         "sync cost model (a model, not a measurement)")
    pe.add_argument("--configs", action="store_true",
                    help="add the file's own autotune configurations: arena, fits, "
                         "blocks per SM and the pruning API's reason, per target")
    pe.set_defaults(func=cmd_explain)

    pr = sub.add_parser("rule", help="show the documentation of a rule")
    pr.add_argument("code", nargs="?", metavar="CODE")
    pr.add_argument("--all", action="store_true", help="list every rule")
    pr.add_argument("--format", default="text", choices=("text", "markdown", "json"))
    pr.set_defaults(func=cmd_rule)

    ps = sub.add_parser("server", help="run the language server (stdio; --tcp HOST:PORT)",
                        add_help=False)
    ps.add_argument("rest", nargs=argparse.REMAINDER)

    pv = sub.add_parser("verify", help="lower FILE with the real tilelang in a separate process "
                                       "(this executes FILE) and compare with tilelint",
                        add_help=False)
    pv.add_argument("rest", nargs=argparse.REMAINDER)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # ``server`` hands all its arguments to the language server's own parser.
    if argv and argv[0] == "server":
        try:
            return cmd_server(argv[1:])
        except KeyboardInterrupt:
            return 130
    # ``verify`` (opt-in, runs the compiler in a worker process) has its own parser.
    if argv and argv[0] == "verify":
        from .verify import main as verify_main
        try:
            return verify_main(argv[1:])
        except KeyboardInterrupt:
            return 130
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version exit 0, errors exit 2
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_ERROR
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"tilelint: error: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except UsageError as exc:
        print(f"tilelint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("tilelint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except Exception as exc:  # never a traceback
        print(f"tilelint: internal error: {type(exc).__name__}: {exc}. Please report this "
              f"(run with TILELINT_DEBUG=1 for a traceback).", file=sys.stderr)
        if os.environ.get("TILELINT_DEBUG"):
            import traceback
            traceback.print_exc()
        return EXIT_ERROR


def entry() -> None:  # pragma: no cover
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
