"""Side-by-side fixtures: the real tritonserver 2.51 and Serval on one scratch repository.

The scratch repository (a temp dir) holds model_repository/{repeat_int32,square_int32,
text_generator}, every model of test/reference/models/ except cached_decoupled (Triton refuses
to load it) and test/python_models/py_decoupled. Both servers start in parallel; Triton via
tools/reference/tritonserver.sh on ports the OS picked, Serval on port 0 (it prints what it bound).

Needs ``bash tools/ci/setup-triton.sh`` (.venv-triton) and ``npm run build`` (dist/src/cli.js).
Knobs: ``SERVAL_REFERENCE_STARTUP_TIMEOUT`` seconds (default 240). Logs: tmp/reference/.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = REPO_ROOT / "tmp" / "reference"
STARTUP_TIMEOUT = float(os.environ.get("SERVAL_REFERENCE_STARTUP_TIMEOUT", "240"))

MODEL_SOURCES = [
    REPO_ROOT / "model_repository" / "repeat_int32",
    REPO_ROOT / "model_repository" / "square_int32",
    REPO_ROOT / "model_repository" / "text_generator",
    *sorted(
        p
        for p in (REPO_ROOT / "test" / "reference" / "models").iterdir()
        if p.is_dir() and p.name != "cached_decoupled"
    ),
    REPO_ROOT / "test" / "python_models" / "py_decoupled",
]

_STARTED_RE = re.compile(r"Started (GRPCInferenceService|HTTPService|Metrics Service) at \S+?:(\d+)\s*$")


@dataclass
class Server:
    name: str  # "triton" or "serval"
    http: str  # host:port
    grpc: str
    metrics: Optional[str]
    log_path: Path
    repo: Path

    def log_tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 9000 <= port <= 9202:  # reserved for other jobs on this machine
            return port


def _ready(http: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{http}/v2/health/ready", timeout=2) as r:
            return r.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


class _Process:
    """One server process in its own process group, its output in a log file."""

    def __init__(self, name: str, cmd: list, log_path: Path):
        self.name = name
        self.log_path = log_path
        self.ports: dict = {}
        self._log = open(log_path, "w", buffering=1, encoding="utf-8", errors="replace")
        self._log.write("# " + " ".join(cmd) + "\n")
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._log.write(line)
            m = _STARTED_RE.search(line)
            if m:
                self.ports[m.group(1)] = int(m.group(2))

    def wait_ready(self, http_port_of, deadline: float) -> str:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.proc.returncode} before it was ready")
            port = http_port_of()
            if port and _ready(f"127.0.0.1:{port}"):
                return f"127.0.0.1:{port}"
            time.sleep(0.3)
        raise RuntimeError(f"{self.name} not ready within {STARTUP_TIMEOUT:.0f} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(timeout=wait)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            try:  # reap what the server left in its group (Python stubs)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._pump.join(timeout=5)
        self._log.write(f"# exit code {self.proc.returncode}\n")
        self._log.close()


def _start_triton(repo: Path, procs: list) -> Server:
    http, grpc, metrics = _free_port(), _free_port(), _free_port()
    script = REPO_ROOT / "tools" / "reference" / "tritonserver.sh"
    cmd = ["bash", str(script), str(repo), str(http), str(grpc), str(metrics)]
    p = _Process("tritonserver", cmd, LOG_DIR / "tritonserver.log")
    procs.append(p)
    url = p.wait_ready(lambda: http, time.monotonic() + STARTUP_TIMEOUT)
    return Server("triton", url, f"127.0.0.1:{grpc}", f"127.0.0.1:{metrics}", p.log_path, repo)


def _start_serval(repo: Path, procs: list) -> Server:
    cli = REPO_ROOT / "dist" / "src" / "cli.js"
    if not cli.exists():
        raise RuntimeError("dist/src/cli.js not found: run npm run build first")
    cmd = [os.environ.get("NODE", "node"), str(cli), "--model-repository", str(repo)]
    cmd += ["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
    p = _Process("serval", cmd, LOG_DIR / "serval.log")
    procs.append(p)
    url = p.wait_ready(lambda: p.ports.get("HTTPService"), time.monotonic() + STARTUP_TIMEOUT)
    deadline = time.monotonic() + 5
    while "GRPCInferenceService" not in p.ports and time.monotonic() < deadline:
        time.sleep(0.1)
    metrics = p.ports.get("Metrics Service")
    return Server(
        "serval",
        url,
        f"127.0.0.1:{p.ports['GRPCInferenceService']}",
        f"127.0.0.1:{metrics}" if metrics else None,
        p.log_path,
        repo,
    )


@pytest.fixture(scope="session")
def scratch_repo():
    repo = Path(tempfile.mkdtemp(prefix="serval-ref-"))
    for src in MODEL_SOURCES:
        shutil.copytree(src, repo / src.name)
    yield repo
    shutil.rmtree(repo, ignore_errors=True)


@pytest.fixture(scope="session")
def servers(scratch_repo):
    """(triton, serval): both started on the scratch repository, stopped at the end."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    procs: list = []
    try:
        with ThreadPoolExecutor(2) as pool:
            ft = pool.submit(_start_triton, scratch_repo, procs)
            fs = pool.submit(_start_serval, scratch_repo, procs)
            errors = []
            for f in (ft, fs):
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
        if errors:
            tails = "\n".join(
                f"--- {p.log_path}\n" + "\n".join(p.log_path.read_text().splitlines()[-30:]) for p in procs
            )
            pytest.fail("could not start the servers: " + "; ".join(errors) + "\n" + tails, pytrace=False)
        yield ft.result(), fs.result()
    finally:
        for p in procs:
            p.stop()


@pytest.fixture(scope="session")
def triton(servers):
    return servers[0]


@pytest.fixture(scope="session")
def serval(servers):
    return servers[1]
