#!/usr/bin/env bash
# Response cache benchmark (docs/benchmarks.md, "Response cache"): perf_analyzer over gRPC on the
# bundled cached_mlp (~0.5 ms of compute a request) with a 32 KiB cache (about 14 of its
# responses), at concurrency 1 and 4, fed so that about 0%, 50%, 95% and 100% of requests hit:
#
#   uncached   the same model file with no response_cache in its config (the baseline)
#   hit0       40 distinct inputs in a cycle: LRU over 14 entries keeps none of them
#   hit50      one fixed input between distinct ones
#   hit95      the fixed input 19 times in 20
#   hit100     perf_analyzer's default: the same random input every time
#
#   npm run build && bash tools/bench/response_cache.sh [ROUNDS]     (default 1 round, ~2 min)
#
# Needs the venv from tools/ci/setup-python.sh (perf_analyzer). Prints a markdown table; raw
# perf_analyzer output goes to tmp/bench/response_cache/. With concurrency 4 the four clients step
# through the data on their own, so the hit rate drifts from the pattern's: the table shows the
# server's own count.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROUNDS="${1:-1}"
PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
OUT="$ROOT/tmp/bench/response_cache"
REPO="$OUT/repo"
rm -rf "$OUT" && mkdir -p "$REPO/cached_mlp/1" "$REPO/uncached_mlp/1"
cp "$ROOT/model_repository/cached_mlp/1/model.onnx" "$REPO/cached_mlp/1/"
cp "$ROOT/model_repository/cached_mlp/config.pbtxt" "$REPO/cached_mlp/"
cp "$ROOT/model_repository/cached_mlp/1/model.onnx" "$REPO/uncached_mlp/1/"
sed -e 's/cached_mlp/uncached_mlp/' -e '/^response_cache {$/,/^}$/d' \
  "$ROOT/model_repository/cached_mlp/config.pbtxt" >"$REPO/uncached_mlp/config.pbtxt"

python3 - "$OUT" <<'PY'
import base64, json, random, struct, sys
rng = random.Random(7)
vec = lambda: base64.b64encode(struct.pack("<512f", *(rng.gauss(0, 1) for _ in range(512)))).decode()
fixed, uniq = vec(), [vec() for _ in range(40)]
def write(name, seq):
    json.dump({"data": [{"INPUT": {"b64": v}} for v in seq]}, open(f"{sys.argv[1]}/{name}.json", "w"))
write("hit0", uniq)
write("hit50", [v for u in uniq for v in (fixed, u)])
write("hit95", [v for u in uniq[:20] for v in [fixed] * 19 + [u]])
PY

export SERVAL_MODEL_REPOSITORY="$REPO"
SERVAL_SERVER_ARGS="${SERVAL_SERVER_ARGS:-} --cache-config local,size=32768"
# shellcheck source=tools/ci/serval-server.sh
source "$ROOT/tools/ci/serval-server.sh"
serval_ensure_server "$OUT" || exit 1

num() { grep -m1 -oP "$1" "$2" || echo "-"; }
echo "| round | run | conc | infer/s | p50 µs | p99 µs | server µs/request | hits | cache hit µs |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for conc in 1 4; do
    for run in uncached hit0 hit50 hit95 hit100; do
      model=cached_mlp data=()
      case "$run" in
        uncached) model=uncached_mlp data=(--input-data "$OUT/hit0.json") ;;
        hit100) ;;
        *) data=(--input-data "$OUT/$run.json") ;;
      esac
      log="$OUT/pa_${run}_c${conc}_r${round}.log"
      timeout 180 "$PA" -u "$SERVAL_URL_GRPC" -i grpc -m "$model" "${data[@]}" --concurrency-range "$conc" \
        -p 3000 -s 100 -r 10 >"$log" 2>&1 || { echo "| $round | $run | $conc | failed (see $log) |"; continue; }
      hit="$(num 'Cache hit count: \K\d+' "$log")" miss="$(num 'Cache miss count: \K\d+' "$log")"
      share="-"
      [[ "$hit" != - && "$miss" != - ]] && share="$((100 * hit / (hit + miss)))%"
      echo "| $round | $run | $conc | $(num 'Throughput: \K[\d.]+' "$log") | $(num 'p50 latency: \K\d+' "$log") |" \
        "$(num 'p99 latency: \K\d+' "$log") | $(num 'Avg request latency: \K\d+' "$log") | $share |" \
        "$([[ $run == uncached ]] && echo - || num 'Average Cache Hit Latency: \K\d+' "$log") |"
    done
  done
done
