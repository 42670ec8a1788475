"""Kernels of TensorFlow 1.x's string ops (schemas/ops/strings.py).

Strings have no vectorised arithmetic, so each kernel works element by element over the flattened
array. Elements are read as bytes (a ``str`` element as its UTF-8) and outputs hold bytes, as
TensorFlow's string tensors do. Bad input raises ``ValueError`` naming the op and the element.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import gzip
import re
import zlib

import numpy as np

from edge_runtime.kernels.registry import kernel
from edge_runtime.string_hashes import fingerprint64, siphash24, tf_hash64

D = "flowstack"
_WHITESPACE = b" \t\n\v\f\r"
_BASE64_URL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")


def as_bytes(element) -> bytes:
    """A string tensor's element as bytes (``str`` as UTF-8)."""
    if isinstance(element, (bytes, bytearray)):
        return bytes(element)
    if isinstance(element, str):
        return element.encode("utf-8")
    raise ValueError(f"expected a string element, got {type(element).__name__} {element!r}")


def _objects(values, shape) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _map_strings(x: np.ndarray, fn, dtype=object) -> np.ndarray:
    flat = [fn(as_bytes(e)) for e in x.reshape(-1).tolist()]
    if dtype is object:
        return _objects(flat, x.shape)
    return np.array(flat, dtype=dtype).reshape(x.shape)


def utf8_length(data: bytes) -> int:
    """The number of UTF-8 characters: bytes that do not continue a multi-byte sequence."""
    return sum(1 for b in data if b & 0xC0 != 0x80)


_LENGTH_UNITS = {"BYTE": len, "UTF8_CHAR": utf8_length}


@kernel("StringLength", domain=D)
def string_length(input, *, xp, unit):  # noqa: A002 - TF's name
    count = _LENGTH_UNITS.get(unit)
    if count is None:
        raise ValueError(f"StringLength: unit must be one of {sorted(_LENGTH_UNITS)}, got {unit!r}")
    return _map_strings(input, count, np.int32)


