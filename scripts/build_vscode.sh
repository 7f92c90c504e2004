#!/usr/bin/env bash
# Build the VS Code extension: editors/vscode/tilelint-<version>.vsix
# Needs node >= 20 and the npm registry.  Usage: scripts/build_vscode.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here/editors/vscode"
start=$(date +%s)
npm ci --no-audit --no-fund
npm run compile
# tilelint has no public repository URL, so package.json names none.
npx --no-install @vscode/vsce package --allow-missing-repository --out "tilelint-$(node -p 'require("./package.json").version').vsix" 2>&1
end=$(date +%s)
echo "built $(ls -1 tilelint-*.vsix | tail -1) in $((end - start)) s"
