"""The Keras model API in graph mode on real data (scikit-learn's digits): Sequential, functional and
subclassed models trained with compile/fit, evaluated, predicted, and rebuilt from their configs."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import trainer as tf

layers = tf.keras.layers


def _seed(seed: int = 0) -> None:
    tf.set_random_seed(seed)
    np.random.seed(seed)


def _mlp() -> tf.keras.Sequential:
    return tf.keras.Sequential([layers.Dense(64, activation="relu", input_shape=(64,)), layers.Dropout(0.2),
                                layers.Dense(10, activation="softmax")])


def test_a_sequential_mlp_learns_digits_with_fit_and_evaluate(digits):
    _seed()
    model = _mlp()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(digits["x_train"], digits["y_train"], batch_size=32, epochs=20, verbose=0,
                        validation_data=(digits["x_test"], digits["y_test"]))
    assert set(history.history) == {"loss", "acc", "val_loss", "val_acc"}  # TF 1.x names it "acc"
    assert len(history.history["loss"]) == 20 and history.epoch == list(range(20))
    assert history.history["loss"][-1] < history.history["loss"][0] / 4
    loss, accuracy = model.evaluate(digits["x_test"], digits["y_test"], verbose=0)
    assert accuracy >= 0.95, accuracy
    assert np.isclose(accuracy, history.history["val_acc"][-1])
    probabilities = model.predict(digits["x_test"], batch_size=100)
    assert probabilities.shape == (len(digits["x_test"]), 10)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, rtol=1e-5)
    assert np.isclose((probabilities.argmax(1) == digits["y_test"]).mean(), accuracy)


def test_one_hot_targets_with_a_keras_optimizer_object_and_the_acc_alias(digits):
    _seed()
    model = tf.keras.Sequential()
    model.add(layers.Dense(32, activation="relu", input_dim=64))
    model.add(layers.Dense(10, activation="softmax"))
    model.compile(tf.keras.optimizers.SGD(lr=0.1, momentum=0.9, nesterov=True), "categorical_crossentropy", ["acc"])
    model.fit(digits["x_train"], tf.keras.utils.to_categorical(digits["y_train"], 10), epochs=10, verbose=0)
    assert model.metrics_names == ["loss", "acc"]
    assert model.evaluate(digits["x_test"], digits["y_test_1h"], verbose=0)[1] >= 0.9


def test_a_functional_cnn_with_batch_norm_learns_digits_and_updates_its_moving_statistics(digits):
    _seed()
    inp = tf.keras.Input(shape=(8, 8, 1))
    h = layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    h = layers.BatchNormalization()(h)
    h = layers.MaxPooling2D()(h)
    h = layers.Dropout(0.25)(h)
    out = layers.Dense(10, activation="softmax")(layers.Flatten()(h))
    model = tf.keras.Model(inp, out)
    model.compile(tf.keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", ["accuracy"])
    bn = model.layers[2]
    before = bn.get_weights()[2]
    model.fit(digits["x_train"].reshape(-1, 8, 8, 1), digits["y_train"], batch_size=32, epochs=8, verbose=0)
    assert not np.allclose(bn.get_weights()[2], before)  # moving_mean moved during fit
    accuracy = model.evaluate(digits["x_test"].reshape(-1, 8, 8, 1), digits["y_test"], verbose=0)[1]
    assert accuracy >= 0.9, accuracy


def test_a_subclassed_model_trains_on_a_dataset_with_steps_per_epoch(digits):
    _seed()

    class MLP(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = layers.Dense(32, activation="relu")
            self.out = layers.Dense(10)

        def call(self, inputs):
            return self.out(self.hidden(inputs))

    model = MLP()
    model.compile(tf.train.AdamOptimizer(0.01),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])
    dataset = tf.data.Dataset.from_tensor_slices((digits["x_train"], digits["y_train"])).shuffle(1400, seed=0)
    history = model.fit(dataset.batch(64).repeat(), steps_per_epoch=22, epochs=8, verbose=0)
    assert len(history.history["loss"]) == 8
    assert len(model.trainable_weights) == 4 and model.layers == [model.hidden, model.out]
    accuracy = model.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1]
    assert accuracy >= 0.9, accuracy


def test_batch_methods_weights_and_a_sequence(digits):
    _seed()
    model = _mlp()
    model.compile("rmsprop", "sparse_categorical_crossentropy", ["accuracy"])
    x, y = digits["x_train"][:64], digits["y_train"][:64]
    first = model.test_on_batch(x, y)
    for _ in range(20):
        model.train_on_batch(x, y)
    assert model.test_on_batch(x, y)[0] < first[0]
    assert model.predict_on_batch(x).shape == (64, 10)

    class Batches(tf.keras.utils.Sequence):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return digits["x_train"][i * 64:(i + 1) * 64], digits["y_train"][i * 64:(i + 1) * 64]

    model.fit(Batches(), epochs=2, verbose=0)
    weights = model.get_weights()
    assert [w.shape for w in weights] == [(64, 64), (64,), (64, 10), (10,)]
    twin = _mlp()
    twin.set_weights(weights)
    np.testing.assert_allclose(twin.predict(digits["x_test"]), model.predict(digits["x_test"]), rtol=1e-6)


def test_multi_input_multi_output_functional_model_with_merge_layers(digits):
    _seed()
    left, right = tf.keras.Input(shape=(32,), name="left"), tf.keras.Input(shape=(32,), name="right")
    merged = layers.concatenate([layers.Dense(16, activation="relu")(left),
                                 layers.Dense(16, activation="relu")(right)])
    summed = layers.add([layers.Dense(8)(merged), layers.Dense(8)(merged)])
    digit = layers.Dense(10, activation="softmax", name="digit")(summed)
    parity = layers.Dense(1, activation="sigmoid", name="parity")(summed)
    model = tf.keras.Model([left, right], [digit, parity])
    model.compile("adam", {"digit": "sparse_categorical_crossentropy", "parity": "binary_crossentropy"},
                  metrics=["accuracy"], loss_weights=[1.0, 0.5])
    x = digits["x_train"]
    feeds = {"left": x[:, :32], "right": x[:, 32:]}
    model.fit(feeds, [digits["y_train"], digits["y_train"] % 2], epochs=12, verbose=0)
    assert model.metrics_names == ["loss", "digit_loss", "parity_loss", "digit_acc", "parity_acc"]
    results = model.evaluate([digits["x_test"][:, :32], digits["x_test"][:, 32:]],
                             [digits["y_test"], digits["y_test"] % 2], verbose=0)
    assert results[3] > 0.85 and results[4] > 0.8, results


def test_json_and_config_round_trips_rebuild_the_architecture(digits):
    _seed()
    inp = tf.keras.Input(shape=(8, 8))
    h = layers.Bidirectional(layers.LSTM(8, return_sequences=True))(inp)
    h = layers.TimeDistributed(layers.Dense(4))(h)
    out = layers.Dense(10, activation="softmax")(layers.GlobalAveragePooling1D()(h))
    model = tf.keras.Model(inp, out)
    rebuilt = tf.keras.models.model_from_json(model.to_json())
    assert [type(l).__name__ for l in rebuilt.layers] == [type(l).__name__ for l in model.layers]
    rebuilt.set_weights(model.get_weights())
    x = digits["x_test"][:20].reshape(-1, 8, 8)
    np.testing.assert_allclose(rebuilt.predict(x), model.predict(x), rtol=1e-5, atol=1e-6)
    sequential = _mlp()
    from_yaml = tf.keras.models.model_from_yaml(sequential.to_yaml())
    assert [type(l).__name__ for l in from_yaml.layers] == ["Dense", "Dropout", "Dense"]
    clone = tf.keras.Sequential.from_config(sequential.get_config())
    assert clone.get_config()["layers"][0]["config"]["batch_input_shape"] == [None, 64]
    assert [w.shape for w in clone.get_weights()] == [w.shape for w in sequential.get_weights()]


def test_summary_prints_layers_and_parameter_counts():
    model = _mlp()
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        model.summary()
    lines = text.getvalue()
    assert "dense (Dense)" in lines and "(None, 64)" in lines and "4160" in lines
    assert "Total params: 4,810" in lines and "Trainable params: 4,810" in lines


def test_an_embedding_with_mask_zero_feeds_a_masked_gru():
    _seed()
    padded = np.array([[3, 5, 0, 0], [2, 7, 0, 0]], np.int32)
    inp = tf.keras.Input(shape=(4,), dtype="int32")
    masked = tf.keras.Model(inp, layers.GRU(2)(layers.Embedding(10, 3, mask_zero=True)(inp)))
    short = tf.keras.Input(shape=(2,), dtype="int32")
    unpadded = tf.keras.Model(short, layers.GRU(2)(layers.Embedding(10, 3)(short)))
    unpadded.set_weights(masked.get_weights())
    # masked steps keep the state: the output is the one of the sequence without its padding
    np.testing.assert_allclose(masked.predict(padded), unpadded.predict(padded[:, :2]), rtol=1e-5, atol=1e-6)
    assert not np.allclose(masked.predict(padded), masked.predict(np.array([[3, 5, 1, 1], [2, 7, 1, 1]])))


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad", "adadelta", "adamax", "nadam", "ftrl",
                                       tf.keras.optimizers.Adam(amsgrad=True)])
def test_every_keras_optimizer_lowers_the_loss(digits, optimizer):
    _seed()
    model = tf.keras.Sequential([layers.Dense(10, activation="softmax", input_shape=(64,))])
    model.compile(optimizer, "sparse_categorical_crossentropy")
    x, y = digits["x_train"][:256], digits["y_train"][:256]
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=3, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before


def test_a_model_called_on_other_inputs_still_fits(digits):
    """Calling a model with BatchNormalization on another tensor adds updates that depend on that tensor;
    fit runs only the updates of the model's own calls."""
    _seed()
    inp = tf.keras.Input(shape=(64,))
    model = tf.keras.Model(inp, layers.Dense(10, activation="softmax")(layers.BatchNormalization()(inp)))
    other = tf.placeholder(tf.float32, [None, 64])
    model(other)  # graph code reusing the model
    model.compile("adam", "sparse_categorical_crossentropy")
    moving_mean = model.layers[1].moving_mean
    model.fit(digits["x_train"], digits["y_train"], epochs=1, verbose=0)
    assert not np.allclose(tf.keras.backend.get_value(moving_mean), 0.0)


