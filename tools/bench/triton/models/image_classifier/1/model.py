"""A numpy stand-in for the ONNX `image_classifier` the food_classifier tutorial calls (the
tritonserver wheel the benchmark runs has only the Python backend): 8x8 average pooling of the
[3, 224, 224] image, then a fixed random linear layer to 11 Food-11 scores and a softmax."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        rng = np.random.default_rng(11)
        self.weights = rng.standard_normal((3 * 28 * 28, 11)).astype(np.float32) * 0.05

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            pooled = x.reshape(x.shape[0], 3, 28, 8, 28, 8).mean(axis=(3, 5)).reshape(x.shape[0], -1)
            logits = pooled @ self.weights
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", (e / e.sum(axis=1, keepdims=True)).astype(np.float32))]))
        return responses
