"""Serval's Python backend stub: one process per model instance.

Serval (src/backends/python/instance.ts) starts it as `python3 serval_python_stub.py instance`
with three file descriptors:

  3  the control channel, a socket both ways: frames of a 4-byte little-endian length and a JSON
     message. Only metadata travels here (names, datatypes, shapes, offsets, request ids).
  4  "to stub" shared memory (a file in /dev/shm): Serval writes the inputs of each execution
     and the outputs of BLS responses; the stub maps it and hands out numpy views of it.
  5  "from stub" shared memory: the stub writes the outputs of each execution and the inputs of
     its BLS requests; Serval reads them with positioned reads. The stub grows it as needed.

Messages from Serval: init, exec, bls_done, fin. From the stub: ready, init_error, fatal, done,
bls, log. `python3 serval_python_stub.py autocomplete` answers one autocomplete message instead
(TritonPythonModel.auto_complete_config).
"""

import collections
import json
import mmap
import os
import select
import signal
import struct
import sys
import threading
import time
import traceback

CONTROL_FD = 3
TO_STUB_FD = 4
FROM_STUB_FD = 5
ALIGN = 64


class Channel:
    """The control socket. Whoever waits for something reads (one reader at a time) and routes
    what it reads: BLS replies to their waiters, anything else to the command queue."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.reading = False
        self.closed = False
        self.commands = collections.deque()
        self.replies = {}
        self.futures = {}
        self.send_lock = threading.Lock()

    def send(self, msg):
        data = json.dumps(msg, separators=(",", ":")).encode("utf-8")
        frame = memoryview(struct.pack("<I", len(data)) + data)
        with self.send_lock:
            while frame:
                frame = frame[os.write(self.fd, frame) :]

    def _read_some(self):
        try:
            chunk = os.read(self.fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        self.buf += chunk
        msgs = []
        while len(self.buf) >= 4:
            (n,) = struct.unpack_from("<I", self.buf, 0)
            if len(self.buf) < 4 + n:
                break
            msgs.append(json.loads(bytes(self.buf[4 : 4 + n])))
            del self.buf[: 4 + n]
        return msgs

    def _deliver(self, msgs):
        with self.cond:
            if msgs is None:
                self.closed = True
            else:
                for m in msgs:
                    if m.get("t") == "bls_done":
                        waiter = self.futures.pop(m["id"], None)
                        if waiter is not None:
                            loop, fut = waiter
                            loop.call_soon_threadsafe(_settle, fut, m)
                        else:
                            self.replies[m["id"]] = m
                    else:
                        self.commands.append(m)
            self.reading = False
            self.cond.notify_all()

    def wait(self, ready):
        """Blocks until ready() (called under the lock) returns something other than None."""
        while True:
            with self.cond:
                while True:
                    r = ready()
                    if r is not None:
                        return r
                    if self.closed:
                        raise EOFError("Serval closed the control channel")
                    if not self.reading:
                        self.reading = True
                        break
                    self.cond.wait()
            self._deliver(self._read_some())

    def next_command(self):
        return self.wait(lambda: self.commands.popleft() if self.commands else None)

    def on_readable(self):
        """An event loop's reader callback: reads only when no one else does and data is there."""
        with self.cond:
            if self.reading:
                return
            self.reading = True
        if not select.select([self.fd], [], [], 0)[0]:
            with self.cond:
                self.reading = False
                self.cond.notify_all()
            return
        self._deliver(self._read_some())


class StubError(Exception):
    """A model broke the execute() contract: reported as its message alone (no traceback)."""


def _settle(fut, msg):
    if not fut.done():
        fut.set_result(msg)


def format_exception(e):
    """An exception as Triton's Python backend reports it: type, message, then the frames."""
    lines = [f"{type(e).__name__}: {e}", "", "At:"]
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        # The stub's own frames and importlib's say nothing about the model.
        if frame.filename != __file__ and not frame.filename.startswith("<frozen"):
            lines.append(f"  {frame.filename}({frame.lineno}): {frame.name}")
    return "\n".join(lines) + "\n"


# Import names that are not the name to pip-install.
PIP_NAMES = {"PIL": "Pillow", "cv2": "opencv-python", "sklearn": "scikit-learn", "yaml": "PyYAML", "skimage": "scikit-image"}


