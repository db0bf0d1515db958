"""Inference on Triton's classic ``simple`` / ``simple_string`` models over
both protocols: JSON and binary tensors, batching, requested-output subsets,
request ids, compression. Expected values are computed with numpy."""

from __future__ import annotations

import gzip
import json
import urllib.request
import zlib

import numpy as np
import pytest

from serval_helpers import (
    PROTOCOLS,
    as_str_list,
    make_client,
    make_input,
    make_output,
    response_id,
    response_model,
    response_outputs,
    simple_inputs,
)

# HTTP (binary_data for inputs, binary_data for outputs); gRPC ignores these.
HTTP_MODES = [(True, True), (False, False), (True, False), (False, True)]


def _modes(protocol):
    return HTTP_MODES if protocol == "http" else [(True, True)]


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_simple_sum_diff(protocol, client, batch):
    rng = np.random.default_rng(batch)
    a, b = simple_inputs(batch, rng)
    for in_bin, out_bin in _modes(protocol):
        inputs = [make_input(protocol, "INPUT0", a, binary=in_bin),
                  make_input(protocol, "INPUT1", b, binary=in_bin)]
        outputs = [make_output(protocol, "OUTPUT0", binary=out_bin),
                   make_output(protocol, "OUTPUT1", binary=out_bin)]
        res = client.infer("simple", inputs, outputs=outputs)
        o0, o1 = res.as_numpy("OUTPUT0"), res.as_numpy("OUTPUT1")
        assert o0.dtype == np.int32 and o1.dtype == np.int32
        assert o0.shape == (batch, 16) and o1.shape == (batch, 16)
        np.testing.assert_array_equal(o0, a + b, err_msg=f"binary in/out={in_bin}/{out_bin}")
        np.testing.assert_array_equal(o1, a - b, err_msg=f"binary in/out={in_bin}/{out_bin}")
        name, version = response_model(protocol, res)
        assert name == "simple"
        assert version and version.isdigit()


