"""TF 1.0-1.3's queue-based input pipeline, as tutorials wrote it: a queue of file names
(``string_input_producer``, ``match_filenames_once``), a reader (``TextLineReader``, ``TFRecordReader``,
``FixedLengthRecordReader``, ``WholeFileReader``), a decoder (``decode_csv``, ``parse_single_example``,
``decode_raw``) and a batcher, over files written from scikit-learn's digits; each reads to the end
(OutOfRangeError) and checks that every record came exactly ``num_epochs`` times with its values."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import trainer as tf
from exporter.freeze import FreezeError, freeze
from tests.tf1_compat.queue_runs import run_to_the_end

# A reader or queue bug shows as a run that waits forever: each test gets two minutes at most.
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def raw_digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data.astype(np.int64), d.target.astype(np.int64)  # pixels 0..16


def _write_csv(path, ids, pixels, labels):
    lines = ["id," + ",".join(f"p{i}" for i in range(64)) + ",label"]
    lines += [f"{i}," + ",".join(str(v) for v in px) + f",{lab}" for i, px, lab in zip(ids, pixels, labels)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_csv_tutorial_trains_on_every_row_exactly_num_epochs_times(tmp_path, raw_digits, shuffle):
    pixels, labels = raw_digits
    n = len(labels)
    files = [_write_csv(tmp_path / "a.csv", range(0, 900), pixels[:900], labels[:900]),
             _write_csv(tmp_path / "b.csv", range(900, n), pixels[900:], labels[900:])]
    filename_queue = tf.train.string_input_producer(files, num_epochs=2, shuffle=shuffle, seed=3)
    reader = tf.TextLineReader(skip_header_lines=1)
    key, value = reader.read(filename_queue)
    columns = tf.decode_csv(value, record_defaults=[[0]] + [[0.0]] * 64 + [[0]])
    row_id, features, label = columns[0], tf.stack(columns[1:65]) / 16.0, columns[65]
    if shuffle:
        ids, x, y = tf.train.shuffle_batch([row_id, features, label], batch_size=6, capacity=200, min_after_dequeue=100,
                                           seed=3)
    else:
        ids, x, y = tf.train.batch([row_id, features, label], batch_size=6, capacity=200)
    assert tuple(x.get_shape().as_list()) == (6, 64)  # a static batch, as the CIFAR-10 tutorial's reshape needs
    W = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    logits = tf.matmul(tf.reshape(x, [x.get_shape().as_list()[0], -1]), W) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(y, tf.int64), logits=logits))
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        batches = run_to_the_end(sess, [ids, x, y, train_op])
        weights, bias = sess.run([W, b])
        assert sess.run(reader.num_work_units_completed()) == 4  # two files, two epochs
    seen = np.concatenate([bt[0] for bt in batches])
    assert len(batches) == 2 * n // 6 and seen.dtype == np.int32
    if shuffle:
        assert seen.tolist() != list(range(n)) * 2
    else:  # in file order, epoch after epoch
        assert seen.tolist() == list(range(n)) * 2
    assert set(collections.Counter(seen.tolist()).values()) == {2} and len(set(seen.tolist())) == n
    for row_ids, x_b, y_b, _ in batches:
        np.testing.assert_array_equal(x_b, pixels[row_ids] / 16.0)
        np.testing.assert_array_equal(y_b, labels[row_ids])
    accuracy = ((pixels / 16.0) @ weights + bias).argmax(1) == labels
    assert accuracy.mean() >= 0.85, accuracy.mean()


def test_tfrecord_examples_read_one_at_a_time_and_up_to_n_across_files(tmp_path, raw_digits):
    pixels, labels = raw_digits
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    for path, rows in zip(paths, (range(0, 1000), range(1000, len(labels)))):
        with tf.python_io.TFRecordWriter(path) as writer:
            for i in rows:
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(float_list=tf.train.FloatList(value=pixels[i].astype(float))),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[i]]))}))
                writer.write(example.SerializeToString())
    spec = {"image": tf.FixedLenFeature([64], tf.float32), "label": tf.FixedLenFeature([], tf.int64)}

    queue = tf.train.string_input_producer(paths, num_epochs=1, shuffle=False)
    key, value = tf.TFRecordReader().read(queue)
    parsed = tf.parse_single_example(value, features=spec)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        records = run_to_the_end(sess, [key, parsed["image"], parsed["label"]])
    assert len(records) == len(labels)
    assert records[0][0] == f"{paths[0]}:0".encode() and records[1000][0] == f"{paths[1]}:0".encode()
    np.testing.assert_array_equal(np.stack([r[1] for r in records]), pixels)
    np.testing.assert_array_equal([r[2] for r in records], labels)

    tf.reset_default_graph()
    queue = tf.train.string_input_producer(paths, num_epochs=1, shuffle=False)
    reader = tf.TFRecordReader()
    keys, values = reader.read_up_to(queue, 300)
    batch = tf.parse_example(values, features=spec)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        batches = run_to_the_end(sess, [keys, batch["label"]])
        assert sess.run(reader.num_records_produced()) == len(labels)
    assert [len(b[0]) for b in batches] == [300] * 5 + [297]  # the 4th crosses from a.tfrecord to b.tfrecord
    assert batches[3][0][99].startswith(f"{paths[0]}:".encode())
    assert batches[3][0][100] == f"{paths[1]}:0".encode()
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), labels)

    tf.reset_default_graph()  # a GZIP-compressed file, read through TFRecordOptions
    options = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    with tf.python_io.TFRecordWriter(str(tmp_path / "c.tfrecord.gz"), options=options) as writer:
        for i in range(5):
            writer.write(pixels[i].astype(np.uint8).tobytes())
    queue = tf.train.string_input_producer([str(tmp_path / "c.tfrecord.gz")], num_epochs=1)
    _, values = tf.TFRecordReader(options=options).read_up_to(queue, 10)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        (images,) = run_to_the_end(sess, [tf.decode_raw(values, tf.uint8)])
    np.testing.assert_array_equal(images[0], pixels[:5])


def test_fixed_length_records_decode_raw_with_header_and_footer(tmp_path, raw_digits):
    pixels, labels = raw_digits
    records = np.concatenate([labels[:, None], pixels], axis=1).astype(np.uint8)  # CIFAR-10's layout: label, image
    path = tmp_path / "digits.bin"
    path.write_bytes(b"HEAD" + records.tobytes() + b"FT")
    queue = tf.train.string_input_producer([str(path)], num_epochs=1)
    key, value = tf.FixedLengthRecordReader(record_bytes=65, header_bytes=4, footer_bytes=2).read(queue)
    raw = tf.decode_raw(value, tf.uint8)
    label, image = tf.cast(raw[0], tf.int32), tf.reshape(raw[1:], [8, 8])
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        read = run_to_the_end(sess, [key, label, image])
    assert [k for k, _, _ in read] == [f"{path}:{i}".encode() for i in range(len(labels))]
    np.testing.assert_array_equal([lab for _, lab, _ in read], labels)
    np.testing.assert_array_equal(np.stack([img for _, _, img in read]).reshape(-1, 64), pixels)

    path.write_bytes(b"HEAD" + records.tobytes()[:100])  # a truncated record: an error naming the file
    tf.reset_default_graph()
    queue = tf.train.string_input_producer([str(path)], num_epochs=1)
    _, value = tf.FixedLengthRecordReader(record_bytes=65, header_bytes=4).read(queue)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        with pytest.raises(Exception, match="digits.bin.*record_bytes=65"):
            run_to_the_end(sess, value)


def test_whole_files_matched_once_and_read_write_matching_files(tmp_path, raw_digits):
    pixels, labels = raw_digits
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(20):
        (folder / f"digit_{i:03d}.bin").write_bytes(pixels[i].astype(np.uint8).tobytes())
    (folder / "notes.txt").write_text("not an image")
    filenames = tf.train.match_filenames_once(str(folder / "*.bin"))
    queue = tf.train.string_input_producer(filenames, num_epochs=1, shuffle=False)
    key, value = tf.WholeFileReader().read(queue)
    image = tf.decode_raw(value, tf.uint8)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert len(sess.run(filenames)) == 20
        read = run_to_the_end(sess, [key, image])
    assert [k for k, _ in read] == [str(folder / f"digit_{i:03d}.bin").encode() for i in range(20)]
    np.testing.assert_array_equal(np.stack([img for _, img in read]), pixels[:20])

    name = tf.placeholder(tf.string, [])
    contents = tf.read_file(name)
    written = tf.write_file(str(tmp_path / "out" / "copy.bin"), contents)
    listed = tf.io.matching_files([str(folder / "digit_00[0-2].bin"), str(folder / "*.txt")])
    with tf.Session() as sess:
        sess.run(written, {name: str(folder / "digit_007.bin")})
        assert sess.run(listed).tolist() == [str(folder / f).encode() for f in
                                             ("digit_000.bin", "digit_001.bin", "digit_002.bin", "notes.txt")]
        with pytest.raises(Exception, match="nowhere.bin"):
            sess.run(contents, {name: str(tmp_path / "nowhere.bin")})
    assert (tmp_path / "out" / "copy.bin").read_bytes() == (folder / "digit_007.bin").read_bytes()


def test_decode_csv_quotes_na_values_selected_columns_and_types():
    records = tf.constant(['1,"a, ""quoted"" b",2.5,NA', '2,,NA,7', '"3",plain,,8'])
    ident, text, score = tf.decode_csv(records, [[0], ["none"], tf.constant([-1.0], tf.float64)], na_value="NA",
                                       select_cols=[0, 1, 2])
    tabbed = tf.decode_csv(tf.constant([["x\t\"y\""], ["z\t1"]]), [[""], [""]], field_delim="\t",
                           use_quote_delim=False)
    required = tf.decode_csv(records, [[0], [""], [0.0], tf.constant([], tf.int64)], na_value="NA")
    with tf.Session() as sess:
        i, t, s = sess.run([ident, text, score])
        a, b = sess.run(tabbed)
        assert i.dtype == np.int32 and s.dtype == np.float64
        assert i.tolist() == [1, 2, 3] and t.tolist() == [b'a, "quoted" b', b"none", b"plain"]
        assert s.tolist() == [2.5, -1.0, -1.0]
        assert a.shape == (2, 1) and a.ravel().tolist() == [b"x", b"z"] and b.ravel().tolist() == [b'"y"', b"1"]
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Field 3 is required but missing in record 0"):
            sess.run(required)
    bad = {'1,2,x': r"Field 2 in record 0 is not a valid int32: 'x' \(record: '1,2,x'\)",
           '1,2': r"Expect 3 fields but have 2 in record 0",
           '1,"2"3,4': r"Record 0 is not valid CSV: field 1: a quote inside a quoted field",
           '1,2"",4': r"Record 0 is not valid CSV: field 1: an unquoted field cannot have quotes",
           '1,"2,4': r"Record 0 is not valid CSV: field 1: a quoted field has to end with a quote"}
    for record, message in bad.items():
        out = tf.decode_csv(tf.constant([record]), [[0], [0], [0]])
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run(out)
    with pytest.raises(ValueError, match="select_cols must be distinct, ascending"):
        tf.decode_csv(records, [[0], [0]], select_cols=[2, 1])
    with pytest.raises(TypeError, match=r"record_defaults\[0\] has dtype tf.bool"):
        tf.decode_csv(records, [[True]])


def test_a_malformed_line_stops_the_pipeline_with_an_error_naming_it(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("x,y\n1.0,2\n3.0,oops\n5.0,6\n")
    queue = tf.train.string_input_producer([str(path)], num_epochs=1)
    _, value = tf.TextLineReader(skip_header_lines=1).read(queue)
    x, y = tf.decode_csv(value, [[0.0], [0]])
    xs, ys = tf.train.batch([x, y], batch_size=1)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Field 1 in record 0 is not a valid int32: 'oops' "
                                                                 r"\(record: '3.0,oops'\)"):
            run_to_the_end(sess, ys)


def test_a_missing_file_in_the_queue_is_an_error_naming_it(tmp_path):
    (tmp_path / "here.txt").write_text("a\n")
    queue = tf.train.string_input_producer([str(tmp_path / "here.txt"), str(tmp_path / "gone.txt")], shuffle=False)
    _, value = tf.TextLineReader().read(queue)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.OpError, match=r"TextLineReader 'TextLineReader': no file '.*gone.txt'"):
            run_to_the_end(sess, value)


def test_num_epochs_needs_the_local_variables_initialized(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    _, value = tf.TextLineReader().read(tf.train.string_input_producer([str(path)], num_epochs=1))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match=r"input_producer/limit_epochs/epochs.*uninitialized.*local_variables_initializer"):
            run_to_the_end(sess, value)


@pytest.mark.parametrize("join", ["batch_join", "shuffle_batch_join"])
def test_batch_join_reads_with_a_reader_per_thread(tmp_path, join):
    paths = []
    for f in range(3):
        paths.append(str(tmp_path / f"part{f}.csv"))
        (tmp_path / f"part{f}.csv").write_text("".join(f"{f * 100 + i}\n" for i in range(40)))
    queue = tf.train.string_input_producer(paths, num_epochs=3, shuffle=True)
    rows = [tf.decode_csv(tf.TextLineReader().read(queue)[1], [[0]]) for _ in range(2)]
    if join == "batch_join":
        ids = tf.train.batch_join(rows, batch_size=8)
    else:
        ids = tf.train.shuffle_batch_join(rows, batch_size=8, capacity=64, min_after_dequeue=16)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        seen = np.concatenate([b[0] for b in run_to_the_end(sess, ids)])
    assert len(seen) == 3 * 120 and set(collections.Counter(seen.tolist()).values()) == {3}


def test_maybe_batch_keeps_only_the_examples_asked_for(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("".join(f"{i}\n" for i in range(40)))
    queue = tf.train.string_input_producer([str(path)], num_epochs=1)
    (row_id,) = tf.decode_csv(tf.TextLineReader().read(queue)[1], [[0]])
    kept = tf.train.maybe_batch([row_id], keep_input=tf.less(row_id, 20), batch_size=4)
    window = tf.constant(np.arange(10, dtype=np.int32))
    shuffled = tf.train.maybe_shuffle_batch([window], batch_size=5, capacity=20, min_after_dequeue=0,
                                            keep_input=tf.constant(np.arange(10) % 2 == 0), enqueue_many=True)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            drawn = np.concatenate([sess.run(shuffled[0]) for _ in range(4)])  # the runner enqueues it again and again
            assert set(drawn.tolist()) <= {0, 2, 4, 6, 8} and len(set(drawn.tolist())) > 1
            assert np.concatenate([sess.run(kept[0]) for _ in range(5)]).tolist() == list(range(20))
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(kept)
        finally:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=10)


def test_limit_epochs_identity_reader_and_reset():
    counted = tf.train.limit_epochs(tf.constant([1, 2]), num_epochs=2)
    queue = tf.FIFOQueue(4, [tf.string])
    runner = tf.train.QueueRunner(queue, [queue.enqueue(["unused"])])
    tf.train.add_queue_runner(runner)  # already added when built: listed (and started) once
    assert tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS) == [runner]
    tf.get_collection_ref(tf.GraphKeys.QUEUE_RUNNERS).clear()
    reader = tf.IdentityReader()
    key, value = reader.read(queue)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert sess.run(counted).tolist() == [1, 2] and sess.run(counted).tolist() == [1, 2]
        with pytest.raises(tf.errors.OutOfRangeError, match="Reached limit of 2"):
            sess.run(counted)
        sess.run(queue.enqueue_many([["a", "b"]]))
        assert sess.run([key, value]) == [b"a", b"a"]
        sess.run(reader.reset())
        assert sess.run(reader.num_records_produced()) == 0 and sess.run(key) == b"b"
        sess.run(queue.close())
        with pytest.raises(tf.errors.OutOfRangeError, match="IdentityReader.*no more files"):
            sess.run(value)
    with pytest.raises(NotImplementedError, match="serialize_state"):
        reader.serialize_state()


def test_a_model_fed_by_a_reader_exports_from_its_placeholder_only(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1.0,2.0\n3.0,4.0\n")
    queue = tf.train.string_input_producer([str(path)])
    a, b = tf.decode_csv(tf.TextLineReader().read(queue)[1], [[0.0], [0.0]])
    train_x = tf.train.batch([tf.stack([a, b])], batch_size=2)
    serve_x = tf.placeholder(tf.float32, [None, 2], name="x")
    W = tf.Variable(np.eye(2, dtype=np.float32))
    train_logits, serve_logits = tf.matmul(train_x, W), tf.matmul(serve_x, W, name="logits")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        model = freeze(sess, inputs={"x": serve_x}, outputs={"logits": serve_logits})
        assert [n.op_type for n in model.graph.nodes] == ["MatMul"]  # queues and readers are not in it
        with pytest.raises(FreezeError, match="training-only op; export an output that does not depend on it"):
            freeze(sess, inputs={"x": serve_x}, outputs={"logits": train_logits})


@pytest.mark.parametrize("session_kind", ["MonitoredTrainingSession", "MonitoredSession"])
def test_monitored_sessions_run_the_pipeline_to_its_end_and_report_a_bad_record(tmp_path, session_kind):
    def run(text: str) -> int:
        tf.reset_default_graph()
        path = tmp_path / "rows.csv"
        path.write_text(text)
        queue = tf.train.string_input_producer([str(path)], num_epochs=3, shuffle=False)
        a, b = tf.decode_csv(tf.TextLineReader().read(queue)[1], [[0.0], [0.0]])
        (x,) = tf.train.batch([tf.stack([a, b])], batch_size=2)
        total = tf.Variable(tf.zeros([2]))
        step = tf.train.get_or_create_global_step()
        train_op = tf.group(total.assign_add(tf.reduce_sum(x, 0)), step.assign_add(1))
        session = getattr(tf.train, session_kind)()
        steps = 0
        with session as sess:  # starts the queue runners; OutOfRangeError ends the block normally
            while not sess.should_stop():
                sess.run(train_op)
                steps += 1
                assert steps < 100
        return steps

    assert run("1,2\n3,4\n5,6\n7,8\n") == 6  # 3 epochs of 4 rows in batches of 2
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"not a valid float: 'x' \(record: '5,x'\)"):
        run("1,2\n3,4\n5,x\n")


@pytest.mark.slow
def test_an_estimator_trains_evaluates_and_predicts_from_reader_input_fns(tmp_path, raw_digits):
    pixels, labels = raw_digits
    train_csv = _write_csv(tmp_path / "train.csv", range(1400), pixels[:1400], labels[:1400])
    test_csv = _write_csv(tmp_path / "test.csv", range(1400, 1797), pixels[1400:], labels[1400:])

    def input_fn(path: str, num_epochs, shuffle: bool):
        def fn():
            queue = tf.train.string_input_producer([path], num_epochs=num_epochs, shuffle=shuffle)
            columns = tf.decode_csv(tf.TextLineReader(skip_header_lines=1).read(queue)[1],
                                    [[0]] + [[0.0]] * 64 + [[0]])
            example = [tf.stack(columns[1:65]) / 16.0, columns[65]]
            x, y = (tf.train.shuffle_batch(example, 32, capacity=256, min_after_dequeue=64) if shuffle
                    else tf.train.batch(example, 1))
            return {"pixels": x}, y
        return fn

    linear = tf.estimator.LinearClassifier([tf.feature_column.numeric_column("pixels", shape=[64])], n_classes=10,
                                           model_dir=str(tmp_path / "linear"),
                                           config=tf.estimator.RunConfig(tf_random_seed=0))
    linear.train(input_fn(train_csv, None, True), steps=300)
    metrics = linear.evaluate(input_fn(test_csv, 1, False))
    predicted = [p["class_ids"][0] for p in linear.predict(input_fn(test_csv, 1, False))]
    assert metrics["accuracy"] >= 0.85 and metrics["global_step"] == 300, metrics
    assert len(predicted) == 397 and np.mean(np.array(predicted) == labels[1400:]) >= 0.85
