"""Text kernels: string cleaning, concatenation, splitting, regex matching and n-gram vectorizing.

String tensors are NumPy object arrays of Python ``str``. Strings have no vectorised arithmetic,
so the string ops work element by element over the flattened array; the numeric parts (counting
n-grams, weighting) are array operations.
"""

from __future__ import annotations

import re

import numpy as np

from edge_runtime.fingerprint import fingerprint64
from edge_runtime.kernels.registry import kernel
from schemas.registry import UnsupportedOpError

_CASE_CHANGE = {"NONE": lambda s: s, "LOWER": str.lower, "UPPER": str.upper}


def _strings(xp, values, shape):
    """An object array of ``shape`` holding ``values`` (np.array would split nested str lists)."""
    out = xp.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


@kernel("StringNormalizer")
def string_normalizer(x, *, xp, case_change_action, is_case_sensitive, locale, stopwords):
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
        raise UnsupportedOpError(f"StringNormalizer: X must be [C] or [1, C], got shape {x.shape}")
    if case_change_action not in _CASE_CHANGE:
        raise UnsupportedOpError(
            f"StringNormalizer: case_change_action must be one of {sorted(_CASE_CHANGE)}, got {case_change_action!r}"
        )
    words = list(x.reshape(-1))
    if stopwords:
        if is_case_sensitive:
            stop = set(stopwords)
            words = [w for w in words if w not in stop]
        else:
            stop = {s.lower() for s in stopwords}
            words = [w for w in words if w.lower() not in stop]
    change = _CASE_CHANGE[case_change_action]
    words = [change(w) for w in words] or [""]  # all dropped: one empty string, as ONNX specifies
    return _strings(xp, words, (*x.shape[:-1], len(words)))


@kernel("StringConcat")
def string_concat(x, y, *, xp):
    # object arrays add elementwise with Python's str.__add__, broadcasting like any ufunc
    return xp.asarray(xp.add(x, y), dtype=object)


@kernel("StringSplit")
def string_split(x, *, xp, delimiter, maxsplit):
    # An absent or empty delimiter splits on runs of whitespace, which is str.split(None).
    sep = delimiter or None
    limit = -1 if maxsplit is None else maxsplit
    parts = [s.split(sep, limit) for s in x.reshape(-1)]
    counts = xp.asarray([len(p) for p in parts], dtype=xp.int64).reshape(x.shape)
    width = max((len(p) for p in parts), default=0)
    padded = [s for p in parts for s in p + [""] * (width - len(p))]
    return _strings(xp, padded, (*x.shape, width)), counts


@kernel("DecodeRaw", domain="flowstack")
def decode_raw(x, *, xp, out_type, little_endian):
    dtype = xp.dtype(out_type)
    wire = dtype.newbyteorder("<" if little_endian else ">")
    rows = []
    for i, b in enumerate(x.reshape(-1)):
        data = b.encode() if isinstance(b, str) else bytes(b)
        if len(data) % dtype.itemsize:
            raise ValueError(f"DecodeRaw: element {i} has {len(data)} bytes, not a multiple of {out_type}'s "
                             f"{dtype.itemsize}")
        rows.append(xp.frombuffer(data, wire).astype(dtype))
    if len({len(r) for r in rows}) > 1:
        raise ValueError(f"DecodeRaw: the byte strings decode to different lengths {sorted({len(r) for r in rows})}; "
                         "every element of one tensor must have as many bytes")
    n = len(rows[0]) if rows else 0
    return (xp.stack(rows) if rows else xp.zeros((0, 0), dtype)).reshape(x.shape + (n,))


@kernel("RegexFullMatch")
def regex_full_match(x, *, xp, pattern):
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UnsupportedOpError(f"RegexFullMatch: pattern {pattern!r} is not supported: {exc}") from None
    matched = [compiled.fullmatch(s) is not None for s in x.reshape(-1)]
    return xp.asarray(matched, dtype=bool).reshape(x.shape)


# ------------------------------------------------------------------------------ TfIdfVectorizer


def _pool_grams(pool, ngram_counts, ngram_indexes, min_gram, max_gram):
    """Yield (n, grams as a list of n-tuples, their output columns) for each counted gram length."""
    ends = list(ngram_counts[1:]) + [len(pool)]
    gram_id = 0
    for n, (start, end) in enumerate(zip(ngram_counts, ends), start=1):
        count = (end - start) // n
        if min_gram <= n <= max_gram and count:
            grams = [tuple(pool[start + i * n : start + (i + 1) * n]) for i in range(count)]
            yield n, grams, list(ngram_indexes[gram_id : gram_id + count])
        gram_id += count


