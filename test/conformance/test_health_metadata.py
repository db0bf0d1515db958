"""Health, server metadata, model metadata, model config and model
readiness through the official clients (sync and aio, HTTP and gRPC)."""

from __future__ import annotations

import asyncio

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http.aio as httpaio

from serval_helpers import (
    ALL_MODELS,
    MODELS,
    PROTOCOLS,
    expect_triton_error,
    make_client,
    read_labels,
)

# Model config data_type for a protocol datatype (model_config.proto).
CONFIG_TYPE = {
    "BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8", "UINT16": "TYPE_UINT16",
    "UINT32": "TYPE_UINT32", "UINT64": "TYPE_UINT64", "INT8": "TYPE_INT8",
    "INT16": "TYPE_INT16", "INT32": "TYPE_INT32", "INT64": "TYPE_INT64",
    "FP16": "TYPE_FP16", "FP32": "TYPE_FP32", "FP64": "TYPE_FP64",
    "BYTES": "TYPE_STRING",
}


def test_server_live_and_ready(client):
    assert client.is_server_live() is True
    assert client.is_server_ready() is True


def test_server_metadata(protocol, client, server):
    md = client.get_server_metadata() if protocol == "http" else client.get_server_metadata(as_json=True)
    assert isinstance(md.get("name"), str) and md["name"], md
    assert isinstance(md.get("version"), str) and md["version"], md
    exts = md.get("extensions", [])
    assert isinstance(exts, list) and all(isinstance(e, str) and e for e in exts), md
    # Both protocols report the same server.
    assert md["name"] == server.metadata.get("name")
    assert sorted(exts) == sorted(server.metadata.get("extensions", []))


def test_server_metadata_grpc_message(server):
    c = make_client("grpc", server)
    try:
        md = c.get_server_metadata()  # protobuf ServerMetadataResponse
        assert md.name and md.version
        assert list(md.extensions) == list(server.metadata.get("extensions", []))
    finally:
        c.close()


@pytest.mark.parametrize("model", ALL_MODELS)
def test_model_ready(client, model):
    assert client.is_model_ready(model) is True


@pytest.mark.parametrize("model", ["simple", "identity_fp32"])
def test_model_ready_explicit_version(client, model):
    md = _metadata(client, model)
    for v in md["versions"]:
        assert client.is_model_ready(model, v) is True


def test_model_not_ready_unknown(client):
    # Triton answers "not ready" (HTTP 400 with no body / ready=false), the
    # clients turn both into False rather than raising.
    assert client.is_model_ready("no_such_model") is False
    assert client.is_model_ready("simple", "999") is False


def _metadata(client, model, version=""):
    if isinstance(client, grpcclient.InferenceServerClient):
        md = client.get_model_metadata(model, version, as_json=True)
    else:
        md = client.get_model_metadata(model, version)
    return md


def _norm_tensors(tensors):
    return {t["name"]: (t["datatype"], [int(d) for d in t["shape"]]) for t in tensors}


@pytest.mark.parametrize("model", ALL_MODELS)
def test_model_metadata(protocol, client, model):
    spec = MODELS[model]
    md = _metadata(client, model)
    assert md["name"] == model
    versions = md.get("versions", [])
    assert versions and all(isinstance(v, str) and v.isdigit() for v in versions), md
    # All bundled models are ONNX models (platform "onnxruntime_onnx" or
    # backend "onnxruntime" in config.pbtxt): Triton reports the platform.
    assert md.get("platform") == "onnxruntime_onnx", md
    batch = [-1] if spec["max_batch_size"] > 0 else []
    want_in = {n: (dt, batch + dims) for n, dt, dims in spec["inputs"]}
    want_out = {n: (dt, batch + dims) for n, dt, dims in spec["outputs"]}
    assert _norm_tensors(md["inputs"]) == want_in
    assert _norm_tensors(md["outputs"]) == want_out
    if protocol == "http":
        # Triton's JSON uses numbers for shapes.
        for t in md["inputs"] + md["outputs"]:
            assert all(isinstance(d, int) for d in t["shape"]), t
    # The same metadata is served for an explicit version.
    md_v = _metadata(client, model, version=versions[-1])
    assert _norm_tensors(md_v["inputs"]) == want_in


