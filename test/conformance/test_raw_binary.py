"""Triton's raw binary requests (binary tensor data extension: Inference-Header-Content-Length: 0,
the body is the single input's bytes) and the --http-max-input-size limit on inflated bodies, as
Triton's L0_http http_test.py / http_input_size_limit_test.py send them: plain HTTP (tritonclient
has no call for either), against the suite's server."""
import gzip
import json
import urllib.error
import urllib.request

import numpy as np


def _post(server, path, body, headers):
    req = urllib.request.Request(f"http://{server.http_url}{path}", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


RAW = {"Inference-Header-Content-Length": "0"}


def test_raw_binary_identity(server):
    data = np.arange(8, dtype=np.float32).tobytes()
    status, headers, body = _post(server, "/v2/models/identity_fp32/infer", data, RAW)
    assert status == 200, body
    header_size = int(headers["Inference-Header-Content-Length"])
    doc = json.loads(body[:header_size])
    assert doc["outputs"] == [
        {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 8], "parameters": {"binary_data_size": 32}}
    ]
    assert body[header_size:] == data


def test_raw_binary_multi_inputs(server):
    status, _, body = _post(server, "/v2/models/simple/infer", np.arange(32, dtype=np.int32).tobytes(), RAW)
    assert status == 400
    assert "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in" in body.decode()


def test_raw_binary_bytes_needs_shape_one(server):
    status, _, body = _post(server, "/v2/models/identity_string/infer", b"427", RAW)
    assert status == 400
    assert "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]" in body.decode()


def test_gzip_bomb_over_the_limit(server):
    # 100 MB of zeros in ~100 KB: over the default 64 MB limit once inflated.
    bomb = gzip.compress(bytes(100 * 1024 * 1024), compresslevel=9)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    status, _, body = _post(server, "/v2/models/identity_fp32/infer", bomb, headers)
    assert status == 400
    assert "exceeds the maximum allowed value" in body.decode()
    assert "Use --http-max-input-size to increase the limit" in body.decode()
