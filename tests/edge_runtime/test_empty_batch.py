"""A dynamic batch of zero rows gives empty outputs of the right shape, as onnxruntime does, on
every convolution path (each once reshaped its columns with a -1 that a zero-size array cannot
resolve), the fused convolutions, pooling and normalizations, and through whole conv nets."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from benchmarks.edge_vs_onnxruntime import flow_bytes
from benchmarks.models import lenet, mobilenet_v2
from edge_runtime import load
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run


def _f32(*shape) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


DEPTHWISE = {"group": 8, "pads": [1, 1, 1, 1]}
CASES = {
    # name: (op, domain, input shape at batch 1, other inputs, attributes)
    "conv pointwise": ("Conv", "", (1, 3, 12, 12), [_f32(4, 3, 1, 1)], {}),
    "conv flat columns": ("Conv", "", (1, 3, 12, 12), [_f32(4, 3, 3, 3)], {"pads": [1, 1, 1, 1]}),
    "conv strided windows": ("Conv", "", (1, 3, 12, 12), [_f32(4, 3, 3, 3)], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "conv depthwise": ("Conv", "", (1, 8, 12, 12), [_f32(8, 1, 3, 3)], DEPTHWISE),
    "conv depthwise strided": ("Conv", "", (1, 8, 12, 12), [_f32(8, 1, 3, 3)], {**DEPTHWISE, "strides": [2, 2]}),
    "conv channels-last": ("Conv", "", (1, 16, 8, 8), [_f32(16, 16, 5, 5)], {}),
    "conv 1-D": ("Conv", "", (1, 3, 13), [_f32(4, 3, 3)], {"pads": [1, 1]}),
    "FusedConvMaxPool": ("FusedConvMaxPool", DOMAIN, (1, 8, 12, 12), [_f32(8, 1, 3, 3), None],
                         {**DEPTHWISE, "activation": "Relu", "pool_kernel_shape": [2, 2], "pool_strides": [2, 2]}),
    "FusedConvPointwise": ("FusedConvPointwise", DOMAIN, (1, 8, 12, 12), [_f32(8, 1, 3, 3), None, _f32(2, 8, 1, 1)],
                           DEPTHWISE),
    "FusedPointwiseConv": ("FusedPointwiseConv", DOMAIN, (1, 3, 12, 12), [_f32(8, 3, 1, 1), None, _f32(8, 1, 3, 3)],
                           {**DEPTHWISE, "strides": [2, 2]}),
    "MaxPool with indices": ("MaxPool", "", (1, 3, 8, 8), [], {"kernel_shape": [2, 2]}),
    "GlobalAveragePool": ("GlobalAveragePool", "", (1, 8, 7, 7), [], {}),
    "GroupNormalization": ("GroupNormalization", "", (1, 8, 7, 7), [np.ones(8, np.float32), np.zeros(8, np.float32)],
                           {"num_groups": 2}),
    "MeanVarianceNormalization": ("MeanVarianceNormalization", "", (1, 3, 5, 5), [], {}),  # its axes include the batch
}


@pytest.mark.parametrize("name", CASES)
def test_an_empty_batch_gives_empty_outputs(name) -> None:
    op, domain, shape, others, attrs = CASES[name]
    one = run(op, _f32(*shape), *others, domain=domain, **attrs)
    none = run(op, np.zeros((0,) + shape[1:], np.float32), *others, domain=domain, **attrs)
    for want, got in zip(*((one, none) if isinstance(one, tuple) else ((one,), (none,)))):
        assert got.shape == (0,) + want.shape[1:] and got.dtype == want.dtype


@pytest.mark.parametrize("build, image", [(lambda: lenet(), 28), (lambda: mobilenet_v2(image=64, width_mult=0.35), 64)],
                         ids=["lenet", "mobilenet_v2"])
def test_a_conv_net_runs_an_empty_batch_as_onnxruntime_does(build, image) -> None:
    model = build()
    channels = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.zeros((0, channels, image, image), np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})
    got = list(load(flow_bytes(model)).run({"x": x}).values())
    assert [g.shape for g in got] == [w.shape for w in want]
