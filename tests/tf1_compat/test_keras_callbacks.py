"""Keras callbacks during fit: History's values, EarlyStopping stopping, ModelCheckpoint writing,
learning-rate schedules, CSVLogger, LambdaCallback, TerminateOnNaN and TensorBoard scalars."""

from __future__ import annotations

import csv
import os

import numpy as np

import trainer as tf

layers = tf.keras.layers
callbacks = tf.keras.callbacks
K = tf.keras.backend


def _model(lr: float = 0.01) -> tf.keras.Sequential:
    tf.set_random_seed(0)
    np.random.seed(0)
    model = tf.keras.Sequential([layers.Dense(32, activation="relu", input_shape=(64,)),
                                 layers.Dense(10, activation="softmax")])
    model.compile(tf.keras.optimizers.Adam(lr), "sparse_categorical_crossentropy", ["accuracy"])
    return model


def test_early_stopping_stops_once_the_monitored_value_stalls(digits):
    model = _model()
    seen = []
    stop = callbacks.EarlyStopping(monitor="loss", min_delta=10.0, patience=2)
    history = model.fit(digits["x_train"], digits["y_train"], epochs=50, verbose=0,
                        callbacks=[stop, callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e))])
    # min_delta is never met, so epochs 1 and 2 are the two without improvement
    assert seen == [0, 1, 2] and len(history.history["loss"]) == 3 and stop.stopped_epoch == 2


def test_early_stopping_restores_the_best_weights(digits):
    model = _model(lr=0.05)
    stop = callbacks.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True)
    history = model.fit(digits["x_train"], digits["y_train"], epochs=40, verbose=0, callbacks=[stop],
                        validation_data=(digits["x_test"], digits["y_test"]))
    assert len(history.history["val_loss"]) < 40
    best = min(history.history["val_loss"])
    assert np.isclose(model.evaluate(digits["x_test"], digits["y_test"], verbose=0)[0], best, rtol=1e-5)


def test_model_checkpoint_writes_per_epoch_and_only_the_best(digits, tmp_path):
    model = _model()
    every = str(tmp_path / "weights.{epoch:02d}.npz")
    best = str(tmp_path / "best")
    checkpoints = [callbacks.ModelCheckpoint(every, save_weights_only=True),
                   callbacks.ModelCheckpoint(best, monitor="val_acc", save_best_only=True)]
    history = model.fit(digits["x_train"], digits["y_train"], epochs=3, verbose=0, callbacks=checkpoints,
                        validation_data=(digits["x_test"], digits["y_test"]))
    assert sorted(os.listdir(tmp_path)) == ["best", "weights.01.npz", "weights.02.npz", "weights.03.npz"]
    restored = tf.keras.models.load_model(best)
    accuracy = restored.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1]
    assert np.isclose(accuracy, max(history.history["val_acc"]))
    model.load_weights(every.format(epoch=3))
    assert np.isclose(model.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1],
                      history.history["val_acc"][-1])


def test_learning_rate_schedules_change_the_optimizer_rate(digits):
    model = _model()
    rates = []
    schedule = callbacks.LearningRateScheduler(lambda epoch: 0.1 / (epoch + 1))
    record = callbacks.LambdaCallback(on_epoch_end=lambda e, logs: rates.append(K.get_value(model.optimizer.lr)))
    history = model.fit(digits["x_train"], digits["y_train"], epochs=3, verbose=0, callbacks=[schedule, record])
    np.testing.assert_allclose(rates, [0.1, 0.05, 0.1 / 3], rtol=1e-6)
    np.testing.assert_allclose(history.history["lr"], rates, rtol=1e-6)
    plateau = callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=100.0)
    model.fit(digits["x_train"], digits["y_train"], epochs=2, verbose=0, callbacks=[plateau])
    np.testing.assert_allclose(K.get_value(model.optimizer.lr), 0.1 / 3 / 2, rtol=1e-6)


def test_csv_logger_terminate_on_nan_and_tensorboard(digits, tmp_path):
    model = _model()
    model.fit(digits["x_train"], digits["y_train"], epochs=2, verbose=0,
              callbacks=[callbacks.CSVLogger(str(tmp_path / "log.csv")), callbacks.TensorBoard(str(tmp_path / "tb"))])
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1"] and set(rows[0]) == {"epoch", "acc", "loss"}
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "tb"))
    broken = digits["x_train"].copy()
    broken[:] = np.nan
    history = model.fit(broken, digits["y_train"], epochs=5, verbose=0, callbacks=[callbacks.TerminateOnNaN()])
    assert len(history.history["loss"]) == 1 and np.isnan(history.history["loss"][0])


def test_verbose_prints_one_line_per_epoch(digits, capsys):
    model = _model()
    model.fit(digits["x_train"][:100], digits["y_train"][:100], epochs=2, verbose=2)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("Epoch 1/2 - loss: ") and "acc: " in lines[1]


def test_a_learning_rate_schedule_sets_the_rate_per_step():
    schedule = tf.keras.optimizers.schedules.PiecewiseConstantDecay([3], [0.1, 0.0])
    model = tf.keras.Sequential([layers.Dense(1, input_shape=(2,))])
    model.compile(tf.keras.optimizers.SGD(schedule), "mse")
    x, y = np.ones((4, 2), np.float32), np.zeros((4, 1), np.float32)
    model.fit(x, y, batch_size=4, epochs=3, verbose=0)
    after_three = model.get_weights()
    model.fit(x, y, batch_size=4, epochs=3, verbose=0)  # steps 3..5: rate 0
    for a, b in zip(after_three, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    config = tf.keras.optimizers.serialize(model.optimizer)
    rebuilt = tf.keras.optimizers.deserialize(config)
    assert isinstance(rebuilt.schedule, tf.keras.optimizers.schedules.PiecewiseConstantDecay)
