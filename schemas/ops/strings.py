"""TensorFlow 1.x's string ops (domain ``flowstack``, TensorFlow's names): byte and character
lengths, case, substrings, RE2-style regexes, joins, formatting, hash buckets, base64 and
compression, and Unicode code points.

String tensors are NumPy object arrays of ``bytes`` (or ``str``, read as UTF-8); the kernels
(edge_runtime/kernels/strings.py) give ``bytes``, as TensorFlow's string tensors hold bytes.
None of these ops has a gradient (TensorFlow registers none).
"""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import BOOL, INT64, broadcast_shapes
from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
STRING = np.dtype(object)
INT32 = np.dtype(np.int32)


def _strings_in(ctx, index: int = 0):
    x = ctx.input(index)
    if x.dtype is not None and x.dtype != STRING:
        raise ctx.fail(f"input {index} must be a string tensor, got {x.dtype}")
    return x


def _same_shape(dtype: np.dtype):
    def rule(ctx):
        return [TensorType(dtype, _strings_in(ctx).shape)]
    return rule


op("StringLength", domain=D, inputs=["input"], outputs=["output"], attrs={"unit": Attr("string", "BYTE")},
   doc="Each string's length in bytes (unit BYTE) or UTF-8 characters (UTF8_CHAR), int32.")(_same_shape(INT32))
op("StringLower", domain=D, inputs=["input"], outputs=["output"], attrs={"encoding": Attr("string", "")},
   doc="Each string lower-cased: ASCII letters only, or every character with encoding utf-8.")(_same_shape(STRING))
op("StringUpper", domain=D, inputs=["input"], outputs=["output"], attrs={"encoding": Attr("string", "")},
   doc="Each string upper-cased: ASCII letters only, or every character with encoding utf-8.")(_same_shape(STRING))
op("StringStrip", domain=D, inputs=["input"], outputs=["output"],
   doc="Each string without its leading and trailing ASCII whitespace.")(_same_shape(STRING))
op("StringToHashBucketFast", domain=D, inputs=["input"], outputs=["output"],
   attrs={"num_buckets": Attr("int", REQUIRED)},
   doc="FarmHash Fingerprint64 of each string modulo num_buckets (int64), as TensorFlow's.")(_same_shape(INT64))
op("StringToHashBucketStrong", domain=D, inputs=["input"], outputs=["output"],
   attrs={"num_buckets": Attr("int", REQUIRED), "key": Attr("ints", REQUIRED)},
   doc="SipHash-2-4 (keyed by the two 64-bit words of key) of each string modulo num_buckets.")(_same_shape(INT64))
op("StringToHashBucket", domain=D, inputs=["string_tensor"], outputs=["output"],
   attrs={"num_buckets": Attr("int", REQUIRED)},
   doc="TensorFlow's Hash64 of each string modulo num_buckets (the legacy to_hash_bucket).")(_same_shape(INT64))
op("EncodeBase64", domain=D, inputs=["input"], outputs=["output"], attrs={"pad": Attr("int", 0)},
   doc="Each string in web-safe base64 (- and _ for + and /), '=' padded only with pad=1.")(_same_shape(STRING))
op("DecodeBase64", domain=D, inputs=["input"], outputs=["output"],
   doc="Each web-safe base64 string decoded (padding optional); bad input fails the run.")(_same_shape(STRING))
op("DecodeCompressed", domain=D, inputs=["bytes"], outputs=["output"],
   attrs={"compression_type": Attr("string", "")},
   doc="Each string inflated from ZLIB or GZIP ('' leaves it as it is).")(_same_shape(STRING))


@op("Substr", domain=D, inputs=["input", "pos", "len"], outputs=["output"], attrs={"unit": Attr("string", "BYTE")},
    doc="input[pos:pos+len] per string, in bytes or UTF-8 characters; pos and len (one shape) "
        "broadcast against input, a negative pos counts from the end; pos past the end fails the run.")
