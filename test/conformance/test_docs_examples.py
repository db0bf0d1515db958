"""The documented Node.js client example (docs/examples/node-client.mjs)
must keep working against the server."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from serval_helpers import REPO_ROOT

EXAMPLE = REPO_ROOT / "docs" / "examples" / "node-client.mjs"


def test_node_client_example(server):
    if not (server.http_url and server.grpc_url):
        pytest.skip("needs both HTTP and gRPC endpoints")
    node = shutil.which("node")
    if node is None or not EXAMPLE.exists():
        pytest.skip("node or the example is not available")
    if not (REPO_ROOT / "node_modules" / "@grpc" / "grpc-js").exists():
        pytest.skip("node_modules not installed (npm ci)")
    proc = subprocess.run(
        [node, str(EXAMPLE), "--http", server.http_url, "--grpc", server.grpc_url],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all checks passed" in proc.stdout
