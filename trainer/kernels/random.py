"""Stateful kernels of the random ops (``trainer.random_ops``): one generator per op, in the session.

Each random node keeps its own NumPy generator in the session state under the node's name
(``stream``), created on first use: seeded by the node's (seed, seed2) when either is set, so a
fresh session over the same graph replays the same values, and from fresh entropy otherwise.
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer import philox
from trainer import special_functions as sf
from trainer.errors import InvalidArgumentError
from trainer.kernels.registry import stateful_kernel

__all__ = ["op_generator"]


def op_generator(rctx, seed: int, seed2: int, stream: str) -> np.random.Generator:
    """The generator of one random op in this session, created (seeded) on first use."""
    key = ("random_stream", stream)
    resources = rctx.state.resources
    gen = resources.get(key)
    if gen is None:
        with rctx.state.lock:
            gen = resources.get(key)
            if gen is None:
                gen = np.random.default_rng([seed, seed2]) if (seed or seed2) else np.random.default_rng()
                resources[key] = gen
    return gen


def _dims(shape) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in dims):
        raise ValueError(f"random op: shape {dims} has a negative dimension")
    return dims


@stateful_kernel("RandomStandardNormal")
def random_standard_normal(rctx, shape, *, xp, dtype, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    return xp.asarray(gen.standard_normal(_dims(shape)).astype(dtype))


@stateful_kernel("RandomUniform")
def random_uniform_kernel(rctx, shape, *, xp, dtype, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    return xp.asarray(gen.random(_dims(shape)).astype(dtype))


@stateful_kernel("TruncatedNormal")
def truncated_normal_kernel(rctx, shape, *, xp, dtype, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    v = gen.standard_normal(_dims(shape))
    bad = np.abs(v) > 2.0
    while bad.any():
        v[bad] = gen.standard_normal(int(bad.sum()))
        bad = np.abs(v) > 2.0
    return xp.asarray(v.astype(dtype))


def _candidates(gen, prob, draw, true_classes, op: str, num_sampled: int, range_max: int, unique: int, xp):
    """(sampled, true_expected_count, sampled_expected_count) of a candidate sampler drawing class ids
    in [0, range_max) with ``draw(n)``, each id's probability ``prob(k)``."""
    if unique:
        if num_sampled > range_max:
            raise ValueError(f"{op}: num_sampled {num_sampled} > range_max {range_max} with unique=True")
        chosen: dict[int, None] = {}
        tries = 0
        while len(chosen) < num_sampled:
            for k in draw(num_sampled):
                tries += 1
                if len(chosen) < num_sampled:
                    chosen.setdefault(int(k))
        sampled = np.fromiter(chosen, np.int64, num_sampled)
        # Expected count of a class in `tries` draws with replacement (TensorFlow's approximation).
        expected = lambda k: -np.expm1(tries * np.log1p(-np.minimum(prob(k), 1 - 1e-12)))  # noqa: E731
    else:
        sampled = draw(num_sampled)
        expected = lambda k: prob(k) * num_sampled  # noqa: E731
    true = np.asarray(true_classes, np.int64)
    return (xp.asarray(sampled), xp.asarray(expected(true).astype(np.float32)),
            xp.asarray(expected(sampled).astype(np.float32)))


