"""Gradients of convolution, pooling, normalization and the fused losses."""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx
from trainer.gradients.registry import register_gradient

reg = register_gradient
_CONV_KEYS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_POOL_KEYS = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides")


def _pick(attrs, keys):
    return {k: attrs[k] for k in keys if attrs.get(k) is not None}


@reg("Conv")
def _conv(node, grads):
    x, w = node.inputs[:2]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    g = grads[0]
    attrs = _pick(node.attrs, _CONV_KEYS)
    dx = fs("ConvBackpropInput", [g, w, x], attrs)
    dw = fs("ConvBackpropFilter", [g, x, w], attrs)
    db = None
    if b is not None:
        axes = [0] + list(range(2, len(g.shape))) if g.shape is not None else [0, 2, 3]
        db = onnx("ReduceSum", [g, ints_const(axes)], {"keepdims": 0})
    return [dx, dw, db]


@reg("MaxPool")
def _max_pool(node, grads):
    return [fs("MaxPoolGrad", [grads[0], node.inputs[0]], _pick(node.attrs, _POOL_KEYS))]


@reg("AveragePool")
def _avg_pool(node, grads):
    attrs = _pick(node.attrs, _POOL_KEYS + ("count_include_pad",))
    attrs.pop("storage_order", None)
    return [fs("AveragePoolGrad", [grads[0], node.inputs[0]], attrs)]


@reg("GlobalAveragePool")
def _global_avg_pool(node, grads):
    x = node.inputs[0]
    axes = list(range(2, len(x.shape)))
    return [fs("BroadcastReduceGrad", [grads[0], x], {"axes": axes, "keepdims": 1, "scale": "mean"})]


@reg("BatchNormTraining", "flowstack")
def _bn_training(node, grads):
    x, scale, _ = node.inputs
    _, mean, _, inv_std = node.outputs
    dx, dscale, db = fs("BatchNormTrainingGrad", [grads[0], x, scale, mean, inv_std], n=3)
    return [dx, dscale, db]


@reg("LayerNormalization")
def _layer_norm(node, grads):
    x, scale = node.inputs[:2]
    attrs = {"axis": node.attrs["axis"], "epsilon": node.attrs["epsilon"]}
    dx, dscale, db = fs("LayerNormGrad", [grads[0], x, scale], attrs, n=3)
    return [dx, dscale, db if len(node.inputs) > 2 and node.inputs[2] is not None else None][: len(node.inputs)]


def _xent(node, grads):
    g = grads[0]
    if g is None:
        return [None, None]
    backprop = node.outputs[1]
    return [onnx("Unsqueeze", [g, ints_const([-1])]) * backprop, None]


reg("SoftmaxCrossEntropyWithLogits", "flowstack")(_xent)
reg("SparseSoftmaxCrossEntropyWithLogits", "flowstack")(_xent)
reg("DropoutMask", "flowstack")(lambda node, grads: [None, None])


@reg("GlobalMaxPool")
def _global_max_pool(node, grads):
    x = node.inputs[0]
    axes = list(range(2, len(x.shape)))
    return [fs("ReduceExtremumGrad", [grads[0], x, node.outputs[0]], {"axes": axes, "keepdims": 1})]


@reg("ConvTranspose")
def _conv_transpose(node, grads):
    x, w = node.inputs[:2]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if node.attrs.get("output_padding") and any(node.attrs["output_padding"]) or node.attrs.get("output_shape"):
        raise NotImplementedError("ConvTranspose gradient supports no output_padding/output_shape")
    g = grads[0]
    attrs = _pick(node.attrs, _CONV_KEYS)
    # ConvTranspose is the input-gradient of a Conv; so its own gradients are a Conv and a
    # filter gradient with the roles of input and output swapped.
    dx = onnx("Conv", [g, w], attrs)
    dw = fs("ConvBackpropFilter", [x, g, w], attrs)
    db = None
    if b is not None:
        db = onnx("ReduceSum", [g, ints_const([0] + list(range(2, len(g.shape))))], {"keepdims": 0})
    return [dx, dw, db]


@reg("BatchNormalization")
def _batch_norm_inference(node, grads):
    if node.attrs["training_mode"]:
        raise NotImplementedError("BatchNormalization(training_mode=1): build BatchNormTraining instead")
    x, scale, b, mean, var = node.inputs
    g = grads[0]
    shape = ints_const([1, -1] + [1] * (len(x.shape) - 2))
    axes = ints_const([0] + list(range(2, len(x.shape))))

    def ch(t):
        return onnx("Reshape", [t, shape])

    inv = onnx("Reciprocal", [onnx("Sqrt", [var + node.attrs["epsilon"]])])
    xc = x - ch(mean)
    gsum = onnx("ReduceSum", [g, axes], {"keepdims": 0})
    gxc = onnx("ReduceSum", [g * xc, axes], {"keepdims": 0})
    dx = g * ch(scale * inv)
    dscale = gxc * inv
    dmean = -(gsum * scale * inv)
    dvar = gxc * scale * inv * inv * inv * -0.5
    return [dx, dscale, gsum, dmean, dvar]


@reg("Dropout")
def _dropout(node, grads):
    from trainer.graph import constant_value

    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is None or not bool(constant_value(training) if constant_value(training) is not None else True):
        return [grads[0]] + [None] * (len(node.inputs) - 1)
    if len(node.outputs) < 2:
        raise NotImplementedError("training-mode Dropout gradient needs the mask output")
    ratio = node.inputs[1]
    keep = onnx("Cast", [node.outputs[1]], {"to": _code(node.inputs[0])})
    scale = 1.0 / (1.0 - float(constant_value(ratio))) if ratio is not None else 2.0
    return [grads[0] * keep * scale] + [None] * (len(node.inputs) - 1)


def _code(t):
    from schemas.dtypes import from_numpy

    return from_numpy(t.dtype)


@reg("LSTMBlockCell", "flowstack")
def _lstm_block_cell(node, grads):
    x, h_prev, c_prev, w, _ = node.inputs
    h, c, i, f, o, g, co = node.outputs
    dh = grads[0] if grads[0] is not None else fs("ZerosLike", [h])
    dc = grads[1] if grads[1] is not None else fs("ZerosLike", [c])
    dx, dh_prev, dc_prev, dw, db = fs("LSTMBlockCellGrad", [dh, dc, x, h_prev, c_prev, w, i, f, o, g, co], n=5)
    return [dx, dh_prev, dc_prev, dw, db]
