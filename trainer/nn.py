"""Neural-network ops as functions over tensors (NCHW layouts, ONNX semantics)."""

from __future__ import annotations

import numpy as np

from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.embedding import embedding_lookup
from trainer.ops import constant, convert_to_tensor, make_op, multiply, reduce_sum

__all__ = [
    "avg_pool", "conv2d", "dropout", "embedding_lookup", "l2_loss", "log_softmax", "max_pool", "relu",
    "sigmoid", "softmax", "softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits", "tanh",
]


def relu(x, name=None) -> Tensor:
    return make_op("Relu", [x], name=name).outputs[0]


def sigmoid(x, name=None) -> Tensor:
    return make_op("Sigmoid", [x], name=name).outputs[0]


def tanh(x, name=None) -> Tensor:
    return make_op("Tanh", [x], name=name).outputs[0]


def softmax(x, axis: int = -1, name=None) -> Tensor:
    return make_op("Softmax", [x], {"axis": axis}, name=name).outputs[0]


def log_softmax(x, axis: int = -1, name=None) -> Tensor:
    return make_op("LogSoftmax", [x], {"axis": axis}, name=name).outputs[0]


def _pads(padding: str, kernel):
    if padding.upper() == "SAME":
        return {"auto_pad": "SAME_UPPER"}
    if padding.upper() == "VALID":
        return {"auto_pad": "VALID"}
    raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")


def conv2d(x, filters, bias=None, strides=(1, 1), padding: str = "SAME", dilations=(1, 1), name=None) -> Tensor:
    """2-D convolution of NCHW ``x`` with (out, in, kh, kw) ``filters``."""
    w = convert_to_tensor(filters)
    attrs = {"strides": list(strides), "dilations": list(dilations), "kernel_shape": list(w.shape[2:]),
             **_pads(padding, w.shape[2:])}
    return make_op("Conv", [x, w, bias], attrs, name=name).outputs[0]


def max_pool(x, ksize, strides=None, padding: str = "VALID", name=None) -> Tensor:
    ksize = list(ksize)
    attrs = {"kernel_shape": ksize, "strides": list(strides or ksize), **_pads(padding, ksize)}
    return make_op("MaxPool", [x], attrs, name=name, num_outputs=1).outputs[0]


def avg_pool(x, ksize, strides=None, padding: str = "VALID", name=None) -> Tensor:
    ksize = list(ksize)
    attrs = {"kernel_shape": ksize, "strides": list(strides or ksize), **_pads(padding, ksize)}
    return make_op("AveragePool", [x], attrs, name=name).outputs[0]


def dropout(x, rate: float, seed: int = 0, name=None) -> Tensor:
    """``x`` with a fraction ``rate`` zeroed and the rest scaled by 1/(1-rate), fresh each step."""
    x = convert_to_tensor(x)
    with x.graph.as_default():
        r = constant(np.asarray(rate, x.dtype))
    mask = make_op("DropoutMask", [x, r], {"seed": seed}, domain=TRAINER_DOMAIN).outputs[0]
    return multiply(x, mask, name=name)




def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    """Per-example cross-entropy for integer ``labels`` (fused with its gradient)."""
    node = make_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels], domain=TRAINER_DOMAIN, name=name)
    return node.outputs[0]


def softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    """Per-example cross-entropy for probability (one-hot) ``labels``."""
    node = make_op("SoftmaxCrossEntropyWithLogits", [logits, labels], domain=TRAINER_DOMAIN, name=name)
    return node.outputs[0]


def l2_loss(x, name=None) -> Tensor:
    return multiply(reduce_sum(multiply(x, x)), 0.5, name=name)
