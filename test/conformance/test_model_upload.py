"""Model upload through the repository load API, as tritonclient sends it:
load_model(name, config=<JSON>, files={"file:<path>": bytes}) — HTTP: base64 strings in
`parameters`, gRPC: bytes_param. As Triton (model_repository_manager.cc, LocalizeRepoAgent): the
files go into a fresh temporary model folder that replaces the repository's folder for that model,
a config is required, every path stays inside the folder, a later load without files loads from
the repository again, and the folder goes when the model is unloaded or replaced. Triton's client
text for a refused upload is "failed to poll from model repository" (INTERNAL); Serval adds the
reason Triton only logs."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from serval_helpers import expect_triton_error, make_client, module_for

REPO_ROOT = Path(__file__).resolve().parents[2]
ONNX = (REPO_ROOT / "model_repository" / "identity_fp32" / "1" / "model.onnx").read_bytes()
PY = (REPO_ROOT / "test" / "python_models" / "py_identity_fp32" / "1" / "model.py").read_bytes()


def fp32_config(name: str, backend: str, max_batch_size: int = 8) -> str:
    return json.dumps(
        {
            "name": name,
            "backend": backend,
            "max_batch_size": max_batch_size,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
            "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
        }
    )


def upload_dirs() -> set[str]:
    return set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "serval-upload-*")))


def identity(client, protocol, model):
    mod = module_for(protocol)
    x = np.arange(6, dtype=np.float32).reshape(1, 6) - 2.5
    inp = mod.InferInput("INPUT0", [1, 6], "FP32")
    inp.set_data_from_numpy(x)
    out = client.infer(model, [inp]).as_numpy("OUTPUT0")
    assert np.array_equal(out, x)


def max_batch(client, protocol, model) -> int:
    cfg = client.get_model_config(model)
    return int(cfg["max_batch_size"] if protocol == "http" else cfg.config.max_batch_size)


@pytest.fixture
def uclient(protocol, explicit_server):
    c = make_client(protocol, explicit_server)
    yield c
    c.close()


def test_onnx_upload_serves_and_its_folder_goes_at_unload(uclient, protocol):
    name = f"uploaded_{protocol}"
    before = upload_dirs()
    uclient.load_model(name, config=fp32_config(name, "onnxruntime"), files={"file:1/model.onnx": ONNX})
    assert uclient.is_model_ready(name)
    identity(uclient, protocol, name)
    new = upload_dirs() - before
    assert len(new) == 1
    (folder,) = new
    assert Path(folder, "1", "model.onnx").read_bytes() == ONNX
    uclient.unload_model(name)
    assert not uclient.is_model_ready(name)
    assert not Path(folder).exists()


def test_python_model_upload_serves(uclient, protocol):
    name = f"uploaded_py_{protocol}"
    uclient.load_model(name, config=fp32_config(name, "python"), files={"file:1/model.py": PY})
    try:
        identity(uclient, protocol, name)
    finally:
        uclient.unload_model(name)


def test_upload_replaces_the_repository_folder_until_loaded_without_files(uclient, protocol):
    # identity_fp32 is in the repository (max_batch_size 8); the upload says 4.
    before = upload_dirs()
    uclient.load_model("identity_fp32", config=fp32_config("identity_fp32", "onnxruntime", 4), files={"file:1/model.onnx": ONNX})
    try:
        assert max_batch(uclient, protocol, "identity_fp32") == 4
        identity(uclient, protocol, "identity_fp32")
        (folder,) = upload_dirs() - before
        # A new upload replaces the previous one; its folder goes.
        uclient.load_model(
            "identity_fp32", config=fp32_config("identity_fp32", "onnxruntime", 2), files={"file:1/model.onnx": ONNX}
        )
        assert max_batch(uclient, protocol, "identity_fp32") == 2
        assert not Path(folder).exists()
        assert len(upload_dirs() - before) == 1
        # A load without files loads the repository's folder again.
        uclient.load_model("identity_fp32")
        assert max_batch(uclient, protocol, "identity_fp32") == 8
        assert upload_dirs() - before == set()
    finally:
        uclient.unload_model("identity_fp32")


def test_refused_uploads_with_triton_texts_and_the_serving_model_stays(uclient, protocol):
    name = f"guarded_{protocol}"
    uclient.load_model(name, config=fp32_config(name, "onnxruntime"), files={"file:1/model.onnx": ONNX})
    before = upload_dirs()
    poll = f"failed to load '{name}', failed to poll from model repository"
    try:
        cfg = fp32_config(name, "onnxruntime")
        with expect_triton_error(protocol, "INTERNAL", poll, "Invalid file parameter 'file:../escape'", "must stay within model directory."):
            uclient.load_model(name, config=cfg, files={"file:1/model.onnx": ONNX, "file:../escape": b"x"})
        with expect_triton_error(protocol, "INTERNAL", poll, "Load parameter 'config' must be specified for model file override"):
            uclient.load_model(name, files={"file:1/model.onnx": ONNX})
        with expect_triton_error(protocol, "INTERNAL", poll, "Invalid file parameter 'file:'"):
            uclient.load_model(name, config=cfg, files={"file:": b"x"})
        with expect_triton_error(protocol, "INTERNAL", poll, "Invalid file parameter 'file:1/model.onnx/x', directory has been created as a file"):
            uclient.load_model(name, config=cfg, files={"file:1/model.onnx": ONNX, "file:1/model.onnx/x": b"x"})
        # A load that fails once its files are written (no model file for version 1) leaves nothing.
        with pytest.raises(InferenceServerException):
            uclient.load_model(name, config=cfg, files={"file:1/other.bin": b"x"})
        assert not Path("/tmp/escape").exists()
        assert upload_dirs() - before == set()
        # The upload that loaded first still serves.
        identity(uclient, protocol, name)
    finally:
        uclient.unload_model(name)


def test_grpc_file_parameter_must_be_bytes(explicit_server):
    """tritonclient always sends bytes; a hand-made request with a string_param file is refused
    with Triton's text."""
    import tritonclient.grpc as grpcclient
    from tritonclient.grpc import service_pb2

    c = grpcclient.InferenceServerClient(explicit_server.grpc_url)
    req = service_pb2.RepositoryModelLoadRequest(model_name="strfile")
    req.parameters["config"].string_param = fp32_config("strfile", "onnxruntime")
    req.parameters["file:1/model.onnx"].string_param = "not bytes"
    with pytest.raises(Exception) as e:
        c._client_stub.RepositoryModelLoad(req)
    assert "File parameter 'file:1/model.onnx' must have bytes type for its value" in str(e.value)
    c.close()