def _substr(ctx):
    x, pos, length = _strings_in(ctx), ctx.input(1), ctx.input(2)
    for name, t in (("pos", pos), ("len", length)):
        if t.dtype is not None and t.dtype.kind not in "iu":
            raise ctx.fail(f"{name} must be int32 or int64, got {t.dtype}")
    if pos.shape is not None and length.shape is not None and (
            len(pos.shape) != len(length.shape)
            or any(a is not None and b is not None and a != b for a, b in zip(pos.shape, length.shape))):
        raise ctx.fail(f"pos and len must have the same shape, got {pos.shape} and {length.shape}")
    return [TensorType(STRING, broadcast_shapes(ctx, [x.shape, pos.shape]))]


@op("RegexReplace", domain=D, inputs=["input", "pattern", "rewrite"], outputs=["output"],
    attrs={"replace_global": Attr("int", 1)},
    doc="Each string with matches of the scalar RE2 pattern replaced by rewrite (\\\\1 names a group, "
        "\\\\0 the match); only the first match unless replace_global.")
def _regex_replace(ctx):
    return [TensorType(STRING, _strings_in(ctx).shape)]


@op("StringRegexFullMatch", domain=D, inputs=["input", "pattern"], outputs=["output"],
    doc="TensorFlow's RegexFullMatch: whether each whole string matches the scalar RE2 pattern.")
def _regex_full_match(ctx):
    return [TensorType(BOOL, _strings_in(ctx).shape)]


@op("ReduceJoin", domain=D, inputs=["inputs"], outputs=["output"],
    attrs={"axes": Attr("ints"), "keep_dims": Attr("int", 0), "separator": Attr("string", "")},
    doc="The strings joined with separator along axes, reduced in the order listed (the first listed "
        "varies fastest); no axes attribute: [n-1, ..., 0], a row-major join of everything.")
def _reduce_join(ctx):
    x = _strings_in(ctx)
    if x.shape is None:
        return [TensorType(STRING, None)]
    rank = len(x.shape)
    axes = ctx.attrs.get("axes")
    axes = list(range(rank - 1, -1, -1)) if axes is None else axes
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ctx.fail(f"axis {a} is out of range for a rank-{rank} input")
    reduced = {a % rank for a in axes} if rank else set()
    if ctx.attrs.get("keep_dims"):
        return [TensorType(STRING, tuple(1 if i in reduced else d for i, d in enumerate(x.shape)))]
    return [TensorType(STRING, tuple(d for i, d in enumerate(x.shape) if i not in reduced))]


@op("StringFormat", domain=D, inputs=["inputs*"], outputs=["output"],
    attrs={"template": Attr("string", "%s"), "placeholder": Attr("string", "%s"), "summarize": Attr("int", 3)},
    doc="A scalar string: template with each placeholder replaced by the next input printed as "
        "tf.print prints it (summarize elements at each end of a dimension; -1: all).")
def _string_format(ctx):
    return [TensorType(STRING, ())]


@op("UnicodeDecodeSparse", domain=D, inputs=["input"], outputs=["indices", "values", "dense_shape"],
    attrs={"input_encoding": Attr("string", REQUIRED), "errors": Attr("string", "replace"),
           "replacement_char": Attr("int", 65533), "replace_control_characters": Attr("int", 0),
           "split": Attr("int", 0)},
    doc="The code points of each string of a rank >= 1 input as a SparseTensor one rank up (split=1: "
        "each character's encoded bytes instead), decoded from input_encoding.")
def _unicode_decode_sparse(ctx):
    x = _strings_in(ctx)
    rank = None if x.shape is None else len(x.shape) + 1
    values = STRING if ctx.attrs.get("split") else INT32
    return [TensorType(INT64, (None, rank)), TensorType(values, (None,)), TensorType(INT64, (rank,))]


@op("UnicodeDecodeScalar", domain=D, inputs=["input"], outputs=["output"],
    attrs={"input_encoding": Attr("string", REQUIRED), "errors": Attr("string", "replace"),
           "replacement_char": Attr("int", 65533), "replace_control_characters": Attr("int", 0),
           "split": Attr("int", 0)},
    doc="The code points of one scalar string (split=1: each character's encoded bytes), 1-D.")
