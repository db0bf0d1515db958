#!/usr/bin/env bash
# Creates <repo>/.venv-kserve with the KServe Python SDK pinned in
# test/conformance/requirements-kserve.txt, for test/conformance/test_kserve_clients.py. A venv of
# its own: the SDK's dependency tree (kubernetes, fastapi, pandas, ...) is large and pins its own
# grpcio/protobuf ranges, which must not move the official Triton clients' pins in .venv.
#
# Idempotent: a stamp file records the hash of the requirements; when it matches and
# `import kserve` works, it does nothing.
#
# Environment knobs:
#   PYTHON=python3.11        interpreter used to create the venv
#   SERVAL_KSERVE_VENV=/path venv location (default <repo>/.venv-kserve)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SERVAL_KSERVE_VENV:-$ROOT/.venv-kserve}"
REQ="$ROOT/test/conformance/requirements-kserve.txt"
STAMP="$VENV/.serval-kserve-stamp"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$VENV/bin/python" -c 'import kserve' 2>/dev/null; then
  echo "setup-kserve: $VENV is up to date"
  exit 0
fi
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  for p in python3.11 python3.12 python3; do
    if command -v "$p" >/dev/null; then PY="$p"; break; fi
  done
fi
[[ -n "$PY" ]] || { echo "setup-kserve: no python3 found" >&2; exit 1; }
echo "setup-kserve: creating $VENV with $PY"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$REQ"
"$VENV/bin/python" -c 'import kserve' >/dev/null
echo "$want" > "$STAMP"
echo "setup-kserve: installed $(grep -c '==' "$REQ") pinned packages"
