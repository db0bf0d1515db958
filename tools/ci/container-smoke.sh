#!/usr/bin/env bash
# Builds the CPU image (Dockerfile) with podman and serves a model from it, without any image
# registry: CI machines reach only package registries, so the Node 20 base is made here, the
# way node:20-bookworm-slim is (Debian bookworm minbase from Debian's packages + the Node 20
# that runs this script, at /usr/local), and the image's `npm ci` runs offline from an npm cache
# filled beforehand. Then: start it with a model mounted at /models, curl readiness, an
# inference and the metrics from the host, and run the image's HEALTHCHECK.
#
# Exit codes: 0 passed, 1 failed, 3 no container engine can run here (the reason is printed).
# Needs root (apt-get, debootstrap, rootful podman). Logs: tmp/deploy/container-*.log.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
LOG_DIR="$ROOT/tmp/deploy"
mkdir -p "$LOG_DIR"
WORK="$(mktemp -d)"
NAME="serval-smoke-$$"
BASE=localhost/serval-node-base:20
IMAGE=localhost/serval:smoke
cleanup() {
  podman rm -f "$NAME" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
cannot() { echo "container-smoke: SKIP: $*" >&2; exit 3; }
fail() { echo "container-smoke: FAIL: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || cannot "needs root (rootful podman, debootstrap)"
need=()
for p in podman runc slirp4netns debootstrap; do command -v "$p" >/dev/null 2>&1 || need+=("$p"); done
if ((${#need[@]})); then
  echo "container-smoke: apt-get install ${need[*]}"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; } \
    >"$LOG_DIR/container-apt.log" 2>&1 || cannot "apt-get install ${need[*]} failed (tmp/deploy/container-apt.log)"
fi

# This sandbox allows neither raising rlimits (podman's defaults ask for more than the host
# has) nor crun's hybrid-cgroup setup: runc, with limits at or below the host's.
ENGINE=(--runtime runc --ulimit "nofile=1024:1024" --ulimit "nproc=4096:4096")
if ! podman image exists "$BASE"; then
  echo "container-smoke: building $BASE (debootstrap bookworm minbase + node $(node --version))"
  [[ "$(node --version)" == v20.* ]] || cannot "the base image takes this machine's Node, which is $(node --version), not 20"
  MIRROR="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "${MIRROR:-http://deb.debian.org/debian}" >"$LOG_DIR/container-debootstrap.log" 2>&1 ||
    cannot "debootstrap failed (tmp/deploy/container-debootstrap.log)"
  R="$WORK/rootfs"
  mkdir -p "$R/usr/local/bin" "$R/usr/local/lib/node_modules"
  cp "$(command -v node)" "$R/usr/local/bin/node"
  cp -a "$(npm root -g)/npm" "$R/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/local/bin/npx"
  rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/archives/*.deb "$R/usr/share/doc" "$R/usr/share/man"
  tar -C "$R" -c . | podman import --change 'CMD ["node"]' - "$BASE" >/dev/null || cannot "podman import of the base image failed"
  rm -rf "$R"
fi
podman run --rm --network none "${ENGINE[@]}" "$BASE" node -e 'process.exit(0)' >"$LOG_DIR/container-engine.log" 2>&1 ||
  cannot "podman cannot start a container here: $(tail -1 "$LOG_DIR/container-engine.log")"

# The image's npm ci runs with no network: fill a private cache with exactly the lock's packages.
echo "container-smoke: filling an npm cache for the offline image build"
mkdir -p "$WORK/npm"
cp package.json package-lock.json .npmrc "$WORK/npm/"
(cd "$WORK/npm" && npm ci --cache "$WORK/npm-cache" --ignore-scripts --no-audit --no-fund) >"$LOG_DIR/container-npm.log" 2>&1 ||
  fail "npm ci for the cache failed (tmp/deploy/container-npm.log)"

echo "container-smoke: podman build (Dockerfile, offline)"
t0=$SECONDS
podman build --format docker "${ENGINE[@]}" --network none -v "$WORK/npm-cache:/root/.npm" \
  --build-arg NPM_CONFIG_OFFLINE=true --build-arg NODE_IMAGE="$BASE" -t "$IMAGE" . >"$LOG_DIR/container-build.log" 2>&1 ||
  fail "podman build failed (tmp/deploy/container-build.log): $(grep -m1 -i error "$LOG_DIR/container-build.log")"
echo "container-smoke: built $IMAGE in $((SECONDS - t0))s ($(podman image inspect "$IMAGE" --format '{{.Size}}') bytes)"

# One ONNX model, mounted read-only where the image expects the repository.
mkdir -p "$WORK/models"
cp -r model_repository/simple "$WORK/models/"
chmod -R a+rX "$WORK"
PORT=$((20000 + RANDOM % 20000))
podman run -d --name "$NAME" "${ENGINE[@]}" --network slirp4netns \
  -p "127.0.0.1:$PORT:8000" -p "127.0.0.1:$((PORT + 1)):8001" -p "127.0.0.1:$((PORT + 2)):8002" \
  -v "$WORK/models:/models:ro" "$IMAGE" >/dev/null || fail "podman run failed"
deadline=$((SECONDS + 90))
until [[ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$PORT/v2/health/ready")" == 200 ]]; do
  ((SECONDS < deadline)) || { podman logs "$NAME" >"$LOG_DIR/container-server.log" 2>&1; fail "not ready within 90s (tmp/deploy/container-server.log)"; }
  sleep 1
done
podman logs "$NAME" >"$LOG_DIR/container-server.log" 2>&1
[[ "$(podman inspect "$NAME" --format '{{.Config.User}}')" == 10001:10001 ]] || fail "the container does not run as the serval user"
body='{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},
  {"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}],"outputs":[{"name":"OUTPUT0"}]}'
answer="$(curl -sf -X POST "127.0.0.1:$PORT/v2/models/simple/infer" -d "$body")" || fail "inference request failed"
[[ "$answer" == *'"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]'* ]] || fail "wrong inference answer: $answer"
# Read the whole page first: under pipefail, `curl | grep -q` fails at random when grep exits
# on its match before curl has written the rest (curl then dies of EPIPE).
metrics="$(curl -sf "127.0.0.1:$((PORT + 2))/metrics")" || fail "metrics port does not answer"
grep -q '^nv_inference_request_success{model="simple",version="1"} 1$' <<<"$metrics" ||
  fail "metrics port does not count the request"
podman healthcheck run "$NAME" >/dev/null 2>&1 || fail "the image's HEALTHCHECK fails on a ready server"
echo "container-smoke: PASS (ready, inference, metrics, HEALTHCHECK, user 10001)"
