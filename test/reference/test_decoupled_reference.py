"""Decoupled models side by side: the same requests to tritonserver 2.51 and to Serval.

What a client sees must be identical: gRPC ModelStreamInfer messages (parsed, and their
serialized bytes), unary refusals, HTTP generate / generate_stream as read off the socket
(status, framing headers, every chunk), BLS reports, ensemble streams, model configs,
statistics counts and perf_analyzer --streaming. Normalised first: statistics durations and
timestamps, and the scratch repository's absolute path in Python tracebacks (Serval names
files repository-relative on purpose).

A difference that is deliberate (docs/reference/README.md) is a strict xfail test of its own;
any other failure here is Serval differing from Triton.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import pytest
from google.protobuf import json_format
from ref_helpers import (
    both,
    http_raw,
    http_view,
    infer_request,
    mode_inputs,
    repeat_inputs,
    stats,
    stream,
    strip_volatile,
    unary_infer,
)

from conftest import REPO_ROOT

# Strict xfail marks for the deliberate differences (docs/reference/README.md).
XFAIL_PATHS = pytest.mark.xfail(
    strict=True,
    reason="deliberate: error texts name model.py repository-relative, never the server's "
    "absolute path (docs/reliability.md)",
)
XFAIL_GROUP_NAME = pytest.mark.xfail(
    strict=True,
    reason="deliberate: a Python model without instance_group runs as group '<m>_0', instance "
    "'<m>_0_0' (Triton 2.51: '<m>', '<m>_0'; docs/config_checks.md)",
)
XFAIL_RESPONSE_PARAMETERS = pytest.mark.xfail(
    strict=True,
    reason="2.73 wins: InferenceResponse(parameters=...) is in Triton's later Python backend; "
    "2.51's pb_utils refuses the argument (docs/python_backend.md)",
)
XFAIL_GENERATE_PARSE = pytest.mark.xfail(
    strict=True,
    reason="deliberate: a generate body that is not JSON, not an object or has a wrong-typed value "
    "is 400 (Triton 500) with Serval's parse texts (docs/protocol.md, Differences from Triton)",
)
XFAIL_RESPONSE_STATS = pytest.mark.xfail(
    strict=True,
    reason="deliberate: Serval reports response_stats for decoupled models; 2.51's Python backend "
    "leaves them {} (docs/protocol.md, Statistics of decoupled models)",
)
XFAIL_REQUIRED_INPUT = pytest.mark.xfail(
    strict=True,
    reason="deliberate: a request missing a required input is refused even when the model also has "
    "optional inputs (2.51 then checks only the count and hands the request to the model)",
)
XFAIL_BLS_AITER = pytest.mark.xfail(
    strict=True,
    reason="deliberate: exec/async_exec(decoupled=True) return an iterator that is also an async "
    "iterator (2.51's ResponseIterator is only a plain one); what it yields is the same",
)
XFAIL_ENSEMBLE_ORDER = pytest.mark.xfail(
    strict=True,
    reason="known: Triton lists an ensemble's outputs in the iteration order of an unordered_map "
    "(libstdc++ hashing), Serval in the config's (or request's) order; clients read outputs by name",
)
XFAIL_MAX_INFLIGHT = pytest.mark.xfail(
    strict=True,
    reason="2.73 wins: ensemble_scheduling.max_inflight_requests is a field of 2.73's "
    "model_config.proto (printed as 0); 2.51's has none (docs/ensembles.md)",
)


@pytest.fixture(scope="module")
def repo(triton):
    """The scratch repository's absolute path, as it appears in Triton's tracebacks."""
    return str(triton.repo)


def stream_dicts(result, repo=None):
    out = []
    for m in result.messages:
        d = json_format.MessageToDict(m, preserving_proto_field_name=True)
        if repo is not None and "error_message" in d:
            d["error_message"] = d["error_message"].replace(f"{repo}/", "")
        out.append(d)
    return out


def assert_same_stream(t, s, repo):
    """Same messages in the same order; the same bytes when no repository path is involved."""
    assert stream_dicts(s, repo) == stream_dicts(t, repo)
    if not any(repo.encode() in w for w in t.wire):
        assert [w.hex() for w in s.wire] == [w.hex() for w in t.wire]


# ---------------------------------------------------------------------------
# gRPC ModelStreamInfer
# ---------------------------------------------------------------------------


def probe(mode, n=None):
    return lambda ef: [infer_request("decoupled_probe", mode_inputs(mode, n), "e1", empty_final=ef)]


def model_req(model, inputs, rid="n1", **kw):
    return lambda ef: [infer_request(model, inputs, rid, empty_final=ef, **kw)]


REPEAT = repeat_inputs([4, 2, 0, 1], [20] * 4, 30)
PROBE_MODES = [
    "multi", "one", "none", "final_with_response", "error_first", "error_after_first", "error_final",
    "raise", "raise_after_send", "return_list", "send_after_final", "echo", "shapes",
]

STREAM_CASES = {
    "repeat": model_req("repeat_int32", REPEAT, "r1"),
    "repeat_empty_in": model_req("repeat_int32", repeat_inputs([]), "r2"),
    "repeat_no_id": model_req("repeat_int32", repeat_inputs([3, 5]), ""),
    "repeat_idx_only": model_req("repeat_int32", repeat_inputs([3, 5]), "r3", outputs=["IDX"]),
    "square_3": model_req("square_int32", {"IN": np.array([3], np.int32)}, "s1"),
    "square_0": model_req("square_int32", {"IN": np.array([0], np.int32)}, "s2"),
    **{f"probe_{m}": probe(m) for m in PROBE_MODES},
    "probe_multi_3": probe("multi", 3),
    "probe_slow": probe("slow", 2),
    "add_one": model_req("add_one_int32", {"IN": np.array([5], np.int32)}),
    "nondecoupled_ok": model_req("nondecoupled_probe", mode_inputs("ok")),
    "nondecoupled_error": model_req("nondecoupled_probe", mode_inputs("error")),
    "nondecoupled_raise": model_req("nondecoupled_probe", mode_inputs("raise")),
    **{f"py_decoupled_{m}": model_req("py_decoupled", mode_inputs(m), "p1")
       for m in ("count", "inline", "zero", "error_mid", "error_final", "raise", "return_list", "params")},
}
STREAM_MARKS = {
    "py_decoupled_raise": [XFAIL_GROUP_NAME],
    "py_decoupled_return_list": [XFAIL_GROUP_NAME],
    "py_decoupled_params": [XFAIL_RESPONSE_PARAMETERS],
}


def _stream_params():
    for case in STREAM_CASES:
        for ef in (None, False, True) if case == "repeat" else (None, True):
            label = {None: "default", False: "empty_final_false", True: "empty_final"}[ef]
            yield pytest.param(case, ef, id=f"{case}-{label}", marks=STREAM_MARKS.get(case, []))


@pytest.mark.parametrize("case, ef", list(_stream_params()))
def test_stream(triton, serval, repo, case, ef):
    requests = STREAM_CASES[case](ef)
    quiet = 1.0 if case == "probe_slow" else 0.5
    t, s = both(stream, triton, serval, requests, finals=len(requests) if ef else None, quiet=quiet)
    assert t.wire or case in ("repeat_empty_in", "probe_none", "square_0", "py_decoupled_zero")
    assert_same_stream(t, s, repo)


def test_stream_two_requests_interleave(triton, serval, repo):
    requests = [
        infer_request("repeat_int32", repeat_inputs([1, 2, 3], [200] * 3), "A", empty_final=True),
        infer_request("repeat_int32", repeat_inputs([7, 8, 9], [200] * 3), "B", empty_final=True),
    ]
    t, s = both(stream, triton, serval, requests, finals=2, gap=0.1)
    assert [m.infer_response.id for m in t.messages] == ["A", "B", "A", "B", "A", "A", "B", "B"]
    assert_same_stream(t, s, repo)


def _refusal_requests():
    unknown_version = infer_request("repeat_int32", repeat_inputs([1]), "v")
    unknown_version.model_version = "9"
    return {
        "unknown_model": infer_request("nope", repeat_inputs([1]), "x"),
        "unknown_version": unknown_version,
        "missing_input": infer_request(
            "repeat_int32", {"IN": np.array([1], np.int32), "DELAY": np.array([0], np.uint32)}, "y"
        ),
        "wrong_datatype": infer_request(
            "repeat_int32",
            {"IN": np.array([1], np.float32), "DELAY": np.array([0], np.uint32), "WAIT": np.array([0], np.uint32)},
            "z",
        ),
        "empty_final_not_bool": infer_request(
            "repeat_int32", repeat_inputs([1]), "q", triton_enable_empty_final_response="yes"
        ),
    }


@pytest.mark.parametrize("case", list(_refusal_requests()))
def test_stream_refusal(triton, serval, repo, case):
    t, s = both(stream, triton, serval, [_refusal_requests()[case]])
    assert len(t.wire) == 1 and t.messages[0].error_message
    assert_same_stream(t, s, repo)


@XFAIL_PATHS
def test_stream_traceback_path(triton, serval, repo):
    t, s = both(stream, triton, serval, probe("raise")(None))
    assert [m.error_message for m in s.messages] == [m.error_message for m in t.messages]


# ---------------------------------------------------------------------------
# Unary calls on decoupled models
# ---------------------------------------------------------------------------

DECOUPLED = ["repeat_int32", "square_int32", "decoupled_probe", "ensemble_repeat", "ensemble_repeat_decoupled"]


@pytest.mark.parametrize("model", DECOUPLED)
def test_grpc_model_infer_refused(triton, serval, model):
    t, s = both(unary_infer, triton, serval, infer_request(model, repeat_inputs([1]), "u"))
    assert t[0] == "UNIMPLEMENTED"
    assert s == t


INFER_REFUSALS = {
    "repeat_garbage": ("/v2/models/repeat_int32/infer", "garbage"),
    "repeat_version": ("/v2/models/repeat_int32/versions/1/infer", '{"inputs": []}'),
    "square": ("/v2/models/square_int32/infer", "{}"),
    "probe": ("/v2/models/decoupled_probe/infer", "{}"),
    "ensemble": ("/v2/models/ensemble_repeat/infer", "{}"),
    "ensemble_decoupled": ("/v2/models/ensemble_repeat_decoupled/infer", "{}"),
    "unknown_model": ("/v2/models/nope/infer", "{}"),
}


@pytest.mark.parametrize("case", list(INFER_REFUSALS))
def test_http_infer_refused(triton, serval, case):
    path, body = INFER_REFUSALS[case]
    t, s = both(http_raw, triton, serval, "POST", path, body)
    assert (s.status_line, s.body) == (t.status_line, t.body)


def test_http_infer_refused_content_type(triton, serval):
    t, s = both(http_raw, triton, serval, "POST", "/v2/models/repeat_int32/infer", "{}")
    assert s.header("content-type") == t.header("content-type")


# ---------------------------------------------------------------------------
# HTTP generate / generate_stream, byte for byte
# ---------------------------------------------------------------------------

TG = "/v2/models/text_generator"
PROBE = "/v2/models/decoupled_probe"
GENERATE_CASES = {
    "tg_stream_3": (f"{TG}/generate_stream", {"text_input": "hi", "max_tokens": 3, "delay_ms": 5}),
    "tg_stream_v1": (f"{TG}/versions/1/generate_stream", {"text_input": "hi", "max_tokens": 2, "delay_ms": 5}),
    "tg_stream_id": (f"{TG}/generate_stream", {"text_input": "hé", "max_tokens": 2, "delay_ms": 5, "id": "abc"}),
    "tg_stream_0": (f"{TG}/generate_stream", {"text_input": "hi", "max_tokens": 0, "delay_ms": 5}),
    "tg_generate_1": (f"{TG}/generate", {"text_input": "hi", "max_tokens": 1, "delay_ms": 5}),
    "tg_generate_1_id": (f"{TG}/generate", {"text_input": "hi", "max_tokens": 1, "delay_ms": 5, "id": "abc"}),
    "tg_generate_3": (f"{TG}/generate", {"text_input": "hi", "max_tokens": 3, "delay_ms": 5}),
    "tg_generate_0": (f"{TG}/generate", {"text_input": "hi", "max_tokens": 0, "delay_ms": 5}),
    **{f"probe_stream_{m}": (f"{PROBE}/generate_stream", {"MODE": m}) for m in PROBE_MODES},
    "probe_stream_echo_params": (
        f"{PROBE}/generate_stream",
        {"MODE": "echo", "id": "abc", "flag": True, "n": 3, "parameters": {"N": 4, "s": "x"}},
    ),
    **{f"probe_generate_{m}": (f"{PROBE}/generate", {"MODE": m})
       for m in ("one", "multi", "none", "error_first", "error_after_first", "raise", "shapes")},
    "nondecoupled_generate_ok": ("/v2/models/nondecoupled_probe/generate", {"MODE": "ok"}),
    "nondecoupled_stream_ok": ("/v2/models/nondecoupled_probe/generate_stream", {"MODE": "ok"}),
    "nondecoupled_generate_error": ("/v2/models/nondecoupled_probe/generate", {"MODE": "error"}),
    "repeat_stream": ("/v2/models/repeat_int32/generate_stream", {"IN": [4, 2], "DELAY": [0, 0], "WAIT": 0}),
    "ensemble_stream": ("/v2/models/ensemble_repeat/generate_stream", {"IN": [4, 2], "DELAY": [0, 0], "WAIT": 0}),
    "ensemble_generate": ("/v2/models/ensemble_repeat/generate", {"IN": [4, 2], "DELAY": [0, 0], "WAIT": 0}),
    # refused before inference
    "unknown_model": ("/v2/models/nope/generate", {"text_input": "hi"}),
    "unknown_model_stream": ("/v2/models/nope/generate_stream", {"text_input": "hi"}),
    "unknown_version": (f"{TG}/versions/7/generate_stream", {"text_input": "hi"}),
    "get": (f"{TG}/generate", None),
    "too_many_elements": (f"{TG}/generate", {"text_input": ["hi", "there"]}),
    "object_parameter": (f"{TG}/generate", {"text_input": "hi", "obj": {"a": 1}}),
    "nested_parameter": (f"{TG}/generate_stream", {"text_input": "hi", "parameters": {"nested": {"a": 1}}}),
    "input_twice": (f"{TG}/generate", {"text_input": "hi", "max_tokens": 2, "parameters": {"max_tokens": 1}}),
    "missing_input": ("/v2/models/repeat_int32/generate", {"IN": [1], "DELAY": [0]}),
    "missing_input_optional_model": (f"{TG}/generate", {"max_tokens": 2}),
    # deliberate: 400 where Triton answers 500
    "empty_body": (f"{TG}/generate", ""),
    "not_json": (f"{TG}/generate", "not json"),
    "not_object": (f"{TG}/generate", "[1,2]"),
    "int_as_string": (f"{TG}/generate", {"text_input": "hi", "max_tokens": "three"}),
    "bytes_as_int": (f"{TG}/generate_stream", {"text_input": 5}),
    "parameters_not_object": (f"{TG}/generate", {"text_input": "hi", "parameters": 5}),
}
GENERATE_MARKS = {
    **{
        k: [XFAIL_GENERATE_PARSE]
        for k in ("empty_body", "not_json", "not_object", "int_as_string", "bytes_as_int", "parameters_not_object")
    },
    "missing_input_optional_model": [XFAIL_REQUIRED_INPUT],
}


@pytest.mark.parametrize(
    "case", [pytest.param(k, marks=GENERATE_MARKS.get(k, [])) for k in GENERATE_CASES]
)
def test_generate(triton, serval, repo, case):
    path, body = GENERATE_CASES[case]
    method = "GET" if body is None else "POST"
    if isinstance(body, dict):
        body = json.dumps(body, ensure_ascii=False).encode()
    t, s = both(http_raw, triton, serval, method, path, body)
    assert http_view(s, repo) == http_view(t, repo)


# ---------------------------------------------------------------------------
# BLS into decoupled models
# ---------------------------------------------------------------------------

BLS_MODES = [
    "exec_decoupled", "async_exec_decoupled", "exec_decoupled_empty", "exec_nondecoupled",
    "async_exec_nondecoupled", "exec_probe_one", "exec_probe_multi", "exec_probe_none", "exec_probe_raise",
]


def bls_report(server, mode):
    req = infer_request("bls_probe", {"MODE": np.array([mode.encode()], dtype=np.object_)}, "b")
    code, details, resp = unary_infer(server, req)
    assert code == "OK", details
    raw = base64.b64decode(resp["raw_output_contents"][0])
    return json.loads(raw[4:])


def _strip_repo(value, repo):
    return json.loads(json.dumps(value).replace(f"{repo}/", ""))


@pytest.mark.parametrize("mode", BLS_MODES)
def test_bls(triton, serval, repo, mode):
    """What the model's iterator yields (responses, errors, the empty final one)."""
    t, s = both(bls_report, triton, serval, mode)
    for r in (t, s):
        r.pop("type", None)
        r.pop("has_aiter", None)
    assert _strip_repo(s, repo) == _strip_repo(t, repo)


