"""add_one_int32: OUT = IN + 1, one response per request."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            out = pb_utils.Tensor("OUT", (value + 1).astype(value.dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
