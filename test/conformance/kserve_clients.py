"""The KServe Python SDK's clients against a running Serval: run with the interpreter of
.venv-kserve (test/conformance/setup-kserve.sh; the SDK pulls in kubernetes, fastapi and more,
so it stays out of .venv), by test_kserve_clients.py.

    .venv-kserve/bin/python test/conformance/kserve_clients.py HTTP_HOST:PORT GRPC_HOST:PORT

InferenceRESTClient and InferenceGRPCClient (protocol v2): server live and ready, model ready,
infer on the bundled `simple` model (binary and JSON tensors over REST). The SDK's clients have
no metadata calls, so metadata is read with the SDK's own compiled gRPC stub
(kserve.protocol.grpc.grpc_predict_v2_pb2_grpc) and over REST with the SDK's HTTP client (httpx).
Prints one line per check and exits non-zero at the first failure."""

from __future__ import annotations

import asyncio
import sys

import grpc
import httpx
import numpy as np
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig
from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as pb_grpc


def check(what: str, ok: bool, detail: object = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}{'' if ok else f': {detail}'}", flush=True)
    if not ok:
        sys.exit(1)


def simple_request(binary: bool) -> tuple[InferRequest, np.ndarray, np.ndarray]:
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    inputs = []
    for name, arr in (("INPUT0", a), ("INPUT1", b)):
        i = InferInput(name, list(arr.shape), "INT32")
        i.set_data_from_numpy(arr, binary_data=binary)
        inputs.append(i)
    return InferRequest(model_name="simple", infer_inputs=inputs, request_id="kserve-1"), a, b


def outputs_of(res) -> dict:
    return {o.name: o.as_numpy() for o in res.outputs}


async def rest(http: str) -> None:
    base = f"http://{http}"
    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=30))
    try:
        check("REST is_server_live", await client.is_server_live(base) is True)
        check("REST is_server_ready", await client.is_server_ready(base) is True)
        check("REST is_model_ready simple", await client.is_model_ready(base, "simple") is True)
        check("REST is_model_ready unknown is False", await client.is_model_ready(base, "no_such_model") is False)
        for binary in (False, True):
            req, a, b = simple_request(binary)
            res = await client.infer(base, req, model_name="simple")
            out = outputs_of(res)
            check(f"REST infer (binary={binary}) OUTPUT0", np.array_equal(out.get("OUTPUT0"), a + b), out)
            check(f"REST infer (binary={binary}) OUTPUT1", np.array_equal(out.get("OUTPUT1"), a - b), out)
            check(f"REST infer (binary={binary}) id", res.id == "kserve-1", res.id)
    finally:
        await client.close()
    async with httpx.AsyncClient(timeout=30) as h:
        meta = (await h.get(f"{base}/v2")).json()
        check("REST server metadata", {"name", "version", "extensions"} <= meta.keys(), meta)
        m = (await h.get(f"{base}/v2/models/simple")).json()
        check("REST model metadata", m.get("name") == "simple" and [t["name"] for t in m["inputs"]] == ["INPUT0", "INPUT1"], m)


async def grpc_checks(grpc_url: str) -> None:
    client = InferenceGRPCClient(grpc_url, timeout=30)
    try:
        check("gRPC is_server_live", await client.is_server_live() is True)
        check("gRPC is_server_ready", await client.is_server_ready() is True)
        check("gRPC is_model_ready simple", await client.is_model_ready("simple") is True)
        req, a, b = simple_request(True)
        res = await client.infer(req)
        out = outputs_of(res)
        check("gRPC infer OUTPUT0", np.array_equal(out.get("OUTPUT0"), a + b), out)
        check("gRPC infer OUTPUT1", np.array_equal(out.get("OUTPUT1"), a - b), out)
    finally:
        await client.close()
    async with grpc.aio.insecure_channel(grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        meta = await stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30)
        check("gRPC server metadata", bool(meta.name) and bool(meta.version), meta)
        m = await stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"), timeout=30)
        check("gRPC model metadata", m.name == "simple" and [t.name for t in m.inputs] == ["INPUT0", "INPUT1"], m)


async def main(http: str, grpc_url: str) -> None:
    await rest(http)
    await grpc_checks(grpc_url)
    print("kserve clients: all checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
