"""System shared memory through the official clients (tritonclient.utils.shared_memory),
over HTTP and gRPC: round trips with inputs and outputs in shared memory, mixed with
tensors in the request, the status and unregister answers, and every error Triton gives
(texts and codes from Triton's shared_memory_manager.cc, http_server.cc and the gRPC
infer handler). CUDA shared memory is answered as unsupported."""

from __future__ import annotations

import base64
import uuid

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor, serialized_byte_size, triton_to_np_dtype

from serval_helpers import expect_triton_error, make_input, make_output, module_for

pytestmark = pytest.mark.extension("system_shared_memory")

A = np.arange(16, dtype=np.int32).reshape(1, 16) * 3 - 20
B = np.full((1, 16), 7, dtype=np.int32)
NBYTES = A.nbytes  # 64


class Regions:
    """Shared memory objects made as clients make them, registered under unique names,
    unregistered and destroyed at the end."""

    def __init__(self, client):
        self.client = client
        self.tag = uuid.uuid4().hex[:8]
        self.handles = {}

    def name(self, base: str) -> str:
        return f"{base}_{self.tag}"

    def key(self, base: str) -> str:
        return f"/serval_ct_{base}_{self.tag}"

    def create(self, base: str, size: int, register: bool = True, offset: int = 0, reg_size: int | None = None):
        h = shm.create_shared_memory_region(self.name(base), self.key(base), size)
        self.handles[base] = h
        if register:
            self.client.register_system_shared_memory(
                self.name(base), self.key(base), size - offset if reg_size is None else reg_size, offset=offset
            )
        return h

    def close(self):
        for base in self.handles:
            try:
                self.client.unregister_system_shared_memory(self.name(base))
            except InferenceServerException:
                pass
        for h in self.handles.values():
            shm.destroy_shared_memory_region(h)


@pytest.fixture
def regions(client):
    r = Regions(client)
    yield r
    r.close()


def _simple_shm_request(protocol, regions, in_offset1=NBYTES, out_offsets=(0, NBYTES), out_size=NBYTES):
    mod = module_for(protocol)
    i0, i1 = mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")
    i0.set_shared_memory(regions.name("in"), NBYTES)
    i1.set_shared_memory(regions.name("in"), NBYTES, offset=in_offset1)
    o0, o1 = make_output(protocol, "OUTPUT0"), make_output(protocol, "OUTPUT1")
    o0.set_shared_memory(regions.name("out"), out_size, offset=out_offsets[0])
    o1.set_shared_memory(regions.name("out"), out_size, offset=out_offsets[1])
    return [i0, i1], [o0, o1]


def _output_meta(protocol, result, name):
    out = result.get_output(name)
    if protocol == "http":
        return out["datatype"], list(out["shape"])
    return out.datatype, list(out.shape)


def _no_data_in_response(protocol, result, name):
    """What Triton sends for an output in shared memory: name, datatype and shape only."""
    if protocol == "http":
        out = result.get_output(name)
        assert "data" not in out and "parameters" not in out, out
    else:
        resp = result.get_response()
        idx = [o.name for o in resp.outputs].index(name)
        assert resp.raw_output_contents[idx] == b""
        assert not resp.outputs[idx].HasField("contents")


def test_extension_listed_cuda_not(client, protocol):
    md = client.get_server_metadata()
    exts = list(md["extensions"] if protocol == "http" else md.extensions)
    assert "system_shared_memory" in exts
    assert "cuda_shared_memory" not in exts


def test_round_trip_inputs_and_outputs_in_shm(client, protocol, regions):
    h_in = regions.create("in", 2 * NBYTES)
    h_out = regions.create("out", 2 * NBYTES)
    shm.set_shared_memory_region(h_in, [A])
    shm.set_shared_memory_region(h_in, [B], offset=NBYTES)
    inputs, outputs = _simple_shm_request(protocol, regions)
    res = client.infer("simple", inputs, outputs=outputs)
    for name, offset, want in (("OUTPUT0", 0, A + B), ("OUTPUT1", NBYTES, A - B)):
        datatype, shape = _output_meta(protocol, res, name)
        assert (datatype, shape) == ("INT32", [1, 16])
        _no_data_in_response(protocol, res, name)
        got = shm.get_contents_as_numpy(h_out, triton_to_np_dtype(datatype), shape, offset=offset)
        np.testing.assert_array_equal(got, want)


def test_registered_offset_is_the_regions_start(client, protocol, regions):
    """A region registered at an offset into its object: tensor offsets count from there."""
    h_in = regions.create("in", 16 + 2 * NBYTES, offset=16)
    h_out = regions.create("out", 8 + 2 * NBYTES, offset=8)
    shm.set_shared_memory_region(h_in, [A], offset=16)
    shm.set_shared_memory_region(h_in, [B], offset=16 + NBYTES)
    inputs, outputs = _simple_shm_request(protocol, regions)
    client.infer("simple", inputs, outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(h_out, np.int32, [1, 16], offset=8), A + B)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(h_out, np.int32, [1, 16], offset=8 + NBYTES), A - B)


