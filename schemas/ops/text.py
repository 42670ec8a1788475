"""Text ops: string cleaning, concatenation, splitting, regex matching and n-gram vectorizing.

String tensors are NumPy object arrays of Python ``str``; their dtype is ``object``.
"""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import BOOL, INT64, broadcast
from schemas.registry import REQUIRED, Attr, TensorType, op

STRING = np.dtype(object)
FLOAT = np.dtype(np.float32)


@op(
    "StringNormalizer",
    inputs=["X"],
    outputs=["Y"],
    attrs={
        "case_change_action": Attr("string", "NONE"),
        "is_case_sensitive": Attr("int", 0),
        "locale": Attr("string"),
        "stopwords": Attr("strings"),
    },
)
def _string_normalizer(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(STRING, None)]
    if len(x.shape) not in (1, 2) or (len(x.shape) == 2 and x.shape[0] not in (1, None)):
        raise ctx.fail(f"X must be [C] or [1, C], got shape {x.shape}")
    # Stopword removal makes the last dim depend on the data.
    last = x.shape[-1] if not ctx.attrs.get("stopwords") else None
    return [TensorType(STRING, (*x.shape[:-1], last))]


op("StringConcat", inputs=["X", "Y"], outputs=["Z"])(broadcast())


@op("StringSplit", inputs=["X"], outputs=["Y", "Z"], attrs={"delimiter": Attr("string"), "maxsplit": Attr("int")})
def _string_split(ctx):
    shape = ctx.input(0).shape
    if shape is None:
        return [TensorType(STRING, None), TensorType(INT64, None)]
    return [TensorType(STRING, (*shape, None)), TensorType(INT64, shape)]


@op("DecodeRaw", domain="flowstack", inputs=["bytes"], outputs=["output"],
    attrs={"out_type": Attr("string", REQUIRED), "little_endian": Attr("int", 1)},
    doc="TensorFlow's DecodeRaw: each byte string read as a vector of ``out_type`` numbers (all the same "
        "length), so the output has one more dimension than the input.")
def _decode_raw(ctx):
    shape = ctx.input(0).shape
    return [TensorType(np.dtype(ctx.attrs["out_type"]), None if shape is None else (*shape, None))]


@op("RegexFullMatch", inputs=["X"], outputs=["Y"], attrs={"pattern": Attr("string", REQUIRED)})
def _regex_full_match(ctx):
    return [TensorType(BOOL, ctx.input(0).shape)]


@op(
    "TfIdfVectorizer",
    inputs=["X"],
    outputs=["Y"],
    attrs={
        "max_gram_length": Attr("int", REQUIRED),
        "max_skip_count": Attr("int", REQUIRED),
        "min_gram_length": Attr("int", REQUIRED),
        "mode": Attr("string", REQUIRED),
        "ngram_counts": Attr("ints", REQUIRED),
        "ngram_indexes": Attr("ints", REQUIRED),
        "pool_int64s": Attr("ints"),
        "pool_strings": Attr("strings"),
        "weights": Attr("floats"),
    },
)
def _tfidf_vectorizer(ctx):
    x = ctx.input(0)
    size = max(ctx.attrs["ngram_indexes"], default=-1) + 1
    if x.shape is None:
        return [TensorType(FLOAT, None)]
    if len(x.shape) not in (1, 2):
        raise ctx.fail(f"X must be [C] or [N, C], got shape {x.shape}")
    return [TensorType(FLOAT, (*x.shape[:-1], size))]


# -- TensorFlow 1.x's string and lookup ops (domain flowstack) ---------------------------------------
@op("StringSplitSparse", domain="flowstack", inputs=["source"], outputs=["indices", "values", "dense_shape"],
    attrs={"delimiter": Attr("string", " "), "skip_empty": Attr("int", 1), "maxsplit": Attr("int", -1),
           "whitespace": Attr("int", 0)},
    doc="TensorFlow's string_split of a 1-D source as a SparseTensor: each character of delimiter separates "
        "(an empty delimiter: every character is a token; whitespace=1: runs of whitespace, as str.split()); "
        "skip_empty drops empty tokens; maxsplit (>= 0) bounds the splits per string.")
def _string_split_sparse(ctx):
    return [TensorType(INT64, (None, 2)), TensorType(STRING, (None,)), TensorType(INT64, (2,))]


@op("StringToNumber", domain="flowstack", inputs=["string_tensor"], outputs=["output"],
    attrs={"out_type": Attr("string", "float32")},
    doc="Each string parsed as a number of out_type; one that does not parse fails the run, naming it.")
def _string_to_number(ctx):
    return [TensorType(np.dtype(ctx.attrs["out_type"]), ctx.input(0).shape)]


@op("LookupTableFind", domain="flowstack", inputs=["keys", "table_keys", "table_values", "default_value"],
    outputs=["values"], attrs={"num_oov_buckets": Attr("int", 0)},
    doc="Each key's value in the table (table_keys[i] -> table_values[i]); an absent key gets default_value, "
        "or with num_oov_buckets > 0 the id len(table) + a stable hash of the key modulo the buckets.")
def _lookup_table_find(ctx):
    return [TensorType(ctx.input(2).dtype, ctx.input(0).shape)]


@op("AsString", domain="flowstack", inputs=["input"], outputs=["output"],
    attrs={"precision": Attr("int", -1), "scientific": Attr("int", 0), "shortest": Attr("int", 0),
           "width": Attr("int", -1), "fill": Attr("string", "")},
    doc="Each number formatted as printf would (TensorFlow's tf.as_string): %d for integers, %f, %e or %g "
        "for floats (precision digits), padded to width with fill; bools as true/false.")
def _as_string(ctx):
    x = ctx.input(0)
    if x.dtype is not None and x.dtype.kind not in "iubfc":
        raise ctx.fail(f"input must be a number or bool, got {x.dtype}")
    return [TensorType(STRING, x.shape)]


@op("StringToHashBucketFast", domain="flowstack", inputs=["input"], outputs=["output"],
    attrs={"num_buckets": Attr("int", REQUIRED)},
    doc="TensorFlow's StringToHashBucketFast: FarmHash Fingerprint64 of each string's UTF-8 bytes modulo "
        "num_buckets, as int64 of the input's shape.")
def _string_to_hash_bucket_fast(ctx):
    if ctx.attrs["num_buckets"] < 1:
        raise ctx.fail(f"num_buckets must be >= 1, got {ctx.attrs['num_buckets']}")
    return [TensorType(INT64, ctx.input(0).shape)]
