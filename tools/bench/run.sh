#!/usr/bin/env bash
# Serval's benchmark in one command. Runs every section in turn; each rewrites only its own
# marked block of docs/benchmarks.md (tools/bench/doc_section.ts) and keeps its raw output under
# tmp/bench/. Sections:
#   core      the onnxruntime-node ceiling, Serval without / with dynamic batching and with 2
#             instances, the bare fastify / grpc-js ceilings vs `simple`, Serval's own overhead,
#             the targets and CPU profiles (tools/bench/bench.ts)
#   peers     Serval vs MLServer vs the bare ceilings, interleaved (tools/bench/peers.ts)
#   density   memory and load time for 1 … 500 small models (tools/bench/density.ts)
#   seeds     the seeds' experiments replayed (tools/bench/seeds.ts)
#   latency   the latency-budget batcher vs fixed queue delays under Poisson load (tools/bench/latency_budget.ts)
#   decoupled streaming decoupled Python models, Serval vs tritonserver 2.51 (its venv made by
#             tools/ci/setup-triton.sh), and the one-response path before / after the decoupled
#             work (a baseline build in a git worktree under /tmp) (tools/bench/decoupled.ts)
#   triton    the Python backend vs tritonserver 2.51's on the same model.py files (tools/bench/triton.ts)
#
#   npm run bench                                    # every section, full
#   bash tools/bench/run.sh --quick                  # every section, short
#   bash tools/bench/run.sh --sections peers,density # some sections
#   bash tools/bench/run.sh --out /tmp/bench.md      # write the report elsewhere
#   bash tools/bench/run.sh --models ranker_mlp,simple --profile | --no-profile   # passed to `core`
#
# Needs a built tree (npm run build) and perf_analyzer (bash tools/ci/setup-python.sh, or
# PERF_ANALYZER=/path/to/perf_analyzer); sections install what else they need (MLServer's venv,
# apache2-utils) themselves. Nothing else may load the machine meaningfully while it runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
if [[ ! -x "$PA" ]]; then
  echo "bench: $PA not found; run 'bash tools/ci/setup-python.sh' first (or set PERF_ANALYZER)" >&2
  exit 1
fi

SECTIONS="core,peers,density,seeds,latency,decoupled,triton"
COMMON=()
CORE=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sections) SECTIONS="$2"; shift 2 ;;
    --quick) COMMON+=("$1"); shift ;;
    --out) COMMON+=("$1" "$2"); shift 2 ;;
    *) CORE+=("$1"); shift ;;
  esac
done

script_of() {
  case "$1" in
    core) echo dist/tools/bench/bench.js ;;
    peers) echo dist/tools/bench/peers.js ;;
    density) echo dist/tools/bench/density.js ;;
    seeds) echo dist/tools/bench/seeds.js ;;
    latency) echo dist/tools/bench/latency_budget.js ;;
    decoupled) echo dist/tools/bench/decoupled.js ;;
    triton) echo dist/tools/bench/triton.js ;;
    *) echo "bench: unknown section '$1' (core, peers, density, seeds, latency, decoupled, triton)" >&2; return 1 ;;
  esac
}

IFS=',' read -r -a WANT <<<"$SECTIONS"
for s in "${WANT[@]}"; do
  f="$(script_of "$s")"
  if [[ ! -f "$f" ]]; then
    echo "bench: $f not found; run 'npm run build' first" >&2
    exit 1
  fi
done

failed=()
for s in "${WANT[@]}"; do
  f="$(script_of "$s")"
  echo "=== bench section: $s ($(date -u +%H:%M:%S)) ==="
  args=("${COMMON[@]+"${COMMON[@]}"}")
  [[ "$s" == core ]] && args+=("${CORE[@]+"${CORE[@]}"}")
  if ! node "$f" "${args[@]+"${args[@]}"}"; then
    failed+=("$s")
    echo "bench: section $s failed; going on with the others" >&2
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "bench: failed sections: ${failed[*]}" >&2
  exit 1
fi
