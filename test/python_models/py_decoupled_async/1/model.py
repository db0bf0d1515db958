"""Decoupled, with a coroutine execute: sleeps MS ms (without blocking other requests), then
sends OUT = MS with the final flag. A negative MS raises (after execute has returned, since the
coroutine runs in the background)."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            ms = int(pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()[0])
            if ms < 0:
                raise ValueError(f"cannot sleep {ms} ms")
            await asyncio.sleep(ms / 1000)
            out = pb_utils.Tensor("OUT", np.array([ms], dtype=np.int32))
            request.get_response_sender().send(
                pb_utils.InferenceResponse(output_tensors=[out]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )
        return None
