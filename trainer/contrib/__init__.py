"""``tf.contrib`` as TensorFlow 1.x scripts use it: ``contrib.rnn``, ``contrib.layers``, ``contrib.lookup``,
``contrib.metrics``, ``contrib.seq2seq``'s loss and ``contrib.slim``."""

from trainer.contrib import layers, lookup, metrics, rnn, seq2seq, slim

__all__ = ["layers", "lookup", "metrics", "rnn", "seq2seq", "slim"]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib", name, globals())
