"""Python-backend models through the official clients.

* food_classifier (bundled): the Triton tutorial's client code, unchanged, over HTTP and gRPC
  (docs/examples/food_classifier_client.py, and the same calls inline); its answer checked
  against image_classifier run on the tutorial's preprocessing done here; dynamic batching
  forms batches of its requests (batch_stats).
* test/python_models in a server of their own: errors raised in execute, per-request error
  responses, BLS errors, a stub that dies, non-UTF-8 BYTES byte for byte, request ids and
  parameters, as tritonclient users see them.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image
from serval_helpers import REPO_ROOT, expect_triton_error, make_client, make_input, make_output, read_labels

from conftest import _ManagedServer

IMAGE_PATH = REPO_ROOT / "docs" / "examples" / "food.jpg"
CLIENT = REPO_ROOT / "docs" / "examples" / "food_classifier_client.py"
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def base64_image() -> str:
    return base64.b64encode(IMAGE_PATH.read_bytes()).decode("utf-8")


def tutorial_preprocess(data: bytes) -> np.ndarray:
    """The tutorial's preprocessing, done on the client side: 224x224 RGB, ImageNet-normalised, CHW."""
    with Image.open(io.BytesIO(data)) as image:
        pixels = np.asarray(image.convert("RGB").resize((224, 224), Image.BILINEAR), dtype=np.float32)
    return ((pixels / 255.0 - MEAN) / STD).transpose(2, 0, 1)


