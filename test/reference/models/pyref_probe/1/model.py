"""Side-by-side probe of the Python backend API (no config.pbtxt: auto_complete_config declares
it). Input MODE picks one behaviour; OUT is a JSON report of what the model saw."""

import json
import os
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _attempt(fn):
    """What calling fn did: 'ok' or the exception's type and text."""
    try:
        fn()
        return "ok"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "MODE", "data_type": "TYPE_STRING", "dims": [1]})
        auto_complete_model_config.add_output({"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]})
        return auto_complete_model_config

    def initialize(self, args):
        self.args = dict(args)
        self.argv = list(sys.argv)
        self.cwd = os.getcwd()
        self.last_cancel = None
        self.finalized = None
        self.counter_family = pb_utils.MetricFamily(
            name="pyref_probe_requests", description="Requests the probe saw", kind=pb_utils.MetricFamily.COUNTER
        )
        self.gauge_family = pb_utils.MetricFamily(
            name="pyref_probe_level", description="A level the probe sets", kind=pb_utils.MetricFamily.GAUGE
        )
        self.counter = self.counter_family.Metric(labels={"mode": "metric", "model": "pyref_probe"})
        self.gauge = self.gauge_family.Metric(labels={"kind": "gauge"})
        self.histogram_family = pb_utils.MetricFamily(
            name="pyref_probe_seconds", description="Values the probe observes", kind=pb_utils.MetricFamily.HISTOGRAM
        )
        self.histogram = self.histogram_family.Metric(labels={"kind": "histogram"}, buckets=[1.0, 2.5, 10.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().reshape(-1)[0].decode()
            responses.append(self.run(mode, request))
        return responses

    def reply(self, value):
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(value).encode()], dtype=np.object_))])

    def run(self, mode, request):
        if mode == "args":
            args = dict(self.args)
            args["model_config"] = json.loads(args["model_config"])
            return self.reply({"args": args, "argv": self.argv, "cwd": self.cwd})
        if mode.startswith("error:"):
            code = getattr(pb_utils.TritonError, mode[6:])
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(message="the probe's error", code=code))
        if mode == "error_default":
            return pb_utils.InferenceResponse(error=pb_utils.TritonError("the probe's error"))
        if mode == "error_fields":
            e = pb_utils.TritonError(message="m", code=pb_utils.TritonError.NOT_FOUND)
            return self.reply({"message": e.message(), "code": int(e.code()), "code_type": type(e.code()).__name__, "str": str(e),
                               "codes": {k: int(getattr(pb_utils.TritonError, k)) for k in
                                         ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE",
                                          "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED"]}})
        if mode == "raise":
            raise pb_utils.TritonModelException("the probe raised")
        if mode == "cancel":
            deadline = time.monotonic() + 4
            seen = False
            while time.monotonic() < deadline:
                if request.is_cancelled():
                    seen = True
                    break
                time.sleep(0.05)
            self.last_cancel = seen
            if seen:
                return pb_utils.InferenceResponse(error=pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED))
            return self.reply({"cancelled": False})
        if mode == "last_cancel":
            return self.reply({"last_cancel": self.last_cancel, "now": request.is_cancelled()})
        if mode == "metric":
            self.counter.increment(2)
            self.gauge.set(7.5)
            self.gauge.increment(-1.5)
            for v in (0.5, 3, 20):
                self.histogram.observe(v)
            return self.reply({"counter": self.counter.value(), "gauge": self.gauge.value()})
        if mode == "metric_checks":
            fam = self.counter_family
            return self.reply({
                "counter_negative": _attempt(lambda: self.counter.increment(-1)),
                "counter_set": _attempt(lambda: self.counter.set(1)),
                "duplicate_family_same": _attempt(lambda: pb_utils.MetricFamily(
                    name="pyref_probe_requests", description="Requests the probe saw", kind=pb_utils.MetricFamily.COUNTER)),
                "duplicate_family_other_kind": _attempt(lambda: pb_utils.MetricFamily(
                    name="pyref_probe_requests", description="x", kind=pb_utils.MetricFamily.GAUGE)),
                "bad_kind": _attempt(lambda: pb_utils.MetricFamily(name="pyref_probe_bad", description="x", kind=5)),
                "histogram_no_buckets": _attempt(lambda: self.histogram_family.Metric(labels={"x": "y"})),
                "histogram_increment": _attempt(lambda: self.histogram.increment(1)),
                "histogram_set": _attempt(lambda: self.histogram.set(1)),
                "histogram_value": _attempt(lambda: self.histogram.value()),
                "counter_observe": _attempt(lambda: self.counter.observe(1)),
                "gauge_observe": _attempt(lambda: self.gauge.observe(1)),
                "buckets_on_counter": _attempt(lambda: fam.Metric(labels={"b": "c"}, buckets=[1.0])),
                "has_histogram": hasattr(pb_utils.MetricFamily, "HISTOGRAM"),
            })
        if mode.startswith("checks"):
            T = pb_utils.Tensor
            only = mode[7:].split(",") if mode.startswith("checks:") else None
            return self.reply({k: v() for k, v in {
                "tensor_name_int": lambda: _attempt(lambda: T(1, np.zeros(1, np.int32))),
                "tensor_list": lambda: _attempt(lambda: T("x", [1, 2])),
                "tensor_str_array": lambda: _attempt(lambda: T("x", np.array(["a"]))),
                "response_tuple": lambda: _attempt(lambda: pb_utils.InferenceResponse((T("x", np.zeros(1)),))),
                "response_not_tensors": lambda: _attempt(lambda: pb_utils.InferenceResponse([1])),
                "response_error_str": lambda: _attempt(lambda: pb_utils.InferenceResponse(error="x")),
                "request_no_args": lambda: _attempt(lambda: pb_utils.InferenceRequest()),
                "request_inputs_not_list": lambda: _attempt(lambda: pb_utils.InferenceRequest(
                    model_name="x", inputs=T("x", np.zeros(1)), requested_output_names=[])),
                "request_outputs_str": lambda: _attempt(lambda: pb_utils.InferenceRequest(
                    model_name="x", inputs=[], requested_output_names="OUT")),
                "request_name_int": lambda: _attempt(lambda: pb_utils.InferenceRequest(
                    model_name=5, inputs=[], requested_output_names=[])),
                "request_params_bad": lambda: _attempt(lambda: pb_utils.InferenceRequest(
                    model_name="x", inputs=[], requested_output_names=[], parameters={"a": [1]})),
                "error_code_bad": lambda: _attempt(lambda: pb_utils.TritonError("x", 99)),
                "error_msg_int": lambda: _attempt(lambda: pb_utils.TritonError(5)),
                "logger_level_bad": lambda: _attempt(lambda: pb_utils.Logger.log("x", 9)),
                "get_input_missing": lambda: repr(pb_utils.get_input_tensor_by_name(request, "NOPE")),
            }.items() if only is None or k in only})
        if mode == "log":
            pb_utils.Logger.log_info("pyref_probe info line")
            pb_utils.Logger.log_warn("pyref_probe warn line")
            pb_utils.Logger.log_error("pyref_probe error line")
            pb_utils.Logger.log_verbose("pyref_probe verbose line")
            pb_utils.Logger.log("pyref_probe default line")
            return self.reply({"levels": {k: int(getattr(pb_utils.Logger, k)) for k in ["INFO", "WARNING", "ERROR", "VERBOSE"]},
                               "logger_type": type(pb_utils.Logger).__name__})
        if mode == "bls_bytes":
            inputs = [pb_utils.Tensor("IN", np.array([41], dtype=np.int32))]
            out = {}
            for label, name in (("np_bytes", np.bytes_(b"add_one_int32")), ("bytes", b"add_one_int32"),
                                ("np_str", np.str_("add_one_int32"))):
                try:
                    r = pb_utils.InferenceRequest(model_name=name, inputs=inputs, requested_output_names=["OUT"]).exec()
                    out[label] = r.error().message() if r.has_error() else pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy().tolist()
                except Exception as e:  # noqa: BLE001
                    out[label] = f"{type(e).__name__}: {e}"
            return self.reply(out)
        if mode == "request_fields":
            return self.reply({"id": request.request_id(), "corr": request.correlation_id(), "flags": request.flags(),
                               "outs": sorted(request.requested_output_names()), "params": json.loads(request.parameters()),
                               "model_name": request.model_name() if hasattr(request, "model_name") else None,
                               "timeout": request.timeout() if hasattr(request, "timeout") else None})
        if mode == "exit":
            os._exit(1)
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"unknown mode {mode}"))

    def finalize(self):
        pb_utils.Logger.log_info("pyref_probe finalize")