def test_a_frozen_nested_model_keeps_its_weights_and_statistics(digits):
    _seed()
    base = tf.keras.Sequential([layers.Dense(16, activation="relu", input_shape=(64,)), layers.BatchNormalization()],
                               name="base")
    model = tf.keras.Sequential([base, layers.Dense(10, activation="softmax")])
    assert model.inputs and model.output_shape == (None, 10)  # built at once from the nested model's input
    base.trainable = False
    model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    assert len(model.trainable_weights) == 2 and len(model.non_trainable_weights) == 6
    frozen = base.get_weights()
    model.fit(digits["x_train"], digits["y_train"], epochs=1, verbose=0)
    for before, after in zip(frozen, base.get_weights()):
        np.testing.assert_array_equal(before, after)  # BatchNormalization's moving statistics too
    base.trainable = True
    model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])  # recompile to take effect, as Keras
    model.fit(digits["x_train"], digits["y_train"], epochs=1, verbose=0)
    assert not any(np.array_equal(b, a) for b, a in zip(frozen, base.get_weights()))


def test_datasets_for_validation_evaluation_and_prediction(digits):
    _seed()
    model = _mlp()
    model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    train = tf.data.Dataset.from_tensor_slices((digits["x_train"], digits["y_train"])).batch(64)
    test = tf.data.Dataset.from_tensor_slices((digits["x_test"], digits["y_test"])).batch(100)
    history = model.fit(train, epochs=3, validation_data=test, validation_steps=2, verbose=0)
    assert len(history.history["val_acc"]) == 3  # the validation dataset restarts each epoch
    from_arrays = model.evaluate(digits["x_test"], digits["y_test"], verbose=0)
    np.testing.assert_allclose(model.evaluate(test, verbose=0), from_arrays, rtol=1e-5)
    images = tf.data.Dataset.from_tensor_slices(digits["x_test"]).batch(100)
    np.testing.assert_allclose(model.predict(images), model.predict(digits["x_test"]), rtol=1e-6)


def test_sample_and_class_weights_weight_the_loss(digits):
    _seed()
    model = _mlp()
    model.compile("sgd", "sparse_categorical_crossentropy")
    x, y = digits["x_test"][:100], digits["y_test"][:100]
    weights = np.where(np.arange(100) < 50, 2.0, 0.0).astype(np.float32)
    probabilities = model.predict(x)
    per_sample = -np.log(np.clip(probabilities[np.arange(100), y], 1e-7, 1 - 1e-7))
    want = np.mean(per_sample * weights) / np.mean(weights != 0)  # Keras: divided by the non-zero fraction
    assert np.isclose(model.evaluate(x, y, sample_weight=weights, batch_size=100, verbose=0), want, rtol=1e-5)
    # class_weight: errors on the favoured class cost more, so it is predicted more often
    counts = []
    for favoured in (None, {c: (20.0 if c == 3 else 1.0) for c in range(10)}):
        _seed()
        model = _mlp()
        model.compile("adam", "sparse_categorical_crossentropy")
        model.fit(digits["x_train"], digits["y_train"], epochs=3, class_weight=favoured, verbose=0)
        counts.append((model.predict(digits["x_test"]).argmax(1) == 3).sum())
    assert counts[1] > counts[0], counts
