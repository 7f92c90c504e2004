"""The console script starts the language server without loading the CLI,
the configuration loader or the analysis: ``initialize`` is answered before
libcst, pygls or z3 are imported (issue 13, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_server_start_path_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from tilelint.server import entry, lsp_main
        from tilelint.server.lsp import stdio
        heavy = [m for m in ("libcst", "pygls", "lsprotocol", "z3", "tilelint.analysis",
                             "tilelint.server.cli", "tilelint.server.config")
                 if m in sys.modules]
        print(heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_console_script_entry_is_the_light_dispatcher():
    from importlib.metadata import entry_points
    eps = [e for e in entry_points(group="console_scripts") if e.name == "tilelint"]
    assert eps and eps[0].value == "tilelint.server.entry:main"


def test_server_answers_initialize_through_the_dispatcher():
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    req = f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    exit_body = json.dumps({"jsonrpc": "2.0", "method": "exit"})
    req += f"Content-Length: {len(exit_body)}\r\n\r\n{exit_body}".encode()
    out = subprocess.run([sys.executable, "-m", "tilelint.server.entry", "server"],
                         input=req, capture_output=True, timeout=120)
    head, _, rest = out.stdout.partition(b"\r\n\r\n")
    assert head.startswith(b"Content-Length:")
    reply = json.loads(rest[:int(head.split(b":")[1])])
    assert reply["id"] == 1 and "capabilities" in reply["result"]
