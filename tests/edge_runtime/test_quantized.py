"""Quantized .flow files on the edge runtime: dequantizing at load or per call, and bad scales."""

from __future__ import annotations

import numpy as np
import pytest

import edge_runtime
from edge_runtime.format import ModelFormatError
from exporter import flow_writer
from exporter.calibration import calibration_batches
from exporter.onnx_import import import_onnx
from exporter.passes import optimize
from exporter.quantize import quantize
from tests.exporter.quantized_models import images, small_cnn


@pytest.fixture(scope="module")
def float_model():
    return optimize(import_onnx(small_cnn()))[0]


@pytest.fixture(scope="module", params=["float16", "dynamic-int8", "int8"])
def quantized(request, float_model):
    batches = calibration_batches(float_model, {"x": images(32, seed=3)})
    return request.param, quantize(float_model, request.param, batches)[0]


def _ops(model: edge_runtime.Model) -> list[str]:
    return [op.op_type for op in model.definition.subgraphs[0].operators]


def test_at_load_folds_weight_reads_and_per_call_keeps_them(quantized, tmp_path) -> None:
    scheme, model = quantized
    path = tmp_path / f"{scheme}.flow"
    flow_writer.write(model, path)
    at_load = edge_runtime.load(path)
    per_call = edge_runtime.load(path, dequantize="per_call")
    read = "Cast" if scheme == "float16" else "DequantizeLinear"
    weights = sum(1 for n in model.graph.nodes if n.op_type == read and n.inputs[0] in model.graph.constants())
    assert _ops(per_call).count(read) - _ops(at_load).count(read) == weights > 0
    # the stored weights are dropped after folding: only float32 constants feed the float ops
    stored = [t for t in at_load.definition.subgraphs[0].tensors if t.data is not None and t.data.dtype.kind == "i"
              and t.data.size > 64]
    assert stored == []
    x = {"x": images(5)}
    np.testing.assert_array_equal(at_load.run(x)["logits"], per_call.run(x)["logits"])


def test_unknown_dequantize_mode_is_refused(quantized) -> None:
    with pytest.raises(ValueError, match=r"dequantize='lazy': choose one of \['at_load', 'per_call'\]"):
        edge_runtime.load(flow_writer.to_bytes(quantized[1]), dequantize="lazy")


@pytest.mark.parametrize("bad, word", [(0.0, "zero"), (np.inf, "not finite"), (np.nan, "not finite")])
def test_bad_scale_is_refused_naming_the_tensor(float_model, tmp_path, bad, word) -> None:
    model, _ = quantize(float_model, "dynamic-int8")
    name = next(n for n in model.graph.values if n.endswith("/scale"))
    scale = model.graph.values[name].data.copy()
    scale[1] = bad
    model.graph.values[name].data = scale
    path = tmp_path / "bad.flow"
    flow_writer.write(model, path)
    weight = name[: -len("/scale")] + "/int8"
    for mode in ("at_load", "per_call"):
        with pytest.raises(ModelFormatError, match=rf"bad.flow: subgraph 0, tensor '{weight}': scale .* \(element 1\) is {word}"):
            edge_runtime.load(path, dequantize=mode)


def test_bad_activation_scale_is_refused_naming_the_op(float_model, tmp_path) -> None:
    batches = calibration_batches(float_model, {"x": images(8)})
    model, _ = quantize(float_model, "int8", batches)
    name = next(n for n in model.graph.values if n.endswith("/act_scale"))
    model.graph.values[name].data = np.asarray(0.0, np.float32)
    activation = name[: -len("/act_scale")]
    with pytest.raises(ModelFormatError, match=rf"tensor '{activation}/int8': scale 0\.0 \(element 0\) is zero"):
        edge_runtime.load(flow_writer.to_bytes(model))


def test_quantization_records_round_trip(quantized) -> None:
    scheme, model = quantized
    definition = edge_runtime.load(flow_writer.to_bytes(model), dequantize="per_call").definition
    records = {t.name: t.quantization for t in definition.subgraphs[0].tensors if t.quantization is not None}
    if scheme == "float16":
        assert records == {}
        return
    weights = {n: v.data for n, v in model.graph.values.items() if n.endswith("/scale")}
    for scale_name, scale in weights.items():
        record = records[scale_name[: -len("/scale")] + "/int8"]
        np.testing.assert_array_equal(record.scale, scale)
        assert record.zero_point.tolist() == [0] * scale.size


def test_scale_constant_zeroed_in_the_data_section_is_refused(float_model, tmp_path) -> None:
    """The tensor's record is intact but the scale the node reads was overwritten in the file."""
    from edge_runtime.format import read_file

    model, _ = quantize(float_model, "dynamic-int8")
    path = tmp_path / "patched.flow"
    flow_writer.write(model, path)
    definition, mapping = read_file(path)
    scale = next(t for t in definition.subgraphs[0].tensors if t.name.endswith("/scale"))
    offset = scale.data.__array_interface__["data"][0] - np.frombuffer(mapping, np.uint8).__array_interface__["data"][0]
    del scale, definition
    mapping.close()
    data = bytearray(path.read_bytes())
    data[offset:offset + 4] = np.float32(0).tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match=r"DequantizeLinear .*, scale tensor '.*/scale' of '.*/int8': scale 0\.0 "
                                               r"\(element 0\) is zero"):
        edge_runtime.load(path)
