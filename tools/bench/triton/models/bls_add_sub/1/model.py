"""A BLS pipeline: each request goes to `add_sub` with a blocking BLS request (exec) and its
outputs are returned, as in Triton's python_backend BLS example."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            result = pb_utils.InferenceRequest(
                model_name="add_sub",
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0"), pb_utils.get_input_tensor_by_name(request, "INPUT1")],
            ).exec()
            if result.has_error():
                responses.append(pb_utils.InferenceResponse(error=result.error()))
                continue
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", pb_utils.get_output_tensor_by_name(result, "OUTPUT0").as_numpy()),
                        pb_utils.Tensor("OUTPUT1", pb_utils.get_output_tensor_by_name(result, "OUTPUT1").as_numpy()),
                    ]
                )
            )
        return responses
