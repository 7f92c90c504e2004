"""Compiler-verified mode: check tilelint's static model against the real
tilelang, opt-in (``tilelint verify FILE`` or ``tilelint.compiler.verify =
"onSave"`` in the language server).

The compiler runs in a separate worker process (``verify_worker``), never in
the caller: the user's file is imported there, every kernel the static model
found is lowered with the same bindings (the module-level instance whose
prim_func has the kernel's name, else the factory called with the model's
bindings), and the facts are compared:

* TL910 (warning) where model and compiler disagree on pipelined-or-not, stage,
  order, depth, buffer versions, arena bytes, buffer offsets, threads,
  warp specialization or sync counts; the message names both values;
* TL911 (error) for a compiler error the model did not predict, placed on the
  compiler's source line (``--> file:LINE:COL`` in the message).

The compiler's real sync code around each pipelined loop comes back in
``VerifyResult.sync_code`` for a hover marked as compiler output.

API for the language server (call from a worker thread, one call at a time):

    w = VerifyWorker(timeout=60, memory_mb=4096)
    res = w.verify(path, source, target)   # -> VerifyResult, never raises
    w.close()

The worker process is started lazily, kept across calls (tilelang is imported
once, ~2 s), killed and restarted when a call exceeds ``timeout``; its crash is
reported in ``VerifyResult.error``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from tilelint.analysis import Settings, analyze
from tilelint.analysis.model import Analysis, Diagnostic, KernelResult, Related, Span
from tilelint.analysis.workspace import added_group, comparable_offsets

from . import sources
from .config import ConfigError, parse_binding

INSTALL_HINT = ("the compiler is not installed: verification needs tilelang 0.1.15 in the "
                "interpreter that runs tilelint (pip install 'tilelint[compiler]'), or point "
                "TILELINT_COMPILER_PYTHON / --python at an interpreter that has it")
VALIDATION = ("TL101", "TL102", "TL103", "TL104", "TL105", "TL107", "TL108", "TL112",
              "TL115", "TL302", "TL303")
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
COULD_NOT = "could not verify:"


@dataclass(frozen=True)
class SyncCode:
    kernel: str
    loop_line: int
    code: str
    scope: str = "loop"  # "loop": the steady-state loop; "kernel": whole kernel (loop not located)


@dataclass
class KernelCheck:
    name: str
    lowered: bool
    instantiated: Optional[str] = None
    compiler_error: Optional[dict] = None
    mismatches: List[str] = field(default_factory=list)  # one line per disagreeing field
    compared: List[str] = field(default_factory=list)  # the fields compared

    @property
    def agrees(self) -> bool:
        return not self.mismatches


@dataclass
class VerifyResult:
    path: str
    target: str
    ran: bool  # the compiler ran (False: not installed, timed out, crashed)
    error: Optional[str] = None  # why it did not run / why the worker failed
    missing_compiler: bool = False
    diagnostics: Tuple[Diagnostic, ...] = ()
    kernels: List[KernelCheck] = field(default_factory=list)
    sync_code: Tuple[SyncCode, ...] = ()
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    raw: Optional[dict] = None  # the worker's facts, for debugging and JSON output
    # kernel name (or "<file>") -> why this environment cannot verify it (a
    # module that is not installed, no GPU, ...): never TL910/TL911
    unverified: Dict[str, str] = field(default_factory=dict)

    def to_json(self) -> Dict[str, object]:
        return {
            "path": self.path, "target": self.target, "ran": self.ran, "error": self.error,
            "missing_compiler": self.missing_compiler,
            "diagnostics": [{"code": d.code, "severity": d.severity, "line": d.span.line,
                             "column": d.span.col, "end_line": d.span.end_line,
                             "end_column": d.span.end_col, "message": d.message,
                             "kernel": d.kernel} for d in self.diagnostics],
            "kernels": [{"name": k.name, "lowered": k.lowered, "instantiated": k.instantiated,
                         "agrees": k.agrees, "mismatches": k.mismatches, "compared": k.compared,
                         "compiler_error": k.compiler_error} for k in self.kernels],
            "sync_code": [{"kernel": s.kernel, "loop_line": s.loop_line, "scope": s.scope,
                           "code": s.code} for s in self.sync_code],
            "notes": self.notes, "seconds": round(self.seconds, 3),
            "unverified": dict(self.unverified),
        }


# --------------------------------------------------------------------------
# The worker process
# --------------------------------------------------------------------------


class VerifyWorker:
    """A long-lived compiler process, started on first use."""

    def __init__(self, python: Optional[str] = None, timeout: float = 60.0,
                 memory_mb: int = 4096, start_timeout: float = 120.0) -> None:
        self.python = python or os.environ.get("TILELINT_COMPILER_PYTHON") or sys.executable
        self.timeout = float(timeout)
        self.memory_mb = int(memory_mb)
        self.start_timeout = float(start_timeout)
        self._proc: Optional[subprocess.Popen] = None
        self._buf = b""
        self._serial = 0
        self._lock = threading.Lock()
        self.ready_info: Optional[dict] = None
        self.missing = False
        self.restarts = 0

    # -- process management ------------------------------------------------
    def start(self) -> Optional[str]:
        """Start the worker if needed.  None when ready, else why not."""
        if self._proc is not None and self._proc.poll() is None:
            return None
        self._kill()
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        # the worker must find tilelint.server.verify_worker even from another interpreter
        cmd = [self.python, "-c",
               "import sys; sys.argv[0] = 'tilelint-verify-worker'\n"
               "try:\n    from tilelint.server import verify_worker as w\n"
               "except ImportError:\n"
               f"    sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
               "    import verify_worker as w\n"
               "sys.exit(w.main(sys.argv[1:]))",
               "--memory-mb", str(self.memory_mb)]
        try:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, env=env,
                                          start_new_session=True)
        except OSError as exc:
            self._proc = None
            return f"cannot start the compiler process ({self.python}): {exc}"
        self._buf = b""
        line = self._read_line(self.start_timeout)
        if line is None:
            self._kill()
            return "the compiler process did not start (no answer in " \
                   f"{self.start_timeout:g} s, or it exited)"
        try:
            info = json.loads(line)
        except ValueError:
            self._kill()
            return "the compiler process answered garbage at start-up"
        if not info.get("ready"):
            self.missing = bool(info.get("missing"))
            self._kill()
            return INSTALL_HINT if self.missing else f"the compiler failed to load: {info.get('error')}"
        self.ready_info = info
        self.missing = False
        return None

    def _send(self, line: bytes) -> None:
        """Write one request line to the worker (started with stdin=PIPE)."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise OSError("the compiler process is not running")
        proc.stdin.write(line)
        proc.stdin.flush()

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                try:
                    self._send(b'{"op": "exit"}\n')
                    self._proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired, ValueError):
                    pass
            self._kill()

    def __enter__(self) -> "VerifyWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _kill(self) -> None:
        p = self._proc
        self._proc = None
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the worker and its forked children
            except (OSError, AttributeError):
                try:
                    p.kill()
                except OSError:
                    pass
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for s in (p.stdin, p.stdout):
            try:
                if s:
                    s.close()
            except OSError:
                pass

    def _read_line(self, timeout: float) -> Optional[bytes]:
        p = self._proc
        if p is None or p.stdout is None:
            return None
        deadline = time.monotonic() + timeout
        fd = p.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def request(self, req: dict) -> dict:
        """Send one request and wait for its answer (the worker is restarted on
        timeout or crash).  Never raises."""
        with self._lock:
            why = self.start()
            if why is not None:
                return {"ok": False, "error": why, "missing": self.missing}
            self._serial += 1
            req = dict(req, id=self._serial)
            req.setdefault("timeout", self.timeout)
            try:
                self._send((json.dumps(req) + "\n").encode())
            except (OSError, ValueError):
                self._kill()
                self.restarts += 1
                return {"ok": False, "crashed": True, "error": "the compiler process died"}
            # the worker enforces the timeout on its child; this is the backstop
            while True:
                line = self._read_line(self.timeout + 15)
                if line is None:
                    alive = self._proc is not None and self._proc.poll() is None
                    self._kill()
                    self.restarts += 1
                    if alive:
                        return {"ok": False, "timeout": True,
                                "error": f"the compiler did not answer in {self.timeout:g} s; restarted"}
                    return {"ok": False, "crashed": True, "error": "the compiler process died"}
                try:
                    resp = json.loads(line)
                except ValueError:
                    continue
                if resp.get("id") == self._serial:
                    return resp

    # -- the API -------------------------------------------------------------
    def verify(self, path: str, source: Optional[str] = None, target: str = "sm_80",
               settings: Optional[Settings] = None) -> VerifyResult:
        t0 = time.perf_counter()
        path = os.path.abspath(path)
        try:
            if source is None:
                with open(path, encoding="utf-8-sig") as fh:
                    source = fh.read()
            settings = settings or Settings(target=target)
            if settings.target != target:
                import dataclasses
                settings = dataclasses.replace(settings, target=target)
            analysis = analyze(source, path, settings)
            kernels = [{"name": kr.kernel.name, "factory": kr.kernel.factory,
                        "bindings": {n: v for n, v in kr.bindings
                                     if isinstance(v, (int, float, str, bool)) or v is None}}
                       for kr in first_instances(analysis)]
            resp = self.request({"op": "verify", "path": path, "source": source,
                                 "target": analysis.target, "kernels": kernels})
            if not resp.get("ok"):
                err = resp.get("error")
                if resp.get("missing"):
                    err = f"{COULD_NOT} {err}"
                return VerifyResult(path=path, target=target, ran=False, error=err,
                                    missing_compiler=bool(resp.get("missing")),
                                    seconds=time.perf_counter() - t0)
            facts = dict(resp.get("result") or {})
            facts["_source"] = source
            res = compare(analysis, facts, path)
            imp = facts.get("import_error") or {}
            if imp.get("environment"):  # the file cannot even be imported here
                res.ran = False
                res.error = f"{COULD_NOT} {imp['environment']}"
            res.seconds = time.perf_counter() - t0
            return res
        except Exception as exc:  # never take the caller (the server) down
            return VerifyResult(path=path, target=target, ran=False,
                                error=f"verification failed: {type(exc).__name__}: {exc}",
                                seconds=time.perf_counter() - t0)


