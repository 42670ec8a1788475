"""``tf.contrib.rnn``: the recurrent cells and the unrolled runners."""

from trainer.rnn import static_bidirectional_rnn, static_rnn
from trainer.rnn_cell import (
    BasicLSTMCell,
    BasicRNNCell,
    DropoutWrapper,
    GRUCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    ResidualWrapper,
    RNNCell,
)

__all__ = [
    "BasicLSTMCell", "BasicRNNCell", "DropoutWrapper", "GRUCell", "LSTMCell", "LSTMStateTuple", "MultiRNNCell",
    "RNNCell", "ResidualWrapper", "static_bidirectional_rnn", "static_rnn",
]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.rnn", name, globals())
