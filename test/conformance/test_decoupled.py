"""Decoupled models (many responses per request) with the official clients.

The bundled repeat_int32 and square_int32 (Triton's example behaviour) over
tritonclient's gRPC stream, sync (``start_stream`` / ``async_stream_infer``)
and asyncio (``stream_infer``); the final flag and the empty final response;
errors sent by the model mid-stream; cancellation reaching the model; BLS
into a decoupled model (a server of our own with test/python_models); unary
infer refused over both protocols with Triton's texts.
"""

from __future__ import annotations

import asyncio
import queue
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
from serval_helpers import REPO_ROOT, expect_triton_error

from conftest import _ManagedServer

TIMEOUT = 30


def repeat_inputs(values, delays=None, wait=0):
    n = len(values)
    arrays = {
        "IN": np.array(values, dtype=np.int32),
        "DELAY": np.array(delays if delays is not None else [0] * n, dtype=np.uint32),
        "WAIT": np.array([wait], dtype=np.uint32),
    }
    inputs = []
    for name, a in arrays.items():
        t = grpcclient.InferInput(name, list(a.shape), "INT32" if a.dtype == np.int32 else "UINT32")
        t.set_data_from_numpy(a)
        inputs.append(t)
    return inputs


def final_flag(result) -> bool:
    return result.get_response().parameters["triton_final_response"].bool_param


class Collector:
    """A stream callback that keeps (result, error) pairs in arrival order."""

    def __init__(self):
        self.items: queue.Queue = queue.Queue()

    def __call__(self, result, error):
        self.items.put((result, error))

    def take(self, until_final=True, count=None):
        got = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            result, error = self.items.get(timeout=max(0.1, deadline - time.monotonic()))
            got.append((result, error))
            if count is not None and len(got) == count:
                return got
            if until_final and result is not None and final_flag(result):
                return got


@pytest.fixture
def stream(grpc_url):
    client = grpcclient.InferenceServerClient(grpc_url)
    collector = Collector()
    client.start_stream(callback=collector)
    yield client, collector
    client.stop_stream()
    client.close()


@pytest.mark.parametrize("empty_final", [False, True])
def test_repeat_streams_every_response_in_order(stream, empty_final):
    client, collector = stream
    client.async_stream_infer(
        "repeat_int32", repeat_inputs([4, 2, 0, 1], delays=[5, 5, 5, 5]), request_id="rep-1",
        enable_empty_final_response=empty_final,
    )
    if empty_final:
        got = collector.take()
    else:
        # Without the empty final response the last data response carries no final flag: the
        # client sees exactly the four responses.
        got = collector.take(until_final=False, count=4)
    assert all(err is None for _, err in got)
    data = [r for r, _ in got if r.as_numpy("OUT") is not None]
    assert [int(r.as_numpy("OUT")[0]) for r in data] == [4, 2, 0, 1]
    assert [int(r.as_numpy("IDX")[0]) for r in data] == [0, 1, 2, 3]
    assert all(r.get_response().id == "rep-1" for r, _ in got)
    assert all(not final_flag(r) for r in data)
    if empty_final:
        last = got[-1][0]
        assert len(got) == 5
        assert final_flag(last)
        assert last.get_response().outputs == [] and last.get_response().model_name == "repeat_int32"
    else:
        # and nothing else arrives for it.
        with pytest.raises(queue.Empty):
            collector.items.get(timeout=0.3)


def test_square_answers_n_times(stream):
    client, collector = stream
    a = np.array([3], dtype=np.int32)
    t = grpcclient.InferInput("IN", [1], "INT32")
    t.set_data_from_numpy(a)
    client.async_stream_infer("square_int32", [t], request_id="sq", enable_empty_final_response=True)
    got = collector.take()
    assert [int(r.as_numpy("OUT")[0]) for r, _ in got[:-1]] == [9, 9, 9]
    assert final_flag(got[-1][0]) and got[-1][0].as_numpy("OUT") is None


def test_two_streams_of_responses_interleave(stream):
    client, collector = stream
    client.async_stream_infer("repeat_int32", repeat_inputs([1, 1, 1], delays=[60, 60, 60]), request_id="slow",
                              enable_empty_final_response=True)
    client.async_stream_infer("repeat_int32", repeat_inputs([2, 2, 2], delays=[15, 15, 15]), request_id="fast",
                              enable_empty_final_response=True)
    order = []
    finals = 0
    deadline = time.monotonic() + TIMEOUT
    while finals < 2:
        result, error = collector.items.get(timeout=max(0.1, deadline - time.monotonic()))
        assert error is None
        order.append(result.get_response().id)
        finals += final_flag(result)
    # The fast request finished before the slow one: its responses did not wait for the other's.
    assert order.index("fast") < order.index("slow") or order[:4].count("fast") >= 3
    assert order.count("fast") == 4 and order.count("slow") == 4


@pytest.fixture
def aio_results(grpc_url):
    async def run():
        client = grpcaio.InferenceServerClient(grpc_url)

        async def requests():
            # The asyncio client has no enable_empty_final_response (and refuses triton_*
            # parameters itself): it gets the data responses, none of them final.
            yield {"model_name": "repeat_int32", "inputs": repeat_inputs([7, 8, 9]), "request_id": "aio"}

        got = []
        # The request iterator ends after one request (a half-close): the server ends the stream
        # once that request's final response is written.
        async for result, error in client.stream_infer(requests()):
            assert error is None
            got.append(result)
        await client.close()
        return got

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def test_asyncio_client_receives_every_response(aio_results):
    assert [int(r.as_numpy("OUT")[0]) for r in aio_results] == [7, 8, 9]
    assert not any(final_flag(r) for r in aio_results)
    assert {r.get_response().id for r in aio_results} == {"aio"}


