"""The KServe Python SDK's REST and gRPC clients (InferenceRESTClient, InferenceGRPCClient) against
Serval: server live/ready (they read the KServe v2 bodies {"live": true} / {"ready": true}, which
Serval sends beside Triton's status codes), model ready, metadata and infer on `simple`.

The SDK lives in .venv-kserve (test/conformance/setup-kserve.sh, run by run.sh): its dependency
tree is large and would move the Triton clients' pins, so the checks run as a script
(kserve_clients.py) under that interpreter; this test starts it and reports its lines."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from serval_helpers import REPO_ROOT

KSERVE_PYTHON = Path(os.environ.get("SERVAL_KSERVE_VENV", REPO_ROOT / ".venv-kserve")) / "bin" / "python"
SCRIPT = Path(__file__).with_name("kserve_clients.py")


def test_kserve_sdk_clients(explicit_server):
    if not KSERVE_PYTHON.exists():
        pytest.fail(f"{KSERVE_PYTHON} not found: run test/conformance/setup-kserve.sh (run.sh does)")
    res = subprocess.run(
        [str(KSERVE_PYTHON), str(SCRIPT), explicit_server.http_url, explicit_server.grpc_url],
        capture_output=True, text=True, timeout=300,
    )
    print(res.stdout)
    assert res.returncode == 0, f"kserve_clients.py failed:\n{res.stdout}\n{res.stderr[-3000:]}"
    assert "kserve clients: all checks passed" in res.stdout
