"""Optional Triton extensions. Each test is skipped unless the server lists
the extension in its metadata, so the suite grows as Serval does:
statistics, model_repository, system_shared_memory; plus the Prometheus
metrics endpoint (not an extension; skipped without a metrics port)."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid

import numpy as np
import pytest

from serval_helpers import ALL_MODELS, PROTOCOLS, expect_triton_error, make_client, make_input


def _stats(client, protocol, model=""):
    if protocol == "http":
        return client.get_inference_statistics(model_name=model)
    return client.get_inference_statistics(model_name=model, as_json=True)


def _simple_stats(client, protocol):
    st = _stats(client, protocol, "simple")["model_stats"]
    assert len(st) == 1 and st[0]["name"] == "simple"
    return st[0]


def _n(d, *path):
    for p in path:
        d = d.get(p, {}) if isinstance(d, dict) else {}
    # gRPC as_json renders uint64 as strings (and omits zero fields).
    return int(d) if not isinstance(d, dict) else 0


@pytest.mark.extension("statistics")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_inference_statistics_count_requests(server, protocol):
    c = make_client(protocol, server)
    try:
        before = _simple_stats(c, protocol)
        a = np.arange(32, dtype=np.int32).reshape(2, 16)
        for _ in range(5):
            c.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", a)])
        after = _simple_stats(c, protocol)
    finally:
        c.close()
    assert after["version"] == before["version"] and after["version"].isdigit()
    assert _n(after, "inference_stats", "success", "count") - _n(before, "inference_stats", "success", "count") == 5
    # inference_count counts batch items (5 requests x batch 2).
    assert _n(after, "inference_count") - _n(before, "inference_count") == 10
    execs = _n(after, "execution_count") - _n(before, "execution_count")
    assert 1 <= execs <= 5
    assert _n(after, "last_inference") > 0
    for phase in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert _n(after, "inference_stats", phase, "count") >= 5, phase
        assert _n(after, "inference_stats", phase, "ns") >= _n(before, "inference_stats", phase, "ns"), phase
    assert _n(after, "inference_stats", "success", "ns") > _n(before, "inference_stats", "success", "ns")
    batch_sizes = {int(b["batch_size"]) for b in after.get("batch_stats", [])}
    assert 2 in batch_sizes or execs < 5, after.get("batch_stats")


@pytest.mark.extension("statistics")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_inference_statistics_all_models(server, protocol):
    c = make_client(protocol, server)
    try:
        st = _stats(c, protocol)["model_stats"]
    finally:
        c.close()
    names = {s["name"] for s in st}
    assert set(ALL_MODELS) <= names


@pytest.mark.extension("statistics")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_inference_statistics_unknown_model(server, protocol):
    c = make_client(protocol, server)
    try:
        with expect_triton_error(protocol, "NOT_FOUND", "Request for unknown model: 'no_such_model' is not found"):
            _stats(c, protocol, "no_such_model")
    finally:
        c.close()


@pytest.mark.extension("model_repository")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_repository_index(server, protocol):
    c = make_client(protocol, server)
    try:
        if protocol == "http":
            idx = c.get_model_repository_index()
        else:
            idx = c.get_model_repository_index(as_json=True).get("models", [])
    finally:
        c.close()
    by_name = {m["name"]: m for m in idx}
    for m in ALL_MODELS:
        assert m in by_name, m
        assert by_name[m].get("state") == "READY", by_name[m]
        assert str(by_name[m].get("version", "")).isdigit()


@pytest.mark.extension("system_shared_memory")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_system_shared_memory_infer(server, protocol):
    import tritonclient.utils.shared_memory as shm

    c = make_client(protocol, server)
    tag = uuid.uuid4().hex[:8]
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 5, dtype=np.int32)
    nbytes = a.nbytes
    h_in = shm.create_shared_memory_region(f"in_{tag}", f"/serval_in_{tag}", nbytes * 2)
    h_out = shm.create_shared_memory_region(f"out_{tag}", f"/serval_out_{tag}", nbytes * 2)
    try:
        shm.set_shared_memory_region(h_in, [a])
        shm.set_shared_memory_region(h_in, [b], offset=nbytes)
        c.register_system_shared_memory(f"in_{tag}", f"/serval_in_{tag}", nbytes * 2)
        c.register_system_shared_memory(f"out_{tag}", f"/serval_out_{tag}", nbytes * 2)
        mod = __import__("tritonclient." + protocol, fromlist=["InferInput"])
        i0, i1 = mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")
        i0.set_shared_memory(f"in_{tag}", nbytes)
        i1.set_shared_memory(f"in_{tag}", nbytes, offset=nbytes)
        o0, o1 = mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")
        o0.set_shared_memory(f"out_{tag}", nbytes)
        o1.set_shared_memory(f"out_{tag}", nbytes, offset=nbytes)
        res = c.infer("simple", [i0, i1], outputs=[o0, o1])
        # The data is in the region, not the response: Triton sends name, datatype and shape only.
        out = res.get_output("OUTPUT0")
        assert (list(out["shape"]) if protocol == "http" else list(out.shape)) == [1, 16]
        out0 = shm.get_contents_as_numpy(h_out, np.int32, [1, 16])
        out1 = shm.get_contents_as_numpy(h_out, np.int32, [1, 16], offset=nbytes)
        np.testing.assert_array_equal(out0, a + b)
        np.testing.assert_array_equal(out1, a - b)
        status = c.get_system_shared_memory_status() if protocol == "http" else \
            c.get_system_shared_memory_status(as_json=True)
        assert f"in_{tag}" in str(status)
    finally:
        try:
            c.unregister_system_shared_memory(f"in_{tag}")
            c.unregister_system_shared_memory(f"out_{tag}")
        finally:
            shm.destroy_shared_memory_region(h_in)
            shm.destroy_shared_memory_region(h_out)
            c.close()


# ------------------------------------------------------------------ metrics


def _metric(text, name, model):
    total = None
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels = line[len(name) + 1: line.index("}")]
        if re.search(r'(^|,)model="%s"' % re.escape(model), labels):
            total = (total or 0) + float(line.rsplit(" ", 1)[1])
    return total


def _scrape(url):
    with urllib.request.urlopen(f"http://{url}/metrics", timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers.get("Content-Type", "").startswith("text/plain")
        return resp.read().decode()


def test_prometheus_metrics(server):
    """Triton's metric names (nv_inference_request_success, nv_inference_count,
    nv_inference_exec_count, ...) labelled by model and version."""
    if not server.metrics_url:
        pytest.skip("no metrics endpoint")
    before = _scrape(server.metrics_url)
    c = make_client("http" if server.http_url else "grpc", server)
    proto = "http" if server.http_url else "grpc"
    try:
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        for _ in range(3):
            c.infer("simple", [make_input(proto, "INPUT0", a), make_input(proto, "INPUT1", a)])
    finally:
        c.close()
    time.sleep(0.5)
    after = _scrape(server.metrics_url)
    for name in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count"):
        assert _metric(after, name, "simple") is not None, f"{name} for model simple missing"
    ok_before = _metric(before, "nv_inference_request_success", "simple") or 0
    assert _metric(after, "nv_inference_request_success", "simple") - ok_before >= 3
