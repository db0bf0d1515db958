"""Invalid requests must fail the way Triton fails them: same HTTP status /
gRPC status code, same message text (Triton may prefix the message with
"[request id: <id>] ", so fragments are matched, not whole strings).

Sources (Triton r24+/main):
* core src/model_repository_manager/model_repository_manager.cc GetModel:
  "Request for unknown model: " + model_lifecycle message;
  core src/model_lifecycle.cc GetModel: NOT_FOUND "'<m>' is not found",
  "'<m>' version <v> is not found"
* core src/infer_request.cc Normalize(): INVALID_ARG messages below
* core src/model.cc GetInput/GetOutput: "unexpected inference input/output"
* server src/http_server.cc HttpCodeFromError: NOT_FOUND->404,
  INVALID_ARG->400, UNAVAILABLE->503, UNSUPPORTED->501, INTERNAL->500
* server gRPC frontend: TRITONSERVER error code -> grpc::StatusCode
  (NOT_FOUND, INVALID_ARGUMENT, UNAVAILABLE, UNIMPLEMENTED, INTERNAL)
"""

from __future__ import annotations

import asyncio
import queue

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcaio
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException

from serval_helpers import PROTOCOLS, expect_triton_error, make_client, make_input, make_output


def _simple(protocol, a_shape=(1, 16), b_shape=(1, 16), a_dtype=np.int32, a_dt=None):
    a = np.ones(a_shape, dtype=a_dtype)
    b = np.ones(b_shape, dtype=np.int32)
    return [make_input(protocol, "INPUT0", a, a_dt), make_input(protocol, "INPUT1", b)]


# (id, kwargs builder, TRITONSERVER code, fragments, regex)
CASES = {
    "unknown_model": dict(
        model="no_such_model", inputs=lambda p: _simple(p), code="NOT_FOUND",
        frags=["Request for unknown model: 'no_such_model' is not found"]),
    "unknown_version": dict(
        model="simple", version="999", inputs=lambda p: _simple(p), code="NOT_FOUND",
        frags=["Request for unknown model: 'simple' version 999 is not found"]),
    "wrong_datatype": dict(
        model="simple", inputs=lambda p: _simple(p, a_dtype=np.float32), code="INVALID_ARG",
        frags=["inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"]),
    "wrong_shape": dict(
        model="simple", inputs=lambda p: _simple(p, a_shape=(1, 8)), code="INVALID_ARG",
        frags=["unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]"]),
    "missing_input": dict(
        model="simple", inputs=lambda p: _simple(p)[:1], code="INVALID_ARG",
        frags=["expected 2 inputs but got 1 inputs for model 'simple'"],
        regex=r"missing required input(s|\(s\)) \['INPUT1'\]"),
    "batch_too_large": dict(
        model="simple", inputs=lambda p: _simple(p, a_shape=(9, 16), b_shape=(9, 16)), code="INVALID_ARG",
        frags=["inference request batch-size must be <= 8 for 'simple'"]),
    "batch_mismatch": dict(
        model="simple", inputs=lambda p: _simple(p, a_shape=(2, 16), b_shape=(1, 16)), code="INVALID_ARG",
        frags=["batch size does not match other inputs for 'simple'"]),
    "unknown_input": dict(
        model="simple",
        inputs=lambda p: [make_input(p, "INPUT0", np.ones((1, 16), np.int32)),
                          make_input(p, "INPUT_X", np.ones((1, 16), np.int32))],
        code="INVALID_ARG", frags=["unexpected inference input 'INPUT_X' for model 'simple'"]),
    "unknown_output": dict(
        model="simple", inputs=lambda p: _simple(p), outputs=["OUTPUT9"], code="INVALID_ARG",
        frags=["unexpected inference output 'OUTPUT9' for model 'simple'"]),
    "identity_batch_too_large": dict(
        model="identity_fp32", inputs=lambda p: [make_input(p, "INPUT0", np.ones((9, 4), np.float32))],
        code="INVALID_ARG", frags=["inference request batch-size must be <= 8 for 'identity_fp32'"]),
    "image_wrong_shape": dict(
        model="image_classifier",
        inputs=lambda p: [make_input(p, "INPUT", np.zeros((1, 3, 32, 32), np.float32))],
        code="INVALID_ARG",
        frags=["unexpected shape for input 'INPUT' for model 'image_classifier'. "
               "Expected [-1,3,224,224], got [1,3,32,32]"]),
    "ranker_wrong_datatype": dict(
        model="ranker_mlp", inputs=lambda p: [make_input(p, "INPUT", np.zeros((1, 512), np.float64))],
        code="INVALID_ARG",
        frags=["inference input 'INPUT' data-type is 'FP64', but model 'ranker_mlp' expects 'FP32'"]),
}


