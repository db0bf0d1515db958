# Answers each request with its parameters as the model sees them (request.parameters(), a
# JSON text), so tests can check which request parameters and forwarded headers reach a model.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = request.parameters()
            out = pb_utils.Tensor("PARAMS", np.array([text.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
