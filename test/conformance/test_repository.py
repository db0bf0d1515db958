"""Model repository extension through the official clients, against a server in explicit
model-control mode: index, load, load with a config override, unload, and the errors
(tritonclient's load_model / unload_model / get_model_repository_index, HTTP and gRPC)."""
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


def _index(c, protocol):
    if protocol == "http":
        return {m["name"]: m for m in c.get_model_repository_index()}
    return {m["name"]: m for m in c.get_model_repository_index(as_json=True).get("models", [])}


def _simple_sum(c, protocol):
    mod = httpclient if protocol == "http" else grpcclient
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    ins = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    out = c.infer("simple", ins).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_unload_cycle(explicit_server, protocol):
    c = _client(protocol, explicit_server)
    idx = _index(c, protocol)
    assert idx["simple"]["state"] == "READY"
    assert "state" not in idx["identity_fp32"] or idx["identity_fp32"]["state"] != "READY"
    assert not c.is_model_ready("identity_fp32")

    c.load_model("identity_fp32")
    assert c.is_model_ready("identity_fp32")
    assert _index(c, protocol)["identity_fp32"]["state"] == "READY"

    c.unload_model("identity_fp32")
    assert not c.is_model_ready("identity_fp32")
    assert _index(c, protocol)["identity_fp32"]["state"] == "UNAVAILABLE"
    _simple_sum(c, protocol)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_with_config_override(explicit_server, protocol):
    c = _client(protocol, explicit_server)
    cfg = c.get_model_config("simple")
    if protocol == "grpc":
        cfg = c.get_model_config("simple", as_json=True)["config"]
    cfg["max_batch_size"] = 2 if protocol == "http" else 3
    c.load_model("simple", config=json.dumps(cfg))
    got = c.get_model_config("simple")
    mbs = got["max_batch_size"] if protocol == "http" else got.config.max_batch_size
    assert mbs == cfg["max_batch_size"]
    _simple_sum(c, protocol)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_errors(explicit_server, protocol):
    c = _client(protocol, explicit_server)
    with pytest.raises(InferenceServerException, match="no_such_model"):
        c.load_model("no_such_model")
    with pytest.raises(InferenceServerException, match="failed to load '..', failed to poll from model repository"):
        c.load_model("..")
    with pytest.raises(InferenceServerException, match="invalid 'config' parameter"):
        c.load_model("simple", config='{"max_batch_size": "many"}')
    _simple_sum(c, protocol)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_none_mode_refuses_load(server, protocol):
    c = _client(protocol, server)
    with pytest.raises(InferenceServerException, match="explicit model load / unload is not allowed"):
        c.unload_model("simple")
