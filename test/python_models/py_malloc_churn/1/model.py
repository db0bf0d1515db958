"""Allocates BLOCKS arrays of 1 MiB at once (every page written), frees them, and answers FAULTS:
the process's minor page faults meanwhile, and PID: the stub's process id. What the stub's
allocator does with freed memory (stub-malloc) decides whether the next execution faults again."""
import os
import resource

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            blocks = int(pb_utils.get_input_tensor_by_name(request, "BLOCKS").as_numpy().reshape(-1)[0])
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            held = [np.ones(1 << 18, np.float32) for _ in range(blocks)]
            del held
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("FAULTS", np.array([faults], np.int64)),
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                    ]
                )
            )
        return responses