def test_http_binary_data_output_parameter(http_url):
    """Without requested outputs Triton answers every output as JSON "data";
    the request parameter binary_data_output=true switches all of them to the
    binary extension (tritonclient sets it whenever no outputs are given)."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)

    def post(extra):
        body = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.flatten().tolist()},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": a.flatten().tolist()},
        ]}
        body.update(extra)
        req = urllib.request.Request(f"http://{http_url}/v2/models/simple/infer", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.headers.get("Inference-Header-Content-Length"), resp.read()

    hlen, raw = post({})
    out = json.loads(raw)
    for o in out["outputs"]:
        assert "data" in o and "binary_data_size" not in o.get("parameters", {}), o
    hlen, raw = post({"parameters": {"binary_data_output": True}})
    assert hlen is not None
    meta = json.loads(raw[: int(hlen)])
    sizes = [o["parameters"]["binary_data_size"] for o in meta["outputs"]]
    assert sizes == [64, 64] and len(raw) == int(hlen) + 128
    for o in meta["outputs"]:
        assert "data" not in o


def test_custom_request_parameters_and_query_params(protocol, client):
    """Request 'parameters' (the parameters extension) the model does not use
    are accepted; HTTP query parameters are ignored."""
    rng = np.random.default_rng(19)
    a, b = simple_inputs(2, rng)
    kw = {"parameters": {"my_string": "value", "my_int": 7, "my_bool": True}}
    if protocol == "http":
        kw["query_params"] = {"test_1": 1, "test_2": "two"}
    res = client.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", b)], **kw)
    np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)


def test_simple_no_outputs_requested_returns_all(protocol, client):
    rng = np.random.default_rng(7)
    a, b = simple_inputs(2, rng)
    for in_bin, _ in _modes(protocol):
        res = client.infer("simple", [make_input(protocol, "INPUT0", a, binary=in_bin),
                                      make_input(protocol, "INPUT1", b, binary=in_bin)])
        assert sorted(response_outputs(protocol, res)) == ["OUTPUT0", "OUTPUT1"]
        np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("wanted", [["OUTPUT0"], ["OUTPUT1"]])
def test_simple_requested_output_subset(protocol, client, wanted):
    rng = np.random.default_rng(11)
    a, b = simple_inputs(4, rng)
    expected = {"OUTPUT0": a + b, "OUTPUT1": a - b}
    for in_bin, out_bin in _modes(protocol):
        res = client.infer(
            "simple",
            [make_input(protocol, "INPUT0", a, binary=in_bin),
             make_input(protocol, "INPUT1", b, binary=in_bin)],
            outputs=[make_output(protocol, n, binary=out_bin) for n in wanted],
        )
        assert response_outputs(protocol, res) == wanted
        for n in ("OUTPUT0", "OUTPUT1"):
            if n in wanted:
                np.testing.assert_array_equal(res.as_numpy(n), expected[n])
            else:
                assert res.as_numpy(n) is None


def test_simple_mixed_binary_and_json_outputs(http_url, server):
    rng = np.random.default_rng(3)
    a, b = simple_inputs(2, rng)
    c = make_client("http", server)
    try:
        res = c.infer(
            "simple",
            [make_input("http", "INPUT0", a, binary=True), make_input("http", "INPUT1", b, binary=False)],
            outputs=[make_output("http", "OUTPUT0", binary=True), make_output("http", "OUTPUT1", binary=False)],
        )
        resp = res.get_response()
        by_name = {o["name"]: o for o in resp["outputs"]}
        assert "binary_data_size" in by_name["OUTPUT0"].get("parameters", {})
        assert "data" in by_name["OUTPUT1"] and "data" not in by_name["OUTPUT0"]
        np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
    finally:
        c.close()


@pytest.mark.parametrize("request_id", ["my-request-1", "ünïcødé-id", "42"])
def test_request_id_echoed(protocol, client, request_id):
    rng = np.random.default_rng(5)
    a, b = simple_inputs(1, rng)
    res = client.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", b)],
                       request_id=request_id)
    assert response_id(protocol, res) == request_id


def test_no_request_id_means_empty_id(protocol, client):
    rng = np.random.default_rng(6)
    a, b = simple_inputs(1, rng)
    res = client.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", b)])
    assert response_id(protocol, res) == ""


def test_explicit_model_version(protocol, client):
    md = (client.get_model_metadata("simple") if protocol == "http"
          else client.get_model_metadata("simple", as_json=True))
    version = md["versions"][-1]
    rng = np.random.default_rng(8)
    a, b = simple_inputs(2, rng)
    res = client.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", b)],
                       model_version=version)
    assert response_model(protocol, res) == ("simple", version)
    np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)


@pytest.mark.parametrize("batch", [1, 5])
def test_simple_string(protocol, client, batch):
    rng = np.random.default_rng(100 + batch)
    a, b = simple_inputs(batch, rng)
    sa = np.array([str(x).encode() for x in a.flatten()], dtype=np.object_).reshape(a.shape)
    sb = np.array([str(x).encode() for x in b.flatten()], dtype=np.object_).reshape(b.shape)
    for in_bin, out_bin in _modes(protocol):
        res = client.infer(
            "simple_string",
            [make_input(protocol, "INPUT0", sa, "BYTES", binary=in_bin),
             make_input(protocol, "INPUT1", sb, "BYTES", binary=in_bin)],
            outputs=[make_output(protocol, "OUTPUT0", binary=out_bin),
                     make_output(protocol, "OUTPUT1", binary=out_bin)],
        )
        o0, o1 = res.as_numpy("OUTPUT0"), res.as_numpy("OUTPUT1")
        assert o0.shape == (batch, 16)
        assert [int(s) for s in as_str_list(o0)] == (a + b).flatten().tolist()
        assert [int(s) for s in as_str_list(o1)] == (a - b).flatten().tolist()


# ------------------------------------------------------------- compression


@pytest.mark.parametrize("req_alg", [None, "gzip", "deflate"])
@pytest.mark.parametrize("resp_alg", [None, "gzip", "deflate"])
def test_http_compression(http_url, server, req_alg, resp_alg):
    rng = np.random.default_rng(21)
    a, b = simple_inputs(8, rng)
    c = make_client("http", server)
    try:
        for binary in (True, False):
            res = c.infer(
                "simple",
                [make_input("http", "INPUT0", a, binary=binary), make_input("http", "INPUT1", b, binary=binary)],
                outputs=[make_output("http", "OUTPUT0", binary=binary),
                         make_output("http", "OUTPUT1", binary=binary)],
                request_compression_algorithm=req_alg,
                response_compression_algorithm=resp_alg,
            )
            np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
    finally:
        c.close()


@pytest.mark.parametrize("alg", ["gzip", "deflate"])
def test_http_response_really_compressed(http_url, alg):
    """The server must honour Accept-Encoding (Triton compresses the response
    and sets Content-Encoding) -- checked below the client library."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    body = json.dumps({
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.flatten().tolist()},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": a.flatten().tolist()},
        ]
    }).encode()
    compressed = gzip.compress(body) if alg == "gzip" else zlib.compress(body)
    req = urllib.request.Request(
        f"http://{http_url}/v2/models/simple/infer", data=compressed, method="POST",
        headers={"Content-Type": "application/json", "Content-Encoding": alg, "Accept-Encoding": alg},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
        assert resp.headers.get("Content-Encoding") == alg
        raw = resp.read()
    data = gzip.decompress(raw) if alg == "gzip" else zlib.decompress(raw)
    out = json.loads(data)
    by_name = {o["name"]: o for o in out["outputs"]}
    assert by_name["OUTPUT0"]["data"] == (a + a).flatten().tolist()
    assert by_name["OUTPUT1"]["data"] == [0] * 16


@pytest.mark.parametrize("alg", [None, "gzip", "deflate"])
def test_grpc_compression(grpc_url, server, alg):
    rng = np.random.default_rng(22)
    a, b = simple_inputs(8, rng)
    c = make_client("grpc", server)
    try:
        res = c.infer("simple", [make_input("grpc", "INPUT0", a), make_input("grpc", "INPUT1", b)],
                      compression_algorithm=alg)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
    finally:
        c.close()


def test_http_binary_response_layout(http_url):
    """Binary tensor extension below the client: the JSON header length is in
    Inference-Header-Content-Length and raw little-endian data follows."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    header = json.dumps({
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }).encode()
    req = urllib.request.Request(
        f"http://{http_url}/v2/models/simple/infer",
        data=header + a.tobytes() + b.tobytes(), method="POST",
        headers={"Content-Type": "application/octet-stream",
                 "Inference-Header-Content-Length": str(len(header))},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
        hlen = int(resp.headers["Inference-Header-Content-Length"])
        raw = resp.read()
    meta = json.loads(raw[:hlen])
    assert [o["name"] for o in meta["outputs"]] == ["OUTPUT0"]
    out = meta["outputs"][0]
    assert out["datatype"] == "INT32" and out["shape"] == [1, 16]
    assert out["parameters"]["binary_data_size"] == 64
    np.testing.assert_array_equal(np.frombuffer(raw[hlen:hlen + 64], dtype="<i4").reshape(1, 16), a + b)