@XFAIL_BLS_AITER
def test_bls_iterator_type(triton, serval):
    """The object exec/async_exec(decoupled=True) returns: its class name and __aiter__."""
    t, s = both(bls_report, triton, serval, "async_exec_decoupled")
    assert (s["type"], s["has_aiter"]) == (t["type"], t["has_aiter"])


# ---------------------------------------------------------------------------
# Ensembles with a decoupled step
# ---------------------------------------------------------------------------


def data_responses(result):
    """The responses with outputs: id, model, version and outputs by name (order left out)."""
    out = []
    for m in result.messages:
        r = m.infer_response
        if not r.outputs:
            continue
        outputs = {
            o.name: (o.datatype, list(o.shape), r.raw_output_contents[i].hex()) for i, o in enumerate(r.outputs)
        }
        out.append({"id": r.id, "model": r.model_name, "version": r.model_version, "outputs": outputs})
    return out


ENSEMBLES = ["ensemble_repeat", "ensemble_repeat_decoupled"]


@pytest.mark.parametrize("ef", [False, True], ids=["default", "empty_final"])
@pytest.mark.parametrize("model", ENSEMBLES)
def test_ensemble_stream(triton, serval, model, ef):
    # Where 2.51 puts the final flag is racy (on the 4th response or on an empty one after
    # it): compared are the data responses, and that a final flag comes when asked for.
    req = infer_request(model, REPEAT, "en", empty_final=ef)
    t, s = both(stream, triton, serval, [req], finals=1 if ef else None)
    assert len(data_responses(t)) == 4
    assert data_responses(s) == data_responses(t)
    assert not any(m.error_message for m in t.messages + s.messages)
    if ef:
        for r in (t, s):
            assert r.messages[-1].infer_response.parameters["triton_final_response"].bool_param


