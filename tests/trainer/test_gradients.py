"""Every differentiable op with a kernel has a gradient rule, checked against finite differences.

Parametrized over the op registry: a newly registered differentiable op fails here until it gets
a gradient rule and a case below, or an entry (with its reason) in SKIP.
"""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from edge_runtime.kernels import has_kernel
from schemas.registry import all_schemas
from tests.trainer.gradient_check import check_op_gradient
from trainer.gradients import has_gradient

R = np.random.default_rng(0)


def f(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, size=shape)


def pos(*shape):
    return R.uniform(0.5, 2.0, size=shape)


def ints(values):
    return np.asarray(values, np.int64)


# op -> (inputs, attrs, indices of inputs to differentiate); arrays of float64, others are constants.
CASES = {
    "Abs": ([f(3, 4)], {}, [0]),
    "Add": ([f(3, 4), f(4)], {}, [0, 1]),
    "Sub": ([f(3, 4), f(3, 1)], {}, [0, 1]),
    "Mul": ([f(3, 4), f(1, 4)], {}, [0, 1]),
    "Div": ([f(3, 4), pos(4)], {}, [0, 1]),
    "Pow": ([pos(3, 4), f(3, 4)], {}, [0, 1]),
    "Neg": ([f(3, 4)], {}, [0]),
    "Identity": ([f(3, 4)], {}, [0]),
    "flowstack::IdentityN": ([f(3, 4), f(2)], {"num_outputs": 2}, [0, 1], 2, 2e-4, 2e-6, True),  # both outputs
    "Relu": ([f(3, 4)], {}, [0]),
    "LeakyRelu": ([f(3, 4)], {"alpha": 0.1}, [0]),
    "Elu": ([f(3, 4)], {"alpha": 0.7}, [0]),
    "Sigmoid": ([f(3, 4)], {}, [0]),
    "Tanh": ([f(3, 4)], {}, [0]),
    "Softplus": ([f(3, 4)], {}, [0]),
    "Exp": ([f(3, 4)], {}, [0]),
    "Log": ([pos(3, 4)], {}, [0]),
    "Sqrt": ([pos(3, 4)], {}, [0]),
    "Reciprocal": ([pos(3, 4)], {}, [0]),
    "Sin": ([f(3, 4)], {}, [0]),
    "Cos": ([f(3, 4)], {}, [0]),
    "Softmax": ([f(3, 5)], {"axis": -1}, [0]),
    "LogSoftmax": ([f(3, 5)], {"axis": 1}, [0]),
    "Sum": ([f(3, 4), f(4), f(3, 4)], {}, [0, 1, 2]),
    "Mean": ([f(3, 4), f(3, 4)], {}, [0, 1]),
    "Max": ([f(3, 4), f(3, 4)], {}, [0, 1]),
    "Min": ([f(3, 4), f(3, 4)], {}, [0, 1]),
    "Where": ([R.uniform(size=(3, 4)) > 0.5, f(3, 4), f(4)], {}, [1, 2]),
    "Clip": ([f(3, 4), np.float64(-0.5), np.float64(0.5)], {}, [0]),
    "Cast": ([f(3, 4)], {"to": 11}, [0]),
    "MatMul": ([f(3, 4), f(4, 5)], {}, [0, 1]),
    "Gemm": ([f(4, 3), f(5, 4), f(5)], {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, [0, 1, 2]),
    "ReduceSum": ([f(3, 4, 2), ints([1])], {"keepdims": 0}, [0]),
    "ReduceMean": ([f(3, 4, 2), ints([0, 2])], {"keepdims": 1}, [0]),
    "ReduceMax": ([f(3, 4), ints([1])], {"keepdims": 0}, [0]),
    "ReduceMin": ([f(3, 4), ints([0])], {"keepdims": 1}, [0]),
    "Reshape": ([f(3, 4), ints([2, 6])], {}, [0]),
    "Flatten": ([f(2, 3, 4)], {"axis": 1}, [0]),
    "Squeeze": ([f(3, 1, 4), ints([1])], {}, [0]),
    "Unsqueeze": ([f(3, 4), ints([0])], {}, [0]),
    "Transpose": ([f(2, 3, 4)], {"perm": [2, 0, 1]}, [0]),
    "Concat": ([f(2, 3), f(2, 2)], {"axis": 1}, [0, 1]),
    "Split": ([f(2, 5), ints([2, 3])], {"axis": 1}, [0], 2),
    "Slice": ([f(4, 5), ints([1, 0]), ints([3, 5]), ints([0, 1]), ints([1, 2])], {}, [0]),
    "Gather": ([f(5, 3), ints([0, 2, 2, 4])], {"axis": 0}, [0]),
    "Expand": ([f(3, 1), ints([2, 3, 4])], {}, [0]),
    "Conv": ([f(2, 3, 6, 6), f(4, 3, 3, 3), f(4)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                     "strides": [2, 1]}, [0, 1, 2]),
    "MaxPool": ([f(2, 2, 5, 5)], {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]}, [0]),
    "flowstack::MaxPoolTiled": ([f(2, 3, 4, 6)], {"kernel_shape": [2, 3], "strides": [2, 3]}, [0]),
    "AveragePool": ([f(2, 2, 5, 5)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [0]),
    "GlobalAveragePool": ([f(2, 3, 4, 4)], {}, [0]),
    "LayerNormalization": ([f(3, 6), pos(6), f(6)], {"axis": -1, "epsilon": 1e-5}, [0, 1, 2]),
    "flowstack::BatchNormTraining": ([f(4, 3, 2, 2), pos(3), f(3)], {"epsilon": 1e-5}, [0, 1, 2]),
    "flowstack::SoftmaxCrossEntropyWithLogits": ([f(4, 5), np.eye(5)[[0, 3, 1, 4]]], {}, [0]),
    "flowstack::SparseSoftmaxCrossEntropyWithLogits": ([f(4, 5), ints([0, 3, 1, 4])], {}, [0]),
    "flowstack::CTCLoss": ([f(6, 2, 4), np.array([[0, 0], [0, 1], [1, 0]], np.int64), ints([1, 2, 0]),
                           ints([6, 4])], {}, [0]),
    "flowstack::SumToShape": ([f(3, 4), f(1, 4)], {}, [0]),
    "flowstack::TensorArrayScatter": ([f(4, 3), ints([2, 0]), f(2, 3), np.array(4, np.int64)], {"dynamic_size": 0},
                                      [0, 2]),
    "flowstack::TensorArrayStack": ([f(3, 2)], {"element_shape": [2], "element_shape_known": 1}, [0]),
    "flowstack::DynamicStitch": ([np.array([0, 3], np.int64), np.array([2, 1, 4], np.int64), f(2, 3), f(3, 3)],
                                 {"N": 2}, [2, 3]),
    "flowstack::DynamicPartition": ([f(2, 3, 2), np.array([[1, 0, 2], [0, 1, 1]], np.int64)],
                                    {"num_partitions": 3}, [0], 3, 2e-4, 2e-6, True),  # every partition's gradient
    "flowstack::UnsortedSegmentSum": ([f(5, 3), np.array([2, 0, 2, 1, 0], np.int64), np.array(3, np.int64)], {}, [0]),
    # Distinct values (f's draws): one row attains each extreme, so the min/max are differentiable there.
    "flowstack::SegmentMax": ([f(5, 3), np.array([0, 0, 1, 3, 3], np.int64)], {}, [0]),
    "flowstack::SegmentMin": ([f(5, 3), np.array([0, 0, 1, 3, 3], np.int64)], {}, [0]),
    "flowstack::UnsortedSegmentMax": ([f(5, 3), np.array([2, -1, 2, 1, 0], np.int64), np.array(3, np.int64)], {}, [0]),
    "flowstack::UnsortedSegmentProd": ([f(5, 3), np.array([2, 0, 2, -1, 1], np.int64), np.array(3, np.int64)], {}, [0]),
    "flowstack::UnsortedSegmentMin": ([f(5, 3), np.array([2, 0, 2, -1, 1], np.int64), np.array(3, np.int64)], {}, [0]),
    "Acos": ([f(3, 4, lo=-0.9, hi=0.9)], {}, [0]),
    "Asin": ([f(3, 4, lo=-0.9, hi=0.9)], {}, [0]),
    "Acosh": ([f(3, 4, lo=1.5, hi=3.0)], {}, [0]),
    "Asinh": ([f(3, 4)], {}, [0]),
    "Atan": ([f(3, 4)], {}, [0]),
    "Atanh": ([f(3, 4, lo=-0.9, hi=0.9)], {}, [0]),
    "Sinh": ([f(3, 4)], {}, [0]),
    "Cosh": ([f(3, 4)], {}, [0]),
    "Tan": ([f(3, 4)], {}, [0]),
    "Erf": ([f(3, 4)], {}, [0]),
    "Softsign": ([f(3, 4)], {}, [0]),
    "ThresholdedRelu": ([f(3, 4, lo=-2, hi=2)], {"alpha": 0.3}, [0]),
    "Shrink": ([f(3, 4, lo=-2, hi=2)], {"lambd": 0.4, "bias": 0.1}, [0]),
    "Selu": ([f(3, 4)], {}, [0]),
    "Celu": ([f(3, 4)], {"alpha": 0.8}, [0]),
    "HardSigmoid": ([f(3, 4, lo=-4, hi=4)], {}, [0]),
    "HardSwish": ([f(3, 4, lo=-5, hi=5)], {}, [0]),
    "Swish": ([f(3, 4)], {"alpha": 1.3}, [0]),
    "Mish": ([f(3, 4)], {}, [0]),
    "Gelu": ([f(3, 4)], {}, [0]),
    "PRelu": ([f(3, 4), f(4)], {}, [0, 1]),
    "CastLike": ([f(3, 4), np.zeros(1)], {}, [0]),
    "ReduceSumSquare": ([f(3, 4), ints([1])], {"keepdims": 0}, [0]),
    "ReduceL1": ([f(3, 4), ints([0])], {"keepdims": 1}, [0]),
    "ReduceL2": ([f(3, 4), ints([1])], {"keepdims": 0}, [0]),
    "ReduceLogSum": ([pos(3, 4), ints([1])], {"keepdims": 0}, [0]),
    "ReduceLogSumExp": ([f(3, 4), ints([1])], {"keepdims": 1}, [0]),
    "ReduceProd": ([pos(3, 4), ints([0])], {"keepdims": 0}, [0]),
    "TopK": ([f(3, 5), ints([2])], {"axis": 1}, [0]),
    "Tile": ([f(2, 3), ints([2, 2])], {}, [0]),
    "Pad": ([f(2, 3), ints([0, 1, 1, 2])], {}, [0]),
    "Trilu": ([f(4, 4)], {"upper": 0}, [0]),
    "CumSum": ([f(3, 4), ints(1)], {"reverse": 0, "exclusive": 1}, [0]),
    "ReverseSequence": ([f(4, 2, 3), ints([3, 2])], {"batch_axis": 1, "time_axis": 0}, [0]),
    "GatherElements": ([f(3, 4), ints([[0, 1], [2, 2], [3, 0]])], {"axis": 1}, [0]),
    "GatherND": ([f(3, 4), ints([[0, 1], [2, 2], [0, 1]])], {}, [0]),
    "ScatterElements": ([f(3, 4), ints([[0, 1], [2, 3], [3, 0]]), f(3, 2)], {"axis": 1}, [0, 2]),
    "Scatter": ([f(3, 4), ints([[0, 1], [2, 3], [3, 0]]), f(3, 2)], {"axis": 1}, [0, 2]),
    "ScatterND": ([f(3, 4), ints([[0, 1], [2, 2]]), f(2)], {}, [0, 2]),
    "DepthToSpace": ([f(1, 8, 2, 3)], {"blocksize": 2, "mode": "DCR"}, [0]),
    "SpaceToDepth": ([f(1, 2, 4, 6)], {"blocksize": 2}, [0]),
    "GlobalMaxPool": ([f(2, 3, 4, 4)], {}, [0]),
    "ConvTranspose": ([f(2, 3, 4, 4), f(3, 2, 3, 3), f(2)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                             "pads": [1, 1, 1, 1]}, [0, 1, 2]),
    "BatchNormalization": ([f(4, 3, 2, 2), pos(3), f(3), f(3), pos(3)], {"epsilon": 1e-3}, [0, 1, 2, 3, 4]),
    "Dropout": ([f(3, 4)], {}, [0]),
    "InstanceNormalization": ([f(2, 3, 4, 4), pos(3), f(3)], {"epsilon": 1e-5}, [0, 1, 2]),
    "GroupNormalization": ([f(2, 4, 3, 3), pos(4), f(4)], {"epsilon": 1e-5, "num_groups": 2}, [0, 1, 2]),
    "RMSNormalization": ([f(3, 6), pos(6)], {"axis": -1, "epsilon": 1e-5}, [0, 1]),
    "MeanVarianceNormalization": ([f(2, 3, 4, 4)], {"axes": [0, 2, 3]}, [0]),
    "LpNormalization": ([f(3, 5)], {"axis": 1, "p": 2}, [0]),
    "GlobalLpPool": ([f(2, 3, 4, 4)], {"p": 3}, [0]),
    "Einsum": ([f(2, 3, 4), f(2, 4, 5)], {"equation": "bij,bjk->bik"}, [0, 1]),
    "NegativeLogLikelihoodLoss": ([f(4, 3, 2), ints([[0, 2], [1, 1], [2, 0], [1, 2]]), pos(3)],
                                  {"reduction": "mean", "ignore_index": 1}, [0, 2]),
    "SoftmaxCrossEntropyLoss": ([f(4, 3), ints([0, 2, 1, 2])], {"reduction": "sum"}, [0]),
    "LRN": ([f(2, 5, 3, 3)], {"size": 3, "alpha": 0.5, "beta": 0.75, "bias": 1.0}, [0]),
    "MaxUnpool": ([f(1, 2, 2, 2), ints([[[[0, 3], [9, 14]], [[16, 19], [25, 30]]]])], {"kernel_shape": [2, 2],
                                                                                      "strides": [2, 2]}, [0]),
    "LpPool": ([f(2, 2, 5, 5)], {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1], "p": 3}, [0]),
    "flowstack::LSTMBlockCell": ([f(2, 3), f(2, 4), f(2, 4), f(7, 16), f(16)], {"forget_bias": 1.0},
                                 [0, 1, 2, 3, 4]),
    "flowstack::LSTMBlockFused": ([f(3, 2, 3), f(2, 4), f(2, 4), f(7, 16), f(16)], {"forget_bias": 1.0},
                                  [0, 1, 2, 3, 4]),
    "AffineGrid": ([f(2, 2, 3), ints([2, 1, 3, 4])], {"align_corners": 0}, [0]),
    "GridSample": ([f(1, 2, 3, 4), f(1, 2, 3, 2, lo=-1.2, hi=1.2)],
                   {"mode": "linear", "padding_mode": "zeros", "align_corners": 0}, [0, 1]),
    "Attention": ([f(2, 2, 3, 4), f(2, 2, 5, 4), f(2, 2, 5, 3)], {}, [0, 1, 2]),
    "RotaryEmbedding": ([f(2, 3, 8), f(2, 3, 2), f(2, 3, 2)], {"num_heads": 2}, [0, 1, 2]),
    "CenterCropPad": ([f(4, 3, 5), ints([2, 6])], {"axes": [0, 2]}, [0]),
    "Col2Im": ([f(1, 8, 6), ints([3, 4]), ints([2, 2])], {}, [0]),
    "Compress": ([f(3, 4), np.array([True, False, True, True])], {"axis": 1}, [0]),
    "CausalConvWithState": ([f(2, 3, 5), f(3, 1, 3), f(3), f(2, 3, 2)], {"activation": "silu"}, [0, 1, 2, 3]),
    "CumProd": ([np.array([[0.5, 0.0, -1.2, 0.8, 1.5], [0.0, 0.0, 0.7, -0.4, 1.1], [0.9, -0.6, 1.3, 0.0, 0.4]]),
                 ints(1)], {}, [0]),
    "Det": ([f(2, 3, 3)], {}, [0]),
    "flowstack::MatrixInverse": ([f(2, 3, 3) + 3 * np.eye(3)], {}, [0]),
    "Resize": ([f(1, 1, 3, 4), np.zeros(0), np.array([1.0, 1.0, 2.0, 1.5])], {"mode": "linear"}, [0]),
    "Upsample": ([f(1, 1, 2, 3), np.array([1.0, 1.0, 2.0, 2.0])], {"mode": "nearest"}, [0]),
    # special functions (schemas/ops/special.py); TensorFlow gives Polygamma's a, Zeta's x and Betainc's a, b none
    "flowstack::Lgamma": ([pos(3, 4)], {}, [0]),
    "flowstack::Digamma": ([pos(3, 4)], {}, [0]),
    "flowstack::Polygamma": ([np.array([[1.0], [2.0], [3.0]]), pos(3, 4)], {}, [1]),
    "flowstack::Zeta": ([np.array([2.5, 3.0, 4.5]), pos(2, 3)], {}, [1]),
    "flowstack::Igamma": ([pos(3, 4), pos(3, 4)], {}, [0, 1]),
    "flowstack::Igammac": ([pos(3, 4), f(3, 4, lo=1.5, hi=4.0)], {}, [0, 1]),
    "flowstack::Betainc": ([pos(3, 1), pos(4), f(3, 4, lo=0.1, hi=0.9)], {}, [2]),
    "flowstack::BesselI0e": ([f(3, 4, lo=-3.0, hi=3.0)], {}, [0]),
    "flowstack::BesselI1e": ([f(3, 4, lo=-3.0, hi=3.0)], {}, [0]),
    "flowstack::Atan2": ([f(3, 4), pos(4)], {}, [0, 1]),
    "flowstack::CumulativeLogsumexp": ([f(3, 4, lo=-3.0, hi=3.0), ints(1)], {"reverse": 1}, [0]),
    # linalg (schemas/ops/linalg.py): ops reading one triangle get their gradient on it
    "flowstack::Cholesky": ([(lambda m: m @ m.T + 3 * np.eye(3))(f(3, 3))], {}, [0]),
    "flowstack::MatrixTriangularSolve": ([f(2, 3, 3) + 3 * np.eye(3), f(2, 3, 2)], {"lower": 0, "adjoint": 1}, [0, 1]),
    "flowstack::LogMatrixDeterminant": ([f(2, 3, 3) + 2 * np.eye(3)], {}, [0], None, 2e-4, 2e-6, True),
    "flowstack::Svd": ([f(2, 4, 3)], {}, [0], None, 2e-4, 2e-6, True),
    "flowstack::SelfAdjointEigV2": ([(lambda m: m + m.T)(f(3, 3))], {}, [0], None, 2e-4, 2e-6, True),
    "flowstack::MatrixSetDiag": ([f(2, 3, 4), f(2, 3)], {}, [0, 1]),
    "flowstack::MatrixDiagPart": ([f(2, 4, 3)], {}, [0]),
    "flowstack::MatrixExponential": ([f(2, 3, 3)], {}, [0]),
    "flowstack::TridiagonalSolve": ([f(2, 3, 4) + np.array([0.0, 3.0, 0.0])[:, None], f(2, 4, 2)], {}, [0, 1]),
}

