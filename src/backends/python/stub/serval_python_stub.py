"""Serval's Python backend stub: one process per model instance.

Serval (src/backends/python/instance.ts) starts it as `python3 serval_python_stub.py instance`
with three file descriptors:

  3  the control channel, a socket both ways: frames of an 8-byte header (two little-endian
     32-bit lengths: the JSON message's and the bytes attached after it), the JSON message, then
     the attached bytes. Mostly metadata travels here (names, datatypes, shapes, offsets, request
     ids); a decoupled model's responses and BLS traffic outside execute() carry their tensor bytes
     attached, since the shared memory below is reused by the next execution.
  4  "to stub" shared memory (a file in /dev/shm): Serval writes the inputs of each execution
     and the outputs of BLS responses; the stub maps it and hands out numpy views of it. A small
     execution's inputs come attached to `exec` instead (offsets into the attached bytes).
  5  "from stub" shared memory: the stub writes the outputs of each execution and the inputs of
     its BLS requests; Serval reads them with positioned reads. The stub grows it as needed.
     Outputs of up to INLINE_BYTES also go attached to `done`, so Serval reads nothing more.

Messages from Serval: init, exec, bls_done, cancel, fin. From the stub: ready, init_error, fatal,
done, resp (a decoupled model's response), bls, log. `python3 serval_python_stub.py autocomplete` answers one autocomplete message instead
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


def _align(n):
    """n rounded up to ALIGN: where the next tensor may start in the shared memory."""
    return (n + ALIGN - 1) & ~(ALIGN - 1)


# Outputs up to this size travel attached to `done` (one socket write, read with the message)
# rather than through a positioned read of the "from stub" file; Serval does the same for inputs.
INLINE_BYTES = 16 << 10
# One encoder and decoder for every message (json.dumps with options builds a new encoder per call).
_encode_json = json.JSONEncoder(separators=(",", ":")).encode
_decode_json = json.JSONDecoder().decode
_HEAD = struct.Struct("<II")
# After an execution Serval marked lone (its model's only request: a client at concurrency 1),
# the stub polls the control socket this long before it blocks. The next message usually comes
# within it (the answer's way to the client and the next request's way back), and a stub that
# is running when it comes skips a wake-up: tens of µs on a virtual machine, where waking an idle
# CPU is a trip through the hypervisor. It yields the CPU between polls; under load Serval does
# not mark executions lone, nor those of an instance whose next execution has lately come later
# than this (src/backends/python/cadence.ts: a large answer still on its way out, a BLS callee
# whose caller is still working), and the stub sleeps as before. Serval's SPIN_NS is this value.
SPIN_SECONDS = 400e-6


# Memory the model frees is kept for its next execution (`--backend-config=python,stub-malloc=keep`,
# the default). glibc's allocator gives the top of its heap back to the system once more than
# twice the largest block freed lies free there, so a model that builds a few arrays of a few
# hundred KB per request (decoding and normalising images, say) hands the memory back after every
# execute() and page-faults it in again on the next: a fault per 4 KB page, tens of thousands per
# second, a large share of such a model's time. Fixed thresholds keep up to KEEP_TRIM_BYTES at the
# top of the heap (blocks under KEEP_MMAP_BYTES come from the heap); once the stub has been idle
# for IDLE_TRIM_SECONDS, malloc_trim gives everything free back. The peak is the same either way:
# only when memory goes back changes. A user's own malloc settings in the environment win.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEEP_MMAP_BYTES = 32 << 20
KEEP_TRIM_BYTES = 64 << 20
IDLE_TRIM_SECONDS = 1.0
_MALLOC_ENV = ("MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_")


class MemoryKeeper:
    """Gives freed memory back (malloc_trim) once no execution has run for IDLE_TRIM_SECONDS."""

    def __init__(self, trim):
        self._trim = trim
        self.started = 0
        self.busy = False
        self._asleep = False
        self._wake = threading.Event()
        threading.Thread(target=self._watch, name="serval-memory-keeper", daemon=True).start()

    def begin(self):
        self.started += 1
        self.busy = True
        if self._asleep:
            self._asleep = False
            self._wake.set()

    def end(self):
        self.busy = False

    def _watch(self):
        seen = -1
        while True:
            time.sleep(IDLE_TRIM_SECONDS)
            if self.busy or self.started != seen:
                seen = self.started
                continue
            self._trim(0)
            # Nothing more to give back before the next execution: sleep until one begins.
            self._wake.clear()
            self._asleep = True
            if self.started == seen:
                self._wake.wait()
            self._asleep = False


def keep_freed_memory():
    """A MemoryKeeper once glibc's thresholds are set (see KEEP_TRIM_BYTES); None where Serval asked
    for the system's behaviour, the environment sets malloc's own, or the C library is not glibc."""
    if os.environ.pop("SERVAL_STUB_MALLOC", "") != "keep":
        return None
    if any(k in os.environ for k in _MALLOC_ENV) or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    trim.argtypes = [ctypes.c_size_t]
    if not (mallopt(M_MMAP_THRESHOLD, KEEP_MMAP_BYTES) and mallopt(M_TRIM_THRESHOLD, KEEP_TRIM_BYTES)):
        return None
    return MemoryKeeper(trim)


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
        # BLS streams (exec(decoupled=True)): id -> BlsStream, fed every part of the answer.
        self.streams = {}
        # Request keys of a decoupled model's requests that Serval says were cancelled.
        self.cancelled = set()
        self.send_lock = threading.Lock()
        # Poll before blocking (see SPIN_SECONDS): set by each `exec`.
        self.spin = False
        self._poller = None

    def send(self, msg, attached=()):
        """Sends msg, with `attached` (bytes-like parts, in order) after it."""
        data = _encode_json(msg).encode("utf-8")
        parts = [memoryview(p).cast("B") for p in attached if len(p)]
        size = sum(p.nbytes for p in parts)
        head = _HEAD.pack(len(data), size)
        if size <= INLINE_BYTES:
            # A small frame: joined, one plain write (the common case, every execution's `done`).
            frame = memoryview(b"".join((head, data, *parts)))
            with self.send_lock:
                n = 0
                while n < frame.nbytes:
                    n += os.write(self.fd, frame[n:])
            return
        pending = [memoryview(head), memoryview(data), *parts]
        with self.send_lock:
            while pending:
                n = os.writev(self.fd, pending)
                while pending and n >= pending[0].nbytes:
                    n -= pending[0].nbytes
                    pending.pop(0)
                if n:
                    pending[0] = pending[0][n:]

    def _read_some(self):
        if self.spin:
            self._poll_briefly()
        try:
            chunk = os.read(self.fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        self.buf += chunk
        msgs = []
        while len(self.buf) >= 8:
            n, b = _HEAD.unpack_from(self.buf, 0)
            if len(self.buf) < 8 + n + b:
                break
            m = _decode_json(self.buf[8 : 8 + n].decode("utf-8"))
            if b:
                # A bytearray: numpy arrays over it are writable, as a model may expect.
                m["bin"] = self.buf[8 + n : 8 + n + b]
            msgs.append(m)
            del self.buf[: 8 + n + b]
        return msgs

    def _poll_briefly(self):
        """Waits up to SPIN_SECONDS for the socket to be readable, yielding the CPU between polls."""
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(self.fd, select.POLLIN)
        if poller.poll(0):
            return
        deadline = time.perf_counter() + SPIN_SECONDS
        while not poller.poll(0) and time.perf_counter() < deadline:
            os.sched_yield()

    def _deliver(self, msgs):
        with self.cond:
            if msgs is None:
                self.closed = True
            else:
                for m in msgs:
                    t = m.get("t")
                    if t == "bls_done" or t == "metric_done":
                        stream = self.streams.get(m["id"])
                        if stream is not None:
                            stream.put(m)
                            continue
                        waiter = self.futures.pop(m["id"], None)
                        if waiter is not None:
                            loop, fut = waiter
                            loop.call_soon_threadsafe(_settle, fut, m)
                        else:
                            self.replies[m["id"]] = m
                    elif t == "cancel":
                        # Marked at once, whoever reads: a model's is_cancelled() must see it mid-execute.
                        self.cancelled.add(m["rk"])
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

    def poll(self):
        """Takes in whatever has arrived, without waiting (when no one else is reading)."""
        self.on_readable()

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


class StubCheckError(StubError):
    """One that Triton's stub itself finds, so its text says "for model '<instance>'"."""


