"""tf.strings and its TF 1.15 top-level spellings: values from TensorFlow 1.15's documented
examples, Python's own base64/zlib/gzip/unicode codecs, and reference hashes computed with the
farmhash (pyfarmhash 0.5.1, Google's C++ FarmHash) and siphashc packages (not imported here)."""

from __future__ import annotations

import base64
import gzip
import zlib

import numpy as np
import pytest

import trainer as tf
from edge_runtime.string_hashes import fingerprint64, siphash24, tf_hash64

# Fingerprint64 of these bytes, from pyfarmhash.fingerprint64 (Google's C++ FarmHash).
FARMHASH = {
    b"": 11160318154034397263, b"a": 12917804110809363939, b"abcd": 1897425971756105985,
    b"hello world": 6381520714923946011, b"x" * 20: 8233088228747857348, b"y" * 40: 276292113409495006,
    b"The quick brown fox jumps over the lazy dog": 12375473906752639284, bytes(range(200)): 525935771297148851,
    b"the": 7003889267569045354, b"cat": 15118465453979963096, b"sat": 4944363418488031913,
    b"on": 10259613837782797212, b"mat": 15071785479920724726, b"42": 623910487284905736,
}


def run(fetch, feed=None):
    return tf.Session().run(fetch, feed)


@pytest.mark.parametrize("data", list(FARMHASH), ids=lambda d: f"{len(d)}bytes")
def test_fingerprint64_matches_farmhash(data):
    assert fingerprint64(data) == FARMHASH[data]


def test_siphash_matches_the_reference_vectors():
    k0, k1 = 0x0706050403020100, 0x0F0E0D0C0B0A0908  # key bytes 00..0f, little-endian words
    assert siphash24(k0, k1, bytes(range(15))) == 0xA129CA6149BE45E5  # the SipHash paper's example
    assert siphash24(k0, k1, b"") == 0x726FDB47DD0E0E31  # the reference vectors' first line
    assert siphash24(k0, k1, b"hello") == 22433990042967937  # siphashc.siphash(bytes(range(16)), b"hello")


def test_hash_buckets_match_tensorflows_documented_ids():
    words = ["Hello", "TensorFlow", "2.x"]
    fast = tf.strings.to_hash_bucket_fast(words, 3)
    strong = tf.strings.to_hash_bucket_strong(["Hello", "TF"], 3, [1, 2])
    legacy = tf.strings.to_hash_bucket(words, 3)
    assert fast.dtype == tf.int64 and fast.shape == (3,)
    out = run([fast, strong, legacy])
    assert [o.tolist() for o in out] == [[0, 2, 2], [2, 0], [2, 0, 1]]
    assert [tf_hash64(w.encode()) % 3 for w in words] == [2, 0, 1]


def test_hash_bucket_fast_is_fingerprint_modulo_buckets():
    words = [w for w in FARMHASH if len(w) < 60]
    n = 1_000_003
    x = tf.placeholder(tf.string, [None])
    ids = tf.string_to_hash_bucket_fast(x, n)
    assert run(ids, {x: np.array(words, dtype=object)}).tolist() == [FARMHASH[w] % n for w in words]


def test_hash_bucket_rejects_bad_arguments():
    with pytest.raises(ValueError, match="StringToHashBucketFast: num_buckets must be >= 1"):
        tf.strings.to_hash_bucket_fast(["a"], 0)
    with pytest.raises(ValueError, match="key must be a list of 2 ints"):
        tf.strings.to_hash_bucket_strong(["a"], 3, [1, 2, 3])
    with pytest.raises(TypeError, match="input must be a string tensor, got dtype int32"):
        tf.strings.to_hash_bucket_fast(tf.constant([1, 2], tf.int32), 3)


