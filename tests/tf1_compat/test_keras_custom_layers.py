"""User subclasses of ``tf.keras.layers.Layer`` and the backend (K) functions they are written with."""

from __future__ import annotations

import numpy as np

import trainer as tf

K = tf.keras.backend
layers = tf.keras.layers


class Scale(layers.Layer):
    """y = x * w + b per feature, with an L2 penalty on w added through add_loss."""

    def __init__(self, penalty: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.penalty = penalty

    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")
        self.b = self.add_weight("b", (input_shape[-1],), initializer="zeros", trainable=False)
        super().build(input_shape)

    def call(self, inputs):
        self.add_loss(self.penalty * K.sum(K.square(self.w)))
        return inputs * self.w + self.b

    def compute_output_shape(self, input_shape):
        return input_shape


class Sampling(layers.Layer):
    """A VAE's reparameterization: mean + exp(log_var / 2) * eps, eps ~ N(0, 1) of a dynamic batch size."""

    def call(self, inputs):
        mean, log_var = inputs
        eps = K.random_normal(shape=(K.shape(mean)[0], K.int_shape(mean)[1]))
        return mean + K.exp(0.5 * log_var) * eps


def test_a_custom_layer_trains_and_reports_weights_losses_and_config(digits, tmp_path):
    tf.set_random_seed(0)
    inp = tf.keras.Input(shape=(64,))
    scaled = Scale(penalty=0.01, name="scale")(inp)
    model = tf.keras.Model(inp, layers.Dense(10, activation="softmax")(scaled))
    scale = model.get_layer("scale")
    assert [w.name for w in scale.weights] == ["scale/w:0", "scale/b:0"]
    assert len(scale.trainable_weights) == 1 and len(scale.non_trainable_weights) == 1 and len(model.losses) == 1
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    model.fit(digits["x_train"], digits["y_train"], epochs=5, verbose=0)
    assert model.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1] > 0.85
    assert not np.allclose(K.get_value(scale.w), 1.0) and np.allclose(K.get_value(scale.b), 0.0)
    model.save(str(tmp_path / "m"))
    restored = tf.keras.models.load_model(str(tmp_path / "m"), custom_objects={"Scale": Scale})
    assert restored.get_layer("scale").penalty == 0.01
    np.testing.assert_allclose(restored.predict(digits["x_test"]), model.predict(digits["x_test"]), rtol=1e-6)


def test_a_sampling_layer_draws_per_example_noise():
    tf.set_random_seed(0)
    mean, log_var = tf.keras.Input(shape=(2,)), tf.keras.Input(shape=(2,))
    model = tf.keras.Model([mean, log_var], Sampling()([mean, log_var]))
    draws = model.predict([np.zeros((2000, 2)), np.log(np.full((2000, 2), 4.0))])
    assert draws.shape == (2000, 2) and abs(draws.mean()) < 0.15 and abs(draws.std() - 2.0) < 0.15


def test_backend_functions_values_and_the_learning_phase():
    x = K.placeholder(shape=(None, 3))
    v = K.variable(np.ones((3,)), name="v")
    y = layers.Dropout(0.5)(x * v)
    f = K.function([x, K.learning_phase()], [y, K.sum(x, axis=1)], updates=[K.update_add(v, np.ones(3))])
    out, sums = f([np.ones((2, 3)), False])
    np.testing.assert_array_equal(out, np.ones((2, 3)))
    np.testing.assert_array_equal(sums, [3.0, 3.0])
    np.testing.assert_array_equal(K.get_value(v), [2.0, 2.0, 2.0])  # the update ran
    K.set_value(v, [5.0, 6.0, 7.0])
    assert K.batch_get_value([v])[0].tolist() == [5.0, 6.0, 7.0]
    assert K.int_shape(x) == (None, 3) and K.ndim(x) == 2 and K.floatx() == "float32" and K.epsilon() == 1e-7
    assert K.eval(K.categorical_crossentropy(K.constant([[0.0, 1.0]]), K.constant([[0.5, 0.5]])))[0] == \
        np.float32(np.log(2.0))
    assert K.get_session() is K.get_session()


