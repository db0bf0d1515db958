"""gRPC bidirectional streaming (ModelStreamInfer) with the official clients:
``start_stream`` / ``async_stream_infer`` / ``stop_stream`` and the asyncio
client's ``stream_infer``.

What Triton does for a model that is not decoupled, from its
``stream_infer_handler.cc``: every request gets exactly one response, written
in the order the requests arrived; a successful one carries the parameter
``triton_final_response: true``; a failed request is answered in
``error_message`` (infer_response holding the request id, and the model's name
and version when the model itself failed) and the stream goes on; ``triton_enable_empty_final_response`` only ever adds a response for
decoupled models.
"""

from __future__ import annotations

import asyncio
import queue

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcaio
from tritonclient.utils import InferenceServerException

from serval_helpers import make_client, make_input, response_id, simple_inputs

TIMEOUT = 60


def _simple(batch: int, seed: int):
    a, b = simple_inputs(batch, np.random.default_rng(seed))
    return a, b, [make_input("grpc", "INPUT0", a), make_input("grpc", "INPUT1", b)]


def _collect(results: queue.Queue, n: int) -> list:
    return [results.get(timeout=TIMEOUT) for _ in range(n)]


@pytest.fixture
def stream_client(server, grpc_url):
    """A gRPC client with a started stream; yields (client, results queue)."""
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        yield c, results
    finally:
        try:
            c.stop_stream(cancel_requests=True)
        finally:
            c.close()


def test_stream_many_requests_with_ids(stream_client):
    c, results = stream_client
    sent = []
    for i in range(12):
        a, b, inputs = _simple(1 + i % 8, seed=i)
        rid = f"stream-{i}"
        c.async_stream_infer("simple", inputs, request_id=rid)
        sent.append((rid, a, b))
    got = _collect(results, len(sent))
    for (rid, a, b), (result, error) in zip(sent, got):
        assert error is None, error
        # One model, not decoupled: the responses come in request order.
        assert response_id("grpc", result) == rid
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        response = result.get_response()
        assert response.model_name == "simple"
        assert response.parameters["triton_final_response"].bool_param is True


def test_stream_error_result_and_the_stream_goes_on(stream_client):
    c, results = stream_client
    a, b, good = _simple(2, seed=7)
    c.async_stream_infer("simple", good, request_id="first")
    wrong = np.ones((1, 8), dtype=np.int32)
    c.async_stream_infer("simple", [make_input("grpc", "INPUT0", wrong), make_input("grpc", "INPUT1", wrong)],
                         request_id="bad-shape")
    c.async_stream_infer("no_such_model", good, request_id="bad-model")
    c.async_stream_infer("simple", good, request_id="last")
    (r0, e0), (r1, e1), (r2, e2), (r3, e3) = _collect(results, 4)
    assert e0 is None and response_id("grpc", r0) == "first"
    assert r1 is None and isinstance(e1, InferenceServerException)
    assert "unexpected shape for input 'INPUT0' for model 'simple'" in e1.message()
    assert r2 is None and isinstance(e2, InferenceServerException)
    assert e2.message() == "Request for unknown model: 'no_such_model' is not found"
    assert e3 is None and response_id("grpc", r3) == "last"
    np.testing.assert_array_equal(r3.as_numpy("OUTPUT0"), a + b)


def test_stop_stream_waits_for_pending_requests(server, grpc_url):
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    try:
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        n = 16
        for i in range(n):
            _, _, inputs = _simple(8, seed=100 + i)
            c.async_stream_infer("simple", inputs, request_id=str(i))
        # Half-closes the stream and blocks until the server has answered everything
        # and ended the stream.
        c.stop_stream()
        assert results.qsize() == n
        got = [results.get_nowait() for _ in range(n)]
        assert [e for _, e in got] == [None] * n
        assert [response_id("grpc", r) for r, _ in got] == [str(i) for i in range(n)]
        # A new stream on the same client works.
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        a, b, inputs = _simple(1, seed=1)
        c.async_stream_infer("simple", inputs, request_id="again")
        r, e = results.get(timeout=TIMEOUT)
        assert e is None and response_id("grpc", r) == "again"
        c.stop_stream()
    finally:
        c.close()


def test_stop_stream_cancel_requests_leaves_the_server_serving(server, grpc_url):
    c = make_client("grpc", server)
    results: queue.Queue = queue.Queue()
    try:
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        image = np.full((4, 3, 224, 224), 0.5, dtype=np.float32)
        for i in range(8):
            c.async_stream_infer("image_classifier", [make_input("grpc", "INPUT", image)], request_id=f"img-{i}")
        c.stop_stream(cancel_requests=True)
        # Whatever was answered before the cancel is a real answer.
        while not results.empty():
            r, e = results.get_nowait()
            assert e is not None or response_id("grpc", r).startswith("img-")
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        a, b, inputs = _simple(1, seed=2)
        c.async_stream_infer("simple", inputs, request_id="after-cancel")
        r, e = results.get(timeout=TIMEOUT)
        assert e is None, e
        assert response_id("grpc", r) == "after-cancel"
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        c.stop_stream()
    finally:
        c.close()


def test_empty_final_response_is_only_for_decoupled_models(stream_client):
    """A model that is not decoupled answers once, final, even when the client
    asks for an empty final response (Triton sends one only for decoupled models)."""
    c, results = stream_client
    a, b, inputs = _simple(1, seed=3)
    c.async_stream_infer("simple", inputs, request_id="e1", enable_empty_final_response=True)
    c.async_stream_infer("simple", inputs, request_id="e2")
    (r1, e1), (r2, e2) = _collect(results, 2)
    assert e1 is None and e2 is None
    assert [response_id("grpc", r1), response_id("grpc", r2)] == ["e1", "e2"]
    assert r1.get_response().parameters["triton_final_response"].bool_param is True
    np.testing.assert_array_equal(r1.as_numpy("OUTPUT0"), a + b)
    assert results.empty()


def test_aio_stream_infer(server, grpc_url):
    async def main():
        c = grpcaio.InferenceServerClient(grpc_url)
        expected = {}

        async def requests():
            inputs = None
            for i in range(6):
                a, b, inputs = _simple(1 + i, seed=200 + i)
                expected[f"aio-{i}"] = (a, b)
                yield {"model_name": "simple", "inputs": inputs, "request_id": f"aio-{i}"}
            yield {"model_name": "no_such_model", "inputs": inputs, "request_id": "aio-bad"}

        got = []
        try:
            async for result, error in c.stream_infer(requests()):
                got.append((result, error))
                if len(got) == 7:
                    break
        finally:
            await c.close()
        return expected, got

    expected, got = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert len(got) == 7
    for (result, error), rid in zip(got[:6], expected):
        assert error is None, error
        assert response_id("grpc", result) == rid
        a, b = expected[rid]
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    result, error = got[6]
    assert result is None
    assert "Request for unknown model: 'no_such_model' is not found" in str(error)
