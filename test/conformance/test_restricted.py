"""Restricted APIs through the official clients, as Triton's L0_http / L0_grpc restricted tests
drive them: a server started with --http-restricted-api / --grpc-restricted-protocol
(conftest.RESTRICTED_ARGS: model-repository behind admin-key, inference and metadata behind
infer-key). tritonclient passes ``headers=`` as HTTP headers and as gRPC metadata; gRPC keys carry
Triton's ``triton-grpc-protocol-`` prefix. With the header the calls work; without it they fail
with Triton's status and text (HTTP 403, gRPC UNAVAILABLE)."""
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

GRPC_PREFIX = "triton-grpc-protocol-"


def _client(protocol, info):
    if protocol == "http":
        return httpclient.InferenceServerClient(info.http_url)
    return grpcclient.InferenceServerClient(info.grpc_url)


def _headers(protocol, key, value):
    return {(GRPC_PREFIX if protocol == "grpc" else "") + key: value}


def _refused(protocol, key):
    """The status and text Triton answers a restricted call without its header with."""
    if protocol == "http":
        return "403", f"This API is restricted, expecting header '{key}'"
    return ("StatusCode.UNAVAILABLE",
            f"This protocol is restricted, expecting header '{GRPC_PREFIX}{key}'")


def _expect_refused(protocol, key, call):
    status, text = _refused(protocol, key)
    with pytest.raises(InferenceServerException) as e:
        call()
    assert e.value.status() == status, e.value
    assert text in (e.value.message() or ""), e.value


def _simple_infer(c, protocol, headers=None):
    mod = httpclient if protocol == "http" else grpcclient
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.int32)
    ins = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    out = c.infer("simple", ins, headers=headers).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unrestricted_groups_need_no_header(restricted_server, protocol):
    c = _client(protocol, restricted_server)
    assert c.is_server_live()
    assert c.is_server_ready()
    c.get_inference_statistics("simple")
    c.get_inference_statistics("simple", headers=_headers(protocol, "infer-key", "infer-value"))
    c.get_model_config("simple")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_metadata(restricted_server, protocol):
    c = _client(protocol, restricted_server)
    _expect_refused(protocol, "infer-key", lambda: c.get_server_metadata())
    for wrong in (_headers(protocol, "admin-key", "admin-value"), _headers(protocol, "infer-key", "wrong")):
        _expect_refused(protocol, "infer-key", lambda: c.get_model_metadata("simple", headers=wrong))
    meta = c.get_model_metadata("simple", headers=_headers(protocol, "infer-key", "infer-value"))
    name = meta["name"] if protocol == "http" else meta.name
    assert name == "simple"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer(restricted_server, protocol):
    c = _client(protocol, restricted_server)
    _expect_refused(protocol, "infer-key", lambda: _simple_infer(c, protocol))
    _simple_infer(c, protocol, headers=_headers(protocol, "infer-key", "infer-value"))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_model_repository(restricted_server, protocol):
    c = _client(protocol, restricted_server)
    infer_key = _headers(protocol, "infer-key", "infer-value")
    _expect_refused(protocol, "admin-key", lambda: c.unload_model("simple", headers=infer_key))
    # With the key the call goes through and meets the real answer: this server polls nothing and
    # was not started in explicit mode, so unloading is refused by the repository itself.
    with pytest.raises(InferenceServerException) as e:
        c.unload_model("simple", headers=_headers(protocol, "admin-key", "admin-value"))
    assert "explicit model load / unload is not allowed" in (e.value.message() or "")
    index = c.get_model_repository_index(headers=_headers(protocol, "admin-key", "admin-value"))
    names = [m["name"] for m in index] if protocol == "http" else [m.name for m in index.models]
    assert "simple" in names


def test_grpc_stream(restricted_server):
    """ModelStreamInfer is in the inference group: start_stream(headers=...) carries the metadata."""
    import queue

    def run(headers):
        c = grpcclient.InferenceServerClient(restricted_server.grpc_url)
        results = queue.Queue()
        c.start_stream(callback=lambda result, error: results.put((result, error)), headers=headers)
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        ins = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(a)
        try:
            c.async_stream_infer("simple", ins)
        except InferenceServerException:
            pass  # a refused stream may end before the request is queued; the callback has its status
        got = results.get(timeout=30)
        c.stop_stream()
        c.close()
        return got

    result, error = run(_headers("grpc", "infer-key", "infer-value"))
    assert error is None, error
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.arange(16, dtype=np.int32).reshape(1, 16) * 2)
    result, error = run(None)
    assert result is None
    status, text = _refused("grpc", "infer-key")
    assert error.status() == status, error
    assert text in (error.message() or ""), error
