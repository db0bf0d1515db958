"""Request rescheduling (set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)) side by side.

N is how many times a request runs: each execution but the last releases it with RESCHEDULE. Not
decoupled: the last execution answers OUT = N and LOG, a JSON list of [correlation_id, flags] per
execution. Decoupled: every execution sends OUT = executions left and LOG, the last with the final
flag (a generator of one token per execution). MODE (optional) picks a misuse: "bad_type" /
"bad_value" answer what set_release_flags("2") / (4) raised; "keep_response" returns a response for
the rescheduled request (dropped, as Triton does); "raise" raises in the second execution; "slow"
sleeps 50 ms per execution and stops (final flag) once the request is cancelled.
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
        self.runs = {}  # correlation ID -> [[correlation_id, flags], ...] of its executions

    def execute(self, requests):
        responses = []
        for request in requests:
            responses.append(self.step(request))
        return None if self.decoupled else responses

    def step(self, request):
        n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
        mode_t = pb_utils.get_input_tensor_by_name(request, "MODE")
        mode = mode_t.as_numpy().reshape(-1)[0].decode() if mode_t is not None else ""
        key = request.correlation_id()
        log = self.runs.setdefault(key, [])
        log.append([key, request.flags()])
        if mode in ("bad_type", "bad_value"):
            self.runs.pop(key)
            try:
                request.set_release_flags("2" if mode == "bad_type" else 4)
                text = "accepted"
            except Exception as e:  # noqa: BLE001
                text = f"{type(e).__name__}: {e}"
            return self.answer(request, -1, text, True)
        if mode == "raise" and len(log) == 2:
            self.runs.pop(key)
            raise ValueError("failed in the second execution")
        if mode == "slow":
            time.sleep(0.05)
        done = len(log) >= n or (mode == "slow" and request.is_cancelled())
        if done:
            self.runs.pop(key)
        else:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        if self.decoupled:
            return self.answer(request, n - len(log), json.dumps(log), done)
        if done:
            return self.answer(request, len(log), json.dumps(log), True)
        return self.answer(request, 0, "dropped", True) if mode == "keep_response" else None

    def answer(self, request, value, text, final):
        out = [
            pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
            pb_utils.Tensor("LOG", np.array([text.encode()], dtype=np.object_)),
        ]
        response = pb_utils.InferenceResponse(output_tensors=out)
        if not self.decoupled:
            return response
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        request.get_response_sender().send(response, flags=flags)
        return None
