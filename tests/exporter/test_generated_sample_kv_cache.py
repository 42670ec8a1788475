"""The parity check's generated sample for a causal LM's generation step with a KV cache.

Such a model takes the new tokens, an attention mask over cached and new tokens, and each layer's
cached keys/values (batch, heads, past, head size), all with dynamic dims; every dim 1 makes the
mask 1 long where the model needs past + new = 2, and ``flowstack convert`` failed on every
Llama/GPT-2-style export with past inputs until a sample was passed by hand.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from exporter.onnx_import import convert_onnx, import_onnx
from exporter.verify import check_parity, sample_inputs


def decode_step() -> onnx.ModelProto:
    """present = Concat(past, new heads) on the past axis (the new tokens' keys arrive as (B, S, H, D),
    as a projection reshaped to heads); y = mask (B, 1, 1, T) @ present: T must be past + new."""
    nodes = [
        helper.make_node("Transpose", ["new"], ["heads"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["past", "heads"], ["present"], axis=2),
        helper.make_node("Unsqueeze", ["mask", "axes"], ["mask4"]),
        helper.make_node("MatMul", ["mask4", "present"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "total"]),
              helper.make_tensor_value_info("past", TensorProto.FLOAT, ["batch", 2, "past", 4]),
              helper.make_tensor_value_info("new", TensorProto.FLOAT, ["batch", "seq", 2, 4])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("present", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "decode_step", inputs, outputs,
                              [onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_convert_checks_a_generation_step_on_an_empty_cache(tmp_path) -> None:
    report = convert_onnx(decode_step(), tmp_path / "step.flow")
    assert report.parity.ok and report.parity.samples == 1


def test_a_model_that_runs_on_ones_keeps_a_sample_of_ones() -> None:
    """The empty cache is the last resort: a (B, H, S, D) input of a model that runs on 1s keeps 1."""
    model = onnx.load_from_string(decode_step().SerializeToString())
    del model.graph.node[2:]  # present alone: no mask to line up with
    del model.graph.output[0]
    del model.graph.input[0]
    ir_model = import_onnx(model)
    assert sample_inputs(ir_model)["past"].shape == (1, 2, 1, 4)
    assert check_parity(ir_model, ir_model).ok
