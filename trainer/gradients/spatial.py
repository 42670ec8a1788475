"""Gradients of resampling and patch ops: Resize, Upsample, GridSample, AffineGrid, Col2Im.

Each is linear in its image input, so that gradient is the op's transpose: a helper op where
the transpose is a scatter (ResizeGrad, GridSampleGrad), an existing op where one is the
transpose already (Col2Im's is an im2col, a grouped Conv with one-hot filters).
"""

from __future__ import annotations

import numpy as np

from trainer.gradients.helpers import const_ints, fs, ints_const, onnx
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError
from trainer.ops import constant

reg = register_gradient


def _optional(node, i):
    return node.inputs[i] if len(node.inputs) > i else None


@reg("Resize")
def _resize(node, grads):
    # roi only moves sample positions (tf_crop_and_resize); like scales and sizes, it gets no gradient.
    x = node.inputs[0]
    inputs = [grads[0], x, _optional(node, 1), _optional(node, 2), _optional(node, 3)]
    while inputs[-1] is None:
        inputs.pop()
    return [fs("ResizeGrad", inputs, dict(node.attrs))] + [None] * (len(node.inputs) - 1)


@reg("Upsample")
def _upsample(node, grads):
    # Upsample is Resize with the opset-9 conventions (as its kernel runs it).
    attrs = {"mode": node.attrs["mode"], "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return [fs("ResizeGrad", [grads[0], node.inputs[0], None, node.inputs[1]], attrs), None]


@reg("GridSample")
def _grid_sample(node, grads):
    return fs("GridSampleGrad", [grads[0], *node.inputs], dict(node.attrs), n=2)


@reg("AffineGrid")
def _affine_grid(node, grads):
    # grid[n, pixel] = theta[n] @ (x, y[, z], 1)[pixel], so dtheta[n] = sum over pixels of
    # dgrid[n, pixel] (x) (x, y[, z], 1)[pixel]. AffineGrid itself, run on theta = [I | 0], lays
    # out those pixel coordinates, with its own conventions.
    theta, size = node.inputs
    dims = const_ints(size, "AffineGrid size")[2:]
    nd, pixels = len(dims), int(np.prod(dims))
    identity = constant(np.eye(nd, nd + 1, dtype=theta.dtype)[None])
    coords = onnx("Reshape", [onnx("AffineGrid", [identity, ints_const([1, 1, *dims])], dict(node.attrs)),
                              ints_const([pixels, nd])])
    base = onnx("Concat", [coords, constant(np.ones((pixels, 1), theta.dtype))], {"axis": 1})
    per_pixel = onnx("Reshape", [grads[0], ints_const([0, pixels, nd])])
    return [onnx("MatMul", [onnx("Transpose", [per_pixel], {"perm": [0, 2, 1]}), base]), None]


@reg("Col2Im")
def _col2im(node, grads):
    # Col2Im sums patches into an image; its transpose cuts the image into patches again: a Conv
    # with group = channels whose filters each pick one block position.
    x = node.inputs[0]
    block = const_ints(node.inputs[2], "Col2Im block_shape")
    k = int(np.prod(block))
    if x.shape is None or x.shape[1] is None:
        raise GraphError(f"Col2Im gradient needs the channel size of {x.name} to be known")
    c = x.shape[1] // k
    one_hot = np.eye(k, dtype=x.dtype).reshape([k, 1, *block])
    filters = constant(np.tile(one_hot, (c, 1) + (1,) * len(block)))
    attrs = {"group": c, "kernel_shape": block}
    for name in ("dilations", "pads", "strides"):
        if node.attrs.get(name) is not None:
            attrs[name] = node.attrs[name]
    patches = onnx("Conv", [grads[0], filters], attrs)
    return [onnx("Reshape", [patches, ints_const([0, c * k, -1])]), None, None]