def _unicode_decode_scalar(ctx):
    return [TensorType(STRING if ctx.attrs.get("split") else INT32, (None,))]


@op("UnicodeEncodeRows", domain=D, inputs=["input"], outputs=["output"],
    attrs={"output_encoding": Attr("string", REQUIRED), "errors": Attr("string", "replace"),
           "replacement_char": Attr("int", 65533)},
    doc="Each innermost row of int32 code points encoded as one string (rank one less).")
def _unicode_encode_rows(ctx):
    x = ctx.input(0)
    return [TensorType(STRING, None if x.shape is None else tuple(x.shape[:-1]))]


@op("UnicodeEncodeSparse", domain=D, inputs=["indices", "values", "dense_shape"], outputs=["output"],
    attrs={"output_encoding": Attr("string", REQUIRED), "errors": Attr("string", "replace"),
           "replacement_char": Attr("int", 65533)},
    doc="The code points of a SparseTensor's rows (its last dimension) each encoded as one string.")
def _unicode_encode_sparse(ctx):
    shape = ctx.input(2).shape
    rank = None if shape is None or shape[0] is None else shape[0] - 1
    return [TensorType(STRING, None if rank is None else (None,) * rank)]


op("UnicodeTranscode", domain=D, inputs=["input"], outputs=["output"],
   attrs={"input_encoding": Attr("string", REQUIRED), "output_encoding": Attr("string", REQUIRED),
          "errors": Attr("string", "replace"), "replacement_char": Attr("int", 65533),
          "replace_control_characters": Attr("int", 0)},
   doc="Each string decoded from input_encoding and encoded in output_encoding.")(_same_shape(STRING))


@op("SerializeTensor", domain=D, inputs=["tensor"], outputs=["serialized"],
    doc="The tensor as the bytes of a TensorProto (a scalar string), as TensorFlow writes it.")
def _serialize_tensor(ctx):
    return [TensorType(STRING, ())]


@op("ParseTensor", domain=D, inputs=["serialized"], outputs=["output"], attrs={"out_type": Attr("string", REQUIRED)},
    doc="The tensor a scalar string of TensorProto bytes holds; its dtype must be out_type.")
def _parse_tensor(ctx):
    shape = ctx.input(0).shape
    if shape is not None and len(shape) != 0:
        raise ctx.fail(f"serialized must be a scalar string, got shape {shape}")
    return [TensorType(np.dtype(ctx.attrs["out_type"]), None)]


@op("SerializeManySparse", domain=D, inputs=["sparse_indices", "sparse_values", "sparse_shape"],
    outputs=["serialized_sparse"],
    doc="A SparseTensor of rank >= 2 as [N, 3] strings: for each row of its first dimension, the "
        "TensorProto bytes of that row's indices, values and dense_shape (one rank less).")
def _serialize_many_sparse(ctx):
    shape = ctx.input(2).shape
    if shape is not None and shape[0] is not None and shape[0] < 2:
        raise ctx.fail(f"the SparseTensor must have rank >= 2 (a minibatch of rows), got rank {shape[0]}")
    return [TensorType(STRING, (None, 3))]


@op("DeserializeManySparse", domain=D, inputs=["serialized_sparse"], outputs=["indices", "values", "dense_shape"],
    attrs={"dtype": Attr("string", REQUIRED)},
    doc="[N, 3] serialized SparseTensors (one rank each) joined into one SparseTensor whose first dimension is "
        "N; each other dimension is the largest of the rows'.")
def _deserialize_many_sparse(ctx):
    shape = ctx.input(0).shape
    if shape is not None and (len(shape) != 2 or shape[1] not in (3, None)):
        raise ctx.fail(f"serialized_sparse must be [N, 3], got shape {shape}")
    return [TensorType(INT64, (None, None)), TensorType(np.dtype(ctx.attrs["dtype"]), (None,)),
            TensorType(INT64, (None,))]
