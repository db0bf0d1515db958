"""The ``triton_grpc_error`` stream header with the official gRPC client.

Triton (``stream_infer_handler.cc``; the "GRPC Status Codes" sections of the server and client
docs): a stream started with ``headers={"triton_grpc_error": "true"}`` ends at the first request
that fails in the core, with that error's gRPC status code and message; tritonclient hands the
callback an ``InferenceServerException`` whose ``status()`` is the code. Without the header the
error comes in-band (``error_message``, no status) and the stream goes on.

test/python_models/py_errors fails in the model itself (MODE ``error``: an error response with
INVALID_ARG), the kind of failure Triton reports through the response callback.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from serval_helpers import REPO_ROOT
from tritonclient.utils import InferenceServerException

from conftest import _ManagedServer

TIMEOUT = 60


@pytest.fixture(scope="module")
def err_server():
    tmp = Path(tempfile.mkdtemp(prefix="serval-grpcerr-"))
    shutil.copytree(REPO_ROOT / "test" / "python_models" / "py_errors", tmp / "py_errors")
    args = ("--model-repository", str(tmp), "--model-control-mode", "explicit", "--load-model", "py_errors")
    managed = _ManagedServer(args, log_name="serval-grpc-error.log")
    try:
        yield managed.start()
    finally:
        managed.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _mode(mode: str):
    inp = grpcclient.InferInput("MODE", [1, 1], "BYTES")
    inp.set_data_from_numpy(np.array([[mode.encode()]], dtype=np.object_))
    return [inp]


def _stream(server, headers=None):
    c = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    c.start_stream(callback=lambda result, error: results.put((result, error)), headers=headers)
    return c, results


def _close(c) -> None:
    try:
        c.stop_stream(cancel_requests=True)
    finally:
        c.close()


def test_header_true_ends_the_stream_with_the_status_code(err_server):
    c, results = _stream(err_server, {"triton_grpc_error": "true"})
    try:
        c.async_stream_infer("py_errors", _mode("ok"), request_id="first")
        result, error = results.get(timeout=TIMEOUT)
        assert error is None
        assert result.get_response().id == "first"
        c.async_stream_infer("py_errors", _mode("error"), request_id="refused")
        result, error = results.get(timeout=TIMEOUT)
        assert result is None
        assert isinstance(error, InferenceServerException)
        assert error.status() == "StatusCode.INVALID_ARGUMENT"
        assert error.message() == "this request is refused"
    finally:
        _close(c)


@pytest.mark.parametrize("headers", [None, {"triton_grpc_error": "false"}, {"triton_grpc_error": "True"}])
def test_without_the_header_errors_are_in_band_and_the_stream_goes_on(err_server, headers):
    c, results = _stream(err_server, headers)
    try:
        c.async_stream_infer("py_errors", _mode("error"), request_id="refused")
        c.async_stream_infer("py_errors", _mode("ok"), request_id="after")
        (r1, e1), (r2, e2) = results.get(timeout=TIMEOUT), results.get(timeout=TIMEOUT)
        assert r1 is None and isinstance(e1, InferenceServerException)
        # In-band: the message only, no gRPC status.
        assert e1.status() is None
        assert e1.message() == "this request is refused"
        assert e2 is None and r2.get_response().id == "after"
    finally:
        _close(c)
