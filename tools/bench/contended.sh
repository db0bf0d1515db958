#!/usr/bin/env bash
# The ceiling (a) when the 2 cores are shared: the same in-process onnxruntime-node loop as (a),
# alone and then while perf_analyzer drives the bare fastify server at concurrency 16 (the
# protocol work any server does, without any model). It shows how much of (a) is left for a
# model once requests are being received and answered on the same cores.
#
#   npm run build && bash tools/bench/contended.sh [MODEL] [BATCHES] [SECONDS]
#   (defaults: ranker_mlp 1,16,64 4)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
MODEL="${1:-ranker_mlp}"
BATCHES="${2:-1,16,64}"
SECONDS_EACH="${3:-4}"
PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
ONNX="model_repository/$MODEL/1/model.onnx"
LOG="$(mktemp -d)"

node dist/tools/bench/bare_http.js --port 0 >"$LOG/bare.log" 2>&1 &
BARE=$!
trap 'kill $BARE 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q "Started HTTPService" "$LOG/bare.log" && break; sleep 0.1; done
PORT="$(sed -n 's/.*Started HTTPService at [^:]*:\([0-9]*\).*/\1/p' "$LOG/bare.log")"

ceiling() { # threads -> "batch items/s" lines
  node dist/tools/bench_onnx.js "$ONNX" --batch "$BATCHES" --threads "$1" --seconds "$SECONDS_EACH" 2>&1 |
    sed -n 's/.*batch *\([0-9]*\): *\([0-9.]*\) items\/s.*/\1 \2/p'
}

echo "| model | intra-op threads | batch | alone items/s | next to the loaded bare server items/s | kept | bare server req/s meanwhile |"
echo "|---|---|---|---|---|---|---|"
for t in 1 2; do
  ceiling "$t" >"$LOG/alone"
  "$PA" -m simple -i http -u "127.0.0.1:$PORT" --concurrency-range 16:16 -p 3000 -s 1 -r 40 \
    --input-data tools/perf/simple_input.json >"$LOG/pa" 2>&1 &
  PAPID=$!
  sleep 2
  before="$(curl -s "127.0.0.1:$PORT/v2/models/simple/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model_stats"][0]["inference_stats"]["success"]["count"])')"
  t0=$(date +%s.%N)
  ceiling "$t" >"$LOG/contended"
  t1=$(date +%s.%N)
  after="$(curl -s "127.0.0.1:$PORT/v2/models/simple/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["model_stats"][0]["inference_stats"]["success"]["count"])')"
  kill "$PAPID" 2>/dev/null || true
  wait "$PAPID" 2>/dev/null || true
  rate="$(python3 -c "print(round(($after - $before) / ($t1 - $t0)))")"
  join "$LOG/alone" "$LOG/contended" | while read -r b alone cont; do
    echo "| $MODEL | $t | $b | $alone | $cont | $(python3 -c "print(f'{100 * $cont / $alone:.0f}%')") | $rate |"
  done
done
