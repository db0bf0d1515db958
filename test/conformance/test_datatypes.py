"""Every tensor datatype round-trips bit-exactly through the identity_*
models, over gRPC and over HTTP with binary and JSON tensor data."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from serval_helpers import (
    IDENTITY_TYPES,
    PROTOCOLS,
    as_str_list,
    expect_triton_error,
    make_client,
    make_input,
    make_output,
)

# No embedded NUL: Triton's onnxruntime backend hands strings to ORT as
# NUL-terminated C strings (FillStringTensor), so with an ONNX identity model
# Triton itself truncates at the first NUL.
STRINGS = ["hello", "", "héllo wörld", "日本語テキスト", "emoji 🙂🚀", "tab\tnew\nline",
           'quote " backslash \\', "ctrl \x01\x1f\x7f", "x" * 5000, "0", "-12"]


def sample(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A [2, n] tensor exercising the edge values of each datatype."""
    dt, npt = IDENTITY_TYPES[kind]
    if kind == "bool":
        v = rng.integers(0, 2, size=12).astype(bool)
        v[:2] = [True, False]
    elif kind == "string":
        v = np.array([s.encode("utf-8") for s in STRINGS] + [b"last"], dtype=np.object_)
    elif kind == "uint64":
        special = [0, 1, 2**32, 2**53, 2**53 + 1, 2**63, 2**63 + 12345, 2**64 - 2, 2**64 - 1]
        rnd = rng.integers(2**53, 2**64 - 1, size=7, dtype=np.uint64, endpoint=True)
        v = np.concatenate([np.array(special, dtype=np.uint64), rnd])
    elif kind == "int64":
        special = [-(2**63), 2**63 - 1, -(2**53) - 1, 2**53 + 1, 0, -1, 1, 9007199254740993]
        v = np.concatenate([np.array(special, dtype=np.int64),
                            rng.integers(-(2**63), 2**63 - 1, size=8, dtype=np.int64)])
    elif kind.startswith(("int", "uint")):
        info = np.iinfo(npt)
        special = [info.min, info.max, 0, 1, info.max - 1]
        v = np.concatenate([np.array(special, dtype=npt),
                            rng.integers(info.min, info.max, size=7, dtype=npt, endpoint=True)])
    else:  # floats
        info = np.finfo(npt)
        special = [0.0, -0.0, 1.0, -1.0, 0.1, 1.0 / 3.0, float(info.max), float(info.min),
                   float(info.tiny), float(info.smallest_subnormal), 65504.0 if kind == "fp16" else 1e30]
        v = np.concatenate([np.array(special, dtype=npt),
                            (rng.standard_normal(9) * 100).astype(npt)])
    if len(v) % 2:
        v = v[:-1]
    return v.reshape(2, -1)


def assert_same(kind: str, got: np.ndarray, want: np.ndarray):
    assert got is not None, "output missing"
    assert got.shape == want.shape, (got.shape, want.shape)
    if kind == "string":
        assert [s.encode("utf-8") for s in as_str_list(got)] == list(want.flatten())
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        # Bit-exact (covers -0.0 and subnormals for floats).
        assert got.tobytes() == want.tobytes(), f"{kind}: {got!r} != {want!r}"


@pytest.mark.parametrize("kind", sorted(IDENTITY_TYPES))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_identity_roundtrip_binary(server, protocol, kind):
    dt, _ = IDENTITY_TYPES[kind]
    data = sample(kind, np.random.default_rng(zlib.crc32(kind.encode())))
    c = make_client(protocol, server)
    try:
        res = c.infer(f"identity_{kind}", [make_input(protocol, "INPUT0", data, dt, binary=True)],
                      outputs=[make_output(protocol, "OUTPUT0", binary=True)])
        assert_same(kind, res.as_numpy("OUTPUT0"), data)
    finally:
        c.close()


JSON_KINDS = sorted(k for k in IDENTITY_TYPES if k != "fp16")


@pytest.mark.parametrize("kind", JSON_KINDS)
@pytest.mark.parametrize("in_bin,out_bin", [(False, False), (True, False), (False, True)])
def test_identity_roundtrip_http_json(server, http_url, kind, in_bin, out_bin):
    """JSON tensors: uint64/int64 beyond 2^53 must survive exactly (a server
    that parses JSON numbers into doubles loses them), floats must survive
    bit-exactly, unicode strings unchanged."""
    dt, _ = IDENTITY_TYPES[kind]
    data = sample(kind, np.random.default_rng(1 + zlib.crc32(kind.encode())))
    c = make_client("http", server)
    try:
        res = c.infer(f"identity_{kind}", [make_input("http", "INPUT0", data, dt, binary=in_bin)],
                      outputs=[make_output("http", "OUTPUT0", binary=out_bin)])
        out = res.as_numpy("OUTPUT0")
        if kind == "string" and not out_bin:
            # JSON outputs come back as str; compare as text.
            assert out.shape == data.shape
            assert as_str_list(out) == [s.decode("utf-8") for s in data.flatten()]
        else:
            assert_same(kind, out, data)
    finally:
        c.close()


