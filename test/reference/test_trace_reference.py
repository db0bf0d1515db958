"""Tracing of BLS calls side by side: the real tritonserver 2.51 and Serval, each started alone on
its own copy of bls_trace, add_one_int32 and repeat_int32 with tracing on (every request, the
TIMESTAMPS and TENSORS levels, a trace file written at shutdown).

bls_trace's MODE picks its BLS calls: with `trace=request.trace()` they get a child trace
(the next id, `parent_id`, the called model's name, version and the call's own request id);
without it, or when the calling request was not sampled, they are not traced. Compared: what the
model sees of request.trace(), and each trace file normalised to its structure (per id: the model
record, the timestamp names, the tensor records); timestamps are checked for order only (a child
runs inside its parent's request).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from ref_helpers import both, http_raw

from conftest import REPO_ROOT, STARTUP_TIMEOUT, Server, _free_port, _Process

MODELS = [
    REPO_ROOT / "test" / "reference" / "models" / "bls_trace",
    REPO_ROOT / "test" / "reference" / "models" / "add_one_int32",
    REPO_ROOT / "model_repository" / "repeat_int32",
]
TRACE_FLAGS = [
    "--trace-config=level=TIMESTAMPS",
    "--trace-config=level=TENSORS",
    "--trace-config=rate=1",
]


def _start(name: str, repo: Path, trace_file: Path, log_path: Path) -> tuple:
    flags = [*TRACE_FLAGS, f"--trace-config=triton,file={trace_file}"]
    if name == "triton":
        ports = [_free_port() for _ in range(3)]
        script = str(REPO_ROOT / "tools" / "reference" / "tritonserver.sh")
        proc = _Process(name, ["bash", script, str(repo), *map(str, ports), *flags], log_path)
        port_of = lambda: ports[0]  # noqa: E731
    else:
        cli = str(REPO_ROOT / "dist" / "src" / "cli.js")
        cmd = ["node", cli, "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
        proc = _Process(name, [*cmd, *flags], log_path)
        port_of = lambda: proc.ports.get("HTTPService")  # noqa: E731
    return proc, port_of


def _ask(url: str, mode: str, request_id: str) -> dict:
    client = httpclient.InferenceServerClient(url)
    try:
        inp = httpclient.InferInput("MODE", [1], "BYTES")
        inp.set_data_from_numpy(np.array([mode.encode()], dtype=np.object_))
        return json.loads(bytes.fromhex(client.infer("bls_trace", [inp], request_id=request_id).as_numpy("TEXT")[0].decode()))
    finally:
        client.close()


def _run(name: str, tmp_path: Path) -> dict:
    """Starts the server, sends the requests one after another, stops it; the reports and the trace file."""
    repo = tmp_path / name
    for src in MODELS:
        shutil.copytree(src, repo / src.name)
    trace_file = tmp_path / f"{name}_trace.json"
    proc, port_of = _start(name, repo, trace_file, tmp_path / f"{name}.log")
    reports = {}
    try:
        url = proc.wait_ready(port_of, time.monotonic() + STARTUP_TIMEOUT)
        server = Server(name, url, "", None, proc.log_path, repo)
        for mode in ("untraced", "traced", "traced_twice", "stream_traced"):
            reports[mode] = _ask(url, mode, f"outer-{mode}")
        # Not sampled (its model's level OFF): request.trace() is still there, and traces nothing.
        off = http_raw(server, "POST", "/v2/models/bls_trace/trace/setting", json.dumps({"trace_level": ["OFF"]}))
        assert off.status_line.split()[1] == "200", off
        reports["not_sampled"] = _ask(url, "traced", "outer-not-sampled")
    finally:
        proc.stop()
    deadline = time.monotonic() + 10
    while not trace_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"reports": reports, "records": json.loads(trace_file.read_text())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trace")
    return both(lambda name: _run(name, tmp), "triton", "serval")


def _structure(records: list) -> dict:
    """Per trace id: its model record, its timestamp names (sorted: the servers stamp some in a
    different order), its tensor records."""
    out: dict = {}
    for r in records:
        t = out.setdefault(r["id"], {"model": None, "timestamps": [], "tensors": []})
        if "model_name" in r:
            t["model"] = {k: v for k, v in r.items() if k != "id"}
        elif "timestamps" in r:
            t["timestamps"] += [s["name"] for s in r["timestamps"]]
        else:
            t["tensors"].append({"activity": r["activity"], **r["tensor"]})
    for t in out.values():
        t["timestamps"].sort()
        t["tensors"].sort(key=lambda x: (x["activity"], x["name"]))
    return out


def _times(records: list) -> dict:
    out: dict = {}
    for r in records:
        for s in r.get("timestamps", []):
            out.setdefault(r["id"], {})[s["name"]] = s["ns"]
    return out


def test_request_trace_handle(runs):
    t, s = runs
    assert t["reports"] == s["reports"]
    for report in t["reports"].values():
        assert report["type"] == "InferenceTrace"
        assert report["public"] == ["get_context"]
        assert report["context"] == "None"
        assert "exception" not in report
    assert t["reports"]["traced_twice"]["out"] == [[2], [3]]
    assert t["reports"]["stream_traced"]["out"] == [[4], [2]]


def _backend_outputs(trace: dict) -> list:
    return [x["data"] for x in trace["tensors"] if x["activity"] == "TENSOR_BACKEND_OUTPUT"]


def test_bls_trace_records(runs):
    t, s = runs
    ts, ss = _structure(t["records"]), _structure(s["records"])
    # The decoupled child's responses (8): in 5 of 30 runs of this file one or both of their
    # TENSOR_BACKEND_OUTPUT records were missing from 2.51's trace file (apparently the child's
    # trace is written at its request's release, which can come before the responses are
    # recorded). Serval records each response's tensors before the response is sent (30 of 30).
    # Compared without them, then checked on their own: Serval has both, and tritonserver none
    # that Serval lacks.
    assert sorted(_backend_outputs(ss[8])) == ["2", "4"]
    assert set(_backend_outputs(ts[8])) <= {"2", "4"}
    for x in (ts, ss):
        x[8]["tensors"] = [y for y in x[8]["tensors"] if y["activity"] != "TENSOR_BACKEND_OUTPUT"]
    assert ss == ts
    # What 2.51 does, spelled out: calls with trace= are children of the calling request's trace.
    models = {i: x["model"] for i, x in ts.items()}
    assert models == {
        1: {"model_name": "bls_trace", "model_version": 1, "request_id": "outer-untraced"},
        2: {"model_name": "bls_trace", "model_version": 1, "request_id": "outer-traced"},
        3: {"model_name": "add_one_int32", "model_version": 1, "request_id": "inner", "parent_id": 2},
        4: {"model_name": "bls_trace", "model_version": 1, "request_id": "outer-traced_twice"},
        5: {"model_name": "add_one_int32", "model_version": 1, "request_id": "inner", "parent_id": 4},
        6: {"model_name": "add_one_int32", "model_version": 1, "parent_id": 4},
        7: {"model_name": "bls_trace", "model_version": 1, "request_id": "outer-stream_traced"},
        8: {"model_name": "repeat_int32", "model_version": 1, "parent_id": 7},
    }
    assert "HTTP_RECV_START" not in ts[3]["timestamps"] and "REQUEST_START" in ts[3]["timestamps"]
    assert {x["activity"] for x in ts[3]["tensors"]} == {"TENSOR_QUEUE_INPUT", "TENSOR_BACKEND_OUTPUT"}


@pytest.mark.parametrize("server", ["triton", "serval"])
def test_child_runs_inside_its_parent(runs, server):
    run = runs[0] if server == "triton" else runs[1]
    times = _times(run["records"])
    for child, parent in ((3, 2), (5, 4), (6, 4), (8, 7)):
        c, p = times[child], times[parent]
        assert p["COMPUTE_START"] <= c["REQUEST_START"] <= c["QUEUE_START"] <= c["COMPUTE_START"] <= c["REQUEST_END"]
        assert c["REQUEST_START"] <= p["REQUEST_END"]
        # A decoupled child (8) may end after its parent: 2.51 releases its request later. So,
        # now and then (1 run in 25 here), may any child in 2.51: its release is stamped on
        # another thread than the parent's. Serval ends a child before its parent's answer.
        if child != 8 and server == "serval":
            assert c["REQUEST_END"] <= p["REQUEST_END"]
    assert times[5]["REQUEST_END"] <= times[6]["REQUEST_START"]
