#!/usr/bin/env bash
# Side-by-side A/B of Serval builds (or the bare protocol servers) under perf_analyzer: every
# server starts at once, and the runs interleave, so machine noise hits all of them alike.
# Prints infer/s, the main thread's and the whole process's CPU per request (from /proc), and
# the server-side breakdown perf_analyzer reads from the statistics extension.
#
#   npm run build && cp -r dist tmp/ab-a      # build A, keep a copy; change, build B the same way
#   bash tools/bench/ab.sh tmp/ab-a tmp/ab-b [bare]
#
# Environment: MODEL (simple), CONC (16), REPO (model_repository), PROTOS ("grpc http"),
# ROUNDS (2), WIN (perf_analyzer -p, 1500), PA_ARGS (extra perf_analyzer arguments; default
# the validated `simple` input data when MODEL is simple), SERVAL_ARGS (extra server flags),
# AB_LOG_DIR (where the servers' logs go; tmp).
# "bare" stands for tools/bench/bare_http.js and bare_grpc.js (only for MODEL=simple).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
MODEL=${MODEL:-simple}
CONC=${CONC:-16}
REPO=${REPO:-model_repository}
ROUNDS=${ROUNDS:-2}
PROTOS=${PROTOS:-grpc http}
WIN=${WIN:-1500}
if [[ -z "${PA_ARGS+x}" ]]; then
  PA_ARGS=""
  [[ $MODEL == simple ]] && PA_ARGS="--input-data tools/perf/simple_input.json"
fi
[[ $# -ge 1 ]] || { echo "usage: $0 DIST_DIR|bare [DIST_DIR|bare ...]" >&2; exit 2; }

declare -A HTTP_PID GRPC_PID HTTP_PORT GRPC_PORT
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
base=$((20000 + RANDOM % 20000))
i=0
for d in "$@"; do
  hp=$((base + i * 3)); gp=$((hp + 1)); mp=$((hp + 2))
  if [[ $d == bare ]]; then
    node dist/tools/bench/bare_http.js --port "$hp" >"tmp/ab-bare-http.log" 2>&1 & HTTP_PID[$d]=$!; pids+=($!)
    node dist/tools/bench/bare_grpc.js --port "$gp" >"tmp/ab-bare-grpc.log" 2>&1 & GRPC_PID[$d]=$!; pids+=($!)
  else
    node "$d/src/cli.js" --model-repository "$REPO" --http-port "$hp" --grpc-port "$gp" --metrics-port "$mp" ${SERVAL_ARGS:-} >"${AB_LOG_DIR:-tmp}/ab-server-$i.log" 2>&1 &
    HTTP_PID[$d]=$!; GRPC_PID[$d]=$!; pids+=($!)
  fi
  HTTP_PORT[$d]=$hp; GRPC_PORT[$d]=$gp; i=$((i + 1))
done
for d in "$@"; do
  for _ in $(seq 300); do curl -sf "localhost:${HTTP_PORT[$d]}/v2/health/ready" >/dev/null 2>&1 && break; sleep 0.2; done
done

tick=$(getconf CLK_TCK)
thread_cpu() { awk '{print $14 + $15}' "/proc/$1/task/$1/stat"; }   # main thread, in ticks
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }              # all threads
for r in $(seq "$ROUNDS"); do
  for proto in $PROTOS; do
    for d in "$@"; do
      if [[ $proto == grpc ]]; then port=${GRPC_PORT[$d]}; pid=${GRPC_PID[$d]}; else port=${HTTP_PORT[$d]}; pid=${HTTP_PID[$d]}; fi
      m0=$(thread_cpu "$pid"); p0=$(proc_cpu "$pid"); t0=$(date +%s%N)
      out=$(timeout 120 "$PA" -m "$MODEL" -u "127.0.0.1:$port" -i "$proto" -b 1 --concurrency-range "$CONC:$CONC" -p "$WIN" -s 30 -r 5 $PA_ARGS 2>&1 || true)
      m1=$(thread_cpu "$pid"); p1=$(proc_cpu "$pid"); t1=$(date +%s%N)
      tp=$(grep -m1 'Throughput:' <<<"$out" | awk '{print $2}' || true)
      srv=$(grep -m1 'Avg request latency' <<<"$out" | sed 's/ *Avg request latency: /server /' || true)
      # Requests over the whole perf_analyzer run (stabilisation included) ≈ throughput × its wall time.
      python3 - "$r" "$proto" "$d" "${tp:-0}" "$t0" "$t1" "$m0" "$m1" "$p0" "$p1" "$tick" "$srv" <<'PY'
import sys
r, proto, d, tp, t0, t1, m0, m1, p0, p1, tick, srv = sys.argv[1:]
n = float(tp) * (int(t1) - int(t0)) / 1e9
us = lambda a, b: (float(b) - float(a)) / float(tick) * 1e6 / n if n else float('nan')
print(f"round {r} {proto:4} {d:24} {float(tp):9.1f} infer/s | main {us(m0, m1):6.1f} µs/req, process {us(p0, p1):6.1f} µs/req | {srv}")
PY
    done
  done
done