def _case(op: str, encoding: str, ascii_fn, text_fn):
    if encoding == "":
        return ascii_fn
    if encoding.lower().replace("-", "") == "utf8":
        return lambda b: text_fn(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    raise ValueError(f"{op}: encoding must be '' or 'utf-8', got {encoding!r}")


@kernel("StringLower", domain=D)
def string_lower(input, *, xp, encoding):  # noqa: A002 - TF's name
    return _map_strings(input, _case("StringLower", encoding, bytes.lower, str.lower))


@kernel("StringUpper", domain=D)
def string_upper(input, *, xp, encoding):  # noqa: A002 - TF's name
    return _map_strings(input, _case("StringUpper", encoding, bytes.upper, str.upper))


@kernel("StringStrip", domain=D)
def string_strip(input, *, xp):  # noqa: A002 - TF's name
    return _map_strings(input, lambda b: b.strip(_WHITESPACE))


# -- Substr ------------------------------------------------------------------------------------------
def _char_starts(data: bytes) -> list[int]:
    """Byte offsets of each UTF-8 character, then the end."""
    return [i for i, b in enumerate(data) if b & 0xC0 != 0x80] + [len(data)]


def _substr_one(data: bytes, pos: int, length: int, utf8: bool, where: int) -> bytes:
    starts = _char_starts(data) if utf8 else None
    size = len(starts) - 1 if utf8 else len(data)
    if not -size <= pos <= size:
        raise ValueError(f"Substr: pos {pos} out of range for string b'{data.decode('utf-8', 'replace')}' "
                         f"at index {where}")
    pos = pos + size if pos < 0 else pos
    end = size if length < 0 else min(size, pos + length)
    return data[starts[pos]:starts[end]] if utf8 else data[pos:end]


@kernel("Substr", domain=D)
def substr(input, pos, len, *, xp, unit):  # noqa: A002 - TF's names
    if unit not in _LENGTH_UNITS:
        raise ValueError(f"Substr: unit must be one of {sorted(_LENGTH_UNITS)}, got {unit!r}")
    if pos.shape != len.shape:
        raise ValueError(f"Substr: pos and len must have the same shape, got {pos.shape} and {len.shape}")
    try:
        strings, starts, lengths = np.broadcast_arrays(input, pos, len)
    except ValueError:
        raise ValueError(f"Substr: input of shape {input.shape} and pos of shape {pos.shape} do not "
                         f"broadcast") from None
    utf8 = unit == "UTF8_CHAR"
    flat = [_substr_one(as_bytes(s), int(p), int(n), utf8, i)
            for i, (s, p, n) in enumerate(zip(strings.reshape(-1).tolist(), starts.reshape(-1).tolist(),
                                              lengths.reshape(-1).tolist()))]
    return _objects(flat, strings.shape)


# -- regexes (RE2's syntax, through Python's re) -------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _compiled(op: str, pattern: bytes) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{op}: invalid pattern {pattern!r}: {exc}") from None


def _scalar_string(op: str, what: str, value: np.ndarray) -> bytes:
    if value.size != 1:
        raise ValueError(f"{op}: {what} must be a scalar string, got shape {value.shape}")
    return as_bytes(value.reshape(-1)[0])


@functools.lru_cache(maxsize=64)
def _rewrite(template: bytes):
    """RE2's rewrite string as a replacement function: \\0-\\9 name groups, \\\\ is a backslash."""
    parts: list = []
    i = 0
    while i < len(template):
        c = template[i:i + 1]
        if c == b"\\":
            nxt = template[i + 1:i + 2]
            if nxt.isdigit():
                parts.append(int(nxt))
            elif nxt == b"\\":
                parts.append(b"\\")
            else:
                raise ValueError(f"RegexReplace: invalid rewrite pattern {template!r}: \\ must be followed by a "
                                 f"digit or \\")
            i += 2
        else:
            parts.append(c)
            i += 1

    def replace(match: re.Match) -> bytes:
        return b"".join(match.group(p) or b"" if isinstance(p, int) else p for p in parts)

    return replace


@kernel("RegexReplace", domain=D)
def regex_replace(input, pattern, rewrite, *, xp, replace_global):  # noqa: A002 - TF's name
    compiled = _compiled("RegexReplace", _scalar_string("RegexReplace", "pattern", pattern))
    template = _scalar_string("RegexReplace", "rewrite", rewrite)
    groups = [int(d) for d in re.findall(rb"\\(\d)", template)]
    if groups and max(groups) > compiled.groups:
        raise ValueError(f"RegexReplace: rewrite {template!r} names group {max(groups)} but the pattern has "
                         f"{compiled.groups}")
    replace = _rewrite(template)
    count = 0 if replace_global else 1
    return _map_strings(input, lambda b: compiled.sub(replace, b, count=count))


@kernel("StringRegexFullMatch", domain=D)
def string_regex_full_match(input, pattern, *, xp):  # noqa: A002 - TF's name
    compiled = _compiled("RegexFullMatch", _scalar_string("RegexFullMatch", "pattern", pattern))
    return _map_strings(input, lambda b: compiled.fullmatch(b) is not None, bool)


# -- ReduceJoin --------------------------------------------------------------------------------------
@kernel("ReduceJoin", domain=D)
def reduce_join(inputs, *, xp, axes, keep_dims, separator):
    rank = inputs.ndim
    axes = list(range(rank - 1, -1, -1)) if axes is None else list(axes)  # TF's default: [n-1, ..., 0]
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"ReduceJoin: axis {a} is out of range for a rank-{rank} input")
    reduced = [a % rank for a in axes] if rank else []
    if len(set(reduced)) != len(reduced):
        raise ValueError(f"ReduceJoin: duplicate reduction dimension in {axes}")
    kept = [i for i in range(rank) if i not in reduced]
    # TensorFlow reduces the listed axes in order: the first listed varies fastest in the join.
    order = kept + reduced[::-1]
    moved = inputs.transpose(order) if rank else inputs
    kept_shape = tuple(inputs.shape[i] for i in kept)
    rows = moved.reshape(kept_shape + (-1,)) if rank else moved.reshape(1)
    sep = separator.encode("utf-8")
    flat = [sep.join(as_bytes(e) for e in row) for row in rows.reshape(-1, rows.shape[-1]).tolist()] \
        if rows.shape[-1] else [b""] * int(np.prod(kept_shape, dtype=np.int64))
    out = _objects(flat, kept_shape)
    if keep_dims:
        out = out.reshape(tuple(1 if i in reduced else d for i, d in enumerate(inputs.shape)))
    return out


