"""``tf.keras.wrappers.scikit_learn``: Keras models inside scikit-learn's cross-validation."""

from __future__ import annotations

import numpy as np

import trainer as tf


def _build(hidden: int = 16):
    model = tf.keras.Sequential([tf.keras.layers.Dense(hidden, activation="relu", input_shape=(64,)),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    return model


def test_a_keras_classifier_in_cross_validation(digits):
    from sklearn.model_selection import KFold

    tf.set_random_seed(0)
    np.random.seed(0)
    classifier = tf.keras.wrappers.scikit_learn.KerasClassifier(_build, hidden=32, epochs=10, batch_size=32)
    params = classifier.get_params()
    assert params["hidden"] == 32
    x, y = digits["x_train"], digits["y_train"]
    scores = []
    for train, test in KFold(3).split(x):
        fold = type(classifier)(**params)  # what sklearn.clone does
        fold.fit(x[train], y[train])
        scores.append(fold.score(x[test], y[test]))
    assert min(scores) >= 0.85, scores
    labels = np.array(list("abcdefghij"))[digits["y_train"]]  # any labels: classes_ maps them
    classifier.fit(digits["x_train"], labels)
    predicted = classifier.predict(digits["x_test"])
    assert (predicted == np.array(list("abcdefghij"))[digits["y_test"]]).mean() >= 0.9


def test_a_keras_regressor_scores_minus_its_loss(digits):
    tf.set_random_seed(0)

    def build():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(64,))])
        model.compile(tf.keras.optimizers.Adam(0.05), "mse")
        return model

    regressor = tf.keras.wrappers.scikit_learn.KerasRegressor(build, epochs=20, verbose=0)
    target = digits["x_train"].sum(1)
    regressor.fit(digits["x_train"], target)
    assert regressor.predict(digits["x_test"]).shape == (len(digits["x_test"]),)
    assert regressor.score(digits["x_test"], digits["x_test"].sum(1)) > -1.0
