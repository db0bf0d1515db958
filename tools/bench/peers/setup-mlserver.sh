#!/usr/bin/env bash
# Creates <repo>/.venv-mlserver with the pinned MLServer set of
# tools/bench/peers/requirements-mlserver.txt, for the peer comparison of the
# benchmark (tools/bench/peers.ts calls this script itself).
#
# Idempotent: when the venv holds exactly the pinned versions (checked with
# importlib.metadata against the requirements file) and `import mlserver,
# onnxruntime, numpy` works, it does nothing.
#
# Environment knobs:
#   PYTHON=python3.11        interpreter used to create the venv (3.9-3.12; MLServer 1.7.1 needs < 3.13)
#   MLSERVER_VENV=/path      venv location (default <repo>/.venv-mlserver)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${MLSERVER_VENV:-$ROOT/.venv-mlserver}"
REQ="$ROOT/tools/bench/peers/requirements-mlserver.txt"

log() { echo "setup-mlserver: $*"; }

pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  for p in python3.11 python3.12 python3.10 python3 python; do
    if command -v "$p" >/dev/null 2>&1 &&
      "$p" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info < (3, 13) else 1)' 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "setup-mlserver: no python 3.9-3.12 found" >&2
  exit 1
}

# Every `name==version` pin of the requirements file is installed at that version.
pins_ok() {
  [[ -x "$VENV/bin/python" ]] || return 1
  "$VENV/bin/python" - "$REQ" <<'PY' >/dev/null 2>&1 || return 1
import importlib.metadata as md
import re
import sys

for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
    if not m:
        sys.exit(f"unpinned requirement {line!r}")
    if md.version(m.group(1)) != m.group(2):
        sys.exit(f"{m.group(1)} {md.version(m.group(1))} != {m.group(2)}")
import mlserver, onnxruntime, numpy  # noqa: E401,F401
PY
}

if pins_ok; then
  log "$VENV is up to date ($("$VENV/bin/python" -c 'import importlib.metadata as m; print("mlserver", m.version("mlserver"), "onnxruntime", m.version("onnxruntime"))'))"
  exit 0
fi

PY="$(pick_python)"
if [[ -e "$VENV" ]] && ! "$VENV/bin/python" -c 'import sys; assert (3, 9) <= sys.version_info < (3, 13)' 2>/dev/null; then
  log "removing unusable $VENV"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV with $PY ($("$PY" --version 2>&1))"
  "$PY" -m venv "$VENV"
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
log "installing ${REQ#"$ROOT"/} (pip resolves MLServer's own dependencies)"
"$VENV/bin/python" -m pip install --quiet --no-input -r "$REQ"

pins_ok || { echo "setup-mlserver: verification of $VENV failed (pins of ${REQ#"$ROOT"/} not installed)" >&2; exit 1; }
log "ready: $VENV ($("$VENV/bin/python" -c 'import importlib.metadata as m; print("mlserver", m.version("mlserver"), "onnxruntime", m.version("onnxruntime"))'))"
