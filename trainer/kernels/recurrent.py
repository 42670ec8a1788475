"""LSTM kernels: one step (LSTMBlockCell), the fused whole sequence (LSTMBlockFused), their gradients.

One op runs every step, so the work that does not depend on the recurrence is done once for the
whole sequence as large GEMMs: the input projection ``X @ W_x`` before the forward loop, and
``dW``, ``db`` (and, in the gradient rule, ``dx``) after the backward loop. Each step is then one
small GEMM against the recurrent weights plus elementwise gate math written into buffers
allocated once per call. The gate layout is TensorFlow's (columns i, j, f, o of W: input gate,
candidate, forget gate, output gate), so a TensorFlow 1.x checkpoint's LSTM kernel and bias run as
they are.
"""

from __future__ import annotations

from functools import lru_cache

from edge_runtime.kernels import kernel

D = "flowstack"


@lru_cache(maxsize=None)
def gate_affine(hidden, dtype, xp):
    """Per-column (scale, shift) over the [i, j, f, o] gates: sigmoid(z) = 0.5 * tanh(0.5 * z) + 0.5
    and j = tanh(z), so one tanh pass covers all four gates (cached: never written to)."""
    half = xp.full(4 * hidden, 0.5, dtype=dtype)
    half[hidden:2 * hidden] = 1
    shift = xp.full(4 * hidden, 0.5, dtype=dtype)
    shift[hidden:2 * hidden] = 0
    return half, shift


@kernel("LSTMBlockCell", domain=D)
def lstm_block_cell(x, h_prev, c_prev, w, b, *, xp, forget_bias):
    hidden = h_prev.shape[1]
    # One GEMM over [x, h_prev]: the copy is cheaper than a second small GEMM and its add.
    z = xp.matmul(xp.concatenate((x, h_prev), axis=1), w)
    z += b
    if forget_bias:
        z[:, 2 * hidden:3 * hidden] += forget_bias
    half, shift = gate_affine(hidden, z.dtype.str, xp)
    z *= half
    xp.tanh(z, out=z)
    z *= half
    z += shift
    i, j, f, o = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
    c = f * c_prev
    c += i * j
    co = xp.tanh(c)
    h = o * co
    return h, c, i, j, f, o, co


@kernel("LSTMBlockCellGrad", domain=D)
def lstm_block_cell_grad(dh, dc, x, h_prev, c_prev, w, i, j, f, o, co, *, xp, need_dx=1):
    hidden = h_prev.shape[1]
    d = x.shape[1]
    dz = xp.empty((x.shape[0], 4 * hidden), dtype=x.dtype)
    dct = dh * o
    dct *= 1 - co * co
    dct += dc
    # pre-activation gradients, written straight into their slices of dz
    xp.multiply(dct * j, i * (1 - i), out=dz[:, :hidden])
    xp.multiply(dct * i, 1 - j * j, out=dz[:, hidden:2 * hidden])
    xp.multiply(dct * c_prev, f * (1 - f), out=dz[:, 2 * hidden:3 * hidden])
    xp.multiply(dh * co, o * (1 - o), out=dz[:, 3 * hidden:])
    if need_dx:
        dxh = xp.matmul(dz, w.T)
        dx, dh_prev = dxh[:, :d], dxh[:, d:]
    else:
        dx, dh_prev = None, xp.matmul(dz, w[d:].T)
    dw = xp.empty_like(w)
    xp.matmul(x.T, dz, out=dw[:d])
    xp.matmul(h_prev.T, dz, out=dw[d:])
    dct *= f
    return dx, dh_prev, dct, dw, dz.sum(axis=0)


