"""Serval's `triton_python_backend_utils`: the module a Triton Python model imports as
`import triton_python_backend_utils as pb_utils`.

It offers the API of Triton's Python backend (Tensor, InferenceRequest / InferenceResponse,
TritonError, TritonModelException, the config helpers, ModelConfig for auto_complete_config, the
Logger, BLS through InferenceRequest.exec / async_exec) over Serval's stub
(serval_python_stub.py), which sets `_stub` when it runs a model.
"""

import json
import os
import struct
import sys
import threading

import numpy as np

# Request flags, response flags and memory kinds, with Triton's values.
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
TRITONSERVER_MEMORY_CPU = 0
TRITONSERVER_MEMORY_CPU_PINNED = 1
TRITONSERVER_MEMORY_GPU = 2

TRITON_STRING_TO_NUMPY = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

# Wire datatype names <-> numpy dtypes (BYTES is an object array of `bytes`).
_DATATYPE_TO_NUMPY = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(np.object_),
}
# TRITONSERVER_DataType numbers, as Triton's triton_to_numpy_type takes them.
_TYPE_NUMBERS = ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"]

_stub = None  # set by serval_python_stub.py


def _signature_error(what, signature, args):
    """The TypeError Triton's pb_utils (pybind11) raises for arguments of the wrong type."""
    shown = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"{what}: incompatible arguments. The following argument types are supported: {signature}; invoked with: {shown}")


def _as_str(value):
    """A str argument; bytes (numpy's too) are taken as UTF-8, as pybind11's str does. None when neither."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


# The datatype of each exact numpy dtype, looked up first: every output tensor asks.
_NAME_OF_DTYPE = {d: name for name, d in _DATATYPE_TO_NUMPY.items()}


def _datatype_of(dtype):
    """The wire datatype name of a numpy dtype, or None."""
    name = _NAME_OF_DTYPE.get(dtype)
    if name is not None:
        return name
    dtype = np.dtype(dtype)
    if dtype == np.object_ or dtype.type == np.bytes_:
        return "BYTES"
    for name, d in _DATATYPE_TO_NUMPY.items():
        if d == dtype:
            return name
    return None


def serialize_byte_tensor(input_tensor):
    """An object (or bytes_) array as Triton's BYTES encoding: each element in C order as a
    4-byte little-endian length followed by its bytes. `str` elements are UTF-8 encoded, `bytes`
    kept as they are, anything else through str(). Returns a uint8 array."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        raise TritonModelException("cannot serialize bytes tensor: invalid datatype")
    parts = []
    for item in input_tensor.reshape(-1).tolist():
        if isinstance(item, (bytes, bytearray, memoryview)):
            b = bytes(item)
        elif isinstance(item, str):
            b = item.encode("utf-8")
        else:
            b = str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(b)))
        parts.append(b)
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor):
    """Triton's BYTES encoding back into a 1-D object array of `bytes`."""
    buf = memoryview(encoded_tensor).cast("B") if not isinstance(encoded_tensor, (bytes, bytearray)) else encoded_tensor
    out = []
    offset = 0
    end = len(buf)
    while offset < end:
        if offset + 4 > end:
            raise TritonModelException("malformed BYTES tensor: a length prefix is cut short")
        (n,) = struct.unpack_from("<I", buf, offset)
        offset += 4
        if offset + n > end:
            raise TritonModelException("malformed BYTES tensor: an element runs past the end of the data")
        out.append(bytes(buf[offset : offset + n]))
        offset += n
    arr = np.empty(len(out), dtype=np.object_)
    arr[:] = out
    return arr


def triton_to_numpy_type(data_type):
    """numpy type of a TRITONSERVER_DataType number."""
    if 0 < data_type < len(_TYPE_NUMBERS):
        return _DATATYPE_TO_NUMPY[_TYPE_NUMBERS[data_type]].type
    return None


