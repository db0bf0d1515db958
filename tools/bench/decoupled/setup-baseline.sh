#!/usr/bin/env bash
# Builds the baseline Serval for the decoupled section's A/B of the one-response path: the commit
# before the decoupled work (4f3a059 by default), checked out as a git worktree under /tmp, with
# its own `npm ci` (the .npmrc skips onnxruntime's CUDA download) and `tsc` build.
# tools/bench/decoupled.ts calls this itself and runs <worktree>/dist/src/cli.js.
#
#   bash tools/bench/decoupled/setup-baseline.sh [COMMIT]     # prints the worktree's path last
#
# Idempotent: a stamp file in the worktree records the commit it was built from; when it matches
# and dist/src/cli.js is there, it does nothing.
#
# Environment knobs:
#   SERVAL_BASELINE_DIR=/path   worktree location (default /tmp/serval-baseline-<commit>)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
COMMIT="$(git -C "$ROOT" rev-parse --short "${1:-4f3a059}")"
DIR="${SERVAL_BASELINE_DIR:-/tmp/serval-baseline-$COMMIT}"
STAMP="$DIR/.serval-baseline-stamp"

log() { echo "setup-baseline: $*" >&2; }

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$COMMIT" && -f "$DIR/dist/src/cli.js" ]]; then
  log "$DIR is up to date ($COMMIT)"
  echo "$DIR"
  exit 0
fi

if [[ ! -e "$DIR/.git" ]]; then
  # A worktree registered earlier whose folder is gone (a cleaned /tmp) would block `add`.
  git -C "$ROOT" worktree prune
  log "git worktree add --detach $DIR $COMMIT"
  git -C "$ROOT" worktree add --detach "$DIR" "$COMMIT" >&2
else
  git -C "$DIR" checkout --detach --quiet "$COMMIT"
fi

cd "$DIR"
log "npm ci in $DIR"
npm ci --no-audit --no-fund >&2
# tsc only: the baseline needs the server, not the client bundle or Python setup.
log "building $COMMIT"
npx tsc -p tsconfig.json >&2
echo "$COMMIT" >"$STAMP"
echo "$DIR"
