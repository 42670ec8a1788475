"""Random ops (``random_normal``, ``truncated_normal``, ``random_uniform``, ...) with TensorFlow's seeds.

Each random op is a stateful node with its own NumPy generator, kept in the session's state under
the node's name: every ``Session.run`` draws fresh values, and a fresh session over the same graph
replays the same sequence when the op is seeded. Seeds follow TensorFlow 1.x's ``get_seed``: with
a graph-level seed (``set_random_seed``) an op without its own seed is seeded by its position in
the graph, so rebuilding the same graph reproduces every value; with neither seed an op draws from
fresh entropy.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     tf.set_random_seed(1)
...     x = tf.truncated_normal([1000], stddev=2.0)
>>> v = tf.Session(g).run(x)
>>> bool(abs(v).max() <= 4.0), v.dtype
(True, dtype('float32'))
"""

from __future__ import annotations

import numpy as np

from trainer.dtypes import as_numpy_dtype
from trainer.graph import TRAINER_DOMAIN, Graph, Tensor, get_default_graph
from trainer.ops import add, cast, constant, convert_to_tensor, gather, make_op, multiply

__all__ = [
    "compute_accidental_hits", "fixed_unigram_candidate_sampler", "get_seed", "log_uniform_candidate_sampler",
    "uniform_candidate_sampler", "multinomial", "random_crop", "random_gamma", "random_normal", "random_poisson",
    "random_shuffle",
    "random_uniform", "set_random_seed",
    "truncated_normal",
]

DEFAULT_GRAPH_SEED = 87654321  # TensorFlow's, for an op seed without a graph seed


def set_random_seed(seed: int | None) -> None:
    """The default graph's seed: random ops built afterwards become reproducible."""
    get_default_graph().seed = None if seed is None else int(seed)


def get_seed(op_seed: int | None, graph: Graph | None = None) -> tuple[int, int]:
    """(seed, seed2) of a new random op, as TensorFlow 1.x derives them; (0, 0) means unseeded."""
    g = graph or get_default_graph()
    graph_seed = g.seed
    if graph_seed is not None:
        return graph_seed, int(op_seed) if op_seed is not None else len(g)
    if op_seed is not None:
        return DEFAULT_GRAPH_SEED, int(op_seed)
    return 0, 0


def shape_tensor(shape, graph: Graph) -> Tensor:
    """A random op's shape argument (a list, TensorShape or int tensor) as an int64 tensor."""
    if isinstance(shape, Tensor) or hasattr(shape, "as_tensor"):
        t = convert_to_tensor(shape)
        return t if t.dtype == np.int64 else cast(t, np.int64)
    with graph.as_default():
        return constant(np.asarray([int(d) for d in shape], np.int64), name="shape")


def _random(op_type: str, shape, dtype, seed, name) -> Tensor:
    g = get_default_graph()
    seed1, seed2 = get_seed(seed, g)
    dt = as_numpy_dtype(dtype)
    node = make_op(op_type, [shape_tensor(shape, g)],
                   {"dtype": dt.name, "seed": seed1, "seed2": seed2}, domain=TRAINER_DOMAIN, name=name or op_type)
    node.attrs["stream"] = node.name
    return node.outputs[0]


def _scaled(t: Tensor, scale, shift, name) -> Tensor:
    out = t
    if not (isinstance(scale, (int, float)) and scale == 1):
        out = multiply(out, scale)
    if not (isinstance(shift, (int, float)) and shift == 0):
        out = add(out, shift)
    return out


def random_normal(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None, name=None) -> Tensor:
    """Samples of N(mean, stddev^2), fresh every run."""
    return _scaled(_random("RandomStandardNormal", shape, dtype, seed, name), stddev, mean, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None, name=None) -> Tensor:
    """Samples of N(mean, stddev^2) with those beyond 2 stddev redrawn."""
    return _scaled(_random("TruncatedNormal", shape, dtype, seed, name), stddev, mean, name)


def random_uniform(shape, minval=0, maxval=None, dtype=np.float32, seed=None, name=None) -> Tensor:
    """Samples of U[minval, maxval); integer dtypes need ``maxval`` and draw integers."""
    dt = as_numpy_dtype(dtype)
    if dt.kind in "iu":
        if maxval is None:
            raise ValueError("random_uniform: an integer dtype needs maxval")
        u = _random("RandomUniform", shape, np.float64, seed, name)
        span = multiply(u, float(maxval) - float(minval))
        floor = make_op("Floor", [add(span, float(minval))]).outputs[0]
        return cast(floor, dt)
    maxval = 1.0 if maxval is None else maxval
    u = _random("RandomUniform", shape, dt, seed, name)
    if isinstance(minval, (int, float)) and isinstance(maxval, (int, float)):
        return _scaled(u, float(maxval) - float(minval), float(minval), name)
    return add(multiply(u, maxval - minval if not isinstance(maxval, Tensor) else add(maxval, -minval)), minval)


