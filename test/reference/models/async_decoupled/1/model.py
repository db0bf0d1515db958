"""async_decoupled: `async def execute` in a decoupled model, to see whether requests overlap."""

import asyncio
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            sleep = pb_utils.get_input_tensor_by_name(request, "SLEEP_MS")
            ms = 500 if sleep is None else int(sleep.as_numpy().reshape(-1)[0])
            start = time.time() * 1000
            await asyncio.sleep(ms / 1000)
            out = pb_utils.Tensor("T", np.array([start, time.time() * 1000], dtype=np.float64))
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
