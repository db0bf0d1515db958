"""Ragged batching with the official clients, against the bundled ``ragged_sum``
(``allow_ragged_batch`` INPUT, batch inputs INDEX = BATCH_ACCUMULATED_ELEMENT_COUNT
and COUNT = BATCH_ELEMENT_COUNT, batch output DOUBLED =
BATCH_SCATTER_WITH_INPUT_SHAPE): requests of different lengths sent at the same
time share executions, and each gets the sum, mean and doubled elements of its
own INPUT, DOUBLED in its own INPUT's shape.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from serval_helpers import PROTOCOLS, make_client, make_input, make_output

MODEL = "ragged_sum"


def _stats(client, protocol: str) -> tuple[int, int]:
    s = client.get_inference_statistics(MODEL)
    entry = s["model_stats"][0] if protocol == "http" else s.model_stats[0]
    if protocol == "http":
        return int(entry["inference_count"]), int(entry["execution_count"])
    return int(entry.inference_count), int(entry.execution_count)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ragged_requests_batch_together(server, protocol):
    rng = np.random.default_rng(13)
    inputs = [rng.integers(-50, 50, size=(1, n)).astype(np.float32) for n in (3, 7, 1, 5)]
    results: list = [None] * len(inputs)
    with make_client(protocol, server) as c:
        before = _stats(c, protocol)

    def send(i: int) -> None:
        with make_client(protocol, server) as c:
            results[i] = c.infer(MODEL, [make_input(protocol, "INPUT", inputs[i])],
                                 outputs=[make_output(protocol, n) for n in ("SUM", "MEAN", "DOUBLED")])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    for x, r in zip(inputs, results):
        assert r is not None
        np.testing.assert_allclose(r.as_numpy("SUM"), [[x.sum()]], rtol=1e-6)
        np.testing.assert_allclose(r.as_numpy("MEAN"), [[x.mean()]], rtol=1e-5)
        doubled = r.as_numpy("DOUBLED")
        assert doubled.shape == x.shape
        np.testing.assert_array_equal(doubled, 2 * x)

    with make_client(protocol, server) as c:
        after = _stats(c, protocol)
    assert after[0] - before[0] == len(inputs)
    # Requests of four lengths, sent together, did not each run alone.
    assert after[1] - before[1] < len(inputs)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ragged_config(server, protocol):
    with make_client(protocol, server) as c:
        cfg = c.get_model_config(MODEL)
    if protocol == "http":
        assert cfg["input"][0]["allow_ragged_batch"] is True
        assert [b["kind"] for b in cfg["batch_input"]] == ["BATCH_ACCUMULATED_ELEMENT_COUNT", "BATCH_ELEMENT_COUNT"]
        assert cfg["batch_output"][0]["target_name"] == ["DOUBLED"]
    else:
        config = cfg.config
        assert config.input[0].allow_ragged_batch
        assert [b.target_name[0] for b in config.batch_input] == ["INDEX", "COUNT"]
        assert config.batch_output[0].source_input[0] == "INPUT"