def first_instances(analysis: Analysis) -> List[KernelResult]:
    seen = set()
    out = []
    for kr in analysis.kernels:
        if kr.kernel.name in seen:
            continue
        seen.add(kr.kernel.name)
        out.append(kr)
    return out


# --------------------------------------------------------------------------
# Model vs compiler
# --------------------------------------------------------------------------


def _added_span(kr: KernelResult, base: str) -> Span:
    """The first statement that adds a ``base`` buffer (a reduction, a scan)."""
    spans = [b.span for b in kr.buffers if added_group(b.name) == base and b.span is not None]
    return min(spans, key=lambda sp: (sp.line, sp.col)) if spans else _name_span(kr)


def _name_span(kr: KernelResult) -> Span:
    return kr.kernel.name_span


def compare(analysis: Analysis, facts: dict, path: str) -> VerifyResult:
    """The model's ``analysis`` of ``path`` against ``facts``, the worker's
    answer for the same file: TL911 for a compiler error the model did not
    predict, TL910 for each fact on which they disagree."""
    res = VerifyResult(path=path, target=analysis.target, ran=True, raw=facts)
    res.notes.extend(facts.get("notes") or [])
    src_lines = (facts.get("_source") or "").splitlines()
    imp = facts.get("import_error")
    if imp and imp.get("environment"):
        res.unverified["<file>"] = str(imp["environment"])
        return res
    if imp:
        res.diagnostics = tuple(_import_error(analysis, imp, path, src_lines))
        return res

    diags: List[Diagnostic] = []
    kfacts: Dict[str, dict] = facts.get("kernels") or {}
    for kr in first_instances(analysis):
        _compare_kernel(analysis, kr, kfacts.get(kr.kernel.name), path, src_lines, res, diags)
    for name in kfacts:
        if name not in {kr.kernel.name for kr in analysis.kernels}:
            res.notes.append(f"the compiler lowered `{name}`, which tilelint did not find")
    res.diagnostics = tuple(diags)
    return res


