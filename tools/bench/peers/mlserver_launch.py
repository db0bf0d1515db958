"""Starts MLServer 1.7.1 as `mlserver start FOLDER` does, plus Triton's ModelConfig call.

perf_analyzer asks a server for each model's configuration (gRPC
inference.GRPCInferenceService/ModelConfig, HTTP GET /v2/models/{m}/config) before it sends
anything; MLServer implements neither. This launcher answers both from a file the benchmark
derives from the model's config.pbtxt with Serval's own parser (tools/bench/peers/triton_config.ts):

  gRPC  one generic handler for the single method /inference.GRPCInferenceService/ModelConfig,
        added to MLServer's own grpc.aio server right after MLServer builds it (its
        GRPCServer._create_server) and before it starts. MLServer's handlers for the service
        are registered first; gRPC consults generic handlers only for methods no registered
        handler serves, so ModelInfer and every other call still go straight to MLServer.
  HTTP  one FastAPI route, GET /v2/models/{m}[/versions/{v}]/config, added to MLServer's own
        app before uvicorn serves it.

Nothing sits in front of MLServer: no proxy, no middleware, no change to its inference path.
Everything else is MLServer's CLI start-up (uvloop, load_settings(FOLDER), MLServer(settings),
start(models_settings)).

  python mlserver_launch.py FOLDER CONFIGS.json

CONFIGS.json: {"<model>": {"json": <Triton's config JSON>, "grpc": "<base64 ModelConfigResponse>"}}.
Once both servers listen it prints the same "Started ... at HOST:PORT" lines Serval prints.
"""

import asyncio
import base64
import json
import sys

import grpc
from fastapi.responses import JSONResponse
from mlserver.cli.serve import load_settings
from mlserver.server import MLServer
from mlserver.utils import install_uvloop_event_loop

MODEL_CONFIG_METHOD = "/inference.GRPCInferenceService/ModelConfig"


def request_model_name(data: bytes) -> str:
    """The `name` (field 1, a string) of a serialized inference.ModelConfigRequest."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            if field == 1:
                return data[i : i + n].decode("utf-8")
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return ""


def _varint(data: bytes, i: int):
    shift = 0
    value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


class ModelConfigHandler(grpc.GenericRpcHandler):
    def __init__(self, configs):
        self._responses = {name: base64.b64decode(c["grpc"]) for name, c in configs.items()}
        # No (de)serializers: the request arrives as bytes and the response leaves as bytes.
        self._handler = grpc.unary_unary_rpc_method_handler(self._model_config)

    def service(self, handler_call_details):
        return self._handler if handler_call_details.method == MODEL_CONFIG_METHOD else None

    async def _model_config(self, request: bytes, context):
        name = request_model_name(request)
        response = self._responses.get(name)
        if response is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"Request for unknown model: '{name}' is not found")
        return response


def add_model_config(server: MLServer, configs) -> None:
    grpc_server = server._grpc_server
    create = grpc_server._create_server

    def create_with_model_config():
        aio_server = create()
        aio_server.add_generic_rpc_handlers((ModelConfigHandler(configs),))
        return aio_server

    grpc_server._create_server = create_with_model_config

    async def model_config(model_name: str, model_version: str = ""):
        c = configs.get(model_name)
        if c is None:
            return JSONResponse({"error": f"Request for unknown model: '{model_name}' is not found"}, status_code=400)
        return JSONResponse(c["json"])

    app = server._rest_server._app
    app.add_api_route("/v2/models/{model_name}/config", model_config, methods=["GET"])
    app.add_api_route("/v2/models/{model_name}/versions/{model_version}/config", model_config, methods=["GET"])


async def main(folder: str, configs_file: str) -> None:
    with open(configs_file) as f:
        configs = json.load(f)
    settings, models_settings = await load_settings(folder)
    server = MLServer(settings)
    add_model_config(server, configs)
    await server.start(models_settings)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: mlserver_launch.py FOLDER CONFIGS.json")
    install_uvloop_event_loop()
    asyncio.run(main(sys.argv[1], sys.argv[2]))
