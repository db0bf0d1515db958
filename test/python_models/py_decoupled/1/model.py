"""MODE picks the behaviour (N, default 3, is a count where one is needed):

count        N responses (OUT = "r<i>", IDX = i) from a thread, then the final flag alone
inline       N responses sent inside execute, the last one with the final flag
zero         only the final flag
error_mid    a response, an error response (flags 0), a response, the final flag
error_final  an error response carrying the final flag
params       one response with parameters, then the final flag
raise        raises inside execute
return_list  returns a list of responses (wrong for a decoupled model)
after_final  sends the final flag, then tries to send again; `report` tells what that raised
bad_flags    sends a None response without the final flag; `report` tells what that raised
until_cancel sends a response every 20 ms until is_cancelled(); `report` tells how it ended
report       one response: the last thing recorded by after_final, bad_flags or until_cancel
"""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def response(text, idx=0, **kw):
    return pb_utils.InferenceResponse(
        output_tensors=[
            pb_utils.Tensor("OUT", np.array([text], dtype=np.object_)),
            pb_utils.Tensor("IDX", np.array([idx], dtype=np.int32)),
        ],
        **kw,
    )


FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        self.recorded = "nothing"

    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            n_in = pb_utils.get_input_tensor_by_name(request, "N")
            n = int(n_in.as_numpy()[0]) if n_in is not None else 3
            sender = request.get_response_sender()
            if mode == "count":
                threading.Thread(target=self.count, args=(sender, n)).start()
            elif mode == "inline":
                for i in range(n):
                    sender.send(response(f"r{i}", i), flags=FINAL if i == n - 1 else 0)
            elif mode == "zero":
                sender.send(flags=FINAL)
            elif mode == "error_mid":
                sender.send(response("before", 0))
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("a bad step", pb_utils.TritonError.INVALID_ARG)))
                sender.send(response("after", 2))
                sender.send(flags=FINAL)
            elif mode == "error_final":
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the end is an error")), flags=FINAL)
            elif mode == "params":
                sender.send(response("p", 0, parameters={"answer": 42, "kind": "text", "ok": True}))
                sender.send(flags=FINAL)
            elif mode == "raise":
                raise pb_utils.TritonModelException("raised inside execute")
            elif mode == "return_list":
                return [response("x")]
            elif mode == "after_final":
                sender.send(response("only", 0), flags=FINAL)
                self.recorded = self.attempt(lambda: sender.send(response("late", 1)))
            elif mode == "bad_flags":
                self.recorded = self.attempt(lambda: sender.send(None, flags=0))
                sender.send(flags=FINAL)
            elif mode == "until_cancel":
                self.recorded = "running"
                threading.Thread(target=self.until_cancel, args=(request, sender)).start()
            elif mode == "report":
                sender.send(response(self.recorded, 0), flags=FINAL)
        return None

    @staticmethod
    def attempt(fn):
        try:
            fn()
            return "no error"
        except Exception as e:  # the text Triton's API raises is what the test checks
            return f"{type(e).__name__}: {e}"

    def count(self, sender, n):
        for i in range(n):
            time.sleep(0.01)
            sender.send(response(f"r{i}", i))
        sender.send(flags=FINAL)

    def until_cancel(self, request, sender):
        sent = 0
        deadline = time.monotonic() + 10
        while not sender.is_cancelled() and time.monotonic() < deadline:
            sender.send(response(f"tick{sent}", sent))
            sent += 1
            time.sleep(0.02)
        self.recorded = f"cancelled={request.is_cancelled()} sender={sender.is_cancelled()} after={sent}"
        sender.send(flags=FINAL)