class MinimalRNNCell(layers.Layer):
    """The cell of Keras' RNN documentation: state_size an int, call(inputs, states)."""

    def __init__(self, units, **kwargs):
        self.units = units
        self.state_size = units
        super().__init__(**kwargs)

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="uniform", name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), initializer="uniform",
                                                name="recurrent_kernel")
        self.built = True

    def call(self, inputs, states):
        output = K.dot(inputs, self.kernel) + K.dot(states[0], self.recurrent_kernel)
        return output, [output]


def test_a_user_cell_runs_in_rnn_alone_and_stacked():
    x = tf.keras.Input((5, 4))
    cell = MinimalRNNCell(3)
    last = layers.RNN(cell)(x)
    stacked = layers.RNN([MinimalRNNCell(3), MinimalRNNCell(2)], return_sequences=True)(x)
    model = tf.keras.Model(x, [last, stacked])
    data = np.random.default_rng(0).normal(size=(2, 5, 4)).astype(np.float32)
    got_last, got_stacked = model.predict(data)
    kernel, recurrent = cell.get_weights()
    h = np.zeros((2, 3), np.float32)
    for t in range(5):
        h = data[:, t] @ kernel + h @ recurrent
    np.testing.assert_allclose(got_last, h, rtol=1e-5, atol=1e-6)
    assert got_stacked.shape == (2, 5, 2)


def test_a_registered_layer_loads_without_custom_objects(tmp_path):
    @tf.keras.utils.register_keras_serializable(package="Tests")
    class Shift(layers.Layer):
        def __init__(self, amount: float = 1.0, **kwargs):
            super().__init__(**kwargs)
            self.amount = amount

        def call(self, inputs):
            return inputs + self.amount

    assert tf.keras.utils.get_registered_name(Shift) == "Tests>Shift"
    assert tf.keras.utils.get_registered_object("Tests>Shift") is Shift
    inp = tf.keras.Input(shape=(2,))
    model = tf.keras.Model(inp, Shift(3.0)(inp))
    model.save(str(tmp_path / "m"))
    restored = tf.keras.models.load_model(str(tmp_path / "m"))
    np.testing.assert_array_equal(restored.predict(np.zeros((1, 2))), [[3.0, 3.0]])
    tf.keras.utils.get_custom_objects().clear()


def _ctc_nll(probabilities, label, blank):
    """The CTC forward algorithm in NumPy: -log p(label | per-frame probabilities)."""
    extended = [blank]
    for symbol in label:
        extended += [symbol, blank]
    steps, states = len(probabilities), len(extended)
    alpha = np.zeros((steps, states))
    alpha[0, 0], alpha[0, 1] = probabilities[0, blank], probabilities[0, extended[1]]
    for t in range(1, steps):
        for s in range(states):
            total = alpha[t - 1, s] + (alpha[t - 1, s - 1] if s > 0 else 0.0)
            if s > 1 and extended[s] != blank and extended[s] != extended[s - 2]:
                total += alpha[t - 1, s - 2]
            alpha[t, s] = total * probabilities[t, extended[s]]
    return -np.log(alpha[-1, -1] + alpha[-1, -2])


def test_ctc_batch_cost_and_greedy_decoding_as_keras_ocr_uses_them():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 6, 4)).astype(np.float32)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    labels = np.array([[1, 2, 0], [0, 0, 0]], np.float32)
    cost = K.ctc_batch_cost(tf.constant(labels), tf.constant(probabilities), tf.constant([[6], [5]]),
                            tf.constant([[2], [1]]))
    decoded, _ = K.ctc_decode(tf.constant(probabilities), tf.constant([6, 5]))
    with tf.Session() as sess:
        got_cost, got_decoded = sess.run([cost, decoded[0]])
    want = [_ctc_nll(probabilities[0], [1, 2], 3), _ctc_nll(probabilities[1, :5], [0], 3)]
    np.testing.assert_allclose(got_cost[:, 0], want, rtol=1e-4)
    assert got_decoded.tolist() == [[2, 1, 1], [0, 1, 1]]  # argmax per frame, repeats merged, blanks (3) dropped
