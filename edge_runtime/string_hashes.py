"""The string hashes TensorFlow buckets strings with, bit for bit, so bucket ids match TF's.

- ``fingerprint64``: FarmHash's Fingerprint64 (farmhashna::Hash64), behind
  ``tf.strings.to_hash_bucket_fast``, ``categorical_column_with_hash_bucket`` and the
  out-of-vocabulary buckets of TF's lookup tables.
- ``siphash24``: SipHash-2-4 keyed by two 64-bit words, behind ``to_hash_bucket_strong``.
- ``tf_hash64``: TensorFlow's own ``Hash64`` (a MurmurHash64A variant seeded 0xDECAFCAFFE),
  behind the legacy ``to_hash_bucket``.

Pure Python over 64-bit integers (masked after each step): strings are hashed one at a time.
"""

from __future__ import annotations

import struct

__all__ = ["fingerprint64", "fingerprint_cat64", "siphash24", "tf_hash64"]

M64 = 0xFFFFFFFFFFFFFFFF
K0 = 0xC3A5C85C97CB3127
K1 = 0xB492B66FBE98F273
K2 = 0x9AE16A3B2F90404F


def _fetch64(s: bytes, i: int) -> int:
    return struct.unpack_from("<Q", s, i)[0]


def _fetch32(s: bytes, i: int) -> int:
    return struct.unpack_from("<I", s, i)[0]


def _rotate(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & M64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _hash_len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & M64
    b ^= b >> 47
    return (b * mul) & M64


def _hash_len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = K2 + n * 2
        a = (_fetch64(s, 0) + K2) & M64
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & M64
        d = ((_rotate(a, 25) + b) * mul) & M64
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = K2 + n * 2
        a = _fetch32(s, 0)
        return _hash_len16((n + (a << 3)) & M64, _fetch32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * K2) ^ (z * K0)) & M64) * K2) & M64
    return K2


def _hash_len17to32(s: bytes) -> int:
    n = len(s)
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K1) & M64
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & M64
    d = (_fetch64(s, n - 16) * K2) & M64
    return _hash_len16((_rotate((a + b) & M64, 43) + _rotate(c, 30) + d) & M64,
                       (a + _rotate((b + K2) & M64, 18) + c) & M64, mul)


def _hash_len33to64(s: bytes) -> int:
    n = len(s)
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K2) & M64
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & M64
    d = (_fetch64(s, n - 16) * K2) & M64
    y = (_rotate((a + b) & M64, 43) + _rotate(c, 30) + d) & M64
    z = _hash_len16(y, (a + _rotate((b + K2) & M64, 18) + c) & M64, mul)
    e = (_fetch64(s, 16) * mul) & M64
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & M64
    h = ((z + _fetch64(s, n - 24)) * mul) & M64
    return _hash_len16((_rotate((e + f) & M64, 43) + _rotate(g, 30) + h) & M64,
                       (e + _rotate((f + a) & M64, 18) + g) & M64, mul)


