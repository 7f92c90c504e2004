#!/usr/bin/env bash
# Set up everything on a fresh machine, lint with ruff and run the whole test suite, the
# compiler parity suites included.  This is what .ci/run calls.
#   bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TILELINT_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# torch first, pinned: the CPU wheel on local disk.  Anything else pulls a
# multi-GB CUDA build when tilelang asks for torch.
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -e '.[test,compiler]'
# The real-client test drives headless Neovim; install it when we can.
if ! command -v nvim >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq neovim) >/dev/null 2>&1 || \
    echo "note: could not install neovim; the Neovim test will be skipped" >&2
fi
# The VS Code client test drives code-server in headless Chromium; install it when we
# can (it prints a note and the test skips otherwise).
bash scripts/install_code_server.sh || true
# The explain page test renders in headless Chromium; install it when we can.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || \
    echo "note: could not install chromium; the explain page screenshot test will be skipped" >&2
fi
# Lint and type-check first (configuration in pyproject.toml); a finding fails the script.
"$VENV/bin/ruff" check analysis server tests bench scripts
"$VENV/bin/mypy"
export TILELINT_REQUIRE_PARITY=${TILELINT_REQUIRE_PARITY:-1}
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
