"""gRPC over TLS and mutual TLS with tritonclient's own options (ssl=True, root_certificates,
private_key, certificate_chain), as Triton's L0_grpc SSL tests use them: servers of our own started
with --grpc-use-ssl / --grpc-use-ssl-mutual and certificates made here with the openssl CLI. The
calls include ModelInfer, which Serval serves on grpc-js' HTTP/2 sessions itself
(src/frontends/grpc/unary_infer.ts), and a stream."""

from __future__ import annotations

import queue
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import _ManagedServer


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs():
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed to make the test certificates")
    d = Path(tempfile.mkdtemp(prefix="serval-tls-"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=serval-test-ca",
             "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for who, cn in (("server", "localhost"), ("client", "serval-client")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}",
                 "-keyout", str(d / f"{who}.key"), "-out", str(d / f"{who}.csr"))
        ext = ["-extfile", str(d / "server.ext")] if who == "server" else []
        _openssl("x509", "-req", "-in", str(d / f"{who}.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
                 "-CAcreateserial", "-days", "2", "-out", str(d / f"{who}.crt"), *ext)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _serve(args: tuple, log_name: str):
    managed = _ManagedServer(("--model-control-mode", "explicit", "--load-model", "simple", *args), log_name=log_name)
    info = managed.start()
    return managed, info


@pytest.fixture(scope="module")
def tls_server(certs):
    managed, info = _serve(("--grpc-use-ssl", "true", "--grpc-server-cert", str(certs / "server.crt"),
                            "--grpc-server-key", str(certs / "server.key")), "serval-tls.log")
    try:
        yield info
    finally:
        managed.stop()


@pytest.fixture(scope="module")
def mtls_server(certs):
    managed, info = _serve(("--grpc-use-ssl-mutual", "true", "--grpc-server-cert", str(certs / "server.crt"),
                            "--grpc-server-key", str(certs / "server.key"), "--grpc-root-cert", str(certs / "ca.crt")),
                           "serval-mtls.log")
    try:
        yield info
    finally:
        managed.stop()


def _url(info) -> str:
    # The certificate names localhost and 127.0.0.1.
    return "localhost:" + info.grpc_url.rsplit(":", 1)[1]


def _exercise(c: grpcclient.InferenceServerClient) -> None:
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("simple")
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    ins = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(a)
    np.testing.assert_array_equal(c.infer("simple", ins).as_numpy("OUTPUT0"), a + a)
    got: queue.Queue = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put(error or result))
    try:
        c.async_stream_infer("simple", ins)
        r = got.get(timeout=30)
        assert not isinstance(r, Exception), r
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - a)
    finally:
        c.stop_stream()


def test_tls(tls_server, certs):
    c = grpcclient.InferenceServerClient(_url(tls_server), ssl=True, root_certificates=str(certs / "ca.crt"))
    _exercise(c)
    c.close()


def test_tls_refuses_plaintext(tls_server):
    c = grpcclient.InferenceServerClient(_url(tls_server))
    with pytest.raises(InferenceServerException) as e:
        c.is_server_live(client_timeout=5)
    assert e.value.status() == "StatusCode.UNAVAILABLE", e.value
    c.close()


def test_mutual_tls(mtls_server, certs):
    c = grpcclient.InferenceServerClient(
        _url(mtls_server), ssl=True, root_certificates=str(certs / "ca.crt"),
        private_key=str(certs / "client.key"), certificate_chain=str(certs / "client.crt"))
    _exercise(c)
    c.close()


def test_mutual_tls_refuses_a_client_without_certificate(mtls_server, certs):
    c = grpcclient.InferenceServerClient(_url(mtls_server), ssl=True, root_certificates=str(certs / "ca.crt"))
    with pytest.raises(InferenceServerException) as e:
        c.is_server_live(client_timeout=5)
    assert e.value.status() == "StatusCode.UNAVAILABLE", e.value
    c.close()
