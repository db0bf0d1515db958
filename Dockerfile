# GPU image: Serval with ONNX Runtime's CUDA execution provider.
# Build: docker build -t serval .      Run: docker run --gpus all -p 8000-8002:8000-8002 serval
# The CUDA provider binaries are not in the npm package; onnxruntime-node's install script
# downloads them, which needs network access at build time (the project's .npmrc skips it).
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04

RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gnupg \
 && curl -fsSL https://deb.nodesource.com/setup_20.x | bash - \
 && apt-get install -y --no-install-recommends nodejs \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/serval
COPY package.json package-lock.json .npmrc tsconfig.json ./
RUN npm ci --no-audit --no-fund \
 && ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js
COPY proto ./proto
COPY src ./src
COPY tools ./tools
COPY model_repository ./model_repository
RUN npm run build && npm prune --omit=dev

EXPOSE 8000 8001 8002
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["--model-repository", "/opt/serval/model_repository"]
