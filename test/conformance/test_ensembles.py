"""Ensembles (platform "ensemble") through the official clients: inference, metadata, config,
statistics, a step's error, and explicit-mode load / unload with unload_dependents, HTTP and
gRPC. A server of our own serves the example repository plus a temporary one holding only
ensembles over the example models; it starts in explicit mode with one ensemble loaded."""
import base64
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conftest import _ManagedServer
from serval_helpers import expect_triton_error, make_client, make_input

STEP = """    {{
      model_name: "{model}"
      model_version: -1
      input_map {{ key: "INPUT0" value: "{a}" }}
      input_map {{ key: "INPUT1" value: "{b}" }}
      output_map {{ key: "OUTPUT0" value: "{c}" }}
      output_map {{ key: "OUTPUT1" value: "{d}" }}
    }}"""


def double_simple(name: str, dims: str = "16") -> str:
    """simple twice: OUT0 = 2·IN0, OUT1 = 2·IN1."""
    io = lambda n: f'{{ name: "{n}" data_type: TYPE_INT32 dims: [ {dims} ] }}'  # noqa: E731
    steps = ",\n".join(
        [STEP.format(model="simple", a="IN0", b="IN1", c="sum", d="diff"),
         STEP.format(model="simple", a="sum", b="diff", c="OUT0", d="OUT1")]
    )
    return f"""name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [ {io("IN0")}, {io("IN1")} ]
output [ {io("OUT0")}, {io("OUT1")} ]
ensemble_scheduling {{
  step [
{steps}
  ]
}}
"""


@pytest.fixture(scope="module")
def ensemble_server():
    tmp = Path(tempfile.mkdtemp(prefix="serval-ensembles-"))
    # reshaped: its own output reshape ([16] from the steps, [4, 4] to clients).
    reshaped = double_simple("reshaped").replace(
        'output [ { name: "OUT0" data_type: TYPE_INT32 dims: [ 16 ] }',
        'output [ { name: "OUT0" data_type: TYPE_INT32 dims: [ 4, 4 ] reshape { shape: [ 16 ] } }')
    for name, text in (("double_simple", double_simple("double_simple")),
                       ("loose", double_simple("loose", "-1")), ("reshaped", reshaped)):
        (tmp / name / "1").mkdir(parents=True)
        (tmp / name / "config.pbtxt").write_text(text)
    managed = _ManagedServer(
        ("--model-repository", str(tmp), "--model-control-mode", "explicit",
         "--load-model", "double_simple"),
        log_name="serval-ensembles.log",
    )
    try:
        yield managed.start()
    finally:
        managed.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _ready(c, protocol) -> dict:
    if protocol == "http":
        rows = c.get_model_repository_index()
    else:
        rows = c.get_model_repository_index(as_json=True).get("models", [])
    return {r["name"]: r.get("state", "") for r in rows}


