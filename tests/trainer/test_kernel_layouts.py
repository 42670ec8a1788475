"""Kernels give the same answers whatever the memory layout of their inputs.

Inputs often arrive as transposed views (a dense layer over dynamic_rnn's batch-major outputs, a
MatMul over stacked rows): a kernel that writes into ``x.reshape(...)`` of such an array writes into
a copy, and its result silently loses that write. Each gradient-checked case of test_gradients
runs here twice, on C-ordered inputs and on the same values as transposed views; every output and
every gradient must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from schemas.registry import has_schema
from tests.trainer.test_gradients import CASES


def _outputs(qualified, inputs, attrs, diff, num_outputs, transposed):
    """Every output of the op and the gradients of its first float output, fed as check_op_gradient
    feeds it: the differentiated inputs as float64 placeholders, the others as constants. With
    ``transposed``, each differentiated input of two or more dimensions is fed with its axes reversed
    and reversed back by a Transpose, whose output is a strided view, not a C-ordered array."""
    domain, _, name = qualified.rpartition("::")
    g = T.Graph()
    with g.as_default():
        feeds, holders = {}, []
        for i, v in enumerate(inputs):
            if i not in diff:
                holders.append(None if v is None else T.constant(v))
                continue
            value = np.asarray(v, np.float64)
            flip = transposed and value.ndim >= 2
            fed = value.T.copy() if flip else value
            ph = T.placeholder(np.float64, fed.shape, name=f"in{i}")
            feeds[ph] = fed
            holders.append(T.transpose(ph, list(range(value.ndim))[::-1]) if flip else ph)
        node = T.make_op(name, holders, attrs, domain=domain, num_outputs=num_outputs)
        outs = [o for o in node.outputs if o.dtype is not None]
        first = next(o for o in outs if o.dtype.kind == "f")
        weight = T.constant(np.linspace(0.5, 1.5, int(np.prod(first.shape))).reshape(first.shape)
                            if first.shape is not None and None not in first.shape else np.float64(1.5))
        grads = [gr.to_dense() if isinstance(gr, T.IndexedSlices) else gr
                 for gr in T.gradients(T.reduce_sum(first * T.cast(weight, first.dtype)), [holders[i] for i in diff])]
    return T.Session(g).run(outs + [gr for gr in grads if gr is not None], feeds)


@pytest.mark.parametrize("qualified", sorted(CASES))
def test_transposed_views_give_the_same_outputs_and_gradients(qualified):
    inputs, attrs, diff, *rest = CASES[qualified]
    num_outputs = rest[0] if rest else None
    domain, _, name = qualified.rpartition("::")
    if not has_schema(name, domain):
        pytest.skip("not a registered op")
    if not any(np.ndim(inputs[i]) >= 2 for i in diff):
        pytest.skip("no differentiated input of two or more dimensions")
    expected = _outputs(qualified, inputs, attrs, diff, num_outputs, transposed=False)
    got = _outputs(qualified, inputs, attrs, diff, num_outputs, transposed=True)
    for k, (e, g) in enumerate(zip(expected, got)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12, err_msg=f"{qualified} result {k}")


def test_sparse_cross_entropy_gradient_over_a_transposed_batch_of_sequences():
    """The case that broke: per-token logits [batch, time, classes] read from a time-major buffer
    (a dense layer over dynamic_rnn's outputs), where a reshape of the logits is a copy."""
    rng = np.random.default_rng(3)
    time_major = rng.standard_normal((5, 2, 4))
    labels = rng.integers(0, 4, (2, 5))
    g = T.Graph()
    with g.as_default():
        ph = T.placeholder(np.float64, time_major.shape)
        node = T.make_op("SparseSoftmaxCrossEntropyWithLogits", [T.transpose(ph, [1, 0, 2]), T.constant(labels)],
                         domain="flowstack")
    loss, backprop = T.Session(g).run(node.outputs[:2], {ph: time_major})
    logits = time_major.transpose(1, 0, 2)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(backprop, p - np.eye(4)[labels], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(loss, -np.log(np.take_along_axis(p, labels[..., None], -1))[..., 0], rtol=1e-12)
