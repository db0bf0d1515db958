"""tritonserver's repository options through the official clients (HTTP and gRPC): a second model
repository with --model-namespacing=true (the same name in both is ambiguous, with Triton's text),
--model-config-name (configs/<name>.pbtxt wins over config.pbtxt), and Triton's answer to load
requests naming no model folder."""
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from conftest import REPO_ROOT, _ManagedServer
from tritonclient.utils import InferenceServerException


@pytest.fixture(scope="module")
def namespaced_server():
    """Serval over model_repository plus a second repository holding another `simple` and a
    `simple_alt` whose configs/small.pbtxt sets max_batch_size 4, in explicit mode."""
    second = Path(tempfile.mkdtemp(prefix="serval-namespaces-"))
    try:
        src = REPO_ROOT / "model_repository" / "simple"
        shutil.copytree(src, second / "simple")
        alt = second / "simple_alt"
        shutil.copytree(src, alt)
        config = (src / "config.pbtxt").read_text().replace('name: "simple"', 'name: "simple_alt"')
        (alt / "config.pbtxt").write_text(config)
        (alt / "configs").mkdir()
        (alt / "configs" / "small.pbtxt").write_text(config.replace("max_batch_size: 8", "max_batch_size: 4"))
        managed = _ManagedServer(
            (
                "--model-repository", str(second),
                "--model-namespacing=true",
                "--model-config-name=small",
                "--model-control-mode=explicit",
                "--load-model=simple",
                "--load-model=simple_alt",
            ),
            log_name="serval-namespaces.log",
        )
        try:
            yield managed.start()
        finally:
            managed.stop()
    finally:
        shutil.rmtree(second, ignore_errors=True)


def _client(protocol, info):
    if protocol == "http":
        return httpclient.InferenceServerClient(info.http_url)
    return grpcclient.InferenceServerClient(info.grpc_url)


def _inputs(protocol):
    mod = httpclient if protocol == "http" else grpcclient
    ins = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    for i in ins:
        i.set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
    return ins


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_same_name_in_two_namespaces_is_ambiguous(namespaced_server, protocol):
    c = _client(protocol, namespaced_server)
    with pytest.raises(InferenceServerException) as e:
        c.infer("simple", _inputs(protocol))
    assert (
        "There are 2 identifiers of model 'simple' in global map, model namespace must be provided to resolve ambiguity."
        in e.value.message()
    )
    assert e.value.status() == ("400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT")
    # A name only one namespace holds serves as usual.
    out = c.infer("simple_alt", _inputs(protocol)).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, np.full((1, 16), 2, dtype=np.int32))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_index_lists_each_namespace(namespaced_server, protocol):
    c = _client(protocol, namespaced_server)
    rows = c.get_model_repository_index() if protocol == "http" else c.get_model_repository_index(as_json=True)["models"]
    simple = [r for r in rows if r["name"] == "simple"]
    assert [r.get("state") for r in simple] == ["READY", "READY"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_model_config_name(namespaced_server, protocol):
    c = _client(protocol, namespaced_server)
    cfg = c.get_model_config("simple_alt")
    mbs = cfg["max_batch_size"] if protocol == "http" else cfg.config.max_batch_size
    assert mbs == 4


@pytest.mark.parametrize("name", [" ", "   ", "..", "../model_repository", "a/b", ".hidden"])
def test_load_of_a_name_no_folder_answers_to(namespaced_server, name):
    # gRPC carries any name as is (HTTP would need it in the URL path).
    c = _client("grpc", namespaced_server)
    with pytest.raises(InferenceServerException) as e:
        c.load_model(name)
    assert e.value.message() == f"failed to load '{name}', failed to poll from model repository"
    assert e.value.status() == "StatusCode.INTERNAL"