def _param_dicts(result):
    out = []
    for m in result.messages:
        if m.infer_response.outputs:
            d = json_format.MessageToDict(m.infer_response, preserving_proto_field_name=True)
            d.get("parameters", {}).pop("triton_final_response", None)
            out.append(d.get("parameters", {}))
    return out


def test_ensemble_stream_response_parameters(triton, serval):
    """Each data response's parameters other than triton_final_response."""
    req = infer_request("ensemble_repeat", REPEAT, "en", empty_final=True)
    t, s = both(stream, triton, serval, [req], finals=1)
    assert _param_dicts(s) == _param_dicts(t)


@XFAIL_ENSEMBLE_ORDER
def test_ensemble_stream_output_order(triton, serval):
    req = infer_request("ensemble_repeat", REPEAT, "en", empty_final=True)
    t, s = both(stream, triton, serval, [req], finals=1)
    def names(r):
        return [[o.name for o in m.infer_response.outputs] for m in r.messages if m.infer_response.outputs]

    assert names(s) == names(t)


# ---------------------------------------------------------------------------
# Model configuration
# ---------------------------------------------------------------------------


def config(server, model):
    return json.loads(http_raw(server, "GET", f"/v2/models/{model}/config").payload)


@pytest.mark.parametrize(
    "model", ENSEMBLES + ["repeat_int32", "decoupled_probe", "add_one_int32", "nondecoupled_probe"]
)
def test_config_transaction_policy(triton, serval, model):
    t, s = both(config, triton, serval, model)
    assert ("model_transaction_policy" in s, s.get("model_transaction_policy")) == (
        "model_transaction_policy" in t,
        t.get("model_transaction_policy"),
    )


