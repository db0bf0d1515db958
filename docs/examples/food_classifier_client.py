"""The Triton tutorial's client for food_classifier, unchanged but for the image path: sends one
base64-encoded image in a BYTES tensor of shape [1, 1] and prints the label and probability.

    .venv/bin/python docs/examples/food_classifier_client.py [IMAGE] [--grpc] [--url HOST:PORT]
"""

import argparse
import base64
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("image", nargs="?", default=str(Path(__file__).with_name("food.jpg")))
    parser.add_argument("--grpc", action="store_true")
    parser.add_argument("--url", default=None)
    args = parser.parse_args()

    with open(args.image, "rb") as f:
        base64_str = base64.b64encode(f.read()).decode("utf-8")

    client_module = grpcclient if args.grpc else httpclient
    client = client_module.InferenceServerClient(url=args.url or ("localhost:8001" if args.grpc else "localhost:8000"))
    inputs = [client_module.InferInput("INPUT_IMAGE", [1, 1], "BYTES")]
    inputs[0].set_data_from_numpy(np.array([[base64_str]], dtype=object))
    outputs = [client_module.InferRequestedOutput("FOOD_LABEL"), client_module.InferRequestedOutput("PROBABILITY")]

    result = client.infer("food_classifier", inputs, outputs=outputs)
    label = result.as_numpy("FOOD_LABEL")[0, 0]
    probability = result.as_numpy("PROBABILITY")[0, 0]
    print(f"{label.decode('utf-8')}: {probability:.4f}")


if __name__ == "__main__":
    main()
