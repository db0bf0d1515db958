"""square_int32 (decoupled): IN = n sends n responses OUT = [n * n], then the final flag alone.

The responses are sent from a worker thread; execute returns None.
"""

import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.inflight = 0

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)[0])
            with self.lock:
                self.inflight += 1
            threading.Thread(target=self.stream, args=(request.get_response_sender(), n), daemon=True).start()
        return None

    def stream(self, sender, n):
        try:
            for _ in range(max(n, 0)):
                if sender.is_cancelled():
                    break
                out = pb_utils.Tensor("OUT", np.array([n * n], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.inflight -= 1
                self.done.notify_all()

    def finalize(self):
        with self.lock:
            self.done.wait_for(lambda: self.inflight == 0, timeout=30)
