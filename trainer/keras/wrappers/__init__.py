"""``tf.keras.wrappers``: scikit-learn's estimator interface over Keras models."""

from trainer.keras.wrappers import scikit_learn

__all__ = ["scikit_learn"]