def _without_max_inflight(cfg):
    cfg = json.loads(json.dumps(cfg))
    if cfg.get("ensemble_scheduling", {}).get("max_inflight_requests") == 0:
        del cfg["ensemble_scheduling"]["max_inflight_requests"]
    return cfg


@pytest.mark.parametrize("model", ENSEMBLES + ["repeat_int32"])
def test_config_json(triton, serval, model):
    t, s = both(config, triton, serval, model)
    assert _without_max_inflight(s) == _without_max_inflight(t)


@XFAIL_MAX_INFLIGHT
def test_config_ensemble_max_inflight_requests(triton, serval):
    t, s = both(config, triton, serval, "ensemble_repeat")
    assert s["ensemble_scheduling"] == t["ensemble_scheduling"]


@pytest.mark.parametrize("path", ["/v2/models/repeat_int32/config", "/v2/models/repeat_int32/stats"])
def test_json_content_type(triton, serval, path):
    t, s = both(http_raw, triton, serval, "GET", path)
    assert s.header("content-type") == t.header("content-type")


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------


def _counts(stat):
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(f"{prefix}[{i}]", v)
        elif prefix.endswith("count"):
            flat[prefix] = value

    walk("", stat["model_stats"][0])
    return flat


def _delta(before, after, skip="response_stats"):
    b, a = _counts(before), _counts(after)
    return {k: v - b.get(k, 0) for k, v in a.items() if not k.startswith(skip)}