class BlsStream:
    """The responses of one exec(decoupled=True), in order: an iterator, and an async one. The
    last response carries the final flag; it is yielded too, empty when the final flag came alone
    (as in Triton, where a BLS caller checks for that last empty response)."""

    def __init__(self, stub, rid):
        self.stub = stub
        self.rid = rid
        self.parts = collections.deque()
        self.waiter = None  # (loop, future) of an async reader waiting for a part
        self.ended = False

    def put(self, m):
        """Called by the channel's reader, under its lock."""
        self.parts.append(m)
        if self.waiter is not None:
            loop, fut = self.waiter
            self.waiter = None
            loop.call_soon_threadsafe(_settle, fut, None)

    def _take(self, m):
        if m.get("final", True):
            self.ended = True
            with self.stub.chan.cond:
                self.stub.chan.streams.pop(self.rid, None)
        return self.stub.bls_response(m)

    def __iter__(self):
        return self

    def __next__(self):
        if self.ended:
            raise StopIteration
        parts = self.parts
        return self._take(self.stub.chan.wait(lambda: parts.popleft() if parts else None))

    def __aiter__(self):
        return self

    async def first(self):
        """Waits for the first response to arrive (async_exec returns the stream then)."""
        import asyncio

        loop = asyncio.get_running_loop()
        while True:
            with self.stub.chan.cond:
                if self.parts:
                    return self
                fut = loop.create_future()
                self.waiter = (loop, fut)
            with self.stub.reading_on(loop):
                await fut

    async def __anext__(self):
        import asyncio

        if self.ended:
            raise StopAsyncIteration
        loop = asyncio.get_running_loop()
        chan = self.stub.chan
        while True:
            with chan.cond:
                if self.parts:
                    m = self.parts.popleft()
                    break
                fut = loop.create_future()
                self.waiter = (loop, fut)
            with self.stub.reading_on(loop):
                await fut
        return self._take(m)


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
        # Where this execution's stores into the "from stub" memory must stop short of (a region
        # Serval may still be reading), and where they go on past it: see place_outputs().
        self.from_limit = None
        self.from_past = 0
        # Regions of the "from stub" memory written by executions whose `done` Serval may not have
        # read yet: (seq, start, end). Its `rd` (the last `done` it has read) lets them go.
        self.unread = []
        # The most bytes one execution has stored there, and how many this one has.
        self.region_peak = 0
        self.region_bytes = 0
        self.out_lo = None
        # Outputs of an execution sent behind another: attached to `done` (bytes-like parts).
        self.out_parts = None
        self.out_size = 0
        self.alloc_lock = threading.Lock()
        self.bls_ids = 0
        self.in_execute = False
        self.loop = None
        self.model = None
        # Set before the model is imported, so its allocations follow it too (see MemoryKeeper).
        self.memory = keep_freed_memory()
        self.model_name = ""
        self.model_version = -1
        self.reader_loops = {}
        self.decoupled = False
        self.instance_name = ""
        # Decoupled `async def execute`: coroutines run on this loop's thread, so executions overlap.
        self.bg_loop = None

    # -- shared memory -------------------------------------------------------------------------
    def map_to(self, size):
        if size > self.to_size:
            # Arrays over the old mapping keep it alive; the file only grows.
            self.to_map = mmap.mmap(TO_STUB_FD, size)
            self.to_size = size

    def alloc(self, n):
        """Room for n bytes in the "from stub" memory: (offset, the mapping to write them into)."""
        with self.alloc_lock:
            off = _align(self.from_top)
            if self.from_limit is not None and off + n > self.from_limit:
                # No room below a region Serval may still read: on past it.
                off = _align(self.from_past)
                self.from_limit = None
            end = off + n
            self.region_bytes += n
            if self.out_lo is None:
                self.out_lo = off
            if end > self.from_size:
                size = max(end, self.from_size * 2)
                size = (size + 65535) & ~65535
                os.ftruncate(FROM_STUB_FD, size)
                self.from_map = mmap.mmap(FROM_STUB_FD, size)
                self.from_size = size
            self.from_top = end
            return off, self.from_map

    def place_outputs(self, msg):
        """Where an execution's stores into the "from stub" memory begin. Serval reads an
        execution's outputs when its `done` comes, and may send the next execution before then
        (one with large inputs goes behind a running one into memory of its own): what earlier
        executions stored stays untouched until Serval says (`rd`) it has read their `done`. The
        stores go from the start when it is free, or room enough lies below what is still
        unread, else after it."""
        rd = msg.get("rd", 0)
        self.unread = [r for r in self.unread if r[0] > rd]
        self.from_limit = None
        if not self.unread:
            self.from_top = 0
        else:
            lo = min(r[1] for r in self.unread)
            hi = max(r[2] for r in self.unread)
            if lo >= self.region_peak:
                self.from_top, self.from_limit, self.from_past = 0, lo, hi
            else:
                self.from_top = hi
        self.region_bytes = 0
        return _align(self.from_top)

    def stored(self, seq, start):
        """An execution's `done` is going out: what it stored stays Serval's until its `rd` says read."""
        if self.from_top > start:
            self.unread.append((seq, start, self.from_top))
        self.region_peak = max(self.region_peak, self.region_bytes)
        self.from_limit = None

    def tensor_bytes(self, tensor):
        """A Tensor's datatype, shape and bytes (a memoryview) as they go to Serval."""
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
        return dt, [int(d) for d in arr.shape], data

    def write_tensor(self, tensor):
        """Writes a Tensor into the "from stub" memory: [name, datatype, shape, offset, length]."""
        dt, shape, data = self.tensor_bytes(tensor)
        n = data.nbytes
        if self.out_parts is not None:
            self.out_parts.append(data)
            self.out_size += n
            return [tensor.name(), dt, shape, self.out_size - n, n]
        off, m = self.alloc(n)
        if n:
            m[off : off + n] = data
        return [tensor.name(), dt, shape, off, n]

    def attach_tensors(self, tensors):
        """Tensors as bytes attached to a message: their specs (offsets into the attachment) and the parts."""
        specs, parts, at = [], [], 0
        for t in tensors:
            dt, shape, data = self.tensor_bytes(t)
            specs.append([t.name(), dt, shape, at, data.nbytes])
            parts.append(data)
            at += data.nbytes
        return specs, parts

    def read_tensor(self, spec, buf=None, copy=False):
        """A Tensor from [name, datatype, shape, offset, length] over the "to stub" memory, or over
        `buf` (bytes attached to a message). `copy`: its own memory, for a tensor that outlives the
        execution (a decoupled model's inputs: the next execution reuses the shared memory)."""
        np = self.np
        name, dt, shape, off, n = spec
        src = self.to_map if buf is None else buf
        if dt == "BYTES":
            arr = self.pb.deserialize_bytes_tensor(memoryview(src)[off : off + n]).reshape(shape)
        else:
            dtype = self.pb._DATATYPE_TO_NUMPY[dt]
            if n == 0:
                arr = np.empty(shape, dtype=dtype)
            else:
                arr = np.frombuffer(src, dtype=dtype, count=n // dtype.itemsize, offset=off).reshape(shape)
                if copy:
                    arr = arr.copy()
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
        self.instance_name = args.get("model_instance_name", self.model_name)
        self.decoupled = bool(msg.get("decoupled"))
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
    def make_request(self, r, copy=False, buf=None):
        """`buf`: the bytes attached to the `exec` message (small inputs), else the "to stub" memory."""
        pb = self.pb
        inputs = [self.read_tensor(s, buf, copy=copy) for s in r["ins"]]
        req = pb.InferenceRequest._received(self.model_name, self.model_version, r["id"], inputs, r["outs"], r["params"])
        req._rk = r.get("rk")
        # The key Serval's cancel message names: a decoupled request's rk, a non-decoupled one's ck.
        req._ck = r.get("ck", req._rk)
        if "tk" in r:
            req._trace = pb.InferenceTrace(r["tk"])
        return req

    def execute(self, msg):
        self.chan.spin = bool(msg.get("sp"))
        if self.decoupled:
            self.execute_decoupled(msg)
            return
        t0 = time.perf_counter_ns()
        t1 = None
        self.map_to(msg["size"])
        # An execution Serval sent behind another ("q") leaves the shared memory to that one's
        # outputs, which Serval may still be reading: its outputs and BLS traffic go attached.
        behind = bool(msg.get("q"))
        start = self.from_top if behind else self.place_outputs(msg)
        self.out_parts = [] if behind else None
        self.out_size = 0
        try:
            buf = msg.get("bin")
            requests = [self.make_request(r, buf=buf) for r in msg["reqs"]]
            t1 = time.perf_counter_ns()
            self.in_execute = True
            try:
                result = self.model.execute(requests)
                if hasattr(result, "__await__"):
                    result = self.run_coroutine(result)
            finally:
                self.in_execute = False
                for r in msg["reqs"]:
                    if "ck" in r:
                        self.chan.cancelled.discard(r["ck"])
            t2 = time.perf_counter_ns()
            out_start = _align(self.from_top)
            self.out_lo = None
            responses = self.responses(result, requests)
            t3 = time.perf_counter_ns()
        except StubError as e:
            by_stub = {"stub": True} if isinstance(e, StubCheckError) else {}
            if not behind:
                self.stored(msg["seq"], start)
            self.chan.send({"t": "done", "seq": msg["seq"], "fail": str(e), **by_stub, **self.ran(t0, t1)})
            return
        except Exception as e:
            # An exception the model raised: worded as Triton's stub words it (stub: True).
            if not behind:
                self.stored(msg["seq"], start)
            self.chan.send({"t": "done", "seq": msg["seq"], "fail": format_exception(e), "stub": True, **self.ran(t0, t1)})
            return
        if behind:
            parts, out_start, hi = self.out_parts, 0, self.out_size
        else:
            # The outputs begin where the first was stored (past an unread region, if it went there).
            if self.out_lo is not None:
                out_start = self.out_lo
            hi = max(out_start, self.from_top)
            self.stored(msg["seq"], start)
            # Small outputs go attached, straight from the mapping (offsets stay relative to lo).
            parts = (memoryview(self.from_map)[out_start:hi],) if 0 < hi - out_start <= INLINE_BYTES else ()
        self.out_parts = None
        self.chan.send(
            {
                "t": "done",
                "seq": msg["seq"],
                "resps": responses,
                "lo": out_start,
                "hi": hi,
                "tin": t1 - t0,
                "tinfer": t2 - t1,
                "tout": t3 - t2,
            },
            parts,
        )

    @staticmethod
    def ran(t0, t1):
        """The durations of an execute() that failed once it had been called (none before)."""
        if t1 is None:
            return {}
        return {"tin": t1 - t0, "tinfer": time.perf_counter_ns() - t1}

    def execute_decoupled(self, msg):
        """A decoupled model's execute(): its responses go out through the requests' senders, as
        the model sends them (also from other threads, after execute returned); `done` says only
        that execute() returned, or how it failed."""
        t0 = time.perf_counter_ns()
        t1 = None
        self.map_to(msg["size"])
        try:
            buf = msg.get("bin")
            requests = [self.make_request(r, copy=buf is None, buf=buf) for r in msg["reqs"]]
            t1 = time.perf_counter_ns()
            self.in_execute = True
            try:
                result = self.model.execute(requests)
            finally:
                self.in_execute = False
            if hasattr(result, "__await__"):
                self.run_in_background(result, requests)
            elif result is not None:
                raise StubError(
                    f"Python model '{self.instance_name}' is using the decoupled mode and the execute function must return None."
                )
            resched = self.rescheduled_keys(requests)
            t2 = time.perf_counter_ns()
        except StubError as e:
            # Triton's stub finds a decoupled execute's return value wrong itself (stub: True).
            self.chan.send({"t": "done", "seq": msg["seq"], "fail": str(e), "stub": True, **self.ran(t0, t1)})
            return
        except Exception as e:
            self.chan.send({"t": "done", "seq": msg["seq"], "fail": format_exception(e), "stub": True, **self.ran(t0, t1)})
            return
        done = {"t": "done", "seq": msg["seq"], "tin": t1 - t0, "tinfer": t2 - t1, "tout": 0}
        if resched:
            done["resched"] = resched
        self.chan.send(done)

    def rescheduled_keys(self, requests):
        """The keys of a decoupled execute's requests released with RESCHEDULE and still open:
        Serval runs them again (their sender stays theirs); one that sent its final flag is done."""
        keys = []
        for req in requests:
            if req._release_flags != self.pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
                continue
            sender = getattr(req, "_sender", None)
            if sender is not None and sender._closed:
                continue
            self.chan.cancelled.discard(req._rk)
            keys.append(req._rk)
        return keys

    def run_in_background(self, coro, requests):
        """A decoupled model's `async def execute`: runs on the background loop while the next
        execution starts (Triton's async execute); a failure ends the requests it left open."""
        import asyncio

        if self.bg_loop is None:
            self.bg_loop = asyncio.new_event_loop()
            threading.Thread(target=self.bg_loop.run_forever, name="serval-async-execute", daemon=True).start()
        fut = asyncio.run_coroutine_threadsafe(coro, self.bg_loop)

        def finished(f):
            e = None if f.cancelled() else f.exception()
            if e is None:
                return
            text = format_exception(e)
            self.log("ERROR", f"Failed to process the request(s) for model '{self.instance_name}', message: {text}")
            # Requests the coroutine left open end with the error, worded as one raised in execute.
            for req in requests:
                sender = req.get_response_sender()
                with sender._lock:
                    if sender._closed:
                        continue
                    sender._closed = True
                    if req._rk in self.chan.cancelled:
                        self.chan.cancelled.discard(req._rk)
                    self.chan.send({"t": "resp", "rk": req._rk, "final": True, "err": {"msg": text, "code": "INTERNAL", "raised": True}})

        fut.add_done_callback(finished)

    def send_response(self, request, response, final):
        """One response of a decoupled model's request (InferenceResponseSender.send)."""
        pb = self.pb
        msg = {"t": "resp", "rk": request._rk, "final": bool(final)}
        parts = ()
        if response is not None:
            if response.has_error():
                err = response.error()
                code = err.code() if isinstance(err, pb.TritonError) else pb.TritonError.INTERNAL
                msg["err"] = {
                    "msg": err.message() if isinstance(err, pb.TritonError) else str(err),
                    "code": pb._CODE_NAMES[code] if 0 <= code < len(pb._CODE_NAMES) else "INTERNAL",
                }
            else:
                msg["outs"], parts = self.attach_tensors(self.wanted_outputs(response, request))
            if response._parameters:
                msg["params"] = response._parameters
        if final:
            self.chan.cancelled.discard(request._rk)
        self.chan.send(msg, parts)

    def is_cancelled(self, request):
        key = getattr(request, "_ck", None)
        if key is None:
            return False
        self.chan.poll()
        return key in self.chan.cancelled

    def responses(self, result, requests):
        pb = self.pb
        sent = [getattr(r, "_sent", None) for r in requests]
        if result is None and all(x is not None for x in sent):
            # Every request answered through its response sender (a non-decoupled model may).
            result = sent
        elif any(x is not None for x in sent):
            if isinstance(result, (list, tuple)) and len(result) == len(requests):
                # Sent and returned: the sent response is the answer, as in Triton (which logs the second).
                if any(x is not None and r is not None for x, r in zip(sent, result)):
                    self.log(
                        "ERROR",
                        f"Failed to process the request(s) for model '{self.instance_name}', message: "
                        "Unable to send response. Non-decoupled model cannot send more than one response.",
                    )
                result = [x if x is not None else r for x, r in zip(sent, result)]
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
            if req._release_flags == pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
                if resp is not None:
                    # Triton's text, typo and C++ class name included.
                    kind = type(resp)
                    shown = f"c_python_backend_utils.{kind.__name__}" if kind.__module__ == pb.__name__ else kind.__qualname__
                    raise StubCheckError(
                        "Expected a None object in the execute function return list for reschduled request, "
                        f"found type '<class '{shown}'>'."
                    )
                out.append({"resched": True})  # runs again, unanswered
                continue
            if not isinstance(resp, pb.InferenceResponse):
                raise StubError(f"execute returned {type(resp).__name__} where an InferenceResponse was expected")
            if resp.has_error():
                err = resp.error()
                code = err.code() if isinstance(err, pb.TritonError) else pb.TritonError.INTERNAL
                msg = err.message() if isinstance(err, pb.TritonError) else str(err)
                out.append({"err": {"msg": msg, "code": pb._CODE_NAMES[code] if 0 <= code < len(pb._CODE_NAMES) else "INTERNAL"}})
                continue
            out.append({"outs": [self.write_tensor(t) for t in self.wanted_outputs(resp, req)]})
        return out

    def wanted_outputs(self, resp, req):
        """The response's tensors the request asked for (all when it named none), each once."""
        pb = self.pb
        wanted = set(req.requested_output_names())
        seen = set()
        tensors = []
        for t in resp.output_tensors():
            if not isinstance(t, pb.Tensor):
                raise StubError(f"an output tensor is a {type(t).__name__}, not a pb_utils.Tensor")
            if (wanted and t.name() not in wanted) or t.name() in seen:
                continue
            seen.add(t.name())
            tensors.append(t)
        return tensors

    # -- BLS -----------------------------------------------------------------------------------
    def bls_request(self, request, stream=False):
        """The `bls` message of a BLS request and the bytes attached to it. Inside a non-decoupled
        model's execute() its inputs go through the shared memory; otherwise (a decoupled model,
        whose threads may call at any time, or a stream) they and the answer travel attached."""
        pb = self.pb
        inline = stream or self.decoupled or (self.in_execute and self.out_parts is not None)
        if not self.in_execute and not inline:
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
        msg = {
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
        }
        parts = ()
        if inline:
            msg["inline"] = True
            msg["ins"], parts = self.attach_tensors(request.inputs())
        else:
            msg["ins"] = [self.write_tensor(t) for t in request.inputs()]
        if stream:
            msg["stream"] = True
        # trace=request.trace() of a sampled request: Serval traces the call as its child.
        key = getattr(getattr(request, "_trace", None), "_key", None)
        if key is not None:
            msg["tr"] = key
        return rid, msg, parts

    def bls_response(self, reply):
        pb = self.pb
        params = reply.get("params")
        if "err" in reply:
            e = reply["err"]
            code = pb._CODE_NAMES.index(e["code"]) if e["code"] in pb._CODE_NAMES else pb.TritonError.INTERNAL
            return pb.InferenceResponse(error=pb.TritonError(e["msg"], code), parameters=params)
        # Outputs in the "to stub" memory come with its size; others are attached (maybe none).
        buf = None
        if "size" in reply:
            self.map_to(reply["size"])
        else:
            buf = reply.get("bin", bytearray())
        return pb.InferenceResponse(output_tensors=[self.read_tensor(s, buf) for s in reply["outs"]], parameters=params)

    def infer(self, request):
        rid, msg, parts = self.bls_request(request)
        self.chan.send(msg, parts)
        replies = self.chan.replies
        return self.bls_response(self.chan.wait(lambda: replies.pop(rid, None)))

    async def infer_async(self, request):
        import asyncio

        loop = asyncio.get_running_loop()
        rid, msg, parts = self.bls_request(request)
        fut = loop.create_future()
        with self.chan.cond:
            if rid in self.chan.replies:
                fut.set_result(self.chan.replies.pop(rid))
            else:
                self.chan.futures[rid] = (loop, fut)
        with self.reading_on(loop):
            self.chan.send(msg, parts)
            reply = await fut
        return self.bls_response(reply)

    def infer_stream(self, request):
        """exec(decoupled=True): a BlsStream the answer's parts arrive in; the caller iterates it."""
        rid, msg, parts = self.bls_request(request, stream=True)
        stream = BlsStream(self, rid)
        with self.chan.cond:
            self.chan.streams[rid] = stream
        self.chan.send(msg, parts)
        return stream

    def reading_on(self, loop):
        """While in use, `loop` also reads the control channel (when no thread is reading it), so
        an awaited reply arrives even if no other thread waits on the channel."""
        stub = self

        class Reading:
            def __enter__(self):
                if stub.reader_loops.get(loop, 0) == 0:
                    loop.add_reader(CONTROL_FD, stub.chan.on_readable)
                stub.reader_loops[loop] = stub.reader_loops.get(loop, 0) + 1

            def __exit__(self, *exc):
                stub.reader_loops[loop] -= 1
                if stub.reader_loops[loop] == 0:
                    del stub.reader_loops[loop]
                    loop.remove_reader(CONTROL_FD)

        return Reading()

    def log(self, level, message, at=None):
        """A line for the server's log; `at` is the model's `<file>:<line>` (pb_utils.Logger)."""
        msg = {"t": "log", "level": level, "msg": message}
        if at:
            msg["at"] = at
        self.chan.send(msg)

    # -- custom metrics (pb_utils.MetricFamily / Metric; Serval keeps their values) -------------
    def metric_call(self, msg):
        """A metric operation Serval answers (`metric_done`): a family, a metric, a value."""
        with self.alloc_lock:
            self.bls_ids += 1
            rid = self.bls_ids
        self.chan.send({"t": "metric", "id": rid, **msg})
        replies = self.chan.replies
        return self.chan.wait(lambda: replies.pop(rid, None))

    def metric_update(self, key, op, value):
        self.chan.send({"t": "metric", "op": op, "key": key, "value": value})

    def run(self):
        try:
            while True:
                msg = self.chan.next_command()
                t = msg.get("t")
                if t == "init":
                    if not self.init(msg):
                        return
                elif t == "exec":
                    if self.memory is None:
                        self.execute(msg)
                        continue
                    self.memory.begin()
                    try:
                        self.execute(msg)
                    finally:
                        self.memory.end()
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
    finally:
        # Exits once Serval has the answer (its `fin`, or its end of the channel): an exit seen
        # first would read as a stub that died without answering.
        try:
            chan.next_command()
        except EOFError:
            pass


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

    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    # A model sees the sys.argv Triton's stub leaves it ([""]): unittest.main() and argparse work.
    sys.argv = [""]
    if mode == "autocomplete":
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
