#!/usr/bin/env bash
# Install what the real VS Code client test (tests/test_vscode_client.py) needs, when this
# machine allows it: code-server 4.100.3 (VS Code 1.100.3, the last release on Node 20)
# from npm, the Debian packages its native modules build against, Debian's chromium,
# Playwright from PyPI (it drives that chromium; no browser download) and the .vsix
# (scripts/build_vscode.sh).  About 3 minutes on a fresh machine, seconds after that.
#   bash scripts/install_code_server.sh [PREFIX]   (default: ~/.cache/tilelint-code-server)
# Prints one "note:" line and exits 0 when something cannot be installed; the test then
# skips with a reason.  Nothing here is needed by tilelint itself.
set -uo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-${TILELINT_CODE_SERVER_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/tilelint-code-server}}
VENV=${TILELINT_VENV:-.venv}
VERSION=4.100.3
note() { echo "note: $*; the VS Code client test will be skipped" >&2; exit 0; }

have_vsix() { ls editors/vscode/tilelint-*.vsix >/dev/null 2>&1; }
if [ -x "$PREFIX/node_modules/.bin/code-server" ] && have_vsix && \
    "$VENV/bin/python" -c "import playwright" 2>/dev/null; then
  exit 0
fi
command -v npm >/dev/null 2>&1 || note "npm is not installed"
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$node_major" -ge 20 ] || note "code-server $VERSION needs Node 20 (found ${node_major})"

# Debian packages: the headers node-pty/kerberos/keytar build against, ripgrep, chromium.
need=()
for p in libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev build-essential pkg-config ripgrep chromium; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") \
      >/dev/null 2>&1 || note "apt-get could not install ${need[*]}"
  else
    note "missing Debian packages ${need[*]} (and not root to install them)"
  fi
fi

# @vscode/ripgrep downloads rg from GitHub in its postinstall unless a cached archive
# exists; build that archive from Debian's binary so no other network is needed.
tmp=$(node -p 'require("os").tmpdir()')
cache="$tmp/vscode-ripgrep-cache-1.15.11"
archive="$cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
if [ ! -s "$archive" ]; then
  mkdir -p "$cache" && tar -czf "$archive" -C "$(dirname "$(command -v rg)")" rg \
    || note "could not build the ripgrep archive"
fi

mkdir -p "$PREFIX"
if [ ! -x "$PREFIX/node_modules/.bin/code-server" ]; then
  # npm_config_yes: node-pty's `npx node-gyp` otherwise stops at a prompt.
  (cd "$PREFIX" && [ -f package.json ] || echo '{"private": true}' > "$PREFIX/package.json")
  (cd "$PREFIX" && npm_config_yes=true npm install --no-audit --no-fund --unsafe-perm \
      "code-server@$VERSION" >install.log 2>&1) \
    || note "npm install code-server@$VERSION failed (see $PREFIX/install.log)"
fi
if ! "$VENV/bin/python" -c "import playwright" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check playwright >/dev/null 2>&1 \
    || note "pip could not install playwright"
fi
if ! have_vsix; then
  bash scripts/build_vscode.sh >/dev/null 2>&1 || note "scripts/build_vscode.sh could not build the .vsix"
fi
echo "code-server $VERSION in $PREFIX"
