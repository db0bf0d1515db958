"""Returns INPUT0 as it came (any bytes), and INFO: what the model saw of the request, as JSON."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = dict(args)
        self.config = json.loads(args["model_config"])

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            info = {
                "request_id": request.request_id(),
                "parameters": json.loads(request.parameters()),
                "requested": sorted(request.requested_output_names()),
                "batch_requests": len(requests),
                "shape": list(data.shape),
                "dtype": str(data.dtype),
                "element_types": sorted({type(e).__name__ for e in data.reshape(-1)}),
                "args": self.args,
                "config_parameters": self.config.get("parameters", {}),
            }
            rows = data.shape[0]
            info_tensor = np.array([[json.dumps(info).encode()]] * rows, dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data), pb_utils.Tensor("INFO", info_tensor)])
            )
        return responses