def random_crop(value, size, seed=None, name=None) -> Tensor:
    """A slice of ``value`` of shape ``size`` at a uniformly random offset, a new one every run;
    the run fails (InvalidArgumentError) where ``value`` is smaller than ``size``."""
    from trainer.array_ops import floormod, greater_equal, reduce_all, slice as slice_
    from trainer.debugging import Assert

    x = convert_to_tensor(value)
    crop = [int(d) for d in np.asarray(size).reshape(-1)]
    if x.shape is not None and len(x.shape) != len(crop):
        raise ValueError(f"random_crop: size {crop} has {len(crop)} dims, but value has shape {x.shape}")
    if x.shape is not None and any(d is not None and d < c for d, c in zip(x.shape, crop)):
        raise ValueError(f"random_crop: Need value.shape >= size, got {x.shape} and {crop}")
    full = cast(make_op("Shape", [x]).outputs[0], np.int64)
    wanted = constant(np.asarray(crop, np.int64), graph=x.graph)
    check = Assert(reduce_all(greater_equal(full, wanted)), ["Need value.shape >= size, got ", full, wanted],
                   summarize=1000)
    with x.graph.control_dependencies([check]):
        limit = add(full, constant(np.asarray([1 - c for c in crop], np.int64), graph=x.graph))
    draws = random_uniform([len(crop)], 0, np.iinfo(np.int32).max, np.int64, seed=seed)
    out = slice_(x, floormod(draws, limit), crop, name=name or "random_crop")
    out.set_shape(crop)
    return out


def _random_with_param(op_type: str, shape, param: Tensor, dtype, seed, name) -> Tensor:
    g = param.graph
    seed1, seed2 = get_seed(seed, g)
    node = make_op(op_type, [shape_tensor(shape, g), param], {"dtype": as_numpy_dtype(dtype).name, "seed": seed1,
                                                               "seed2": seed2}, domain=TRAINER_DOMAIN, name=name)
    node.attrs["stream"] = node.name
    return node.outputs[0]


def random_gamma(shape, alpha, beta=None, dtype=np.float32, seed=None, name=None) -> Tensor:
    """Samples of Gamma(alpha, rate beta), of shape ``shape + broadcast(alpha, beta).shape``; differentiable
    in alpha (implicit reparameterization) and beta, as in TensorFlow."""
    from trainer.array_ops import zeros_like

    dt = as_numpy_dtype(dtype)
    if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"random_gamma: dtype must be float16, float32 or float64, got {dt}")
    alpha = convert_to_tensor(alpha, dtype=dt)
    beta = convert_to_tensor(beta if beta is not None else 1.0, dtype=dt, graph=alpha.graph)
    alpha_broadcast = add(alpha, zeros_like(beta))
    sample = _random_with_param("RandomGamma", shape, alpha_broadcast, dt, seed, None)
    tiny = constant(np.asarray(np.finfo(dt).tiny, dt), graph=alpha.graph)
    return make_op("Max", [make_op("Div", [sample, beta]).outputs[0], tiny], name=name).outputs[0]


def random_poisson(lam, shape, dtype=np.float32, seed=None, name=None) -> Tensor:
    """Samples of Poisson(lam), of shape ``shape + lam.shape``, in ``dtype`` (float or integer)."""
    dt = as_numpy_dtype(dtype)
    if dt.kind not in "fi":
        raise TypeError(f"random_poisson: dtype must be a float or signed integer type, got {dt}")
    rate = convert_to_tensor(lam)
    if rate.dtype.kind != "f":
        rate = cast(rate, np.float64)
    return _random_with_param("RandomPoisson", shape, rate, dt, seed, name)


def random_shuffle(value, seed=None, name=None) -> Tensor:
    """``value`` with its first dimension permuted, a new permutation every run."""
    value = convert_to_tensor(value)
    n = make_op("Shape", [value]).outputs[0][0:1]
    keys = _random("RandomUniform", n, np.float32, seed, None)
    order = make_op("TopK", [keys, n], {"largest": 1, "sorted": 1}, num_outputs=2).outputs[1]
    return gather(value, order, axis=0, name=name)


