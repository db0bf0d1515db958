"""cached_decoupled: echoes IN once, then the final flag (never loads: response_cache + decoupled)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            value = pb_utils.get_input_tensor_by_name(request, "IN")
            sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", value.as_numpy())]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