def _repeat_traffic(server):
    stream(server, [infer_request("repeat_int32", repeat_inputs([4, 2, 0, 1]), "st1", empty_final=True)], finals=1)
    stream(server, [infer_request("repeat_int32", repeat_inputs([]), "st2", empty_final=True)], finals=1)
    http_raw(server, "POST", "/v2/models/repeat_int32/generate_stream", {"IN": [1, 2], "DELAY": [0, 0], "WAIT": 0})
    unary_infer(server, infer_request("repeat_int32", repeat_inputs([1]), "st3"))
    http_raw(server, "POST", "/v2/models/repeat_int32/infer", "{}")
    time.sleep(0.5)


def _stats_around(server, model, traffic):
    before = stats(server, model)
    traffic(server)
    return before, stats(server, model)


def test_stats_repeat_int32(triton, serval):
    (tb, ta), (sb, sa) = both(_stats_around, triton, serval, "repeat_int32", _repeat_traffic)
    assert _delta(tb, ta)["inference_count"] == 3
    assert _delta(sb, sa) == _delta(tb, ta)
    # The same keys at every level (durations and response_stats aside).
    def keys(st):
        m = strip_volatile(st)["model_stats"][0]
        return sorted(m), sorted(m["inference_stats"]), [sorted(b) for b in m["batch_stats"]]

    assert keys(sa) == keys(ta)