@pytest.mark.parametrize("model", ALL_MODELS)
def test_model_config(protocol, client, model):
    spec = MODELS[model]
    if protocol == "http":
        cfg = client.get_model_config(model)
    else:
        # as_json=True returns MessageToJson(ModelConfigResponse): {"config": {...}}
        cfg = client.get_model_config(model, as_json=True)
        assert set(cfg) == {"config"}, cfg.keys()
        cfg = cfg["config"]
    assert cfg["name"] == model
    assert int(cfg.get("max_batch_size", 0)) == spec["max_batch_size"]
    got_in = {t["name"]: (t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["input"]}
    got_out = {t["name"]: (t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["output"]}
    assert got_in == {n: (CONFIG_TYPE[dt], dims) for n, dt, dims in spec["inputs"]}
    assert got_out == {n: (CONFIG_TYPE[dt], dims) for n, dt, dims in spec["outputs"]}
    if protocol == "http":
        # Triton's HTTP model config JSON prints int64 dims as numbers (the
        # gRPC as_json form has them as strings, per protobuf's JSON mapping).
        for t in cfg["input"] + cfg["output"]:
            assert all(isinstance(d, int) for d in t["dims"]), t
    if model in ("image_classifier", "ranker_mlp"):
        assert "dynamic_batching" in cfg, "model is configured with dynamic batching"
    if model == "image_classifier" and read_labels(model):
        assert cfg["output"][0].get("label_filename") == "labels.txt"
    # Fields Triton's config normalisation / ORT auto-complete fill in, which
    # tools such as perf_analyzer and model-analyzer read back.
    assert cfg.get("platform") == "onnxruntime_onnx"
    assert cfg.get("backend") == "onnxruntime"
    assert cfg.get("default_model_filename") == "model.onnx"
    vp = cfg.get("version_policy", {})
    assert "latest" in vp and int(vp["latest"].get("num_versions", 0)) == 1, vp
    groups = cfg.get("instance_group", [])
    assert groups and groups[0].get("name") == f"{model}_0", groups
    assert groups[0].get("kind") == "KIND_CPU" and int(groups[0].get("count", 0)) >= 1, groups
    # NormalizeModelConfig's pinned-memory defaults, which Triton prints for every model but an
    # ensemble (gRPC's as_json leaves out the fields at their zero value).
    opt = cfg.get("optimization", {})
    assert opt.get("input_pinned_memory") == {"enable": True} and opt.get("output_pinned_memory") == {"enable": True}, opt
    if protocol == "http":
        assert opt == {
            "priority": "PRIORITY_DEFAULT",
            "input_pinned_memory": {"enable": True},
            "output_pinned_memory": {"enable": True},
            "gather_kernel_buffer_threshold": 0,
            "eager_batching": False,
        }, opt


def test_model_config_grpc_message(server):
    c = make_client("grpc", server)
    try:
        resp = c.get_model_config("simple")  # ModelConfigResponse protobuf
        assert resp.config.name == "simple"
        assert resp.config.max_batch_size == 8
        assert [i.name for i in resp.config.input] == ["INPUT0", "INPUT1"]
        assert list(resp.config.input[0].dims) == [16]
    finally:
        c.close()


def test_metadata_unknown_model(protocol, client):
    # core ModelRepositoryManager::GetModel: NOT_FOUND,
    # "Request for unknown model: 'no_such_model' is not found"
    with expect_triton_error(protocol, "NOT_FOUND",
                             "Request for unknown model: 'no_such_model' is not found"):
        _metadata(client, "no_such_model")
    with expect_triton_error(protocol, "NOT_FOUND",
                             "Request for unknown model: 'no_such_model' is not found"):
        if protocol == "http":
            client.get_model_config("no_such_model")
        else:
            client.get_model_config("no_such_model", as_json=True)


def test_metadata_unknown_version(protocol, client):
    with expect_triton_error(protocol, "NOT_FOUND",
                             "Request for unknown model: 'simple' version 999 is not found"):
        _metadata(client, "simple", version="999")


# --------------------------------------------------------------------- aio


def test_aio_http_health_and_metadata(http_url):
    async def main():
        c = httpaio.InferenceServerClient(http_url)
        try:
            assert await c.is_server_live()
            assert await c.is_server_ready()
            md = await c.get_server_metadata()
            assert md["name"]
            for m in ALL_MODELS:
                assert await c.is_model_ready(m), m
            mm = await c.get_model_metadata("simple")
            assert [i["name"] for i in mm["inputs"]] == ["INPUT0", "INPUT1"]
            cfg = await c.get_model_config("simple")
            assert cfg["max_batch_size"] == 8
        finally:
            await c.close()

    asyncio.run(main())


def test_aio_grpc_health_and_metadata(grpc_url):
    async def main():
        c = grpcaio.InferenceServerClient(grpc_url)
        try:
            assert await c.is_server_live()
            assert await c.is_server_ready()
            md = await c.get_server_metadata(as_json=True)
            assert md["name"]
            for m in ALL_MODELS:
                assert await c.is_model_ready(m), m
            mm = await c.get_model_metadata("simple", as_json=True)
            assert [i["name"] for i in mm["inputs"]] == ["INPUT0", "INPUT1"]
            cfg = await c.get_model_config("simple", as_json=True)
            assert cfg["config"]["max_batch_size"] == 8
        finally:
            await c.close()

    asyncio.run(main())
