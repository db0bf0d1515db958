#!/usr/bin/env bash
# Serval's benchmark in one command: the onnxruntime-node ceiling, Serval without / with
# dynamic batching and with 2 instances (ranker_mlp, image_classifier, resnet50), the bare
# fastify / grpc-js protocol ceiling vs Serval's `simple`, Serval's own overhead, the targets,
# and CPU profiles of the server under load. Writes docs/benchmarks.md (the generated section)
# and tmp/bench/run-<time>/ (logs, perf_analyzer CSVs, profiles, results.json).
#
#   npm run build && bash tools/bench/run.sh            # full, ~12 min on 2 cores (at most ~15 with noise retries)
#   bash tools/bench/run.sh --quick                      # ~2.5 min: concurrency 32, gRPC only for the models, no profiles
#   bash tools/bench/run.sh --models ranker_mlp,simple   # a subset (ranker_mlp, image_classifier, resnet50, simple)
#   bash tools/bench/run.sh --profile | --no-profile     # force CPU profiles on / off
#   bash tools/bench/run.sh --out /tmp/bench.md          # write the report elsewhere
#
# Needs a built tree (npm run build) and perf_analyzer (bash tools/ci/setup-python.sh, or
# PERF_ANALYZER=/path/to/perf_analyzer). Nothing else may load the machine meaningfully while
# it runs; the report says how much CPU other processes used during every measurement.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

PA="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
if [[ ! -x "$PA" ]]; then
  echo "bench: $PA not found; run 'bash tools/ci/setup-python.sh' first (or set PERF_ANALYZER)" >&2
  exit 1
fi
for f in dist/src/cli.js dist/tools/bench_onnx.js dist/tools/gen_resnet50.js dist/tools/bench/bench.js dist/tools/bench/bare_http.js dist/tools/bench/bare_grpc.js; do
  if [[ ! -f "$f" ]]; then
    echo "bench: $f not found; run 'npm run build' first" >&2
    exit 1
  fi
done

exec node dist/tools/bench/bench.js "$@"
