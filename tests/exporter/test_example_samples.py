"""Sample records the exporter makes for a model whose input ParseExample reads
(exporter/example_samples.py), checked with the protobuf package's parser."""

from __future__ import annotations

import numpy as np

import trainer as tf
from edge_runtime.example_records import example_inputs
from exporter.freeze import export_trained, freeze
from exporter.verify import sample_inputs
from trainer.example_proto import Example


def parsing_session():
    g = tf.Graph()
    with g.as_default():
        records = tf.placeholder(tf.string, [None], name="records")
        parsed = tf.parse_example(records, {
            "x": tf.FixedLenFeature([2], tf.float32),
            "w": tf.FixedLenFeature([], tf.float32, default_value=0.5),
            "ids": tf.VarLenFeature(tf.int64),
            "steps": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
            "word": tf.FixedLenFeature([], tf.string, default_value=""),
        })
        total = tf.reduce_sum(parsed["x"], axis=1) * parsed["w"] + tf.cast(tf.reduce_sum(parsed["steps"], axis=1),
                                                                         tf.float32)
    return tf.Session(graph=g), records, total


def test_samples_are_records_of_the_parsed_features():
    sess, records, total = parsing_session()
    model = freeze(sess, {"records": records}, {"total": total})
    sample = sample_inputs(model)["records"]
    assert sample.shape == (4,) and sample.dtype == object
    parsed = [Example.FromString(r).features.feature for r in sample]
    for i, features in enumerate(parsed):
        assert len(features["x"].float_list.value) == 2
        assert ("w" in features) == (i % 2 == 0) and ("word" in features) == (i % 2 == 0)  # defaults' path too
        assert set(features["ids"].int64_list.value) <= {0, 1} and len(features["steps"].int64_list.value) <= 3


def test_an_export_lists_the_records_input_with_a_record_that_runs(tmp_path):
    import edge_runtime

    sess, records, total = parsing_session()
    export_trained(sess, str(tmp_path / "m.flow"), {"records": records}, {"total": total})
    model = edge_runtime.load(str(tmp_path / "m.flow"))
    record = example_inputs(model.metadata)["records"]
    want = sess.run(total, {records: np.array([record], dtype=object)})
    np.testing.assert_allclose(model.run({"records": np.array([record], dtype=object)})["total"], want, rtol=1e-6)