def _token_ids(x, pool, xp):
    """Each token's index in the pool's vocabulary, -1 for tokens the pool never mentions."""
    vocab = {token: i for i, token in enumerate(dict.fromkeys(pool))}
    if x.dtype == object:
        ids = [vocab.get(token, -1) for token in x.reshape(-1)]
        return xp.asarray(ids, dtype=xp.int64).reshape(x.shape), vocab
    keys = xp.asarray(list(vocab), dtype=xp.int64)
    order = xp.argsort(keys)
    pos = xp.clip(xp.searchsorted(keys[order], x), 0, len(keys) - 1)
    ids = xp.where(keys[order][pos] == x, order[pos], -1)
    return ids.astype(xp.int64), vocab


@kernel("TfIdfVectorizer")
def tfidf_vectorizer(
    x, *, xp, max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts, ngram_indexes,
    pool_int64s, pool_strings, weights,
):
    if mode not in ("TF", "IDF", "TFIDF"):
        raise UnsupportedOpError(f"TfIdfVectorizer: mode must be TF, IDF or TFIDF, got {mode!r}")
    if x.ndim not in (1, 2):
        raise UnsupportedOpError(f"TfIdfVectorizer: X must be [C] or [N, C], got shape {x.shape}")
    size = max(ngram_indexes) + 1
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    counts = xp.zeros((rows.shape[0], size), dtype=xp.int64)
    pool = list(pool_strings or pool_int64s or [])
    if pool and rows.size:
        ids, vocab = _token_ids(rows, pool, xp)
        length = rows.shape[1]
        for n, grams, columns in _pool_grams(pool, ngram_counts, ngram_indexes, min_gram_length, max_gram_length):
            pool_ids = xp.asarray([[vocab[t] for t in g] for g in grams], dtype=xp.int64)
            # a unigram is the same for every skip; longer grams are taken at each skip distance
            for distance in range(1, (max_skip_count + 1 if n > 1 else 1) + 1):
                starts = length - distance * (n - 1)
                if starts <= 0:
                    break
                windows = xp.stack([ids[:, k * distance : k * distance + starts] for k in range(n)], axis=-1)
                # matching rows of (pool grams + windows) share a group; each pool gram names a column
                _, group = xp.unique(
                    xp.concatenate([pool_ids, windows.reshape(-1, n)]), axis=0, return_inverse=True
                )
                group = group.reshape(-1)
                column_of_group = xp.full(int(group.max()) + 1, -1, dtype=xp.int64)
                column_of_group[group[: len(grams)]] = xp.asarray(columns, dtype=xp.int64)
                found = column_of_group[group[len(grams) :]].reshape(rows.shape[0], starts)
                row, pos = xp.nonzero(found >= 0)
                xp.add.at(counts, (row, found[row, pos]), 1)
    scale = xp.asarray(weights, dtype=xp.float32) if weights else xp.ones(size, dtype=xp.float32)
    if mode == "TF":
        y = counts.astype(xp.float32)
    elif mode == "IDF":
        y = (counts > 0) * scale
    else:
        y = counts * scale
    y = y.astype(xp.float32)
    return y.reshape(size) if x.ndim == 1 else y


# -- TensorFlow 1.x's string and lookup ops -----------------------------------------------------------
@kernel("StringSplitSparse", domain="flowstack")
def string_split_sparse(source, *, xp, delimiter, skip_empty, maxsplit, whitespace):
    if source.ndim != 1:
        raise UnsupportedOpError(f"string_split: the source must be 1-D, got shape {source.shape}")
    rows = [_split_one(s, delimiter, bool(skip_empty), maxsplit, bool(whitespace)) for s in source.tolist()]
    lengths = [len(r) for r in rows]
    indices = np.array([(i, j) for i, n in enumerate(lengths) for j in range(n)], np.int64).reshape(-1, 2)
    values = np.empty(len(indices), dtype=object)
    values[:] = [token for r in rows for token in r]
    return indices, values, np.array([len(rows), max(lengths, default=0)], np.int64)


def _split_one(text, delimiter: str, skip_empty: bool, maxsplit: int, whitespace: bool) -> list:
    binary = isinstance(text, bytes)
    s = text.decode("utf-8", "surrogateescape") if binary else str(text)
    if whitespace:
        tokens = s.split(None, maxsplit) if maxsplit >= 0 else s.split()
    elif not delimiter:
        tokens = list(s)
    else:
        pattern = "[" + re.escape(delimiter) + "]"
        tokens = re.split(pattern, s, maxsplit=maxsplit if maxsplit > 0 else 0) if maxsplit != 0 else [s]
    if skip_empty:
        tokens = [t for t in tokens if t]
    return [t.encode("utf-8", "surrogateescape") for t in tokens] if binary else tokens


