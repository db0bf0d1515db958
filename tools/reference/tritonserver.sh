#!/usr/bin/env bash
# Runs the REAL tritonserver 2.51.0 installed by tools/ci/setup-triton.sh.
#
#   tools/reference/tritonserver.sh REPO HTTP_PORT GRPC_PORT METRICS_PORT [extra tritonserver flags...]
#   tools/reference/tritonserver.sh --help        (any first argument starting with '-' is passed through as is)
#
# It execs tritonserver (the caller's PID is the server's: kill it to stop it). PATH puts the venv first, so
# the Python-backend stub runs models with the venv's Python and numpy; LD_LIBRARY_PATH finds the libraries
# the wheel bundles (the CUDA runtime is loaded but unused without a GPU; "Failed to initialize NVML" and DCGM
# warnings are normal). See /work/shared/reference/tritonserver.md and docs/reference/decoupled.md.
#
# Environment knobs:
#   SERVAL_TRITON_VENV=/path   venv location (default <repo>/.venv-triton)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SERVAL_TRITON_VENV:-$ROOT/.venv-triton}"
[[ -x "$VENV/bin/python" ]] || { echo "tritonserver.sh: no venv at $VENV; run tools/ci/setup-triton.sh" >&2; exit 1; }
PYVER="$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
SITE="$VENV/lib/python$PYVER/site-packages"
TRITON="$SITE/pytriton/tritonserver"
[[ -x "$TRITON/bin/tritonserver" ]] || { echo "tritonserver.sh: no tritonserver in $TRITON; run tools/ci/setup-triton.sh" >&2; exit 1; }

export PATH="$VENV/bin:$PATH"
export LD_LIBRARY_PATH="$SITE/nvidia_pytriton.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [[ $# -ge 1 && "$1" == -* ]]; then
  exec "$TRITON/bin/tritonserver" "$@"
fi
if [[ $# -lt 4 ]]; then
  echo "usage: $0 REPO HTTP_PORT GRPC_PORT METRICS_PORT [extra tritonserver flags...]" >&2
  exit 2
fi
REPO="$(cd "$1" && pwd)"
HTTP_PORT="$2" GRPC_PORT="$3" METRICS_PORT="$4"
shift 4
exec "$TRITON/bin/tritonserver" \
  --model-repository "$REPO" \
  --backend-directory "$TRITON/backends" \
  --cache-directory "$TRITON/caches" \
  --http-port "$HTTP_PORT" --grpc-port "$GRPC_PORT" --metrics-port "$METRICS_PORT" \
  "$@"
