"""The gradient helper kernel of TensorArray writes (schemas/ops/tensor_array.py)."""

from __future__ import annotations

from edge_runtime.kernels import kernel

D = "flowstack"


@kernel("TensorArrayScatterGrad", domain=D)
def tensor_array_scatter_grad(grad, flow, indices, *, xp):
    idx = indices.reshape(-1).astype(xp.int64)
    grad_value = grad[idx].reshape(indices.shape + grad.shape[1:])
    if flow.ndim == 1 and flow.shape[0] == 0:  # the write allocated the flow: nothing flows to the empty one
        return xp.zeros(flow.shape, dtype=grad.dtype), grad_value
    grad_flow = grad[:flow.shape[0]].copy()
    kept = idx[idx < flow.shape[0]]
    grad_flow[kept] = 0
    return grad_flow, grad_value
