"""Request parameters and forwarded headers as a Python model sees them (request.parameters()),
through the official clients, as Triton's L0_parameters test drives them: a server of our own
started with --http-header-forward-pattern / --grpc-header-forward-pattern, and
test/python_models/py_params, which answers with its request's parameters as JSON.

What Triton 2.51 answered the same requests with (checked side by side with
tools/reference/tritonserver.sh): headers matching the pattern (case-insensitively, anywhere in the
name) come after the request's own parameters as strings; priority, timeout and the sequence
fields are the request's fields, not parameters; HTTP's binary_data_output frames the response and
is not passed on; `triton_` keys are refused (tritonclient refuses most of them itself, so those
go as raw requests)."""

from __future__ import annotations

import json
import queue
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from serval_helpers import REPO_ROOT, make_client
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import _ManagedServer

HEADERS = {"my_header_1": "my_value_1", "header_2": "value_2", "x-my_header_3": "v3"}
FORWARDED = {"my_header_1": "my_value_1", "x-my_header_3": "v3"}


@pytest.fixture(scope="module")
def params_server():
    tmp = Path(tempfile.mkdtemp(prefix="serval-params-"))
    shutil.copytree(REPO_ROOT / "test" / "python_models" / "py_params", tmp / "py_params")
    args = (
        "--model-repository", str(tmp), "--model-control-mode", "explicit", "--load-model", "py_params",
        # Upper case: Triton matches case-insensitively (its L0_parameters
        # test_header_forward_pattern_case_insensitive).
        "--http-header-forward-pattern", "MY_HEADER.*",
        "--grpc-header-forward-pattern", "MY_HEADER.*",
    )
    managed = _ManagedServer(args, log_name="serval-params.log")
    try:
        yield managed.start()
    finally:
        managed.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _inputs(mod):
    i = mod.InferInput("INPUT0", [1], "FP32")
    i.set_data_from_numpy(np.array([1], dtype=np.float32))
    return [i]


def _seen(result) -> dict:
    v = result.as_numpy("PARAMS")[0]
    return json.loads(v.decode() if isinstance(v, bytes) else v)


@pytest.mark.parametrize("parameters", [
    {"key1": "value1", "key2": "value2"},
    {"key1": 1, "key2": 2},
    {"key1": 123.125, "key2": True},
])
def test_parameters_and_forwarded_headers(params_server, protocol, parameters):
    c = make_client(protocol, params_server)
    mod = httpclient if protocol == "http" else grpcclient
    seen = _seen(c.infer("py_params", _inputs(mod), parameters=parameters, headers=dict(HEADERS)))
    assert seen == {**parameters, **FORWARDED}


def test_fields_that_are_not_parameters(params_server, protocol):
    """priority, timeout and the sequence fields set the request, not its parameters()."""
    c = make_client(protocol, params_server)
    mod = httpclient if protocol == "http" else grpcclient
    seen = _seen(c.infer("py_params", _inputs(mod), priority=1, timeout=10_000_000, parameters={"k": "v"}))
    assert seen == {"k": "v"}


def test_stream_forwards_the_stream_headers(params_server):
    c = grpcclient.InferenceServerClient(params_server.grpc_url)
    got: queue.Queue = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put(error or result), headers=dict(HEADERS))
    try:
        for parameters in ({"a": "b"}, {"n": 3}):
            c.async_stream_infer("py_params", _inputs(grpcclient), parameters=parameters)
            r = got.get(timeout=30)
            assert not isinstance(r, Exception), r
            assert _seen(r) == {**parameters, **FORWARDED}
    finally:
        c.stop_stream()


def _raw_http(server, parameters: dict):
    body = json.dumps({
        "inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1]}],
        "parameters": parameters,
    }).encode()
    req = urllib.request.Request(f"http://{server.http_url}/v2/models/py_params/infer", data=body)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            n = r.headers.get("Inference-Header-Content-Length")
            if n is not None:  # binary: 4-byte length, then the JSON text
                return 200, json.loads(raw[int(n) + 4:].decode())
            return 200, json.loads(json.loads(raw)["outputs"][0]["data"][0])
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]


def _raw_grpc(server, parameters: dict):
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_url))
    r = service_pb2.ModelInferRequest(model_name="py_params")
    i = r.inputs.add(name="INPUT0", datatype="FP32", shape=[1])
    i.contents.fp32_contents.append(1)
    for k, v in parameters.items():
        if isinstance(v, bool):
            r.parameters[k].bool_param = v
        elif isinstance(v, int):
            r.parameters[k].int64_param = v
        else:
            r.parameters[k].string_param = v
    try:
        out = stub.ModelInfer(r, timeout=30)
        return "OK", json.loads(out.raw_output_contents[0][4:].decode())
    except grpc.RpcError as e:
        return e.code().name, e.details()


def test_reserved_parameters_http(params_server):
    text = "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
    for key in ("triton_x", "triton_enable_empty_final_response"):
        assert _raw_http(params_server, {key: True}) == (400, text)
    # binary_data_output frames the response; the model does not see it.
    assert _raw_http(params_server, {"binary_data_output": True, "k": 1}) == (200, {"k": 1})


def test_reserved_parameters_grpc(params_server):
    assert _raw_grpc(params_server, {"triton_x": True}) == (
        "INVALID_ARGUMENT",
        "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following "
        "keys starting with 'triton_' are allowed: triton_enable_empty_final_response",
    )
    assert _raw_grpc(params_server, {"triton_enable_empty_final_response": 3}) == (
        "INVALID_ARGUMENT",
        "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.",
    )
    # Accepted on a unary call and not passed on.
    assert _raw_grpc(params_server, {"triton_enable_empty_final_response": True, "k": "v"}) == ("OK", {"k": "v"})
    # Over gRPC binary_data_output frames nothing and reaches the model as any parameter (as 2.51).
    assert _raw_grpc(params_server, {"binary_data_output": True, "k": "v"}) == (
        "OK",
        {"binary_data_output": True, "k": "v"},
    )