def _call_kwargs(protocol, case):
    kw = dict(model_name=case["model"], inputs=case["inputs"](protocol))
    if "version" in case:
        kw["model_version"] = case["version"]
    if "outputs" in case:
        kw["outputs"] = [make_output(protocol, n) for n in case["outputs"]]
    return kw


@pytest.mark.parametrize("case_id", sorted(CASES))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_sync(server, protocol, case_id):
    case = CASES[case_id]
    c = make_client(protocol, server)
    try:
        with expect_triton_error(protocol, case["code"], *case["frags"], regex=case.get("regex")):
            c.infer(**_call_kwargs(protocol, case))
        # The server is still healthy afterwards.
        assert c.is_server_ready()
    finally:
        c.close()


@pytest.mark.parametrize("case_id", ["unknown_model", "wrong_shape", "batch_too_large"])
def test_error_http_json_inputs(server, http_url, case_id):
    """Same errors when the tensors are sent as JSON rather than binary."""
    case = CASES[case_id]
    c = make_client("http", server)
    try:
        kw = _call_kwargs("http", case)
        for inp, arr in zip(kw["inputs"], [np.ones(i.shape(), np.int32) for i in kw["inputs"]]):
            inp.set_data_from_numpy(arr, binary_data=False)
        with expect_triton_error("http", case["code"], *case["frags"]):
            c.infer(**kw)
    finally:
        c.close()


@pytest.mark.parametrize("case_id", ["unknown_model", "wrong_datatype", "missing_input"])
def test_error_http_async_infer(server, http_url, case_id):
    case = CASES[case_id]
    c = make_client("http", server, concurrency=2)
    try:
        req = c.async_infer(**_call_kwargs("http", case))
        with expect_triton_error("http", case["code"], *case["frags"], regex=case.get("regex")):
            req.get_result(timeout=30)
    finally:
        c.close()


@pytest.mark.parametrize("case_id", ["unknown_model", "wrong_datatype", "missing_input"])
def test_error_grpc_async_infer_callback(server, grpc_url, case_id):
    case = CASES[case_id]
    c = make_client("grpc", server)
    done: queue.Queue = queue.Queue()
    try:
        c.async_infer(callback=lambda result, error: done.put((result, error)), **_call_kwargs("grpc", case))
        result, error = done.get(timeout=30)
        assert result is None and isinstance(error, InferenceServerException)

        def reraise():
            raise error

        with expect_triton_error("grpc", case["code"], *case["frags"], regex=case.get("regex")):
            reraise()
    finally:
        c.close()


@pytest.mark.parametrize("case_id", ["unknown_model", "unknown_version", "wrong_datatype",
                                     "wrong_shape", "missing_input", "batch_too_large"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_aio(server, protocol, case_id):
    case = CASES[case_id]
    url = server.http_url if protocol == "http" else server.grpc_url
    if not url:
        pytest.skip(f"no {protocol} endpoint")

    async def main():
        c = (httpaio if protocol == "http" else grpcaio).InferenceServerClient(url)
        try:
            await c.infer(**_call_kwargs(protocol, case))
        finally:
            await c.close()

    with expect_triton_error(protocol, case["code"], *case["frags"], regex=case.get("regex")):
        asyncio.run(main())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_errors_do_not_poison_following_requests(server, protocol):
    """Interleave bad and good requests on one connection."""
    c = make_client(protocol, server)
    try:
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        for _ in range(5):
            with pytest.raises(InferenceServerException):
                c.infer("simple", _simple(protocol, a_shape=(1, 8)))
            res = c.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", a)])
            np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a * 2)
    finally:
        c.close()
