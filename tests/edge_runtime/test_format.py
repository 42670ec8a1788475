"""The .flow format: round trips, alignment, zero-copy weights, and refusal of bad files."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_runtime import ModelFormatError, UnsupportedOpError, load
from edge_runtime.format import BUFFER_ALIGNMENT, FORMAT_VERSION, parse, read_file
from exporter import flow_writer, ir
from schemas import dtypes
from tests.edge_runtime.flow_models import mlp, mlp_reference

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mlp_file(tmp_path: Path) -> tuple[ir.Model, Path]:
    model = mlp()
    path = tmp_path / "mlp.flow"
    flow_writer.write(model, path)
    return model, path


def test_round_trip_runs_and_keeps_metadata(mlp_file) -> None:
    model, path = mlp_file
    loaded = load(path)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(loaded.run({"x": x})["y"], mlp_reference(model, x), rtol=1e-5)
    assert loaded.metadata == {"purpose": "tests"}
    assert [s.name for s in loaded.inputs] == ["x"] and loaded.inputs[0].shape == (-1, 4)
    assert "serving_default" in loaded.signatures


def test_weights_are_aligned_read_only_views_of_the_mapping(mlp_file) -> None:
    _, path = mlp_file
    model_def, mapping = read_file(path)
    constants = [t for t in model_def.subgraphs[0].tensors if t.data is not None]
    assert len(constants) == 3
    raw = np.frombuffer(mapping, dtype=np.uint8)
    for t in constants:
        assert not t.data.flags.writeable
        assert np.shares_memory(t.data, raw), f"{t.name} was copied out of the file"
        offset = t.data.__array_interface__["data"][0] - raw.__array_interface__["data"][0]
        assert offset % BUFFER_ALIGNMENT == 0


def test_attributes_of_every_type_round_trip() -> None:
    g = ir.Graph()
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (2,))
    g.values["labels"] = ir.Value("labels", data=np.array(["a", "bé"], dtype=object))
    g.inputs, g.outputs = ["x"], ["y"]
    attrs = {"i": 3, "f": 0.5, "s": "héllo", "ints": [1, -2], "floats": [0.25, 1.5], "strings": ["p", "q"],
             "t": np.arange(6, dtype=np.int32).reshape(2, 3)}
    g.nodes = [ir.Node("Relu", ["x"], ["y"], attrs, name="n")]
    model_def = parse(flow_writer.to_bytes(ir.Model(g)))
    op = model_def.subgraphs[0].operators[0]
    assert {k: v for k, v in op.attrs.items() if k != "t"} == {k: v for k, v in attrs.items() if k != "t"}
    np.testing.assert_array_equal(op.attrs["t"], attrs["t"])
    labels = [t for t in model_def.subgraphs[0].tensors if t.name == "labels"][0]
    assert labels.data.tolist() == ["a", "bé"]


def test_generated_code_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "regen_schema.py"), "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


# -- bad files ---------------------------------------------------------------------------------

def test_not_a_flow_file(tmp_path: Path) -> None:
    path = tmp_path / "x.flow"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelFormatError, match="file identifier"):
        load(path)


@pytest.mark.parametrize("size", [0, 3, 7])
def test_too_short(tmp_path: Path, size: int) -> None:
    path = tmp_path / "x.flow"
    path.write_bytes(b"FLOW"[:size])
    with pytest.raises(ModelFormatError, match="too short"):
        load(path)


def test_missing_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="cannot open"):
        load(tmp_path / "absent.flow")


def test_truncated_data_section_names_the_buffer(mlp_file) -> None:
    _, path = mlp_file
    data = path.read_bytes()
    with pytest.raises(ModelFormatError, match=r"buffer \d+ .*runs past the end"):
        parse(data[:-16])


def test_newer_format_version_says_which_version_is_needed(monkeypatch) -> None:
    import exporter.flow_writer as writer

    monkeypatch.setattr(writer, "FORMAT_VERSION", FORMAT_VERSION + 1)
    data = writer.to_bytes(mlp())
    with pytest.raises(ModelFormatError, match=f"version {FORMAT_VERSION + 1} is newer"):
        parse(data)


def test_hand_corrupted_indices_are_named() -> None:
    model = mlp()
    model.graph.nodes[0].inputs = ["x", "w1"]
    data = bytearray(flow_writer.to_bytes(model))
    model_def = parse(bytes(data))
    # Point the first operator's first input far past the tensor table: find its inputs vector
    # (length prefix 2, then the two tensor indices) and patch the first index.
    op = model_def.subgraphs[0].operators[0]
    needle = np.array([2, *op.inputs], dtype="<i4").tobytes()
    at = bytes(data).find(needle)
    assert at > 0
    data[at + 4:at + 8] = np.array([10_000], dtype="<i4").tobytes()
    with pytest.raises(ModelFormatError, match="refers to tensor 10000"):
        parse(bytes(data))


def test_unknown_op_in_file_is_unsupported() -> None:
    model = mlp()
    model.graph.nodes[2].op_type = "FancyRelu"
    with pytest.raises(UnsupportedOpError, match="FancyRelu"):
        load(flow_writer.to_bytes(model))


GOOD = flow_writer.to_bytes(mlp())


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_files_fail_cleanly(data) -> None:
    """Random bit flips, byte rewrites, truncations and splices: only our errors, quickly."""
    blob = bytearray(GOOD)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["flip", "byte", "int32", "truncate"]))
        if not blob:
            break
        pos = data.draw(st.integers(0, len(blob) - 1))
        if kind == "flip":
            blob[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "byte":
            blob[pos] = data.draw(st.integers(0, 255))
        elif kind == "int32":
            value = data.draw(st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31), 2**16, 64]))
            blob[pos:pos + 4] = np.array([value], dtype="<i4").tobytes()[: len(blob) - pos]
        else:
            del blob[pos:]
    tracemalloc.start()  # NumPy reports its buffers to tracemalloc, so a runaway allocation shows
    try:
        try:
            model = load(bytes(blob))
        except (ModelFormatError, UnsupportedOpError):
            return
        # A mutation that still parses (say, in padding or a float weight) must still run or fail cleanly.
        x = np.ones((2, 4), np.float32)
        try:
            model.run({s.name: x for s in model.inputs if s.dtype == np.float32 and s.shape == (-1, 4)})
        except (ValueError, RuntimeError):
            pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 64 * 2**20, f"a {len(blob)}-byte file made the loader allocate {peak / 2**20:.0f} MiB"


def test_an_onnx_file_points_at_convert(tmp_path: Path) -> None:
    # a user's first try: `flowstack inspect model.onnx` (or load("model.onnx"))
    import onnx
    from onnx import helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    data = helper.make_model(graph).SerializeToString()
    for name in ("model.onnx", "renamed.flow"):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ModelFormatError, match=r"is an ONNX model, not a \.flow file: convert it first with "
                                                   r"`flowstack convert .*"):
            load(tmp_path / name)


def test_every_truncation_says_truncated(mlp_file) -> None:
    _, path = mlp_file
    data = path.read_bytes()
    for cut in range(8, len(data), 7):
        with pytest.raises(ModelFormatError, match="truncated"):
            parse(data[:cut])


def _flip_weight_byte(path: Path) -> bytes:
    model, _ = read_file(path)
    offset, length, _ = next(c for c in model.buffer_checksums if c[1])
    data = bytearray(path.read_bytes())
    data[offset + length // 2] ^= 0x10
    return bytes(data)


def test_buffers_carry_checksums_verified_when_read_whole(mlp_file, tmp_path):
    model, path = mlp_file
    parsed, _ = read_file(path, verify=True)
    assert len(parsed.buffer_checksums) > 1 and all(length == 0 or crc for _, length, crc in parsed.buffer_checksums)
    corrupt = _flip_weight_byte(path)
    with pytest.raises(ModelFormatError, match=r"buffer \d+ \(offset \d+, \d+ bytes\): checksum [0-9a-f]{8} does not match"):
        load(corrupt)  # bytes are read whole: verified by default
    bad = tmp_path / "bad.flow"
    bad.write_bytes(corrupt)
    load(bad)  # a mapped file is checked on request only (verifying reads every page)
    with pytest.raises(ModelFormatError, match="weights are corrupt"):
        load(bad, verify=True)
    assert load(corrupt, verify=False).inputs  # an explicit opt-out


def test_inspect_verify(mlp_file, tmp_path, capsys):
    from flowstack_cli.main import main

    _, path = mlp_file
    assert main(["inspect", str(path), "--verify"]) == 0
    assert "weight buffers match their CRC-32" in capsys.readouterr().out
    bad = tmp_path / "bad.flow"
    bad.write_bytes(_flip_weight_byte(path))
    assert main(["inspect", str(bad), "--verify"]) == 2
    assert "weights are corrupt" in capsys.readouterr().err