@stateful_kernel("LogUniformCandidateSampler")
def log_uniform_sampler_kernel(rctx, true_classes, *, xp, num_sampled, range_max, unique, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    log_range = np.log(range_max + 1.0)

    def prob(k):
        return np.log((k + 2.0) / (k + 1.0)) / log_range

    def draw(n):
        return (np.exp(gen.random(n) * log_range).astype(np.int64) - 1) % range_max

    return _candidates(gen, prob, draw, true_classes, "LogUniformCandidateSampler", num_sampled, range_max, unique, xp)


@stateful_kernel("UniformCandidateSampler")
def uniform_sampler_kernel(rctx, true_classes, *, xp, num_sampled, range_max, unique, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    return _candidates(gen, lambda k: np.full(np.shape(k), 1.0 / range_max), lambda n: gen.integers(0, range_max, n),
                       true_classes, "UniformCandidateSampler", num_sampled, range_max, unique, xp)


@stateful_kernel("FixedUnigramCandidateSampler")
def fixed_unigram_sampler_kernel(rctx, true_classes, *, xp, num_sampled, range_max, unique, seed, seed2, stream,
                                 unigrams, distortion, num_reserved_ids):
    gen = op_generator(rctx, seed, seed2, stream)
    weights = np.concatenate([np.zeros(num_reserved_ids), np.asarray(unigrams, np.float64) ** distortion])
    if len(weights) != range_max or weights.sum() <= 0 or (weights < 0).any():
        raise ValueError(f"FixedUnigramCandidateSampler: num_reserved_ids + len(unigrams) = {len(weights)} must equal "
                         f"range_max {range_max}, with non-negative unigrams not all zero")
    p = weights / weights.sum()
    return _candidates(gen, lambda k: p[k], lambda n: gen.choice(range_max, n, p=p), true_classes,
                       "FixedUnigramCandidateSampler", num_sampled, range_max, unique, xp)


@stateful_kernel("RandomGamma")
def random_gamma_kernel(rctx, shape, alpha, *, xp, dtype, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    a = np.asarray(alpha, np.float64)
    if np.any(a <= 0):
        raise InvalidArgumentError(f"RandomGamma: alpha must be positive, got {a[a <= 0].reshape(-1)[0]}")
    return xp.asarray(gen.standard_gamma(np.broadcast_to(a, _dims(shape) + a.shape)).astype(dtype))


@stateful_kernel("RandomPoisson")
def random_poisson_kernel(rctx, shape, rate, *, xp, dtype, seed, seed2, stream):
    gen = op_generator(rctx, seed, seed2, stream)
    lam = np.asarray(rate, np.float64)
    if np.any(lam < 0):
        raise InvalidArgumentError(f"RandomPoisson: rate must be non-negative, got {lam[lam < 0].reshape(-1)[0]}")
    return xp.asarray(gen.poisson(np.broadcast_to(lam, _dims(shape) + lam.shape)).astype(dtype))


@kernel("RandomGammaGrad", domain="flowstack")
def random_gamma_grad(alpha, sample, *, xp):
    """d x / d alpha at fixed P(alpha, x): -(dP/dalpha) / (x^(alpha-1) e^-x / Gamma(alpha))."""
    a, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(sample, np.float64))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        log_density = (a - 1.0) * np.log(x) - x - sf.lgamma(a)
        grad = -sf.igamma_grad_a(a, x) * np.exp(-log_density)
    return xp.asarray(np.where(x > 0, grad, 0.0).astype(np.asarray(sample).dtype))


def _stateless(draw):
    def run(shape, seed, *, xp, dtype):
        return xp.asarray(draw(np.asarray(seed), _dims(shape), np.dtype(dtype)))

    return run


kernel("StatelessRandomUniform", domain="flowstack")(_stateless(philox.stateless_uniform))
kernel("StatelessRandomNormal", domain="flowstack")(_stateless(philox.stateless_normal))
kernel("StatelessTruncatedNormal", domain="flowstack")(_stateless(philox.stateless_truncated_normal))


@kernel("StatelessRandomUniformInt", domain="flowstack")
def stateless_random_uniform_int(shape, seed, minval, maxval, *, xp, dtype):
    lo, hi = int(minval), int(maxval)
    if hi <= lo:
        raise InvalidArgumentError(f"StatelessRandomUniformInt: Need minval < maxval: {lo} >= {hi}")
    return xp.asarray(philox.stateless_uniform_int(np.asarray(seed), _dims(shape), lo, hi, np.dtype(dtype)))


@kernel("StatelessMultinomial", domain="flowstack")
def stateless_multinomial(logits, num_samples, seed, *, xp, output_dtype):
    n = int(num_samples)
    if n < 0:
        raise InvalidArgumentError(f"StatelessMultinomial: num_samples should be nonnegative, got {n}")
    if logits.shape[1] == 0 and n:
        raise InvalidArgumentError("StatelessMultinomial: num_classes should be positive, got 0")
    return xp.asarray(philox.stateless_multinomial(np.asarray(seed), np.asarray(logits), n).astype(output_dtype))
