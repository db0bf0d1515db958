"""Session fixtures for the Serval conformance suite.

The suite talks to Serval only through NVIDIA's official Python clients
(tritonclient.http / tritonclient.grpc and their aio variants), so whatever
passes here is what unmodified Triton users will see.

Server selection
----------------
* Default: start ``node dist/src/cli.js --model-repository model_repository
  --http-port 0 --grpc-port 0 --metrics-port 0`` from the repository root
  (nothing is built here: run ``npm run build`` first), read the bound ports
  from the ``Started ... at 0.0.0.0:PORT`` lines it prints, wait for
  ``/v2/health/ready`` and stop it (SIGTERM, then SIGKILL) at the end.
* ``SERVAL_URL_HTTP=host:port`` and/or ``SERVAL_URL_GRPC=host:port``: use an
  already running server (Serval or a real tritonserver, which is how the
  expectations in this suite can be cross-checked). Tests for a protocol
  whose URL is missing are skipped. ``SERVAL_URL_METRICS`` likewise.

Known discrepancies: ``known_failures.txt`` beside this file lists test ids
('*' wildcards) with the reason Serval differs from Triton; those tests
are marked strict xfail: they must fail, and a fix (XPASS) fails the run
until its line is deleted, so a listed test can never pass unnoticed. Set
``SERVAL_STRICT=1`` to ignore the list.

Other knobs: ``SERVAL_LOG_DIR`` (default ``<repo>/tmp/conformance``),
``SERVAL_STARTUP_TIMEOUT`` seconds (default 180), ``SERVAL_MODEL_REPOSITORY``
(default ``model_repository``), ``SERVAL_SERVER_ARGS`` (extra CLI args).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = Path(os.environ.get("SERVAL_LOG_DIR", REPO_ROOT / "tmp" / "conformance"))

_STARTED_RE = re.compile(
    r"Started (GRPCInferenceService|HTTPService|Metrics Service) at ([0-9a-fA-F.:\[\]]+):(\d+)"
)


@dataclass
class ServerInfo:
    http_url: Optional[str]  # "host:port", the form tritonclient expects
    grpc_url: Optional[str]
    metrics_url: Optional[str]
    log_path: Optional[Path]
    managed: bool
    metadata: dict = field(default_factory=dict)

    @property
    def extensions(self) -> set:
        return set(self.metadata.get("extensions", []))

    def log_tail(self, n: int = 80) -> str:
        if not self.log_path or not self.log_path.exists():
            return "(no server log)"
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


def _connect_host(host: str) -> str:
    # The server reports the address it bound (0.0.0.0 / [::]); connect to
    # loopback instead.
    if host in ("0.0.0.0", "::", "[::]", ""):
        return "127.0.0.1"
    return host


def _http_get(url: str, timeout: float = 2.0):
    req = urllib.request.Request(url, method="GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _wait_ready(http_url: str, deadline: float, proc: Optional[subprocess.Popen]) -> None:
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before becoming ready")
        try:
            status, _ = _http_get(f"http://{http_url}/v2/health/ready")
            if status == 200:
                return
            last = f"HTTP {status}"
        except OSError as e:  # connection refused while starting
            last = repr(e)
        time.sleep(0.2)
    raise RuntimeError(f"server at {http_url} not ready in time (last: {last})")


class _ManagedServer:
    def __init__(self, extra_args: tuple = (), log_name: str = "serval-server.log") -> None:
        self.extra_args = list(extra_args)
        self.proc: Optional[subprocess.Popen] = None
        self.ports: dict = {}
        self.cond = threading.Condition()
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / log_name
        self._log = None
        self._reader: Optional[threading.Thread] = None

    def start(self) -> ServerInfo:
        cli = REPO_ROOT / "dist" / "src" / "cli.js"
        if not cli.exists():
            raise RuntimeError(
                f"{cli.relative_to(REPO_ROOT)} not found: build the server first (npm run build)"
            )
        repo = os.environ.get("SERVAL_MODEL_REPOSITORY", "model_repository")
        cmd = [
            os.environ.get("NODE", "node"),
            str(cli),
            "--model-repository",
            repo,
            "--http-port",
            "0",
            "--grpc-port",
            "0",
            "--metrics-port",
            "0",
            # The suite exercises the shared-memory extension (refused by default, as Triton 2.73).
            "--allow-client-shm=true",
        ] + shlex.split(os.environ.get("SERVAL_SERVER_ARGS", "")) + self.extra_args
        self._log = open(self.log_path, "w", buffering=1, encoding="utf-8", errors="replace")
        self._log.write(f"# {' '.join(shlex.quote(c) for c in cmd)}\n")
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: teardown kills it all
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._pump, name="serval-log", daemon=True)
        self._reader.start()

        timeout = float(os.environ.get("SERVAL_STARTUP_TIMEOUT", "180"))
        deadline = time.monotonic() + timeout
        wanted = {"HTTPService", "GRPCInferenceService"}
        with self.cond:
            while not wanted <= self.ports.keys():
                if self.proc.poll() is not None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(timeout=min(remaining, 0.5))
        if not wanted <= self.ports.keys():
            code = self.proc.poll()
            raise RuntimeError(
                f"server did not print {sorted(wanted - self.ports.keys())} "
                f"within {timeout:.0f}s (exit code {code}); see {self.log_path}"
            )
        http_url = self.ports["HTTPService"]
        grpc_url = self.ports["GRPCInferenceService"]
        _wait_ready(http_url, deadline, self.proc)
        # Give the metrics line a moment if it comes after the others.
        with self.cond:
            if "Metrics Service" not in self.ports:
                self.cond.wait(timeout=2)
        return ServerInfo(
            http_url=http_url,
            grpc_url=grpc_url,
            metrics_url=self.ports.get("Metrics Service"),
            log_path=self.log_path,
            managed=True,
        )

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._log.write(line)
            m = _STARTED_RE.search(line)
            if m:
                with self.cond:
                    self.ports[m.group(1)] = f"{_connect_host(m.group(2))}:{m.group(3)}"
                    self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        if proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            # Still reap any helper processes the server left in its group.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self._log is not None:
            self._log.write(f"# server exit code: {proc.returncode}\n")
            self._log.close()


def _server_metadata(info: ServerInfo) -> dict:
    if info.http_url:
        status, body = _http_get(f"http://{info.http_url}/v2", timeout=10)
        if status == 200:
            return json.loads(body)
    if info.grpc_url:
        import tritonclient.grpc as grpcclient

        with grpcclient.InferenceServerClient(info.grpc_url) as c:
            return c.get_server_metadata(as_json=True)
    return {}


_MANAGED: Optional[_ManagedServer] = None
_USED_MANAGED_LOG = False


@pytest.fixture(scope="session")
def server():
    """The server under test (a :class:`ServerInfo`)."""
    global _MANAGED, _USED_MANAGED_LOG
    http_url = os.environ.get("SERVAL_URL_HTTP") or None
    grpc_url = os.environ.get("SERVAL_URL_GRPC") or None
    if http_url or grpc_url:
        strip = lambda u: re.sub(r"^\w+://", "", u).rstrip("/") if u else None  # noqa: E731
        info = ServerInfo(
            http_url=strip(http_url),
            grpc_url=strip(grpc_url),
            metrics_url=strip(os.environ.get("SERVAL_URL_METRICS")),
            log_path=None,
            managed=False,
        )
        if info.http_url:
            _wait_ready(info.http_url, time.monotonic() + 30, None)
        info.metadata = _server_metadata(info)
        yield info
        return

    _MANAGED = _ManagedServer()
    _USED_MANAGED_LOG = True
    try:
        try:
            info = _MANAGED.start()
        except Exception as e:  # noqa: BLE001
            tail = ""
            if _MANAGED.log_path.exists():
                tail = "\n".join(_MANAGED.log_path.read_text(errors="replace").splitlines()[-60:])
            _MANAGED.stop()
            pytest.fail(f"could not start Serval: {e}\n--- server log tail ---\n{tail}", pytrace=False)
        info.metadata = _server_metadata(info)
        yield info
    finally:
        _MANAGED.stop()
        _MANAGED = None


@pytest.fixture(scope="session")
def http_url(server):
    if not server.http_url:
        pytest.skip("no HTTP endpoint (SERVAL_URL_HTTP not set)")
    return server.http_url


@pytest.fixture(scope="session")
def grpc_url(server):
    if not server.grpc_url:
        pytest.skip("no gRPC endpoint (SERVAL_URL_GRPC not set)")
    return server.grpc_url


@pytest.fixture(autouse=True)
def _require_extensions(request):
    """``@pytest.mark.extension("statistics")`` skips a test unless the
    server lists that extension in its metadata (GET /v2 'extensions')."""
    markers = list(request.node.iter_markers("extension"))
    if not markers:
        return
    info = request.getfixturevalue("server")
    for m in markers:
        for ext in m.args:
            if ext not in info.extensions:
                pytest.skip(
                    f"server does not list the '{ext}' extension "
                    f"(extensions: {sorted(info.extensions)})"
                )


KNOWN_FAILURES = Path(__file__).with_name("known_failures.txt")


def _known_failures():
    if os.environ.get("SERVAL_STRICT") == "1" or not KNOWN_FAILURES.exists():
        return []
    out = []
    for line in KNOWN_FAILURES.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("|")
        # Only '*' is a wildcard ('[' and ']' are literal, as in test ids).
        regex = re.compile(".*".join(re.escape(part) for part in pattern.strip().split("*")) + r"\Z")
        out.append((regex, reason.strip() or "known discrepancy"))
    return out


def pytest_collection_modifyitems(config, items):
    known = _known_failures()
    if not known:
        return
    for item in items:
        nodeid = item.nodeid.split("::", 1)[-1] if "::" in item.nodeid else item.nodeid
        fname = Path(item.nodeid.split("::", 1)[0]).name
        key = f"{fname}::{nodeid}"
        for pattern, reason in known:
            if pattern.match(key):
                item.add_marker(pytest.mark.xfail(reason=f"known: {reason}", strict=True))
                break


def pytest_sessionfinish(session, exitstatus):
    # Make sure a crashed/interrupted run never leaves the server behind.
    if _MANAGED is not None:
        _MANAGED.stop()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    log = LOG_DIR / "serval-server.log"
    if _USED_MANAGED_LOG and log.exists():
        terminalreporter.write_line(f"Serval server log: {log}")
        if exitstatus not in (0, 5):
            lines = log.read_text(errors="replace").splitlines()
            terminalreporter.section("Serval server log (last 40 lines)")
            for line in lines[-40:]:
                terminalreporter.write_line(line)


def pytest_configure(config):
    # Unbuffered output when run from CI scripts.
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except Exception:  # noqa: BLE001
        pass


# One sync client per protocol, for tests parametrised over both (`protocol`, `client`).
@pytest.fixture(params=["http", "grpc"])
def protocol(request):
    return request.param


@pytest.fixture
def client(protocol, server):
    from serval_helpers import make_client

    c = make_client(protocol, server)
    yield c
    c.close()


@pytest.fixture(scope="module")
def explicit_server():
    """A second server of our own in explicit model-control mode with only `simple` loaded."""
    managed = _ManagedServer(
        ("--model-control-mode", "explicit", "--load-model", "simple"), log_name="serval-explicit.log"
    )
    try:
        yield managed.start()
    finally:
        managed.stop()


# test_restricted.py: the groups Triton's own L0_http / L0_grpc restricted tests use.
RESTRICTED_ARGS = (
    "--http-restricted-api=model-repository:admin-key=admin-value",
    "--http-restricted-api=inference,metadata:infer-key=infer-value",
    "--grpc-restricted-protocol=model-repository:admin-key=admin-value",
    "--grpc-restricted-protocol=inference,metadata:infer-key=infer-value",
)


@pytest.fixture(scope="module")
def restricted_server():
    """A server of our own started with RESTRICTED_ARGS (health stays open: readiness is probed)."""
    managed = _ManagedServer(RESTRICTED_ARGS, log_name="serval-restricted.log")
    try:
        yield managed.start()
    finally:
        managed.stop()
