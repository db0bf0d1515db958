#!/usr/bin/env python3
"""A 64 MiB tensor through Serval four ways, side by side in one run: in the request body
(HTTP binary tensor extension, gRPC raw_input_contents) and in system shared memory (HTTP,
gRPC; the output in shared memory too). Reports the client-side round-trip latency and the
server's resident memory (peak during each way's requests, from /proc).

    npm run build && .venv/bin/python tools/bench/shm_roundtrip.py [--mib 64] [--rounds 5] [--per-round 4]

Starts its own server (dist/src/cli.js, identity_fp32 from model_repository/ only, ephemeral
ports) and stops it at the end. The ways are interleaved round by round so that machine noise
falls on all of them alike. Each shared-memory request includes the client's own copy of the
input into its region, as a real client pays it; outputs are read as views of the region.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serval_launch import start_server as launch  # noqa: E402
MODEL = "identity_fp32"


def start_server(max_input: int) -> tuple[subprocess.Popen, str, str]:
    extra = ["--model-control-mode", "explicit", "--load-model", MODEL, "--http-max-input-size", str(max_input),
             "--allow-client-shm=true"]
    return launch(ROOT / "model_repository", extra, "shm_roundtrip")


def rss_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak(pid: int) -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=64, help="tensor size in MiB (default 64)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=4, help="requests per way per round")
    args = ap.parse_args()

    nbytes = args.mib << 20
    n = nbytes // 4
    data = np.random.default_rng(1).standard_normal((1, n), dtype=np.float32)
    proc, http_url, grpc_url = start_server(nbytes + (1 << 20))
    clients = {
        "http": httpclient.InferenceServerClient(http_url, network_timeout=300, connection_timeout=300),
        "grpc": grpcclient.InferenceServerClient(grpc_url),
    }
    tag = uuid.uuid4().hex[:8]
    h_in = shm.create_shared_memory_region(f"bench_in_{tag}", f"/serval_bench_in_{tag}", nbytes)
    h_out = shm.create_shared_memory_region(f"bench_out_{tag}", f"/serval_bench_out_{tag}", nbytes)
    for c in clients.values():
        c.unregister_system_shared_memory()
    clients["http"].register_system_shared_memory("bench_in", f"/serval_bench_in_{tag}", nbytes)
    clients["http"].register_system_shared_memory("bench_out", f"/serval_bench_out_{tag}", nbytes)

    def body(proto: str) -> np.ndarray:
        mod = httpclient if proto == "http" else grpcclient
        i = mod.InferInput("INPUT0", [1, n], "FP32")
        if proto == "http":
            i.set_data_from_numpy(data, binary_data=True)
            o = mod.InferRequestedOutput("OUTPUT0", binary_data=True)
        else:
            i.set_data_from_numpy(data)
            o = mod.InferRequestedOutput("OUTPUT0")
        return clients[proto].infer(MODEL, [i], outputs=[o]).as_numpy("OUTPUT0")

    def shared(proto: str) -> np.ndarray:
        mod = httpclient if proto == "http" else grpcclient
        shm.set_shared_memory_region(h_in, [data])
        i = mod.InferInput("INPUT0", [1, n], "FP32")
        i.set_shared_memory("bench_in", nbytes)
        o = mod.InferRequestedOutput("OUTPUT0")
        o.set_shared_memory("bench_out", nbytes)
        clients[proto].infer(MODEL, [i], outputs=[o])
        return shm.get_contents_as_numpy(h_out, np.float32, [1, n])

    ways = {
        "HTTP, binary body": lambda: body("http"),
        "gRPC, raw_input_contents": lambda: body("grpc"),
        "HTTP, shared memory": lambda: shared("http"),
        "gRPC, shared memory": lambda: shared("grpc"),
    }
    lat: dict[str, list[float]] = {w: [] for w in ways}
    peak: dict[str, float] = {w: 0.0 for w in ways}
    # How far RSS rose above its level at the start of a way's batch: the memory that way's
    # requests needed on top of what the server already held.
    rise: dict[str, float] = {w: 0.0 for w in ways}
    try:
        for w, f in ways.items():  # warm-up, and each way's result checked once
            assert np.array_equal(f(), data), w
        idle = rss_mib(proc.pid, "VmRSS")
        for _ in range(args.rounds):
            for w, f in ways.items():
                reset_peak(proc.pid)
                start = rss_mib(proc.pid, "VmRSS")
                for _ in range(args.per_round):
                    t0 = time.perf_counter()
                    f()
                    lat[w].append((time.perf_counter() - t0) * 1e3)
                hwm = rss_mib(proc.pid, "VmHWM")
                peak[w] = max(peak[w], hwm)
                rise[w] = max(rise[w], hwm - start)
    finally:
        for c in clients.values():
            try:
                c.unregister_system_shared_memory()
            finally:
                c.close()
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)
        proc.terminate()
        proc.wait(30)

    print(f"{args.mib} MiB FP32 tensor through {MODEL}, {args.rounds} rounds x {args.per_round} requests per way, "
          f"interleaved; server RSS idle after warm-up {idle:.0f} MiB; {os.cpu_count()} cores")
    print("| way | median ms | p90 ms | server peak RSS MiB | RSS rise in a batch MiB | latency vs body | peak RSS vs body |")
    print("|---|---|---|---|---|---|---|")
    base = {"HTTP": "HTTP, binary body", "gRPC": "gRPC, raw_input_contents"}
    for w in ways:
        xs = sorted(lat[w])
        med, p90 = statistics.median(xs), xs[min(len(xs) - 1, int(0.9 * len(xs)))]
        b = base[w.split(",")[0]]
        ratio = med / statistics.median(lat[b])
        rss = peak[w] / peak[b]
        print(f"| {w} | {med:.1f} | {p90:.1f} | {peak[w]:.0f} | {rise[w]:.0f} | {ratio:.2f} | {rss:.2f} |")


if __name__ == "__main__":
    main()
