"""Asynchronous use of the official clients: HTTP ``async_infer`` (gevent
greenlets), gRPC ``async_infer`` (callbacks), the asyncio (aio) clients and
gRPC bidirectional streaming."""

from __future__ import annotations

import asyncio
import queue

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcaio
import tritonclient.http.aio as httpaio

from tritonclient.utils import InferenceServerException

from serval_helpers import make_client, make_input, make_output, response_id, simple_inputs

N = 24


def _requests(protocol, n=N, binary=True):
    rng = np.random.default_rng(1234)
    out = []
    for i in range(n):
        a, b = simple_inputs(1 + i % 8, rng)
        out.append((f"req-{i}", a, b, [make_input(protocol, "INPUT0", a, binary=binary),
                                        make_input(protocol, "INPUT1", b, binary=binary)]))
    return out


@pytest.mark.parametrize("binary", [True, False])
def test_http_async_infer(server, http_url, binary):
    c = make_client("http", server, concurrency=8)
    try:
        reqs = _requests("http", binary=binary)
        handles = [
            (rid, a, b, c.async_infer("simple", inputs, request_id=rid,
                                      outputs=[make_output("http", "OUTPUT0", binary=binary),
                                               make_output("http", "OUTPUT1", binary=binary)]))
            for rid, a, b, inputs in reqs
        ]
        for rid, a, b, h in handles:
            res = h.get_result(timeout=60)
            assert response_id("http", res) == rid
            np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
    finally:
        c.close()


def test_grpc_async_infer_callback(server, grpc_url):
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    try:
        reqs = _requests("grpc")
        expected = {rid: (a, b) for rid, a, b, _ in reqs}
        for rid, _, _, inputs in reqs:
            c.async_infer("simple", inputs, callback=lambda result, error: results.put((result, error)), request_id=rid)
        seen = set()
        for _ in reqs:
            r, e = results.get(timeout=60)
            assert e is None, e
            rid = response_id("grpc", r)
            a, b = expected[rid]
            np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
            seen.add(rid)
        assert seen == set(expected)
    finally:
        c.close()


def test_grpc_async_infer_compressed(server, grpc_url):
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    try:
        reqs = _requests("grpc", n=6)
        for rid, _, _, inputs in reqs:
            c.async_infer("simple", inputs, callback=lambda result, error: results.put((result, error)),
                          request_id=rid, compression_algorithm="gzip")
        for _ in reqs:
            r, e = results.get(timeout=60)
            assert e is None, e
    finally:
        c.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_aio_concurrent_infer(server, protocol):
    url = server.http_url if protocol == "http" else server.grpc_url
    if not url:
        pytest.skip(f"no {protocol} endpoint")
    mod = httpaio if protocol == "http" else grpcaio

    async def main():
        c = mod.InferenceServerClient(url)
        try:
            reqs = _requests(protocol)
            results = await asyncio.gather(*[c.infer("simple", inputs, request_id=rid)
                                             for rid, _, _, inputs in reqs])
            for (rid, a, b, _), res in zip(reqs, results):
                assert response_id(protocol, res) == rid
                np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
                np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
        finally:
            await c.close()

    asyncio.run(main())


def test_aio_http_compression(server, http_url):
    async def main():
        c = httpaio.InferenceServerClient(http_url)
        try:
            for alg in ("gzip", "deflate"):
                rid, a, b, inputs = _requests("http", n=1)[0]
                res = await c.infer("simple", inputs, request_compression_algorithm=alg,
                                    response_compression_algorithm=alg)
                np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
        finally:
            await c.close()

    asyncio.run(main())


def test_aio_grpc_compression(server, grpc_url):
    async def main():
        c = grpcaio.InferenceServerClient(grpc_url)
        try:
            for alg in ("gzip", "deflate"):
                rid, a, b, inputs = _requests("grpc", n=1)[0]
                res = await c.infer("simple", inputs, compression_algorithm=alg)
                np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
        finally:
            await c.close()

    asyncio.run(main())


# --------------------------------------------------------------- streaming


def _start_stream(c, results):
    """Start a stream and probe it with one good request. A server without
    ModelStreamInfer fails here."""
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    try:
        c.async_stream_infer("simple", [make_input("grpc", "INPUT0", a), make_input("grpc", "INPUT1", a)],
                             request_id="probe")
    except InferenceServerException:
        # The stream already died (e.g. UNIMPLEMENTED right at call start);
        # the reason was delivered to the callback.
        pass
    r, e = results.get(timeout=30)
    assert e is None, e
    assert response_id("grpc", r) == "probe"
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a * 2)


def test_grpc_stream_infer(server, grpc_url):
    """ModelStreamInfer (bidirectional streaming), which perf_analyzer's
    --streaming and decoupled-model clients use."""
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    try:
        _start_stream(c, results)
        reqs = _requests("grpc", n=8)
        for rid, _, _, inputs in reqs:
            c.async_stream_infer("simple", inputs, request_id=rid)
        got = {}
        for _ in reqs:
            r, e = results.get(timeout=30)
            assert e is None, e
            got[response_id("grpc", r)] = r
        for rid, a, b, _ in reqs:
            np.testing.assert_array_equal(got[rid].as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(got[rid].as_numpy("OUTPUT1"), a - b)
    finally:
        try:
            c.stop_stream()
        finally:
            c.close()


def test_grpc_stream_infer_error_in_stream(server, grpc_url):
    """Errors on a stream are delivered per request (ModelStreamInferResponse
    error_message) and the stream stays usable."""
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    try:
        _start_stream(c, results)
        a = np.ones((1, 8), dtype=np.int32)
        c.async_stream_infer("simple", [make_input("grpc", "INPUT0", a), make_input("grpc", "INPUT1", a)],
                             request_id="bad")
        r, e = results.get(timeout=30)
        assert r is None and e is not None
        assert "unexpected shape for input 'INPUT0' for model 'simple'" in e.message()
        good = np.arange(16, dtype=np.int32).reshape(1, 16)
        c.async_stream_infer("simple", [make_input("grpc", "INPUT0", good), make_input("grpc", "INPUT1", good)],
                             request_id="good")
        r, e = results.get(timeout=30)
        assert e is None, e
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), good * 2)
    finally:
        try:
            c.stop_stream()
        finally:
            c.close()
