"""Sequence batching with the official clients: ``infer(..., sequence_id=,
sequence_start=, sequence_end=)`` over HTTP and gRPC, the gRPC stream's
``async_stream_infer`` and the asyncio client, against the bundled
``simple_sequence`` (direct strategy), ``simple_dyna_sequence`` (oldest, with
CORRID and END) and ``running_sum`` (implicit state).

The expected values are those of Triton's own example clients
(simple_{http,grpc}_sequence_sync_infer_client.py and
simple_grpc_sequence_stream_infer_client.py, with and without ``--dyna``):
sequences ``[0] + VALUES`` and ``[100] + -VALUES`` sent interleaved; the
first request of a sequence adds START (1), the last one of a dyna sequence
adds its correlation ID; a string ID works on simple_sequence. With ``-d`` the
examples send their string sequence (ID ``str(1002)``) to
``simple_string_dyna_sequence`` (a TYPE_STRING CORRID, which the model reads
as a number); a correlation ID of the other kind is refused with Triton's text.
"""

from __future__ import annotations

import asyncio
import queue
import uuid

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcaio

from serval_helpers import PROTOCOLS, expect_triton_error, make_client, make_input, make_output

VALUES = [11, 7, 5, 3, 2, 0, 1]
NEG = [-v for v in VALUES]
TIMEOUT = 60


def _inputs(protocol: str, value: int):
    return [make_input(protocol, "INPUT", np.full((1, 1), value, dtype=np.int32))]


def _send(client, protocol: str, model: str, sequence_id, value: int, start: bool, end: bool) -> int:
    result = client.infer(model, _inputs(protocol, value), outputs=[make_output(protocol, "OUTPUT")],
                          sequence_id=sequence_id, sequence_start=start, sequence_end=end)
    return int(result.as_numpy("OUTPUT")[0][0])


def _interleaved(client, protocol: str, model: str, sequences: list) -> list:
    """One request of each sequence in turn, as the examples' sequences overlap in the server."""
    outs = [[] for _ in sequences]
    for i in range(max(len(v) for _, v in sequences)):
        for k, (sid, values) in enumerate(sequences):
            if i < len(values):
                outs[k].append(_send(client, protocol, model, sid, values[i], i == 0, i == len(values) - 1))
    return outs


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_simple_sequence_sync(server, protocol):
    with make_client(protocol, server) as c:
        a, b, s = _interleaved(c, protocol, "simple_sequence",
                               [(1000, [0] + VALUES), (1001, [100] + NEG), (str(uuid.uuid4()), [20] + NEG)])
    assert a == [1] + VALUES
    assert b == [101] + NEG
    assert s == [21] + NEG


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_simple_dyna_sequence_sync(server, protocol):
    with make_client(protocol, server) as c:
        a, b = _interleaved(c, protocol, "simple_dyna_sequence", [(1000, [0] + VALUES), (1001, [100] + NEG)])
    # The dyna example adds the correlation ID to the last request of a sequence.
    assert a == [1] + VALUES[:-1] + [VALUES[-1] + 1000]
    assert b == [101] + NEG[:-1] + [NEG[-1] + 1001]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dyna_examples_string_sequence(server, protocol):
    """The examples' ``-d`` run: two integer sequences on simple_dyna_sequence and
    the string one (ID "1002") on simple_string_dyna_sequence, interleaved."""
    with make_client(protocol, server) as c:
        outs = [[], [], []]
        seqs = [("simple_dyna_sequence", 1000, [0] + VALUES), ("simple_dyna_sequence", 1001, [100] + NEG),
                ("simple_string_dyna_sequence", "1002", [20] + NEG)]
        for i in range(len(VALUES) + 1):
            for k, (model, sid, values) in enumerate(seqs):
                outs[k].append(_send(c, protocol, model, sid, values[i], i == 0, i == len(values) - 1))
    assert outs[0] == [1] + VALUES[:-1] + [VALUES[-1] + 1000]
    assert outs[1] == [101] + NEG[:-1] + [NEG[-1] + 1001]
    assert outs[2] == [21] + NEG[:-1] + [NEG[-1] + 1002]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_corrid_type_mismatch(server, protocol):
    """Triton's qa test_corrid_data_type: a string ID for an integer CORRID, and an
    integer ID for a string one, are refused."""
    with make_client(protocol, server) as c:
        with expect_triton_error(protocol, "INVALID_ARG",
                                 "sequence batching control 'CORRID' data-type is 'BYTES', but model "
                                 "'simple_dyna_sequence' expects 'UINT64'"):
            _send(c, protocol, "simple_dyna_sequence", "corrid", 1, True, False)
        with expect_triton_error(protocol, "INVALID_ARG",
                                 "sequence batching control 'CORRID' data-type is 'UINT64', but model "
                                 "'simple_string_dyna_sequence' expects 'BYTES'"):
            _send(c, protocol, "simple_string_dyna_sequence", 123, 1, True, False)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_running_sum_implicit_state(server, protocol):
    with make_client(protocol, server) as c:
        a, b = _interleaved(c, protocol, "running_sum", [(77, [0] + VALUES), ("run-78", [100] + NEG)])
    assert a == list(np.cumsum([0] + VALUES))
    assert b == list(np.cumsum([100] + NEG))