def test_uint64_json_exact_wire(http_url):
    """Look at the JSON text itself: Triton writes uint64 as exact integers."""
    import json
    import urllib.request

    big = [2**64 - 1, 2**53 + 1]
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "UINT64", "data": big}]})
    req = urllib.request.Request(f"http://{http_url}/v2/models/identity_uint64/infer", data=body.encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    assert "18446744073709551615" in text and "9007199254740993" in text, text
    out = json.loads(text)["outputs"][0]
    assert out["datatype"] == "UINT64" and out["shape"] == [1, 2] and out["data"] == big


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_string_arbitrary_bytes_binary(server, protocol):
    """BYTES elements are byte strings, not text: non-UTF-8 bytes round-trip
    over gRPC and over HTTP's binary tensor format."""
    # (No NUL bytes: see STRINGS.) Triton's ORT backend passes the bytes
    # through std::string untouched.
    data = np.array([b"\xff\xfe\x01", b"\x80", bytes(range(1, 256)), b""], dtype=np.object_).reshape(1, 4)
    c = make_client(protocol, server)
    try:
        res = c.infer("identity_string", [make_input(protocol, "INPUT0", data, "BYTES", binary=True)],
                      outputs=[make_output(protocol, "OUTPUT0", binary=True)])
        out = res.as_numpy("OUTPUT0")
        assert out.shape == (1, 4)
        assert list(out.flatten()) == list(data.flatten())
    finally:
        c.close()


def test_fp16_json_input_rejected(server, http_url):
    # http_server.cc ReadDataFromJson: INVALID_ARG (400)
    data = np.ones((1, 4), dtype=np.float16)
    c = make_client("http", server)
    try:
        with expect_triton_error("http", "INVALID_ARG",
                                 "receiving FP16 data via JSON is not supported. "
                                 "Please use the binary data format for input INPUT0"):
            c.infer("identity_fp16", [make_input("http", "INPUT0", data, "FP16", binary=False)],
                    outputs=[make_output("http", "OUTPUT0", binary=True)])
    finally:
        c.close()


def test_fp16_json_output_rejected(server, http_url):
    # http_server.cc WriteDataToJson: INVALID_ARG (400)
    data = np.ones((1, 4), dtype=np.float16)
    c = make_client("http", server)
    try:
        with expect_triton_error("http", "INVALID_ARG",
                                 "sending FP16 data via JSON is not supported. "
                                 "Please use the binary data format for output"):
            c.infer("identity_fp16", [make_input("http", "INPUT0", data, "FP16", binary=True)],
                    outputs=[make_output("http", "OUTPUT0", binary=False)])
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("n", [1, 1000])
def test_identity_variable_length(server, protocol, n):
    data = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
    c = make_client(protocol, server)
    try:
        res = c.infer("identity_fp32", [make_input(protocol, "INPUT0", data)])
        assert_same("fp32", res.as_numpy("OUTPUT0"), data)
    finally:
        c.close()


# ------------------------------------------- gRPC typed InferTensorContents


def _typed_request(model, name, datatype, shape, field, values):
    req = service_pb2.ModelInferRequest()
    req.model_name = model
    t = req.inputs.add()
    t.name = name
    t.datatype = datatype
    t.shape.extend(shape)
    getattr(t.contents, field).extend(values)
    return req


@pytest.mark.parametrize(
    "kind,field,values",
    [
        ("bool", "bool_contents", [True, False, True, True]),
        ("int8", "int_contents", [-128, 127, 0, -1]),
        ("int16", "int_contents", [-32768, 32767, 5, -5]),
        ("int32", "int_contents", [-(2**31), 2**31 - 1, 7, -7]),
        ("int64", "int64_contents", [-(2**63), 2**63 - 1, 2**53 + 1, -3]),
        ("uint8", "uint_contents", [0, 255, 1, 128]),
        ("uint16", "uint_contents", [0, 65535, 2, 3]),
        ("uint32", "uint_contents", [0, 2**32 - 1, 4, 5]),
        ("uint64", "uint64_contents", [0, 2**64 - 1, 2**53 + 1, 6]),
        ("fp32", "fp32_contents", [0.5, -1.25, 3.4e38, 1e-45]),
        ("fp64", "fp64_contents", [0.1, -2.5, 1.7976931348623157e308, 5e-324]),
        ("string", "bytes_contents", [b"a", b"\xff\x01", "ü".encode(), b""]),
    ],
)
def test_grpc_typed_contents(server, grpc_url, kind, field, values):
    """Triton accepts typed InferTensorContents as well as raw_input_contents
    and always answers with raw_output_contents."""
    dt, npt = IDENTITY_TYPES[kind]
    req = _typed_request(f"identity_{kind}", "INPUT0", dt, [1, len(values)], field, values)
    c = make_client("grpc", server)
    try:
        resp = c._client_stub.ModelInfer(req, timeout=30)
        assert len(resp.outputs) == 1 and resp.outputs[0].name == "OUTPUT0"
        assert list(resp.outputs[0].shape) == [1, len(values)]
        assert len(resp.raw_output_contents) == 1
        res = grpcclient.InferResult(resp)
        out = res.as_numpy("OUTPUT0")
        if kind == "string":
            assert list(out.flatten()) == values
        else:
            np.testing.assert_array_equal(out.flatten(), np.array(values, dtype=npt))
    finally:
        c.close()


def test_grpc_typed_contents_simple(server, grpc_url):
    a = list(range(16))
    b = [3] * 16
    req = _typed_request("simple", "INPUT0", "INT32", [1, 16], "int_contents", a)
    t = req.inputs.add()
    t.name, t.datatype = "INPUT1", "INT32"
    t.shape.extend([1, 16])
    t.contents.int_contents.extend(b)
    c = make_client("grpc", server)
    try:
        res = grpcclient.InferResult(c._client_stub.ModelInfer(req, timeout=30))
        np.testing.assert_array_equal(res.as_numpy("OUTPUT0").flatten(), np.array(a) + 3)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT1").flatten(), np.array(a) - 3)
    finally:
        c.close()