NO_ROI, NO_SCALES = np.zeros(0), np.zeros(0)

# The attributes a gradient rule branches on, beyond each op's CASES entry: (op, inputs, attrs,
# inputs to differentiate[, extra _check arguments]).
VARIANTS = {
    "CausalConvWithState-no-state-both-outputs": ("CausalConvWithState", [f(1, 2, 4), f(2, 1, 3), None, None],
                                                  {"activation": "none"}, [0, 1], {"num_outputs": 2, "all_outputs": True}),
    "CausalConvWithState-state-both-outputs": ("CausalConvWithState", [f(2, 2, 3), f(2, 1, 4), f(2), f(2, 2, 3)],
                                               {"activation": "swish"}, [0, 1, 2, 3], {"num_outputs": 2, "all_outputs": True}),
    "CausalConvWithState-kernel-one": ("CausalConvWithState", [f(1, 2, 4), f(2, 1, 1)], {}, [0, 1]),
    "AffineGrid-3d-align-corners": ("AffineGrid", [f(1, 3, 4), ints([1, 1, 2, 3, 2])], {"align_corners": 1}, [0]),
    **{f"GridSample-{mode}-{padding}-align{align}": (
        "GridSample", [f(2, 2, 3, 4), f(2, 3, 2, 2, lo=-1.3, hi=1.3)],
        {"mode": mode, "padding_mode": padding, "align_corners": align}, [0, 1])
        for mode, padding, align in [("linear", "zeros", 1), ("linear", "border", 0), ("linear", "border", 1),
                                     ("linear", "reflection", 1), ("nearest", "zeros", 0), ("nearest", "border", 1),
                                     ("cubic", "zeros", 1), ("cubic", "border", 0), ("cubic", "reflection", 0)]},
    "GridSample-3d-linear": ("GridSample", [f(1, 2, 2, 3, 3), f(1, 2, 2, 2, 3)], {"mode": "linear"}, [0, 1]),
    "Attention-causal-float-mask": ("Attention", [f(2, 2, 3, 4), f(2, 2, 5, 4), f(2, 2, 5, 3), f(2, 1, 3, 5)],
                                    {"is_causal": 1}, [0, 1, 2, 3]),
    "Attention-bool-mask-empty-row": ("Attention", [f(1, 2, 3, 4), f(1, 2, 4, 4), f(1, 2, 4, 4),
                                                    np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1]], bool)],
                                      {"scale": 0.3}, [0, 1, 2]),
    "Attention-3d-gqa-past-causal-softcap": (
        "Attention", [f(2, 3, 8), f(2, 3, 4), f(2, 3, 6), None, f(2, 1, 2, 4), f(2, 1, 2, 6)],
        {"q_num_heads": 2, "kv_num_heads": 1, "is_causal": 1, "softcap": 2.0}, [0, 1, 2, 4, 5]),
    "Attention-all-outputs": ("Attention", [f(1, 2, 3, 4), f(1, 1, 3, 4), f(1, 1, 3, 4), f(3, 2),
                                            f(1, 1, 1, 4), f(1, 1, 1, 4)],
                              {"qk_matmul_output_mode": 3}, [0, 1, 2, 3, 4, 5],
                              {"num_outputs": 4, "all_outputs": True}),  # a mask shorter than past + K
    "Attention-qk-output-biased": ("Attention", [f(1, 2, 3, 4), f(1, 2, 3, 4), f(1, 2, 3, 4), f(3, 3)],
                                   {"qk_matmul_output_mode": 2, "softcap": 1.5}, [0, 1, 2, 3],
                                   {"num_outputs": 4, "all_outputs": True}),
    "Attention-qk-output-scores": ("Attention", [f(1, 2, 3, 4), f(1, 2, 3, 4), f(1, 2, 3, 4)],
                                   {"qk_matmul_output_mode": 0, "softcap": 1.5}, [0, 1, 2],
                                   {"num_outputs": 4, "all_outputs": True}),
    "Attention-nonpad-kv-window": ("Attention", [f(2, 1, 2, 4), f(2, 1, 4, 4), f(2, 1, 4, 4), None, None, None,
                                                 ints([3, 4])],
                                   {"is_causal": 1, "left_window_size": 1}, [0, 1, 2]),
    "RotaryEmbedding-4d-interleaved-partial-positions": (
        "RotaryEmbedding", [f(1, 2, 3, 6), f(4, 2), f(4, 2), ints([[0, 2, 2]])],
        {"interleaved": 1, "rotary_embedding_dim": 4}, [0, 1, 2]),
    "CenterCropPad-all-axes-odd": ("CenterCropPad", [f(3, 4), ints([6, 1])], {}, [0]),
    "Col2Im-pads-strides-dilations": ("Col2Im", [f(1, 8, 9), ints([4, 5]), ints([2, 2])],
                                      {"pads": [1, 0, 1, 0], "strides": [2, 1], "dilations": [1, 2]}, [0]),
    "Compress-flat-short-condition": ("Compress", [f(2, 3), np.array([True, False, False, True, True])], {}, [0]),
    "Compress-axis0": ("Compress", [f(4, 3), np.array([False, True, True])], {"axis": 0}, [0]),
    "CumProd-exclusive-reverse-zeros": ("CumProd", [np.array([[0.0, 1.2, 0.0, -0.7], [0.6, 0.0, 0.9, 1.4],
                                                              [1.1, -0.8, 0.5, 0.0]]), ints(0)],
                                        {"exclusive": 1, "reverse": 1}, [0]),
    "CumProd-exclusive": ("CumProd", [f(2, 6), ints(-1)], {"exclusive": 1}, [0]),
    "Det-single": ("Det", [f(4, 4)], {}, [0]),
    "Resize-nearest-sizes-up": ("Resize", [f(1, 1, 3, 4), NO_ROI, NO_SCALES, ints([1, 1, 5, 7])],
                                {"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}, [0]),
    "Resize-nearest-ceil-down": ("Resize", [f(1, 2, 5, 6), NO_ROI, NO_SCALES, ints([1, 2, 2, 4])],
                                 {"mode": "nearest", "nearest_mode": "ceil"}, [0]),
    "Resize-linear-align-corners-axes": ("Resize", [f(2, 3, 4), NO_ROI, np.array([1.75, 0.5])],
                                         {"mode": "linear", "axes": [1, 2],
                                          "coordinate_transformation_mode": "align_corners"}, [0]),
    "Resize-linear-antialias-down": ("Resize", [f(1, 1, 6, 5), NO_ROI, np.array([1.0, 1.0, 0.5, 0.6])],
                                     {"mode": "linear", "antialias": 1}, [0]),
    "Resize-cubic-exclude-outside": ("Resize", [f(1, 1, 4, 3), NO_ROI, np.array([1.0, 1.0, 1.5, 2.0])],
                                     {"mode": "cubic", "exclude_outside": 1}, [0]),
    "Resize-cubic-pytorch-half-pixel-sizes": ("Resize", [f(1, 1, 5, 4), NO_ROI, NO_SCALES, ints([1, 1, 3, 6])],
                                              {"mode": "cubic", "cubic_coeff_a": -0.5,
                                               "coordinate_transformation_mode": "pytorch_half_pixel"}, [0]),
    "Resize-linear-keep-aspect-ratio": ("Resize", [f(1, 1, 3, 4), NO_ROI, NO_SCALES, ints([5, 5])],
                                        {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"},
                                        [0]),
    "Resize-tf-crop-and-resize-extrapolated": (
        "Resize", [f(1, 1, 4, 4), np.array([0.0, 0.0, -0.3, 0.1, 1.0, 1.0, 0.8, 1.2]), NO_SCALES, ints([1, 1, 4, 5])],
        {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 2.0}, [0]),
    "Upsample-linear": ("Upsample", [f(1, 1, 2, 3), np.array([1.0, 1.0, 2.0, 1.5])], {"mode": "linear"}, [0]),
}

SKIP = {
    # Loop primitives are never differentiated one by one: a while_loop is differentiated whole
    # (tests/trainer/test_control_flow.py checks loop gradients against the unrolled graph).
    "flowstack::Enter": "differentiated as part of its while_loop (test_control_flow)",
    "flowstack::Exit": "differentiated as part of its while_loop (test_control_flow)",
    "flowstack::NextIteration": "differentiated as part of its while_loop (test_control_flow)",
    # Switch/Merge need a dead-branch executor, checked through cond (test_control_flow).
    "flowstack::Switch": "checked through cond gradients (test_control_flow)",
    "flowstack::Merge": "checked through cond gradients (test_control_flow)",
}


def _qual(s):
    return f"{s.domain}::{s.name}" if s.domain else s.name


DIFFERENTIABLE = [s for s in all_schemas() if s.differentiable and has_kernel(s.name, s.domain)]


def test_max_pool_gradient_when_windows_tile_the_input():
    check_op_gradient("MaxPool", "", *CASES["flowstack::MaxPoolTiled"])


# Stride-1 convolutions take their own input-gradient path (dY laid out on the padded rows).
CONV_STRIDE_ONE = {
    "pads_and_dilations": ([f(2, 3, 6, 7), f(4, 3, 3, 2), f(4)],
                           {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "dilations": [2, 1]}),
    "groups": ([f(2, 4, 5, 5), f(6, 2, 3, 3)], {"kernel_shape": [3, 3], "group": 2}),
    "one_spatial_axis": ([f(2, 3, 7), f(2, 3, 3)], {"kernel_shape": [3], "pads": [1, 1]}),
}


@pytest.mark.parametrize("case", CONV_STRIDE_ONE)
def test_conv_gradient_at_stride_one(case):
    inputs, attrs = CONV_STRIDE_ONE[case]
    check_op_gradient("Conv", "", inputs, attrs, list(range(len(inputs))))


@pytest.mark.parametrize("case", VARIANTS)
def test_gradient_variants(case):
    name, inputs, attrs, diff, *extra = VARIANTS[case]
    check_op_gradient(name, "", inputs, attrs, diff, **(extra[0] if extra else {}))


@pytest.mark.parametrize("schema", DIFFERENTIABLE, ids=_qual)
def test_gradient_matches_finite_differences(schema):
    q = _qual(schema)
    if q in SKIP:
        pytest.skip(SKIP[q])
    assert has_gradient(schema.name, schema.domain), f"{q} is differentiable but has no gradient rule"
    assert q in CASES, f"{q} has a gradient rule but no finite-difference case in CASES"
    check_op_gradient(schema.name, schema.domain, *CASES[q])


def test_skip_list_is_short_and_current():
    names = {_qual(s) for s in DIFFERENTIABLE}
    assert set(SKIP) <= names, f"stale SKIP entries: {set(SKIP) - names}"
    assert set(CASES) - {"flowstack::MaxPoolTiled"} <= names, f"stale CASES: {set(CASES) - names}"
    assert len(SKIP) <= 5  # only ever lower this


def test_gather_gradient_is_sparse():
    g = T.Graph()
    with g.as_default():
        table = T.Variable(np.ones((100, 4), np.float32))
        ids = T.placeholder(np.int64, (None,))
        loss = T.reduce_sum(T.nn.embedding_lookup(table, ids))
        (grad,) = T.gradients(loss, [table])
    assert isinstance(grad, T.IndexedSlices)
    assert grad.values.shape == (None, 4)


def test_gradients_sum_over_all_paths():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, ())
        y = x * x + x * 3.0 + T.exp(x)
        (dx,) = T.gradients(y, [x])
    assert np.isclose(T.Session(g).run(dx, {x: 0.5}), 2 * 0.5 + 3 + np.exp(0.5))


def test_stop_gradient_and_unconnected():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, ())
        z = T.placeholder(np.float64, ())
        y = T.stop_gradient(x * x) + x
        dx, dz = T.gradients(y, [x, z])
    assert dz is None
    assert T.Session(g).run(dx, {x: 3.0}) == 1.0