@pytest.mark.parametrize("model,dyna", [("simple_sequence", False), ("simple_dyna_sequence", True)])
def test_sequences_on_the_grpc_stream(server, grpc_url, model, dyna):
    """The stream example: three sequences written back to back without waiting."""
    results: queue.Queue = queue.Queue()
    sequences = [(2000, [0] + VALUES), (2001, [100] + NEG)]
    if not dyna:
        sequences.append((str(uuid.uuid4()), [20] + NEG))
    with make_client("grpc", server) as c:
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        try:
            for sid, values in sequences:
                for i, v in enumerate(values):
                    c.async_stream_infer(model, _inputs("grpc", v), outputs=[make_output("grpc", "OUTPUT")],
                                         request_id=f"{sid}_{i}", sequence_id=sid,
                                         sequence_start=(i == 0), sequence_end=(i == len(values) - 1))
            got = {}
            for _ in range(sum(len(v) for _, v in sequences)):
                result, error = results.get(timeout=TIMEOUT)
                assert error is None, error
                sid, _, i = result.get_response().id.rpartition("_")
                got.setdefault(sid, []).append((int(i), int(result.as_numpy("OUTPUT")[0][0])))
        finally:
            c.stop_stream()
    for sid, values in sequences:
        outs = got[str(sid)]
        # Each sequence's responses come in its own order.
        assert [i for i, _ in outs] == list(range(len(values)))
        expected = [values[0] + 1] + values[1:]
        if dyna:
            expected[-1] += sid
        assert [v for _, v in outs] == expected


def test_sequences_with_the_asyncio_client(server, grpc_url):
    async def main():
        async with grpcaio.InferenceServerClient(grpc_url) as c:
            async def run(sid, values):
                outs = []
                for i, v in enumerate(values):
                    r = await c.infer("running_sum", _inputs("grpc", v), sequence_id=sid,
                                      sequence_start=(i == 0), sequence_end=(i == len(values) - 1))
                    outs.append(int(r.as_numpy("OUTPUT")[0][0]))
                return outs
            return await asyncio.gather(*(run(3000 + k, [k] * 6) for k in range(8)))

    for k, outs in enumerate(asyncio.run(main())):
        assert outs == [k * (i + 1) for i in range(6)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequence_errors(server, protocol):
    with make_client(protocol, server) as c:
        with expect_triton_error(protocol, "INVALID_ARG",
                                 "inference request for sequence 9999 to model 'simple_sequence' must specify "
                                 "the START flag on the first request of the sequence"):
            _send(c, protocol, "simple_sequence", 9999, 1, False, False)
        with expect_triton_error(protocol, "INVALID_ARG",
                                 "inference request to model 'simple_sequence' must specify a non-zero or "
                                 "non-empty correlation ID"):
            c.infer("simple_sequence", _inputs(protocol, 1))
        # After END the ID is free: a request without START is refused again.
        _send(c, protocol, "simple_sequence", 4321, 1, True, True)
        with expect_triton_error(protocol, "INVALID_ARG", "must specify the START flag"):
            _send(c, protocol, "simple_sequence", 4321, 1, False, True)


def test_sequence_extension_listed(server):
    assert "sequence" in server.extensions