def _double(c, protocol, model="double_simple", rows=2):
    a = np.arange(16 * rows, dtype=np.int32).reshape(rows, 16) - 9
    b = np.full((rows, 16), 21, dtype=np.int32)
    result = c.infer(model, [make_input(protocol, "IN0", a), make_input(protocol, "IN1", b)], request_id="ens-1")
    np.testing.assert_array_equal(result.as_numpy("OUT0"), 2 * a)
    np.testing.assert_array_equal(result.as_numpy("OUT1"), 2 * b)
    return result


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer_metadata_config_and_statistics(ensemble_server, protocol):
    c = make_client(protocol, ensemble_server)
    try:
        result = _double(c, protocol)
        resp = result.get_response()
        if protocol == "http":
            assert (resp["model_name"], resp["model_version"], resp["id"]) == ("double_simple", "1", "ens-1")
            meta = c.get_model_metadata("double_simple")
            config = c.get_model_config("double_simple")
            stats = c.get_inference_statistics("double_simple")["model_stats"][0]
        else:
            assert (resp.model_name, resp.model_version, resp.id) == ("double_simple", "1", "ens-1")
            meta = c.get_model_metadata("double_simple", as_json=True)
            config = c.get_model_config("double_simple", as_json=True)["config"]
            stats = c.get_inference_statistics("double_simple", as_json=True)["model_stats"][0]
        assert meta["platform"] == "ensemble"
        assert [i["name"] for i in meta["inputs"]] == ["IN0", "IN1"]
        assert config["platform"] == "ensemble"
        steps = config["ensemble_scheduling"]["step"]
        assert [s["model_name"] for s in steps] == ["simple", "simple"]
        assert steps[1]["output_map"] == {"OUTPUT0": "OUT0", "OUTPUT1": "OUT1"}
        assert int(stats["inference_count"]) >= 2
        assert int(stats["execution_count"]) >= 1
        assert int(stats["inference_stats"]["success"]["count"]) >= 1
    finally:
        c.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_output_reshape_and_sequence_fields(ensemble_server, protocol):
    """The ensemble's own output reshape applies, and its response carries the request's
    sequence fields as parameters (tritonserver 2.51 side by side: docs/ensembles.md)."""
    c = make_client(protocol, ensemble_server)
    try:
        c.load_model("reshaped")
        a = np.arange(32, dtype=np.int32).reshape(2, 16)
        result = c.infer("reshaped", [make_input(protocol, "IN0", a), make_input(protocol, "IN1", a)],
                         sequence_id=9, sequence_start=True)
        out = result.as_numpy("OUT0")
        assert out.shape == (2, 4, 4)
        np.testing.assert_array_equal(out.reshape(2, 16), 2 * a)
        assert result.as_numpy("OUT1").shape == (2, 16)
        resp = result.get_response()
        if protocol == "http":
            assert resp["parameters"] == {"sequence_id": 9, "sequence_start": True, "sequence_end": False}
        else:
            p = resp.parameters
            assert (p["sequence_id"].int64_param, p["sequence_start"].bool_param, p["sequence_end"].bool_param) == (9, True, False)
        plain = _double(c, protocol).get_response()
        if protocol == "http":
            assert plain["parameters"] == {"sequence_id": 0, "sequence_start": False, "sequence_end": False}
        else:
            assert plain.parameters["sequence_id"].int64_param == 0
    finally:
        c.unload_model("reshaped")
        c.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_step_error_reaches_the_client(ensemble_server, protocol):
    c = make_client(protocol, ensemble_server)
    try:
        c.load_model("loose")
        x = np.arange(4, dtype=np.int32).reshape(1, 4)
        with expect_triton_error(protocol, "INVALID_ARG", "in ensemble 'loose', ",
                                 "unexpected shape for input 'INPUT0' for model 'simple'"):
            c.infer("loose", [make_input(protocol, "IN0", x), make_input(protocol, "IN1", x)])
        _double(c, protocol, model="loose", rows=1)
    finally:
        c.unload_model("loose")
        c.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unload_dependents(ensemble_server, protocol):
    c = make_client(protocol, ensemble_server)
    try:
        c.load_model("double_simple")
        assert c.is_model_ready("double_simple") and c.is_model_ready("simple")
        # A plain unload keeps the composing model.
        c.unload_model("double_simple")
        assert not c.is_model_ready("double_simple")
        assert c.is_model_ready("simple")
        # unload_dependents takes the model loaded only for the ensemble along.
        c.load_model("double_simple")
        c.unload_model("double_simple", unload_dependents=True)
        states = _ready(c, protocol)
        assert states["double_simple"] == "UNAVAILABLE"
        assert states["simple"] == "UNAVAILABLE"
        c.load_model("double_simple")
        _double(c, protocol)
    finally:
        c.close()


def test_server_lists_unload_dependents(ensemble_server):
    with httpclient.InferenceServerClient(ensemble_server.http_url) as c:
        assert "model_repository(unload_dependents)" in c.get_server_metadata()["extensions"]
    with grpcclient.InferenceServerClient(ensemble_server.grpc_url) as c:
        assert "model_repository(unload_dependents)" in c.get_server_metadata(as_json=True)["extensions"]


# --- food_pipeline: the example repository's ensemble (preprocess -> image_classifier -> postprocess)

