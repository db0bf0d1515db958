"""The response cache through the official clients.

A server started with ``--cache-config local,size=N`` serving ``cached_mlp``
(its config has ``response_cache { enable: true }``): a repeated request gets
the same outputs without a model execution, and what tritonclient reads back
says so, as with Triton: ``cache_hit``/``cache_miss`` in the statistics (both
protocols), hits not counted as inferences or executions, and the
``nv_cache_num_hits_per_model`` / ``nv_cache_num_misses_per_model`` metrics.
"""

from __future__ import annotations

import re
import urllib.request

import numpy as np
import pytest
from conftest import _ManagedServer
from serval_helpers import PROTOCOLS, make_client, make_input, make_output

MODEL = "cached_mlp"
WIDTH = 512


@pytest.fixture(scope="module")
def cache_server():
    managed = _ManagedServer(
        ("--model-control-mode", "explicit", "--load-model", MODEL,
         "--cache-config", "local,size=8388608"),
        log_name="serval-response-cache.log",
    )
    try:
        yield managed.start()
    finally:
        managed.stop()


def _stats(c, protocol) -> dict:
    s = c.get_inference_statistics(MODEL, "1")
    if protocol == "grpc":
        from google.protobuf import json_format

        s = json_format.MessageToDict(s, preserving_proto_field_name=True)
    m = s["model_stats"][0]
    stats = m["inference_stats"]
    # gRPC's JSON form drops zero fields and writes uint64 as strings.
    def count(k: str) -> int:
        return int(stats.get(k, {}).get("count", 0))

    return {
        "hit": count("cache_hit"),
        "miss": count("cache_miss"),
        "success": count("success"),
        "hit_ns": int(stats.get("cache_hit", {}).get("ns", 0)),
        "inference_count": int(m.get("inference_count", 0)),
        "execution_count": int(m.get("execution_count", 0)),
    }


def _metric(server, name: str) -> float:
    text = urllib.request.urlopen(f"http://{server.metrics_url}/metrics", timeout=10).read().decode()
    m = re.search(rf'^{name}{{model="{MODEL}",version="1"}} ([0-9.e+]+)$', text, re.M)
    assert m, f"{name} for {MODEL} not in the metrics"
    return float(m.group(1))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_repeated_request_is_a_cache_hit(cache_server, protocol):
    c = make_client(protocol, cache_server)
    rng = np.random.default_rng(0 if protocol == "http" else 1)
    x = rng.standard_normal((1, WIDTH)).astype(np.float32)
    inputs = [make_input(protocol, "INPUT", x)]
    outputs = [make_output(protocol, "OUTPUT")]

    before = _stats(c, protocol)
    hits_metric = _metric(cache_server, "nv_cache_num_hits_per_model")
    first = c.infer(MODEL, inputs, outputs=outputs).as_numpy("OUTPUT")
    after_miss = _stats(c, protocol)
    assert after_miss["miss"] == before["miss"] + 1
    assert after_miss["execution_count"] == before["execution_count"] + 1

    second = c.infer(MODEL, inputs, outputs=outputs).as_numpy("OUTPUT")
    np.testing.assert_array_equal(second, first)
    after_hit = _stats(c, protocol)
    assert after_hit["hit"] == after_miss["hit"] + 1
    assert after_hit["hit_ns"] > after_miss["hit_ns"]
    assert after_hit["success"] == after_miss["success"] + 1
    # As in Triton: a hit is a success, not an inference or an execution.
    assert after_hit["execution_count"] == after_miss["execution_count"]
    assert after_hit["inference_count"] == after_miss["inference_count"]
    assert _metric(cache_server, "nv_cache_num_hits_per_model") == hits_metric + 1
    assert _metric(cache_server, "nv_cache_num_misses_per_model") == after_hit["miss"]

    # Other bytes miss and run the model.
    third = c.infer(MODEL, [make_input(protocol, "INPUT", x + 1)], outputs=outputs).as_numpy("OUTPUT")
    assert not np.array_equal(third, first)
    assert _stats(c, protocol)["execution_count"] == after_hit["execution_count"] + 1


def test_config_reports_response_cache_enabled(cache_server):
    c = make_client("http", cache_server)
    assert c.get_model_config(MODEL)["response_cache"] == {"enable": True}
