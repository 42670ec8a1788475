"""Make the small model bundled for `flowstack demo`: an MLP trained on scikit-learn's digits.

    python scripts/make_digits_model.py

Trains 64-64-10 with plain NumPy (full-batch Adam, fixed seed), writes it as ONNX built with
onnx.helper to flowstack_cli/data/digits_mlp.onnx, and the held-out test split (images scaled
to [0, 1], labels) to flowstack_cli/data/digits_test.npz.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

OUT = Path(__file__).resolve().parent.parent / "flowstack_cli" / "data"


def train(x: np.ndarray, y: np.ndarray, hidden: int = 64, steps: int = 600, seed: int = 0):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal((64, hidden)) * np.sqrt(2 / 64), np.zeros(hidden),
              rng.standard_normal((hidden, 10)) * np.sqrt(2 / hidden), np.zeros(10)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    onehot = np.eye(10)[y]
    for t in range(1, steps + 1):
        w1, b1, w2, b2 = params
        h = np.maximum(x @ w1 + b1, 0)
        logits = h @ w2 + b2
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        d_logits = (p - onehot) / len(x)
        d_h = (d_logits @ w2.T) * (h > 0)
        grads = [x.T @ d_h + 1e-4 * w1, d_h.sum(0), h.T @ d_logits + 1e-4 * w2, d_logits.sum(0)]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            params[i] -= 0.01 * (m[i] / (1 - 0.9**t)) / (np.sqrt(v[i] / (1 - 0.999**t)) + 1e-8)
    return [p.astype(np.float32) for p in params]


def to_onnx(params) -> onnx.ModelProto:
    w1, b1, w2, b2 = params
    nodes = [
        helper.make_node("Gemm", ["image", "w1", "b1"], ["h"], name="dense1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu1"),
        helper.make_node("Gemm", ["h_relu", "w2", "b2"], ["logits"], name="dense2"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in zip(params, ("w1", "b1", "w2", "b2"))]
    graph = helper.make_graph(
        nodes, "digits_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="flowstack make_digits_model")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.25, random_state=0, stratify=digits.target)
    params = train(x_train.astype(np.float64), y_train)
    model = to_onnx(params)
    OUT.mkdir(parents=True, exist_ok=True)
    onnx.save(model, OUT / "digits_mlp.onnx")
    np.savez_compressed(OUT / "digits_test.npz", images=x_test, labels=y_test.astype(np.int64))
    w1, b1, w2, b2 = params
    accuracy = ((np.maximum(x_test @ w1 + b1, 0) @ w2 + b2).argmax(1) == y_test).mean()
    print(f"test accuracy {accuracy:.4f}; wrote {OUT / 'digits_mlp.onnx'} and {OUT / 'digits_test.npz'}")


if __name__ == "__main__":
    main()
