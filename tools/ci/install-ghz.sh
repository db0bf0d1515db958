#!/usr/bin/env bash
# Installs the ghz gRPC load generator (https://ghz.sh) into a project-local
# GOBIN. Idempotent: does nothing when the pinned version is already there.
#
#   tools/ci/install-ghz.sh            # -> .tools/bin/ghz
#   GHZ_BIN_DIR=/somewhere tools/ci/install-ghz.sh
#
# Needs Go (>= 1.22) on PATH and access to the Go module proxy.
set -euo pipefail

GHZ_VERSION="${GHZ_VERSION:-v0.121.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN_DIR="${GHZ_BIN_DIR:-$ROOT/.tools/bin}"
GHZ="$BIN_DIR/ghz"
STAMP="$BIN_DIR/.ghz-version"

mkdir -p "$BIN_DIR"
# .tools/ holds only downloaded/built tools: keep it out of git without
# touching the tracked .gitignore.
if [[ "$BIN_DIR" == "$ROOT/.tools/bin" && ! -e "$ROOT/.tools/.gitignore" ]]; then
  printf '*\n' >"$ROOT/.tools/.gitignore"
fi

if [[ -x "$GHZ" && -f "$STAMP" && "$(cat "$STAMP")" == "$GHZ_VERSION" ]] && "$GHZ" --version >/dev/null 2>&1; then
  echo "install-ghz: ghz $GHZ_VERSION already installed at $GHZ"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  for d in /usr/local/go/bin /usr/lib/go/bin; do
    [[ -x "$d/go" ]] && PATH="$d:$PATH"
  done
fi
command -v go >/dev/null 2>&1 || { echo "install-ghz: 'go' not found on PATH" >&2; exit 1; }

echo "install-ghz: go install github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION -> $BIN_DIR"
# GOFLAGS=-mod=mod: ghz is built from its own go.mod, never from this project.
GOBIN="$BIN_DIR" GOFLAGS="-buildvcs=false" CGO_ENABLED=0 \
  go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
"$GHZ" --version
printf '%s\n' "$GHZ_VERSION" >"$STAMP"