def _line_span(src_lines: Sequence[str], line: Optional[int], fallback: Span) -> Span:
    """The compiler's line (its columns are always 1): the whole line's text."""
    if not line:
        return fallback
    text = src_lines[line - 1] if 0 < line <= len(src_lines) else ""
    indent = len(text) - len(text.lstrip())
    return Span(line, indent, line, max(indent, len(text)))


def _import_error(analysis: Analysis, imp: dict, path: str,
                  src_lines: Sequence[str]) -> List[Diagnostic]:
    """TL911 when the real compiler cannot import the file (nothing when the
    model already reports the syntax error, TL001)."""
    if any(d.code == "TL001" for d in analysis.diagnostics):
        return []
    line = imp.get("line")
    where = f" --> {path}:{line}:{imp.get('col') or 1}" if line else ""
    return [Diagnostic(
        code="TL911", severity="error",
        span=_line_span(src_lines, line, Span(1, 0, 1, 0)),
        message=f"importing the file with the real compiler failed: {imp.get('type')}: "
                f"{imp.get('summary') or imp.get('message')}{where}")]


def _compare_kernel(analysis: Analysis, kr: KernelResult, k: Optional[dict], path: str,
                    src_lines: Sequence[str], res: VerifyResult,
                    diags: List[Diagnostic]) -> None:
    """One kernel's facts (``k``, None when the worker did not lower it) against
    the model: adds its :class:`KernelCheck` and sync code to ``res``, its
    findings to ``diags``."""
    name = kr.kernel.name
    if k is None:
        res.kernels.append(KernelCheck(name=name, lowered=False))
        return
    if (k.get("error") or {}).get("environment"):
        # the kernel could not be built here (its factory needs a GPU or a
        # module that is not installed): nothing is known about it
        res.unverified[name] = str(k["error"]["environment"])
        res.kernels.append(KernelCheck(name=name, lowered=False,
                                       instantiated=k.get("instantiated")))
        return
    chk = KernelCheck(name=name, lowered=not k.get("error"), instantiated=k.get("instantiated"),
                      compiler_error=k.get("error"))
    res.kernels.append(chk)
    ours_err = [d for d in analysis.diagnostics
                if d.code in VALIDATION and d.kernel in (name, None) and d.severity == "error"]
    err = k.get("error")
    if err:
        _compare_error(kr, err, ours_err, path, src_lines, chk, diags)
        if analysis.target != "ascend":
            _compare_schedule(kr, k, chk, diags)
        return
    if ours_err:
        msg = (f"tilelint predicts {', '.join(sorted({d.code for d in ours_err}))}, "
               f"the compiler lowers `{name}` without error")
        chk.mismatches.append(msg)
        diags.append(Diagnostic(code="TL910", severity="warning", kernel=name,
                                span=ours_err[0].span, message=msg))
    if analysis.target == "ascend":
        _compare_ascend(kr, k, chk, diags)
    else:
        _compare_schedule(kr, k, chk, diags)
        _compare_memory(kr, k, chk, diags)
        _compare_sync(kr, k, chk, diags)
    for sc in k.get("sync_code") or []:
        res.sync_code += (SyncCode(kernel=name, loop_line=int(sc.get("loop_line") or 0),
                                   code=str(sc.get("code") or ""),
                                   scope=str(sc.get("scope") or "loop")),)


