"""Calls repeat_int32 through BLS with decoupled=True and sums what comes back."""

import numpy as np
import triton_python_backend_utils as pb_utils


def repeat_request(values):
    n = values.size
    return pb_utils.InferenceRequest(
        model_name="repeat_int32",
        requested_output_names=["OUT"],
        inputs=[
            pb_utils.Tensor("IN", values.astype(np.int32)),
            pb_utils.Tensor("DELAY", np.zeros(n, dtype=np.uint32)),
            pb_utils.Tensor("WAIT", np.zeros(1, dtype=np.uint32)),
        ],
    )


def summarize(responses):
    total = count = empty = 0
    for r in responses:
        if r.has_error():
            raise pb_utils.TritonModelException(r.error().message())
        count += 1
        out = pb_utils.get_output_tensor_by_name(r, "OUT")
        if out is None:
            empty += 1
        else:
            total += int(out.as_numpy().sum())
    return pb_utils.InferenceResponse(
        output_tensors=[
            pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
            pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32)),
            pb_utils.Tensor("EMPTY", np.array([empty], dtype=np.int32)),
        ]
    )


class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if mode == "plain":
                # exec() without decoupled=True into a decoupled model: an error response, handed on.
                plain = repeat_request(values).exec()
                out.append(pb_utils.InferenceResponse(error=plain.error()) if plain.has_error() else plain)
                continue
            if mode == "async_sum":
                responses = await repeat_request(values).async_exec(decoupled=True)
            else:
                responses = repeat_request(values).exec(decoupled=True)
            out.append(summarize(responses))
        return out