def test_length_case_and_strip():
    s = tf.constant(["Hello", " Tensor\tFlow \n", "h\u00e9llo \U0001F600"])
    length = tf.strings.length(s)
    chars = tf.strings.length(s, unit="UTF8_CHAR")
    assert length.dtype == tf.int32 and length.shape == (3,)
    out = run([length, chars, tf.strings.lower(s), tf.strings.upper(s), tf.strings.upper(s, encoding="utf-8"),
               tf.strings.strip(s), tf.string_strip(s)])
    assert out[0].tolist() == [5, 14, len("h\u00e9llo \U0001F600".encode())]
    assert out[1].tolist() == [5, 14, 7]
    assert out[2].tolist() == [b"hello", b" tensor\tflow \n", "h\u00e9llo \U0001F600".encode()]
    assert out[3].tolist()[2] == "H\u00e9LLO \U0001F600".encode()  # ASCII only without an encoding
    assert out[4].tolist()[2] == "H\u00c9LLO \U0001F600".encode()
    assert out[5].tolist() == [b"Hello", b"Tensor\tFlow", "h\u00e9llo \U0001F600".encode()] == out[6].tolist()
    assert run(tf.strings.lower("CamelCase string and ALL CAPS")) == b"camelcase string and all caps"
    with pytest.raises(ValueError, match="StringLength: unit must be one of"):
        tf.strings.length(s, unit="CHAR")


def test_substr_matches_tfs_documented_examples():
    assert run(tf.strings.substr([b"Hello", b"World"], 1, 3)).tolist() == [b"ell", b"orl"]
    words = [[b"ten", b"eleven", b"twelve"], [b"thirteen", b"fourteen", b"fifteen"],
             [b"sixteen", b"seventeen", b"eighteen"]]
    out = run(tf.substr(words, [[1, 2, 3]] * 3, [[2, 3, 4], [4, 3, 2], [5, 5, 5]]))
    assert out.tolist() == [[b"en", b"eve", b"lve"], [b"hirt", b"urt", b"te"], [b"ixtee", b"vente", b"hteen"]]
    words.append([b"nineteen", b"twenty", b"twentyone"])
    broadcast = tf.strings.substr(words, [1, 2, 3], [1, 2, 3])
    assert broadcast.shape == (4, 3)
    assert run(broadcast).tolist() == [[b"e", b"ev", b"lve"], [b"h", b"ur", b"tee"], [b"i", b"ve", b"hte"],
                                       [b"i", b"en", b"nty"]]


def test_substr_counts_characters_and_from_the_end():
    text = "a\u00e9b\U0001F600c"
    out = run([tf.strings.substr(text, 1, 3, unit="UTF8_CHAR"), tf.strings.substr(text, -2, 1, unit="UTF8_CHAR"),
               tf.strings.substr(b"Hello", -3, 2), tf.strings.substr(b"Hello", 5, 2)])
    assert out == ["\u00e9b\U0001F600".encode(), "\U0001F600".encode(), b"ll", b""]


def test_substr_rejects_a_position_past_the_end():
    with pytest.raises(tf.errors.OpError, match="Substr: pos 6 out of range for string b'Hello' at index 0"):
        run(tf.strings.substr([b"Hello"], 6, 1))
    with pytest.raises(ValueError, match="pos and len must have the same shape"):
        tf.strings.substr([b"Hello"], [1, 2], 1)
    with pytest.raises(TypeError, match="pos must be int32 or int64"):
        tf.strings.substr([b"Hello"], tf.constant(1.0), 1)


def test_regexes():
    html = "Text with tags.<br /><b>contains html</b>"
    out = run([tf.strings.regex_replace(html, "<[^>]+>", " "),
               tf.regex_replace(["aaa", "bab"], "a", "x", replace_global=False),
               tf.strings.regex_replace(["John Smith"], r"(\w+) (\w+)", r"\2, \1 (\0)"),
               tf.strings.regex_full_match(["TF lib", "lib TF"], ".*lib$")])
    assert out[0] == b"Text with tags.  contains html "
    assert out[1].tolist() == [b"xaa", b"bxb"]
    assert out[2].tolist() == [b"Smith, John (John Smith)"]
    assert out[3].tolist() == [True, False]
    pattern = tf.placeholder(tf.string, [])
    matched = tf.strings.regex_full_match(["abc", "abd"], pattern)
    assert run(matched, {pattern: "ab[c]"}).tolist() == [True, False]


def test_regex_errors_name_the_op():
    with pytest.raises(tf.errors.OpError, match="RegexReplace: invalid pattern"):
        run(tf.strings.regex_replace(["a"], "(", "x"))
    with pytest.raises(tf.errors.OpError, match="names group 2 but the pattern has 1"):
        run(tf.strings.regex_replace(["a"], "(a)", r"\2"))


