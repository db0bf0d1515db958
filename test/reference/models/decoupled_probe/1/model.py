"""decoupled_probe: one decoupled-model behaviour per MODE, to observe what Triton does with it.

Modes: multi (N responses, default 2, with 3 outputs), one, none (final flag only),
slow (N responses 300 ms apart, the final flag 300 ms after the last), echo (one response: alpha =
[JSON of the request's parameters and inputs]), shapes (M [2, 2], FP 0-d, TEXT [1, 1], alpha),
final_with_response (the last response carries the final flag), error_first, error_after_first,
error_final, raise, raise_after_send, return_list, send_after_final, cancel,
cancelled_after_final (crashes Triton 2.51).
Exceptions the Python API raises are printed as "PROBE <mode>: <text>".
"""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def log(mode, text):
    print(f"PROBE {mode}: {text}", flush=True)


def response(i=0):
    return pb_utils.InferenceResponse(
        output_tensors=[
            pb_utils.Tensor("OUT", np.array([i, i + 1, i + 2], dtype=np.int32)),
            pb_utils.Tensor("TEXT", np.array([b"a%d" % i, b"b"], dtype=np.object_)),
            pb_utils.Tensor("FP", np.array([0.5 + i], dtype=np.float32)),
        ]
    )


def error(text):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(text))


def attempt(mode, what, fn):
    try:
        fn()
        log(mode, f"{what}: ok")
    except Exception as e:  # noqa: BLE001 - the text is what we are after
        log(mode, f"{what}: {type(e).__name__}: {e}")


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().reshape(-1)[0].decode()
            n_tensor = pb_utils.get_input_tensor_by_name(request, "N")
            n = 2 if n_tensor is None else int(n_tensor.as_numpy().reshape(-1)[0])
            sender = request.get_response_sender()
            if mode == "echo":
                seen = {"parameters": json.loads(request.parameters()), "id": request.request_id(), "inputs": {}}
                for tensor in request.inputs():
                    value = tensor.as_numpy()
                    seen["inputs"][tensor.name()] = {
                        "shape": list(value.shape),
                        "dtype": str(value.dtype),
                        "value": [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value.reshape(-1).tolist()],
                    }
                alpha = pb_utils.Tensor("alpha", np.array([json.dumps(seen).encode()], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[alpha]), flags=FINAL)
            elif mode == "shapes":
                tensors = [
                    pb_utils.Tensor("M", np.array([[1, 2], [3, 4]], dtype=np.int32)),
                    pb_utils.Tensor("FP", np.array(2.5, dtype=np.float32)),
                    pb_utils.Tensor("TEXT", np.array([[b"x"]], dtype=np.object_)),
                    pb_utils.Tensor("alpha", np.array([b"\xc3\xa9\"quoted\"\n"], dtype=np.object_)),
                ]
                sender.send(pb_utils.InferenceResponse(output_tensors=tensors), flags=FINAL)
            elif mode == "slow":
                threading.Thread(target=self.slow, args=(sender, n), daemon=True).start()
            elif mode == "multi":
                for i in range(n):
                    sender.send(response(i))
                sender.send(flags=FINAL)
            elif mode == "one":
                sender.send(response())
                sender.send(flags=FINAL)
            elif mode == "none":
                sender.send(flags=FINAL)
            elif mode == "final_with_response":
                sender.send(response(0))
                sender.send(response(1), flags=FINAL)
            elif mode == "error_first":
                sender.send(error("probe error before the first response"))
                sender.send(flags=FINAL)
            elif mode == "error_after_first":
                sender.send(response())
                sender.send(error("probe error after the first response"))
                sender.send(flags=FINAL)
            elif mode == "error_final":
                sender.send(response())
                sender.send(error("probe error with the final flag"), flags=FINAL)
            elif mode == "raise":
                raise RuntimeError("probe exception in decoupled execute")
            elif mode == "raise_after_send":
                sender.send(response())
                raise RuntimeError("probe exception after a response was sent")
            elif mode == "return_list":
                return [response()]
            elif mode == "send_after_final":
                sender.send(response())
                sender.send(flags=FINAL)
                attempt(mode, "send(response) after final", lambda: sender.send(response()))
                attempt(mode, "send(flags=FINAL) after final", lambda: sender.send(flags=FINAL))
            elif mode == "cancelled_after_final":
                # Triton 2.51 crashes here (SIGSEGV in TRITONBACKEND_ResponseFactoryIsCancelled).
                sender.send(flags=FINAL)
                attempt(mode, "is_cancelled() after final", lambda: log(mode, f"is_cancelled={sender.is_cancelled()}"))
            elif mode == "cancel":
                threading.Thread(target=self.wait_cancel, args=(request, sender), daemon=True).start()
            else:
                sender.send(error(f"unknown MODE {mode!r}"), flags=FINAL)
        return None

    def slow(self, sender, n):
        for i in range(n):
            time.sleep(0.3)
            sender.send(response(i))
        time.sleep(0.3)
        sender.send(flags=FINAL)

    def wait_cancel(self, request, sender):
        mode = "cancel"
        sender.send(response())
        start = time.time()
        while time.time() - start < 10:
            if request.is_cancelled() or sender.is_cancelled():
                break
            time.sleep(0.01)
        log(mode, f"after {time.time() - start:.2f}s request.is_cancelled()={request.is_cancelled()} sender.is_cancelled()={sender.is_cancelled()}")
        attempt(mode, "send(response) after cancel", lambda: sender.send(response(1)))
        attempt(mode, "send(flags=FINAL) after cancel", lambda: sender.send(flags=FINAL))