@pytest.mark.parametrize("binary", [True, False])
def test_mixed_shm_and_request_tensors(client, protocol, regions, binary):
    if protocol == "grpc" and not binary:
        pytest.skip("JSON tensors are HTTP only")
    h_in = regions.create("in", NBYTES)
    h_out = regions.create("out", NBYTES)
    shm.set_shared_memory_region(h_in, [A])
    mod = module_for(protocol)
    i0 = mod.InferInput("INPUT0", [1, 16], "INT32")
    i0.set_shared_memory(regions.name("in"), NBYTES)
    i1 = make_input(protocol, "INPUT1", B, binary=binary)
    o0 = make_output(protocol, "OUTPUT0", binary=binary)
    o0.set_shared_memory(regions.name("out"), NBYTES)
    o1 = make_output(protocol, "OUTPUT1", binary=binary)
    res = client.infer("simple", [i0, i1], outputs=[o0, o1])
    np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), A - B)
    _no_data_in_response(protocol, res, "OUTPUT0")
    np.testing.assert_array_equal(shm.get_contents_as_numpy(h_out, np.int32, [1, 16]), A + B)


def test_bytes_tensors_through_shm(client, protocol, regions):
    data = np.array([["serval", "", "shared", "memory ✓"]], dtype=np.object_)
    ser = serialize_byte_tensor(data)
    size = serialized_byte_size(ser)
    h_in = regions.create("in", size)
    h_out = regions.create("out", size)
    shm.set_shared_memory_region(h_in, [ser])
    mod = module_for(protocol)
    i0 = mod.InferInput("INPUT0", [1, 4], "BYTES")
    i0.set_shared_memory(regions.name("in"), size)
    o0 = make_output(protocol, "OUTPUT0")
    o0.set_shared_memory(regions.name("out"), size)
    res = client.infer("identity_string", [i0], outputs=[o0])
    assert _output_meta(protocol, res, "OUTPUT0") == ("BYTES", [1, 4])
    got = shm.get_contents_as_numpy(h_out, np.object_, [1, 4])
    assert [x.decode() for x in got.flatten()] == [str(x) for x in data.flatten()]


def test_status_and_unregister(client, protocol, regions):
    regions.create("in", 128, offset=32)
    regions.create("out", 64)

    def status(name=""):
        if protocol == "http":
            return client.get_system_shared_memory_status(region_name=name)
        return client.get_system_shared_memory_status(region_name=name, as_json=True).get("regions", {})

    mine = {regions.name("in"), regions.name("out")}
    all_ = status()
    if protocol == "http":
        # Triton's JSON: a list of {name, key, offset, byte_size}.
        rows = {r["name"]: r for r in all_ if r["name"] in mine}
        assert rows[regions.name("in")] == {"name": regions.name("in"), "key": regions.key("in"), "offset": 32, "byte_size": 96}
        assert rows[regions.name("out")] == {"name": regions.name("out"), "key": regions.key("out"), "offset": 0, "byte_size": 64}
        assert status(regions.name("out")) == [rows[regions.name("out")]]
    else:
        # Triton's message: RegionStatus by name (as_json: uint64 as strings, zeros left out).
        assert all_[regions.name("in")] == {"name": regions.name("in"), "key": regions.key("in"), "offset": "32", "byte_size": "96"}
        assert all_[regions.name("out")] == {"name": regions.name("out"), "key": regions.key("out"), "byte_size": "64"}
        assert list(status(regions.name("out"))) == [regions.name("out")]
        msg = client.get_system_shared_memory_status(region_name=regions.name("in"))
        r = msg.regions[regions.name("in")]
        assert (r.name, r.key, r.offset, r.byte_size) == (regions.name("in"), regions.key("in"), 32, 96)

    client.unregister_system_shared_memory(regions.name("in"))
    names = [r["name"] for r in status()] if protocol == "http" else list(status())
    assert regions.name("in") not in names and regions.name("out") in names
    client.unregister_system_shared_memory("not_registered_" + regions.tag)  # no error, as in Triton
    client.unregister_system_shared_memory()
    assert len(status()) == 0


