"""finalize() side by side: each instance appends a JSON line (its name, how many requests it ran)
to finalize.log in the model's folder, logs a line through pb_utils.Logger and prints one."""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        self.path = os.path.join(args["model_repository"], "finalize.log")
        self.count = 0

    def execute(self, requests):
        self.count += len(requests)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.count], np.int32))]) for _ in requests]

    def finalize(self):
        with open(self.path, "a") as f:
            f.write(json.dumps({"instance": self.name, "requests": self.count}) + "\n")
        pb_utils.Logger.log_info(f"pyref_final finalize {self.name}")
        print(f"pyref_final print {self.name}", flush=True)
