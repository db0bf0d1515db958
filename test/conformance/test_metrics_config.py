"""--metrics-config end to end: a server of our own started with summary_latencies=true,
summary_quantiles and counter_latencies=false, requests through tritonclient, then the metrics
port scraped as Prometheus would. Names, help texts, labels and line order are tritonserver
2.51's for the same flags (checked side by side with tools/reference/tritonserver.sh)."""

from __future__ import annotations

import re
import urllib.request

import numpy as np
import pytest
from serval_helpers import make_client, make_input

from conftest import _ManagedServer


@pytest.fixture(scope="module")
def metrics_server():
    managed = _ManagedServer(
        ("--model-control-mode", "explicit", "--load-model", "simple",
         "--metrics-config", "summary_latencies=true",
         "--metrics-config", "summary_quantiles=0.5:0.05,0.9:0.01",
         "--metrics-config", "counter_latencies=false"),
        log_name="serval-metrics-config.log",
    )
    try:
        yield managed.start()
    finally:
        managed.stop()


def test_latency_summaries(metrics_server, protocol):
    c = make_client(protocol, metrics_server)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    before = _count(metrics_server)
    for _ in range(3):
        c.infer("simple", [make_input(protocol, "INPUT0", a), make_input(protocol, "INPUT1", a)])
    text = _scrape(metrics_server)
    labels = 'model="simple",version="1"'
    assert "# HELP nv_inference_queue_summary_us Summary of inference queuing duration in microseconds (includes cached requests)" in text
    assert "# TYPE nv_inference_request_summary_us summary" in text
    for name in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
        lines = [l.rsplit(" ", 1)[0] for l in text.splitlines() if l.startswith(f"nv_inference_{name}_summary_us")]
        assert lines == [
            f"nv_inference_{name}_summary_us_count{{{labels}}}",
            f"nv_inference_{name}_summary_us_sum{{{labels}}}",
            f'nv_inference_{name}_summary_us{{{labels},quantile="0.5"}}',
            f'nv_inference_{name}_summary_us{{{labels},quantile="0.9"}}',
        ], name
    assert _count(metrics_server) == before + 3
    # counter_latencies=false: no latency counters; the request counts stay.
    assert "_duration_us" not in text
    assert re.search(rf"nv_inference_request_success\{{{labels}\}} \d+", text)


def _scrape(info) -> str:
    with urllib.request.urlopen(f"http://{info.metrics_url}/metrics", timeout=10) as r:
        return r.read().decode()


def _count(info) -> int:
    m = re.search(r'nv_inference_request_summary_us_count\{model="simple",version="1"\} (\d+)', _scrape(info))
    return int(m.group(1)) if m else 0
