"""``tf.contrib.rnn``: the recurrent cells and the unrolled runners."""

from trainer.rnn import (
    stack_bidirectional_dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
    transpose_batch_time,
)
from trainer.rnn_cell import (
    BasicLSTMCell,
    BasicRNNCell,
    DeviceWrapper,
    DropoutWrapper,
    InputProjectionWrapper,
    OutputProjectionWrapper,
    GRUCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    ResidualWrapper,
    RNNCell,
)

# contrib's block cells are the fused-op cells here: BasicLSTMCell already runs LSTMBlockCell.
LSTMBlockCell = BasicLSTMCell
GRUBlockCell = GRUBlockCellV2 = GRUCell

__all__ = [
    "BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUBlockCell", "GRUBlockCellV2", "GRUCell",
    "InputProjectionWrapper", "LSTMBlockCell", "LSTMCell", "LSTMStateTuple", "MultiRNNCell",
    "OutputProjectionWrapper", "RNNCell", "ResidualWrapper", "stack_bidirectional_dynamic_rnn",
    "static_bidirectional_rnn", "static_rnn", "transpose_batch_time",
]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.rnn", name, globals())
