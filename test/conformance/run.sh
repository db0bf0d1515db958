#!/usr/bin/env bash
# The one entry point of the Serval conformance suite:
#
#   1. tools/ci/setup-python.sh   .venv with the official tritonclient + perf_analyzer
#      test/conformance/setup-kserve.sh   .venv-kserve with the KServe Python SDK
#   2. tools/ci/install-ghz.sh    ghz into .tools/bin
#   3. pytest test/conformance    official clients vs. a Serval it starts itself
#   4. reference                  tools/ci/setup-triton.sh, then pytest test/reference: the real
#                                 tritonserver 2.51 and Serval side by side (docs/reference/README.md)
#   5. tools/perf/run-perf-analyzer.sh   perf_analyzer over gRPC and HTTP
#   6. tools/ci/run-ghz.sh        bounded ghz ModelInfer load
#
# Builds nothing: run `npm run build` first (dist/src/cli.js must exist).
# Exits non-zero if any stage fails (the reference stage too when tritonserver cannot be
# installed). Takes about 5-6 minutes on 2 cores.
#
# Usage: test/conformance/run.sh [--strict] [--quick] [--no-perf] [--no-ghz] [-- PYTEST_ARGS...]
#   --strict    ignore test/conformance/known_failures.txt (SERVAL_STRICT=1)
#   --quick     skip the >4 MiB payload tests (-m "not slow") and the load stages
#   SERVAL_URL_HTTP / SERVAL_URL_GRPC   test an already running server instead
#   SERVAL_SKIP_REFERENCE=1   skip the reference stage (local runs only; CI runs it)
#
# Logs: tmp/conformance/ (server log, junit*.xml), tmp/reference/, tmp/perf/, tmp/ghz/.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the work tree

RUN_PERF=1 RUN_GHZ=1 PYTEST_EXTRA=()
while (($#)); do
  case "$1" in
    --strict) export SERVAL_STRICT=1 ;;
    --quick) PYTEST_EXTRA+=(-m "not slow"); RUN_PERF=0; RUN_GHZ=0 ;;
    --no-perf) RUN_PERF=0 ;;
    --no-ghz) RUN_GHZ=0 ;;
    --) shift; PYTEST_EXTRA+=("$@"); break ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

mkdir -p tmp/conformance
rm -f tmp/conformance/stage_*.log tmp/conformance/junit*.xml
declare -A RESULT
ORDER=()
stage() { # stage NAME CMD...
  local name="$1" t0=$SECONDS
  shift
  echo
  echo "=== conformance: $name"
  "$@" 2>&1 | tee "tmp/conformance/stage_${name}.log"
  local rc=${PIPESTATUS[0]}
  RESULT[$name]="$rc:$((SECONDS - t0))s"
  ORDER+=("$name")
  return "$rc"
}

stage setup-python bash tools/ci/setup-python.sh || { echo "setup-python failed" >&2; exit 1; }
# The KServe SDK for test_kserve_clients.py, in .venv-kserve (its dependencies stay out of .venv);
# a failed install is reported in the summary and fails the run, and the tests still run.
stage setup-kserve bash test/conformance/setup-kserve.sh
if ((RUN_GHZ)); then
  stage install-ghz bash tools/ci/install-ghz.sh || RUN_GHZ=0
fi

if [[ -z "${SERVAL_URL_HTTP:-}${SERVAL_URL_GRPC:-}" && ! -f dist/src/cli.js ]]; then
  echo "run.sh: dist/src/cli.js not found; run 'npm run build' first" >&2
  exit 1
fi

# Test files or node ids given after `--` replace the default (the whole folder).
TARGET=(test/conformance)
for a in "${PYTEST_EXTRA[@]}"; do
  [[ "$a" == test/conformance/* ]] && TARGET=() && break
done
stage pytest .venv/bin/python -m pytest "${TARGET[@]}" \
  --junitxml=tmp/conformance/junit.xml "${PYTEST_EXTRA[@]}"

# The real tritonserver 2.51 and Serval side by side. No skip when tritonserver cannot be
# installed (PyPI unreachable): the stage fails; SERVAL_SKIP_REFERENCE=1 skips it locally.
reference() {
  bash tools/ci/setup-triton.sh || {
    echo "run.sh: tools/ci/setup-triton.sh failed: the reference stage needs tritonserver 2.51" \
      "(SERVAL_SKIP_REFERENCE=1 skips it locally)" >&2
    return 1
  }
  .venv/bin/python -m pytest test/reference --junitxml=tmp/conformance/junit-reference.xml
}
if [[ "${SERVAL_SKIP_REFERENCE:-}" == 1 ]]; then
  echo
  echo "=== conformance: reference skipped (SERVAL_SKIP_REFERENCE=1)"
else
  stage reference reference
fi

if ((RUN_PERF)); then
  stage perf_analyzer bash tools/perf/run-perf-analyzer.sh
fi
if ((RUN_GHZ)); then
  stage ghz bash tools/ci/run-ghz.sh
fi

echo
echo "=== conformance summary"
failed=0
for name in "${ORDER[@]}"; do
  rc="${RESULT[$name]%%:*}"
  printf '  %-16s %-8s %s\n' "$name" "$([[ "$rc" == 0 ]] && echo ok || echo "FAIL($rc)")" "${RESULT[$name]#*:}"
  [[ "$rc" == 0 ]] || failed=1
done
# One closing count over everything: pytest cases (xfail counted as skipped),
# perf_analyzer runs and ghz runs.
python3 - <<'EOF' || true
import re, pathlib, xml.etree.ElementTree as ET
passed = failed = skipped = 0
for j in sorted(pathlib.Path("tmp/conformance").glob("junit*.xml")):
    for s in ET.parse(j).getroot().iter("testsuite"):
        t, f, e, sk = (int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        passed += t - f - e - sk; failed += f + e; skipped += sk
pa = pathlib.Path("tmp/conformance/stage_perf_analyzer.log")
if pa.exists():
    m = re.search(r"perf_analyzer: (\d+) passed, (\d+) failed", pa.read_text())
    if m:
        passed += int(m.group(1)); failed += int(m.group(2))
    else:
        failed += 1
g = pathlib.Path("tmp/conformance/stage_ghz.log")
if g.exists():
    txt = g.read_text()
    runs, bad = txt.count("-- ghz "), txt.count("   FAILED")
    passed += max(runs - bad, 0); failed += bad
print(f"conformance: {passed} passed, {failed} failed, {skipped} skipped")
EOF
exit "$failed"
