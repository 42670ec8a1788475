"""Keras layers inside classic TF1 graph code: their variables are ordinary graph variables, trained by
a tf.train optimizer, saved and restored by tf.train.Saver, frozen and run on the edge runtime."""

from __future__ import annotations

import numpy as np

import trainer as tf


def _mlp(x, dropout: float = 0.0):
    h = tf.keras.layers.Dense(32, activation="relu")(x)
    if dropout:
        h = tf.keras.layers.Dropout(dropout)(h)
    return tf.keras.layers.Dense(10)(h)


def test_keras_layers_train_in_a_session_and_restore_with_saver(digits, tmp_path):
    tf.set_random_seed(0)
    x = tf.placeholder(tf.float32, [None, 64])
    y = tf.placeholder(tf.int64, [None])
    logits = _mlp(x)
    loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    assert [v.name for v in tf.trainable_variables()] == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0",
                                                          "dense_1/bias:0"]
    saver = tf.train.Saver()
    xtr, ytr = digits["x_train"], digits["y_train"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(300):
            i = (step * 64) % (len(xtr) - 64)
            sess.run(train, {x: xtr[i:i + 64], y: ytr[i:i + 64]})
        trained = sess.run(accuracy, {x: digits["x_test"], y: digits["y_test"]})
        path = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert trained >= 0.9, trained
    with tf.Session() as sess:
        saver.restore(sess, path)
        assert sess.run(accuracy, {x: digits["x_test"], y: digits["y_test"]}) == trained


def test_dropout_follows_the_learning_phase():
    tf.set_random_seed(0)
    x = tf.placeholder(tf.float32, [None, 100])
    y = tf.keras.layers.Dropout(0.5)(x)
    ones = np.ones((4, 100), np.float32)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {x: ones}), ones)
        dropped = sess.run(y, {x: ones, tf.keras.backend.learning_phase(): True})
    assert 0.2 < (dropped == 0).mean() < 0.8 and set(np.unique(dropped)) <= {0.0, 2.0}


def test_a_keras_built_graph_freezes_and_runs_on_the_edge_runtime(digits, tmp_path):
    import edge_runtime
    from exporter.freeze import export_trained

    tf.set_random_seed(0)
    inp = tf.keras.Input(shape=(8, 8, 1), name="pixels")
    h = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    h = tf.keras.layers.BatchNormalization()(h)
    h = tf.keras.layers.MaxPooling2D()(h)
    h = tf.keras.layers.Dropout(0.25)(h)
    out = tf.keras.layers.Dense(10, activation="softmax")(tf.keras.layers.Flatten()(h))
    model = tf.keras.Model(inp, out)
    model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    images = digits["x_train"].reshape(-1, 8, 8, 1)
    model.fit(images, digits["y_train"], batch_size=64, epochs=1, verbose=0)
    test = digits["x_test"].reshape(-1, 8, 8, 1)
    want = model.predict(test)
    export_trained(tf.keras.backend.get_session(), str(tmp_path / "keras.flow"), {"pixels": model.inputs[0]},
                   {"probabilities": model.outputs[0]})
    got = edge_runtime.load(str(tmp_path / "keras.flow")).run({"pixels": test})["probabilities"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_fit_runs_in_the_users_session_and_keeps_its_variables(digits):
    tf.set_random_seed(0)
    counter = tf.Variable(7, name="counter")
    model = tf.keras.Sequential([tf.keras.layers.Dense(10, activation="softmax", input_shape=(64,))])
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(counter.assign(11))
        assert tf.keras.backend.get_session() is sess
        model.fit(digits["x_train"], digits["y_train"], epochs=3, verbose=0)
        assert sess.run(counter) == 11  # Keras initializes only what holds no value yet
        assert model.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1] > 0.85
    other = tf.Session()
    tf.keras.backend.set_session(other)
    assert tf.keras.backend.get_session() is other
    other.close()
    tf.keras.backend.set_session(None)


def test_flowstack_export_freezes_a_keras_checkpoint(digits, tmp_path, capsys):
    import edge_runtime
    from flowstack_cli.main import main

    tf.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(64,)),
                                 tf.keras.layers.Dropout(0.2), tf.keras.layers.BatchNormalization(),
                                 tf.keras.layers.Dense(10, activation="softmax", name="probs")])
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(digits["x_train"], digits["y_train"], epochs=1, verbose=0)
    tf.train.Saver().save(tf.keras.backend.get_session(), str(tmp_path / "model.ckpt"))
    flow = str(tmp_path / "digits.flow")
    assert main(["export", str(tmp_path), "--inputs", f"pixels={model.inputs[0].name}",
                 "--outputs", f"probs={model.outputs[0].name}", "-o", flow]) == 0
    got = edge_runtime.load(flow).run({"pixels": digits["x_test"]})["probs"]
    np.testing.assert_allclose(got, model.predict(digits["x_test"]), rtol=1e-4, atol=1e-6)
