"""Request bodies sent with Transfer-Encoding: chunked (raw sockets: tritonclient always sends a
Content-Length). A raw binary request (Inference-Header-Content-Length: 0) and a binary-extension
request are accepted chunked, as Triton accepts them; Triton 2.73's cap of 65536 non-empty chunks
per body (http_server.cc kMaxChunkedChunks) and its text, as its own L0 test drives it."""

from __future__ import annotations

import json
import socket

import numpy as np

MAX_CHUNKS = 65536
OVER = f"Chunked request body exceeds maximum of {MAX_CHUNKS} non-empty chunks. Send fewer or larger HTTP chunks."


def _exchange(server, path: str, headers: dict[str, str], chunks: list[bytes]) -> tuple[int, dict, bytes]:
    host, port = server.http_url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        s.sendall(head.encode() + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n")
        raw = b""
        while True:
            got = s.recv(1 << 16)
            if not got:
                break
            raw += got
    top, _, body = raw.partition(b"\r\n\r\n")
    lines = top.decode("latin1").split("\r\n")
    hdrs = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), hdrs, body


def test_raw_binary_body_sent_chunked(server):
    data = np.arange(8, dtype=np.float32) * 1.5
    raw = data.tobytes()
    status, hdrs, body = _exchange(
        server, "/v2/models/identity_fp32/infer", {"Inference-Header-Content-Length": "0"}, [raw[:5], raw[5:19], raw[19:]]
    )
    assert status == 200, body
    n = int(hdrs["inference-header-content-length"])
    doc = json.loads(body[:n])
    assert doc["outputs"][0]["shape"] == [1, 8]
    assert np.array_equal(np.frombuffer(body[n:], dtype=np.float32), data)


def test_binary_extension_body_sent_chunked(server):
    data = np.arange(4, dtype=np.float32)
    head = json.dumps(
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}]}
    ).encode()
    whole = head + data.tobytes()
    chunks = [whole[i : i + 7] for i in range(0, len(whole), 7)]
    status, _, body = _exchange(server, "/v2/models/identity_fp32/infer", {"Inference-Header-Content-Length": str(len(head))}, chunks)
    assert status == 200, body
    assert json.loads(body)["outputs"][0]["data"] == [0.0, 1.0, 2.0, 3.0]


def test_chunk_count_limit(server):
    # At the limit the body is read (and, being 'AAAA...', is not JSON); one more chunk is refused.
    status, _, body = _exchange(server, "/v2/models/simple/infer", {"Content-Type": "application/octet-stream"}, [b"A"] * MAX_CHUNKS)
    assert status == 500 and b"failed to parse the request JSON buffer" in body, body
    status, _, body = _exchange(server, "/v2/models/simple/infer", {"Content-Type": "application/octet-stream"}, [b"A"] * (MAX_CHUNKS + 1))
    assert status == 400, body
    assert json.loads(body) == {"error": OVER}
    # The server answers the next request as ever.
    status, _, _ = _exchange(server, "/v2/models/identity_fp32/infer", {"Inference-Header-Content-Length": "0"}, [b"\0" * 4])
    assert status == 200