@kernel("LSTMBlockFused", domain=D)
def lstm_block_fused(x, h0, c0, w, b, *, xp, forget_bias):
    steps, batch, width = x.shape
    hidden = h0.shape[1]
    dtype = x.dtype
    # sigmoid(z) = 0.5 * tanh(0.5 * z) + 0.5: with the sigmoid gates' columns of W and b halved up
    # front, one tanh over all four gates and one affine map give i, j, f and o.
    half, shift = gate_affine(hidden, dtype.str, xp)
    w_half = w * half
    bias = b * half
    if forget_bias:
        bias[2 * hidden:3 * hidden] += dtype.type(0.5 * forget_bias)
    gates = xp.empty((steps, batch, 4 * hidden), dtype=dtype)  # the input projection, then the activations
    xp.matmul(x.reshape(steps * batch, width), w_half[:width], out=gates.reshape(steps * batch, 4 * hidden))
    gates += bias
    w_h = w_half[width:]
    y = xp.empty((steps, batch, hidden), dtype=dtype)
    cs = xp.empty_like(y)
    co = xp.empty_like(y)
    recurrent = xp.empty((batch, 4 * hidden), dtype=dtype)
    ig = xp.empty((batch, hidden), dtype=dtype)
    h, c = h0, c0
    for t in range(steps):
        z = gates[t]
        xp.matmul(h, w_h, out=recurrent)
        z += recurrent
        xp.tanh(z, out=z)
        z *= half
        z += shift
        i, j, f, o = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
        xp.multiply(f, c, out=cs[t])
        xp.multiply(i, j, out=ig)
        cs[t] += ig
        xp.tanh(cs[t], out=co[t])
        xp.multiply(o, co[t], out=y[t])
        h, c = y[t], cs[t]
    # The final state is a copy: outputs never alias one another.
    return y, xp.array(h, dtype=dtype), xp.array(c, dtype=dtype), gates, cs, co


@kernel("LSTMBlockFusedGrad", domain=D)
def lstm_block_fused_grad(x, h0, c0, w, y, gates, cs, co, dy, dh_n, dc_n, *, xp):
    steps, batch, width = x.shape
    hidden = h0.shape[1]
    dtype = x.dtype
    # What multiplies the incoming gradients at each step depends only on forward values, so it is
    # computed for all steps at once: with dc the cell state's gradient and dh the output's,
    #   dz_i = dc * j i(1-i),  dz_j = dc * i (1-j^2),  dz_f = dc * c_prev f(1-f),  dz_o = dh * co o(1-o)
    # and dc picks up dh * o (1-co^2) from h = o tanh(c). The loop then scales these factors in
    # place into dz: every buffer here is allocated once (fresh pages cost as much as the math).
    dz = xp.subtract(1, gates, dtype=dtype)
    dz *= gates  # a(1-a): the sigmoid gates' derivative (the j block is overwritten below)
    i, j, f, o = (gates[..., k * hidden:(k + 1) * hidden] for k in range(4))
    d_i, d_j, d_f, d_o = (dz[..., k * hidden:(k + 1) * hidden] for k in range(4))
    d_i *= j
    d_f[:1] *= c0
    d_f[1:] *= cs[:-1]
    d_o *= co
    xp.multiply(j, j, out=d_j)
    xp.subtract(1, d_j, out=d_j)
    d_j *= i
    through_h = xp.multiply(co, co)
    xp.subtract(1, through_h, out=through_h)
    through_h *= o
    dh = xp.zeros((batch, hidden), dtype=dtype) if dh_n is None else xp.array(dh_n, dtype=dtype)
    dc = xp.zeros((batch, hidden), dtype=dtype) if dc_n is None else xp.array(dc_n, dtype=dtype)
    tmp = xp.empty((batch, hidden), dtype=dtype)
    w_h_t = w[width:].T  # a transposed view: BLAS reads it as is
    ijf = dz.reshape(steps, batch, 4, hidden)[:, :, :3]  # the gates dc scales: i, j and f
    for t in range(steps - 1, -1, -1):
        if dy is not None:
            dh += dy[t]
        xp.multiply(dh, through_h[t], out=tmp)
        dc += tmp
        xp.multiply(ijf[t], dc[:, None, :], out=ijf[t])  # i, j and f in one op
        d_o[t] *= dh
        dc *= f[t]
        xp.matmul(dz[t], w_h_t, out=dh)
    dz2 = dz.reshape(steps * batch, 4 * hidden)
    dw = xp.empty_like(w)
    xp.matmul(x.reshape(steps * batch, width).T, dz2, out=dw[:width])
    # The previous outputs are h0 then y[:-1]: two GEMMs rather than a copy of them into one array.
    dw_h = dw[width:]
    xp.matmul(y[:-1].reshape(-1, hidden).T, dz2[batch:], out=dw_h)  # zeros for a single step
    if steps:
        dw_h += xp.matmul(h0.T, dz2[:batch])
    return dz2, dh, dc, dw, dz2.sum(axis=0)
