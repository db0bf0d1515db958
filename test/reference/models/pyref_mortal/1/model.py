"""Side-by-side probe of a stub that dies: MODE "exit" ends the stub's process, anything else
is echoed. No config.pbtxt: auto_complete_config declares it."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "MODE", "data_type": "TYPE_STRING", "dims": [1]})
        auto_complete_model_config.add_output({"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]})
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().reshape(-1)[0]
            if mode == b"exit":
                os._exit(1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([mode], dtype=np.object_))]))
        return responses
