"""text_generator (decoupled): a canned, deterministic "language model" for streaming demos.

The answer is a template around the prompt ("You said: <prompt>. ..."); each response carries one
word (with its leading space after the first) in text_output, delay_ms (default 50) apart, up to
max_tokens words (default: all). The final flag is sent alone; cancellation stops the stream.
"""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

TEMPLATE = "You said: {prompt}. This is a canned answer streamed one word at a time by a decoupled Python model."


def optional_int(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else int(tensor.as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def initialize(self, args):
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.inflight = 0

    def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            prompt = prompt.decode("utf-8", "replace") if isinstance(prompt, bytes) else str(prompt)
            words = TEMPLATE.format(prompt=prompt.strip()).split()
            max_tokens = optional_int(request, "max_tokens", len(words))
            delay_ms = optional_int(request, "delay_ms", 50)
            with self.lock:
                self.inflight += 1
            args = (request.get_response_sender(), words[: max(max_tokens, 0)], delay_ms)
            threading.Thread(target=self.stream, args=args, daemon=True).start()
        return None

    def stream(self, sender, words, delay_ms):
        try:
            for i, word in enumerate(words):
                time.sleep(max(delay_ms, 0) / 1000)
                if sender.is_cancelled():
                    break
                token = word if i == 0 else " " + word
                out = pb_utils.Tensor("text_output", np.array([token.encode("utf-8")], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.inflight -= 1
                self.done.notify_all()

    def finalize(self):
        with self.lock:
            self.done.wait_for(lambda: self.inflight == 0, timeout=30)
