#!/usr/bin/env bash
# Runs NVIDIA's official perf_analyzer against Serval the ways users do, over
# gRPC and HTTP, with short measurement windows (about 2-3 minutes in all).
#
#   tools/perf/run-perf-analyzer.sh                # builds nothing; starts
#                                                  # dist/src/cli.js itself
#   SERVAL_URL_GRPC=host:8001 SERVAL_URL_HTTP=host:8000 tools/perf/run-perf-analyzer.sh
#   tools/perf/run-perf-analyzer.sh -k simple_     # only runs whose name matches
#
# Needs the venv from tools/ci/setup-python.sh (it provides perf_analyzer) and,
# unless a URL is given, a built server (npm run build).
#
# Every run's full output and CSV (-f) go to $PERF_LOG_DIR (default
# tmp/perf/); a summary table is printed at the end. Exit status is non-zero
# if any run fails (perf_analyzer exits 99 on errors, including a response
# that does not match the validation_data in tools/perf/simple_input.json).
#
# Knobs (environment):
#   PA_MEASUREMENT_INTERVAL  ms per measurement window          (default 1000)
#   PA_STABILITY             -s stability threshold, percent    (default 50)
#   PA_MAX_TRIALS            -r max windows per load level       (default 10)
#   PA_RUN_TIMEOUT           seconds before a run is killed (default 120)
#   PERF_ANALYZER            binary (default .venv/bin/perf_analyzer)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tools/ci/serval-server.sh
source "$ROOT/tools/ci/serval-server.sh"

FILTER=""
if [[ "${1:-}" == "-k" && -n "${2:-}" ]]; then FILTER="$2"; fi

PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
LOG_DIR="${PERF_LOG_DIR:-$ROOT/tmp/perf}"
INTERVAL="${PA_MEASUREMENT_INTERVAL:-1000}"
STABILITY="${PA_STABILITY:-50}"
TRIALS="${PA_MAX_TRIALS:-10}"
INPUT_JSON="$ROOT/tools/perf/simple_input.json"

if [[ ! -x "$PA" ]]; then
  echo "run-perf-analyzer: $PA not found; run tools/ci/setup-python.sh first" >&2
  exit 1
fi
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/pa_*.log "$LOG_DIR"/pa_*.csv
# A small response cache (32 KiB: about 14 responses of cached_mlp, the one model whose config
# enables it; the others never use it), so the cache runs below can hold some inputs and not all.
# --allow-client-shm: the --shared-memory system runs below (refused by default, as Triton 2.73).
SERVAL_SERVER_ARGS="${SERVAL_SERVER_ARGS:-} --cache-config local,size=32768 --allow-client-shm=true"
# A server given by URL was started by someone else, perhaps without a cache: the cache checks only report.
OWN_SERVER=1
[[ -n "${SERVAL_URL_HTTP:-}" || -n "${SERVAL_URL_GRPC:-}" ]] && OWN_SERVER=""
serval_ensure_server "$LOG_DIR" || exit 1
EXTENSIONS="$(serval_extensions)"
echo "run-perf-analyzer: $("$PA" --version 2>&1), server extensions: $(tr "\n" " " <<<"$EXTENSIONS")"
if ! grep -qx statistics <<<"$EXTENSIONS" && [[ -n "$EXTENSIONS" ]]; then
  echo "run-perf-analyzer: WARNING: server lacks the 'statistics' extension;" \
    "perf_analyzer aborts (exit 99) at its first measurement when the statistics request fails." >&2
fi

COMMON=(-p "$INTERVAL" -s "$STABILITY" -r "$TRIALS")

declare -a NAMES=() RCS=() SUMMARIES=() SECS=()
FAILED=0

