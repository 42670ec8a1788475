"""The ONNX element types NumPy lacks (bfloat16, float8, float4, int4/uint4, int2/uint2), held by
ml_dtypes: .flow storage (sub-byte types packed), casts with ONNX's saturation, (de)quantization,
bfloat16 arithmetic, and the error without ml_dtypes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from edge_runtime import ModelFormatError, load
from edge_runtime.kernels import get_kernel
from exporter import flow_writer, ir
from schemas import dtypes, get_schema
from schemas.fb.Model import Model as FbModel
from tests.import_guard import edge_only_imports

F32 = np.float32
ROOT = Path(__file__).resolve().parents[2]


def run(op: str, *args, **attrs):
    schema = get_schema(op)
    args = list(args) + [None] * ((schema.max_inputs or len(args)) - len(args))
    return get_kernel(op)(*args, xp=np, **schema.resolve_attrs(attrs))


def _constant_model(weight: np.ndarray) -> bytes:
    """y = DequantizeLinear(weight, 1) + x: a model reading one stored constant."""
    g = ir.Graph("main")
    g.values["w"] = ir.Value("w", data=weight)
    g.values["s"] = ir.Value("s", data=np.array(1.0, F32))
    g.values["x"] = ir.Value("x", dtypes.FLOAT, weight.shape)
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes = [ir.Node("DequantizeLinear", ["w", "s"], ["d"], name="dq"), ir.Node("Add", ["d", "x"], ["y"], name="add")]
    return flow_writer.to_bytes(ir.Model(g, opset_imports={"": 21}))


@pytest.mark.parametrize("dtype, bits", [(ml_dtypes.int4, 4), (ml_dtypes.uint4, 4), (ml_dtypes.int2, 2),
                                         (ml_dtypes.uint2, 2), (ml_dtypes.float4_e2m1fn, 4)])
def test_sub_byte_constants_are_stored_packed_and_load_unpacked(dtype, bits) -> None:
    info = ml_dtypes.iinfo(dtype) if dtype != ml_dtypes.float4_e2m1fn else None
    values = np.arange(info.min, info.max + 1) if info else np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -6, -0.5])
    weight = np.resize(values, (7, 9)).astype(dtype)  # 63 elements: the last byte half or partly filled
    data = _constant_model(weight)
    assert _weight_buffer(data)[1] == (63 * bits + 7) // 8
    model = load(data, dequantize="per_call")
    np.testing.assert_array_equal(model.run({"x": np.zeros((7, 9), F32)})["y"], weight.astype(F32))


def test_an_int4_weight_takes_an_eighth_of_its_float32_size_on_disk() -> None:
    weight = np.resize(np.arange(-8, 8), (256, 256)).astype(ml_dtypes.int4)
    int4, float32 = len(_constant_model(weight)), len(_constant_model(weight.astype(F32)))
    assert int4 < 256 * 256 // 2 + 4096 and float32 > 256 * 256 * 4
    assert float32 / int4 > 7


def _weight_buffer(data: bytes) -> tuple[int, int]:
    """(offset, length) of the file's largest buffer: the weight's."""
    fb = FbModel.GetRootAs(data, 0)
    return max(((fb.Buffers(i).Offset(), fb.Buffers(i).Length()) for i in range(fb.BuffersLength())), key=lambda b: b[1])


def test_a_truncated_packed_tensor_names_the_tensor() -> None:
    data = _constant_model(np.zeros((4, 6), ml_dtypes.int4))
    offset, length = _weight_buffer(data)
    assert length == 12
    with pytest.raises(ModelFormatError, match="truncated|runs past the end"):
        load(data[: offset + 8])


def test_a_packed_buffer_whose_length_does_not_match_names_the_tensor(monkeypatch) -> None:
    # The writer packs a (4, 6) int4 weight into 12 bytes; declare it (4, 8) instead: 16 needed.
    real_pack = flow_writer.packing.pack
    monkeypatch.setattr(flow_writer.packing, "pack", lambda array, bits: real_pack(array.reshape(-1)[:-4], bits))
    data = _constant_model(np.zeros((4, 6), ml_dtypes.int4))
    with pytest.raises(ModelFormatError, match=r"tensor \d+ \('w'\).*holds 10 bytes but shape \[4, 6\] of int4 packed 2 to a byte needs 12"):
        load(data)


def test_without_ml_dtypes_the_error_names_the_type_and_the_package(monkeypatch) -> None:
    data = _constant_model(np.zeros((4, 4), ml_dtypes.int4))
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` now raises ImportError
    with pytest.raises(ModelFormatError, match=r"'w'.*element type INT4 needs the ml_dtypes package: pip install ml_dtypes"):
        load(data)
    with pytest.raises(dtypes.MissingDTypePackage, match="BF16"):
        dtypes.to_numpy(dtypes.BFLOAT16)
    assert dtypes.to_numpy(dtypes.FLOAT) == F32  # NumPy's own types need nothing more


def test_on_a_device_without_ml_dtypes_only_models_using_its_types_fail(tmp_path) -> None:
    """In a process where only numpy and flatbuffers import (a phone), a float model runs and an
    int4 one is refused at load with the clear error; nothing imports ml_dtypes before that."""
    (tmp_path / "int4.flow").write_bytes(_constant_model(np.ones((2, 2), ml_dtypes.int4)))
    (tmp_path / "float.flow").write_bytes(_constant_model(np.ones((2, 2), np.int8)))
    script = edge_only_imports() + textwrap.dedent(f"""
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        import edge_runtime
        y = edge_runtime.load({str(tmp_path / "float.flow")!r}).run({{"x": np.zeros((2, 2), np.float32)}})["y"]
        assert y.tolist() == [[1, 1], [1, 1]], y
        try:
            edge_runtime.load({str(tmp_path / "int4.flow")!r})
        except edge_runtime.ModelFormatError as exc:
            print(exc)
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "'w'): element type INT4 needs the ml_dtypes package: pip install ml_dtypes" in result.stdout


