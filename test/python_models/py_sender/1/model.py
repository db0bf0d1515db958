"""MODE: send_final (one response through the sender, with the final flag; execute returns None);
send_twice (a response, then a second send, which raises: the first is the answer and `report`
tells what the second raised); report."""

import numpy as np
import triton_python_backend_utils as pb_utils


def response(text):
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", np.array([text], dtype=np.object_))])


class TritonPythonModel:
    def initialize(self, args):
        self.recorded = "nothing"

    def execute(self, requests):
        out = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if mode == "send_final":
                sender.send(response("sent"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif mode == "send_twice":
                sender.send(response("first"))
                try:
                    sender.send(response("second"))
                    self.recorded = "no error"
                except Exception as e:
                    self.recorded = f"{type(e).__name__}: {e}"
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif mode == "report":
                out.append(response(self.recorded))
                continue
            out.append(None)
        # None for requests answered through the sender: with every request so answered, None.
        return out if any(r is not None for r in out) else None
