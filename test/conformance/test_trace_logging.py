"""Trace and logging extensions through the official clients.

get/update_trace_settings and get/update_log_settings over HTTP and gRPC,
with the shapes tritonclient returns from Triton: HTTP trace settings as a
dict of strings (trace_level a list), gRPC as TraceSettingResponse value
lists; log settings as a dict of bool/int/str, gRPC as LogSettingsResponse
oneofs. The cases follow Triton's qa/L0_trace/trace_endpoint_test.py and
qa/L0_logging: a model setting mirrors the global fields it does not set,
clearing (None) falls back, and neither the trace file nor the log file can
be changed over the network.
"""

from __future__ import annotations

import json

import pytest
from conftest import LOG_DIR, _ManagedServer
from google.protobuf import json_format
from serval_helpers import expect_triton_error, make_client
from tritonclient.grpc import service_pb2

TRACE_FILE = str(LOG_DIR / "conformance-trace.json")

INITIAL = {
    "trace_file": TRACE_FILE,
    "trace_level": ["TIMESTAMPS"],
    "trace_rate": "1",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_mode": "triton",
}

LOG_DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}

CLEAR = {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None}


@pytest.fixture(scope="module")
def trace_server():
    """A server of our own with Triton's trace test start-up settings (file, TIMESTAMPS, rate 1)."""
    managed = _ManagedServer(
        (
            "--trace-config", f"triton,file={TRACE_FILE}",
            "--trace-config", "level=TIMESTAMPS",
            "--trace-config", "rate=1",
        ),
        log_name="serval-trace-logging.log",
    )
    try:
        yield managed.start()
    finally:
        managed.stop()


@pytest.fixture
def tclient(protocol, trace_server):
    c = make_client(protocol, trace_server)
    yield c
    # Triton's tearDown: every field of the model and the global setting cleared again.
    with make_client("http", trace_server) as h:
        h.update_trace_settings(model_name="simple", settings=CLEAR)
        h.update_trace_settings(settings=CLEAR)
        h.update_log_settings(settings={"log_info": True, "log_warning": True, "log_error": True,
                                        "log_verbose_level": 0, "log_format": "default"})
    c.close()


def expected(protocol: str, settings: dict):
    """What tritonclient returns from Triton for these settings."""
    if protocol == "http":
        return settings
    msg = service_pb2.TraceSettingResponse()
    json_format.Parse(
        json.dumps({"settings": {k: {"value": v if isinstance(v, list) else [v]} for k, v in settings.items()}}),
        msg,
    )
    return msg


def expected_log(protocol: str, settings: dict):
    if protocol == "http":
        return settings
    msg = service_pb2.LogSettingsResponse()
    for k, v in settings.items():
        if isinstance(v, bool):
            msg.settings[k].bool_param = v
        elif isinstance(v, int):
            msg.settings[k].uint32_param = v
        else:
            msg.settings[k].string_param = v
    return msg


@pytest.mark.extension("trace")
def test_trace_get_settings(protocol, tclient):
    assert tclient.get_trace_settings(model_name="simple") == expected(protocol, INITIAL)
    assert tclient.get_trace_settings() == expected(protocol, INITIAL)
    with expect_triton_error(protocol, "INVALID_ARG", "Request for unknown model : does-not-exist"):
        tclient.get_trace_settings(model_name="does-not-exist")


