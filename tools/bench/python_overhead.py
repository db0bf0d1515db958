#!/usr/bin/env python3
"""The Python backend's own cost per request: a trivial Python identity model
(test/python_models/py_identity_fp32: OUTPUT0 = INPUT0, no model work) against the ONNX identity
model (model_repository/identity_fp32) at concurrency 1, interleaved round by round in one run
against one server it starts itself, over gRPC and HTTP, at three tensor sizes.

    npm run build && .venv/bin/python tools/bench/python_overhead.py [--rounds 5] [--per-round 200]

The difference of the two models' round trips is what the stub costs a request: the control
message each way, the copies through the shared-memory files, building the request objects and
numpy views in the stub, and the Python call itself. The server-side split (queue, compute
input / infer / output, from the statistics extension) is printed too.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serval_launch import start_server as launch  # noqa: E402
MODELS = ("identity_fp32", "py_identity_fp32")


def start_server(repo: Path) -> tuple[subprocess.Popen, str, str]:
    return launch(repo, [], "python_overhead")


def one(client, module, model: str, x: np.ndarray) -> float:
    inp = module.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    t0 = time.perf_counter()
    r = client.infer(model, [inp])
    dt = time.perf_counter() - t0
    if not np.array_equal(r.as_numpy("OUTPUT0"), x):
        sys.exit(f"python_overhead: {model} returned other data")
    return dt


KEYS = ("success", "queue", "compute_input", "compute_infer", "compute_output")


def server_totals(http_client, model: str) -> dict:
    """The model's cumulative statistics: request count and ns spent per stage."""
    s = http_client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
    return {"count": int(s["success"]["count"]), **{k: int(s[k]["ns"]) for k in KEYS}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="serval-pyoverhead-") as tmp:
        repo = Path(tmp)
        shutil.copytree(ROOT / "model_repository" / "identity_fp32", repo / "identity_fp32")
        shutil.copytree(ROOT / "test" / "python_models" / "py_identity_fp32", repo / "py_identity_fp32")
        proc, http, grpc = start_server(repo)
        try:
            clients = {"grpc": (grpcclient.InferenceServerClient(grpc), grpcclient), "http": (httpclient.InferenceServerClient(http), httpclient)}
            sizes = {"16 floats": 16, "64 KiB": 16 * 1024, "4 MiB": 1024 * 1024}
            times = {(p, s, m): [] for p in clients for s in sizes for m in MODELS}
            # Server-side ns per stage and request count, per (tensor size, model), from the
            # statistics read before and after each block of requests.
            server = {(s, m): {"count": 0, **{k: 0 for k in KEYS}} for s in sizes for m in MODELS}
            stats_client = clients["http"][0]
            for p, (c, mod) in clients.items():  # warm up
                for m in MODELS:
                    for n in sizes.values():
                        for _ in range(5):
                            one(c, mod, m, np.ones([1, n], np.float32))
            for _ in range(args.rounds):
                for p, (c, mod) in clients.items():
                    for s, n in sizes.items():
                        x = np.random.default_rng(n).random([1, n], dtype=np.float32)
                        count = args.per_round if n <= 16 * 1024 else max(10, args.per_round // 10)
                        for m in MODELS:
                            before = server_totals(stats_client, m)
                            times[(p, s, m)].extend(one(c, mod, m, x) for _ in range(count))
                            after = server_totals(stats_client, m)
                            for k in server[(s, m)]:
                                server[(s, m)][k] += after[k] - before[k]
            print("| protocol | tensor | ONNX identity median µs | Python identity median µs | difference µs | ratio |")
            print("|---|---|---|---|---|---|")
            for p in clients:
                for s in sizes:
                    a = statistics.median(times[(p, s, MODELS[0])]) * 1e6
                    b = statistics.median(times[(p, s, MODELS[1])]) * 1e6
                    print(f"| {p} | {s} | {a:.0f} | {b:.0f} | {b - a:+.0f} | {b / a:.2f} |")
            print()
            print("Server side (statistics extension), µs per request, both protocols:")
            print("| tensor | model | request (in the server) | queue | compute input | compute infer | compute output |")
            print("|---|---|---|---|---|---|---|")
            for s in sizes:
                for m in MODELS:
                    t = server[(s, m)]
                    n = max(1, t["count"])
                    cells = " | ".join(f"{t[k] / n / 1000:.0f}" for k in KEYS)
                    print(f"| {s} | {m} | {cells} |")
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