@pytest.fixture(scope="module")
def food_expected(server):
    """What food_classifier must answer for the test image: image_classifier's top class on it."""
    labels = read_labels("food_classifier")
    c = make_client("http", server)
    x = tutorial_preprocess(IMAGE_PATH.read_bytes())[None]
    scores = c.infer("image_classifier", [make_input("http", "INPUT", x)]).as_numpy("OUTPUT")[0]
    return labels[int(scores.argmax())], float(scores.max())


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_tutorial_client_script_runs_unchanged(server, transport, food_expected):
    url = server.http_url if transport == "http" else server.grpc_url
    args = [sys.executable, str(CLIENT), "--url", url] + (["--grpc"] if transport == "grpc" else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    label, prob = food_expected
    assert out.stdout.strip() == f"{label}: {prob:.4f}"


def test_tutorial_calls_http(server, food_expected):
    # The tutorial's client code, verbatim but for the URL.
    client = httpclient.InferenceServerClient(url=server.http_url)
    base64_str = base64_image()
    inputs = [httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")]
    inputs[0].set_data_from_numpy(np.array([[base64_str]], dtype=object))
    results = client.infer("food_classifier", inputs)
    label = results.as_numpy("FOOD_LABEL")[0, 0]
    prob = results.as_numpy("PROBABILITY")[0, 0]
    assert (label.decode("utf-8"), results.as_numpy("PROBABILITY").dtype) == (food_expected[0], np.float32)
    assert prob == pytest.approx(food_expected[1], abs=1e-5)


def test_tutorial_calls_grpc(server, food_expected):
    client = grpcclient.InferenceServerClient(url=server.grpc_url)
    inputs = [grpcclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")]
    inputs[0].set_data_from_numpy(np.array([[base64_image()]], dtype=object))
    results = client.infer("food_classifier", inputs)
    assert results.as_numpy("FOOD_LABEL")[0, 0].decode("utf-8") == food_expected[0]
    assert results.as_numpy("PROBABILITY")[0, 0] == pytest.approx(food_expected[1], abs=1e-5)
    assert results.as_numpy("FOOD_LABEL").shape == (1, 1)


def test_food_classifier_metadata_and_config(server):
    c = make_client("http", server)
    md = c.get_model_metadata("food_classifier")
    assert md["platform"] == "python"
    assert md["inputs"] == [{"name": "INPUT_IMAGE", "datatype": "BYTES", "shape": [-1, 1]}]
    assert [(o["name"], o["datatype"], o["shape"]) for o in md["outputs"]] == [
        ("FOOD_LABEL", "BYTES", [-1, 1]),
        ("PROBABILITY", "FP32", [-1, 1]),
    ]
    cfg = c.get_model_config("food_classifier")
    assert (cfg["backend"], cfg["max_batch_size"], cfg["instance_group"][0]["kind"]) == ("python", 16, "KIND_CPU")
    assert "dynamic_batching" in cfg


def test_food_classifier_batches_concurrent_requests(server, food_expected):
    """Requests sent at once are merged by the dynamic batcher: execute() gets several.

    gRPC async_infer puts every request on the wire before any answer comes back (the HTTP
    client's greenlets may not overlap on a loaded machine). Whether a burst overlaps an
    execution still depends on timing, so a burst is tried a few times; one batch larger than 1
    is what must happen.
    """
    import queue

    c = grpcclient.InferenceServerClient(server.grpc_url)
    data = np.array([[base64_image()]], dtype=object)
    try:
        for _ in range(5):
            done = queue.Queue()
            for _ in range(16):
                inp = grpcclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
                inp.set_data_from_numpy(data)
                c.async_infer("food_classifier", [inp], callback=lambda result, error: done.put((result, error)))
            results = [done.get(timeout=60) for _ in range(16)]
            assert [e for _, e in results] == [None] * 16
            assert [r.as_numpy("FOOD_LABEL")[0, 0].decode() for r, _ in results] == [food_expected[0]] * 16
            stats = c.get_inference_statistics("food_classifier", as_json=True)["model_stats"][0]
            if any(int(b["batch_size"]) > 1 for b in stats["batch_stats"]):
                break
    finally:
        c.close()
    assert any(int(b["batch_size"]) > 1 for b in stats["batch_stats"]), stats["batch_stats"]
    assert int(stats["execution_count"]) < int(stats["inference_count"])


# ---------------------------------------------------------------------------------------------
# The test models of test/python_models, in a server of their own (explicit mode: only they load,
# with the bundled `simple` their BLS calls).

PY_MODELS = ["py_identity", "py_errors", "py_bls", "py_bls_async"]


@pytest.fixture(scope="module")
def py_server():
    tmp = Path(tempfile.mkdtemp(prefix="serval-pymodels-"))
    for m in PY_MODELS:
        shutil.copytree(REPO_ROOT / "test" / "python_models" / m, tmp / m)
    args = ["--model-repository", str(tmp), "--model-control-mode", "explicit", "--load-model", "simple"]
    for m in PY_MODELS:
        args += ["--load-model", m]
    managed = _ManagedServer(tuple(args), log_name="serval-python.log")
    try:
        yield managed.start()
    finally:
        managed.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def mode_input(protocol: str, mode: str):
    return [make_input(protocol, "MODE", np.array([[mode.encode()]], dtype=np.object_), "BYTES")]


def test_exception_in_execute(py_server, protocol):
    c = make_client(protocol, py_server)
    with expect_triton_error(
        protocol,
        "INTERNAL",
        "Failed to process the request(s) for model 'py_errors_0_0', message: TritonModelException: the model raised on purpose",
        regex=r"\n\nAt:\n  .*py_errors/1/model\.py\(\d+\): execute\n$",
    ):
        c.infer("py_errors", mode_input(protocol, "raise"))


def test_error_response_keeps_code(py_server, protocol):
    c = make_client(protocol, py_server)
    with expect_triton_error(protocol, "INVALID_ARG", "this request is refused"):
        c.infer("py_errors", mode_input(protocol, "error"))


def test_bls_errors(py_server, protocol):
    c = make_client(protocol, py_server)
    with expect_triton_error(protocol, "NOT_FOUND", "Request for unknown model: 'no_such_model' is not found"):
        c.infer("py_errors", mode_input(protocol, "bls_unknown"))
    with expect_triton_error(protocol, "INVALID_ARG", "unexpected shape for input 'INPUT0' for model 'simple'"):
        c.infer("py_errors", mode_input(protocol, "bls_bad"))


def test_bls_sync_and_async(py_server, protocol):
    c = make_client(protocol, py_server)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    r = c.infer("py_bls", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", b)], request_id="q1")
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    r = c.infer("py_bls_async", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", b)])
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), 3 * a + b)


def test_stub_crash_is_survived(py_server, protocol):
    c = make_client(protocol, py_server)
    first = c.infer("py_errors", mode_input(protocol, "ok")).as_numpy("OUT")[0, 0]
    with expect_triton_error(
        protocol, "INTERNAL", "Stub process 'py_errors_0_0' is not healthy."
    ):
        c.infer("py_errors", mode_input(protocol, "crash"))
    second = c.infer("py_errors", mode_input(protocol, "ok")).as_numpy("OUT")[0, 0]
    assert second != first
    assert c.is_model_ready("py_errors")


def test_non_utf8_bytes_round_trip(py_server, protocol):
    """Any bytes, not only UTF-8: np.object_ arrays of bytes come back byte for byte (over HTTP in
    the binary tensor extension: JSON tensors carry text only)."""
    c = make_client(protocol, py_server)
    values = np.array([[b"\xff\xfe\x00\x80", b"", b"\xc3\x28", "é".encode("latin-1"), bytes(range(256))]], dtype=np.object_)
    r = c.infer(
        "py_identity",
        [make_input(protocol, "INPUT0", values, "BYTES")],
        outputs=[make_output(protocol, "OUTPUT0")],
    )
    out = r.as_numpy("OUTPUT0")
    assert out.shape == values.shape
    assert list(out.reshape(-1)) == list(values.reshape(-1))


def test_request_id_parameters_and_outputs_reach_the_model(py_server, protocol):
    c = make_client(protocol, py_server)
    values = np.array([[b"a", b"b"]], dtype=np.object_)
    r = c.infer(
        "py_identity",
        [make_input(protocol, "INPUT0", values, "BYTES")],
        request_id="my-id",
        parameters={"color": "red", "n": 7, "flag": True},
        outputs=[make_output(protocol, "INFO")],
    )
    info = json.loads(r.as_numpy("INFO")[0, 0])
    assert info["request_id"] == "my-id"
    assert info["parameters"] == {"color": "red", "n": 7, "flag": True}
    assert info["requested"] == ["INFO"]
    assert r.as_numpy("OUTPUT0") is None  # not requested, not returned
    assert json.loads(info["args"]["model_config"])["name"] == "py_identity"
    assert info["config_parameters"] == {"custom_key": {"string_value": "custom_value"}}


def test_concurrent_requests_batch_in_execute(py_server):
    c = make_client("grpc", py_server)

    def one(i):
        values = np.array([[f"v{i}".encode()]], dtype=np.object_)
        r = c.infer("py_identity", [make_input("grpc", "INPUT0", values, "BYTES")], request_id=f"r{i}")
        return json.loads(r.as_numpy("INFO")[0, 0]), r.as_numpy("OUTPUT0")[0, 0]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(6)))
    assert [out for _, out in results] == [f"v{i}".encode() for i in range(6)]
    assert [info["request_id"] for info, _ in results] == [f"r{i}" for i in range(6)]
    assert max(info["batch_requests"] for info, _ in results) > 1