def numpy_to_triton_type(data_type):
    """TRITONSERVER_DataType number of a numpy type."""
    name = _datatype_of(data_type)
    return _TYPE_NUMBERS.index(name) if name else None


def triton_string_to_numpy(triton_type_string):
    """numpy type of a config data_type such as "TYPE_FP32"."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def get_input_tensor_by_name(inference_request, name):
    """The request's input Tensor called `name`, or None."""
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    """The response's output Tensor called `name`, or None."""
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config, name):
    """The `input` entry of a model config dict called `name`, or None."""
    for t in model_config.get("input", []):
        if t["name"] == name:
            return t
    return None


def get_output_config_by_name(model_config, name):
    """The `output` entry of a model config dict called `name`, or None."""
    for t in model_config.get("output", []):
        if t["name"] == name:
            return t
    return None


def using_decoupled_model_transaction_policy(model_config):
    """Whether the config makes the model decoupled."""
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class TritonError:
    """An error of one response (InferenceResponse(error=...)), or of a BLS response."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message, code=INTERNAL):
        text = _as_str(message)
        if text is None or isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 7:
            raise _signature_error("TritonError()", "(message: str, code: TritonError code = TritonError.INTERNAL)", (message, code))
        self._msg = text
        self._code = code

    def __str__(self):
        return self._msg

    def message(self):
        return self._msg

    def code(self):
        return self._code


# Serval's error code names, in TritonError's order.
_CODE_NAMES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED"]


class TritonModelException(Exception):
    """Raised by a model (or by this module) to fail the requests it is executing."""

    def __init__(self, msg):
        super().__init__(msg)
        self._msg = msg

    def message(self):
        return self._msg


class Tensor:
    """A named tensor over a numpy array (inputs, outputs, BLS tensors)."""

    def __init__(self, name, numpy_array, triton_dtype=None):
        given = name
        name = _as_str(name)
        if name is None or not isinstance(numpy_array, np.ndarray):
            raise _signature_error("Tensor()", "(name: str, numpy_array: numpy.ndarray)", (given, numpy_array))
        if numpy_array.dtype.type == np.str_ or numpy_array.dtype == np.void:
            raise TritonModelException("Tensor dtype used for numpy_array is not support by Python backend. Please use np.object_ instead.")
        if triton_dtype is not None:
            wanted = triton_to_numpy_type(triton_dtype)
            if wanted is not None and numpy_array.dtype != wanted and wanted is not np.object_:
                numpy_array = numpy_array.view(wanted)
            self._datatype = _TYPE_NUMBERS[triton_dtype]
        else:
            self._datatype = _datatype_of(numpy_array.dtype)
            if self._datatype is None:
                raise TritonModelException(f"Tensor '{name}': numpy dtype {numpy_array.dtype} has no Triton datatype")
        self._name = name
        self._array = numpy_array

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array

    def triton_dtype(self):
        return _TYPE_NUMBERS.index(self._datatype)

    def shape(self):
        return list(self._array.shape)

    def is_cpu(self):
        return True

    def to_dlpack(self):
        if self._datatype == "BYTES":
            raise TritonModelException("DLPack does not support BYTES tensors")
        return self._array.__dlpack__()

    @staticmethod
    def from_dlpack(name, dlpack):
        return Tensor(name, np.from_dlpack(dlpack))

    def __repr__(self):
        return f"Tensor(name={self._name!r}, datatype={self._datatype}, shape={list(self._array.shape)})"


class PreferredMemory:
    """Accepted for BLS requests; Serval keeps every tensor in CPU memory."""

    def __init__(self, preferred_memory_type, preferred_device_id=0):
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceTrace:
    """A request's trace as its model sees it (request.trace()). A BLS InferenceRequest given it as
    `trace=` is traced as a child of that request's trace when the request was sampled; otherwise
    it changes nothing, as in Triton."""

    def __init__(self, key=None):
        self._key = key  # Serval's key for the sampled request's trace; None when not sampled

    def get_context(self):
        """The trace's OpenTelemetry context: None, as Triton 2.51 answers in its `triton` trace mode."""
        return None