def _compare_error(kr: KernelResult, err: dict, ours_err: Sequence[Diagnostic], path: str,
                   src_lines: Sequence[str], chk: KernelCheck,
                   diags: List[Diagnostic]) -> None:
    """The compiler rejected the kernel: TL911 when the model predicted no
    error of that code, TL910 when it did on another line."""
    name = kr.kernel.name
    code, line = err.get("code"), err.get("line")
    where = f" --> {err.get('file') or path}:{line}:{err.get('col') or 1}" if line else ""
    chk.compared.append("error")
    hits = [d for d in ours_err if code and d.code == code]
    if not hits:
        chk.mismatches.append(f"compiler error {code or err.get('type')} not predicted")
        diags.append(Diagnostic(
            code="TL911", severity="error", kernel=name,
            span=_line_span(src_lines, line, _name_span(kr)),
            message=(f"the compiler rejects `{name}`"
                     + (f" (what tilelint calls {code})" if code else "")
                     + f": {err.get('summary') or err.get('message')}{where}"
                     + (f"; tilelint predicted {', '.join(sorted({d.code for d in ours_err}))}"
                        if ours_err else "; tilelint predicted no error")),
            related=tuple(Related(d.span, f"tilelint: {d.code}") for d in ours_err)))
    elif line and line not in [d.span.line for d in hits]:
        msg = (f"{code} line: tilelint {', '.join(str(d.span.line) for d in hits)}, "
               f"compiler {line}")
        chk.mismatches.append(msg)
        diags.append(Diagnostic(code="TL910", severity="warning", kernel=name,
                                span=_line_span(src_lines, line, _name_span(kr)),
                                message=f"`{name}`: {msg}{where}"))