def _weak_hash_len32_with_seeds(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = struct.unpack_from("<4Q", s, i)
    a = (a + w) & M64
    b = _rotate((b + a + z) & M64, 21)
    c = a
    a = (a + x + y) & M64
    b = (b + _rotate(a, 44)) & M64
    return (a + z) & M64, (b + c) & M64


def fingerprint64(data: bytes) -> int:
    """FarmHash's Fingerprint64 of ``data``: an unsigned 64-bit integer, stable across platforms."""
    s = bytes(data)
    n = len(s)
    if n <= 16:
        return _hash_len0to16(s)
    if n <= 32:
        return _hash_len17to32(s)
    if n <= 64:
        return _hash_len33to64(s)
    seed = 81
    x = seed
    y = (seed * K1 + 113) & M64
    z = (_shift_mix((y * K2 + 113) & M64) * K2) & M64
    v0 = v1 = w0 = w1 = 0
    x = (x * K2 + _fetch64(s, 0)) & M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rotate((x + y + v0 + _fetch64(s, i + 8)) & M64, 37) * K1) & M64
        y = (_rotate((y + v1 + _fetch64(s, i + 48)) & M64, 42) * K1) & M64
        x ^= w1
        y = (y + v0 + _fetch64(s, i + 40)) & M64
        z = (_rotate((z + w0) & M64, 33) * K1) & M64
        v0, v1 = _weak_hash_len32_with_seeds(s, i, (v1 * K1) & M64, (x + w0) & M64)
        w0, w1 = _weak_hash_len32_with_seeds(s, i + 32, (z + w1) & M64, (y + _fetch64(s, i + 16)) & M64)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = K1 + ((z & 0xFF) << 1)
    i = last64
    w0 = (w0 + ((n - 1) & 63)) & M64
    v0 = (v0 + w0) & M64
    w0 = (w0 + v0) & M64
    x = (_rotate((x + y + v0 + _fetch64(s, i + 8)) & M64, 37) * mul) & M64
    y = (_rotate((y + v1 + _fetch64(s, i + 48)) & M64, 42) * mul) & M64
    x ^= (w1 * 9) & M64
    y = (y + v0 * 9 + _fetch64(s, i + 40)) & M64
    z = (_rotate((z + w0) & M64, 33) * mul) & M64
    v0, v1 = _weak_hash_len32_with_seeds(s, i, (v1 * mul) & M64, (x + w0) & M64)
    w0, w1 = _weak_hash_len32_with_seeds(s, i + 32, (z + w1) & M64, (y + _fetch64(s, i + 16)) & M64)
    z, x = x, z
    return _hash_len16((_hash_len16(v0, w0, mul) + _shift_mix(y) * K0 + z) & M64,
                       (_hash_len16(v1, w1, mul) + x) & M64, mul)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TensorFlow's ``FingerprintCat64``: two fingerprints combined, as ``sparse.cross_hashed`` chains them."""
    mul = 0xC6A4A7935BD1E995
    result = fp1 ^ mul
    result ^= (_shift_mix((fp2 * mul) & M64) * mul) & M64
    result = (result * mul) & M64
    result = (_shift_mix(result) * mul) & M64
    return _shift_mix(result)


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & M64
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & M64
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & M64
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & M64
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def _rotl(v: int, shift: int) -> int:
    return ((v << shift) | (v >> (64 - shift))) & M64


def siphash24(key0: int, key1: int, data: bytes) -> int:
    """SipHash-2-4 of ``data`` keyed by the 64-bit words ``key0``, ``key1`` (TF's StrongKeyedHash)."""
    s = bytes(data)
    k0, k1 = key0 & M64, key1 & M64
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573
    n = len(s)
    whole = n - n % 8
    for i in range(0, whole, 8):
        m = _fetch64(s, i)
        v3 ^= m
        v0, v1, v2, v3 = _sipround(*_sipround(v0, v1, v2, v3))
        v0 ^= m
    m = ((n & 0xFF) << 56) | int.from_bytes(s[whole:], "little")
    v3 ^= m
    v0, v1, v2, v3 = _sipround(*_sipround(v0, v1, v2, v3))
    v0 ^= m
    v2 ^= 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def tf_hash64(data: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TensorFlow's ``Hash64`` (tensorflow/core/lib/hash/hash.cc), the legacy ``to_hash_bucket``'s hash."""
    s = bytes(data)
    m, r = 0xC6A4A7935BD1E995, 47
    n = len(s)
    h = (seed ^ (n * m)) & M64
    whole = n - n % 8
    for i in range(0, whole, 8):
        k = (_fetch64(s, i) * m) & M64
        k ^= k >> r
        k = (k * m) & M64
        h = ((h ^ k) * m) & M64
    tail = s[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & M64
    h ^= h >> r
    h = (h * m) & M64
    return h ^ (h >> r)
