"""TensorFlow's stateless random numbers: the Philox4x32-10 counter-based generator, seeded and
laid out as TensorFlow 1.15's stateless kernels do (stateless_random_ops.cc, random_distributions.h).

A [2]-int seed is scrambled into a key and a starting counter by one Philox block; output group
``i`` (4 float32 or 2 float64 samples) comes from block ``counter + i``; float32 uniforms take a
uint32's low 23 bits as the mantissa of a number in [1, 2), minus 1; normals are Box-Muller pairs;
truncated normals reserve 256 blocks per group of 4 and keep the draws within 2. Philox itself is
checked against the Random123 known-answer vectors; the layout follows TensorFlow's source, so
uniform samples should reproduce TensorFlow's bit for bit (normals to float rounding of log/sin).
"""

from __future__ import annotations

import numpy as np

__all__ = ["philox", "seed_to_key_counter", "stateless_multinomial", "stateless_normal", "stateless_truncated_normal",
           "stateless_uniform", "stateless_uniform_int"]

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_RESERVED_BLOCKS_PER_GROUP = 256  # TensorFlow's kReservedSamplesPerOutput * 4 / 4 for truncated normals


def philox(counter: np.ndarray, key) -> np.ndarray:
    """Philox4x32-10 of counters [n, 4] (uint32) under key (2 uint32): n blocks of 4 uint32."""
    c = [counter[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    with np.errstate(over="ignore"):
        for round_ in range(10):
            if round_:
                k0, k1 = k0 + _W0, k1 + _W1
            p0, p1 = _M0 * c[0], _M1 * c[2]
            c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & _MASK32,
                 (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & _MASK32]
    return np.stack(c, axis=1).astype(np.uint32)


def seed_to_key_counter(seed) -> tuple[tuple[int, int], np.ndarray]:
    """TensorFlow's GenerateKey: the seed's two int64 halves, scrambled by one Philox block."""
    s0, s1 = (int(v) & 0xFFFFFFFFFFFFFFFF for v in np.asarray(seed).reshape(-1)[:2])
    counter = np.array([[s0 & 0xFFFFFFFF, s0 >> 32, s1 & 0xFFFFFFFF, s1 >> 32]], np.uint32)
    mix = philox(counter, (0x3EC8F720, 0x02461E29))[0]
    return (int(mix[0]), int(mix[1])), np.array([0, 0, mix[2], mix[3]], np.uint32)


def _blocks_at(seed, index: np.ndarray) -> np.ndarray:
    """Philox blocks number ``index`` of the seed's stream (the 128-bit counter incremented)."""
    key, start = seed_to_key_counter(seed)
    low = int(start[0]) | int(start[1]) << 32
    high = int(start[2]) | int(start[3]) << 32
    index = np.asarray(index, np.uint64).reshape(-1)
    with np.errstate(over="ignore"):
        lo = np.uint64(low) + index
        hi = np.uint64(high) + (lo < index).astype(np.uint64)
    counters = np.stack([lo & _MASK32, lo >> np.uint64(32), hi & _MASK32, hi >> np.uint64(32)], axis=1)
    return philox(counters.astype(np.uint32), key)


def _blocks(seed, first: int, count: int) -> np.ndarray:
    """Philox blocks first .. first + count - 1 of the seed's stream."""
    return _blocks_at(seed, np.arange(first, first + count, dtype=np.uint64))


def _uint32_to_float(x: np.ndarray) -> np.ndarray:
    return ((x & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1.0)


def _uint64_to_double(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    bits = (hi.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32) | lo.astype(np.uint64)
    return (bits | np.uint64(1023) << np.uint64(52)).view(np.float64) - 1.0


def _uniform_words(seed, n: int, dtype) -> np.ndarray:
    """n uniforms in [0, 1): 4 float32 or 2 float64 per block, block i for group i."""
    if np.dtype(dtype) == np.float64:
        words = _blocks(seed, 0, (n + 1) // 2).reshape(-1, 2, 2)
        return _uint64_to_double(words[..., 0], words[..., 1]).reshape(-1)[:n]
    words = _blocks(seed, 0, (n + 3) // 4).reshape(-1)
    return _uint32_to_float(words)[:n]


def stateless_uniform(seed, shape, dtype=np.float32) -> np.ndarray:
    n = int(np.prod(shape))
    return _uniform_words(seed, n, dtype).astype(dtype).reshape(shape)


def stateless_uniform_int(seed, shape, minval: int, maxval: int, dtype=np.int64) -> np.ndarray:
    """minval + (bits mod (maxval - minval)): one uint32 per int32, two per int64."""
    n, span = int(np.prod(shape)), int(maxval) - int(minval)
    if np.dtype(dtype) == np.int64:
        words = _blocks(seed, 0, (n + 1) // 2).reshape(-1, 2)
        bits = words[:, 0].astype(np.uint64) | words[:, 1].astype(np.uint64) << np.uint64(32)
    else:
        bits = _blocks(seed, 0, (n + 3) // 4).reshape(-1).astype(np.uint64)
    out = (bits[:n] % np.uint64(span)).astype(np.int64) + int(minval)
    return out.astype(dtype).reshape(shape)


def _box_muller(u1: np.ndarray, u2: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    u1 = np.maximum(u1, dtype(1.0e-7))
    radius = np.sqrt(dtype(-2.0) * np.log(u1))
    angle = dtype(2.0 * np.pi) * u2
    return np.sin(angle) * radius, np.cos(angle) * radius


def stateless_normal(seed, shape, dtype=np.float32) -> np.ndarray:
    n = int(np.prod(shape))
    double = np.dtype(dtype) == np.float64
    words = _blocks(seed, 0, (n + 1) // 2 if double else (n + 3) // 4)
    return _normals_of_blocks(words[None], double)[0][:n].astype(dtype).reshape(shape)


def _normals_of_blocks(words: np.ndarray, double: bool) -> np.ndarray:
    """Box-Muller normals of Philox blocks [..., 4] in stream order (4 float32 or 2 float64 per block)."""
    if double:
        u1, u2 = _uint64_to_double(words[..., 0], words[..., 1]), _uint64_to_double(words[..., 2], words[..., 3])
        return np.stack(_box_muller(u1, u2, np.float64), axis=-1).reshape(words.shape[:-2] + (-1,))
    u = _uint32_to_float(words).reshape(words.shape[:-1] + (2, 2))
    z = np.stack(_box_muller(u[..., 0], u[..., 1], np.float32), axis=-1)
    return z.reshape(words.shape[:-2] + (-1,))


def stateless_truncated_normal(seed, shape, dtype=np.float32) -> np.ndarray:
    """Groups of 4 (float32) or 2 (float64): each group's own 256 reserved blocks, its Box-Muller
    draws kept where |z| < 2, in order, until the group is full."""
    n = int(np.prod(shape))
    double = np.dtype(dtype) == np.float64
    group = 2 if double else 4
    groups = (n + group - 1) // group
    out = np.empty((groups, group), np.float64 if double else np.float32)
    read = 4  # blocks read per group at first: short of draws with probability < 1e-6
    starts = np.arange(groups) * _RESERVED_BLOCKS_PER_GROUP
    block_index = (starts[:, None] + np.arange(read)).reshape(-1)
    words = _blocks_at(seed, block_index).reshape(groups, read, 4)
    z = _normals_of_blocks(words, double)
    for g in range(groups):
        kept = z[g][np.abs(z[g]) < 2.0]
        more = read
        while kept.size < group:  # rare: read the group's next reserved blocks
            extra = _normals_of_blocks(_blocks_at(seed, starts[g] + more + np.arange(read))[None], double)[0]
            kept = np.concatenate([kept, extra[np.abs(extra) < 2.0]])
            more += read
        out[g] = kept[:group]
    return out.reshape(-1)[:n].astype(dtype).reshape(shape)


def stateless_multinomial(seed, logits: np.ndarray, num_samples: int) -> np.ndarray:
    """Inverse-CDF sampling as TensorFlow's multinomial kernel (run as one shard): rows in order, each
    sample a double uniform (two uint32 in sequence) scaled by the row's unnormalized total and found
    in the running sum of exp(logit - max) over the finite logits."""
    batch, classes = logits.shape
    words = _blocks(seed, 0, (2 * batch * num_samples + 3) // 4).reshape(-1)[: 2 * batch * num_samples]
    u = _uint64_to_double(words[0::2], words[1::2]).reshape(batch, num_samples)
    out = np.zeros((batch, num_samples), np.int64)
    for b in range(batch):
        row = logits[b].astype(np.float64)
        finite = np.isfinite(row)
        top = row[finite].max() if finite.any() else 0.0
        cdf = np.cumsum(np.where(finite, np.exp(np.where(finite, row - top, 0.0)), 0.0))
        if classes:
            out[b] = np.searchsorted(cdf, u[b] * cdf[-1], side="right")
    return np.minimum(out, max(classes - 1, 0))
