"""nondecoupled_probe: an ordinary model; MODE picks what execute does.

Modes: ok (returns one response with 3 outputs), error (an error response), raise,
sender_one (one response + final flag through the response sender, returns None),
sender_two (two responses through the sender), sender_and_return (sender, then also returns a list).
Exceptions the Python API raises are printed as "PROBE <mode>: <text>".
"""

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def response(i=0):
    return pb_utils.InferenceResponse(
        output_tensors=[
            pb_utils.Tensor("OUT", np.array([i, i + 1, i + 2], dtype=np.int32)),
            pb_utils.Tensor("TEXT", np.array([b"a%d" % i, b"b"], dtype=np.object_)),
            pb_utils.Tensor("FP", np.array([0.5 + i], dtype=np.float32)),
        ]
    )


def attempt(mode, what, fn):
    try:
        fn()
        print(f"PROBE {mode}: {what}: ok", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"PROBE {mode}: {what}: {type(e).__name__}: {e}", flush=True)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        use_sender = False
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().reshape(-1)[0].decode()
            if mode == "ok":
                responses.append(response())
            elif mode == "error":
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("probe error response")))
            elif mode == "raise":
                raise RuntimeError("probe exception in execute")
            elif mode in ("sender_one", "sender_two", "sender_and_return"):
                use_sender = mode != "sender_and_return"
                sender = request.get_response_sender()
                if mode == "sender_two":
                    attempt(mode, "first send(response)", lambda: sender.send(response(0)))
                    attempt(mode, "second send(response, FINAL)", lambda: sender.send(response(1), flags=FINAL))
                else:
                    attempt(mode, "send(response, FINAL)", lambda: sender.send(response(), flags=FINAL))
                    responses.append(response(7))
        return None if use_sender else responses
