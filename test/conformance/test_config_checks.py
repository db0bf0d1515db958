"""Config checks and request-level errors with Triton's texts, through the official clients
(docs/config_checks.md): a config override that Triton refuses is refused with Triton's words
and leaves the serving version in place; an output requested twice is Triton's error."""
import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def _client(protocol, info):
    if protocol == "http":
        return httpclient.InferenceServerClient(info.http_url)
    return grpcclient.InferenceServerClient(info.grpc_url)


def _config(c, protocol):
    if protocol == "http":
        return c.get_model_config("simple")
    return c.get_model_config("simple", as_json=True)["config"]


def _simple_inputs(mod):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    ins = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(a)
    return ins, a


def _bad_sequence_control(cfg):
    # sequence_batching and dynamic_batching are one oneof: the override carries only the former.
    cfg.pop("dynamic_batching", None)
    cfg["sequence_batching"] = {
        "control_input": [{"name": "START", "control": [{"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0]}]}]
    }


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    "edit, text",
    [
        (lambda cfg: cfg.update(max_batch_size=-1), "'max_batch_size' must be non-negative value for simple"),
        (
            lambda cfg: cfg.update(dynamic_batching={"preferred_batch_size": [99]}),
            "dynamic batching preferred size must be <= max batch size for simple",
        ),
        (
            lambda cfg: cfg["input"][0].update(dims=[0]),
            "model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for simple",
        ),
        (
            _bad_sequence_control,
            "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for simple",
        ),
        (
            lambda cfg: cfg.update(
                batch_input=[
                    {"kind": "BATCH_ELEMENT_COUNT", "target_name": ["N"], "data_type": "TYPE_INT32", "source_input": ["NOPE"]}
                ]
            ),
            "unknown source input name 'NOPE' for simple",
        ),
        (
            lambda cfg: cfg.update(instance_group=[{"kind": "KIND_CPU", "gpus": [0]}]),
            "instance group simple_0 of model simple has kind KIND_CPU but specifies one or more GPUs",
        ),
    ],
)
def test_refused_config_override(explicit_server, protocol, edit, text):
    c = _client(protocol, explicit_server)
    cfg = _config(c, protocol)
    edit(cfg)
    with pytest.raises(InferenceServerException) as e:
        c.load_model("simple", config=json.dumps(cfg))
    assert text in str(e.value)
    # The version that served before keeps serving.
    assert c.is_model_ready("simple")
    mod = httpclient if protocol == "http" else grpcclient
    ins, a = _simple_inputs(mod)
    np.testing.assert_array_equal(c.infer("simple", ins).as_numpy("OUTPUT0"), a + a)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_output_requested_twice(server, protocol):
    c = _client(protocol, server)
    mod = httpclient if protocol == "http" else grpcclient
    ins, _ = _simple_inputs(mod)
    outs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT0")]
    with pytest.raises(InferenceServerException) as e:
        c.infer("simple", ins, outputs=outs)
    assert "output 'OUTPUT0' already exists in request" in str(e.value)
    if protocol == "http":
        assert e.value.status() == "400"
    else:
        assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
