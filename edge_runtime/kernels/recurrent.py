"""Recurrent layers: RNN, GRU, LSTM (ONNX semantics).

All three share one driver. The input projection ``X @ W^T`` (plus the biases that can be folded
into it) is one matmul over every timestep and direction; the loop over time is the only Python
loop, and each step is one small matmul ``H @ R^T`` per direction (in blocks of R's rows where the
batch is small, ``recurrent_row_blocks``), the gates' elementwise work done for all directions at
once.

Internally everything is time-major with a leading direction axis: projections are
``(directions, time, batch, gates * hidden)`` and states ``(directions, batch, hidden)``. A
reverse direction runs forward over its time-reversed input; with ``sequence_lens`` each batch
entry is reversed within its own length (a gather), and steps past a sequence's end are masked:
its state stops changing and its ``Y`` rows are zero.
"""

from __future__ import annotations

from typing import Callable

from edge_runtime.kernels.registry import kernel

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


# --- activations ----------------------------------------------------------------------------

def _sigmoid(x, a, b, xp):
    # tanh form: no overflow for large |x| (exp would warn) and one transcendental call
    return xp.tanh(x * 0.5) * 0.5 + 0.5


# name -> (function(x, alpha, beta, xp), default alpha or None if unused, default beta or None)
_ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {
    "sigmoid": (_sigmoid, None, None),
    "tanh": (lambda x, a, b, xp: xp.tanh(x), None, None),
    "relu": (lambda x, a, b, xp: xp.maximum(x, 0), None, None),
    "affine": (lambda x, a, b, xp: x * a + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b, xp: xp.where(x >= 0, x, x * a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b, xp: xp.where(x > a, x, 0).astype(x.dtype), 1.0, None),
    "scaledtanh": (lambda x, a, b, xp: xp.tanh(x * b) * a, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b, xp: xp.clip(x * a + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b, xp: xp.where(x >= 0, x, xp.expm1(xp.minimum(x, 0)) * a), 1.0, None),
    "softsign": (lambda x, a, b, xp: x / (xp.abs(x) + 1), None, None),
    "softplus": (lambda x, a, b, xp: xp.logaddexp(x, 0).astype(x.dtype), None, None),
}


def _activation_specs(names, alphas, betas, defaults: list[str], num_directions: int):
    """(name, alpha, beta) per activation slot, ``len(defaults) * num_directions`` of them.

    Alphas and betas are consumed in order by the activations that take them (as onnxruntime
    does); a missing one takes the function's default.
    """
    names = list(defaults) * num_directions if not names else list(names)
    if len(names) == len(defaults) and num_directions == 2:
        names = names * 2
    if len(names) != len(defaults) * num_directions:
        raise ValueError(f"expected {len(defaults) * num_directions} activations, got {names}")
    alphas, betas = list(alphas or []), list(betas or [])
    specs = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise ValueError(f"unsupported activation {name!r}; supported: {sorted(_ACTIVATIONS)}")
        _, alpha, beta = _ACTIVATIONS[key]
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        specs.append((key, alpha, beta))
    return specs


def _activations(names, alphas, betas, defaults: list[str], num_directions: int, xp) -> list[Callable]:
    """One callable per activation slot (f, g, h...), each applied to all directions at once."""
    specs = _activation_specs(names, alphas, betas, defaults, num_directions)
    k = len(defaults)
    result = []
    for slot in range(k):
        per_direction = [specs[d * k + slot] for d in range(num_directions)]
        fns = [_bind(spec, xp) for spec in per_direction]
        if all(spec == per_direction[0] for spec in per_direction):
            result.append(fns[0])
        else:
            result.append(lambda x, fns=fns: xp.stack([fn(x[d]) for d, fn in enumerate(fns)]))
    return result


def _bind(spec, xp) -> Callable:
    name, alpha, beta = spec
    fn = _ACTIVATIONS[name][0]
    return lambda x: fn(x, alpha, beta, xp)


def _clipper(clip, xp) -> Callable:
    if clip is None:
        return lambda x: x
    return lambda x: xp.clip(x, -clip, clip)


def _masked(xp, mask, new, old):
    """(next state, Y row) for one step: past a sequence's end the state holds and Y is zero."""
    if mask is None:
        return new, new
    return xp.where(mask, new, old), xp.where(mask, new, 0)


# --- the shared driver ----------------------------------------------------------------------

# A step's recurrent product with a state of at most this many batch entries runs a block of R's
# rows (of the gates) at a time, each block at most RECURRENT_BLOCK_MACS multiply-adds: OpenBLAS's
# AVX-512 build multiplies such skinny products 1.9-4x faster in blocks of that size than whole
# (hidden 256 at batch 8, one thread: R h^T 46.5 -> 24.3 us, h R^T 90.1 -> 21.0 us; and no
# hand-off to a second thread that a loaded machine may not schedule); its AVX2 build runs them
# 1-10% slower. Wider states multiply whole, where blocks ran 3-90% slower (benchmarks/RESULTS.md,
# session 15, edge-small).
RECURRENT_BLOCK_MAX_BATCH = 16
RECURRENT_BLOCK_MACS = 1 << 19


def recurrent_row_blocks(rows: int, hidden: int, batch: int) -> tuple[slice, ...]:
    """The blocks of a (rows, hidden) recurrent weight's rows that a step multiplies a state of
    ``batch`` entries by, one matmul each (see RECURRENT_BLOCK_MACS)."""
    if batch > RECURRENT_BLOCK_MAX_BATCH:
        return (slice(0, rows),)
    step = max(1, RECURRENT_BLOCK_MACS // max(hidden * batch, 1))
    return tuple(slice(s, min(rows, s + step)) for s in range(0, max(rows, 1), step))


class _Layer:
    """Inputs of one recurrent node, normalised to time-major, direction-first arrays."""

    def __init__(self, x, w, r, sequence_lens, *, xp, direction, hidden_size, layout):
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}")
        self.xp = xp
        self.reversed = _DIRECTIONS[direction]
        self.layout = layout
        self.x = x if layout == 0 else xp.swapaxes(x, 0, 1)
        self.steps, self.batch, _ = self.x.shape
        self.directions = len(self.reversed)
        if w.shape[0] != self.directions:
            raise ValueError(f"W has {w.shape[0]} directions; direction={direction!r} needs {self.directions}")
        self.hidden = hidden_size if hidden_size is not None else r.shape[-1]
        self.w = w
        self.r = r
        self.mask = self.index = self.empty = None
        if sequence_lens is not None:
            lens = sequence_lens.astype(xp.int64)
            if not bool((lens >= self.steps).all()):
                t = xp.arange(self.steps)[:, None]
                valid = t < lens[None, :]  # (T, B)
                self.mask = valid[:, None, :, None]  # (T, 1, B, 1): broadcasts over D and hidden
                self.index = xp.where(valid, lens[None, :] - 1 - t, t)
                if not bool(lens.all()):
                    self.empty = (lens == 0)[None, :, None]  # (1, B, 1)

    def initial_state(self, value):
        xp = self.xp
        if value is None:
            return xp.zeros((self.directions, self.batch, self.hidden), dtype=self.x.dtype)
        return value if self.layout == 0 else xp.swapaxes(value, 0, 1)

    def project(self, bias):
        """``X @ W^T + bias`` for every step and direction: (D, T, B, G), reversed where needed."""
        xp = self.xp
        t, b, i = self.x.shape
        flat = xp.ascontiguousarray(self.x).reshape(t * b, i)
        xw = xp.empty((self.directions, t * b, self.w.shape[1]), dtype=self.x.dtype)
        for d in range(self.directions):
            xp.matmul(flat, self.w[d].T, out=xw[d])
        if bias is not None:
            xw += bias[:, None, :]
        xw = xw.reshape(self.directions, t, b, self.w.shape[1])  # not -1: t may be 0
        if any(self.reversed):
            xw = xp.stack([self._flip(xw[d]) if rev else xw[d] for d, rev in enumerate(self.reversed)])
        return xw

    def recurrent_product(self, rows: slice = slice(None)) -> Callable:
        """``h -> h @ R[:, rows]^T`` per direction, (D, batch, hidden) -> (D, batch, width), as 2-D
        matmuls (NumPy's stacked matmul is about half as fast). R's rows are transposed once, here,
        into contiguous blocks of columns (``recurrent_row_blocks``), each multiplied on its own."""
        xp = self.xp
        r = self.r[:, rows]
        width, hidden = r.shape[1], r.shape[2]
        blocks = recurrent_row_blocks(width, hidden, self.batch) if xp.__name__ == "numpy" else (slice(0, width),)
        weights = [xp.ascontiguousarray(xp.swapaxes(r[:, block], 1, 2)) for block in blocks]  # (D, hidden, k)

        def multiply(h):
            if len(blocks) == 1 and self.directions == 1:
                return xp.matmul(h[0], weights[0][0])[None]
            out = xp.empty(h.shape[:2] + (width,), dtype=h.dtype)
            for d in range(self.directions):
                for block, w in zip(blocks, weights):
                    xp.matmul(h[d], w[d], out=out[d, :, block])
            return out

        return multiply

    def _flip(self, a):
        """Reverse time (axis 0 of ``a``), each batch entry within its own length."""
        if self.index is None:
            return a[::-1]
        return a[self.index, self.xp.arange(self.batch)[None, :]]

    def outputs(self, y, *states):
        """Undo the reversal of Y and lay Y and the final states out as the node's layout says."""
        xp = self.xp
        if self.empty is not None:
            # onnxruntime's convention: an empty sequence's final states are zero, not the initial ones
            states = tuple(xp.where(self.empty, 0, s).astype(s.dtype) for s in states)
        if any(self.reversed):
            y = xp.stack([self._flip(y[:, d]) if rev else y[:, d] for d, rev in enumerate(self.reversed)], axis=1)
        if self.layout == 0:
            return (y,) + states
        return (xp.ascontiguousarray(y.transpose(2, 0, 1, 3)),) + tuple(
            xp.ascontiguousarray(xp.swapaxes(s, 0, 1)) for s in states
        )

    def step_mask(self, t):
        return None if self.mask is None else self.mask[t]


# --- RNN ------------------------------------------------------------------------------------

@kernel("RNN")
def rnn(x, w, r, b, sequence_lens, initial_h, *, xp, activation_alpha, activation_beta, activations,
        clip, direction, hidden_size, layout):
    layer = _Layer(x, w, r, sequence_lens, xp=xp, direction=direction, hidden_size=hidden_size, layout=layout)
    (f,) = _activations(activations, activation_alpha, activation_beta, ["Tanh"], layer.directions, xp)
    bias = None if b is None else b[:, : layer.hidden] + b[:, layer.hidden :]
    xw = layer.project(bias)
    clipped = _clipper(clip, xp)
    recur = layer.recurrent_product()
    h = layer.initial_state(initial_h)
    y = xp.empty((layer.steps,) + h.shape, dtype=x.dtype)
    for t in range(layer.steps):
        h_new = f(clipped(xw[:, t] + recur(h)))
        h, y[t] = _masked(xp, layer.step_mask(t), h_new, h)
    return layer.outputs(y, h)


# --- GRU ------------------------------------------------------------------------------------

@kernel("GRU")
def gru(x, w, r, b, sequence_lens, initial_h, *, xp, activation_alpha, activation_beta, activations,
        clip, direction, hidden_size, layout, linear_before_reset):
    layer = _Layer(x, w, r, sequence_lens, xp=xp, direction=direction, hidden_size=hidden_size, layout=layout)
    f, g = _activations(activations, activation_alpha, activation_beta, ["Sigmoid", "Tanh"], layer.directions, xp)
    n = layer.hidden
    bias, rb_h = None, None
    if b is not None:
        wb, rb = b[:, : 3 * n], b[:, 3 * n :]
        if linear_before_reset:
            # R's h-gate bias sits inside the reset product: keep it out of the projection
            bias = wb + xp.concatenate([rb[:, : 2 * n], xp.zeros_like(rb[:, 2 * n :])], axis=1)
            rb_h = rb[:, None, 2 * n :]
        else:
            bias = wb + rb
    xw = layer.project(bias)
    clipped = _clipper(clip, xp)
    if linear_before_reset:
        recur = layer.recurrent_product()
    else:
        recur_zr, recur_h = layer.recurrent_product(slice(0, 2 * n)), layer.recurrent_product(slice(2 * n, 3 * n))
    h = layer.initial_state(initial_h)
    y = xp.empty((layer.steps,) + h.shape, dtype=x.dtype)
    for t in range(layer.steps):
        xt = xw[:, t]
        if linear_before_reset:
            hr = recur(h)
            zr = f(clipped(xt[..., : 2 * n] + hr[..., : 2 * n]))
            hh = hr[..., 2 * n :] if rb_h is None else hr[..., 2 * n :] + rb_h
            candidate = g(clipped(xt[..., 2 * n :] + zr[..., n:] * hh))
        else:
            zr = f(clipped(xt[..., : 2 * n] + recur_zr(h)))
            candidate = g(clipped(xt[..., 2 * n :] + recur_h(zr[..., n:] * h)))
        h_new = candidate + zr[..., :n] * (h - candidate)  # (1 - z) * candidate + z * h
        h, y[t] = _masked(xp, layer.step_mask(t), h_new, h)
    return layer.outputs(y, h)


# --- LSTM -----------------------------------------------------------------------------------

@kernel("LSTM")
def lstm(x, w, r, b, sequence_lens, initial_h, initial_c, p, *, xp, activation_alpha, activation_beta,
         activations, clip, direction, hidden_size, layout, input_forget):
    layer = _Layer(x, w, r, sequence_lens, xp=xp, direction=direction, hidden_size=hidden_size, layout=layout)
    n = layer.hidden
    bias = None if b is None else b[:, : 4 * n] + b[:, 4 * n :]
    h = layer.initial_state(initial_h)
    c = layer.initial_state(initial_c)
    y = xp.empty((layer.steps,) + h.shape, dtype=x.dtype)
    defaults = ["Sigmoid", "Tanh", "Tanh"]
    plain = p is None and clip is None and not input_forget and (
        _activation_specs(activations, activation_alpha, activation_beta, defaults, layer.directions)
        == _activation_specs(None, None, None, defaults, layer.directions)
    )
    if plain and layer.mask is None:
        h, c = _lstm_plain_steps(layer, bias, h, c, y)
        return layer.outputs(y, h, c)
    f, g, act_h = _activations(activations, activation_alpha, activation_beta, defaults,
                               layer.directions, xp)
    xw = layer.project(bias)  # gate order i, o, f, c
    clipped = _clipper(clip, xp)
    if p is not None:
        p_i, p_o, p_f = (p[:, None, k * n : (k + 1) * n] for k in range(3))
    recur = layer.recurrent_product()
    for t in range(layer.steps):
        z = xw[:, t] + recur(h)
        if p is None:
            iof = f(clipped(z[..., : 3 * n]))  # i, o and f share f: one call
            i, o = iof[..., :n], iof[..., n : 2 * n]
            forget = 1 - i if input_forget else iof[..., 2 * n :]
            c_new = forget * c + i * g(clipped(z[..., 3 * n :]))
        else:
            i = f(clipped(z[..., :n] + p_i * c))
            forget = 1 - i if input_forget else f(clipped(z[..., 2 * n : 3 * n] + p_f * c))
            c_new = forget * c + i * g(clipped(z[..., 3 * n :]))
            o = f(clipped(z[..., n : 2 * n] + p_o * c_new))
        h_new = o * act_h(c_new)
        mask = layer.step_mask(t)
        h, y[t] = _masked(xp, mask, h_new, h)
        c = c_new if mask is None else xp.where(mask, c_new, c)
    return layer.outputs(y, h, c)


def _lstm_plain_steps(layer, bias, h, c, y):
    """The common LSTM (default activations, no peepholes, clip or input_forget), tuned per step.

    sigmoid(z) = tanh(z / 2) / 2 + 1/2, so with the i, o, f rows of W, R and the bias halved up
    front, one tanh over all four gates does the work of three sigmoids and a tanh. The input
    projection ``W x_t + bias`` of every step is one GEMM over the whole sequence; each step then
    runs transposed, as ``R h^T`` on a (hidden, batch) state (in row blocks of R,
    ``recurrent_row_blocks``): with a batch of a few rows that is the orientation OpenBLAS
    multiplies fastest on AVX2 as on AVX-512. Every elementwise op writes into a buffer allocated
    once.
    """
    xp, n, steps, batch, dirs = layer.xp, layer.hidden, layer.steps, layer.batch, layer.directions
    inputs = layer.x.shape[2]
    half = xp.ones((4 * n, 1), dtype=y.dtype)
    half[: 3 * n] = 0.5
    recurrent = layer.r * half  # (D, 4n, n)
    # [x_t 1] of every step as rows, multiplied by [W bias] of each direction in one GEMM whose
    # output, (D, 4n, steps * batch), holds step t's (4n, batch) block in columns t * batch onwards
    rows = xp.empty((steps * batch, inputs + 1), dtype=y.dtype)
    rows[:, :inputs] = layer.x.reshape(steps * batch, inputs)
    rows[:, inputs] = 1
    projected = xp.empty((dirs, 4 * n, steps * batch), dtype=y.dtype)
    w_bias = xp.empty((4 * n, inputs + 1), dtype=y.dtype)  # [W bias], halved as above, in one pass
    for d in range(dirs):
        xp.multiply(layer.w[d], half, out=w_bias[:, :inputs])
        if bias is None:
            w_bias[:, inputs] = 0
        else:
            xp.multiply(bias[d], half[:, 0], out=w_bias[:, inputs])
        xp.matmul(w_bias, rows.T, out=projected[d])
    # states[d, t] = h^T before step t of direction d; states[:, 1:] ends up as Y
    states = xp.empty((dirs, steps + 1, n, batch), dtype=y.dtype)
    states[:, 0] = xp.swapaxes(h, 1, 2)
    c_t = xp.swapaxes(c, 1, 2).copy()  # updated in place below: never the caller's array
    z = xp.empty((dirs, 4 * n, batch), dtype=y.dtype)
    tmp = xp.empty_like(c_t)
    i, o, f, g = (z[:, k * n : (k + 1) * n] for k in range(4))
    iof = z[:, : 3 * n]
    blocks = recurrent_row_blocks(4 * n, n, batch) if xp.__name__ == "numpy" else (slice(None),)
    products = [[(recurrent[d, block], z[d, block]) for block in blocks] for d in range(dirs)]
    for t in range(steps):
        for d, rev in enumerate(layer.reversed):
            state = states[d, t]
            for r_rows, gates in products[d]:
                xp.matmul(r_rows, state, out=gates)
            column = (steps - 1 - t if rev else t) * batch
            z[d] += projected[d, :, column : column + batch]
        xp.tanh(z, out=z)
        iof *= 0.5
        iof += 0.5
        c_t *= f
        xp.multiply(i, g, out=tmp)
        c_t += tmp
        xp.tanh(c_t, out=tmp)
        xp.multiply(o, tmp, out=states[:, t + 1])
    y[...] = states[:, 1:].transpose(1, 0, 3, 2)
    return (xp.ascontiguousarray(xp.swapaxes(states[:, steps], 1, 2)),
            xp.ascontiguousarray(xp.swapaxes(c_t, 1, 2)))
