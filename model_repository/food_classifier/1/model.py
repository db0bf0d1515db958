"""food_classifier: the Triton tutorial's Python model, on Serval.

Each request carries base64-encoded images in a BYTES tensor INPUT_IMAGE of shape [batch, 1]. The
model decodes them with Pillow, resizes to 224x224, normalises with numpy (ImageNet mean and
std, channels first), runs the whole batch through `image_classifier` (an ONNX model in the same
repository) with one BLS request, and answers each image with its top Food-11 label (FOOD_LABEL,
BYTES) and that label's probability (PROBABILITY, FP32), both of shape [batch, 1].
"""

import base64
import binascii
import io
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image, UnidentifiedImageError

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.instance_kind = args["model_instance_kind"]
        self.device_id = args["model_instance_device_id"]
        label_config = pb_utils.get_output_config_by_name(self.model_config, "FOOD_LABEL")
        prob_config = pb_utils.get_output_config_by_name(self.model_config, "PROBABILITY")
        self.label_dtype = pb_utils.triton_string_to_numpy(label_config["data_type"])
        self.prob_dtype = pb_utils.triton_string_to_numpy(prob_config["data_type"])
        with open(os.path.join(args["model_repository"], "labels.txt"), encoding="utf-8") as f:
            self.labels = [line.strip() for line in f if line.strip()]

    @staticmethod
    def preprocess(encoded):
        """base64 image bytes -> FP32 [3, 224, 224], normalised."""
        raw = base64.b64decode(encoded, validate=True)
        with Image.open(io.BytesIO(raw)) as image:
            pixels = np.asarray(image.convert("RGB").resize((224, 224), Image.BILINEAR), dtype=np.float32)
        return ((pixels / 255.0 - MEAN) / STD).transpose(2, 0, 1)

    def execute(self, requests):
        responses = [None] * len(requests)
        images = []  # every image of every request, one BLS batch
        owners = []  # (request index, row count)
        for i, request in enumerate(requests):
            encoded = pb_utils.get_input_tensor_by_name(request, "INPUT_IMAGE").as_numpy()
            try:
                rows = [self.preprocess(e) for e in encoded.reshape(-1)]
            except (binascii.Error, ValueError, UnidentifiedImageError, OSError) as e:
                responses[i] = pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"INPUT_IMAGE is not a base64-encoded image: {e}", pb_utils.TritonError.INVALID_ARG)
                )
                continue
            images.extend(rows)
            owners.append((i, len(rows)))

        if images:
            batch = pb_utils.Tensor("INPUT", np.stack(images))
            result = pb_utils.InferenceRequest(
                model_name="image_classifier", requested_output_names=["OUTPUT"], inputs=[batch]
            ).exec()
            if result.has_error():
                raise pb_utils.TritonModelException(result.error().message())
            scores = pb_utils.get_output_tensor_by_name(result, "OUTPUT").as_numpy()
            top = scores.argmax(axis=1)
            start = 0
            for i, n in owners:
                best = top[start : start + n]
                labels = np.array([[self.labels[k].encode("utf-8")] for k in best], dtype=self.label_dtype)
                probs = scores[np.arange(start, start + n), best].astype(self.prob_dtype).reshape(n, 1)
                responses[i] = pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("FOOD_LABEL", labels), pb_utils.Tensor("PROBABILITY", probs)]
                )
                start += n
        return responses

    def finalize(self):
        pass