run() { # run NAME PROTOCOL ARGS...
  local name="$1" proto="$2"
  shift 2
  [[ -z "$FILTER" || "$name" == *"$FILTER"* ]] || return 0
  local url
  if [[ "$proto" == grpc ]]; then url="${SERVAL_URL_GRPC:-}"; else url="${SERVAL_URL_HTTP:-}"; fi
  if [[ -z "$url" ]]; then
    echo "-- $name: skipped (no $proto URL)"
    return 0
  fi
  local log="$LOG_DIR/pa_${name}.log" csv="$LOG_DIR/pa_${name}.csv"
  local cmd=("$PA" -u "$url" -i "$proto" "${COMMON[@]}" -f "$csv" "$@")
  echo "-- $name: perf_analyzer -u $url -i $proto ${COMMON[*]} $*"
  local t0=$SECONDS
  { echo "# ${cmd[*]}"; timeout "${PA_RUN_TIMEOUT:-120}" "${cmd[@]}"; } >"$log" 2>&1
  local rc=$?
  if ((rc != 0)) && grep -q "Failed to obtain stable measurement" "$log"; then
    # Noise on a busy 2-core box, not a server error: one retry with
    # looser stability and more windows.
    echo "   unstable measurement; retrying with -s 100 -r 20"
    cmd=("$PA" -u "$url" -i "$proto" -p "$INTERVAL" -s 100 -r 20 -f "$csv" "$@")
    { echo "# retry: ${cmd[*]}"; timeout "${PA_RUN_TIMEOUT:-120}" "${cmd[@]}"; } >>"$log" 2>&1
    rc=$?
  fi
  # Every run must print its server-side section (the statistics API read before and after
  # each window) with a queue/compute breakdown (cache hit/miss instead of compute for a model
  # with the response cache enabled).
  if ((rc == 0)) && ! grep -qE 'Avg request latency: .*queue .*(compute infer|cache hit/miss)' "$log"; then
    echo "   no server-side section in the output"
    rc=98
  fi
  local summary
  summary="$(grep -E '^(Concurrency|Request Rate): .*throughput' "$log" | tr '\n' ';' | sed 's/;$//')"
  [[ -z "$summary" ]] && summary="$(grep -vE '^\s*$' "$log" | tail -n 2 | tr '\n' ' ')"
  NAMES+=("$name") RCS+=("$rc") SUMMARIES+=("$summary") SECS+=($((SECONDS - t0)))
  if ((rc != 0)); then
    FAILED=1
    echo "   FAILED (exit $rc), last lines of $log:"
    tail -n 15 "$log" | sed 's/^/   | /'
  else
    echo "   ok: $summary"
  fi
}

for proto in grpc http; do
  # Classic batch-1 and batched runs on Triton's 'simple' model.
  run "${proto}_simple_b1_conc" "$proto" -m simple -b 1 --concurrency-range 1:8:3
  run "${proto}_simple_b4" "$proto" -m simple -b 4 --concurrency-range 2
  # Open-loop load at a fixed request rate, both distributions.
  run "${proto}_simple_rate_poisson" "$proto" -m simple --request-rate-range 200 --request-distribution poisson
  run "${proto}_simple_rate_constant" "$proto" -m simple --request-rate-range 200 --request-distribution constant
  # Real data from a JSON file, with perf_analyzer validating every output.
  run "${proto}_simple_input_json" "$proto" -m simple --input-data "$INPUT_JSON" --concurrency-range 2
  # Variable-size input: --shape is required for dims [-1].
  run "${proto}_identity_fp32_shape" "$proto" -m identity_fp32 -b 2 --shape INPUT0:1024 --concurrency-range 2
  # BYTES tensors (simple_string parses its strings as integers).
  run "${proto}_simple_string" "$proto" -m simple_string --string-data 7 --concurrency-range 1
  # Dynamic batching models.
  run "${proto}_ranker_mlp_b16" "$proto" -m ranker_mlp -b 16 --concurrency-range 4