class InferenceResponse:
    """The answer to one request: output tensors, or an error."""

    def __init__(self, output_tensors=None, error=None, parameters=None):
        if output_tensors is None:
            output_tensors = []
        # Any sequence of Tensors, as Triton's List[Tensor] argument takes it; an error a TritonError.
        if (
            not isinstance(output_tensors, (list, tuple))
            or not all(isinstance(t, Tensor) for t in output_tensors)
            or not (error is None or isinstance(error, TritonError))
        ):
            raise _signature_error(
                "InferenceResponse()",
                "(output_tensors: List[Tensor] = [], error: TritonError = None)",
                (output_tensors, error),
            )
        self._outputs = list(output_tensors)
        self._error = error
        self._parameters = parameters

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        return json.dumps(self._parameters if self._parameters is not None else {}, separators=(",", ":"))


# Request parameters the server consumes before the model sees the request. binary_data_output is
# not one: Triton's HTTP front-end takes it out, but over gRPC it reaches the model (as in 2.51).
_SERVER_PARAMETERS = ("priority",)


class InferenceRequest:
    """A request the model executes (built by the stub), or one it makes itself (BLS):
    `InferenceRequest(model_name=..., requested_output_names=[...], inputs=[...]).exec()`."""

    def __init__(
        self,
        model_name=None,
        requested_output_names=None,
        inputs=None,
        request_id="",
        correlation_id=0,
        model_version=-1,
        flags=0,
        timeout=0,
        preferred_memory=None,
        trace=None,
        parameters=None,
    ):
        # Triton's InferenceRequest requires these three; bytes are a str to it (a numpy bytes
        # model_name too). Serval's stub builds requests it runs with _ServalRequest instead.
        name = _as_str(model_name)
        names = None
        if isinstance(requested_output_names, (list, tuple)):
            names = [_as_str(n) for n in requested_output_names]
        if (
            name is None
            or not isinstance(inputs, (list, tuple))
            or not all(isinstance(t, Tensor) for t in inputs)
            or names is None
            or any(n is None for n in names)
            or (trace is not None and not isinstance(trace, InferenceTrace))
        ):
            raise _signature_error(
                "InferenceRequest()",
                "(request_id: str = '', correlation_id: int | str = 0, inputs: List[Tensor], requested_output_names: List[str], "
                "model_name: str, model_version: int = -1, flags: int = 0, timeout: int = 0, preferred_memory: PreferredMemory = ..., "
                "trace: InferenceTrace = ..., parameters: dict | str = None)",
                (model_name, inputs, requested_output_names),
            )
        self._model_name = name
        self._requested_output_names = names
        self._inputs = list(inputs)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._trace = trace if trace is not None else InferenceTrace()
        if isinstance(parameters, str):
            parameters = json.loads(parameters)
        if parameters is not None and not isinstance(parameters, dict):
            raise TritonModelException("InferenceRequest parameters must be a dict of str to bool, int or str")
        for v in (parameters or {}).values():
            if not isinstance(v, (bool, int, str)):
                raise TritonModelException(f"Expect parameters values to have type bool/int/str, found type {type(v)}")
        self._parameters = parameters or {}
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    @classmethod
    def _received(cls, model_name, model_version, request_id, inputs, requested_output_names, parameters):
        """A request the server hands to execute(): built without the argument checks. The
        parameters the server itself consumes (sequence fields, priority, timeout) are the
        request's fields, not its parameters(), as in Triton."""
        req = cls.__new__(cls)
        params = dict(parameters)
        corr = params.pop("sequence_id", 0)
        start = params.pop("sequence_start", False)
        end = params.pop("sequence_end", False)
        timeout = params.pop("timeout", 0)
        for key in _SERVER_PARAMETERS:
            params.pop(key, None)
        req._model_name = model_name
        req._model_version = model_version
        req._request_id = request_id
        req._inputs = inputs
        req._requested_output_names = requested_output_names
        req._correlation_id = corr
        req._flags = (TRITONSERVER_REQUEST_FLAG_SEQUENCE_START if start else 0) | (TRITONSERVER_REQUEST_FLAG_SEQUENCE_END if end else 0)
        req._timeout = timeout if isinstance(timeout, int) else 0
        req._parameters = params
        req._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        req._trace = InferenceTrace()
        return req

    def inputs(self):
        return self._inputs

    def request_id(self):
        return self._request_id

    def correlation_id(self):
        return self._correlation_id

    def model_name(self):
        return self._model_name

    def model_version(self):
        return self._model_version

    def flags(self):
        return self._flags

    def timeout(self):
        return self._timeout

    def requested_output_names(self):
        return self._requested_output_names

    def parameters(self):
        """The request's parameters as compact JSON, as Triton gives them (json.loads it)."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def is_cancelled(self):
        """Whether the client cancelled this request (False for a request the model made)."""
        if _stub is None or getattr(self, "_ck", None) is None:
            return False
        return _stub.is_cancelled(self)

    def trace(self):
        """The request's trace: pass it as InferenceRequest(trace=...) to trace a BLS call under it."""
        return self._trace

    def set_release_flags(self, flags):
        """RESCHEDULE: when execute() returns, the request runs again as the next step of its
        iterative sequence instead of being answered (a non-decoupled model returns None for it)."""
        if isinstance(flags, bool) or not isinstance(flags, (int, np.integer)):
            raise _signature_error("set_release_flags()", "(flags: int)", (flags,))
        # Any other value makes 2.51 abort: refused here, with the two that mean something.
        if flags not in (TRITONSERVER_REQUEST_RELEASE_ALL, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE):
            raise TritonModelException(
                f"Unsupported request release flags: {int(flags)}; use pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL (1) "
                "or pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE (2)"
            )
        self._release_flags = int(flags)

    def get_response_sender(self):
        """The sender of this request's responses (a decoupled model's; the same one each call)."""
        sender = getattr(self, "_sender", None)
        if sender is None:
            if _stub is None:
                raise TritonModelException("a response sender exists only for a request that Serval runs")
            sender = self._sender = InferenceResponseSender(self)
        return sender

    def exec(self, decoupled=False):
        """Runs this request on the named model inside Serval and waits for the response; with
        decoupled=True, an iterator of its responses as they come (the last one final, maybe empty)."""
        if _stub is None:
            raise TritonModelException("BLS requests can only be made by a model that Serval runs")
        if decoupled:
            return _stub.infer_stream(self)
        return _stub.infer(self)

    async def async_exec(self, decoupled=False):
        """Like exec(), without blocking the event loop of an `async def execute`."""
        if _stub is None:
            raise TritonModelException("BLS requests can only be made by a model that Serval runs")
        if decoupled:
            return await _stub.infer_stream(self).first()
        return await _stub.infer_async(self)