def test_float8_cast_saturates_unless_told_not_to() -> None:
    x = np.array([1000.0, -1e9, np.inf, -np.inf, np.nan, 1.0], F32)
    y = run("Cast", x, to=dtypes.FLOAT8E4M3FN)
    assert y.dtype == ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(y.astype(F32)[:4], [448, -448, 448, -448])
    assert np.isnan(y.astype(F32)[4]) and y.astype(F32)[5] == 1
    unsaturated = run("Cast", x, to=dtypes.FLOAT8E5M2, saturate=0).astype(F32)
    assert unsaturated[2] == np.inf and unsaturated[0] == 1024
    np.testing.assert_array_equal(run("Cast", x[:2], to=dtypes.FLOAT8E5M2).astype(F32), [1024, -57344])


def test_float8e8m0_rounds_up_by_default_and_saturates() -> None:
    x = np.array([1.0, 3.0, 0.75, 3e38], F32)
    np.testing.assert_array_equal(run("Cast", x, to=dtypes.FLOAT8E8M0).astype(F32), [1, 4, 1, 2.0**127])
    np.testing.assert_array_equal(run("Cast", x, to=dtypes.FLOAT8E8M0, round_mode="down").astype(F32)[:3], [1, 2, 0.5])


def test_casts_between_two_ml_dtypes_types_go_through_float32() -> None:
    y = run("Cast", np.array([1.5, -3.0], ml_dtypes.bfloat16), to=dtypes.FLOAT8E4M3FN)
    assert y.dtype == ml_dtypes.float8_e4m3fn and y.astype(F32).tolist() == [1.5, -3.0]
    assert run("Cast", np.array([True, False]), to=dtypes.INT4).astype(np.int8).tolist() == [1, 0]
    like = run("CastLike", np.array([2.6, -9.0], F32), np.zeros(0, ml_dtypes.bfloat16))
    assert like.dtype == ml_dtypes.bfloat16


def test_blocked_int4_dequantization_matches_the_definition() -> None:
    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, (6, 8)).astype(ml_dtypes.int4)
    scale = rng.uniform(0.1, 1, (6, 2)).astype(F32)
    zero = rng.integers(-2, 2, (6, 2)).astype(ml_dtypes.int4)
    y = run("DequantizeLinear", q, scale, zero, axis=1, block_size=4)
    expected = (q.astype(F32) - np.repeat(zero.astype(F32), 4, axis=1)) * np.repeat(scale, 4, axis=1)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    back = run("QuantizeLinear", y, scale, zero, axis=1, block_size=4)
    assert back.dtype == ml_dtypes.int4 and np.array_equal(back, q)


def test_quantize_linear_saturates_to_the_int4_range() -> None:
    y = run("QuantizeLinear", np.array([100.0, -100.0, 2.4], F32), np.float32(1), np.zeros((), ml_dtypes.uint4))
    assert y.dtype == ml_dtypes.uint4 and y.astype(np.int8).tolist() == [15, 0, 2]


@pytest.mark.parametrize("op, args, attrs", [
    ("MatMul", ((2, 8), (8, 4)), {}),
    ("Gemm", ((2, 8), (4, 8)), {"transB": 1}),
    ("Conv", ((1, 2, 5, 5), (3, 2, 3, 3)), {}),
    ("Add", ((2, 8), (2, 8)), {}),
    ("Softmax", ((2, 8),), {}),
])
def test_bfloat16_in_gives_bfloat16_out(op, args, attrs) -> None:
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for shape in args]
    y = run(op, *inputs, **attrs)
    assert y.dtype == ml_dtypes.bfloat16
    expected = run(op, *[x.astype(F32) for x in inputs], **attrs)
    np.testing.assert_allclose(y.astype(F32), expected, rtol=2e-2, atol=2e-2)