# -- StringFormat: tensors printed as tf.print prints them --------------------------------------------
def _float_text(value, digits: int, more: int) -> str:
    """TensorFlow's FloatToBuffer/DoubleToBuffer: %.<digits>g, or %.<more>g when that does not read back."""
    text = f"%.{digits}g" % value
    kind = type(value)
    return text if not np.isfinite(value) or kind(float(text)) == value else f"%.{more}g" % value


def _element_text(value, dtype: np.dtype) -> str:
    if dtype == object:
        return '"' + utf8_safe_c_hex_escape(as_bytes(value)) + '"'
    if dtype.kind == "b":
        return "1" if value else "0"
    if dtype.kind == "f":
        if dtype == np.float64:
            return _float_text(np.float64(value), 15, 17)
        return _float_text(np.float32(value), 6, 9)
    return str(value)


_C_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "'": "\\'", "\\": "\\\\"}


def utf8_safe_c_hex_escape(data: bytes) -> str:
    """absl's Utf8SafeCHexEscape: C escapes and \\xNN for control characters and invalid bytes,
    valid UTF-8 beyond ASCII kept as it is."""
    out = []
    for c in data.decode("utf-8", "surrogateescape"):
        code = ord(c)
        if c in _C_ESCAPES:
            out.append(_C_ESCAPES[c])
        elif 0xDC80 <= code <= 0xDCFF:  # an invalid byte, kept by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(c)
    return "".join(out)


def _spacing(dim: int, rank: int) -> str:
    return " " if dim == rank - 1 else "\n" * (rank - dim - 1) + " " * (dim + 1)


def tensor_summary(x: np.ndarray, summarize: int) -> str:
    """A tensor's text as TensorFlow's print_v2 writes it (``summarize`` elements at each end)."""
    x = np.asarray(x)
    if x.ndim == 0:
        return _element_text(x[()], x.dtype)
    out: list[str] = []
    _print_nested(x, x.dtype, 0, x.ndim, x.size if summarize < 0 else summarize, out)
    return "".join(out)


def _print_nested(x, dtype: np.dtype, dim: int, rank: int, ends: int, out: list) -> None:
    if dim == rank:  # an element (NumPy gives an object array's elements as they are)
        out.append(_element_text(x[()] if isinstance(x, np.ndarray) else x, dtype))
        return
    n = x.shape[0]
    out.append("[")
    for i in range(min(ends, n)):
        if i:
            out.append(_spacing(dim, rank))
        _print_nested(x[i], dtype, dim + 1, rank, ends, out)
    if n > 2 * ends:
        out.append(_spacing(dim, rank) + "...")
    for i in range(max(ends, n - ends), n):
        out.append(_spacing(dim, rank))
        _print_nested(x[i], dtype, dim + 1, rank, ends, out)
    out.append("]")


@kernel("StringFormat", domain=D)
def string_format(*inputs, xp, template, placeholder, summarize: int):
    pieces = template.split(placeholder)
    if len(pieces) - 1 != len(inputs):
        raise ValueError(f"StringFormat: num placeholders in template and num inputs must match: "
                         f"{len(pieces) - 1} vs. {len(inputs)}")
    texts = [tensor_summary(x, summarize) for x in inputs]
    joined = pieces[0] + "".join(t + p for t, p in zip(texts, pieces[1:]))
    return _objects([joined.encode("utf-8")], ())


# -- hash buckets --------------------------------------------------------------------------------------
def _buckets(op: str, num_buckets: int) -> int:
    if num_buckets < 1:
        raise ValueError(f"{op}: num_buckets must be >= 1, got {num_buckets}")
    return num_buckets


@kernel("StringToHashBucketFast", domain=D)
def string_to_hash_bucket_fast(input, *, xp, num_buckets):  # noqa: A002 - TF's name
    n = _buckets("StringToHashBucketFast", num_buckets)
    return _map_strings(input, lambda b: fingerprint64(b) % n, np.int64)


