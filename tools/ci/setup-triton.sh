#!/usr/bin/env bash
# Creates <repo>/.venv-triton with the REAL tritonserver 2.51.0 (the binary,
# Python backend, local response cache and Python-backend stubs bundled in
# PyPI's nvidia-pytriton 0.7.0 wheel; see docs/reference/decoupled.md and
# tools/reference/tritonserver.sh) for side-by-side reference runs.
#
# numpy: the stub runs models with this venv's numpy (tools/reference/tritonserver.sh
# puts the venv's bin first on PATH). The 2.51 stub is built against the numpy 1.x
# ABI: under numpy 2 (the project's pin, 2.4.6 in test/conformance/requirements.txt)
# every output tensor reaches the client empty and reading a BYTES input aborts the
# stub ("unpack_from requires a buffer of at least 320017175 bytes ... actual buffer
# size is 23"). So this venv pins the last numpy 1.x, 1.26.4, which is also what
# nvidia-pytriton itself requires (numpy<2). Models written for the project must
# run on both (plain numpy API only).
#
# nvidia-pytriton is installed with --no-deps: only its bundled tritonserver is
# used, never its Python API (which would pull in tritonclient, pyzmq, typer, ...).
#
# The interpreter: tritonserver's stub embeds whichever libpython3.X.so.1.0 the
# dynamic loader finds (on Debian, the system's shared library), while Serval runs an
# interpreter executable. Interpreter-bound model code runs at different speeds on
# different builds, and even on one build: Debian's statically linked /usr/bin/python3.11
# ran a Python micro-benchmark ~25% faster than its own libpython3.11.so, pyenv's
# shared build ~5% slower than that. So that both servers run models on the very same
# library, this script
#   - makes the venv from the interpreter whose build the stub's libpython is, when one is
#     installed (by version among PATH, /usr/bin and /usr/local/bin), so the standard
#     library matches it; otherwise it says that the two differ;
#   - builds $VENV/bin/python-libpython: CPython's own main() (Py_BytesMain) linked against
#     the stub's libpython, a venv interpreter like bin/python (needs a C compiler and
#     Python.h; without them it says so, and benchmarks fall back to bin/python).
# tools/bench/triton.ts serves Serval's Python models with python-libpython when it exists.
#
# Idempotent: a stamp file records the pins; when it matches, the stub is in
# place, its libpython is the venv's (or no interpreter has it) and
# `tritonserver --help` runs, it does nothing.
#
# Environment knobs:
#   PYTHON=python3.11          interpreter used to create the venv (3.9-3.12: numpy 1.26.4 has wheels for those;
#                              kept even when its build is not the stub's)
#   SERVAL_TRITON_VENV=/path   venv location (default <repo>/.venv-triton)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SERVAL_TRITON_VENV:-$ROOT/.venv-triton}"

PYTRITON_WHEEL="nvidia-pytriton==0.7.0"
NUMPY_PIN="numpy==1.26.4"   # not the project's numpy 2 pin: see the header comment

log() { echo "setup-triton: $*"; }

pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  # The wheel carries stubs for 3.8-3.13, numpy 1.26.4 wheels exist for 3.9-3.12.
  for p in python3.11 python3.12 python3.10 python3.9 python3; do
    if command -v "$p" >/dev/null 2>&1 &&
      "$p" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 12) else 1)' 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "setup-triton: no python3 between 3.9 and 3.12 found" >&2
  exit 1
}

stamp_value() { echo "$PYTRITON_WHEEL --no-deps; $NUMPY_PIN; stub" | sha256sum | cut -d' ' -f1; }

# Paths inside the venv (valid once the venv exists).
venv_paths() {
  PYVER="$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  SITE="$VENV/lib/python$PYVER/site-packages"
  TRITON="$SITE/pytriton/tritonserver"
}

# The libpython an interpreter's build installs (for a statically linked one, its build's shared library).
py_libpython() {
  "$1" -c 'import os, sysconfig as s; print(os.path.realpath(os.path.join(s.get_config_var("LIBDIR"), s.get_config_var("INSTSONAME"))))' 2>/dev/null
}

# The libpython an executable loads (resolved), with LD_LIBRARY_PATH=$2; nothing if none.
loaded_libpython() {
  LD_LIBRARY_PATH="${2:-}" ldd "$1" 2>/dev/null |
    awk '$1 ~ /^libpython/ && $3 ~ /^\// {print $3; exit}' | xargs -r realpath
}

# The libpython tritonserver's stub loads, with tools/reference/tritonserver.sh's library path.
stub_libpython() {
  loaded_libpython "$TRITON/backends/python/triton_python_backend_stub" "$SITE/nvidia_pytriton.libs"
}

# An installed python$PYVER whose libpython is the stub's, if the venv's is not; else nothing.
stub_python() {
  local want have p
  want="$(stub_libpython)"
  have="$(py_libpython "$VENV/bin/python")"
  [[ -n "$want" && "$want" != "$have" ]] || return 0
  for p in "$(command -v "python$PYVER" || true)" "/usr/bin/python$PYVER" "/usr/local/bin/python$PYVER"; do
    if [[ -x "$p" && "$(py_libpython "$p")" == "$want" ]]; then echo "$p"; return 0; fi
  done
}

