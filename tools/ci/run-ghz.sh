#!/usr/bin/env bash
# Short, bounded gRPC load on Serval's ModelInfer with ghz (https://ghz.sh),
# driven only by proto/grpc_service.proto (Triton-compatible, package
# "inference") and a JSON request carrying raw_input_contents for the
# `simple` model (tools/ci/ghz_simple_request.json: INPUT0 = 0..15,
# INPUT1 = 1s, little-endian INT32, base64 as protobuf JSON wants bytes).
#
#   tools/ci/run-ghz.sh                        # starts dist/src/cli.js itself
#   SERVAL_URL_GRPC=127.0.0.1:8001 tools/ci/run-ghz.sh
#
# Fails unless every request of every run returned OK.
# Knobs: GHZ_TOTAL (default 2000), GHZ_CONCURRENCY (8), GHZ_CONNECTIONS (2).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tools/ci/serval-server.sh
source "$ROOT/tools/ci/serval-server.sh"

LOG_DIR="${GHZ_LOG_DIR:-$ROOT/tmp/ghz}"
TOTAL="${GHZ_TOTAL:-2000}"
CONC="${GHZ_CONCURRENCY:-8}"
CONNS="${GHZ_CONNECTIONS:-2}"
GHZ="${GHZ:-$ROOT/.tools/bin/ghz}"
PROTO="$ROOT/proto/grpc_service.proto"
REQUEST="${GHZ_REQUEST:-$ROOT/tools/ci/ghz_simple_request.json}"

if [[ ! -x "$GHZ" ]]; then
  bash "$ROOT/tools/ci/install-ghz.sh" || exit 1
fi
[[ -f "$PROTO" ]] || { echo "run-ghz: $PROTO not found" >&2; exit 1; }
mkdir -p "$LOG_DIR"
serval_ensure_server "$LOG_DIR" || exit 1
if [[ -z "${SERVAL_URL_GRPC:-}" ]]; then
  echo "run-ghz: no gRPC endpoint (set SERVAL_URL_GRPC)" >&2
  exit 1
fi

FAILED=0
ghz_run() { # ghz_run NAME EXTRA_ARGS...
  local name="$1"
  shift
  local out="$LOG_DIR/ghz_${name}.json"
  echo "-- ghz $name: -n $TOTAL -c $CONC --connections $CONNS $* -> $SERVAL_URL_GRPC"
  timeout 300 "$GHZ" --insecure \
    --proto "$PROTO" --import-paths "$ROOT/proto" \
    --call inference.GRPCInferenceService/ModelInfer \
    --data-file "$REQUEST" \
    -n "$TOTAL" -c "$CONC" --connections "$CONNS" --timeout 20s \
    --count-errors -O json -o "$out" "$@" "$SERVAL_URL_GRPC" 2>"$LOG_DIR/ghz_${name}.stderr"
  local rc=$?
  if ((rc != 0)) || [[ ! -s "$out" ]]; then
    echo "   FAILED: ghz exited $rc"
    cat "$LOG_DIR/ghz_${name}.stderr" >&2
    FAILED=1
    return
  fi
  python3 - "$out" "$TOTAL" <<'EOF' || FAILED=1
import json, sys
r = json.load(open(sys.argv[1]))
total = int(sys.argv[2])
codes = r.get("statusCodeDistribution") or {}
errors = r.get("errorDistribution") or {}
ok = int(codes.get("OK", 0))
lat = r.get("latencyDistribution") or []
p = {d["percentage"]: d["latency"] / 1e6 for d in lat}
print(f"   requests={r.get('count')} ok={ok} rps={r.get('rps', 0):.0f} "
      f"avg={r.get('average', 0) / 1e6:.2f}ms p50={p.get(50, 0):.2f}ms p99={p.get(99, 0):.2f}ms")
bad = {k: v for k, v in codes.items() if k != "OK"}
if ok != total or bad or errors:
    print(f"   FAILED: status codes {codes}, errors {errors}")
    sys.exit(1)
EOF
}

ghz_run simple
ghz_run simple_gzip --enable-compression

if ((FAILED)); then
  echo "ghz: FAILED (outputs in ${LOG_DIR#"$ROOT"/}/)"
  exit 1
fi
echo "ghz: all requests OK (outputs in ${LOG_DIR#"$ROOT"/}/)"
