# Serval, CPU image: Node 20 (Debian bookworm slim), the built server, production dependencies
# only, run as a non-root user. Models are mounted at /models (a Triton model repository).
#
#   docker build -t serval .
#   docker run -p 8000-8002:8000-8002 -v "$PWD/model_repository:/models:ro" serval
#   docker run ... serval --model-repository=/models --log-verbose=1      (tritonserver's flags)
#
# NODE_IMAGE lets a build use another Node 20 base with the same layout (tools/ci/container-smoke.sh
# builds one from Debian packages where no registry of images can be reached).
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
# Passed as --build-arg NPM_CONFIG_OFFLINE=true (RUN sees build args as environment variables),
# npm installs from a cache mounted at /root/.npm instead of the registry.
ARG NPM_CONFIG_OFFLINE
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
# npm ci's postinstall builds the optional memory-map addon; without its source here it does nothing.
COPY tools/native/build.mjs ./tools/native/
# The image's npm may predate package.json's allowScripts; the installer's own switch keeps it offline.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.client.json ./
COPY proto ./proto
COPY src ./src
# Only src/ is copied: tsconfig.json's tools/ and test/ globs then match nothing.
RUN npx tsc -p tsconfig.json && npx tsc -p tsconfig.client.json

FROM ${NODE_IMAGE}
ARG NPM_CONFIG_OFFLINE
ENV NODE_ENV=production
WORKDIR /opt/serval
COPY package.json package-lock.json .npmrc ./
# npm ci's postinstall builds the optional memory-map addon; without its source here it does nothing.
COPY tools/native/build.mjs ./tools/native/
# The CPU binaries of onnxruntime-node ship in its npm package; the GPU download is skipped.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /src/dist/src ./dist/src
COPY proto ./proto
COPY static ./static
RUN groupadd --system --gid 10001 serval \
 && useradd --system --uid 10001 --gid serval --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin serval \
 && mkdir /models \
 && chown serval:serval /models
USER 10001:10001
EXPOSE 8000 8001 8002
# The slim image has no curl: Node's fetch asks the readiness endpoint (port 8000 unless changed).
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8000/v2/health/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "/opt/serval/dist/src/cli.js"]
CMD ["--model-repository=/models"]
