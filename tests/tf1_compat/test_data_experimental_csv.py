"""tf.data.experimental.CsvDataset and make_csv_dataset over small files written by the test, checked
against Python's csv module; bad rows are errors naming the file and line."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

import trainer as tf

experimental = tf.data.experimental


def _all(dataset) -> list:
    nxt = dataset.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as sess:
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                out.append(sess.run(nxt))
                assert len(out) < 10_000
    return out


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


ROWS = [["id", "height", "name", "big", "label"],
        ["1", "2.5", "a,b", "1", "0"],
        ["3", "", "c", "9999999999", "1"],
        ["5", "1e3", "", "3", "1"],
        ["7", "-0.25", 'say "hi"', "4", "0"],
        ["9", "8", "e", "", "1"]]


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "table.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(ROWS)
    return str(path)


def test_csv_dataset_parses_each_record_with_its_defaults(table) -> None:
    defaults = [tf.int32, [-1.0], ["?"], [np.int64(0)], tf.int64]
    ds = experimental.CsvDataset(table, defaults, header=True)
    assert ds.output_types == (tf.int32, tf.float32, np.dtype(object), tf.int64, tf.int64)
    assert ds.output_shapes == ((),) * 5
    got = [(int(a), float(b), _text(c), int(d), int(e)) for a, b, c, d, e in _all(ds)]
    expected = [(int(r[0]), float(r[1]) if r[1] else -1.0, r[2] or "?", int(r[3]) if r[3] else 0, int(r[4]))
                for r in ROWS[1:]]
    assert got == expected


def test_csv_dataset_select_cols_and_na_value(tmp_path) -> None:
    path = tmp_path / "na.csv"
    path.write_text("1|NA|x\n2|5|y\n")
    ds = experimental.CsvDataset(str(path), [[0], [7]], field_delim="|", na_value="NA", select_cols=[0, 1])
    assert [(int(a), int(b)) for a, b in _all(ds)] == [(1, 7), (2, 5)]
    with pytest.raises(ValueError, match="select_cols.*record_defaults"):
        experimental.CsvDataset(str(path), [[0]], select_cols=[0, 1])


def test_csv_dataset_errors_name_the_file_and_line(tmp_path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2\n3,4,5\n6,x\n")
    short = experimental.CsvDataset(str(path), [[0], [0]], header=True)
    nxt = short.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert [int(v) for v in sess.run(nxt)] == [1, 2]
        with pytest.raises(tf.errors.InvalidArgumentError, match=rf"{path}:3: Expect 2 fields but have 3"):
            sess.run(nxt)
    tf.reset_default_graph()
    path.write_text("a,b\n1,2\n6,x\n")
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"{path}:3: .*not a valid int32: 'x'"):
        _all(experimental.CsvDataset(str(path), [[0], [0]], header=True))
    tf.reset_default_graph()
    path.write_text("a,b\n1,2\n3,4,5\n6,x\n7,8\n")
    skipped = experimental.CsvDataset(str(path), [[0], [0]], header=True).apply(experimental.ignore_errors())
    assert [[int(v) for v in r] for r in _all(skipped)] == [[1, 2], [7, 8]]
    with pytest.raises(TypeError, match=r"record_defaults\[0\].*bool"):
        experimental.CsvDataset(str(path), [[True], [0]])


def test_make_csv_dataset_infers_types_and_splits_the_label(table) -> None:
    ds = experimental.make_csv_dataset(table, batch_size=2, label_name="label", num_epochs=1, shuffle=False)
    features, label = ds.output_types
    assert features == {"id": tf.int32, "height": tf.float32, "name": np.dtype(object), "big": tf.int64}
    assert label == tf.int32
    batches = _all(ds)
    assert [len(lab) for _, lab in batches] == [2, 2, 1]
    rows = ROWS[1:]
    ids = [v for f, _ in batches for v in f["id"].tolist()]
    heights = [v for f, _ in batches for v in f["height"].tolist()]
    names = [_text(v) for f, _ in batches for v in f["name"]]
    bigs = [v for f, _ in batches for v in f["big"].tolist()]
    labels = [v for _, lab in batches for v in lab.tolist()]
    assert ids == [int(r[0]) for r in rows]
    assert heights == [float(np.float32(r[1])) if r[1] else 0.0 for r in rows]
    assert names == [r[2] for r in rows]
    assert bigs == [int(r[3]) if r[3] else 0 for r in rows]
    assert labels == [int(r[4]) for r in rows]


def test_make_csv_dataset_select_columns_repeat_and_shuffle(table) -> None:
    ds = experimental.make_csv_dataset(table, batch_size=4, select_columns=["id", "label"], label_name="label",
                                       num_epochs=None, shuffle=True, shuffle_seed=3)
    features, label = ds.output_types
    assert list(features) == ["id"]
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        seen = [sess.run(nxt) for _ in range(5)]  # forever; every batch full (the remainder is dropped)
    assert all(len(lab) == 4 for _, lab in seen)
    ids = [i for f, _ in seen for i in f["id"].tolist()]
    assert sorted(ids[:5]) == [1, 3, 5, 7, 9]  # the first epoch is a permutation of the rows
    by_id = {int(r[0]): int(r[4]) for r in ROWS[1:]}
    assert all(by_id[i] == lab for (f, labs) in seen for i, lab in zip(f["id"].tolist(), labs.tolist()))


def test_make_csv_dataset_refuses_bad_arguments(table, tmp_path) -> None:
    with pytest.raises(ValueError, match="no files match"):
        experimental.make_csv_dataset(str(tmp_path / "none*.csv"), 2)
    with pytest.raises(ValueError, match="label_name 'nope'"):
        experimental.make_csv_dataset(table, 2, label_name="nope")
    with pytest.raises(ValueError, match="column names without a header"):
        experimental.make_csv_dataset(table, 2, header=False)
    with pytest.raises(ValueError, match="select_columns"):
        experimental.make_csv_dataset(table, 2, select_columns=["id", "missing"])
    other = tmp_path / "other.csv"
    other.write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="different column names"):
        experimental.make_csv_dataset(str(tmp_path / "*.csv"), 2)


def test_make_csv_dataset_ignore_errors_skips_bad_rows(tmp_path) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([["a", "b"], ["1", "2"], ["3", "4", "5"], ["6", "7"]])
    path = tmp_path / "rows.csv"
    path.write_text(buf.getvalue())
    ds = experimental.make_csv_dataset(str(path), 10, num_epochs=1, shuffle=False, ignore_errors=True)
    (batch,) = _all(ds)
    assert batch["a"].tolist() == [1, 6] and batch["b"].tolist() == [2, 7]
