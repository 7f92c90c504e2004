#!/usr/bin/env bash
# Install tilelint on a fresh machine and lint the bundled example kernels.
#   bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TILELINT_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e .
# Exit status 1 means "findings", which is what the examples are for.
status=0
"$VENV/bin/tilelint" check examples/ || status=$?
[ "$status" -le 1 ] || exit "$status"
echo
"$VENV/bin/tilelint" explain examples/gemm_clean.py --target sm_80
