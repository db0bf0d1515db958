"""Payloads above 4 MiB (gRPC's and many HTTP frameworks' default message
limit). Triton accepts them on both protocols; so must Serval."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcaio
import tritonclient.http.aio as httpaio

from serval_helpers import PROTOCOLS, make_client, make_input, make_output

pytestmark = pytest.mark.slow

N_ELEMS = 2 * 1024 * 1024  # 2M fp32 = 8 MiB per tensor


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_identity_fp32_8mib(server, protocol):
    data = np.random.default_rng(0).standard_normal((1, N_ELEMS)).astype(np.float32)
    c = make_client(protocol, server, **({"network_timeout": 120.0} if protocol == "http" else {}))
    try:
        res = c.infer("identity_fp32", [make_input(protocol, "INPUT0", data)],
                      outputs=[make_output(protocol, "OUTPUT0", binary=True)])
        out = res.as_numpy("OUTPUT0")
        assert out.shape == data.shape
        assert out.tobytes() == data.tobytes()
    finally:
        c.close()


def test_identity_fp32_batch_of_large_rows(server, grpc_url):
    data = np.random.default_rng(1).standard_normal((4, N_ELEMS // 2)).astype(np.float32)  # 16 MiB
    c = make_client("grpc", server)
    try:
        res = c.infer("identity_fp32", [make_input("grpc", "INPUT0", data)])
        assert res.as_numpy("OUTPUT0").tobytes() == data.tobytes()
    finally:
        c.close()


def test_http_json_body_over_4mib(server, http_url):
    # ~600k floats as JSON text is > 4 MiB of request and response body.
    data = np.random.default_rng(2).standard_normal((1, 600_000)).astype(np.float32)
    c = make_client("http", server, network_timeout=120.0)
    try:
        res = c.infer("identity_fp32", [make_input("http", "INPUT0", data, binary=False)],
                      outputs=[make_output("http", "OUTPUT0", binary=False)])
        assert res.as_numpy("OUTPUT0").tobytes() == data.tobytes()
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_image_classifier_full_batch(server, protocol):
    """16 x 3 x 224 x 224 fp32 = 9.6 MB request."""
    x = np.random.default_rng(3).random((16, 3, 224, 224), dtype=np.float32)
    c = make_client(protocol, server, **({"network_timeout": 120.0} if protocol == "http" else {}))
    try:
        res = c.infer("image_classifier", [make_input(protocol, "INPUT", x)],
                      outputs=[make_output(protocol, "OUTPUT", binary=True)])
        out = res.as_numpy("OUTPUT")
        assert out.shape == (16, 11) and out.dtype == np.float32
        np.testing.assert_allclose(out.sum(axis=1), np.ones(16), rtol=0, atol=1e-4)
        assert (out >= 0).all()
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_aio_large(server, protocol):
    url = server.http_url if protocol == "http" else server.grpc_url
    if not url:
        pytest.skip(f"no {protocol} endpoint")
    data = np.random.default_rng(4).standard_normal((1, N_ELEMS)).astype(np.float32)

    async def main():
        mod = httpaio if protocol == "http" else grpcaio
        c = mod.InferenceServerClient(url)
        try:
            res = await c.infer("identity_fp32", [make_input(protocol, "INPUT0", data)])
            return res.as_numpy("OUTPUT0")
        finally:
            await c.close()

    out = asyncio.run(main())
    assert out.tobytes() == data.tobytes()