def test_stats_response_stats_deliberate(triton, serval):
    """The listed difference itself: 2.51 leaves response_stats empty, Serval fills it."""
    t, s = both(stats, triton, serval, "repeat_int32")
    assert t["model_stats"][0]["response_stats"] == {}
    rs = s["model_stats"][0]["response_stats"]
    assert "0" in rs
    fields = {"compute_infer", "compute_output", "success", "fail", "empty_response", "cancel"}
    assert all(set(v) == fields for v in rs.values())


@XFAIL_RESPONSE_STATS
def test_stats_response_stats(triton, serval):
    t, s = both(stats, triton, serval, "repeat_int32")
    assert s["model_stats"][0]["response_stats"] == t["model_stats"][0]["response_stats"]


def _probe_failures(server):
    for mode in ("raise", "return_list", "error_first", "one"):
        stream(server, probe(mode)(True), finals=1)
    time.sleep(0.5)


def test_stats_decoupled_failures(triton, serval):
    """decoupled_probe raise / return_list (failures), error_first (an error response), one."""
    (tb, ta), (sb, sa) = both(_stats_around, triton, serval, "decoupled_probe", _probe_failures)
    assert _delta(sb, sa) == _delta(tb, ta)


def _nondecoupled_errors(server):
    for mode in ("error", "raise", "ok"):
        stream(server, model_req("nondecoupled_probe", mode_inputs(mode))(None), finals=1)
    time.sleep(0.5)


