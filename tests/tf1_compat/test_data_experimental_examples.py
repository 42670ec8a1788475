"""tf.data.experimental.parse_example_dataset and make_batched_features_dataset over TFRecord files of
tf.train.Example written by the test."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

experimental = tf.data.experimental
FEATURES = {"x": tf.FixedLenFeature([2], tf.float32), "y": tf.FixedLenFeature([], tf.int64),
            "tag": tf.FixedLenFeature([], tf.string, default_value="none")}


def _example(x: list, y: int, tag: str | None) -> bytes:
    feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
               "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y]))}
    if tag is not None:
        feature["tag"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[tag.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture
def record_files(tmp_path):
    """Two files of five Examples: x = [i, file], y = 10 * file + i, a tag on even i."""
    rows = []
    for f in range(2):
        with tf.python_io.TFRecordWriter(str(tmp_path / f"part{f}.tfrecord")) as writer:
            for i in range(5):
                row = ([float(i), float(f)], 10 * f + i, f"t{i}" if i % 2 == 0 else None)
                writer.write(_example(*row))
                rows.append(row)
    return str(tmp_path / "part*.tfrecord"), rows


def _all(dataset) -> list:
    nxt = dataset.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as sess:
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                out.append(sess.run(nxt))
    return out


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def test_make_batched_features_dataset_parses_batches_and_splits_the_label(record_files) -> None:
    pattern, rows = record_files
    ds = experimental.make_batched_features_dataset(pattern, 4, FEATURES, label_key="y", num_epochs=1,
                                                    shuffle=False)
    assert ds.output_shapes == ({"x": (None, 2), "tag": (None,)}, (None,))
    batches = _all(ds)
    assert [len(label) for _, label in batches] == [4, 4, 2]
    assert [v for f, _ in batches for v in f["x"].tolist()] == [r[0] for r in rows]
    assert [int(v) for _, lab in batches for v in lab] == [r[1] for r in rows]
    assert [_text(v) for f, _ in batches for v in f["tag"]] == [r[2] or "none" for r in rows]


def test_make_batched_features_dataset_repeats_full_batches_and_checks_arguments(record_files) -> None:
    pattern, rows = record_files
    ds = experimental.make_batched_features_dataset(pattern, 3, FEATURES, shuffle=True, shuffle_seed=1)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        ys = [sess.run(nxt)["y"] for _ in range(6)]
    assert all(len(y) == 3 for y in ys)
    drawn = [int(v) for y in ys for v in y]  # forever: 18 records from 10 files' records, every batch full
    assert sorted(drawn[:10]) == sorted(r[1] for r in rows)  # the first epoch is a permutation of the records
    with pytest.raises(ValueError, match="label_key 'nope'"):
        experimental.make_batched_features_dataset(pattern, 2, FEATURES, label_key="nope")
    with pytest.raises(TypeError, match="VarLenFeature"):
        experimental.make_batched_features_dataset(pattern, 2, {"y": tf.VarLenFeature(tf.int64)})
    with pytest.raises(ValueError, match="no files match"):
        experimental.make_batched_features_dataset(pattern + ".missing", 2, FEATURES)


def test_parse_example_dataset_parses_a_dataset_of_serialized_batches() -> None:
    serialized = np.array([_example([1.0, 2.0], 3, "a"), _example([4.0, 5.0], 6, None)], dtype=object)
    ds = tf.data.Dataset.from_tensor_slices(serialized).batch(2).apply(experimental.parse_example_dataset(FEATURES))
    (parsed,) = _all(ds)
    assert parsed["x"].tolist() == [[1.0, 2.0], [4.0, 5.0]] and parsed["y"].tolist() == [3, 6]
    assert [_text(v) for v in parsed["tag"]] == ["a", "none"]
    with pytest.raises(tf.data.DataStructureError, match="string vectors"):
        tf.data.Dataset.range(3).apply(experimental.parse_example_dataset(FEATURES))
