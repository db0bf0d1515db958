"""postprocess: food_pipeline's last step.

SCORES (FP32, [batch, 11]) are image_classifier's class probabilities (its graph ends in a softmax).
Each row is answered with its most likely Food-11 class: FOOD_LABEL (BYTES, [batch, 1]), the class
name from labels.txt (image_classifier's labels), and PROBABILITY (FP32, [batch, 1]).
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.label_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "FOOD_LABEL")["data_type"])
        self.prob_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "PROBABILITY")["data_type"])
        with open(os.path.join(args["model_repository"], "labels.txt"), encoding="utf-8") as f:
            self.labels = [line.strip() for line in f if line.strip()]

    def execute(self, requests):
        responses = []
        for request in requests:
            scores = pb_utils.get_input_tensor_by_name(request, "SCORES").as_numpy()
            if scores.shape[-1] != len(self.labels):
                error = pb_utils.TritonError(
                    f"SCORES has {scores.shape[-1]} classes, labels.txt {len(self.labels)}", pb_utils.TritonError.INVALID_ARG
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            best = scores.argmax(axis=1)
            labels = np.array([[self.labels[k].encode("utf-8")] for k in best], dtype=self.label_dtype)
            probabilities = scores[np.arange(len(best)), best].astype(self.prob_dtype).reshape(-1, 1)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("FOOD_LABEL", labels), pb_utils.Tensor("PROBABILITY", probabilities)]
                )
            )
        return responses
