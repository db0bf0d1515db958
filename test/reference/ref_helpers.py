"""Raw clients for side-by-side runs: what a client sees, byte for byte, from either server."""

from __future__ import annotations

import http.client
import json
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional

import grpc
import numpy as np
from google.protobuf import json_format
from tritonclient.grpc import service_pb2

_POOL = ThreadPoolExecutor(4)

STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"


def both(fn: Callable, triton, serval, *args, **kwargs):
    """fn(server, ...) against both servers at once; returns (triton's, serval's)."""
    ft = _POOL.submit(fn, triton, *args, **kwargs)
    fs = _POOL.submit(fn, serval, *args, **kwargs)
    return ft.result(), fs.result()


# ---------------------------------------------------------------------------
# gRPC
# ---------------------------------------------------------------------------

_DTYPES = {np.int32: "INT32", np.uint32: "UINT32", np.float32: "FP32", np.bool_: "BOOL", np.object_: "BYTES"}


def infer_request(model: str, inputs: dict, request_id: str = "", empty_final=None, outputs=(), **params):
    """A ModelInferRequest with every input as raw contents (BYTES as length-prefixed elements)."""
    req = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    for name, array in inputs.items():
        req.inputs.add(name=name, datatype=_DTYPES[array.dtype.type], shape=list(array.shape))
        if array.dtype == np.object_:
            raw = b"".join(len(v).to_bytes(4, "little") + v for v in array.reshape(-1))
        else:
            raw = array.tobytes()
        req.raw_input_contents.append(raw)
    for name in outputs:
        req.outputs.add(name=name)
    if empty_final is not None:
        req.parameters["triton_enable_empty_final_response"].bool_param = empty_final
    for key, value in params.items():
        if isinstance(value, bool):
            req.parameters[key].bool_param = value
        elif isinstance(value, int):
            req.parameters[key].int64_param = value
        else:
            req.parameters[key].string_param = value
    return req


def repeat_inputs(values, delays=None, wait=0) -> dict:
    return {
        "IN": np.array(values, dtype=np.int32),
        "DELAY": np.array(delays if delays is not None else [0] * len(values), dtype=np.uint32),
        "WAIT": np.array([wait], dtype=np.uint32),
    }


def mode_inputs(mode: str, n=None) -> dict:
    inputs = {"MODE": np.array([mode.encode()], dtype=np.object_)}
    if n is not None:
        inputs["N"] = np.array([n], dtype=np.int32)
    return inputs


def is_final(msg: service_pb2.ModelStreamInferResponse) -> bool:
    p = msg.infer_response.parameters.get("triton_final_response")
    return bool(p is not None and p.bool_param)


@dataclass
class StreamResult:
    wire: list = field(default_factory=list)  # serialized ModelStreamInferResponse, as received
    status: Optional[str] = None  # the call's end, when it ended ("OK", "CANCELLED", ...)

    @property
    def messages(self):
        return [service_pb2.ModelStreamInferResponse.FromString(w) for w in self.wire]


def stream(server, requests, finals: Optional[int] = None, quiet=0.5, first=1.5, after=0.2, gap=0.0,
           timeout=15.0) -> StreamResult:
    """Sends requests (gap s apart) on one ModelStreamInfer call and keeps every raw message
    until `finals` messages carried triton_final_response (then `after` s more, for strays);
    without `finals`, until nothing came for `quiet` s (`first` s before the first message).
    The call is then cancelled."""
    channel = grpc.insecure_channel(server.grpc)
    outgoing: queue.Queue = queue.Queue()
    call = channel.stream_stream(STREAM_METHOD, request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=None)(iter(outgoing.get, None))
    got: queue.Queue = queue.Queue()
    result = StreamResult()

    def reader():
        try:
            for raw in call:
                got.put(raw)
            result.status = "OK"
        except grpc.RpcError as e:
            result.status = e.code().name
        got.put(None)

    threading.Thread(target=reader, daemon=True).start()
    for i, r in enumerate(requests):
        if i and gap:
            time.sleep(gap)
        outgoing.put(r)
    deadline = time.monotonic() + timeout
    until = deadline if finals else time.monotonic() + first
    seen = 0
    while True:
        wait = min(deadline, until) - time.monotonic()
        try:
            raw = got.get(timeout=wait) if wait > 0 else None
        except queue.Empty:
            raw = None
        if raw is None:
            break
        result.wire.append(raw)
        seen += is_final(service_pb2.ModelStreamInferResponse.FromString(raw))
        if not finals:
            until = time.monotonic() + quiet
        elif seen >= finals:
            until = time.monotonic() + after
    outgoing.put(None)
    call.cancel()
    channel.close()
    return result


