"""repeat_int32 (decoupled): streams IN back one element per response.

For each request a worker thread sleeps WAIT ms, then for each i sleeps DELAY[i] ms and sends
OUT = [IN[i]], IDX = [i]; it ends with the final flag alone. A cancelled request stops early
(the final flag is still sent). execute returns None: responses go through the sender.
"""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.inflight = 0

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().astype(np.int32)
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy().astype(np.uint32)
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy().astype(np.uint32)
            sender = request.get_response_sender()
            if delays.size < values.size:
                sender.send(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(f"DELAY has {delays.size} elements, IN {values.size}")
                    ),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            with self.lock:
                self.inflight += 1
            threading.Thread(target=self.stream, args=(sender, values, delays, int(wait[0])), daemon=True).start()
        return None

    def stream(self, sender, values, delays, wait_ms):
        try:
            time.sleep(wait_ms / 1000)
            for i, value in enumerate(values):
                time.sleep(int(delays[i]) / 1000)
                if sender.is_cancelled():
                    break
                out = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
                idx = pb_utils.Tensor("IDX", np.array([i], dtype=np.uint32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.inflight -= 1
                self.done.notify_all()

    def finalize(self):
        # Let the streams in flight finish before the model goes away.
        with self.lock:
            self.done.wait_for(lambda: self.inflight == 0, timeout=30)
