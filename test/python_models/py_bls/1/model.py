"""Runs each request on the ONNX model `simple` with a blocking BLS request (exec) and returns
its outputs (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1); the request parameter
`target` names another model to call instead."""
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            target = json.loads(request.parameters()).get("target", "simple")
            result = pb_utils.InferenceRequest(
                model_name=target,
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0"), pb_utils.get_input_tensor_by_name(request, "INPUT1")],
                request_id="bls-" + request.request_id(),
            ).exec()
            if result.has_error():
                responses.append(pb_utils.InferenceResponse(error=result.error()))
                continue
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", pb_utils.get_output_tensor_by_name(result, "OUTPUT0").as_numpy()),
                        pb_utils.Tensor("OUTPUT1", pb_utils.get_output_tensor_by_name(result, "OUTPUT1").as_numpy()),
                    ]
                )
            )
        return responses
