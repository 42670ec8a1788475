"""The wire format and the step table, without a cluster."""

from __future__ import annotations

import json
import struct
import threading
import time

import numpy as np
import pytest

from trainer.distributed import wire
from trainer.distributed.errors import AbortedError, DeadlineExceededError
from trainer.distributed.rendezvous import StepTable


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_tensors_survive_any_chunking(chunk):
    tensors = {"a": np.arange(100, dtype=np.float64).reshape(10, 10), "b": np.array(True), "c": np.zeros((0, 3)),
               "d": np.array([b"ab", b"c"]), "e": np.arange(9, dtype=np.int8)[::2]}
    chunks = list(wire.encode({"k": [1, 2]}, tensors, chunk_bytes=chunk))
    assert all(len(c) <= chunk for c in chunks[1:])  # the first also carries the header
    header, out = wire.decode(chunks)
    assert header["k"] == [1, 2]
    for name, value in tensors.items():
        assert out[name].dtype == value.dtype and out[name].shape == value.shape
        np.testing.assert_array_equal(out[name], value)


def test_object_arrays_are_refused():
    with pytest.raises(wire.WireError, match="dtype object"):
        list(wire.encode({}, {"x": np.array([object()])}))


def raw(header: dict) -> bytes:
    body = json.dumps(header).encode()
    return struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("chunks, message", [
    ([], "empty message"),
    ([b"\x01"], "shorter than its header length field"),
    ([b"\xff\x00\x00\x00{}"], "runs past the first chunk"),
    ([b"\x02\x00\x00\x00[]"], "not a JSON object"),
    ([raw({"tensors": [{"name": "x", "dtype": "|O", "shape": [1], "nbytes": 8}]})], "not allowed"),
    ([raw({"tensors": [{"name": "x", "dtype": "<f4", "shape": [3], "nbytes": 8}]})], "do not make 8 bytes"),
    ([raw({"tensors": [{"name": "x", "dtype": "<f4", "shape": [2], "nbytes": 8}]}) + b"1234"], "ended inside tensor 'x'"),
    ([wire.encode_one({}) + b"junk"], "more bytes than"),
])
def test_malformed_messages_say_what_is_wrong(chunks, message):
    with pytest.raises(wire.WireError, match=message):
        wire.decode(chunks)


def test_the_table_keeps_steps_apart_and_waits_with_a_deadline():
    table = StepTable("/job:ps/task:0")
    table.put(1, "k", "one")
    table.put(2, "k", "two")
    assert table.take(2, "k", 1.0) == "two"
    assert table.take(1, "k", 1.0) == "one"
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="/job:ps/task:0: no value for 'k' in step 3 after 0.2 s"):
        table.take(3, "k", 0.2)
    assert time.monotonic() - t0 < 1.0


def test_abort_wakes_waiters_and_drops_late_values():
    table = StepTable("/job:worker/task:0")
    table.put(5, "early", 1)
    errors = []

    def wait():
        try:
            table.take(5, "k", 10.0)
        except AbortedError as e:
            errors.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.05)
    table.abort(5, "KernelError: boom on /job:ps/task:0")
    waiter.join(2.0)
    assert errors and "boom on /job:ps/task:0" in str(errors[0])
    table.put(5, "late", 2)
    assert table.pending() == 0


@pytest.mark.parametrize("module", ["trainer.distributed.wire", "trainer.distributed.cluster"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