@kernel("StringToHashBucketStrong", domain=D)
def string_to_hash_bucket_strong(input, *, xp, num_buckets, key):  # noqa: A002 - TF's name
    n = _buckets("StringToHashBucketStrong", num_buckets)
    if len(key) != 2:
        raise ValueError(f"StringToHashBucketStrong: key must have exactly 2 elements, got {len(key)}")
    k0, k1 = (int(k) & 0xFFFFFFFFFFFFFFFF for k in key)
    return _map_strings(input, lambda b: siphash24(k0, k1, b) % n, np.int64)


@kernel("StringToHashBucket", domain=D)
def string_to_hash_bucket(string_tensor, *, xp, num_buckets):
    n = _buckets("StringToHashBucket", num_buckets)
    return _map_strings(string_tensor, lambda b: tf_hash64(b) % n, np.int64)


# -- base64 and compression ---------------------------------------------------------------------------
@kernel("EncodeBase64", domain=D)
def encode_base64(input, *, xp, pad):  # noqa: A002 - TF's name
    return _map_strings(input, lambda b: base64.urlsafe_b64encode(b) if pad else
                        base64.urlsafe_b64encode(b).rstrip(b"="))


def _decode_base64_one(data: bytes) -> bytes:
    if not set(data) <= _BASE64_URL or b"=" in data.rstrip(b"=") or len(data.rstrip(b"=")) % 4 == 1:
        raise ValueError(f"DecodeBase64: invalid web-safe base64 data {data[:40]!r}")
    body = data.rstrip(b"=")
    try:
        return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
    except binascii.Error as exc:
        raise ValueError(f"DecodeBase64: invalid web-safe base64 data {data[:40]!r}: {exc}") from None


@kernel("DecodeBase64", domain=D)
def decode_base64(input, *, xp):  # noqa: A002 - TF's name
    return _map_strings(input, _decode_base64_one)


def _inflate(kind: str):
    def run(data: bytes) -> bytes:
        try:
            return zlib.decompress(data) if kind == "ZLIB" else gzip.decompress(data)
        except (zlib.error, OSError, EOFError) as exc:
            raise ValueError(f"DecodeCompressed: the input is not {kind} data: {exc}") from None
    return run


@kernel("DecodeCompressed", domain=D)
def decode_compressed(bytes, *, xp, compression_type):  # noqa: A002 - TF's name
    if compression_type == "":
        return _map_strings(bytes, lambda b: b)
    if compression_type not in ("ZLIB", "GZIP"):
        raise ValueError(f"DecodeCompressed: compression_type must be '', 'ZLIB' or 'GZIP', got {compression_type!r}")
    return _map_strings(bytes, _inflate(compression_type))


# -- Unicode ------------------------------------------------------------------------------------------
_OUTPUT_ENCODINGS = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}
_ERRORS = ("strict", "replace", "ignore")


def _codec(op: str, encoding: str) -> str:
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"{op}: unknown encoding {encoding!r}") from None


def _error_handler(op: str, errors: str, replacement_char: int) -> str:
    if errors not in _ERRORS:
        raise ValueError(f"{op}: errors must be one of {list(_ERRORS)}, got {errors!r}")
    if errors != "replace":
        return errors
    name = f"flowstack-replace-{replacement_char}"
    try:
        codecs.lookup_error(name)
    except LookupError:
        char = chr(replacement_char)
        codecs.register_error(name, lambda exc: (char, exc.end))
    return name


def decode_text(op: str, data: bytes, encoding: str, errors: str, replacement_char: int,
                replace_control_characters: bool) -> str:
    try:
        text = data.decode(_codec(op, encoding), _error_handler(op, errors, replacement_char))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{op}: invalid {encoding} data {data[:40]!r}: {exc.reason}") from None
    if replace_control_characters:
        text = re.sub("[\x00-\x1f]", chr(replacement_char), text)
    return text


