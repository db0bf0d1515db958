#!/usr/bin/env bash
# Regenerates the vendored custom-resource schemas under deploy/schemas/ that kubeconform checks
# the KServe manifests and the Helm chart's ServiceMonitor against (tools/ci/deploy-checks.sh):
#
#   serving.kserve.io/{inferenceservice_v1beta1,clusterservingruntime_v1alpha1}.json   KServe v0.16.0
#   monitoring.coreos.com/servicemonitor_v1.json                                         prometheus-operator v0.85.0
#
# The CRDs are generated from the pinned releases' Go API types, as the releases make them:
# controller-gen v0.16.2 with crd:maxDescLen=0 (KServe's Makefile), then KServe's post-generation
# edits (tools/deploy/crd_schemas.ts --relax-kserve). The result is compared with the CRD files the
# KServe release ships (its module's config/crd/full/), and the script fails if they differ.
# Not run by CI: the output is committed. Needs Go and the Go module proxy; takes about a minute.
#
#   bash tools/deploy/gen-crd-schemas.sh
set -euo pipefail

KSERVE_VERSION=v0.16.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0
CONTROLLER_TOOLS_VERSION=v0.16.2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$ROOT/deploy/schemas"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# One throw-away module that depends on the API packages (controller-gen reads Go packages) and
# on controller-gen itself. controller-tools v0.16.2 pins an x/tools too old for current Go
# compilers; KServe requires a newer one, which Go picks (minimum version selection).
cd "$WORK"
cat >go.mod <<'EOF'
module example.invalid/serval-crd-schemas

go 1.24
EOF
cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/kserve/kserve/pkg/apis/serving/v1alpha1"
	_ "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
EOF
go get "github.com/kserve/kserve@$KSERVE_VERSION" \
  "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$PROMETHEUS_OPERATOR_VERSION" \
  "sigs.k8s.io/controller-tools@$CONTROLLER_TOOLS_VERSION" >/dev/null
go mod tidy >/dev/null 2>&1 || true
go build -o controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen

./controller-gen crd:maxDescLen=0 \
  paths=github.com/kserve/kserve/pkg/apis/serving/v1alpha1 \
  paths=github.com/kserve/kserve/pkg/apis/serving/v1beta1 \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
  output:crd:dir=crd

cd "$ROOT"
npm run build --silent >/dev/null || true # tsc emits even when another file has type errors
rm -rf "$OUT/serving.kserve.io" "$OUT/monitoring.coreos.com"
node dist/tools/deploy/crd_schemas.js --out "$OUT" --relax-kserve \
  "$WORK/crd/serving.kserve.io_inferenceservices.yaml" \
  "$WORK/crd/serving.kserve.io_clusterservingruntimes.yaml" \
  "$WORK/crd/monitoring.coreos.com_servicemonitors.yaml"

# The same conversion of the CRDs the KServe release ships must give the same schemas.
RELEASE="$(cd "$WORK" && go list -m -f '{{.Dir}}' github.com/kserve/kserve)/config/crd/full"
node dist/tools/deploy/crd_schemas.js --out "$WORK/release" \
  "$RELEASE/serving.kserve.io_inferenceservices.yaml" "$RELEASE/serving.kserve.io_clusterservingruntimes.yaml" >/dev/null
for f in inferenceservice_v1beta1 clusterservingruntime_v1alpha1; do
  if ! cmp -s "$WORK/release/serving.kserve.io/$f.json" "$OUT/serving.kserve.io/$f.json"; then
    echo "gen-crd-schemas: $f differs from KServe $KSERVE_VERSION's released CRD" >&2
    exit 1
  fi
done
printf 'kserve %s\nprometheus-operator %s\ncontroller-gen %s\n' "$KSERVE_VERSION" "$PROMETHEUS_OPERATOR_VERSION" "$CONTROLLER_TOOLS_VERSION" >"$OUT/VERSIONS"
echo "gen-crd-schemas: wrote $OUT (KServe $KSERVE_VERSION schemas match the release's CRDs)"