def missing_module(e):
    """The pip package a ModuleNotFoundError asks for, or None."""
    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.split(".")[0]
        return PIP_NAMES.get(top, top)
    return None


def load_model_module(path):
    import importlib.util

    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "TritonPythonModel"):
        raise AttributeError(f"{path} defines no class TritonPythonModel")
    return module


class Stub:
    def __init__(self, chan, np, pb):
        self.chan = chan
        self.np = np
        self.pb = pb
        self.to_map = None
        self.to_size = 0
        self.from_map = None
        self.from_size = 0
        self.from_top = 0
        self.alloc_lock = threading.Lock()
        self.bls_ids = 0
        self.in_execute = False
        self.loop = None
        self.model = None
        self.model_name = ""
        self.model_version = -1
        self.reader_loops = {}

    # -- shared memory -------------------------------------------------------------------------
    def map_to(self, size):
        if size > self.to_size:
            # Arrays over the old mapping keep it alive; the file only grows.
            self.to_map = mmap.mmap(TO_STUB_FD, size)
            self.to_size = size

    def alloc(self, n):
        """Room for n bytes in the "from stub" memory: (offset, the mapping to write them into)."""
        with self.alloc_lock:
            off = (self.from_top + ALIGN - 1) & ~(ALIGN - 1)
            end = off + n
            if end > self.from_size:
                size = max(end, self.from_size * 2)
                size = (size + 65535) & ~65535
                os.ftruncate(FROM_STUB_FD, size)
                self.from_map = mmap.mmap(FROM_STUB_FD, size)
                self.from_size = size
            self.from_top = end
            return off, self.from_map

    def write_tensor(self, tensor):
        """Writes a Tensor into the "from stub" memory: [name, datatype, shape, offset, length]."""
        np = self.np
        arr = tensor.as_numpy()
        dt = tensor._datatype
        if dt == "BYTES":
            data = memoryview(self.pb.serialize_byte_tensor(arr))
        else:
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            # (memoryview cannot cast an empty array's view)
            data = memoryview(np.ascontiguousarray(arr)).cast("B") if arr.size else memoryview(b"")
        n = data.nbytes
        off, m = self.alloc(n)
        if n:
            m[off : off + n] = data
        return [tensor.name(), dt, [int(d) for d in arr.shape], off, n]

    def read_tensor(self, spec):
        """A Tensor over the "to stub" memory from [name, datatype, shape, offset, length]."""
        np = self.np
        name, dt, shape, off, n = spec
        if dt == "BYTES":
            arr = self.pb.deserialize_bytes_tensor(memoryview(self.to_map)[off : off + n]).reshape(shape)
        else:
            dtype = self.pb._DATATYPE_TO_NUMPY[dt]
            if n == 0:
                arr = np.empty(shape, dtype=dtype)
            else:
                arr = np.frombuffer(self.to_map, dtype=dtype, count=n // dtype.itemsize, offset=off).reshape(shape)
        t = self.pb.Tensor.__new__(self.pb.Tensor)
        t._name, t._array, t._datatype = name, arr, dt
        return t

    # -- lifecycle -----------------------------------------------------------------------------
    def init(self, msg):
        self.to_map = mmap.mmap(TO_STUB_FD, msg["to_size"])
        self.to_size = msg["to_size"]
        self.from_map = mmap.mmap(FROM_STUB_FD, msg["from_size"])
        self.from_size = msg["from_size"]
        args = msg["args"]
        self.model_name = args["model_name"]
        self.model_version = int(args["model_version"])
        try:
            module = load_model_module(msg["model_path"])
            self.model = module.TritonPythonModel()
            if not callable(getattr(self.model, "execute", None)):
                raise AttributeError(f"class TritonPythonModel in {msg['model_path']} defines no execute method")
            init = getattr(self.model, "initialize", None)
            if init is not None:
                result = init(args)
                if hasattr(result, "__await__"):
                    self.run_coroutine(result)
        except Exception as e:
            self.chan.send({"t": "init_error", "msg": format_exception(e), "missing": missing_module(e)})
            return False
        self.chan.send({"t": "ready"})
        return True

    def finalize(self):
        fin = getattr(self.model, "finalize", None)
        if fin is not None:
            try:
                result = fin()
                if hasattr(result, "__await__"):
                    self.run_coroutine(result)
            except Exception as e:
                self.log("ERROR", f"finalize of model '{self.model_name}' failed: {format_exception(e)}")

    def run_coroutine(self, coro):
        import asyncio

        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(coro)

    # -- execution -----------------------------------------------------------------------------
    def execute(self, msg):
        t0 = time.perf_counter_ns()
        self.map_to(msg["size"])
        self.from_top = 0
        pb = self.pb
        try:
            requests = []
            for r in msg["reqs"]:
                params = r["params"]
                requests.append(
                    pb.InferenceRequest(
                        model_name=self.model_name,
                        requested_output_names=r["outs"],
                        inputs=[self.read_tensor(s) for s in r["ins"]],
                        request_id=r["id"],
                        correlation_id=params.get("sequence_id", 0),
                        model_version=self.model_version,
                        flags=(pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START if params.get("sequence_start") else 0)
                        | (pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END if params.get("sequence_end") else 0),
                        parameters=params,
                    )
                )
            t1 = time.perf_counter_ns()
            self.in_execute = True
            try:
                result = self.model.execute(requests)
                if hasattr(result, "__await__"):
                    result = self.run_coroutine(result)
            finally:
                self.in_execute = False
            t2 = time.perf_counter_ns()
            out_start = (self.from_top + ALIGN - 1) & ~(ALIGN - 1)
            responses = self.responses(result, requests)
            t3 = time.perf_counter_ns()
        except StubError as e:
            self.chan.send({"t": "done", "seq": msg["seq"], "fail": str(e)})
            return
        except Exception as e:
            self.chan.send({"t": "done", "seq": msg["seq"], "fail": format_exception(e)})
            return
        self.chan.send(
            {
                "t": "done",
                "seq": msg["seq"],
                "resps": responses,
                "lo": out_start,
                "hi": max(out_start, self.from_top),
                "tin": t1 - t0,
                "tinfer": t2 - t1,
                "tout": t3 - t2,
            }
        )

    def responses(self, result, requests):
        pb = self.pb
        if not isinstance(result, (list, tuple)):
            raise StubError(
                f"Expected a list in the execute return, got {type(result).__name__}; a model must return one InferenceResponse per request"
            )
        if len(result) != len(requests):
            raise StubError(
                "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
                f"InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) size is:{len(result)}"
            )
        out = []
        for resp, req in zip(result, requests):
            if not isinstance(resp, pb.InferenceResponse):
                raise StubError(f"execute returned {type(resp).__name__} where an InferenceResponse was expected")
            if resp.has_error():
                err = resp.error()
                code = err.code() if isinstance(err, pb.TritonError) else pb.TritonError.INTERNAL
                msg = err.message() if isinstance(err, pb.TritonError) else str(err)
                out.append({"err": {"msg": msg, "code": pb._CODE_NAMES[code] if 0 <= code < len(pb._CODE_NAMES) else "INTERNAL"}})
                continue
            wanted = set(req.requested_output_names())
            seen = set()
            tensors = []
            for t in resp.output_tensors():
                if not isinstance(t, pb.Tensor):
                    raise StubError(f"an output tensor is a {type(t).__name__}, not a pb_utils.Tensor")
                if (wanted and t.name() not in wanted) or t.name() in seen:
                    continue
                seen.add(t.name())
                tensors.append(self.write_tensor(t))
            out.append({"outs": tensors})
        return out

    # -- BLS -----------------------------------------------------------------------------------
    def bls_request(self, request):
        pb = self.pb
        if not self.in_execute:
            raise pb.TritonModelException("BLS requests can only be made while execute runs")
        if not request.model_name():
            raise pb.TritonModelException("a BLS InferenceRequest needs a model_name")
        for t in request.inputs():
            if not isinstance(t, pb.Tensor):
                raise pb.TritonModelException(f"BLS inputs must be pb_utils.Tensor objects, got {type(t).__name__}")
        with self.alloc_lock:
            self.bls_ids += 1
            rid = self.bls_ids
        version = request.model_version()
        return rid, {
            "t": "bls",
            "id": rid,
            "model": request.model_name(),
            "version": "" if version is None or int(version) < 0 else str(version),
            "rid": request.request_id() or "",
            "outs": list(request.requested_output_names()),
            "params": request._parameters,
            "corr": request.correlation_id(),
            "flags": request.flags(),
            "timeout": request.timeout(),
            "ins": [self.write_tensor(t) for t in request.inputs()],
        }

    def bls_response(self, reply):
        pb = self.pb
        if "err" in reply:
            e = reply["err"]
            code = pb._CODE_NAMES.index(e["code"]) if e["code"] in pb._CODE_NAMES else pb.TritonError.INTERNAL
            return pb.InferenceResponse(error=pb.TritonError(e["msg"], code))
        self.map_to(reply["size"])
        return pb.InferenceResponse(output_tensors=[self.read_tensor(s) for s in reply["outs"]])

    def infer(self, request):
        rid, msg = self.bls_request(request)
        self.chan.send(msg)
        replies = self.chan.replies
        return self.bls_response(self.chan.wait(lambda: replies.pop(rid, None)))

    async def infer_async(self, request):
        import asyncio

        loop = asyncio.get_running_loop()
        rid, msg = self.bls_request(request)
        fut = loop.create_future()
        with self.chan.cond:
            if rid in self.chan.replies:
                fut.set_result(self.chan.replies.pop(rid))
            else:
                self.chan.futures[rid] = (loop, fut)
        if self.reader_loops.get(loop, 0) == 0:
            loop.add_reader(CONTROL_FD, self.chan.on_readable)
        self.reader_loops[loop] = self.reader_loops.get(loop, 0) + 1
        try:
            self.chan.send(msg)
            reply = await fut
        finally:
            self.reader_loops[loop] -= 1
            if self.reader_loops[loop] == 0:
                del self.reader_loops[loop]
                loop.remove_reader(CONTROL_FD)
        return self.bls_response(reply)

    def log(self, level, message):
        self.chan.send({"t": "log", "level": level, "msg": message})

    def run(self):
        try:
            while True:
                msg = self.chan.next_command()
                t = msg.get("t")
                if t == "init":
                    if not self.init(msg):
                        return
                elif t == "exec":
                    self.execute(msg)
                elif t == "fin":
                    self.finalize()
                    return
        except EOFError:
            return


def autocomplete(chan, pb):
    msg = chan.next_command()
    try:
        module = load_model_module(msg["model_path"])
        cls = module.TritonPythonModel
        fn = getattr(cls, "auto_complete_config", None)
        if fn is None:
            chan.send({"t": "autocomplete_done", "config": None})
            return
        given = pb.ModelConfig(msg["config"])
        result = fn(given)
        if not isinstance(result, pb.ModelConfig):
            raise pb.TritonModelException(
                f"auto_complete_config of model '{msg['config'].get('name', '')}' must return the pb_utils.ModelConfig it was given"
            )
        chan.send({"t": "autocomplete_done", "config": result.as_dict()})
    except Exception as e:
        chan.send({"t": "init_error", "msg": format_exception(e), "missing": missing_module(e)})


def main():
    # Ctrl-C in a terminal (and a SIGTERM to the process group) reaches the stub too: Serval shuts it
    # down in order itself, and if Serval dies the stub reads end-of-file on its channel and exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    chan = Channel(CONTROL_FD)
    if sys.version_info < (3, 8):
        chan.send({"t": "fatal", "msg": f"Python {sys.version.split()[0]} is too old: the Python backend needs Python 3.8 or newer"})
        return
    try:
        import numpy as np
    except ImportError as e:
        chan.send({"t": "fatal", "msg": f"numpy cannot be imported ({e})", "missing": "numpy"})
        return
    import triton_python_backend_utils as pb

    if len(sys.argv) > 1 and sys.argv[1] == "autocomplete":
        autocomplete(chan, pb)
        return
    stub = Stub(chan, np, pb)
    pb._stub = stub
    stub.run()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Skip interpreter teardown: a model's threads must not keep a finished stub alive.
    os._exit(0)