def test_unary_infer_on_a_decoupled_model_is_refused(grpc_url, http_url):
    with expect_triton_error("grpc", "UNSUPPORTED", "ModelInfer RPC doesn't support models with decoupled transaction policy"):
        grpcclient.InferenceServerClient(grpc_url).infer("repeat_int32", repeat_inputs([1]))
    h = httpclient.InferenceServerClient(http_url)
    inputs = []
    for name, dt, a in [("IN", "INT32", np.array([1], np.int32)), ("DELAY", "UINT32", np.array([0], np.uint32)),
                        ("WAIT", "UINT32", np.array([0], np.uint32))]:
        t = httpclient.InferInput(name, [1], dt)
        t.set_data_from_numpy(a)
        inputs.append(t)
    with expect_triton_error("http", "UNSUPPORTED", "doesn't support models with decoupled transaction policy"):
        h.infer("repeat_int32", inputs)


# -- a server of our own with the decoupled test models ----------------------------------------

PY_MODELS = ["py_decoupled", "py_bls_stream"]
# repeat_int32 -> add_one_int32 per response (test/reference/models).
ENSEMBLE_MODELS = ["add_one_int32", "ensemble_repeat"]


@pytest.fixture(scope="module")
def decoupled_server():
    """Serval with model_repository plus a second repository of the decoupled test models."""
    extra = Path(tempfile.mkdtemp(prefix="serval-decoupled-"))
    for m in PY_MODELS:
        shutil.copytree(REPO_ROOT / "test" / "python_models" / m, extra / m)
    for m in ENSEMBLE_MODELS:
        shutil.copytree(REPO_ROOT / "test" / "reference" / "models" / m, extra / m)
    managed = _ManagedServer(("--model-repository", str(extra)), log_name="serval-decoupled.log")
    try:
        yield managed.start()
    finally:
        managed.stop()
        shutil.rmtree(extra, ignore_errors=True)


def mode_inputs(mode):
    t = grpcclient.InferInput("MODE", [1], "BYTES")
    t.set_data_from_numpy(np.array([mode.encode()], dtype=np.object_))
    return [t]


def test_an_error_response_mid_stream_keeps_the_request_going(decoupled_server):
    client = grpcclient.InferenceServerClient(decoupled_server.grpc_url)
    collector = Collector()
    client.start_stream(callback=collector)
    client.async_stream_infer("py_decoupled", mode_inputs("error_mid"), request_id="e", enable_empty_final_response=True)
    got = []
    deadline = time.monotonic() + TIMEOUT
    while True:
        result, error = collector.items.get(timeout=max(0.1, deadline - time.monotonic()))
        got.append((result, error))
        if result is not None and final_flag(result):
            break
    client.stop_stream()
    assert [e is None for _, e in got] == [True, False, True, True]
    assert "a bad step" in got[1][1].message()
    assert got[2][0].as_numpy("OUT")[0] == b"after"


def test_cancelling_the_stream_reaches_the_model(decoupled_server):
    client = grpcclient.InferenceServerClient(decoupled_server.grpc_url)
    collector = Collector()
    client.start_stream(callback=collector)
    client.async_stream_infer("py_decoupled", mode_inputs("until_cancel"), request_id="c")
    collector.take(until_final=False, count=2)  # it is running
    client.stop_stream(cancel_requests=True)
    # The model saw is_cancelled() and stopped; it records how.
    deadline = time.monotonic() + TIMEOUT
    while True:
        r = report(decoupled_server)
        if r != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert r.startswith("cancelled=True sender=True after="), r


def report(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    collector = Collector()
    client.start_stream(callback=collector)
    client.async_stream_infer("py_decoupled", mode_inputs("report"))
    (result, error), = collector.take()
    client.stop_stream()
    assert error is None
    return result.as_numpy("OUT")[0].decode()


@pytest.mark.parametrize("mode", ["sum", "async_sum"])
def test_bls_iterates_a_decoupled_models_responses(decoupled_server, mode):
    client = grpcclient.InferenceServerClient(decoupled_server.grpc_url)
    values = np.array([5, 7, 11, 13], dtype=np.int32)
    t = grpcclient.InferInput("IN", [4], "INT32")
    t.set_data_from_numpy(values)
    result = client.infer("py_bls_stream", mode_inputs(mode) + [t])
    assert int(result.as_numpy("SUM")[0]) == int(values.sum())
    # Every response, then the empty final one, as Triton's iterator yields them.
    assert int(result.as_numpy("COUNT")[0]) == len(values) + 1
    assert int(result.as_numpy("EMPTY")[0]) == 1


def test_an_ensemble_with_a_decoupled_step_streams_each_response(decoupled_server):
    client = grpcclient.InferenceServerClient(decoupled_server.grpc_url)
    config = client.get_model_config("ensemble_repeat", as_json=True)["config"]
    # Triton marks an ensemble with a decoupled step decoupled, whatever its config says.
    assert config["model_transaction_policy"]["decoupled"] is True
    collector = Collector()
    client.start_stream(callback=collector)
    client.async_stream_infer("ensemble_repeat", repeat_inputs([10, 20, 30], delays=[5, 5, 5]), request_id="ens",
                              enable_empty_final_response=True)
    got = collector.take()
    client.stop_stream()
    assert all(e is None for _, e in got)
    data = [r for r, _ in got if r.as_numpy("OUT") is not None]
    assert [int(r.as_numpy("OUT")[0]) for r in data] == [11, 21, 31]
    assert [int(r.as_numpy("IDX")[0]) for r in data] == [0, 1, 2]
    assert final_flag(got[-1][0])
