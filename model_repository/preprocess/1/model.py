"""preprocess: food_pipeline's first step.

INPUT_IMAGE (BYTES, [batch, 1]) holds images: base64-encoded, as the Triton tutorial's client sends
them, or the image file's own bytes (what perf_analyzer sends for a {"b64": ...} input). Each is
decoded with Pillow, resized to 224x224, normalised with numpy (ImageNet mean and std) and laid out
channels first: IMAGE is FP32 [batch, 3, 224, 224], what image_classifier takes.
"""

import base64
import binascii
import io
import json

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image, UnidentifiedImageError

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def image_bytes(element):
    """The image file's bytes: base64-decoded when the element is base64 text, else as given."""
    try:
        return base64.b64decode(element, validate=True)
    except (binascii.Error, ValueError):
        return bytes(element)


def normalised(element):
    with Image.open(io.BytesIO(image_bytes(element))) as image:
        pixels = np.asarray(image.convert("RGB").resize((224, 224), Image.BILINEAR), dtype=np.float32)
    return ((pixels / 255.0 - MEAN) / STD).transpose(2, 0, 1)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "IMAGE")["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            encoded = pb_utils.get_input_tensor_by_name(request, "INPUT_IMAGE").as_numpy()
            try:
                images = np.stack([normalised(e) for e in encoded.reshape(-1)]).astype(self.dtype)
            except (UnidentifiedImageError, OSError, ValueError) as e:
                error = pb_utils.TritonError(f"INPUT_IMAGE is not an image: {e}", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("IMAGE", images)]))
        return responses
