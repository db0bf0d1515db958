"""One job of the centralized-serving replay (tools/bench/seeds.ts, study 1).

A job classifies its share of the images, one image at a time, the way a pipeline step would:
open the image file, preprocess it to FP32 [1, 3, 224, 224], classify it, keep the top-1 class.

  --mode local    load the ONNX model into this process (onnxruntime from PyPI) and run it here
  --mode served   send each image to Serval over HTTP (the official tritonclient, binary tensors)

Images: the repository bundles one real photo (docs/examples/food.jpg, 160x160). Image k of the
run is a deterministic crop of it (size, offset and mirroring derived from k), so the M images
differ while every variant and every job sees exactly the same M inputs.

Prints one JSON line: images, top-1 classes and sums of |scores| (to compare variants), model
load / loop seconds, CPU seconds (this process and all its threads, from getrusage) and peak RSS.
"""

import argparse
import json
import resource
import sys
import time

import numpy as np
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def crop_box(k, width, height):
    """Image k's crop of the source photo: a square of 70-100% of the short side, shifted by k."""
    short = min(width, height)
    lo = (short * 7) // 10
    size = lo + (k * 7) % (short - lo + 1)
    x = (k * 13) % (width - size + 1)
    y = (k * 29) % (height - size + 1)
    return (x, y, x + size, y + size)


def preprocess(path, k):
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        crop = rgb.crop(crop_box(k, rgb.width, rgb.height))
        if k % 2:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        pixels = np.asarray(crop.resize((224, 224), Image.BILINEAR), dtype=np.float32)
    chw = ((pixels / 255.0 - MEAN) / STD).transpose(2, 0, 1)
    return np.ascontiguousarray(chw[np.newaxis], dtype=np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["local", "served"], required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--first", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--onnx", help="local: the model file")
    p.add_argument("--threads", type=int, default=0, help="local: intra-op threads (0: onnxruntime's default)")
    p.add_argument("--url", help="served: Serval's HTTP host:port")
    p.add_argument("--model", help="served: the model name")
    a = p.parse_args()

    t0 = time.monotonic()
    if a.mode == "local":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if a.threads > 0:
            opts.intra_op_num_threads = a.threads
        session = ort.InferenceSession(a.onnx, opts, providers=["CPUExecutionProvider"])
        input_name = session.get_inputs()[0].name

        def classify(x):
            return session.run(None, {input_name: x})[0]

    else:
        import tritonclient.http as http

        client = http.InferenceServerClient(a.url)
        config = client.get_model_config(a.model)
        input_name = config["input"][0]["name"]
        output_name = config["output"][0]["name"]
        wanted = [http.InferRequestedOutput(output_name, binary_data=True)]

        def classify(x):
            inp = http.InferInput(input_name, list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            return client.infer(a.model, [inp], outputs=wanted).as_numpy(output_name)

    t1 = time.monotonic()
    top1 = []
    sums = []
    for k in range(a.first, a.first + a.count):
        scores = classify(preprocess(a.image, k)).reshape(-1)
        top1.append(int(np.argmax(scores)))
        # With random weights the top-1 class hardly varies; the sum of |scores| checks the numbers.
        sums.append(float(np.abs(scores).sum()))
    t2 = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    json.dump(
        {
            "first": a.first,
            "images": len(top1),
            "top1": top1,
            "sums": sums,
            "load_s": t1 - t0,
            "loop_s": t2 - t1,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "maxrss_kib": usage.ru_maxrss,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
