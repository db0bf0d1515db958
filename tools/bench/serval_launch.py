"""Starts the built server (dist/src/cli.js) on ephemeral loopback ports for the Python bench
scripts, and reads the bound HTTP and gRPC addresses from its start-up lines."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_server(repo: Path, extra: list[str], who: str) -> tuple[subprocess.Popen, str, str]:
    """`who` names the calling script in the error when the server does not come up."""
    cmd = [
        "node", str(ROOT / "dist/src/cli.js"), "--model-repository", str(repo), *extra,
        "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
        "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1", "--metrics-address", "127.0.0.1",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    http = grpc = None
    deadline = time.time() + 60
    assert proc.stdout is not None
    while (http is None or grpc is None) and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if m := re.search(r"Started HTTPService at [^\s:]+:(\d+)", line):
            http = f"127.0.0.1:{m.group(1)}"
        if m := re.search(r"Started GRPCInferenceService at [^\s:]+:(\d+)", line):
            grpc = f"127.0.0.1:{m.group(1)}"
    if http is None or grpc is None:
        proc.kill()
        sys.exit(f"{who}: the server did not start (is dist/ built?)")
    # Drain the rest of its output so it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    return proc, http, grpc