def _mismatch(chk: KernelCheck, diags: List[Diagnostic], kr: KernelResult, span: Span,
              what: str, ours, theirs) -> None:
    chk.mismatches.append(f"{what}: tilelint {ours}, compiler {theirs}")
    diags.append(Diagnostic(
        code="TL910", severity="warning", kernel=kr.kernel.name, span=span,
        message=f"`{kr.kernel.name}`: {what}: tilelint predicts {ours}, the compiler gives {theirs}"))


def _model_loops(kr: KernelResult):
    # T.Pipelined(n, num_stages=0) without order/stage leaves no annotation: the
    # compiler sees an ordinary loop, so it is not in its list.
    return [lr for lr in kr.loops
            if not (lr.num_stages == 0 and lr.loop.order is None and lr.loop.stage is None)]


def _compare_schedule(kr: KernelResult, k: dict, chk: KernelCheck, diags: List[Diagnostic]) -> None:
    ws = bool(k.get("warp_specialized"))
    if not k.get("error") or k.get("loops"):
        chk.compared.append("warp_specialized")
        if not k.get("error") and kr.warp_specialized != ws:
            _mismatch(chk, diags, kr, _name_span(kr), "warp specialization",
                      kr.warp_specialized, ws)
    theirs = k.get("loops") or []
    mine = _model_loops(kr)
    if len(mine) != len(theirs):
        chk.compared.append("loops")
        _mismatch(chk, diags, kr, _name_span(kr), "number of pipelined loops", len(mine), len(theirs))
        return
    if ws:
        return  # the WS pass consumes num_stages before planning: no planned schedule to compare
    for ours, t in zip(mine, theirs, strict=True):
        span = ours.loop.iter_span
        at = f"loop line {ours.loop.span.line}"
        chk.compared.append(f"{at}: pipelined/stage/order/depth")
        if ours.pipelined != bool(t.get("pipelined")):
            _mismatch(chk, diags, kr, span, f"{at}: pipelined", ours.pipelined, bool(t.get("pipelined")))
            continue
        if not t.get("pipelined"):
            continue
        st = [s.stage for s in ours.statements]
        od = [s.order for s in ours.statements]
        if t.get("stage") is not None and st != t["stage"]:
            _mismatch(chk, diags, kr, span, f"{at}: stages", st, t["stage"])
        if t.get("order") is not None and od != t["order"]:
            _mismatch(chk, diags, kr, span, f"{at}: order", od, t["order"])
        if t.get("depth") is not None and ours.depth != t["depth"]:
            _mismatch(chk, diags, kr, span, f"{at}: pipeline depth", ours.depth, t["depth"])


