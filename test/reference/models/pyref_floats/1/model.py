"""Returns F32 as O32 and F64 as O64: how each server writes float tensors in JSON."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            f32 = pb_utils.get_input_tensor_by_name(request, "F32").as_numpy()
            f64 = pb_utils.get_input_tensor_by_name(request, "F64").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("O32", f32), pb_utils.Tensor("O64", f64)]))
        return responses