class InferenceResponseSender:
    """Sends a decoupled model's responses to one request, from any thread, any time, until one
    carries TRITONSERVER_RESPONSE_COMPLETE_FINAL."""

    def __init__(self, request):
        self._request = request
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response=None, flags=0):
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException(f"Unsupported response flags: {flags}")
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException(f"send() takes an InferenceResponse, not {type(response).__name__}")
        if response is None and flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            raise TritonModelException("Inference Response object is needed when the response flags are not final.")
        final = flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL
        with self._lock:
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if getattr(self._request, "_rk", None) is None:
                # A model that is not decoupled: one response, which the stub answers with when
                # execute returns (None, or its list, where the sent one wins).
                if response is not None:
                    if getattr(self._request, "_sent", None) is not None:
                        raise TritonModelException("Unable to send response. Non-decoupled model cannot send more than one response.")
                    self._request._sent = response
                self._closed = final
                return
            self._closed = final
            _stub.send_response(self._request, response, final)

    def is_cancelled(self):
        return self._request.is_cancelled()


def is_model_ready(model_name, model_version=""):
    raise TritonModelException("the model loading API (is_model_ready) is not supported by Serval")


def load_model(model_name, config="", files=None):
    raise TritonModelException("the model loading API (load_model) is not supported by Serval")