@pytest.mark.extension("trace")
def test_trace_update_settings(protocol, tclient):
    with expect_triton_error(protocol, "UNSUPPORTED", "trace file location can not be updated through network protocol"):
        tclient.update_trace_settings(model_name="simple", settings={"trace_file": "model.log"})
    assert tclient.get_trace_settings(model_name="simple") == expected(protocol, INITIAL)
    both = {**INITIAL, "trace_level": ["TIMESTAMPS", "TENSORS"]}
    assert tclient.update_trace_settings(settings={"trace_level": ["TIMESTAMPS", "TENSORS"]}) == expected(protocol, both)
    assert tclient.get_trace_settings(model_name="simple") == expected(protocol, both)
    with expect_triton_error(protocol, "INVALID_ARG", "Request for unknown model : does-not-exist"):
        tclient.update_trace_settings(model_name="does-not-exist", settings={"trace_rate": "5"})
    with expect_triton_error(protocol, "INVALID_ARG", "Expect only one trace level 'OFF' is specified"):
        tclient.update_trace_settings(settings={"trace_level": ["OFF", "TIMESTAMPS"]})
    with expect_triton_error(protocol, "INVALID_ARG", "Unable to parse 'trace_rate', got: fast"):
        tclient.update_trace_settings(settings={"trace_rate": "fast"})
    with expect_triton_error(protocol, "INVALID_ARG", "Unable to parse 'trace_count'. Expecting value >= -1"):
        tclient.update_trace_settings(settings={"trace_count": "-5"})


@pytest.mark.extension("trace")
def test_trace_clear_settings(protocol, tclient):
    # Model 'simple' specifies trace_rate and log_frequency; the global one level, count and rate.
    tclient.update_trace_settings(model_name="simple", settings={"trace_rate": "12", "log_frequency": "34"})
    tclient.update_trace_settings(settings={"trace_rate": "56", "trace_count": "78", "trace_level": ["OFF"]})
    global_settings = {**INITIAL, "trace_level": ["OFF"]}
    first_model = {**global_settings, "trace_rate": "12", "log_frequency": "34"}
    second_model = {**global_settings, "log_frequency": "34"}
    assert tclient.update_trace_settings(settings={"trace_rate": None, "trace_count": None}) == expected(protocol, global_settings)
    assert tclient.get_trace_settings(model_name="simple") == expected(protocol, first_model)
    assert tclient.update_trace_settings(
        model_name="simple", settings={"trace_rate": None, "trace_level": None}
    ) == expected(protocol, second_model)
    assert tclient.get_trace_settings() == expected(protocol, global_settings)


@pytest.mark.extension("trace")
def test_trace_settings_as_json(protocol, tclient):
    if protocol == "http":
        pytest.skip("as_json is the gRPC client's option")
    got = tclient.get_trace_settings(as_json=True)
    assert got == {"settings": {k: {"value": v if isinstance(v, list) else [v]} for k, v in INITIAL.items()}}


@pytest.mark.extension("logging")
def test_log_get_settings(protocol, tclient):
    assert tclient.get_log_settings() == expected_log(protocol, LOG_DEFAULTS)


@pytest.mark.extension("logging")
def test_log_update_settings(protocol, tclient):
    changed = {**LOG_DEFAULTS, "log_info": False, "log_verbose_level": 1, "log_format": "ISO8601"}
    got = tclient.update_log_settings(settings={"log_info": False, "log_verbose_level": 1, "log_format": "ISO8601"})
    assert got == expected_log(protocol, changed)
    assert tclient.get_log_settings() == expected_log(protocol, changed)
    with expect_triton_error(protocol, "UNSUPPORTED", "log file location can not be updated through network protocol"):
        tclient.update_log_settings(settings={"log_file": "/tmp/serval-elsewhere.log"})
    with expect_triton_error(protocol, "INVALID_ARG", "invalid argument for log_format, got: json"):
        tclient.update_log_settings(settings={"log_format": "json"})
    assert tclient.get_log_settings() == expected_log(protocol, changed)
    # Serval's structured lines are a third value (tritonserver has only default and ISO8601).
    logfmt = {**changed, "log_format": "logfmt"}
    assert tclient.update_log_settings(settings={"log_format": "logfmt"}) == expected_log(protocol, logfmt)
    assert tclient.get_log_settings() == expected_log(protocol, logfmt)


@pytest.mark.extension("logging")
def test_log_settings_as_json(protocol, tclient):
    if protocol == "http":
        pytest.skip("as_json is the gRPC client's option")
    got = tclient.get_log_settings(as_json=True)["settings"]
    assert got["log_info"] == {"bool_param": True}
    assert got["log_format"] == {"string_param": "default"}
    assert got["log_file"] == {"string_param": ""}
