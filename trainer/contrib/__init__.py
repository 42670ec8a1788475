"""``tf.contrib`` as TensorFlow 1.x scripts use it: ``contrib.rnn``, ``contrib.layers``, ``contrib.lookup``,
``contrib.framework``, ``contrib.metrics``, ``contrib.predictor``, ``contrib.seq2seq``'s loss, ``contrib.slim`` and ``contrib.crf``."""

from trainer.contrib import crf, framework, layers, lookup, metrics, predictor, rnn, seq2seq, slim

__all__ = ["crf", "framework", "layers", "lookup", "metrics", "predictor", "rnn", "seq2seq", "slim"]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib", name, globals())
