"""Shared expectations and small helpers for the conformance tests.

Everything asserted about error responses here was taken from Triton's own
sources (triton-inference-server/core ``infer_request.cc``,
``model_lifecycle.cc``, ``model_repository_manager.cc``; server
``http_server.cc`` ``HttpCodeFromError`` and the gRPC status mapping), not
from Serval, so the suite measures Serval against Triton.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_REPOSITORY = REPO_ROOT / "model_repository"

# ---------------------------------------------------------------------------
# The example models (name -> inputs/outputs as (name, datatype, dims
# without the batch dimension), max_batch_size).
# ---------------------------------------------------------------------------
IDENTITY_TYPES = {
    "bool": ("BOOL", np.bool_),
    "uint8": ("UINT8", np.uint8),
    "uint16": ("UINT16", np.uint16),
    "uint32": ("UINT32", np.uint32),
    "uint64": ("UINT64", np.uint64),
    "int8": ("INT8", np.int8),
    "int16": ("INT16", np.int16),
    "int32": ("INT32", np.int32),
    "int64": ("INT64", np.int64),
    "fp16": ("FP16", np.float16),
    "fp32": ("FP32", np.float32),
    "fp64": ("FP64", np.float64),
    "string": ("BYTES", np.object_),
}

MODELS = {
    "simple": {
        "max_batch_size": 8,
        "inputs": [("INPUT0", "INT32", [16]), ("INPUT1", "INT32", [16])],
        "outputs": [("OUTPUT0", "INT32", [16]), ("OUTPUT1", "INT32", [16])],
    },
    "simple_string": {
        "max_batch_size": 8,
        "inputs": [("INPUT0", "BYTES", [16]), ("INPUT1", "BYTES", [16])],
        "outputs": [("OUTPUT0", "BYTES", [16]), ("OUTPUT1", "BYTES", [16])],
    },
    "image_classifier": {
        "max_batch_size": 16,
        "inputs": [("INPUT", "FP32", [3, 224, 224])],
        "outputs": [("OUTPUT", "FP32", [11])],
    },
    "ranker_mlp": {
        "max_batch_size": 64,
        "inputs": [("INPUT", "FP32", [512])],
        "outputs": [("OUTPUT", "FP32", [1])],
    },
}
# Sequence models: clients see INPUT/OUTPUT only (controls and state are the batcher's).
for _name in ("simple_sequence", "simple_dyna_sequence", "simple_string_dyna_sequence", "running_sum"):
    MODELS[_name] = {
        "max_batch_size": 8,
        "inputs": [("INPUT", "INT32", [1])],
        "outputs": [("OUTPUT", "INT32", [1])],
    }
for _suffix, (_dt, _np) in IDENTITY_TYPES.items():
    MODELS[f"identity_{_suffix}"] = {
        "max_batch_size": 8,
        "inputs": [("INPUT0", _dt, [-1])],
        "outputs": [("OUTPUT0", _dt, [-1])],
    }

ALL_MODELS = sorted(MODELS)
PROTOCOLS = ["http", "grpc"]

# Triton's HTTP status for each TRITONSERVER_Error code
# (server/src/http_server.cc HttpCodeFromError) and the gRPC status code
# (server/src/grpc: TRITONSERVER error code -> grpc::StatusCode).
HTTP_STATUS = {"NOT_FOUND": "404", "INVALID_ARG": "400", "UNAVAILABLE": "503",
               "UNSUPPORTED": "501", "INTERNAL": "500", "UNKNOWN": "400", "ALREADY_EXISTS": "400"}
GRPC_STATUS = {"NOT_FOUND": "StatusCode.NOT_FOUND", "INVALID_ARG": "StatusCode.INVALID_ARGUMENT",
               "UNAVAILABLE": "StatusCode.UNAVAILABLE", "UNSUPPORTED": "StatusCode.UNIMPLEMENTED",
               "INTERNAL": "StatusCode.INTERNAL", "UNKNOWN": "StatusCode.UNKNOWN",
               "ALREADY_EXISTS": "StatusCode.ALREADY_EXISTS"}


def module_for(protocol: str):
    return httpclient if protocol == "http" else grpcclient


def make_client(protocol: str, server, **kwargs):
    if protocol == "http":
        if not server.http_url:
            pytest.skip("no HTTP endpoint")
        return httpclient.InferenceServerClient(server.http_url, **kwargs)
    if not server.grpc_url:
        pytest.skip("no gRPC endpoint")
    return grpcclient.InferenceServerClient(server.grpc_url, **kwargs)


def make_input(protocol: str, name: str, array: np.ndarray, datatype: str | None = None,
               binary: bool = True):
    """InferInput for either protocol; ``binary`` only matters for HTTP."""
    from tritonclient.utils import np_to_triton_dtype

    mod = module_for(protocol)
    dt = datatype or np_to_triton_dtype(array.dtype)
    inp = mod.InferInput(name, list(array.shape), dt)
    if protocol == "http":
        inp.set_data_from_numpy(array, binary_data=binary)
    else:
        inp.set_data_from_numpy(array)
    return inp


def make_output(protocol: str, name: str, binary: bool = True, class_count: int = 0):
    mod = module_for(protocol)
    if protocol == "http":
        return mod.InferRequestedOutput(name, binary_data=binary, class_count=class_count)
    return mod.InferRequestedOutput(name, class_count=class_count)


@contextmanager
def expect_triton_error(protocol: str, code: str, *fragments: str, regex: str | None = None):
    """Assert the wrapped call raises InferenceServerException with the
    status Triton gives for ``code`` (a TRITONSERVER_Error code name) and a
    message containing every fragment (and matching ``regex``)."""
    with pytest.raises(InferenceServerException) as excinfo:
        yield excinfo
    exc = excinfo.value
    want = HTTP_STATUS[code] if protocol == "http" else GRPC_STATUS[code]
    msg = exc.message() or ""
    assert exc.status() == want, (
        f"{protocol}: expected status {want} (Triton's {code}), got {exc.status()!r}: {msg!r}"
    )
    for frag in fragments:
        assert frag in msg, f"{protocol}: message {msg!r} lacks Triton's text {frag!r}"
    if regex is not None:
        assert re.search(regex, msg), f"{protocol}: message {msg!r} does not match {regex!r}"


def response_id(protocol: str, result) -> str:
    resp = result.get_response()
    if protocol == "http":
        return resp.get("id", "")
    return resp.id


def response_outputs(protocol: str, result) -> list:
    resp = result.get_response()
    if protocol == "http":
        return [o["name"] for o in resp.get("outputs", [])]
    return [o.name for o in resp.outputs]


def response_model(protocol: str, result) -> tuple:
    resp = result.get_response()
    if protocol == "http":
        return resp.get("model_name"), resp.get("model_version")
    return resp.model_name, resp.model_version


def as_str_list(arr) -> list:
    """BYTES output as Python strings (binary outputs come back as bytes,
    JSON outputs as str)."""
    out = []
    for x in np.asarray(arr).flatten():
        out.append(x.decode("utf-8") if isinstance(x, (bytes, np.bytes_)) else str(x))
    return out


def simple_inputs(batch: int, rng: np.random.Generator):
    a = rng.integers(-1000, 1000, size=(batch, 16), dtype=np.int32)
    b = rng.integers(-1000, 1000, size=(batch, 16), dtype=np.int32)
    return a, b


def read_labels(model: str) -> list[str] | None:
    p = MODEL_REPOSITORY / model / "labels.txt"
    if not p.exists():
        return None
    return [line.strip() for line in p.read_text().splitlines() if line.strip()]


def find_onnx(model: str) -> Path | None:
    d = MODEL_REPOSITORY / model
    if not d.is_dir():
        return None
    versions = sorted((p for p in d.iterdir() if p.is_dir() and p.name.isdigit()),
                      key=lambda p: int(p.name))
    for v in reversed(versions):
        f = v / "model.onnx"
        if f.exists():
            return f
    return None
