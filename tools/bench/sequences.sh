#!/usr/bin/env bash
# Sequence batcher benchmark (docs/benchmarks.md, "Sequence models"): perf_analyzer over gRPC
# with 1, 8 and 32 concurrent sequences of 20 requests each, on the same graph
# (simple_dyna_sequence's) under three sequence_batching configs, interleaved round by round:
#
#   seq_direct        direct strategy: max_batch_size 8 = 8 slots; more sequences wait in the backlog
#   seq_oldest        oldest strategy, max_candidate_sequences 1024, no queue delay
#   seq_oldest_delay  oldest strategy, preferred_batch_size [8], max_queue_delay_microseconds 500
#
#   npm run build && bash tools/bench/sequences.sh [ROUNDS]      (default 2 rounds, ~2 min each)
#
# Needs the venv from tools/ci/setup-python.sh (perf_analyzer). Prints a markdown table; raw
# perf_analyzer output goes to tmp/bench/sequences/.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROUNDS="${1:-2}"
PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
OUT="$ROOT/tmp/bench/sequences"
REPO="$OUT/repo"
rm -rf "$OUT" && mkdir -p "$REPO"

# The three variants: the bundled model's graph and controls, only the strategy differs.
variant() { # variant NAME STRATEGY-BLOCK
  local dir="$REPO/$1"
  mkdir -p "$dir/1"
  cp "$ROOT/model_repository/simple_dyna_sequence/1/model.onnx" "$dir/1/"
  # Drop the bundled strategy block (3 lines from 'oldest {') and put ours in its place.
  sed -e "s/simple_dyna_sequence/$1/" -e '/^  oldest {$/,/^  }$/d' \
    -e "s/^  max_sequence_idle_microseconds: .*/&\n$2/" \
    "$ROOT/model_repository/simple_dyna_sequence/config.pbtxt" >"$dir/config.pbtxt"
}
variant seq_direct '  direct { }'
variant seq_oldest '  oldest { max_candidate_sequences: 1024 }'
variant seq_oldest_delay '  oldest { max_candidate_sequences: 1024 preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 500 }'

export SERVAL_MODEL_REPOSITORY="$REPO"
# shellcheck source=tools/ci/serval-server.sh
source "$ROOT/tools/ci/serval-server.sh"
serval_ensure_server "$OUT" || exit 1

declare -A TPUT LAT P99 BATCH
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for c in 1 8 32; do
    for m in seq_direct seq_oldest seq_oldest_delay; do
      log="$OUT/${m}_c${c}_r${round}.log"
      timeout 180 "$PA" -u "$SERVAL_URL_GRPC" -i grpc -m "$m" --sequence-length 20 \
        --sequence-id-range "$((round * 100000)):$((round * 100000 + 99999))" \
        --concurrency-range "$c" -p 3000 -s 100 -r 10 >"$log" 2>&1 || echo "  $m c$c round $round failed: see $log" >&2
      t="$(sed -n 's/.*Throughput: \([0-9.]*\) infer\/sec.*/\1/p' "$log" | tail -n1)"
      l="$(sed -n 's/.*p50 latency: \([0-9]*\) usec.*/\1/p' "$log" | tail -n1)"
      p="$(sed -n 's/.*p99 latency: \([0-9]*\) usec.*/\1/p' "$log" | tail -n1)"
      inf="$(sed -n 's/.*Inference count: \([0-9]*\).*/\1/p' "$log" | tail -n1)"
      exe="$(sed -n 's/.*Execution count: \([0-9]*\).*/\1/p' "$log" | tail -n1)"
      b="$(awk -v i="${inf:-0}" -v e="${exe:-0}" 'BEGIN { if (e > 0) printf "%.2f", i / e }')"
      echo "round $round  $m  concurrency $c: ${t:-?} infer/s, p50 ${l:-?} us, p99 ${p:-?} us, requests/execution ${b:-?}"
      key="$m/$c"
      TPUT[$key]="${TPUT[$key]:-} ${t:-0}"
      LAT[$key]="${LAT[$key]:-} ${l:-0}"
      P99[$key]="${P99[$key]:-} ${p:-0}"
      BATCH[$key]="${BATCH[$key]:-} ${b:-0}"
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
echo
echo "| sequences | config | infer/s | p50 µs | p99 µs | requests per execution |"
echo "|---|---|---|---|---|---|"
for c in 1 8 32; do
  for m in seq_direct seq_oldest seq_oldest_delay; do
    key="$m/$c"
    printf '| %s | `%s` | %.0f | %s | %s | %s |\n' "$c" "$m" "$(median <<<"${TPUT[$key]}")" \
      "$(median <<<"${LAT[$key]}")" "$(median <<<"${P99[$key]}")" "$(median <<<"${BATCH[$key]}")"
  done
done
echo "(median of $ROUNDS rounds; load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; raw output in ${OUT#"$ROOT"/}/)"