def encode_code_points(op: str, points, encoding: str, errors: str, replacement_char: int) -> bytes:
    codec = _OUTPUT_ENCODINGS.get(encoding)
    if codec is None:
        raise ValueError(f"{op}: output_encoding must be one of {sorted(_OUTPUT_ENCODINGS)}, got {encoding!r}")
    if errors not in _ERRORS:
        raise ValueError(f"{op}: errors must be one of {list(_ERRORS)}, got {errors!r}")
    chars = []
    for p in points:
        p = int(p)
        if 0 <= p <= 0x10FFFF and not 0xD800 <= p <= 0xDFFF:
            chars.append(chr(p))
        elif errors == "replace":
            chars.append(chr(replacement_char))
        elif errors == "strict":
            raise ValueError(f"{op}: {p} is not a valid Unicode code point")
    return "".join(chars).encode(codec)


def _decoded_rows(source: np.ndarray, encoding: str, errors: str, replacement_char: int,
                  replace_control_characters: int, split: int) -> list:
    """Each string's code points, or with ``split`` each character encoded back in ``encoding``."""
    out = []
    for data in (as_bytes(e) for e in source.reshape(-1).tolist()):
        text = decode_text("UnicodeDecode", data, encoding, errors, replacement_char, bool(replace_control_characters))
        points = [ord(c) for c in text]
        codec = _codec("UnicodeSplit", encoding)
        out.append([chr(p).encode(codec, "surrogatepass") for p in points] if split else points)
    return out


@kernel("UnicodeDecodeScalar", domain=D)
def unicode_decode_scalar(input, *, xp, input_encoding, errors, replacement_char, replace_control_characters,
                          split):  # noqa: A002 - TF's name
    row = _decoded_rows(input.reshape(1), input_encoding, errors, replacement_char, replace_control_characters,
                        split)[0]
    return _objects(row, (len(row),)) if split else np.array(row, np.int32)


@kernel("UnicodeDecodeSparse", domain=D)
def unicode_decode_sparse(input, *, xp, input_encoding, errors, replacement_char, replace_control_characters,
                          split):  # noqa: A002 - TF's name
    rows = _decoded_rows(input, input_encoding, errors, replacement_char, replace_control_characters, split)
    outer = list(np.ndindex(*input.shape))
    indices = np.array([(*outer[r], j) for r, row in enumerate(rows) for j in range(len(row))], np.int64)
    flat = [v for row in rows for v in row]
    values = _objects(flat, (len(flat),)) if split else np.array(flat, np.int32)
    width = max((len(r) for r in rows), default=0)
    return indices.reshape(-1, input.ndim + 1), values, np.array([*input.shape, width], np.int64)


@kernel("UnicodeEncodeRows", domain=D)
def unicode_encode_rows(input, *, xp, output_encoding, errors, replacement_char):  # noqa: A002 - TF's name
    if input.ndim < 1:
        raise ValueError("UnicodeEncode: input must have rank >= 1 (rows of code points)")
    rows = input.reshape(-1, input.shape[-1]) if input.shape[-1] else np.zeros((int(np.prod(input.shape[:-1])), 0))
    flat = [encode_code_points("UnicodeEncode", row, output_encoding, errors, replacement_char) for row in rows]
    return _objects(flat, input.shape[:-1])


@kernel("UnicodeEncodeSparse", domain=D)
def unicode_encode_sparse(indices, values, dense_shape, *, xp, output_encoding, errors, replacement_char):
    outer = tuple(int(d) for d in dense_shape[:-1])
    rows: dict[tuple, list] = {}
    for key, v in sorted(zip(map(tuple, indices.tolist()), values.tolist())):
        rows.setdefault(key[:-1], []).append(v)
    flat = [encode_code_points("UnicodeEncode", rows.get(pos, []), output_encoding, errors, replacement_char)
            for pos in np.ndindex(*outer)]
    return _objects(flat, outer)


@kernel("UnicodeTranscode", domain=D)
def unicode_transcode(input, *, xp, input_encoding, output_encoding, errors, replacement_char,
                      replace_control_characters):  # noqa: A002 - TF's name
    def run(data: bytes) -> bytes:
        text = decode_text("UnicodeTranscode", data, input_encoding, errors, replacement_char,
                           bool(replace_control_characters))
        return encode_code_points("UnicodeTranscode", map(ord, text), output_encoding, errors, replacement_char)
    return _map_strings(input, run)