FOOD_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "food.jpg"
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def _tutorial_client(protocol, server, model, element):
    """The Triton tutorial's client code, as it is: one image in a BYTES tensor of shape [1, 1]."""
    client_module = httpclient if protocol == "http" else grpcclient
    client = client_module.InferenceServerClient(url=server.http_url if protocol == "http" else server.grpc_url)
    try:
        inputs = [client_module.InferInput("INPUT_IMAGE", [1, 1], "BYTES")]
        inputs[0].set_data_from_numpy(np.array([[element]], dtype=object))
        outputs = [client_module.InferRequestedOutput("FOOD_LABEL"), client_module.InferRequestedOutput("PROBABILITY")]
        result = client.infer(model, inputs, outputs=outputs)
        return result.as_numpy("FOOD_LABEL")[0, 0], result.as_numpy("PROBABILITY")[0, 0]
    finally:
        client.close()


def _expected(protocol, server):
    """image_classifier's top class for the test image, preprocessed here as the tutorial does."""
    from PIL import Image

    with Image.open(FOOD_IMAGE) as image:
        pixels = np.asarray(image.convert("RGB").resize((224, 224), Image.BILINEAR), dtype=np.float32)
    x = ((pixels / 255.0 - MEAN) / STD).transpose(2, 0, 1)[np.newaxis].astype(np.float32)
    c = make_client(protocol, server)
    try:
        scores = c.infer("image_classifier", [make_input(protocol, "INPUT", x)]).as_numpy("OUTPUT")[0]
    finally:
        c.close()
    labels = (Path(__file__).resolve().parents[2] / "model_repository" / "postprocess" / "labels.txt").read_text().split("\n")
    return labels[int(scores.argmax())], float(scores.max())


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_food_pipeline_with_the_tutorial_client(server, protocol):
    base64_str = base64.b64encode(FOOD_IMAGE.read_bytes()).decode("utf-8")
    label, probability = _tutorial_client(protocol, server, "food_pipeline", base64_str)
    want_label, want_probability = _expected(protocol, server)
    assert label.decode("utf-8") == want_label
    assert probability == pytest.approx(want_probability, rel=1e-4)
    # The tutorial's own model gives the same answer.
    assert _tutorial_client(protocol, server, "food_classifier", base64_str) == (label, pytest.approx(probability, rel=1e-5))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_food_pipeline_takes_the_raw_image_bytes(server, protocol):
    """The image file's bytes (not UTF-8) pass through the ensemble to the Python step unchanged."""
    label, probability = _tutorial_client(protocol, server, "food_pipeline", FOOD_IMAGE.read_bytes())
    want_label, want_probability = _expected(protocol, server)
    assert (label.decode("utf-8"), float(probability)) == (want_label, pytest.approx(want_probability, rel=1e-4))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_food_pipeline_batch_errors_and_statistics(server, protocol):
    c = make_client(protocol, server)
    try:
        def stats(model):
            if protocol == "http":
                s = c.get_inference_statistics(model)["model_stats"][0]
            else:
                s = c.get_inference_statistics(model, as_json=True)["model_stats"][0]
            return int(s.get("inference_count", 0)), int(s["inference_stats"]["success"].get("count", 0))

        models = ["food_pipeline", "preprocess", "image_classifier", "postprocess"]
        before = {m: stats(m) for m in models}
        encoded = base64.b64encode(FOOD_IMAGE.read_bytes())
        images = np.array([[encoded], [FOOD_IMAGE.read_bytes()]], dtype=object)
        result = c.infer("food_pipeline", [make_input(protocol, "INPUT_IMAGE", images, "BYTES")])
        labels = result.as_numpy("FOOD_LABEL")
        assert labels.shape == (2, 1) and labels[0, 0] == labels[1, 0]
        assert result.as_numpy("PROBABILITY").shape == (2, 1)
        after = {m: stats(m) for m in models}
        for m in models:  # one request of two images through every step
            assert after[m][0] - before[m][0] == 2, m
            assert after[m][1] - before[m][1] == 1, m

        garbage = np.array([[base64.b64encode(b"not an image at all")]], dtype=object)
        with expect_triton_error(protocol, "INVALID_ARG", "in ensemble 'food_pipeline', ", "INPUT_IMAGE is not an image"):
            c.infer("food_pipeline", [make_input(protocol, "INPUT_IMAGE", garbage, "BYTES")])
    finally:
        c.close()
