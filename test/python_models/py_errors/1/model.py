"""Fails on request. MODE (per request, first element):
ok       answers OUT = the stub's pid
raise    execute raises TritonModelException (every request of the batch fails)
value    execute raises ValueError from a helper (the traceback names both functions)
error    this request's response is InferenceResponse(error=TritonError(..., INVALID_ARG))
crash    the stub kills itself (SIGKILL) in the middle of execute
count    execute returns one response too few
sleep    waits 0.5 s, then answers like ok
bls_unknown / bls_bad  a BLS request to a model that does not exist / with a wrong shape;
         the BLS response's error becomes this request's error
bls_raise              the same unknown-model BLS error, raised as TritonModelException
"""
import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def helper():
    raise ValueError("a helper failed")


class TritonPythonModel:
    def execute(self, requests):
        modes = [pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy().reshape(-1)[0].decode() for r in requests]
        if "raise" in modes:
            raise pb_utils.TritonModelException("the model raised on purpose")
        if "value" in modes:
            helper()
        if "crash" in modes:
            os.kill(os.getpid(), signal.SIGKILL)
        if "sleep" in modes:
            time.sleep(0.5)
        responses = []
        for mode in modes:
            if mode == "error":
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("this request is refused", pb_utils.TritonError.INVALID_ARG))
                )
            elif mode.startswith("bls_"):
                target = "no_such_model" if mode in ("bls_unknown", "bls_raise") else "simple"
                tensor = pb_utils.Tensor("INPUT0", np.zeros([1, 3], dtype=np.int32))
                result = pb_utils.InferenceRequest(
                    model_name=target, requested_output_names=["OUTPUT0"], inputs=[tensor, pb_utils.Tensor("INPUT1", np.zeros([1, 3], dtype=np.int32))]
                ).exec()
                if not result.has_error():
                    raise pb_utils.TritonModelException("the BLS request was expected to fail")
                if mode == "bls_raise":
                    raise pb_utils.TritonModelException(result.error().message())
                responses.append(pb_utils.InferenceResponse(error=result.error()))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[str(os.getpid()).encode()]], dtype=np.object_))]))
        if "count" in modes:
            responses.pop()
        return responses