def test_register_errors(client, protocol, regions):
    regions.create("in", 64)
    with expect_triton_error(protocol, "ALREADY_EXISTS", f"shared memory region '{regions.name('in')}' already in manager"):
        client.register_system_shared_memory(regions.name("in"), regions.key("in"), 64)
    missing = f"/serval_ct_missing_{regions.tag}"
    with expect_triton_error(protocol, "INTERNAL", f"Unable to open shared memory region: '{missing}'"):
        client.register_system_shared_memory(regions.name("x"), missing, 64)
    for key in ("/a/b", "/../etc/passwd", "/.."):
        with expect_triton_error(protocol, "INTERNAL", f"Unable to open shared memory region: '{key}'"):
            client.register_system_shared_memory(regions.name("x"), key, 8)
    regions.create("obj", 64, register=False)
    for offset, size in ((0, 65), (1, 64), (64, 1), (65, 0)):
        with expect_triton_error(protocol, "INVALID_ARG", f"failed to register shared memory region '{regions.name('y')}': invalid args"):
            client.register_system_shared_memory(regions.name("y"), regions.key("obj"), size, offset=offset)
    with expect_triton_error(protocol, "NOT_FOUND", f"Unable to find system shared memory region: '{regions.name('y')}'"):
        client.get_system_shared_memory_status(region_name=regions.name("y"))


def test_infer_errors(client, protocol, regions):
    h_in = regions.create("in", 2 * NBYTES)
    regions.create("out", 2 * NBYTES)
    shm.set_shared_memory_region(h_in, [A, B])
    mod = module_for(protocol)

    # An unknown region.
    inputs, outputs = _simple_shm_request(protocol, regions)
    inputs[0].set_shared_memory("nope_" + regions.tag, NBYTES)
    with expect_triton_error(protocol, "NOT_FOUND", f"Unable to find shared memory region: 'nope_{regions.tag}'"):
        client.infer("simple", inputs, outputs=outputs)

    # Out-of-range offsets (Triton's L0_shared_memory: an output offset at the region's end).
    inputs, outputs = _simple_shm_request(protocol, regions, out_offsets=(2 * NBYTES, NBYTES))
    with expect_triton_error(protocol, "INVALID_ARG", "Invalid offset for shared memory region"):
        client.infer("simple", inputs, outputs=outputs)
    inputs, outputs = _simple_shm_request(protocol, regions, in_offset1=NBYTES + 4)
    with expect_triton_error(protocol, "INVALID_ARG", f"Invalid offset + byte size for shared memory region: '{regions.name('in')}'"):
        client.infer("simple", inputs, outputs=outputs)

    # The byte size of an input in shared memory against its shape.
    inputs, outputs = _simple_shm_request(protocol, regions)
    inputs[1] = mod.InferInput("INPUT1", [1, 16], "INT32")
    inputs[1].set_shared_memory(regions.name("in"), 2 * NBYTES)
    with expect_triton_error(protocol, "INVALID_ARG", "input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 128"):
        client.infer("simple", inputs, outputs=outputs)

    # An output region too small for the result.
    inputs, outputs = _simple_shm_request(protocol, regions, out_size=32)
    with expect_triton_error(
        protocol,
        "INTERNAL",
        "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results",
    ):
        client.infer("simple", inputs, outputs=outputs)

    # A region used after its unregister.
    client.unregister_system_shared_memory(regions.name("out"))
    inputs, outputs = _simple_shm_request(protocol, regions)
    with expect_triton_error(protocol, "NOT_FOUND", f"Unable to find shared memory region: '{regions.name('out')}'"):
        client.infer("simple", inputs, outputs=outputs)

    # Both a region and data for one input (gRPC: typed contents; HTTP clients cannot send both).
    if protocol == "grpc":
        i0 = mod.InferInput("INPUT0", [1, 16], "INT32")
        i0.set_shared_memory(regions.name("in"), NBYTES)
        i0._input.contents.int_contents.extend(A.flatten().tolist())
        i1 = mod.InferInput("INPUT1", [1, 16], "INT32")
        i1._input.contents.int_contents.extend(B.flatten().tolist())
        with expect_triton_error(
            protocol, "INVALID_ARG", "unexpected 'content' provided when using shared memory for input tensor 'INPUT0' for model 'simple'"
        ):
            client.infer("simple", [i0, i1])


def test_cuda_shared_memory_unsupported(client, protocol):
    text = "CUDA shared memory is not supported by this server"
    with expect_triton_error(protocol, "UNSUPPORTED", text):
        client.get_cuda_shared_memory_status()
    with expect_triton_error(protocol, "UNSUPPORTED", text):
        client.register_cuda_shared_memory("cuda0", base64.b64encode(b"\0" * 64).decode(), 0, 64)
    # Nothing can be registered, so there is nothing to unregister: it succeeds, as on a Triton
    # without GPUs (perf_analyzer unregisters CUDA regions after every --shared-memory run).
    client.unregister_cuda_shared_memory()
    client.unregister_cuda_shared_memory("cuda0")


