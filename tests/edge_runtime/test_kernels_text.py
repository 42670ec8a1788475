"""text kernels: the cases the ONNX node suite leaves out (shapes, edge cases, skip-grams, weights)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import get_kernel
from schemas import TensorType, get_schema, infer_types
from schemas.registry import UnsupportedOpError

STR = np.dtype(object)


def run(op: str, *inputs, **attrs):
    schema = get_schema(op)
    return get_kernel(op)(*inputs, xp=np, **schema.resolve_attrs(attrs))


def strings(*values, shape=None):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape or (len(values),))


def test_string_normalizer_case_insensitive_stopwords_and_lower():
    y = run("StringNormalizer", strings("The", "CAT", "the", "Dog", shape=(1, 4)),
            stopwords=["the"], case_change_action="LOWER")
    assert y.dtype == object and y.shape == (1, 2)
    assert y.tolist() == [["cat", "dog"]]


def test_string_normalizer_case_sensitive_keeps_other_case():
    y = run("StringNormalizer", strings("The", "the"), stopwords=["the"], is_case_sensitive=1)
    assert y.tolist() == ["The"]


def test_string_normalizer_all_dropped_gives_one_empty_string():
    assert run("StringNormalizer", strings("a", "a"), stopwords=["a"]).tolist() == [""]
    assert run("StringNormalizer", strings("a", shape=(1, 1)), stopwords=["a"]).shape == (1, 1)


def test_string_normalizer_rejects_batches():
    with pytest.raises(UnsupportedOpError, match=r"\[1, C\]"):
        run("StringNormalizer", strings("a", "b", shape=(2, 1)))


def test_string_concat_broadcasts_and_keeps_object_dtype():
    z = run("StringConcat", strings("a", "b", shape=(2, 1)), strings("x", "y", "z"))
    assert z.dtype == object and z.tolist() == [["ax", "ay", "az"], ["bx", "by", "bz"]]
    scalar = run("StringConcat", np.array("a", dtype=object), np.array("b", dtype=object))
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar[()] == "ab"


def test_string_split_pads_and_counts():
    y, z = run("StringSplit", strings("a,b", "c", "", shape=(3,)), delimiter=",")
    assert y.tolist() == [["a", "b"], ["c", ""], ["", ""]]
    assert z.dtype == np.int64 and z.tolist() == [2, 1, 1]


def test_string_split_whitespace_and_maxsplit():
    y, z = run("StringSplit", strings("  a  b c ", "d"), maxsplit=1)
    assert y.tolist() == [["a", "b c "], ["d", ""]]
    assert z.tolist() == [2, 1]


def test_regex_full_match_is_whole_string():
    y = run("RegexFullMatch", strings("abc", "abcd", "xabc", shape=(1, 3)), pattern="a.c")
    assert y.dtype == bool and y.tolist() == [[True, False, False]]


def test_regex_bad_pattern_names_it():
    with pytest.raises(UnsupportedOpError, match="RegexFullMatch"):
        run("RegexFullMatch", strings("a"), pattern="(")


TFIDF = dict(min_gram_length=1, max_gram_length=2, max_skip_count=0, ngram_counts=[0, 2],
             ngram_indexes=[0, 1, 2], pool_int64s=[5, 7, 5, 7])


def test_tfidf_counts_unigrams_and_bigrams():
    y = run("TfIdfVectorizer", np.array([5, 7, 5, 7, 1], np.int64), mode="TF", **TFIDF)
    assert y.dtype == np.float32 and y.tolist() == [2, 2, 2]


def test_tfidf_skip_grams_count_once_per_distance():
    # (5, 7) occurs adjacent twice and at distance 3 (positions 0 and 3) once
    y = run("TfIdfVectorizer", np.array([[5, 7, 5, 7]], np.int64), mode="TF", **{**TFIDF, "max_skip_count": 2})
    assert y.tolist() == [[2, 2, 3]]


def test_tfidf_idf_and_tfidf_weights_by_output_column():
    x = np.array([[5, 5, 7], [1, 1, 1]], np.int64)
    idf = run("TfIdfVectorizer", x, mode="IDF", weights=[0.5, 2.0, 4.0], **TFIDF)
    tfidf = run("TfIdfVectorizer", x, mode="TFIDF", weights=[0.5, 2.0, 4.0], **TFIDF)
    np.testing.assert_allclose(idf, [[0.5, 2.0, 4.0], [0, 0, 0]])
    np.testing.assert_allclose(tfidf, [[1.0, 2.0, 4.0], [0, 0, 0]])


def test_tfidf_strings():
    attrs = {**TFIDF, "pool_int64s": None, "pool_strings": ["a", "b", "a", "b"]}
    y = run("TfIdfVectorizer", strings("a", "b", "c", "a", "b"), mode="TF", **attrs)
    assert y.tolist() == [2, 2, 2]


def test_shape_rules():
    schema = get_schema("StringSplit")
    y, z = infer_types(schema, [TensorType(STR, (2, 3))], schema.resolve_attrs({}), num_outputs=2)
    assert y == TensorType(STR, (2, 3, None)) and z == TensorType(np.dtype(np.int64), (2, 3))
    schema = get_schema("TfIdfVectorizer")
    attrs = schema.resolve_attrs({**TFIDF, "mode": "TF"})
    (y,) = infer_types(schema, [TensorType(np.dtype(np.int64), (4, 9))], attrs)
    assert y == TensorType(np.dtype(np.float32), (4, 3))
