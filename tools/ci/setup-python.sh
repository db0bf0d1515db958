#!/usr/bin/env bash
# Creates <repo>/.venv with the official Triton clients used by the
# conformance suite (test/conformance/requirements.txt) and installs the
# official perf_analyzer binary as .venv/bin/perf_analyzer.
#
# Idempotent: when .venv already holds exactly the pinned set (a stamp file
# records the hash of requirements.txt and the perf_analyzer pin) and both
# `import tritonclient.grpc, tritonclient.http` and `perf_analyzer --version`
# work, it does nothing.
#
# perf_analyzer: PyPI's `perf-analyzer` is an empty placeholder (0.1.0) and
# the tritonclient wheels >= 2.52 that bundle bin/perf_analyzer are built on
# Ubuntu 24.04 (need glibc 2.38 / GLIBCXX_3.4.32), so they do not start on
# Debian 12 (glibc 2.36). tritonclient 2.51.0 is the newest wheel whose
# bundled perf_analyzer runs here; it links libb64.so.0d (Debian package
# libb64-0d) and libcudart.so.12 (PyPI wheel nvidia-cuda-runtime-cu12, only
# loaded, never used without a GPU). Both are installed below and a wrapper
# script sets LD_LIBRARY_PATH.
#
# Environment knobs:
#   PYTHON=python3.11      interpreter used to create the venv
#   SERVAL_VENV=/path      venv location (default <repo>/.venv)
#   SKIP_PERF_ANALYZER=1   do not install perf_analyzer
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SERVAL_VENV:-$ROOT/.venv}"
REQ="$ROOT/test/conformance/requirements.txt"

# The perf_analyzer pin (see the header comment for why 2.51.0).
PERF_ANALYZER_WHEEL="tritonclient==2.51.0"
CUDART_WHEEL="nvidia-cuda-runtime-cu12==12.9.79"
PERF_ANALYZER_APT_PKGS=(libb64-0d)
PA_DIR="$VENV/opt/perf_analyzer-2.51.0"

log() { echo "setup-python: $*"; }

pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  for p in python3.11 python3.12 python3 python; do
    if command -v "$p" >/dev/null 2>&1 &&
      "$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "setup-python: no python3 >= 3.9 found" >&2
  exit 1
}

as_root() {
  if [[ "$(id -u)" == 0 ]]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else
    echo "setup-python: need root to run: $*" >&2
    return 1
  fi
}

APT_UPDATED=0
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "setup-python: apt-get not available to install ${missing[*]}" >&2; return 1; }
  if ((APT_UPDATED == 0)); then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  log "apt-get install ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

stamp_value() {
  {
    sha256sum "$REQ" | cut -d' ' -f1
    if [[ "${SKIP_PERF_ANALYZER:-0}" != 1 ]]; then echo "$PERF_ANALYZER_WHEEL $CUDART_WHEEL"; fi
  } | sha256sum | cut -d' ' -f1
}

venv_ok() {
  [[ -x "$VENV/bin/python" ]] || return 1
  [[ -f "$VENV/.serval-setup-stamp" && "$(cat "$VENV/.serval-setup-stamp")" == "$(stamp_value)" ]] || return 1
  "$VENV/bin/python" -c 'import tritonclient.grpc, tritonclient.http, tritonclient.grpc.aio, tritonclient.http.aio, numpy, pytest, gevent' \
    >/dev/null 2>&1 || return 1
  if [[ "${SKIP_PERF_ANALYZER:-0}" != 1 ]]; then
    "$VENV/bin/perf_analyzer" --version >/dev/null 2>&1 || return 1
  fi
  return 0
}

if venv_ok; then
  log "$VENV is up to date ($("$VENV/bin/python" -c 'import importlib.metadata as m; print("tritonclient", m.version("tritonclient"))'))"
  exit 0
fi

PY="$(pick_python)"
if [[ -e "$VENV" ]] && ! "$VENV/bin/python" -c 'import sys; assert sys.version_info >= (3, 9)' 2>/dev/null; then
  log "removing unusable $VENV"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV with $PY ($("$PY" --version 2>&1))"
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    # Debian's system python needs python3-venv for ensurepip.
    rm -rf "$VENV"
    apt_install python3-venv
    "$PY" -m venv "$VENV"
  fi
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
PIP=("$VENV/bin/python" -m pip)

log "installing $(grep -cv '^\s*\(#\|$\)' "$REQ") pinned packages from ${REQ#"$ROOT"/}"
"${PIP[@]}" install --quiet --no-input -r "$REQ"

if [[ "${SKIP_PERF_ANALYZER:-0}" != 1 ]]; then
  apt_install "${PERF_ANALYZER_APT_PKGS[@]}"
  if [[ ! -x "$PA_DIR/bin/perf_analyzer" ]]; then
    log "installing perf_analyzer from $PERF_ANALYZER_WHEEL (+ $CUDART_WHEEL) into ${PA_DIR#"$ROOT"/}"
    rm -rf "$PA_DIR"
    "${PIP[@]}" install --quiet --no-input --no-deps --no-compile --target "$PA_DIR" \
      "$PERF_ANALYZER_WHEEL" "$CUDART_WHEEL"
    chmod +x "$PA_DIR/bin/perf_analyzer"
  fi
  CUDART_DIR="$PA_DIR/nvidia/cuda_runtime/lib"
  [[ -f "$CUDART_DIR/libcudart.so.12" ]] || { echo "setup-python: libcudart.so.12 missing in $CUDART_DIR" >&2; exit 1; }
  # Wrapper on the venv's PATH: `source .venv/bin/activate; perf_analyzer ...`
  cat >"$VENV/bin/perf_analyzer" <<EOF
#!/usr/bin/env bash
# Generated by tools/ci/setup-python.sh: official perf_analyzer from the
# $PERF_ANALYZER_WHEEL wheel, with the CUDA runtime it links found in
# the $CUDART_WHEEL wheel (no GPU is needed or used).
export LD_LIBRARY_PATH="$CUDART_DIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$PA_DIR/bin/perf_analyzer" "\$@"
EOF
  chmod +x "$VENV/bin/perf_analyzer"
  if ! out="$("$VENV/bin/perf_analyzer" --version 2>&1)"; then
    echo "setup-python: perf_analyzer does not start:" >&2
    echo "$out" >&2
    ldd "$PA_DIR/bin/perf_analyzer" >&2 || true
    exit 1
  fi
  log "$out"
  # --help is not a recognised flag (it prints usage and exits 99), so just
  # make sure the usage text comes out.
  help_out="$("$VENV/bin/perf_analyzer" --help 2>&1 || true)"
  [[ "$help_out" == *"--concurrency-range"* ]] ||
    { echo "setup-python: perf_analyzer --help printed no usage" >&2; exit 1; }
fi

stamp_value >"$VENV/.serval-setup-stamp"
venv_ok || { echo "setup-python: verification of $VENV failed" >&2; exit 1; }
log "ready: $VENV ($("$VENV/bin/python" -c 'import importlib.metadata as m; print("tritonclient", m.version("tritonclient"))'))"