def unload_model(model_name, unload_dependents=False):
    raise TritonModelException("the model loading API (unload_model) is not supported by Serval")


def _caller_location():
    """`<file>:<line>` of the model code that called the Logger (the file's base name), which Triton
    prints where its own lines have their C++ source location."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return None
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class Logger:
    """Log lines in the server's log, filtered by its log settings."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3

    @staticmethod
    def log(message, level=0):
        names = ("INFO", "WARNING", "ERROR", "VERBOSE")
        if _as_str(message) is None or isinstance(level, bool) or level not in (0, 1, 2, 3):
            raise _signature_error("log()", "(message: str, level: Logger.INFO | WARNING | ERROR | VERBOSE = Logger.INFO)", (message, level))
        name = names[level]
        if _stub is not None:
            _stub.log(name, str(message), _caller_location())
        else:
            print(f"{name}: {message}", flush=True)

    @staticmethod
    def log_info(message):
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message):
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message):
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message):
        Logger.log(message, Logger.VERBOSE)


class MetricFamily:
    """A custom metric family, exported on the server's /metrics as the model defines it (name,
    HELP text, TYPE; its metrics' labels as given). Families are the server's: another model may
    define the same name with the same kind."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2
    _KINDS = ("COUNTER", "GAUGE", "HISTOGRAM")

    def __init__(self, name, description, kind):
        if _as_str(name) is None or _as_str(description) is None or isinstance(kind, bool) or kind not in (0, 1, 2):
            raise _signature_error(
                "MetricFamily()", "(name: str, description: str, kind: MetricFamily.COUNTER | GAUGE | HISTOGRAM)", (name, description, kind)
            )
        self.name = _as_str(name)
        self.description = _as_str(description)
        self.kind = kind
        _metric_call({"op": "family", "name": self.name, "help": self.description, "kind": self._KINDS[kind]}, "Error when creating MetricFamily")

    def Metric(self, labels=None, buckets=None):  # noqa: N802 (Triton's name)
        return Metric(self, labels, buckets)


def _metric_call(msg, what):
    """A metric operation the server answers (None outside a server); its refusal raised as Triton words it."""
    if _stub is None:
        return None
    reply = _stub.metric_call(msg)
    if "err" in reply:
        raise TritonModelException(f"{what}: Failed to process the request for model '{_stub.instance_name}', message: {reply['err']}")
    return reply


def _metric_refused(verb, kind, operation):
    name = "TRITONSERVER_METRIC_KIND_" + MetricFamily._KINDS[kind]
    raise TritonModelException(
        f"Failed to {verb} metric value: Failed to process the request for model "
        f"'{_stub.instance_name if _stub is not None else ''}', message: {name} does not support {operation}"
    )


class Metric:
    """One labelled metric of a family; its value lives in the server."""

    def __init__(self, family, labels=None, buckets=None):
        labels = {} if labels is None else labels
        if not isinstance(labels, dict):
            raise _signature_error("Metric()", "(labels: Dict[str, str] = {}, buckets: List[float] = None)", (labels, buckets))
        for k, v in labels.items():
            if _as_str(k) is None or _as_str(v) is None:
                raise TritonModelException(f"Error when creating Metric: label '{k}' must have a string value, not {type(v).__name__}")
        if family.kind == MetricFamily.HISTOGRAM and buckets is None:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        if family.kind != MetricFamily.HISTOGRAM and buckets is not None:
            raise TritonModelException("Failed to create metric. Unexpected buckets found.")
        if buckets is not None:
            buckets = [float(b) for b in buckets]
        self._family = family
        self._labels = {_as_str(k): _as_str(v) for k, v in labels.items()}
        self._value = 0.0
        reply = _metric_call(
            {"op": "metric", "family": family.name, "labels": self._labels, "buckets": buckets}, "Error when creating Metric"
        )
        self._key = reply["key"] if reply else None

    def _update(self, op, value):
        if _stub is not None:
            _stub.metric_update(self._key, op, float(value))

    def increment(self, value):
        kind = self._family.kind
        if kind == MetricFamily.HISTOGRAM:
            _metric_refused("increment", kind, "Increment")
        if kind == MetricFamily.COUNTER and value < 0:
            raise TritonModelException(
                "Failed to increment metric value: Failed to process the request for model "
                f"'{_stub.instance_name if _stub is not None else ''}', message: "
                "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values."
            )
        self._value += value
        self._update("increment", value)

    def set(self, value):
        if self._family.kind != MetricFamily.GAUGE:
            _metric_refused("set", self._family.kind, "Set")
        self._value = value
        self._update("set", value)

    def observe(self, value):
        if self._family.kind != MetricFamily.HISTOGRAM:
            _metric_refused("observe", self._family.kind, "Observe")
        self._update("observe", value)

    def value(self):
        if self._family.kind == MetricFamily.HISTOGRAM:
            _metric_refused("get", self._family.kind, "Value")
        reply = _metric_call({"op": "value", "key": self._key}, "Failed to get metric value") if self._key is not None else None
        return float(reply["value"]) if reply else float(self._value)


class ModelConfig:
    """The model config as auto_complete_config(auto_complete_model_config) sees and changes it."""

    def __init__(self, model_config):
        self._config = json.loads(model_config) if isinstance(model_config, str) else model_config
        self._config.setdefault("input", [])
        self._config.setdefault("output", [])
        self._config.setdefault("max_batch_size", 0)

    def as_dict(self):
        return self._config

    def _name(self):
        return self._config.get("name", "")

    def set_max_batch_size(self, max_batch_size):
        current = int(self._config.get("max_batch_size", 0) or 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in auto-complete-config function for model "
                f"'{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but auto-complete-config function for model "
                    f"'{self._name()}' tries to set scheduling_choice as 'dynamic_batching'"
                )
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict):
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(f"model transaction property in auto-complete-config function for model '{self._name()}' contains property other than 'decoupled'.")
        self._config["model_transaction_policy"] = dict(transaction_policy_dict)

    def _add(self, kind, tensor):
        allowed = ("name", "data_type", "dims", "optional") if kind == "input" else ("name", "data_type", "dims", "label_filename")
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{self._name()}' is missing 'name' property.")
        for key in tensor:
            if key not in allowed:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model '{self._name()}' contains property "
                    f"other than {', '.join(repr(a) for a in allowed)}."
                )
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"{kind} '{tensor['name']}' in auto-complete-config function for model '{self._name()}' is missing '{key}' property.")
        for current in self._config[kind]:
            if current.get("name") != tensor["name"]:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            if current_type not in ("", "TYPE_INVALID") and current_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{self._name()}', configuration expects datatype {current_type} for {kind} "
                    f"'{tensor['name']}', model provides {tensor['data_type']}"
                )
            if current.get("dims") and list(current["dims"]) != list(tensor["dims"]):
                raise ValueError(
                    f"model '{self._name()}', tensor '{tensor['name']}': the model expects dims {list(tensor['dims'])} but the "
                    f"model configuration specifies dims {list(current['dims'])}"
                )
            current.update(tensor)
            return
        self._config[kind].append(dict(tensor))

    def add_input(self, input):  # noqa: A002 (Triton's name)
        self._add("input", input)

    def add_output(self, output):
        self._add("output", output)
