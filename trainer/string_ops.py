"""TF 1.x's string functions: ``tf.string_split``, ``tf.string_to_number``, ``tf.string_join`` and
the ``tf.strings`` namespace's spellings of them. String tensors hold ``str`` or ``bytes``
(TensorFlow's); a split keeps the kind it was given."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels.text import as_string_format
from trainer.dtypes import as_dtype
from trainer.errors import InvalidArgumentError
from trainer.graph import Tensor
from trainer.ops import convert_to_tensor, make_op
from trainer.sparse_tensor import SparseTensor

__all__ = ["as_string", "bytes_split", "decode_base64", "decode_compressed", "encode_base64", "format", "length",
           "lower", "parse_tensor", "reduce_join", "regex_full_match", "regex_replace", "serialize_tensor", "split",
           "string_join", "string_length", "string_split", "string_strip", "string_to_hash_bucket",
           "string_to_hash_bucket_fast", "string_to_hash_bucket_strong", "string_to_number", "strip", "substr",
           "to_hash_bucket", "to_hash_bucket_fast", "to_hash_bucket_strong", "to_number", "unicode_decode",
           "unicode_encode", "unicode_split", "unicode_transcode", "upper"]

D = "flowstack"


def _split(source, delimiter: str, skip_empty: bool, maxsplit: int, whitespace: bool, name) -> SparseTensor:
    x = convert_to_tensor(source)
    if x.shape is not None and len(x.shape) != 1:
        raise ValueError(f"string_split: the source must be 1-D, got shape {x.shape}")
    attrs = {"delimiter": delimiter, "skip_empty": int(skip_empty), "maxsplit": maxsplit, "whitespace": int(whitespace)}
    indices, values, dense_shape = make_op("StringSplitSparse", [x], attrs, domain=D, name=name or "StringSplit",
                                           num_outputs=3).outputs
    return SparseTensor(indices, values, dense_shape)


def string_split(source, delimiter: str = " ", skip_empty: bool = True, name=None) -> SparseTensor:
    """Each string of the 1-D ``source`` split at every character of ``delimiter`` (an empty
    delimiter: into characters), as a SparseTensor [len(source), most tokens]."""
    return _split(source, delimiter, skip_empty, -1, False, name)


def split(source, sep=None, maxsplit: int = -1, result_type: str = "SparseTensor", name=None) -> SparseTensor:
    """``tf.strings.split``: at ``sep`` (a whole string; None splits at runs of whitespace)."""
    if result_type != "SparseTensor":
        raise NotImplementedError("tf.strings.split: result_type='RaggedTensor' is not supported; flowstack returns "
                                  "a SparseTensor")
    if sep is None:
        return _split(source, "", True, maxsplit, True, name)
    if len(sep) != 1:
        raise NotImplementedError("tf.strings.split: a separator of more than one character is not supported")
    return _split(source, sep, False, maxsplit, False, name)


def string_to_number(string_tensor, out_type=np.float32, name=None):
    """Each string parsed as a number (float32 by default; float64, int32, int64)."""
    return make_op("StringToNumber", [convert_to_tensor(string_tensor)],
                   {"out_type": np.dtype(as_dtype(out_type).as_numpy_dtype).name}, domain=D,
                   name=name or "StringToNumber").outputs[0]


to_number = string_to_number


def string_join(inputs, separator: str = "", name=None):
    """The strings of ``inputs`` (broadcast against each other) joined with ``separator``."""
    parts = [convert_to_tensor(x) for x in inputs]
    if not parts:
        raise ValueError("string_join: no inputs")
    out = parts[0]
    for part in parts[1:]:
        if separator:
            out = make_op("StringConcat", [out, convert_to_tensor(np.array(separator, dtype=object))]).outputs[0]
        out = make_op("StringConcat", [out, part]).outputs[0]
    return out if name is None else make_op("Identity", [out], name=name).outputs[0]


# TF 1.15's AsString takes these; other dtypes (uint8, float16, strings) fail when the op is built.
_AS_STRING_DTYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "complex64", "complex128", "bool")


def as_string(input, precision: int = -1, scientific: bool = False, shortest: bool = False,  # noqa: A002 - TF's name
              width: int = -1, fill: str = "", name=None):
    """Each element as a string, formatted as TensorFlow's AsString (printf) does: ``%d`` for
    integers; for floats ``%f`` (``%e`` scientific, ``%g`` shortest) with ``precision`` digits;
    ``width`` pads with ``fill`` (one of `` +-0#``); bools become ``true``/``false``.

    >>> import trainer as tf
    >>> g = tf.Graph()
    >>> with g.as_default():
    ...     s = tf.as_string(tf.constant([3.5, -0.25]), precision=2, width=7)
    >>> tf.Session(graph=g).run(s).tolist()
    [b'   3.50', b'  -0.25']
    """
    x = convert_to_tensor(input)
    if x.dtype is not None and x.dtype.name not in _AS_STRING_DTYPES:
        raise TypeError(f"as_string: input has dtype {x.dtype.name}, not one of {', '.join(_AS_STRING_DTYPES)}")
    if x.dtype is not None:
        try:
            as_string_format(x.dtype, precision, scientific, shortest, width, fill)
        except ValueError as e:
            raise InvalidArgumentError(f"AsString: {e}") from None
    attrs = {"precision": int(precision), "scientific": int(bool(scientific)), "shortest": int(bool(shortest)),
             "width": int(width), "fill": fill}
    return make_op("AsString", [x], attrs, domain=D, name=name or "AsString").outputs[0]


# -- tf.strings' element-wise ops (schemas/ops/strings.py) ---------------------------------------------
_UNITS = ("BYTE", "UTF8_CHAR")
_ERRORS = ("strict", "replace", "ignore")
_OUTPUT_ENCODINGS = ("UTF-8", "UTF-16-BE", "UTF-32-BE")


def _choice(op: str, arg: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{op}: {arg} must be one of {list(allowed)}, got {value!r}")


def _strings(op: str, arg: str, value):
    x = value if isinstance(value, (Tensor, SparseTensor)) else convert_to_tensor(_as_string_array(value))
    if isinstance(x, Tensor) and x.dtype is not None and x.dtype != np.dtype(object):
        raise TypeError(f"{op}: {arg} must be a string tensor, got dtype {x.dtype.name}")
    return x


def _as_string_array(value):
    """Python strings (or nested lists of them) as an object array; anything else as it is."""
    return np.asarray(value, dtype=object) if isinstance(value, (str, bytes, list, tuple)) else value


def _unary(op: str, arg: str, value, attrs: dict, name):
    x = _strings(op, arg, value)
    if isinstance(x, SparseTensor):  # TF applies these to a SparseTensor's values
        return SparseTensor(x.indices, _unary(op, arg, x.values, attrs, name), x.dense_shape)
    return make_op(op, [x], attrs, domain=D, name=name or op).outputs[0]


def length(input, name=None, unit: str = "BYTE") -> Tensor:  # noqa: A002 - TF's name
    """Each string's length (int32) in bytes, or with ``unit="UTF8_CHAR"`` in UTF-8 characters."""
    _choice("StringLength", "unit", unit, _UNITS)
    return _unary("StringLength", "input", input, {"unit": unit}, name)


def lower(input, encoding: str = "", name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each string lower-cased (ASCII letters; every letter with ``encoding="utf-8"``)."""
    _choice("StringLower", "encoding", encoding, ("", "utf-8", "UTF-8"))
    return _unary("StringLower", "input", input, {"encoding": encoding}, name)


def upper(input, encoding: str = "", name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each string upper-cased (ASCII letters; every letter with ``encoding="utf-8"``)."""
    _choice("StringUpper", "encoding", encoding, ("", "utf-8", "UTF-8"))
    return _unary("StringUpper", "input", input, {"encoding": encoding}, name)


def strip(input, name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each string without leading and trailing whitespace."""
    return _unary("StringStrip", "input", input, {}, name)


def _int_tensor(op: str, arg: str, value):
    x = convert_to_tensor(value) if isinstance(value, Tensor) else convert_to_tensor(np.asarray(value, np.int32))
    if x.dtype is not None and x.dtype.kind not in "iu":
        raise TypeError(f"{op}: {arg} must be int32 or int64, got dtype {x.dtype.name}")
    return x


def substr(input, pos, len, name=None, unit: str = "BYTE") -> Tensor:  # noqa: A002 - TF's names
    """``input[pos:pos + len]`` per string, counted in bytes or (``unit="UTF8_CHAR"``) characters;
    ``pos`` and ``len`` share a shape and broadcast against ``input``; a negative ``pos`` counts
    from the end. A ``pos`` past the end fails the run, naming the string."""
    _choice("Substr", "unit", unit, _UNITS)
    x = _strings("Substr", "input", input)
    return make_op("Substr", [x, _int_tensor("Substr", "pos", pos), _int_tensor("Substr", "len", len)],
                   {"unit": unit}, domain=D, name=name or "Substr").outputs[0]


def _pattern(value):
    return value if isinstance(value, Tensor) else convert_to_tensor(np.array(value, dtype=object))


def regex_replace(input, pattern, rewrite, replace_global: bool = True, name=None) -> Tensor:  # noqa: A002 - TF's name
    """Matches of the RE2 ``pattern`` replaced by ``rewrite`` (``\\1`` a group, ``\\0`` the match);
    the first match only unless ``replace_global``."""
    x = _strings("RegexReplace", "input", input)
    return make_op("RegexReplace", [x, _pattern(pattern),
                                    _pattern(rewrite)],
                   {"replace_global": int(bool(replace_global))}, domain=D, name=name or "RegexReplace").outputs[0]


def regex_full_match(input, pattern, name=None) -> Tensor:  # noqa: A002 - TF's name
    """Whether each whole string matches the RE2 ``pattern`` (bool)."""
    x = _strings("RegexFullMatch", "input", input)
    return make_op("StringRegexFullMatch", [x, _pattern(pattern)], domain=D,
                   name=name or "RegexFullMatch").outputs[0]


def _static_axes(op: str, axis) -> list[int] | None:
    if axis is None:
        return None
    if isinstance(axis, Tensor):
        raise TypeError(f"{op}: axis must be a Python int or list of ints; flowstack does not take a tensor axis")
    return [int(a) for a in np.atleast_1d(np.asarray(axis)).reshape(-1)]


def reduce_join(inputs, axis=None, keep_dims: bool = False, separator: str = "", name=None, reduction_indices=None,
                keepdims=None) -> Tensor:
    """The strings joined with ``separator`` along ``axis`` (all axes when None); several axes are
    joined in the order listed."""
    if axis is not None and reduction_indices is not None:
        raise ValueError("reduce_join: give axis or reduction_indices, not both")
    if keepdims is not None:
        keep_dims = keepdims
    axes = _static_axes("ReduceJoin", axis if axis is not None else reduction_indices)
    attrs = {"keep_dims": int(bool(keep_dims)), "separator": separator}
    if axes is not None:
        attrs["axes"] = axes
    return make_op("ReduceJoin", [_strings("ReduceJoin", "inputs", inputs)], attrs, domain=D,
                   name=name or "ReduceJoin").outputs[0]


def format(template: str, inputs, placeholder: str = "{}", summarize: int = 3,  # noqa: A001 - TF's name
           name=None) -> Tensor:
    """A scalar string: ``template`` with each ``placeholder`` replaced by the next input printed as
    ``tf.print`` prints it (``summarize`` elements at each end of a dimension; -1 prints all)."""
    tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if template.count(placeholder) != len(tensors):
        raise ValueError(f"StringFormat: {template.count(placeholder)} placeholder(s) {placeholder!r} in the template "
                         f"for {len(tensors)} input(s): they must match")
    return make_op("StringFormat", [convert_to_tensor(t) for t in tensors],
                   {"template": template, "placeholder": placeholder, "summarize": int(summarize)}, domain=D,
                   name=name or "StringFormat").outputs[0]


def _num_buckets(op: str, num_buckets) -> int:
    if int(num_buckets) < 1:
        raise ValueError(f"{op}: num_buckets must be >= 1, got {num_buckets}")
    return int(num_buckets)


def to_hash_bucket_fast(input, num_buckets: int, name=None) -> Tensor:  # noqa: A002 - TF's name
    """FarmHash Fingerprint64 of each string modulo ``num_buckets`` (int64): TensorFlow's bucket ids."""
    n = _num_buckets("StringToHashBucketFast", num_buckets)
    return _unary("StringToHashBucketFast", "input", input, {"num_buckets": n}, name)


def to_hash_bucket_strong(input, num_buckets: int, key, name=None) -> Tensor:  # noqa: A002 - TF's name
    """SipHash-2-4 of each string, keyed by the two ints of ``key``, modulo ``num_buckets`` (int64)."""
    n = _num_buckets("StringToHashBucketStrong", num_buckets)
    key = [int(k) for k in key]
    if len(key) != 2:
        raise ValueError(f"StringToHashBucketStrong: key must be a list of 2 ints, got {len(key)}")
    return _unary("StringToHashBucketStrong", "input", input, {"num_buckets": n, "key": key}, name)


def to_hash_bucket(string_tensor, num_buckets: int, name=None) -> Tensor:
    """TensorFlow's legacy Hash64 of each string modulo ``num_buckets`` (prefer to_hash_bucket_fast)."""
    n = _num_buckets("StringToHashBucket", num_buckets)
    return _unary("StringToHashBucket", "string_tensor", string_tensor, {"num_buckets": n}, name)


def encode_base64(input, pad: bool = False, name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each string in web-safe base64 (``-``/``_``), ``=``-padded only with ``pad``."""
    return _unary("EncodeBase64", "input", input, {"pad": int(bool(pad))}, name)


def decode_base64(input, name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each web-safe base64 string decoded; invalid data fails the run."""
    return _unary("DecodeBase64", "input", input, {}, name)


def decode_compressed(bytes, compression_type: str = "", name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each string inflated from ``compression_type`` ZLIB or GZIP (``""``: unchanged)."""
    _choice("DecodeCompressed", "compression_type", compression_type, ("", "ZLIB", "GZIP"))
    return _unary("DecodeCompressed", "bytes", bytes, {"compression_type": compression_type}, name)


# -- Unicode: a rank >= 1 input's rows come back as a SparseTensor, as tf.strings.split's do ---------------
def _decode(op: str, input, input_encoding: str, errors: str, replacement_char: int,  # noqa: A002
            replace_control_characters: bool, split: bool, name):
    _choice(op, "errors", errors, _ERRORS)
    x = _strings(op, "input", input)
    attrs = {"input_encoding": input_encoding, "errors": errors, "replacement_char": int(replacement_char),
             "replace_control_characters": int(bool(replace_control_characters)), "split": int(split)}
    if x.shape is not None and len(x.shape) == 0:
        return make_op("UnicodeDecodeScalar", [x], attrs, domain=D, name=name or op).outputs[0]
    if x.shape is None:
        raise ValueError(f"{op}: the input's rank must be known (a scalar gives a Tensor, more a SparseTensor)")
    indices, values, dense_shape = make_op("UnicodeDecodeSparse", [x], attrs, domain=D, name=name or op,
                                           num_outputs=3).outputs
    return SparseTensor(indices, values, dense_shape)


def unicode_decode(input, input_encoding: str, errors: str = "replace", replacement_char: int = 65533,  # noqa: A002
                   replace_control_characters: bool = False, name=None) -> Tensor | SparseTensor:
    """Each string's code points (int32): a 1-D tensor for a scalar input, else a SparseTensor one
    rank up (TensorFlow gives a RaggedTensor there)."""
    return _decode("UnicodeDecode", input, input_encoding, errors, replacement_char, replace_control_characters,
                   False, name)


def unicode_split(input, input_encoding: str, errors: str = "replace", replacement_char: int = 65533,  # noqa: A002
                  name=None) -> Tensor | SparseTensor:
    """Each string split into its characters (each encoded in ``input_encoding``), shaped as unicode_decode's."""
    return _decode("UnicodeSplit", input, input_encoding, errors, replacement_char, False, True, name)


def bytes_split(input, name=None) -> Tensor | SparseTensor:  # noqa: A002 - TF's name
    """Each string split into its bytes, shaped as unicode_decode's result."""
    return _decode("BytesSplit", input, "latin-1", "strict", 65533, False, True, name)


def unicode_encode(input, output_encoding: str, errors: str = "replace", replacement_char: int = 65533,  # noqa: A002
                   name=None) -> Tensor:
    """Rows of int32 code points (a dense tensor's last dimension, or a SparseTensor's) each
    encoded as one string in ``output_encoding`` (UTF-8, UTF-16-BE or UTF-32-BE)."""
    _choice("UnicodeEncode", "output_encoding", output_encoding, _OUTPUT_ENCODINGS)
    _choice("UnicodeEncode", "errors", errors, _ERRORS)
    attrs = {"output_encoding": output_encoding, "errors": errors, "replacement_char": int(replacement_char)}
    if isinstance(input, SparseTensor):
        return make_op("UnicodeEncodeSparse", [input.indices, input.values, input.dense_shape], attrs, domain=D,
                       name=name or "UnicodeEncode").outputs[0]
    x = _int_tensor("UnicodeEncode", "input", input)
    if x.shape is not None and len(x.shape) == 0:
        raise ValueError("UnicodeEncode: input must have rank >= 1 (rows of code points), got a scalar")
    return make_op("UnicodeEncodeRows", [x], attrs, domain=D, name=name or "UnicodeEncode").outputs[0]


def unicode_transcode(input, input_encoding: str, output_encoding: str, errors: str = "replace",  # noqa: A002
                      replacement_char: int = 65533, replace_control_characters: bool = False, name=None) -> Tensor:
    """Each string re-encoded from ``input_encoding`` to ``output_encoding``."""
    _choice("UnicodeTranscode", "output_encoding", output_encoding, _OUTPUT_ENCODINGS)
    _choice("UnicodeTranscode", "errors", errors, _ERRORS)
    return _unary("UnicodeTranscode", "input", input,
                  {"input_encoding": input_encoding, "output_encoding": output_encoding, "errors": errors,
                   "replacement_char": int(replacement_char),
                   "replace_control_characters": int(bool(replace_control_characters))}, name)


def serialize_tensor(tensor, name=None) -> Tensor:
    """The tensor as a scalar string of TensorProto bytes (TensorFlow reads them back, and the other way round)."""
    return make_op("SerializeTensor", [convert_to_tensor(tensor)], domain=D,
                   name=name or "SerializeTensor").outputs[0]


def parse_tensor(serialized, out_type, name=None) -> Tensor:
    """The tensor a scalar string of TensorProto bytes holds; a dtype other than ``out_type`` fails the run."""
    dtype = np.dtype(as_dtype(out_type).as_numpy_dtype)
    return make_op("ParseTensor", [_strings("ParseTensor", "serialized", serialized)], {"out_type": dtype.name},
                   domain=D, name=name or "ParseTensor").outputs[0]


# TF 1.15's top-level spellings of these (tf.substr, tf.string_to_hash_bucket_fast, ...).
string_length = length
string_strip = strip
string_to_hash_bucket = to_hash_bucket
string_to_hash_bucket_fast = to_hash_bucket_fast
string_to_hash_bucket_strong = to_hash_bucket_strong
TF_LEVEL_NAMES = ("decode_base64", "encode_base64", "parse_tensor", "reduce_join", "regex_replace",
                  "serialize_tensor", "string_strip",
                  "string_to_hash_bucket", "string_to_hash_bucket_fast", "string_to_hash_bucket_strong", "substr")
