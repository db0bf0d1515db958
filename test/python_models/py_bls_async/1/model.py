"""`async def execute` with concurrent BLS requests: for each request, `simple` runs twice at
once (async_exec, asyncio.gather), on (INPUT0, INPUT1) and on (INPUT0, INPUT0); OUTPUT0 is the
sum of both OUTPUT0s = 3 * INPUT0 + INPUT1."""
import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            calls = [
                pb_utils.InferenceRequest(model_name="simple", requested_output_names=["OUTPUT0"], inputs=[a, b]).async_exec(),
                pb_utils.InferenceRequest(
                    model_name="simple", requested_output_names=["OUTPUT0"], inputs=[a, pb_utils.Tensor("INPUT1", a.as_numpy())]
                ).async_exec(),
            ]
            first, second = await asyncio.gather(*calls)
            for r in (first, second):
                if r.has_error():
                    raise pb_utils.TritonModelException(r.error().message())
            total = pb_utils.get_output_tensor_by_name(first, "OUTPUT0").as_numpy() + pb_utils.get_output_tensor_by_name(second, "OUTPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", total)]))
        return responses
