"""``tf.contrib`` as TensorFlow 1.x scripts use it: ``contrib.rnn``, ``contrib.layers``, ``contrib.lookup``,
``contrib.framework``, ``contrib.metrics``, ``contrib.predictor``, ``contrib.seq2seq``, ``contrib.slim``, ``contrib.crf`` and ``contrib.training.HParams``."""

from trainer.contrib import crf, framework, layers, lookup, metrics, predictor, rnn, seq2seq, slim, training

__all__ = ["crf", "framework", "layers", "lookup", "metrics", "predictor", "rnn", "seq2seq", "slim", "training"]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib", name, globals())
