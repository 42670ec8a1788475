"""Gradients across the attribute and shape variants users hit, against finite differences.

tests/trainer/test_gradients.py checks each op once; here each op family is swept over the
attributes its gradient rule branches on (groups, strides, auto_pad, broadcasting patterns,
negative axes, optional inputs...). BUGS holds one case per gradient bug found by that sweep (each
failed before its fix); SWEEP the variants that already agreed, kept so they stay that way.
"""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from tests.trainer import gradient_check
from tests.trainer.gradient_check import check_op_gradient

R = np.random.default_rng(20261125)


def f(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, size=shape)


def pos(*shape):
    return R.uniform(0.5, 2.0, size=shape)


def distinct(*shape):
    """Values at least 1/size apart, so a max never sits within a finite-difference step of a tie."""
    n = int(np.prod(shape))
    return R.permutation(n).reshape(shape) * (2.0 / n) - 1.0


def ints(values):
    return np.asarray(values, np.int64)


NONE = np.zeros(0)

# name -> (op, inputs, attrs, inputs to differentiate[, extra _check arguments])
BUGS = {
    # ConvTranspose: no bias made the rule return 3 gradients for 2 inputs; output_padding and
    # output_shape raised.
    "ConvTranspose-no-bias": ("ConvTranspose", [f(1, 2, 3, 3), f(2, 3, 2, 2)], {"strides": [3, 2]}, [0, 1]),
    "ConvTranspose-output-padding": ("ConvTranspose", [f(1, 2, 3, 3), f(2, 2, 3, 3), f(2)],
                                     {"strides": [2, 2], "output_padding": [1, 0]}, [0, 1, 2]),
    "ConvTranspose-output-shape-beyond-taps": ("ConvTranspose", [f(1, 2, 3, 3), f(2, 2, 3, 3), f(2)],
                                               {"strides": [2, 2], "output_shape": [9, 6]}, [0, 1, 2]),
    "ConvTranspose-output-shape-inside-taps": ("ConvTranspose", [f(1, 2, 3, 3), f(2, 2, 3, 3), f(2)],
                                               {"strides": [2, 2], "output_shape": [1, 2, 6, 5]}, [0, 1, 2]),
    "Gemm-no-C": ("Gemm", [f(3, 4), f(4, 5)], {"alpha": 2.0}, [0, 1]),
    # MatMul raised on 1-D operands (promoted to matrices by the op).
    "MatMul-vector-matrix": ("MatMul", [f(4), f(4, 2)], {}, [0, 1]),
    "MatMul-matrix-vector": ("MatMul", [f(3, 4), f(4)], {}, [0, 1]),
    "MatMul-vector-vector": ("MatMul", [f(4), f(4)], {}, [0, 1]),
    "MatMul-vector-batch": ("MatMul", [f(4), f(2, 4, 3)], {}, [0, 1]),
    "MatMul-batch-vector": ("MatMul", [f(2, 3, 4), f(4)], {}, [0, 1]),
    # noop_with_empty_axes: the rules re-expanded dY over every axis, as if all were reduced.
    **{f"{op}-noop-empty-axes": (op, [x, ints([])], {"keepdims": 1, "noop_with_empty_axes": 1}, [0])
       for op, x in [("ReduceSum", f(2, 3)), ("ReduceMean", f(2, 3)), ("ReduceMax", distinct(2, 3)),
                     ("ReduceL2", f(2, 3)), ("ReduceLogSum", pos(2, 3)), ("ReduceSumSquare", f(2, 3))]},
    "ReduceMin-noop-no-axes-input": ("ReduceMin", [distinct(2, 3)], {"keepdims": 0, "noop_with_empty_axes": 1}, [0]),
    # LayerNormalization with scale/B that broadcast against the normalized shape.
    "LayerNormalization-broadcast-scale": ("LayerNormalization", [f(2, 3, 4), pos(1, 4), f(4)], {"axis": 1}, [0, 1, 2]),
    "LayerNormalization-broadcast-bias": ("LayerNormalization", [f(2, 3, 4), pos(4), f(3, 1)], {"axis": 1}, [0, 1, 2]),
    # Pad: negative pads (crops) gave a silently wrong gradient; edge/reflect/wrap raised.
    "Pad-negative-pads": ("Pad", [f(4, 5), ints([-1, 1, 0, -2])], {}, [0]),
    "Pad-negative-begin": ("Pad", [f(4, 5), ints([-1, -2, 0, 0])], {}, [0]),
    "Pad-edge": ("Pad", [f(3, 4), ints([2, 1, 1, 3])], {"mode": "edge"}, [0]),
    "Pad-reflect-wider-than-input": ("Pad", [f(3, 4), ints([4, 1, 1, 5])], {"mode": "reflect"}, [0]),
    "Pad-wrap-axes": ("Pad", [f(2, 3, 4), ints([1, 5, 2, 1]), None, ints([0, -1])], {"mode": "wrap"}, [0]),
    "Pad-reflect-negative": ("Pad", [f(4, 5), ints([1, -1, -1, 2])], {"mode": "reflect"}, [0]),
    # Clip gave min and max no gradient at all.
    "Clip-bounds": ("Clip", [f(3, 4), np.float64(-0.3), np.float64(0.25)], {}, [0, 1, 2]),
    "Clip-min-above-max": ("Clip", [f(3, 4), np.float64(0.4), np.float64(0.2)], {}, [0, 1, 2]),
    "Clip-max-only": ("Clip", [f(3, 4), None, np.float64(0.2)], {}, [0, 2]),
    # Einsum raised on indices summed within one operand, one or three operands, implicit output.
    "Einsum-index-summed-in-one-operand": ("Einsum", [f(3, 4), f(4, 5)], {"equation": "ij,jk->i"}, [0, 1]),
    "Einsum-one-operand": ("Einsum", [f(3, 4)], {"equation": "ij->i"}, [0]),
    "Einsum-three-operands": ("Einsum", [f(2, 3), f(3, 4), f(4)], {"equation": "ij,jk,k->i"}, [0, 1, 2]),
    "Einsum-implicit-output": ("Einsum", [f(2, 3), f(3, 4)], {"equation": "ij, jk"}, [0, 1]),
    "Einsum-ellipsis-broadcast": ("Einsum", [f(2, 1, 3, 4), f(3, 4, 2)], {"equation": "...ij,...jk->...ik"}, [0, 1]),
    "Einsum-ellipsis-implicit-output": ("Einsum", [f(2, 3, 4), f(4, 5)], {"equation": "...j,jk"}, [0, 1]),
    # ...and gave a gradient of the broadcast shape to an operand whose size-1 dim einsum broadcast.
    "Einsum-size-one-dim-broadcast": ("Einsum", [f(2, 3), f(1, 3)], {"equation": "ij,ij->i"}, [0, 1]),
    # GatherND with batch_dims raised.
    "GatherND-batch-dims-1": ("GatherND", [f(2, 3, 4), ints([[[1, 3], [2, -1]], [[0, 0], [0, 0]]])], {"batch_dims": 1},
                              [0]),
    "GatherND-batch-dims-2": ("GatherND", [f(2, 3, 4, 2), ints([[[1], [2], [0]], [[0], [3], [3]]])], {"batch_dims": 2},
                              [0]),
    # Scatter with reduction='add' raised; ScatterElements with indices smaller than the data off
    # the axis failed in GatherElements.
    "ScatterElements-add": ("ScatterElements", [f(3, 4), ints([[0, 0], [1, 3]]), f(2, 2)],
                            {"axis": 1, "reduction": "add"}, [0, 2]),
    "ScatterND-add-repeated": ("ScatterND", [f(3, 4), ints([[0], [0]]), f(2, 4)], {"reduction": "add"}, [0, 2]),
    "ScatterElements-indices-smaller-than-data": ("ScatterElements", [f(3, 4), ints([[2, 0, 1]]), f(1, 3)],
                                                  {"axis": 0}, [0, 2]),
    # BatchNormalization(training_mode=1) raised (batch statistics, and the running ones as outputs).
    "BatchNormalization-training-mode": ("BatchNormalization", [f(4, 3, 2), pos(3), f(3), f(3), pos(3)],
                                         {"training_mode": 1, "epsilon": 0.01}, [0, 1, 2]),
    "BatchNormalization-training-mode-running-stats": (
        "BatchNormalization", [f(4, 3, 2, 2), pos(3), f(3), f(3), pos(3)], {"training_mode": 1, "momentum": 0.8},
        [0, 1, 2, 3, 4], {"num_outputs": 3, "all_outputs": True}),
    # DepthToSpace mode CRD raised; SpaceToDepth mode CRD was transposed as DCR (silently wrong, and
    # invisible to the harness until its loss weighted each element differently).
    "DepthToSpace-CRD": ("DepthToSpace", [f(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, [0]),
    "SpaceToDepth-CRD": ("SpaceToDepth", [f(1, 2, 4, 6)], {"blocksize": 2, "mode": "CRD"}, [0]),
    # SoftmaxCrossEntropyLoss: gradient arriving through its log_prob output was dropped.
    "SoftmaxCrossEntropyLoss-log-prob-output": ("SoftmaxCrossEntropyLoss", [f(4, 3), ints([0, 2, 1, 2])],
                                                {"reduction": "mean"}, [0], {"num_outputs": 2, "all_outputs": True}),
}

SWEEP = {
    **{f"Conv-{name}": ("Conv", inputs, attrs, list(range(len(inputs)))) for name, inputs, attrs in [
        ("depthwise", [f(1, 4, 5, 5), f(4, 1, 3, 3), f(4)], {"group": 4}),
        ("groups-stride2", [f(1, 4, 6, 5), f(6, 2, 3, 2)], {"group": 2, "strides": [2, 2]}),
        ("stride3-dilation2", [f(1, 2, 9, 8), f(3, 2, 2, 3)], {"strides": [3, 1], "dilations": [2, 2]}),
        ("asymmetric-pads-stride", [f(1, 2, 5, 6), f(2, 2, 3, 3)], {"pads": [0, 2, 1, 0], "strides": [2, 3]}),
        ("same-upper-stride2", [f(1, 2, 5, 6), f(2, 2, 2, 3)], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ("same-lower", [f(1, 2, 5, 6), f(2, 2, 2, 3)], {"auto_pad": "SAME_LOWER"}),
        ("valid-stride2", [f(1, 2, 5, 6), f(2, 2, 2, 3)], {"auto_pad": "VALID", "strides": [2, 2]}),
        ("1d", [f(2, 2, 7), f(3, 2, 3), f(3)], {"strides": [2], "pads": [1, 0]}),
        ("3d", [f(1, 2, 4, 3, 4), f(2, 2, 2, 2, 2), f(2)], {"pads": [1, 0, 0, 0, 1, 1], "strides": [2, 1, 1]}),
        ("stride-over-kernel", [f(1, 2, 7, 7), f(2, 2, 2, 2)], {"strides": [3, 3]}),
    ]},
    "ConvTranspose-group-asymmetric-pads": ("ConvTranspose", [f(1, 4, 3, 3), f(4, 1, 3, 3), f(2)],
                                            {"group": 2, "strides": [2, 1], "pads": [1, 0, 0, 1]}, [0, 1, 2]),
    "ConvTranspose-dilated-1d": ("ConvTranspose", [f(2, 2, 4), f(2, 3, 2), f(3)], {"strides": [2], "dilations": [2]},
                                 [0, 1, 2]),
    **{f"ConvTranspose-{ap}-stride{s}-kernel{k}": ("ConvTranspose", [f(1, 2, 3, 4), f(2, 2, k, k), f(2)],
                                                  {"strides": [s, s], "auto_pad": ap}, [0, 1, 2])
       for ap, k, s in [("SAME_UPPER", 3, 2), ("SAME_LOWER", 2, 3)]},
    **{f"MaxPool-{name}": ("MaxPool", [distinct(*shape)], attrs, [0]) for name, shape, attrs in [
        ("ceil", (1, 2, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
        ("dilated", (1, 2, 6, 6), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
        ("overlapping-pads", (1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 0]}),
        ("same-lower", (1, 2, 5, 5), {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
        ("ceil-pads-dilated", (1, 1, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 0, 0, 1],
                                             "ceil_mode": 1, "dilations": [1, 2]}),
        ("1d", (2, 2, 7), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
        ("3d", (1, 1, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 1, 2]}),
    ]},
    **{f"AveragePool-{name}": ("AveragePool", [f(*shape)], attrs, [0]) for name, shape, attrs in [
        ("ceil-pads-count-pad", (1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                               "ceil_mode": 1, "count_include_pad": 1}),
        ("asymmetric-pads-count-pad", (1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1],
                                                     "count_include_pad": 1}),
        ("dilated", (1, 2, 6, 6), {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 0, 0]}),
        ("same-upper", (1, 2, 5, 5), {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("1d", (2, 2, 7), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
        ("3d", (1, 1, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 1, 2]}),
    ]},
    "GlobalAveragePool-1d": ("GlobalAveragePool", [f(2, 3, 5)], {}, [0]),
    "GlobalMaxPool-3d": ("GlobalMaxPool", [distinct(1, 2, 3, 2, 2)], {}, [0]),
    "BatchNormalization-3d": ("BatchNormalization", [f(4, 3, 5), pos(3), f(3), f(3), pos(3)], {"epsilon": 1e-2},
                              [0, 1, 2, 3, 4]),
    "BatchNormalization-2d": ("BatchNormalization", [f(4, 3), pos(3), f(3), f(3), pos(3)], {"epsilon": 0.1},
                              [0, 1, 2, 3, 4]),
    **{f"LayerNormalization-axis{axis}": ("LayerNormalization", [f(2, 3, 4), pos(*(2, 3, 4)[axis % 3:]),
                                                                 f(*(2, 3, 4)[axis % 3:])],
                                          {"axis": axis, "epsilon": 1e-3}, [0, 1, 2]) for axis in (0, -2)},
    "LayerNormalization-no-bias-large-epsilon": ("LayerNormalization", [f(2, 5), pos(5)], {"epsilon": 0.5}, [0, 1]),
    "InstanceNormalization-1d": ("InstanceNormalization", [f(2, 3, 5), pos(3), f(3)], {"epsilon": 0.1}, [0, 1, 2]),
    "GroupNormalization-one-group": ("GroupNormalization", [f(2, 4, 3), pos(4), f(4)], {"num_groups": 1}, [0, 1, 2]),
    "GroupNormalization-3d": ("GroupNormalization", [f(1, 4, 2, 2, 2), pos(4), f(4)], {"num_groups": 2}, [0, 1, 2]),
    **{f"Gemm-transA{ta}-transB{tb}-C{c}": ("Gemm", [f(4, 3) if ta else f(3, 4), f(5, 4) if tb else f(4, 5), f(*c)],
                                           {"transA": ta, "transB": tb, "alpha": 0.7, "beta": -1.3}, [0, 1, 2])
       for ta, tb, c in [(0, 0, ()), (0, 1, (3, 1)), (1, 0, (1, 5)), (1, 1, (5,))]},
    "MatMul-broadcast-batches": ("MatMul", [f(2, 1, 3, 4), f(1, 3, 4, 2)], {}, [0, 1]),
    "MatMul-matrix-batch": ("MatMul", [f(3, 4), f(2, 4, 2)], {}, [0, 1]),
    **{f"{op}-{name}": (op, [pos(*a) if op == "Pow" else f(*a), pos(*b) if op in ("Div", "Pow") else f(*b)], {},
                        [0, 1])
       for op in ("Add", "Sub", "Mul", "Div", "Pow")
       for name, a, b in [("scalar-left", (), (3, 4)), ("ones-both-sides", (3, 1), (1, 4)),
                          ("rank-difference", (4,), (2, 3, 4)), ("mixed", (2, 1, 4), (3, 1))]},
    "Max-three-way-broadcast": ("Max", [f(3, 1), f(4), f(2, 1, 1)], {}, [0, 1, 2]),
    "Mean-scalar": ("Mean", [f(), f(2, 3)], {}, [0, 1]),
    "Where-broadcast-all": ("Where", [R.uniform(size=(4,)) > 0.5, f(3, 1), f(2, 1, 1)], {}, [1, 2]),
    "PRelu-channel-slope": ("PRelu", [f(2, 3, 4), f(3, 1)], {}, [0, 1]),
    **{f"{op}-negative-axes-k{k}": (op, [x, ints([-1, 0])], {"keepdims": k}, [0])
       for op, x, k in [("ReduceSum", f(2, 3, 4), 0), ("ReduceMean", f(2, 3, 4), 1),
                        ("ReduceMax", distinct(2, 3, 4), 0), ("ReduceProd", pos(2, 3, 4), 1),
                        ("ReduceLogSumExp", f(2, 3, 4), 0), ("ReduceL1", f(2, 3, 4), 1)]},
    "ReduceSum-empty-axes-reduces-all": ("ReduceSum", [f(2, 3), ints([])], {"keepdims": 0}, [0]),
    "Slice-negative-steps": ("Slice", [f(5, 6), ints([4, -1]), ints([0, -7]), ints([0, 1]), ints([-1, -2])], {}, [0]),
    "Slice-out-of-range": ("Slice", [f(5, 6), ints([-100, 2]), ints([100, 1000])], {}, [0]),
    "Slice-negative-axis-step3": ("Slice", [f(3, 5, 7), ints([1]), ints([7]), ints([-1]), ints([3])], {}, [0]),
    "Gather-negative-repeated-axis0": ("Gather", [f(5, 3), ints([-1, 0, -1, 2])], {"axis": 0}, [0]),
    "Gather-negative-axis": ("Gather", [f(2, 3, 4), ints([[3, 3], [-4, 0]])], {"axis": -1}, [0]),
    "Gather-scalar-index": ("Gather", [f(4, 3), ints(-1)], {"axis": 1}, [0]),
    "GatherElements-negative-repeated": ("GatherElements", [f(3, 4), ints([[-1, 0, 2, 2], [0, 0, 1, -3]])], {"axis": 0},
                                         [0]),
    "GatherND-negative-repeated": ("GatherND", [f(3, 4), ints([[-1, 1], [2, -1], [-1, 1]])], {}, [0]),
    "GatherND-slices": ("GatherND", [f(2, 3, 4), ints([[[0, 1], [1, 2]], [[0, 1], [1, -1]]])], {}, [0]),
    "ScatterND-rows": ("ScatterND", [f(3, 4), ints([[2], [0]]), f(2, 4)], {}, [0, 2]),
    "ScatterElements-negative": ("ScatterElements", [f(3, 4), ints([[-1, 0, 1, 2]]), f(1, 4)], {"axis": 0}, [0, 2]),
    "Pad-constant-value-axes": ("Pad", [f(2, 3, 4), ints([1, 2, 0, 1]), np.float64(0.5), ints([0, -1])], {}, [0]),
    "Expand-rank-and-ones": ("Expand", [f(3, 1), ints([2, 1, 4])], {}, [0]),
    "Tile-3d": ("Tile", [f(1, 2, 3), ints([2, 1, 3])], {}, [0]),
    "Concat-negative-axis": ("Concat", [f(2, 3), f(2, 1), f(2, 2)], {"axis": -1}, [0, 1, 2]),
    "Split-num-outputs": ("Split", [f(2, 7)], {"axis": -1, "num_outputs": 3}, [0],
                          {"num_outputs": 3, "all_outputs": True}),
    "Transpose-default-perm": ("Transpose", [f(2, 3, 4)], {}, [0]),
    "Squeeze-negative-axes": ("Squeeze", [f(3, 1, 4, 1), ints([-1, 1])], {}, [0]),
    "Unsqueeze-negative-axes": ("Unsqueeze", [f(3, 4), ints([-1, 0])], {}, [0]),
    "Reshape-zero-and-minus-one": ("Reshape", [f(2, 3, 4), ints([0, -1])], {}, [0]),
    **{f"{op}-axis{axis}": (op, [f(2, 3, 4)], {"axis": axis}, [0])
       for op in ("Softmax", "LogSoftmax") for axis in (0, 1, -1)},
    **{f"CumSum-exclusive{e}-reverse{r}": ("CumSum", [f(3, 4), ints(-1 if r else 0)],
                                           {"exclusive": e, "reverse": r}, [0])
       for e in (0, 1) for r in (0, 1)},
    "Einsum-outer": ("Einsum", [f(3), f(4)], {"equation": "i,j->ij"}, [0, 1]),
    "Einsum-transposed-output": ("Einsum", [f(2, 3), f(3, 4)], {"equation": "ij,jk->ki"}, [0, 1]),
    **{f"Resize-{mode}-{ctm}": ("Resize", [f(1, 1, 3, 4), NONE, np.array([1.0, 1.0, 1.7, 2.0])],
                                {"mode": mode, "coordinate_transformation_mode": ctm}, [0])
       for mode, ctm in [("nearest", "half_pixel"), ("linear", "asymmetric"), ("linear", "half_pixel_symmetric"),
                         ("cubic", "align_corners")]},
    "Resize-linear-1d-sizes": ("Resize", [f(2, 5), NONE, NONE, ints([2, 3])], {"mode": "linear"}, [0]),
    "SoftmaxCrossEntropyLoss-ignore-index-3d": ("SoftmaxCrossEntropyLoss",
                                                [f(2, 3, 4), ints([[0, 2, 1, 1], [1, 1, 0, 2]])],
                                                {"reduction": "mean", "ignore_index": 1}, [0]),
    "SoftmaxCrossEntropyLoss-weights-none": ("SoftmaxCrossEntropyLoss", [f(4, 3), ints([0, 2, 1, 2]), pos(3)],
                                             {"reduction": "none"}, [0, 2]),
    "NegativeLogLikelihoodLoss-weighted-mean": ("NegativeLogLikelihoodLoss", [f(4, 3), ints([0, 2, 1, 2]), pos(3)],
                                                {"reduction": "mean"}, [0, 2]),
}


def _run(case):
    op, inputs, attrs, diff, *extra = case
    check_op_gradient(op, "", inputs, attrs, diff, **(extra[0] if extra else {}))


@pytest.fixture(autouse=True)
def _seeded_loss_weights(monkeypatch):
    # The harness draws the loss weights from its module's generator: seed it per test so that a
    # case's result does not depend on which tests ran before it.
    monkeypatch.setattr(gradient_check, "WEIGHTS", np.random.default_rng(0))


@pytest.mark.parametrize("case", BUGS)
def test_fixed_gradient_bug(case):
    _run(BUGS[case])


@pytest.mark.parametrize("case", SWEEP)
def test_gradient_variant(case):
    _run(SWEEP[case])


def _dynamic_batch_gradient(build, inputs, out_size):
    """Gradients of sum(build(*xs) * w), xs fed through placeholders whose first dim is None."""
    w = np.linspace(0.5, 1.5, out_size)
    g = T.Graph()
    with g.as_default():
        xs = [T.placeholder(np.float64, (None,) + v.shape[1:]) for v in inputs]
        loss = T.reduce_sum(T.reshape(build(*xs), [-1]) * T.constant(w))
        grads = T.gradients(loss, xs)
    return T.Session(g).run(grads, dict(zip(xs, inputs))), w


def test_tile_gradient_with_a_dynamic_batch():
    # Raised "Tile gradient needs a static input shape" for a placeholder batch.
    x = f(2, 3)
    (dx,), w = _dynamic_batch_gradient(lambda t: T.make_op("Tile", [t, T.constant(ints([2, 3]))]).outputs[0], [x], 36)
    expected = w.reshape(2, 2, 3, 3).sum(axis=(0, 2))
    np.testing.assert_allclose(dx, expected)


def test_concat_gradient_along_a_dynamic_axis():
    # Raised "Concat gradient needs static sizes along axis 0" when batches of run-time size are joined.
    a, b = f(2, 3), f(3, 3)
    (da, db), w = _dynamic_batch_gradient(lambda p, q: T.make_op("Concat", [p, q], {"axis": 0}).outputs[0], [a, b], 15)
    np.testing.assert_allclose(da, w[:6].reshape(2, 3))
    np.testing.assert_allclose(db, w[6:].reshape(3, 3))
