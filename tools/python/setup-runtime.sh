#!/usr/bin/env bash
# Makes sure the Python that Serval runs Python models with by default (<repo>/.venv/bin/python3)
# has what the bundled Python models need (tools/python/requirements.txt: numpy, Pillow).
# Idempotent, and about 0.2 s when they are already there.
#
#   tools/python/setup-runtime.sh              # fails (exit 1) if it cannot
#   tools/python/setup-runtime.sh --warn-only  # npm start: warns and goes on; the Python
#                                              # models then load UNAVAILABLE, naming what to install
#
# Environment: PYTHON=python3.12 picks the interpreter the venv is made from.
# tools/ci/setup-python.sh later adds the conformance suite's clients to the same .venv.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.venv"
REQ="$ROOT/tools/python/requirements.txt"
WARN_ONLY=0
[[ "${1:-}" == "--warn-only" ]] && WARN_ONLY=1

give_up() {
  if ((WARN_ONLY)); then
    echo "setup-runtime: WARNING: $* -- Python models (food_classifier, ...) will be UNAVAILABLE; see docs/python_backend.md" >&2
    exit 0
  fi
  echo "setup-runtime: $*" >&2
  exit 1
}

ready() { [[ -x "$VENV/bin/python3" ]] && "$VENV/bin/python3" -c 'import numpy, PIL' >/dev/null 2>&1; }
ready && exit 0

pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  for p in python3.11 python3.12 python3.13 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
      echo "$p"
      return
    fi
  done
}

if [[ ! -x "$VENV/bin/python3" ]]; then
  PY="$(pick_python)"
  [[ -n "$PY" ]] || give_up "no python3 (3.9 or newer) found: install Python 3"
  echo "setup-runtime: creating $VENV with $PY"
  if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    # Debian's python3 needs python3-venv for ensurepip.
    if command -v apt-get >/dev/null 2>&1 && { [[ "$(id -u)" == 0 ]] || command -v sudo >/dev/null 2>&1; }; then
      SUDO=()
      [[ "$(id -u)" == 0 ]] || SUDO=(sudo -n)
      "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1
      "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null 2>&1
    fi
    "$PY" -m venv "$VENV" >/dev/null 2>&1 || give_up "cannot create $VENV with '$PY -m venv' (install python3-venv)"
  fi
fi
echo "setup-runtime: installing $(grep -cv '^\s*\(#\|$\)' "$REQ") pinned packages from ${REQ#"$ROOT"/} into ${VENV#"$ROOT"/}"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python3" -m pip install --quiet --no-input -r "$REQ" ||
  give_up "pip could not install ${REQ#"$ROOT"/} into $VENV"
ready || give_up "numpy or Pillow still cannot be imported by $VENV/bin/python3"
echo "setup-runtime: ready ($VENV/bin/python3)"