done
# Async client mode at higher concurrency (gRPC) and larger tensors.
run grpc_simple_async_c8 grpc -m simple -a --concurrency-range 8
run grpc_image_classifier grpc -m image_classifier -b 1 --concurrency-range 2
run grpc_simple_compressed grpc -m simple --grpc-compression-algorithm gzip --concurrency-range 2
# HTTP with JSON tensors instead of the binary tensor extension.
run http_simple_json_tensors http -m simple --input-tensor-format json --output-tensor-format json --concurrency-range 2
# gRPC bidirectional streaming (ModelStreamInfer): concurrency N keeps N requests in flight on
# one stream; outputs validated against the JSON file; and a dynamic-batching model.
run grpc_simple_streaming_input_json grpc -m simple --streaming --input-data "$INPUT_JSON" --concurrency-range 4
run grpc_ranker_mlp_streaming grpc -m ranker_mlp --streaming -b 4 --concurrency-range 8
# Sequence models (the sequence batcher): perf_analyzer sends sequences of 10 requests with
# correlation IDs from the range, START on the first and END on the last; direct strategy
# (simple_sequence) and oldest (simple_dyna_sequence) on the stream.
run grpc_simple_sequence grpc -m simple_sequence --sequence-length 10 --sequence-id-range 1:1000 --concurrency-range 4
run grpc_dyna_sequence_streaming grpc -m simple_dyna_sequence --streaming --sequence-length 10 --sequence-id-range 1:1000 --concurrency-range 8
# The Triton tutorial's Python model (food_classifier: Pillow + numpy, then image_classifier
# through BLS), fed the way the tutorial's client feeds it: a base64 string in a BYTES tensor. The
# JSON's b64 holds the serialized BYTES element (4-byte length, then the string), as perf_analyzer
# expects for BYTES. Each batch-1 request of the concurrency-8 run waits while the stub works, so
# the dynamic batcher must merge them: check_batched reads the server-side counts it printed.
FOOD_JSON="$LOG_DIR/food_input.json"
python3 - "$ROOT/docs/examples/food.jpg" "$FOOD_JSON" <<'PY'
import base64, json, struct, sys
s = base64.b64encode(open(sys.argv[1], "rb").read())
json.dump({"data": [{"INPUT_IMAGE": {"b64": base64.b64encode(struct.pack("<I", len(s)) + s).decode()}}]}, open(sys.argv[2], "w"))
PY
check_batched() { # check_batched NAME: the server executed fewer batches than it inferred requests
  local name="$1" log="$LOG_DIR/pa_$1.log" i found=""
  for i in "${!NAMES[@]}"; do [[ "${NAMES[i]}" == "$name" ]] && found=1 && break; done
  [[ -n "$found" && -f "$log" ]] || return 0 # filtered out
  local inf exe
  inf="$(grep -m1 -oP 'Inference count: \K\d+' "$log")" exe="$(grep -m1 -oP 'Execution count: \K\d+' "$log")"
  if [[ -n "$inf" && -n "$exe" ]] && ((exe < inf)); then
    echo "   batched: $inf inferences in $exe executions"
  else
    echo "   FAILED: no batches > 1 formed (inference count '${inf}', execution count '${exe}')"
    RCS[i]=97 FAILED=1
  fi
}
# A decoupled model (repeat_int32: one response per element of IN, then the final flag alone)
# over the stream, as perf_analyzer requires (--streaming, gRPC): it detects the model as decoupled,
# measures latency to the first response and counts every response; check_decoupled reads that.
REPEAT_JSON="$LOG_DIR/repeat_input.json"
echo '{"data":[{"IN":{"content":[4,2,0,1],"shape":[4]},"DELAY":{"content":[0,0,0,0],"shape":[4]},"WAIT":[0]}]}' >"$REPEAT_JSON"
check_decoupled() { # check_decoupled NAME RESPONSES: decoupled detected, RESPONSES responses per request
  local name="$1" per="$2" log="$LOG_DIR/pa_$1.log" i found=""
  for i in "${!NAMES[@]}"; do [[ "${NAMES[i]}" == "$name" ]] && found=1 && break; done
  [[ -n "$found" && -f "$log" ]] || return 0 # filtered out
  local req resp
  req="$(grep -m1 -oP '^\s*Throughput: \K[0-9.]+' "$log")" resp="$(grep -m1 -oP 'Response Throughput: \K[0-9.]+' "$log")"
  if grep -q 'Detected decoupled model' "$log" && [[ -n "$req" && -n "$resp" ]] &&
    python3 -c "import sys; r, s, n = map(float, sys.argv[1:]); sys.exit(0 if abs(s / r - n) < 0.05 * n else 1)" "$req" "$resp" "$per"; then
    echo "   decoupled: $resp responses/s for $req requests/s ($per per request)"
  else
    echo "   FAILED: decoupled model not detected, or not $per responses per request (requests/s '${req}', responses/s '${resp}')"
    RCS[i]=96 FAILED=1
  fi
}
run grpc_repeat_int32_streaming grpc -m repeat_int32 --streaming --input-data "$REPEAT_JSON" --concurrency-range 4
check_decoupled grpc_repeat_int32_streaming 4
for proto in grpc http; do
  run "${proto}_food_classifier_b1_c8" "$proto" -m food_classifier -b 1 --input-data "$FOOD_JSON" --concurrency-range 8
  check_batched "${proto}_food_classifier_b1_c8"
done
run grpc_food_classifier_b16 grpc -m food_classifier -b 16 --input-data "$FOOD_JSON" --concurrency-range 1
check_batched grpc_food_classifier_b16
# The same image through the ensemble food_pipeline (Python preprocess -> image_classifier ->
# Python postprocess): perf_analyzer reads the ensemble's config, then the statistics of the
# ensemble and of each composing model, and prints the server-side times of each.
run grpc_food_pipeline_b1_c4 grpc -m food_pipeline -b 1 --input-data "$FOOD_JSON" --concurrency-range 4
# The response cache (docs/response_cache.md) on cached_mlp: 40 distinct inputs cycled through a
# cache that holds about 14 (LRU: every request misses), one fixed input between distinct ones
# (about half hit), and the fixed input 19 times in 20. check_cache_hits reads the hit and miss
# counts perf_analyzer printed from the server's statistics.
python3 - "$LOG_DIR" <<'PY'
import base64, json, random, struct, sys
rng = random.Random(7)
vec = lambda: base64.b64encode(struct.pack("<512f", *(rng.gauss(0, 1) for _ in range(512)))).decode()
fixed, uniq = vec(), [vec() for _ in range(40)]
def write(name, seq):
    json.dump({"data": [{"INPUT": {"b64": v}} for v in seq]}, open(f"{sys.argv[1]}/{name}.json", "w"))
