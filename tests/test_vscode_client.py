"""A real VS Code: code-server 4.100.3 (VS Code 1.100.3) with the built .vsix, driven in
headless Chromium (Debian's ``chromium``, through Playwright; no network).

It opens a kernel whose ``order=[0, 0, 1]`` gives two statements the same order (the
compiler stops in InjectSoftwarePipeline with "Two statements in the software pipeline
cannot have the same order" and blames the second, line 20 of the parity fixture), and
checks what a user sees:

* the TL101 squiggle in the editor, on that line;
* the Problems panel entry (TL101, the message, line 20);
* the hover on ``T.Pipelined``, which shows the schedule table (stage/order per
  statement).

Screenshots are kept (``TILELINT_ARTIFACTS``, default build/test-artifacts/); with
``TILELINT_DOCS_IMAGES=1`` the two hover screenshots replace docs/images/vscode_*.png,
which the README shows.
``scripts/install_code_server.sh`` installs what it needs; ``scripts/test.sh`` runs that
script.  Without code-server, chromium, Playwright or a built .vsix the test skips and
says which is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator, Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests" / "fixtures" / "parity" / "invalid_tl101_duplicate_order.py"
WS_KERNEL = ROOT / "tests" / "fixtures" / "parity" / "gemm_ns3.py"  # warp-specialized on sm_90
TL101_LINE = 20  # the second statement with order 0 (the compiler's blame)
ARTIFACTS = Path(os.environ.get("TILELINT_ARTIFACTS") or ROOT / "build" / "test-artifacts")
# TILELINT_DOCS_IMAGES=1: the hover screenshots also replace the README's
# (docs/images/vscode_*.png), so that those are made by this test, not by hand.
DOCS_IMAGES = ROOT / "docs" / "images"


def _code_server() -> Optional[str]:
    prefix = os.environ.get("TILELINT_CODE_SERVER_PREFIX") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilelint-code-server")
    local = Path(prefix) / "node_modules" / ".bin" / "code-server"
    if local.exists():
        return str(local)
    return shutil.which("code-server")


def _chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _vsix() -> Optional[Path]:
    found = sorted((ROOT / "editors" / "vscode").glob("tilelint-*.vsix"))
    return found[-1] if found else None


def _tilelint() -> Optional[str]:
    exe = Path(sys.executable).parent / "tilelint"
    return str(exe) if exe.exists() else shutil.which("tilelint")


def _missing() -> Optional[str]:
    if _code_server() is None:
        return "code-server is not installed (scripts/install_code_server.sh installs it)"
    if _chromium() is None:
        return "chromium is not installed"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    if _vsix() is None:
        return "the extension is not built (scripts/build_vscode.sh)"
    if _tilelint() is None:
        return "the tilelint console script is not installed"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"code-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"code-server did not answer at {url}")


@contextlib.contextmanager
def _code_server_running(base: Path, settings: dict, folder: Path,
                         env: Optional[dict] = None) -> Iterator[int]:
    """code-server on a free port with the .vsix installed, the user ``settings`` and
    ``folder`` open; yields the port."""
    code_server, vsix = _code_server(), _vsix()
    assert code_server and vsix
    data, exts = base / "data", base / "extensions"
    (data / "User").mkdir(parents=True)
    quiet = {"workbench.startupEditor": "none", "workbench.tips.enabled": False,
             "telemetry.telemetryLevel": "off", "update.mode": "none",
             "extensions.autoCheckUpdates": False, "extensions.autoUpdate": False,
             "editor.hover.delay": 100}
    (data / "User" / "settings.json").write_text(json.dumps({**quiet, **settings}))
    common = ["--user-data-dir", str(data), "--extensions-dir", str(exts)]
    env = env or dict(os.environ)
    inst = subprocess.run([code_server, *common, "--install-extension", str(vsix)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    port = _free_port()
    with open(base / "code-server.log", "w") as log:
        proc = subprocess.Popen(
            [code_server, *common, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
             "--disable-telemetry", "--disable-update-check", str(folder)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_http(f"http://127.0.0.1:{port}/healthz", proc)
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def workbench(tmp_path_factory) -> Iterator[dict]:
    why = _missing()
    if why:
        pytest.skip(why)
    tilelint = _tilelint()
    assert tilelint
    base = tmp_path_factory.mktemp("vscode")
    folder = base / "project"
    folder.mkdir()
    kernel = folder / "gemm_duplicate_order.py"
    kernel.write_text(KERNEL.read_text())
    ws_kernel = folder / "gemm_sm90.py"
    ws_kernel.write_text("# tilelint: target sm_90\n" + WS_KERNEL.read_text())
    # User settings: the server command (user-level settings hold in any workspace),
    # no trust prompt.
    settings = {"tilelint.path": [tilelint], "security.workspace.trust.enabled": False}
    with _code_server_running(base, settings, folder) as port:
        yield {"port": port, "folder": folder, "kernel": kernel, "ws_kernel": ws_kernel,
               "log": base / "code-server.log"}


@pytest.fixture(scope="module")
def playwright():
    """One Playwright session for the module (its sync API cannot nest)."""
    why = _missing()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def page(workbench, playwright):
    browser, pg = _browser_page(playwright, _url(workbench, workbench["kernel"]))
    try:
        pg.wait_for_selector(".monaco-editor .view-lines", timeout=120_000)
        yield pg
    except Exception:
        _shot(pg, "vscode-failure.png")
        print(workbench["log"].read_text()[-4000:])
        raise
    finally:
        browser.close()


def _url(workbench: dict, path: Path) -> str:
    """The workbench with ``path`` open in an editor."""
    port, folder = workbench["port"], workbench["folder"]
    payload = json.dumps([["openFile", f"vscode-remote://127.0.0.1:{port}{path}"]])
    return (f"http://127.0.0.1:{port}/?folder={urllib.parse.quote(str(folder))}"
            f"&payload={urllib.parse.quote(payload)}")


def _hover_pipelined(page, wait_for: str) -> str:
    """Hover ``T.Pipelined`` until the hover shows ``wait_for``; its text."""
    target = page.locator(".monaco-editor .view-line span", has_text="Pipelined").first
    target.wait_for(timeout=60_000)
    hover = page.locator(".monaco-hover:not(.hidden)")
    for _ in range(5):  # the first hover may come before the server has analysed
        target.hover()
        try:
            hover.get_by_text(wait_for).first.wait_for(timeout=10_000)
            break
        except Exception:  # noqa: BLE001  (retry: move away and hover again)
            page.mouse.move(5, 5)
            time.sleep(1)
    time.sleep(1.5)  # the hover fades in: let it settle before the screenshot
    return hover.first.inner_text()


def _shot(pg, name: str, docs: bool = False) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    pg.screenshot(path=str(path))
    if docs and os.environ.get("TILELINT_DOCS_IMAGES") == "1":
        shutil.copyfile(path, DOCS_IMAGES / name.replace("-", "_"))
    return path


def test_tl101_squiggle_and_problems_entry(page) -> None:
    # the squiggle: an error decoration in the editor (the server's TL101)
    squiggle = page.wait_for_selector(".monaco-editor .squiggly-error", timeout=120_000)
    # ... on line 20: the squiggle's row is the row of that line number
    number = page.locator(".monaco-editor .line-numbers", has_text=str(TL101_LINE)).filter(
        has_not_text=f"{TL101_LINE}0").first
    box, row = squiggle.bounding_box(), number.bounding_box()
    assert box and row and abs(box["y"] - row["y"]) < row["height"], (box, row)
    # the Problems panel lists it with its code, message and line
    page.locator(".monaco-editor .view-lines").first.click()
    page.keyboard.press("Control+Shift+M")
    panel = page.locator(".markers-panel")
    panel.wait_for(timeout=60_000)
    entry = panel.get_by_text("cannot have the same order", exact=False).first
    entry.wait_for(timeout=60_000)
    text = panel.inner_text()
    assert "TL101" in text, text
    assert f"[Ln {TL101_LINE}," in text, text
    _shot(page, "vscode-problems.png")


def test_hover_shows_the_schedule(page) -> None:
    page.keyboard.press("Escape")
    text = _hover_pipelined(page, "steady state")
    for word in ("T.Pipelined", "stage", "order", "steady state", "TL101"):
        assert word in text, (word, text)
    shot = _shot(page, "vscode-hover.png", docs=True)
    assert shot.stat().st_size > 10_000


def test_warp_specialized_hover_shows_the_split(workbench, page) -> None:
    """gemm_ns3 on sm_90 (``# tilelint: target sm_90``): the compiler splits the loop
    into a 128-thread producer issuing both copies as TMA loads and the kernel's 128
    threads consuming, paced by 6 mbarriers (tests/test_ws_parity.py checks the same
    against the IR)."""
    page.goto(_url(workbench, workbench["ws_kernel"]), wait_until="domcontentloaded",
              timeout=120_000)
    page.wait_for_selector(".monaco-editor .view-lines", timeout=120_000)
    text = _hover_pipelined(page, "producer")
    for word in ("warp-specialized", "producer", "consumer", "TMA",
                 "256 threads: producer threadIdx.x 0–127 (128), consumer 128–255 (128)",
                 "6 mbarriers"):
        assert word in text, (word, text)
    _shot(page, "vscode-hover-ws.png", docs=True)


def _browser_page(pw, url: str):
    browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
    pg = browser.new_page(viewport={"width": 1500, "height": 950})
    pg.goto(url, wait_until="domcontentloaded", timeout=120_000)
    pg.wait_for_selector(".monaco-workbench", timeout=120_000)
    return browser, pg


def test_restricted_mode_gives_one_clear_message_and_user_settings_work(tmp_path,
                                                                       playwright) -> None:
    """A folder that is not trusted yet opens in Restricted Mode.  Its own
    ``.vscode/settings.json`` names the server, which VS Code ignores there; tilelint is
    not on the PATH.  The extension says so once (not the language client's own error
    too) and what to do; a ``tilelint.path`` in the user settings then starts the server
    in the same untrusted window (static linting never runs the folder's code)."""
    tilelint = _tilelint()
    assert tilelint
    folder = tmp_path / "untrusted"
    (folder / ".vscode").mkdir(parents=True)
    (folder / ".vscode" / "settings.json").write_text(json.dumps({"tilelint.path": [tilelint]}))
    kernel = folder / "gemm_duplicate_order.py"
    kernel.write_text(KERNEL.read_text())
    # PATH without tilelint (code-server and its node stay reachable)
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "tilelint").exists()]
    env = {**os.environ, "PATH": os.pathsep.join(dirs)}
    settings = {"security.workspace.trust.enabled": True,
                "security.workspace.trust.startupPrompt": "never",
                "security.workspace.trust.banner": "never"}
    with _code_server_running(tmp_path, settings, folder, env) as port:
        browser, pg = _browser_page(playwright, _url({"port": port, "folder": folder}, kernel))
        try:
            toasts = pg.locator(".notifications-toasts .notification-toast")
            toasts.get_by_text("Restricted Mode").first.wait_for(timeout=120_000)
            time.sleep(3)  # a second toast (the client's own error) would be here by now
            texts = [t.inner_text() for t in toasts.all()]
            ours = [t for t in texts if "tilelint" in t]
            assert len(ours) == 1, texts
            for words in ("Restricted Mode", "tilelint.path", "user settings", "never runs"):
                assert words in ours[0], (words, ours[0])
            assert not any("Couldn't start client" in t for t in texts), texts
            _shot(pg, "vscode-restricted-mode.png")
            # the user setting is honoured in Restricted Mode: after a reload of the
            # window (still untrusted) the server starts and TL101 shows
            user = tmp_path / "data" / "User" / "settings.json"
            user.write_text(json.dumps({**json.loads(user.read_text()),
                                        "tilelint.path": [tilelint]}))
            pg.reload(wait_until="domcontentloaded", timeout=120_000)
            pg.wait_for_selector(".monaco-editor .squiggly-error", timeout=120_000)
            assert "Restricted Mode" in pg.locator(".statusbar").inner_text()
            _shot(pg, "vscode-restricted-mode-user-path.png")
        except Exception:
            _shot(pg, "vscode-restricted-failure.png")
            print((tmp_path / "code-server.log").read_text()[-4000:])
            raise
        finally:
            browser.close()