def unary_infer(server, request) -> tuple:
    """ModelInfer: (status code name, details, response dict or None)."""
    with grpc.insecure_channel(server.grpc) as channel:
        fn = channel.unary_unary(INFER_METHOD, request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=service_pb2.ModelInferResponse.FromString)
        try:
            resp = fn(request, timeout=20)
            return "OK", "", json_format.MessageToDict(resp, preserving_proto_field_name=True)
        except grpc.RpcError as e:
            return e.code().name, e.details(), None


# ---------------------------------------------------------------------------
# HTTP, read off the socket
# ---------------------------------------------------------------------------


@dataclass
class RawHttp:
    status_line: str
    headers: list  # [(lower-case name, value)] in the order sent
    chunks: Optional[list]  # chunk payloads when chunked (the terminating empty one left out)
    body: bytes  # the body as received on the wire (chunk framing included)

    def header(self, name: str) -> Optional[str]:
        return next((v for k, v in self.headers if k == name), None)

    @property
    def payload(self) -> bytes:
        return b"".join(self.chunks) if self.chunks is not None else self.body


def _frame(chunks) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


FRAMING = ("content-type", "content-length", "transfer-encoding")


def http_view(r: RawHttp, repo=None) -> dict:
    """Status, the framing headers (sorted) and the body as on the wire; with `repo`, its path
    is taken out of the body first (chunk sizes and Content-Length follow)."""
    if r.chunks is not None:
        assert r.body == _frame(r.chunks), f"chunk framing not canonical: {r.body[:200]!r}"
    body = r.body
    if repo is not None:
        strip = f"{repo}/".encode()
        if r.chunks is not None:
            body = _frame([c.replace(strip, b"") for c in r.chunks])
        else:
            body = body.replace(strip, b"")
    headers = sorted((k, str(len(body)) if k == "content-length" else v) for k, v in r.headers if k in FRAMING)
    return {"status": r.status_line, "headers": headers, "body": body}


def http_raw(server, method: str, path: str, body=None, headers=None, timeout=20.0) -> RawHttp:
    host, port = server.http.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=headers or {})
        f = conn.sock.makefile("rb")
        status_line = f.readline().decode("latin-1").rstrip("\r\n")
        hdrs = []
        while True:
            line = f.readline().decode("latin-1").rstrip("\r\n")
            if not line:
                break
            k, _, v = line.partition(":")
            hdrs.append((k.strip().lower(), v.strip()))
        names = dict(hdrs)
        raw, chunks = b"", None
        if "chunked" in names.get("transfer-encoding", ""):
            chunks = []
            while True:
                size_line = f.readline()
                raw += size_line
                size = int(size_line.split(b";")[0], 16)
                data = f.read(size + 2)
                raw += data
                if size == 0:
                    break
                chunks.append(data[:-2])
        elif "content-length" in names:
            raw = f.read(int(names["content-length"]))
        return RawHttp(status_line, hdrs, chunks, raw)
    finally:
        conn.close()


def stats(server, model: str) -> dict:
    r = http_raw(server, "GET", f"/v2/models/{model}/stats")
    return json.loads(r.payload)


# ---------------------------------------------------------------------------
# Normalisation of volatile values
# ---------------------------------------------------------------------------

_NS_KEYS = {"ns", "last_inference"}


def strip_volatile(value):
    """Statistics JSON with every duration / timestamp replaced by 0 (keys and counts kept)."""
    if isinstance(value, dict):
        return {k: (0 if k in _NS_KEYS else strip_volatile(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_volatile(v) for v in value]
    return value