def multinomial(logits, num_samples: int, seed=None, name=None, output_dtype=np.int64) -> Tensor:
    """``num_samples`` class ids per row of ``logits`` [batch, classes] (Gumbel-max over uniform noise)."""
    logits = convert_to_tensor(logits)
    batch, classes = logits.shape
    if batch is None or classes is None:
        raise ValueError(f"multinomial needs a static logits shape, got {logits.shape}")
    u = _random("RandomUniform", [num_samples, batch, classes], logits.dtype, seed, None)
    tiny = np.finfo(logits.dtype).tiny
    gumbel = make_op("Neg", [make_op("Log", [make_op("Neg", [make_op("Log", [add(u, tiny)]).outputs[0]]).outputs[0]])
                              .outputs[0]]).outputs[0]
    ids = make_op("ArgMax", [add(gumbel, logits)], {"axis": 2, "keepdims": 0}).outputs[0]
    return cast(make_op("Transpose", [ids], {"perm": [1, 0]}, name=name).outputs[0], as_numpy_dtype(output_dtype))


def _candidate_sampler(op: str, true_classes, num_sampled: int, unique: bool, range_max: int, seed, name,
                       **attrs):
    true_classes = convert_to_tensor(true_classes)
    seed1, seed2 = get_seed(seed, true_classes.graph)
    node = make_op(op, [true_classes], {"num_sampled": int(num_sampled), "range_max": int(range_max),
                                        "unique": int(bool(unique)), "seed": seed1, "seed2": seed2, **attrs},
                   domain=TRAINER_DOMAIN, name=name or op, num_outputs=3)
    node.attrs["stream"] = node.name
    return tuple(node.outputs)


def log_uniform_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool, range_max: int,
                                  seed=None, name=None):
    """(sampled_candidates, true_expected_count, sampled_expected_count): ``num_sampled`` class ids
    from P(k) = log((k + 2) / (k + 1)) / log(range_max + 1), for sampled softmax and NCE."""
    return _candidate_sampler("LogUniformCandidateSampler", true_classes, num_sampled, unique, range_max, seed, name)


def uniform_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool, range_max: int,
                              seed=None, name=None):
    """TF1's ``tf.nn.uniform_candidate_sampler``: ``num_sampled`` class ids drawn uniformly from
    [0, range_max), with the expected counts of the true and sampled classes."""
    return _candidate_sampler("UniformCandidateSampler", true_classes, num_sampled, unique, range_max, seed, name)


def fixed_unigram_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool, range_max: int,
                                    vocab_file: str = "", distortion: float = 1.0, num_reserved_ids: int = 0,
                                    num_shards: int = 1, shard: int = 0, unigrams=(), seed=None, name=None):
    """TF1's ``tf.nn.fixed_unigram_candidate_sampler`` with ``unigrams=`` (no vocab file, one
    shard): class ids drawn with probability proportional to ``unigrams ** distortion``."""
    if vocab_file or num_shards != 1 or shard != 0:
        raise NotImplementedError("fixed_unigram_candidate_sampler: pass unigrams= (vocab_file and shards are "
                                  "not supported)")
    return _candidate_sampler("FixedUnigramCandidateSampler", true_classes, num_sampled, unique, range_max, seed,
                              name, unigrams=[float(u) for u in unigrams], distortion=float(distortion),
                              num_reserved_ids=int(num_reserved_ids))


def compute_accidental_hits(true_classes, sampled_candidates, num_true: int, seed=None, name=None):
    """TF1's ``tf.nn.compute_accidental_hits``: (indices, ids, weights) of each sampled candidate
    that equals one of its example's true classes: the example's row, the position in
    ``sampled_candidates``, and a weight of -FLT_MAX to add to that logit."""
    true_classes = cast(convert_to_tensor(true_classes), np.int64)
    sampled = cast(convert_to_tensor(sampled_candidates), np.int64)
    equal = make_op("Equal", [make_op("Unsqueeze", [true_classes, constant(np.asarray([2], np.int64))]).outputs[0],
                              make_op("Reshape", [sampled, constant(np.asarray([1, 1, -1], np.int64))]).outputs[0]]
                    ).outputs[0]  # [batch, num_true, num_sampled]
    hit = make_op("ReduceMax", [cast(equal, np.int32), constant(np.asarray([1], np.int64))], {"keepdims": 0}).outputs[0]
    where = make_op("Transpose", [make_op("NonZero", [hit]).outputs[0]], {"perm": [1, 0]}).outputs[0]  # [hits, 2]
    rows, ids = gather(where, 0, axis=1), gather(where, 1, axis=1)
    weights = make_op("Expand", [constant(np.asarray(-np.finfo(np.float32).max, np.float32)),
                                 make_op("Shape", [ids]).outputs[0]]).outputs[0]
    return cast(rows, np.int32), make_op("Identity", [ids], name=name).outputs[0], weights