def test_reduce_join_matches_tfs_documented_examples():
    a = tf.constant([["a", "b"], ["c", "d"]])
    cases = [
        (tf.strings.reduce_join(a, 0), [b"ac", b"bd"]),
        (tf.strings.reduce_join(a, 1), [b"ab", b"cd"]),
        (tf.strings.reduce_join(a, -2), [b"ac", b"bd"]),
        (tf.strings.reduce_join(a, 0, keep_dims=True), [[b"ac", b"bd"]]),
        (tf.strings.reduce_join(a, 1, separator="."), [b"a.b", b"c.d"]),
        (tf.strings.reduce_join(a, [0, 1]), b"acbd"),
        (tf.strings.reduce_join(a, [1, 0]), b"abcd"),
        (tf.reduce_join(a, []), [[b"a", b"b"], [b"c", b"d"]]),
        (tf.reduce_join(a), b"abcd"),
        (tf.reduce_join(a, keepdims=True, separator=" "), [[b"a b c d"]]),
    ]
    out = run([c[0] for c in cases])
    for (tensor, expected), got in zip(cases, out):
        assert np.asarray(got).tolist() == expected
        assert tensor.shape == np.asarray(expected, dtype=object).shape
    with pytest.raises(ValueError, match="axis 2 is out of range for a rank-2 input"):
        tf.strings.reduce_join(a, 2)


def test_format_prints_as_tf_print():
    out = run([tf.strings.format("tensor: {}, suffix", tf.range(10)),
               tf.strings.format("{}, suffix", tf.reshape(tf.range(100), [10, 10]), summarize=2),
               tf.strings.format("{} and {}", [tf.constant("hi"), tf.constant([0.1, 2.0, 1e-8], tf.float32)]),
               tf.strings.format("{} {}", [tf.constant([True, False]), tf.constant(1 / 3, tf.float64)]),
               tf.strings.format("<>", [tf.range(7)], placeholder="<>", summarize=-1)])
    assert out[0] == b"tensor: [0 1 2 ... 7 8 9], suffix"
    assert out[1] == (b"[[0 1 ... 8 9]\n [10 11 ... 18 19]\n ...\n [80 81 ... 88 89]\n [90 91 ... 98 99]], suffix")
    assert out[2] == b'"hi" and [0.1 2 1e-08]'
    assert out[3] == b"[1 0] 0.33333333333333331"
    assert out[4] == b"[0 1 2 3 4 5 6]"
    # strings as absl's Utf8SafeCHexEscape writes them: C escapes, UTF-8 kept, bad bytes as \xNN
    escaped = run(tf.strings.format("{}", tf.constant(np.array([b'q"\n', "h\u00e9".encode(), b"\xff"], object))))
    assert escaped == '["q\\"\\n" "h\u00e9" "\\xff"]'.encode()
    with pytest.raises(ValueError, match="1 placeholder"):
        tf.strings.format("{}", [tf.range(2), tf.range(3)])


def test_base64_and_compression_against_the_stdlib():
    blobs = [b"", b"a", b"hello?>", bytes(range(256))]
    x = tf.placeholder(tf.string, [None])
    enc, padded = tf.io.encode_base64(x), tf.encode_base64(x, pad=True)
    out = run([enc, padded, tf.io.decode_base64(enc), tf.decode_base64(padded)], {x: np.array(blobs, object)})
    assert out[0].tolist() == [base64.urlsafe_b64encode(b).rstrip(b"=") for b in blobs]
    assert out[1].tolist() == [base64.urlsafe_b64encode(b) for b in blobs]
    assert out[2].tolist() == blobs == out[3].tolist()
    data = np.array([zlib.compress(b"abc" * 10), zlib.compress(b"")], object)
    assert run(tf.io.decode_compressed(data, "ZLIB")).tolist() == [b"abc" * 10, b""]
    assert run(tf.io.decode_compressed([gzip.compress(b"xyz")], compression_type="GZIP")).tolist() == [b"xyz"]
    assert run(tf.io.decode_compressed([b"raw"])).tolist() == [b"raw"]


