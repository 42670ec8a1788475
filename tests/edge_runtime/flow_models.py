"""Small IR models shared by the edge runtime tests (built directly, no ONNX needed)."""

from __future__ import annotations

import numpy as np

from exporter import ir
from schemas import dtypes


def mlp(in_features: int = 4, hidden: int = 8, out: int = 3, seed: int = 0) -> ir.Model:
    """y = relu(x @ w1 + b1) @ w2, with a dynamic batch dimension."""
    rng = np.random.default_rng(seed)
    g = ir.Graph(name="mlp")
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (-1, in_features))
    g.values["y"] = ir.Value("y", dtypes.FLOAT, (-1, out))
    for name, shape in (("w1", (in_features, hidden)), ("b1", (hidden,)), ("w2", (hidden, out))):
        g.values[name] = ir.Value(name, data=rng.standard_normal(shape).astype(np.float32))
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes = [
        ir.Node("MatMul", ["x", "w1"], ["h"], name="dense1"),
        ir.Node("Add", ["h", "b1"], ["hb"], name="bias1"),
        ir.Node("Relu", ["hb"], ["a"], name="relu1"),
        ir.Node("MatMul", ["a", "w2"], ["y"], name="dense2"),
    ]
    return ir.Model(g, opset_imports={"": 21}, metadata={"purpose": "tests"})


def mlp_reference(model: ir.Model, x: np.ndarray) -> np.ndarray:
    c = model.graph.constants()
    return np.maximum(x @ c["w1"] + c["b1"], 0) @ c["w2"]