LAUNCHER_C='#include <Python.h>
int main(int argc, char **argv) { return Py_BytesMain(argc, argv); }'

# python-libpython runs, in the venv, on the stub's libpython.
launcher_ok() {
  local l="$VENV/bin/python-libpython"
  [[ -x "$l" ]] || return 1
  [[ "$("$l" -c 'import sys; print(sys.prefix)' 2>/dev/null)" == "$VENV" ]] || return 1
  [[ "$(loaded_libpython "$l")" == "$(stub_libpython)" ]]
}

build_launcher() {
  local lib own inc cc
  rm -f "$VENV/bin/python-libpython"
  lib="$(stub_libpython)"
  own="$(py_libpython "$VENV/bin/python")"
  if [[ "$lib" != "$own" ]]; then
    # The venv's standard library is another build's: no launcher on the stub's library.
    log "warning: tritonserver's stub loads '$lib', the venv's python is built with '$own'${PYTHON:+ (PYTHON=$PYTHON)}: Python-model timings compare two builds"
    return 0
  fi
  inc="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  cc="$(command -v cc || command -v gcc || true)"
  if [[ -n "$lib" && -n "$cc" && -f "$inc/Python.h" ]] &&
    echo "$LAUNCHER_C" | "$cc" -O2 -I"$inc" -x c - -x none -o "$VENV/bin/python-libpython" \
      "$lib" -Wl,-rpath,"$(dirname "$lib")" 2>/dev/null && launcher_ok; then
    log "built $VENV/bin/python-libpython on $lib (the stub's libpython)"
  else
    rm -f "$VENV/bin/python-libpython"
    log "warning: no python-libpython (libpython '${lib:-none}', C compiler '${cc:-none}', $inc/Python.h): benchmarks run Serval's Python models on bin/python, not on the stub's libpython"
  fi
}

venv_ok() {
  [[ -x "$VENV/bin/python" ]] || return 1
  [[ -f "$VENV/.serval-triton-stamp" && "$(cat "$VENV/.serval-triton-stamp")" == "$(stamp_value)" ]] || return 1
  venv_paths
  [[ -x "$TRITON/backends/python/triton_python_backend_stub" ]] || return 1
  [[ -n "${PYTHON:-}" || -z "$(stub_python)" ]] || return 1
  [[ "$("$VENV/bin/python" -c 'import numpy; print("numpy==" + numpy.__version__)' 2>/dev/null)" == "$NUMPY_PIN" ]] || return 1
  # tritonserver has no --version; --help prints the usage (and exits 1) once the binary and its libraries load.
  local usage
  usage="$(SERVAL_TRITON_VENV="$VENV" "$ROOT/tools/reference/tritonserver.sh" --help 2>&1 || true)"
  [[ "$usage" == *--model-repository* ]] || return 1
}

if venv_ok; then
  launcher_ok || build_launcher
  log "$VENV is up to date (tritonserver 2.51.0, Python $PYVER, $NUMPY_PIN)"
  exit 0
fi

install_venv() {
  local py="$1"
  if [[ -e "$VENV" ]] && ! "$VENV/bin/python" -c 'import sys; assert (3, 9) <= sys.version_info[:2] <= (3, 12)' 2>/dev/null; then
    log "removing unusable $VENV"
    rm -rf "$VENV"
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV with $py ($("$py" --version 2>&1))"
    "$py" -m venv "$VENV"
  fi
  venv_paths

  export PIP_DISABLE_PIP_VERSION_CHECK=1
  log "installing $PYTRITON_WHEEL and $NUMPY_PIN (--no-deps: pip will not complain about pytriton's own, unused, requirements)"
  "$VENV/bin/python" -m pip install --quiet --no-input --no-deps "$PYTRITON_WHEEL"
  "$VENV/bin/python" -m pip install --quiet --no-input --no-deps "$NUMPY_PIN"   # numpy has no dependencies

  STUB="$TRITON/python_backend_stubs/$PYVER/triton_python_backend_stub"
  [[ -f "$STUB" ]] || { echo "setup-triton: the wheel has no Python-backend stub for Python $PYVER ($STUB)" >&2; exit 1; }
  install -m 0755 "$STUB" "$TRITON/backends/python/triton_python_backend_stub"
  chmod +x "$TRITON/bin/tritonserver"
}

install_venv "$(pick_python)"
MATCH=""
[[ -n "${PYTHON:-}" ]] || MATCH="$(stub_python)"   # an interpreter named in PYTHON is kept
if [[ -n "$MATCH" ]]; then
  log "tritonserver's stub loads $(stub_libpython), the build of $MATCH, not the venv's ($(py_libpython "$VENV/bin/python")): making the venv again with $MATCH, so both servers run models on one Python build"
  rm -rf "$VENV"
  install_venv "$MATCH"
fi
build_launcher

stamp_value >"$VENV/.serval-triton-stamp"
venv_ok || {
  echo "setup-triton: verification of $VENV failed; tritonserver --version says:" >&2
  SERVAL_TRITON_VENV="$VENV" "$ROOT/tools/reference/tritonserver.sh" --help 2>&1 | head -n 20 >&2 || true
  exit 1
}
log "ready: $VENV (tritonserver 2.51.0, Python $PYVER, $NUMPY_PIN); run it with tools/reference/tritonserver.sh"