def test_http_json_error_texts(server):
    """HTTP-only rules (Triton's ValidateInputContentType / ValidateOutputParameter),
    driven with raw JSON since tritonclient never sends these."""
    import json
    import urllib.request

    if not server.http_url:
        pytest.skip("no HTTP endpoint")

    def post(doc):
        req = urllib.request.Request(
            f"http://{server.http_url}/v2/models/simple/infer",
            data=json.dumps(doc).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())["error"]
        raise AssertionError("expected an error")

    region = {"shared_memory_region": "r", "shared_memory_byte_size": 64}
    one = {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": B.flatten().tolist()}
    assert post({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": A.flatten().tolist(), "parameters": region}, one]}) == (
        400,
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
        "'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'",
    )
    zero = {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": A.flatten().tolist()}
    assert post({"inputs": [zero, one], "outputs": [{"name": "OUTPUT0", "parameters": {**region, "binary_data": True}}]}) == (
        400,
        "Output can't set both 'shared_memory_region' and 'binary_data'",
    )



def test_reserved_key_prefix_and_offset_overflow(client, protocol, regions):
    # Triton's text (its L0_shared_memory test_register_reserved_names).
    key = "triton_python_backend_shm_region__my_key"
    with expect_triton_error(
        protocol,
        "INVALID_ARG",
        f"cannot register shared memory region 'r_{regions.tag}' with key '{key}' as the key contains the reserved prefix "
        "'triton_python_backend_shm_region_'",
    ):
        client.register_system_shared_memory(f"r_{regions.tag}", key, 64)
    h_in = regions.create("in", 2 * NBYTES)
    regions.create("out", 2 * NBYTES)
    shm.set_shared_memory_region(h_in, [A, B])
    inputs, outputs = _simple_shm_request(protocol, regions)
    if protocol == "grpc":
        # An int64_param cannot carry 2^64 - 32: the client refuses it (as against Triton).
        with pytest.raises(ValueError, match="Value out of range"):
            outputs[0].set_shared_memory(regions.name("out"), 2**64 - 32, offset=32)
            client.infer("simple", inputs, outputs=outputs)
        return
    outputs[0].set_shared_memory(regions.name("out"), 2**64 - 32, offset=32)
    with expect_triton_error(
        protocol,
        "INVALID_ARG",
        f"Integer overflow detected: byte_size (18446744073709551584) + offset (32) exceeds maximum value "
        f"(18446744073709551615) for region '{regions.name('out')}'",
    ):
        client.infer("simple", inputs, outputs=outputs)


@pytest.fixture(scope="module")
def no_shm_server():
    """A server started without --allow-client-shm=true (the default since Triton 2.73)."""
    from conftest import _ManagedServer

    # Only `simple`: a second server with every model would start slowly on a busy machine.
    managed = _ManagedServer(
        ("--allow-client-shm=false", "--model-control-mode", "explicit", "--load-model", "simple"), log_name="serval-no-shm.log"
    )
    try:
        yield managed.start()
    finally:
        managed.stop()


def test_client_shm_refused_by_default(no_shm_server, protocol, tmp_path):
    from serval_helpers import make_client

    text = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
    c = make_client(protocol, no_shm_server)
    tag = uuid.uuid4().hex[:8]
    h = shm.create_shared_memory_region(f"in_{tag}", f"/serval_ct_off_{tag}", 2 * NBYTES)
    try:
        shm.set_shared_memory_region(h, [A, B])
        with expect_triton_error(protocol, "UNAVAILABLE", text):
            c.register_system_shared_memory(f"in_{tag}", f"/serval_ct_off_{tag}", 2 * NBYTES)
        with expect_triton_error(protocol, "UNAVAILABLE", text):
            c.unregister_system_shared_memory()
        # CUDA registration and unregistration are client shared memory too.
        with expect_triton_error(protocol, "UNAVAILABLE", text):
            c.register_cuda_shared_memory("cuda0", base64.b64encode(b"\0" * 64).decode(), 0, 64)
        with expect_triton_error(protocol, "UNAVAILABLE", text):
            c.unregister_cuda_shared_memory()
        status = c.get_system_shared_memory_status()
        assert (len(status) if protocol == "http" else len(status.regions)) == 0
        mod = module_for(protocol)
        i0, i1 = mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")
        i0.set_shared_memory(f"in_{tag}", NBYTES)
        i1.set_data_from_numpy(B)
        with expect_triton_error(protocol, "UNAVAILABLE", text):
            c.infer("simple", [i0, i1])
        # Requests with their tensors inline are served as always.
        i0 = mod.InferInput("INPUT0", [1, 16], "INT32")
        i0.set_data_from_numpy(A)
        res = c.infer("simple", [i0, i1])
        assert np.array_equal(res.as_numpy("OUTPUT0"), A + B)
    finally:
        shm.destroy_shared_memory_region(h)
        c.close()
