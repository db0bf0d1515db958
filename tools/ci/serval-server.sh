# shellcheck shell=bash
# Sourced helper: start Serval on ephemeral ports (or use a running server)
# for the load scripts (tools/perf/run-perf-analyzer.sh, tools/ci/run-ghz.sh).
#
#   source tools/ci/serval-server.sh
#   serval_ensure_server "$LOG_DIR"     # sets SERVAL_URL_HTTP/GRPC/METRICS
#   ...                                 # server stopped by an EXIT trap
#
# If SERVAL_URL_HTTP or SERVAL_URL_GRPC is already set, nothing is started.
# Needs a built server (npm run build -> dist/src/cli.js).

SERVAL_ROOT="${SERVAL_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
SERVAL_PID=""

serval_stop_server() {
  [[ -n "$SERVAL_PID" ]] || return 0
  local pid="$SERVAL_PID"
  SERVAL_PID=""
  if kill -0 "$pid" 2>/dev/null; then
    # The server runs in its own process group (setsid): signal the group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

serval_ensure_server() {
  local log_dir="$1"
  if [[ -n "${SERVAL_URL_HTTP:-}" || -n "${SERVAL_URL_GRPC:-}" ]]; then
    echo "serval-server: using running server http=${SERVAL_URL_HTTP:-} grpc=${SERVAL_URL_GRPC:-}"
    return 0
  fi
  local cli="$SERVAL_ROOT/dist/src/cli.js"
  if [[ ! -f "$cli" ]]; then
    echo "serval-server: $cli not found; run 'npm run build' first" >&2
    return 1
  fi
  mkdir -p "$log_dir"
  local log="$log_dir/serval-server.log"
  local timeout="${SERVAL_STARTUP_TIMEOUT:-180}"
  echo "serval-server: starting node dist/src/cli.js (log: $log)"
  (
    cd "$SERVAL_ROOT" || exit 1
    # shellcheck disable=SC2086
    exec setsid node "$cli" --model-repository "${SERVAL_MODEL_REPOSITORY:-model_repository}" \
      --http-port 0 --grpc-port 0 --metrics-port 0 ${SERVAL_SERVER_ARGS:-}
  ) >"$log" 2>&1 </dev/null &
  SERVAL_PID=$!
  trap serval_stop_server EXIT

  local deadline=$((SECONDS + timeout)) http="" grpc="" metrics=""
  while ((SECONDS < deadline)); do
    if ! kill -0 "$SERVAL_PID" 2>/dev/null; then
      echo "serval-server: server exited during startup:" >&2
      tail -n 40 "$log" >&2
      SERVAL_PID=""
      return 1
    fi
    http="$(sed -n 's/.*Started HTTPService at [^ ]*:\([0-9][0-9]*\).*/\1/p' "$log" | tail -n1)"
    grpc="$(sed -n 's/.*Started GRPCInferenceService at [^ ]*:\([0-9][0-9]*\).*/\1/p' "$log" | tail -n1)"
    metrics="$(sed -n 's/.*Started Metrics Service at [^ ]*:\([0-9][0-9]*\).*/\1/p' "$log" | tail -n1)"
    if [[ -n "$http" && -n "$grpc" ]] &&
      curl -fsS -o /dev/null "http://127.0.0.1:$http/v2/health/ready" 2>/dev/null; then
      export SERVAL_URL_HTTP="127.0.0.1:$http" SERVAL_URL_GRPC="127.0.0.1:$grpc"
      [[ -n "$metrics" ]] && export SERVAL_URL_METRICS="127.0.0.1:$metrics"
      echo "serval-server: ready http=$SERVAL_URL_HTTP grpc=$SERVAL_URL_GRPC metrics=${SERVAL_URL_METRICS:-}"
      return 0
    fi
    sleep 0.2
  done
  echo "serval-server: not ready after ${timeout}s" >&2
  tail -n 40 "$log" >&2
  serval_stop_server
  return 1
}

# Server metadata 'extensions' (one per line), empty if unavailable.
serval_extensions() {
  [[ -n "${SERVAL_URL_HTTP:-}" ]] || return 0
  curl -fsS "http://$SERVAL_URL_HTTP/v2" 2>/dev/null |
    python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin).get("extensions", [])))' 2>/dev/null || true
}
