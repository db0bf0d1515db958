"""An onnxruntime inference runtime for MLServer (the peer of the benchmark, tools/bench/peers.ts).

MLServer 1.7.1 ships no ONNX runtime, so the benchmark brings this small one: it loads the same
model.onnx files Serval serves and goes through MLServer's own dataplane end to end: MLServer
decodes the wire request (REST JSON or gRPC, raw_input_contents included) into an
InferenceRequest, this runtime turns each input into a numpy array with MLServer's NumpyCodec,
runs one onnxruntime InferenceSession, and encodes each output with NumpyCodec for MLServer to
put on the wire. With adaptive batching on (max_batch_size / max_batch_time in
model-settings.json), MLServer merges the requests before predict() and splits the response.

model-settings.json (written by tools/bench/peers.ts):
  implementation  "onnx_runtime.OnnxRuntimeModel" (this folder is on PYTHONPATH)
  parameters.uri  absolute path of model.onnx
  parameters.extra.intra_op_threads / inter_op_threads / allow_spinning
                  onnxruntime session options, set to what Serval gives one CPU instance
"""

import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxRuntimeModel(MLModel):
    async def load(self) -> bool:
        params = self.settings.parameters
        uri = params.uri if params else None
        if not uri:
            raise InferenceError(f"model '{self.name}': parameters.uri (the model.onnx path) is required")
        extra = (params.extra if params else None) or {}
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(extra.get("intra_op_threads", 0))
        options.inter_op_num_threads = int(extra.get("inter_op_threads", 0))
        options.add_session_config_entry("session.intra_op.allow_spinning", str(extra.get("allow_spinning", "1")))
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(uri, sess_options=options, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._output_names = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {}
        for request_input in payload.inputs:
            if request_input.name not in self._input_names:
                raise InferenceError(f"model '{self.name}' has no input '{request_input.name}'")
            feeds[request_input.name] = NumpyCodec.decode_input(request_input)
        wanted = [o.name for o in payload.outputs] if payload.outputs else self._output_names
        results = self._session.run(wanted, feeds)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            id=payload.id,
            outputs=[_encode_output(name, value) for name, value in zip(wanted, results)],
        )


def _encode_output(name, value):
    output = NumpyCodec.encode_output(name, value)
    # NumpyCodec tags each output with parameters {"content_type": "np"}, a hint only MLServer's
    # own clients read. Triton's HTTP client (perf_analyzer's) takes any output "parameters"
    # object to describe binary data and fails on one without "binary_data_size".
    output.parameters = None
    return output