def _compare_ascend(kr: KernelResult, k: dict, chk: KernelCheck, diags: List[Diagnostic]) -> None:
    """Ascend: the auto-scheduler's order and II of the modelled loop."""
    asc = kr.ascend
    if asc is None or not asc.statements:
        return
    n = len(asc.statements)
    theirs = next((t for t in k.get("ascend_schedule") or [] if len(t["start_times"]) == n), None)
    span = _name_span(kr)
    loops = [lr for lr in kr.loops if lr.loop.kind == "pipelined"]
    if loops:
        span = loops[0].loop.iter_span
    chk.compared.append("ascend loop order")
    if theirs is None:
        _mismatch(chk, diags, kr, span, "Ascend loop: scheduled tasks", n,
                  sorted({len(t["start_times"]) for t in k.get("ascend_schedule") or []}))
        return
    line_of = {st.source: st.line for st in asc.statements}  # source position -> line
    starts = theirs["start_times"]
    their_order = [line_of.get(i) for i in sorted(range(n), key=lambda i: (starts[i], i))]
    our_order = [st.line for st in asc.statements]
    note = "" if asc.schedule_exact else f" (predicted: {asc.schedule_note})"
    if our_order != their_order:
        _mismatch(chk, diags, kr, span, f"Ascend loop order (statement lines){note}",
                  our_order, their_order)
        return
    if asc.schedule_exact and asc.ii is not None:
        chk.compared.append("ascend II")
        if asc.ii != theirs["ii"]:
            _mismatch(chk, diags, kr, span, "Ascend loop II", asc.ii, theirs["ii"])


def _compare_memory(kr: KernelResult, k: dict, chk: KernelCheck, diags: List[Diagnostic]) -> None:
    spans = {b.name: b.span for b in kr.buffers}
    for a in kr.kernel.allocs:
        spans.setdefault(a.name, a.span)
    ours_v = {b.name: b.versions for b in kr.buffers}
    for lr in kr.loops:
        for v in lr.versions:
            ours_v.setdefault(v.buffer, v.versions)
    for buf, n in (k.get("versions") or {}).items():
        chk.compared.append(f"versions {buf}")
        if ours_v.get(buf, 1) != n:
            _mismatch(chk, diags, kr, spans.get(buf, _name_span(kr)), f"versions of `{buf}`",
                      ours_v.get(buf, 1), n)
    shared = k.get("shared") or {}
    if shared.get("bytes") is not None and kr.shared_bytes is not None or \
            (shared.get("bytes") and kr.shared_bytes is None):
        chk.compared.append("arena bytes")
        if kr.shared_bytes != shared["bytes"]:
            _mismatch(chk, diags, kr, _name_span(kr), "dynamic shared memory (arena bytes)",
                      kr.shared_bytes, shared["bytes"])
    # The buffers the compiler adds are compared as the offsets of each kind:
    # the codegen numbers a reduction's pipeline emissions in no fixed order.
    ours_off = comparable_offsets({b.name: b.offset for b in kr.buffers
                                   if b.scope == "shared.dyn"})
    theirs_off = comparable_offsets(shared.get("offsets") or {})
    for buf, off in theirs_off.items():
        chk.compared.append(f"offset {buf}")
        if ours_off.get(buf) != off:
            if buf.endswith("*"):
                base = buf[:-1]
                _mismatch(chk, diags, kr, _added_span(kr, base),
                          f"arena offsets of the `{base}` buffers the compiler adds",
                          ours_off.get(buf, []), off)
            else:
                _mismatch(chk, diags, kr, spans.get(buf, _name_span(kr)),
                          f"arena offset of `{buf}`", ours_off.get(buf), off)
    if k.get("threads") is not None:
        chk.compared.append("threads")
        if kr.threads != k["threads"]:
            _mismatch(chk, diags, kr, kr.kernel.threads_span or _name_span(kr), "threads per block",
                      kr.threads, k["threads"])


def _compare_sync(kr: KernelResult, k: dict, chk: KernelCheck, diags: List[Diagnostic]) -> None:
    sync = k.get("sync")
    if not sync:
        return
    span = kr.kernel.kernel_span or _name_span(kr)
    if kr.sync is None:
        chk.compared.append("sync")
        _mismatch(chk, diags, kr, span, "sync model", "none", "present")
        return
    for what, ours, theirs in (
            ("__syncthreads() in the kernel", kr.sync.syncthreads, sync.get("syncthreads")),
            ("cp.async commit groups", kr.sync.cp_async_commit, sync.get("cp_async_commit")),
            ("cp.async wait_group list", list(kr.sync.cp_async_wait), sync.get("cp_async_wait")),
            ("mbarriers", kr.sync.mbarriers, sync.get("mbarriers"))):
        if theirs is None:
            continue
        chk.compared.append(what)
        if ours != theirs:
            _mismatch(chk, diags, kr, span, what, ours, theirs)
    for lr, n in zip(_model_loops(kr), sync.get("syncthreads_in_loop") or [], strict=False):
        if n is None or lr.sync is None:
            continue
        chk.compared.append(f"__syncthreads() in loop line {lr.loop.span.line}")
        if lr.sync.syncthreads != n:
            _mismatch(chk, diags, kr, lr.loop.iter_span,
                      f"__syncthreads() per iteration of the loop on line {lr.loop.span.line}",
                      lr.sync.syncthreads, n)


