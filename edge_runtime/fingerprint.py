"""FarmHash's Fingerprint64 (farmhashna::Hash64) and TensorFlow's FingerprintCat64, in Python.

TensorFlow hashes strings into buckets with these: ``StringToHashBucketFast`` (what
``categorical_column_with_hash_bucket`` uses) is ``Fingerprint64(s) % buckets`` and
``SparseCross`` (``crossed_column``) folds each combination's fingerprints with
``FingerprintCat64`` from the seed ``hash_key``. Computing the same 64-bit values makes the
bucket ids match TensorFlow's, so checkpoints and vocabularies carry over.
"""

from __future__ import annotations

import struct

__all__ = ["fingerprint64", "fingerprint_cat64"]

MASK = (1 << 64) - 1
K0 = 0xC3A5C85C97CB3127
K1 = 0xB492B66FBE98F273
K2 = 0x9AE16A3B2F90404F
CAT_MUL = 0xC6A4A7935BD1E995


def _fetch64(data: bytes, at: int) -> int:
    return struct.unpack_from("<Q", data, at)[0]


def _fetch32(data: bytes, at: int) -> int:
    return struct.unpack_from("<I", data, at)[0]


def _rotate(value: int, shift: int) -> int:
    return ((value >> shift) | (value << (64 - shift))) & MASK if shift else value


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _hash_len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & MASK
    a ^= a >> 47
    b = ((v ^ a) * mul) & MASK
    b ^= b >> 47
    return (b * mul) & MASK


def _hash_len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = K2 + n * 2
        a = (_fetch64(s, 0) + K2) & MASK
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & MASK
        d = ((_rotate(a, 25) + b) * mul) & MASK
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = K2 + n * 2
        return _hash_len16(n + (_fetch32(s, 0) << 3), _fetch32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * K2) ^ (z * K0)) & MASK) * K2) & MASK
    return K2


def _hash_len17to32(s: bytes) -> int:
    n = len(s)
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K1) & MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & MASK
    d = (_fetch64(s, n - 16) * K2) & MASK
    return _hash_len16((_rotate((a + b) & MASK, 43) + _rotate(c, 30) + d) & MASK,
                       (a + _rotate((b + K2) & MASK, 18) + c) & MASK, mul)


def _hash_len33to64(s: bytes) -> int:
    n = len(s)
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K2) & MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & MASK
    d = (_fetch64(s, n - 16) * K2) & MASK
    y = (_rotate((a + b) & MASK, 43) + _rotate(c, 30) + d) & MASK
    z = _hash_len16(y, (a + _rotate((b + K2) & MASK, 18) + c) & MASK, mul)
    e = (_fetch64(s, 16) * mul) & MASK
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & MASK
    h = ((z + _fetch64(s, n - 24)) * mul) & MASK
    return _hash_len16((_rotate((e + f) & MASK, 43) + _rotate(g, 30) + h) & MASK,
                       (e + _rotate((f + a) & MASK, 18) + g) & MASK, mul)


def _weak_hash_len32_with_seeds(s: bytes, at: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = struct.unpack_from("<4Q", s, at)
    a = (a + w) & MASK
    b = _rotate((b + a + z) & MASK, 21)
    c = a
    a = (a + x + y) & MASK
    b = (b + _rotate(a, 44)) & MASK
    return (a + z) & MASK, (b + c) & MASK


def fingerprint64(data: bytes | str) -> int:
    """FarmHash Fingerprint64 of ``data`` (a str is hashed as its UTF-8 bytes), as an unsigned int."""
    s = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    n = len(s)
    if n <= 16:
        return _hash_len0to16(s)
    if n <= 32:
        return _hash_len17to32(s)
    if n <= 64:
        return _hash_len33to64(s)
    seed = 81
    x = seed
    y = (seed * K1 + 113) & MASK
    z = (_shift_mix((y * K2 + 113) & MASK) * K2) & MASK
    v = (0, 0)
    w = (0, 0)
    x = (x * K2 + _fetch64(s, 0)) & MASK
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    at = 0
    while True:
        x = (_rotate((x + y + v[0] + _fetch64(s, at + 8)) & MASK, 37) * K1) & MASK
        y = (_rotate((y + v[1] + _fetch64(s, at + 48)) & MASK, 42) * K1) & MASK
        x ^= w[1]
        y = (y + v[0] + _fetch64(s, at + 40)) & MASK
        z = (_rotate((z + w[0]) & MASK, 33) * K1) & MASK
        v = _weak_hash_len32_with_seeds(s, at, (v[1] * K1) & MASK, (x + w[0]) & MASK)
        w = _weak_hash_len32_with_seeds(s, at + 32, (z + w[1]) & MASK, (y + _fetch64(s, at + 16)) & MASK)
        z, x = x, z
        at += 64
        if at == end:
            break
    mul = K1 + ((z & 0xFF) << 1)
    at = last64
    w0 = (w[0] + ((n - 1) & 63)) & MASK
    v0 = (v[0] + w0) & MASK
    w0 = (w0 + v0) & MASK
    v = (v0, v[1])
    w = (w0, w[1])
    x = (_rotate((x + y + v[0] + _fetch64(s, at + 8)) & MASK, 37) * mul) & MASK
    y = (_rotate((y + v[1] + _fetch64(s, at + 48)) & MASK, 42) * mul) & MASK
    x ^= (w[1] * 9) & MASK
    y = (y + v[0] * 9 + _fetch64(s, at + 40)) & MASK
    z = (_rotate((z + w[0]) & MASK, 33) * mul) & MASK
    v = _weak_hash_len32_with_seeds(s, at, (v[1] * mul) & MASK, (x + w[0]) & MASK)
    w = _weak_hash_len32_with_seeds(s, at + 32, (z + w[1]) & MASK, (y + _fetch64(s, at + 16)) & MASK)
    z, x = x, z
    return _hash_len16((_hash_len16(v[0], w[0], mul) + (_shift_mix(y) * K0) + z) & MASK,
                       (_hash_len16(v[1], w[1], mul) + x) & MASK, mul)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TensorFlow's FingerprintCat64: two fingerprints combined (order matters)."""
    result = fp1 ^ CAT_MUL
    result ^= (_shift_mix((fp2 * CAT_MUL) & MASK) * CAT_MUL) & MASK
    result = (result * CAT_MUL) & MASK
    result = (_shift_mix(result) * CAT_MUL) & MASK
    return _shift_mix(result)