def test_base64_and_compression_reject_bad_input():
    with pytest.raises(tf.errors.OpError, match="DecodeBase64: invalid web-safe base64"):
        run(tf.io.decode_base64(["a+b/"]))
    with pytest.raises(tf.errors.OpError, match="DecodeCompressed: the input is not ZLIB data"):
        run(tf.io.decode_compressed([b"not zlib"], "ZLIB"))
    with pytest.raises(ValueError, match="compression_type must be one of"):
        tf.io.decode_compressed([b"x"], "BZIP2")


def test_unicode_decode_split_and_encode():
    words = ["G\u00f6\u00f6dnight", "\U0001F60A"]
    decoded = tf.strings.unicode_decode(words, "UTF-8")
    assert isinstance(decoded, tf.SparseTensor)
    scalar = tf.strings.unicode_decode("h\u00e9", "UTF-8")
    assert scalar.shape == (None,) and scalar.dtype == tf.int32
    out = run([decoded, scalar, tf.strings.unicode_encode(decoded, "UTF-8"),
               tf.strings.unicode_encode(tf.constant([[104, 233], [97, 98]]), "UTF-16-BE"),
               tf.strings.unicode_split(words, "UTF-8"), tf.strings.bytes_split("h\u00e9")])
    codes = [[ord(c) for c in w] for w in words]
    assert out[0].values.tolist() == codes[0] + codes[1]
    assert out[0].indices.tolist() == [[0, j] for j in range(9)] + [[1, 0]]
    assert out[0].dense_shape.tolist() == [2, 9]
    assert out[1].tolist() == [104, 233]
    assert out[2].tolist() == [w.encode() for w in words]
    assert out[3].tolist() == ["h\u00e9".encode("utf-16-be"), b"\x00a\x00b"]
    assert out[4].values.tolist() == [c.encode() for w in words for c in w]
    assert out[5].tolist() == [b"h", b"\xc3", b"\xa9"]


def test_unicode_errors_and_transcode():
    bad = [b"a\xffb"]
    out = run([tf.strings.unicode_decode(bad, "UTF-8").values,
               tf.strings.unicode_decode(bad, "UTF-8", errors="ignore").values,
               tf.strings.unicode_decode(bad, "UTF-8", replacement_char=63).values,
               tf.strings.unicode_decode(["a\x01"], "UTF-8", replace_control_characters=True).values,
               tf.strings.unicode_transcode(["Hello", "TensorFlow", "2.x"], "UTF-8", "UTF-16-BE")])
    assert [o.tolist() for o in out[:4]] == [[97, 65533, 98], [97, 98], [97, 63, 98], [97, 65533]]
    assert out[4].tolist() == [b"\x00H\x00e\x00l\x00l\x00o", "TensorFlow".encode("utf-16-be"),
                               b"\x002\x00.\x00x"]
    with pytest.raises(tf.errors.OpError, match="UnicodeDecode: invalid UTF-8 data"):
        run(tf.strings.unicode_decode(bad, "UTF-8", errors="strict"))
    with pytest.raises(ValueError, match="output_encoding must be one of"):
        tf.strings.unicode_encode(tf.constant([[65]]), "latin-1")
    with pytest.raises(tf.errors.OpError, match="1114112 is not a valid Unicode code point"):
        run(tf.strings.unicode_encode(tf.constant([[0x110000]]), "UTF-8", errors="strict"))


def test_a_tf1_text_featurizing_script():
    """Tokens hashed into buckets the way a TF 1.15 model's input function does it."""
    sentences = tf.placeholder(tf.string, [None], name="sentences")
    cleaned = tf.strings.lower(tf.strings.strip(tf.regex_replace(sentences, r"[^A-Za-z0-9 ]", "")))
    tokens = tf.string_split(cleaned)
    ids = tf.SparseTensor(tokens.indices, tf.string_to_hash_bucket_fast(tokens.values, 1000), tokens.dense_shape)
    dense = tf.sparse_tensor_to_dense(ids, default_value=-1)
    with tf.Session() as sess:
        got = sess.run(dense, {sentences: ["  The cat sat! ", "on the MAT, 42."]})
    expect = [[FARMHASH[w] % 1000 for w in row] for row in ([b"the", b"cat", b"sat"], [b"on", b"the", b"mat", b"42"])]
    assert got.tolist() == [expect[0] + [-1], expect[1]]