write("cache_hit0", uniq)
write("cache_hit50", [v for u in uniq for v in (fixed, u)])
write("cache_hit95", [v for u in uniq[:20] for v in [fixed] * 19 + [u]])
PY
check_cache_hits() { # check_cache_hits NAME: the server-side section counted cache hits (or, with "none", none)
  local name="$1" log="$LOG_DIR/pa_$1.log" i found=""
  for i in "${!NAMES[@]}"; do [[ "${NAMES[i]}" == "$name" ]] && found=1 && break; done
  [[ -n "$found" && -f "$log" ]] || return 0 # filtered out
  local hit miss
  if [[ -z "$OWN_SERVER" ]]; then
    echo "   cache: $(grep -m1 -E 'Cache hit count' "$log" | xargs), $(grep -m1 -E 'Cache miss count' "$log" | xargs) (server not started here: not checked)"
    return 0
  fi
  hit="$(grep -m1 -oP 'Cache hit count: \K\d+' "$log")" miss="$(grep -m1 -oP 'Cache miss count: \K\d+' "$log")"
  if [[ -z "$hit" || -z "$miss" ]]; then
    echo "   FAILED: no cache hit/miss counts in the server-side section"
    RCS[i]=96 FAILED=1
  elif [[ "${2:-}" == none ]] && ((hit * 20 > hit + miss)); then
    echo "   FAILED: expected (almost) no cache hits, got $hit hits and $miss misses"
    RCS[i]=96 FAILED=1
  elif [[ "${2:-}" != none ]] && ((hit == 0)); then
    echo "   FAILED: no cache hits ($miss misses)"
    RCS[i]=96 FAILED=1
  else
    echo "   cache: $hit hits, $miss misses ($((100 * hit / (hit + miss)))% hits)"
  fi
}
run grpc_cached_mlp_hit100 grpc -m cached_mlp --concurrency-range 2
check_cache_hits grpc_cached_mlp_hit100
for pct in 0 50 95; do
  run "grpc_cached_mlp_hit${pct}" grpc -m cached_mlp --input-data "$LOG_DIR/cache_hit${pct}.json" --concurrency-range 1
  check_cache_hits "grpc_cached_mlp_hit${pct}" "$([[ $pct == 0 ]] && echo none)"
done
run http_cached_mlp_hit95 http -m cached_mlp --input-data "$LOG_DIR/cache_hit95.json" --concurrency-range 2
check_cache_hits http_cached_mlp_hit95

if grep -qx system_shared_memory <<<"$EXTENSIONS"; then
  # Inputs and outputs in system shared memory, the inputs from the JSON file. Its
  # validation_data is left out: perf_analyzer checks the outputs the response carries, and an
  # output in shared memory carries none (against Triton too), so validation always fails.
  # test/conformance/test_shared_memory.py checks what lands in the output regions.
  SHM_JSON="$LOG_DIR/simple_input_data_only.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("validation_data"); json.dump(d, open(sys.argv[2], "w"))' \
    "$INPUT_JSON" "$SHM_JSON"
  run grpc_simple_shm grpc -m simple --shared-memory system --input-data "$SHM_JSON" --concurrency-range 2
  run http_simple_shm http -m simple --shared-memory system --input-data "$SHM_JSON" --concurrency-range 2
fi

echo
echo "perf_analyzer summary (logs in ${LOG_DIR#"$ROOT"/}/):"
printf '  %-34s %-6s %5s  %s\n' RUN STATUS SECS RESULT
for i in "${!NAMES[@]}"; do
  status=ok
  ((RCS[i] != 0)) && status="FAIL(${RCS[i]})"
  printf '  %-34s %-6s %5s  %s\n' "${NAMES[i]}" "$status" "${SECS[i]}" "${SUMMARIES[i]:0:110}"
done
n_fail=0
for rc in "${RCS[@]}"; do ((rc != 0)) && n_fail=$((n_fail + 1)); done
echo "perf_analyzer: $(( ${#NAMES[@]} - n_fail )) passed, $n_fail failed"
exit "$FAILED"