# --------------------------------------------------------------------------
# CLI: tilelint verify FILE
# --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tilelint verify",
        description="Lower every kernel of FILE with the real tilelang (in a separate process: "
                    "this EXECUTES the file) and compare with tilelint's prediction.")
    ap.add_argument("file", metavar="FILE")
    ap.add_argument("--target", default="sm_80", help="sm_80 (default), sm_86, sm_89, sm_90")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for the compiler (default 60)")
    ap.add_argument("--memory-mb", type=int, default=4096,
                    help="address-space cap of the compiler process in MiB (default 4096; 0: none)")
    ap.add_argument("--python", default=None,
                    help="interpreter with tilelang 0.1.15 (default: this one, or "
                         "$TILELINT_COMPILER_PYTHON)")
    ap.add_argument("--bind", action="append", metavar="NAME=VALUE", default=[],
                    help="give a kernel parameter a value (as for `tilelint check`)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--show-sync", action="store_true",
                    help="print the compiler's sync code around each pipelined loop")
    return ap


def _parse_binds(items: Sequence[str]) -> Tuple[Tuple[str, object], ...]:
    """``--bind`` values, read as ``tilelint check`` reads them."""
    try:
        return tuple(parse_binding(it) for it in items)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def render_text(res: VerifyResult, show_sync: bool) -> str:
    rel = os.path.relpath(res.path) if not res.path.startswith("<") else res.path
    out = []
    for d in res.diagnostics:
        out.append(f"{rel}:{d.span.line}:{d.span.col + 1}: {d.code} {d.message}")
    for k in res.kernels:
        if k.name in res.unverified:
            out.append(f"{rel}: {k.name}: {COULD_NOT} {res.unverified[k.name]}")
            continue
        if not k.lowered and k.compiler_error is None:
            out.append(f"{rel}: {k.name}: not lowered (no module-level instance or callable factory)")
            continue
        state = "agrees" if k.agrees else f"{len(k.mismatches)} disagreement(s)"
        how = f" [{k.instantiated}]" if k.instantiated else ""
        out.append(f"{rel}: {k.name}{how}: {state} with tilelang "
                   f"({len(k.compared)} facts compared)")
    for n in res.notes:
        out.append(f"{rel}: note: {n}")
    if show_sync:
        for s in res.sync_code:
            out.append(f"--- compiler output: {s.kernel}, loop line {s.loop_line}"
                       + (" (whole kernel)" if s.scope != "loop" else ""))
            out.append(s.code)
    return "\n".join(out) + ("\n" if out else "")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_ERROR
    path = os.path.abspath(args.file)
    source, why = sources.read_text(path)
    if source is None:
        print(f"tilelint verify: error: {args.file}: {why}", file=sys.stderr)
        return EXIT_ERROR
    try:
        binds = _parse_binds(args.bind)
    except ValueError as exc:
        print(f"tilelint verify: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    settings = Settings(target=args.target, bindings=binds)
    with VerifyWorker(python=args.python, timeout=args.timeout, memory_mb=args.memory_mb) as w:
        res = w.verify(path, source, args.target, settings)
    if args.format == "json":
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
    if not res.ran:
        why = res.error or "the compiler did not run"
        if not why.startswith(COULD_NOT):
            why = f"{COULD_NOT} {why}"
        print(f"tilelint verify: {why}", file=sys.stderr)
        return EXIT_ERROR
    if args.format == "text":
        sys.stdout.write(render_text(res, args.show_sync))
    if res.diagnostics:
        return EXIT_FINDINGS
    if res.unverified:  # part of the file could not be verified in this environment
        for name, why in res.unverified.items():
            print(f"tilelint verify: {COULD_NOT} `{name}`: {why}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
