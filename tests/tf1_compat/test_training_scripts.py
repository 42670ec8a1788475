"""TF1 training scripts: a GAN with two optimizers over var_lists, save and restore, TensorBoard
scalar summaries, and fixed-seed linear / logistic regressions matching a NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.saver import CheckpointError


def test_gan_trains_generator_and_discriminator_over_their_own_var_lists(digits):
    tf.set_random_seed(6)
    X = tf.placeholder(tf.float32, [None, 64])
    Z = tf.placeholder(tf.float32, [None, 8])

    def generator(z):
        with tf.variable_scope("GAN/Generator", reuse=tf.AUTO_REUSE):
            h = tf.layers.dense(z, 32, activation=tf.nn.leaky_relu, name="h1")
            return tf.nn.sigmoid(tf.layers.dense(h, 64, name="out"))

    def discriminator(x):
        with tf.variable_scope("GAN/Discriminator", reuse=tf.AUTO_REUSE):
            w1 = tf.get_variable("w1", [64, 32], initializer=tf.contrib.layers.xavier_initializer())
            b1 = tf.get_variable("b1", [32], initializer=tf.zeros_initializer())
            w2 = tf.get_variable("w2", [32, 1], initializer=tf.contrib.layers.xavier_initializer())
            return tf.matmul(tf.nn.leaky_relu(tf.matmul(x, w1) + b1), w2)

    G = generator(Z)
    r_logits, f_logits = discriminator(X), discriminator(G)
    disc_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(logits=r_logits, labels=tf.ones_like(r_logits))
                               + tf.nn.sigmoid_cross_entropy_with_logits(logits=f_logits, labels=tf.zeros_like(f_logits)))
    gen_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(logits=f_logits, labels=tf.ones_like(f_logits)))
    gen_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="GAN/Generator")
    disc_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="GAN/Discriminator")
    assert len(disc_vars) == 3 and len(gen_vars) == 4
    gen_step = tf.train.RMSPropOptimizer(learning_rate=0.001).minimize(gen_loss, var_list=gen_vars)
    disc_step = tf.train.RMSPropOptimizer(learning_rate=0.001).minimize(disc_loss, var_list=disc_vars)
    rng = np.random.default_rng(6)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    g_before, d_before = sess.run([gen_vars, disc_vars])
    sess.run(disc_step, {X: digits["x_train"][:100], Z: rng.uniform(-1, 1, (100, 8))})
    assert all((a == b).all() for a, b in zip(g_before, sess.run(gen_vars)))  # only D moved
    assert not all((a == b).all() for a, b in zip(d_before, sess.run(disc_vars)))
    for step in range(300):
        batch = digits["x_train"][(step * 50) % 1400:][:50]
        sess.run(disc_step, {X: batch, Z: rng.uniform(-1, 1, (50, 8))})
        sess.run(gen_step, {Z: rng.uniform(-1, 1, (50, 8))})
    samples = sess.run(G, {Z: rng.uniform(-1, 1, (500, 8))})
    # The generator learned the digits' ink layout: its mean image is far closer to the data's than at start.
    data_mean = digits["x_train"].mean(0)
    assert np.abs(samples.mean(0) - data_mean).mean() < 0.12, np.abs(samples.mean(0) - data_mean).mean()
    assert np.isfinite(sess.run(disc_loss, {X: digits["x_test"], Z: rng.uniform(-1, 1, (397, 8))}))


def _softmax_model():
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    with tf.variable_scope("softmax"):
        W = tf.get_variable("W", [64, 10], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [10], initializer=tf.zeros_initializer())
    logits = tf.nn.xw_plus_b(x, W, b, name="logits")
    return x, logits


def test_save_restore_round_trip_and_a_mismatched_checkpoint_says_what_to_do(digits, tmp_path):
    x, logits = _softmax_model()
    y = tf.placeholder(tf.int64, [None])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(50):
            sess.run(train, {x: digits["x_train"], y: digits["y_train"]})
        expected = sess.run(logits, {x: digits["x_test"]})
        path = saver.save(sess, str(tmp_path / "model"), global_step=50)
    assert (np.argmax(expected, 1) == digits["y_test"]).mean() >= 0.9

    tf.reset_default_graph()
    x, logits = _softmax_model()
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        assert tf.train.latest_checkpoint(str(tmp_path)) == path
        np.testing.assert_array_equal(sess.run(logits, {x: digits["x_test"]}), expected)
        with pytest.raises(tf.GraphError, match="did you mean 'logits'"):
            sess.run("logit:0", {x: digits["x_test"]})

    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 64])
    with tf.variable_scope("softmax"):
        tf.get_variable("W", [64, 20])
    with tf.Session() as sess, pytest.raises(CheckpointError, match="new checkpoint directory.*var_list"):
        tf.train.Saver().restore(sess, path)


def test_scalar_summaries_are_read_back_by_tensorboard(digits, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    x, logits = _softmax_model()
    y = tf.placeholder(tf.int64, [None])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    tf.summary.scalar("loss", loss)
    merged = tf.summary.merge_all()
    with tf.Session() as sess:
        writer = tf.summary.FileWriter(str(tmp_path), sess.graph)
        sess.run(tf.global_variables_initializer())
        losses = []
        for step in range(5):
            summary, value, _ = sess.run([merged, loss, train], {x: digits["x_train"], y: digits["y_train"]})
            writer.add_summary(summary, step)
            losses.append(value)
            # A Python-side number, logged the way TF1 loops do it.
            manual = tf.Summary(value=[tf.Summary.Value(tag="python/loss_x2", simple_value=2.0 * float(value))])
            writer.add_summary(manual, step)
        writer.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    events = acc.Scalars("loss")
    assert [e.step for e in events] == list(range(5))
    np.testing.assert_allclose([e.value for e in events], losses, rtol=1e-6)
    np.testing.assert_allclose([e.value for e in acc.Scalars("python/loss_x2")], 2.0 * np.array(losses), rtol=1e-6)


def test_file_writer_records_the_graph_images_audio_and_text_for_tensorboard(digits, tmp_path):
    import io
    import wave

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    x, logits = _softmax_model()
    images = tf.reshape(x, [-1, 8, 8, 1])
    tf.summary.image("digits", images, max_outputs=2)
    tf.summary.audio("tone", tf.expand_dims(tf.sin(tf.range(0.0, 400.0) * 0.25), 0), 8000)
    tf.summary.text("note", tf.constant("softmax regression on **digits**"))
    merged = tf.summary.merge_all()
    with tf.Session() as sess:
        writer = tf.summary.FileWriter(str(tmp_path), graph=sess.graph)
        sess.run(tf.global_variables_initializer())
        writer.add_summary(sess.run(merged, {x: digits["x_test"][:3]}), 0)
        writer.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"images": 4, "audio": 4, "tensors": 4})
    acc.Reload()
    nodes = {n.name: n for n in acc.Graph().node}
    assert nodes["logits"].op == "Gemm" and list(nodes["logits"].input) == ["x", "softmax/W", "softmax/b"]
    assert acc.Tags()["images"] == ["digits/image/0", "digits/image/1"]
    img = acc.Images("digits/image/1")[0]
    assert (img.width, img.height) == (8, 8) and img.encoded_image_string.startswith(b"\x89PNG")
    clip = acc.Audio("tone/audio")[0]
    with wave.open(io.BytesIO(clip.encoded_audio_string)) as w:
        assert (w.getframerate(), w.getnframes(), w.getsampwidth()) == (8000, 400, 2)
    assert acc.Tensors("note")[0].tensor_proto.string_val == [b"softmax regression on **digits**"]


def test_fixed_seed_linear_regression_matches_numpy_gradient_descent_exactly(digits):
    X_data, y_data = digits["x_train"][:200], digits["x_train"][:200, 20:21] * 3.0 - 1.0
    rng = np.random.default_rng(7)
    w0 = rng.normal(size=(64, 1)).astype(np.float32) * 0.1
    X = tf.placeholder(tf.float32, [None, 64])
    Y = tf.placeholder(tf.float32, [None, 1])
    W = tf.Variable(w0, name="weight")
    b = tf.Variable(tf.zeros([1]), name="bias")
    pred = tf.add(tf.matmul(X, W), b)
    cost = tf.reduce_sum(tf.pow(pred - Y, 2)) / (2 * 200)
    optimizer = tf.train.GradientDescentOptimizer(0.1).minimize(cost)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(100):
            sess.run(optimizer, {X: X_data, Y: y_data})
        w_tf, b_tf, c_tf = sess.run([W, b, cost], {X: X_data, Y: y_data})
    w, bb = w0.astype(np.float64), np.zeros(1)
    for _ in range(100):
        err = X_data @ w + bb - y_data
        w, bb = w - 0.1 * X_data.T @ err / 200, bb - 0.1 * err.sum(0) / 200
    np.testing.assert_allclose(w_tf, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b_tf, bb, rtol=1e-4, atol=1e-5)
    assert c_tf < 0.1


def test_fixed_seed_logistic_regression_matches_numpy_and_reaches_92_percent(digits):
    x = tf.placeholder(tf.float32, [None, 64])
    y = tf.placeholder(tf.float32, [None, 10])
    W = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    pred = tf.nn.softmax(tf.matmul(x, W) + b)
    cost = tf.reduce_mean(-tf.reduce_sum(y * tf.log(pred), reduction_indices=1))
    optimizer = tf.train.GradientDescentOptimizer(0.5).minimize(cost)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(100):
            sess.run(optimizer, {x: digits["x_train"], y: digits["y_train_1h"]})
        w_tf, acc = sess.run([W, tf.reduce_mean(tf.cast(tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1)), "float"))],
                             {x: digits["x_test"], y: digits["y_test_1h"]})
    xs, ys = digits["x_train"].astype(np.float64), digits["y_train_1h"].astype(np.float64)
    w, bb = np.zeros((64, 10)), np.zeros(10)
    for _ in range(100):
        z = xs @ w + bb
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = (p - ys) / len(xs)
        w, bb = w - 0.5 * xs.T @ g, bb - 0.5 * g.sum(0)
    np.testing.assert_allclose(w_tf, w, rtol=1e-3, atol=1e-5)
    assert acc >= 0.92, acc


@pytest.mark.slow
def test_queue_input_pipeline_with_slice_input_producer_and_shuffle_batch(digits):
    """The pre-tf.data input pipeline: producer and batcher queues filled by QueueRunner threads,
    trained until the epochs run out (OutOfRangeError), as TF1 tutorials wrote it."""
    tf.set_random_seed(9)
    image, label = tf.train.slice_input_producer([tf.constant(digits["x_train"]), tf.constant(digits["y_train"])],
                                                 num_epochs=10, shuffle=True)
    images, labels = tf.train.shuffle_batch([image, label], batch_size=100, capacity=600, min_after_dequeue=300)
    W = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    logits = tf.matmul(images, W) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    x_test = tf.placeholder(tf.float32, [None, 64])
    predict = tf.argmax(tf.matmul(x_test, W) + b, 1)
    sess = tf.Session()
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    steps = 0
    try:
        while not coord.should_stop():
            sess.run(train_op)
            steps += 1
    except tf.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
        coord.join(threads)
    assert steps == 140  # 10 epochs of 1400 examples in batches of 100
    assert (sess.run(predict, {x_test: digits["x_test"]}) == digits["y_test"]).mean() >= 0.93
