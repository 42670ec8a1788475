"""``tf.contrib`` as TensorFlow 1.x scripts use it: ``contrib.rnn``, ``contrib.layers`` and ``contrib.lookup``."""

from trainer.contrib import layers, lookup, rnn

__all__ = ["layers", "lookup", "rnn"]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib", name, globals())