_NUMBER_PARSERS = {"float32": float, "float64": float, "int32": int, "int64": int}


@kernel("StringToNumber", domain="flowstack")
def string_to_number(string_tensor, *, xp, out_type):
    parse = _NUMBER_PARSERS.get(out_type)
    if parse is None:
        raise UnsupportedOpError(f"string_to_number: out_type must be one of {sorted(_NUMBER_PARSERS)}, got {out_type}")
    flat = string_tensor.reshape(-1).tolist()
    out = np.empty(len(flat), dtype=out_type)
    for i, s in enumerate(flat):
        text = s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)
        try:
            out[i] = parse(text.strip())
        except (ValueError, OverflowError):
            raise ValueError(f"StringToNumberOp could not correctly convert string: {text}") from None
    return out.reshape(string_tensor.shape)


class _TableCache:
    """Each table's key -> value dict, built once per table array (tables are graph constants)."""

    def __init__(self):
        self._tables: dict[int, tuple] = {}

    def mapping(self, keys: np.ndarray, values: np.ndarray) -> dict:
        found = self._tables.get(id(keys))
        if found is not None and found[0] is keys and found[1] is values:
            return found[2]
        table = dict(zip(keys.reshape(-1).tolist(), values.reshape(-1).tolist()))
        self._tables[id(keys)] = (keys, values, table)
        if len(self._tables) > 256:  # tables of values computed per run: keep the cache bounded
            self._tables.pop(next(iter(self._tables)))
        return table


_TABLES = _TableCache()


def _bucket(key, buckets: int) -> int:
    """TensorFlow's OOV bucket: Fingerprint64 of the key (an integer as its decimal text) modulo buckets."""
    return fingerprint64(key if isinstance(key, bytes) else str(key)) % buckets


@kernel("LookupTableFind", domain="flowstack")
def lookup_table_find(keys, table_keys, table_values, default_value, *, xp, num_oov_buckets):
    table = _TABLES.mapping(table_keys, table_values)
    default = default_value.reshape(()).item() if default_value.size else None
    size = len(table_keys.reshape(-1))
    out = []
    for k in keys.reshape(-1).tolist():
        value = table.get(k)
        if value is None and isinstance(k, (bytes, str)):  # str and bytes keys meet (UTF-8)
            value = table.get(k.decode("utf-8", "surrogateescape") if isinstance(k, bytes) else k.encode("utf-8"))
        if value is None:
            value = size + _bucket(k, num_oov_buckets) if num_oov_buckets > 0 else default
        out.append(value)
    result = np.empty(len(out), dtype=table_values.dtype)
    result[:] = out
    return result.reshape(keys.shape)


def as_string_format(dtype: np.dtype, precision: int, scientific: bool, shortest: bool, width: int, fill: str) -> str:
    """The printf format TensorFlow's AsString builds for ``dtype`` (ValueError with its messages
    for the attribute combinations it refuses)."""
    dtype = np.dtype(dtype)
    is_float = dtype.kind in "fc"
    if len(fill) > 1:
        raise ValueError(f"Fill string must be one or fewer characters: {fill!r}")
    if fill and fill not in " +-0#":
        raise ValueError(f'Fill argument not supported: "{fill}"')
    if scientific and shortest:
        raise ValueError("Cannot select both scientific and shortest notation")
    for name, given in (("scientific", scientific), ("shortest", shortest), ("precision", precision > -1)):
        if given and not is_float:
            raise ValueError(f"{name} not supported for datatype {dtype.name}")
    spec = "%" + fill + (str(width) if width > -1 else "") + (f".{precision}" if precision > -1 else "")
    if dtype.kind in "iu":
        return spec + "d"
    if is_float:
        return spec + ("g" if shortest else "e" if scientific else "f")
    return spec  # bool: written as true/false, the format unused


@kernel("AsString", domain="flowstack")
def as_string(input, *, xp, precision, scientific, shortest, width, fill):  # noqa: A002 - TF's name
    fmt = as_string_format(input.dtype, precision, bool(scientific), bool(shortest), width, fill)
    flat = np.asarray(input).reshape(-1).tolist()
    if input.dtype.kind == "b":
        text = ["true" if v else "false" for v in flat]
    elif input.dtype.kind == "c":
        text = [f"({fmt % v.real},{fmt % v.imag})" for v in flat]
    else:
        text = [fmt % v for v in flat]
    return _strings(np, text, input.shape)


@kernel("StringToHashBucketFast", domain="flowstack")
def string_to_hash_bucket_fast(x, *, xp, num_buckets):
    flat = [fingerprint64(s) % num_buckets for s in x.reshape(-1).tolist()]
    return xp.asarray(flat, dtype=xp.int64).reshape(x.shape)