def test_stats_nondecoupled_errors(triton, serval):
    """nondecoupled_probe: an error response, a raise, a success."""
    (tb, ta), (sb, sa) = both(_stats_around, triton, serval, "nondecoupled_probe", _nondecoupled_errors)
    assert _delta(sb, sa) == _delta(tb, ta)


# ---------------------------------------------------------------------------
# perf_analyzer --streaming
# ---------------------------------------------------------------------------

PERF_ANALYZER = REPO_ROOT / ".venv" / "bin" / "perf_analyzer"


def test_perf_analyzer_streaming(triton, serval):
    if not PERF_ANALYZER.exists():
        pytest.fail(f"{PERF_ANALYZER} missing: run tools/ci/setup-python.sh")
    step = {"IN": {"content": [4, 2, 0, 1], "shape": [4]}, "DELAY": {"content": [0] * 4, "shape": [4]}, "WAIT": [0]}
    data = {"data": [step]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
    outputs = {}
    try:
        for server in (triton, serval):  # one at a time: 2 cores
            cmd = [str(PERF_ANALYZER), "-m", "repeat_int32", "-u", server.grpc, "-i", "grpc", "--streaming",
                   "--input-data", f.name, "-p", "500", "-s", "100"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, f"{server.name}: perf_analyzer exit {p.returncode}\n{p.stdout}\n{p.stderr}"
            outputs[server.name] = p.stdout
    finally:
        os.unlink(f.name)
    for name, out in outputs.items():
        assert "Detected decoupled model, using the first response for measuring latency" in out, name
        assert "Response Throughput:" in out, name
    # The same report, numbers aside.
    shape = lambda out: [re.sub(r"\d+(\.\d+)?", "N", line).rstrip() for line in out.splitlines()]  # noqa: E731
    assert shape(outputs["serval"]) == shape(outputs["triton"])

