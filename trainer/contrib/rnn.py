"""``tf.contrib.rnn``: the recurrent cells and the unrolled runners."""

from trainer.contrib.fused_rnn import FusedRNNCell, FusedRNNCellAdaptor, TimeReversedFusedRNN
from trainer.contrib.rnn_cells import (
    AttentionCellWrapper,
    Conv1DLSTMCell,
    Conv2DLSTMCell,
    Conv3DLSTMCell,
    ConvLSTMCell,
    CoupledInputForgetGateLSTMCell,
    EmbeddingWrapper,
    GRUBlockCell,
    GRUBlockCellV2,
    HighwayWrapper,
    IntersectionRNNCell,
    LSTMBlockFusedCell,
    LayerNormBasicLSTMCell,
    LayerRNNCell,
    NASCell,
    UGRNNCell,
)
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
    LSTMBlockCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    ResidualWrapper,
    RNNCell,
)

__all__ = [
    "AttentionCellWrapper", "Conv1DLSTMCell", "Conv2DLSTMCell", "Conv3DLSTMCell", "ConvLSTMCell", "CoupledInputForgetGateLSTMCell", "EmbeddingWrapper", "HighwayWrapper", "IntersectionRNNCell",
    "FusedRNNCell", "FusedRNNCellAdaptor", "LSTMBlockFusedCell", "LayerRNNCell", "TimeReversedFusedRNN",
    "LayerNormBasicLSTMCell", "NASCell", "UGRNNCell", "stack_bidirectional_rnn",
    "BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUBlockCell", "GRUBlockCellV2", "GRUCell",
    "InputProjectionWrapper", "LSTMBlockCell", "LSTMCell", "LSTMStateTuple", "MultiRNNCell",
    "OutputProjectionWrapper", "RNNCell", "ResidualWrapper", "stack_bidirectional_dynamic_rnn",
    "static_bidirectional_rnn", "static_rnn", "transpose_batch_time",
]


def stack_bidirectional_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None, initial_states_bw=None, dtype=None,
                            sequence_length=None, scope=None):
    """Layers of ``static_bidirectional_rnn`` over a list of steps, each layer's concatenated
    outputs feeding the next (scopes ``stack_bidirectional_rnn/cell_<i>/bidirectional_rnn/fw``...):
    (outputs, the forward states, the backward states)."""
    from trainer.variable_scopes import variable_scope

    if not cells_fw or not cells_bw:
        raise ValueError("stack_bidirectional_rnn: cells_fw and cells_bw must be non-empty lists of cells")
    if len(cells_fw) != len(cells_bw):
        raise ValueError(f"stack_bidirectional_rnn: forward and backward cell lists differ in length: "
                         f"{len(cells_fw)} and {len(cells_bw)}")
    for what, states in (("initial_states_fw", initial_states_fw), ("initial_states_bw", initial_states_bw)):
        if states is not None and len(states) != len(cells_fw):
            raise ValueError(f"stack_bidirectional_rnn: {what} must have one state per cell")
    states_fw, states_bw = [], []
    layer = list(inputs)
    with variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            with variable_scope(f"cell_{i}"):
                layer, state_fw, state_bw = static_bidirectional_rnn(
                    cell_fw, cell_bw, layer, None if initial_states_fw is None else initial_states_fw[i],
                    None if initial_states_bw is None else initial_states_bw[i], dtype, sequence_length)
            states_fw.append(state_fw)
            states_bw.append(state_bw)
    return layer, tuple(states_fw), tuple(states_bw)


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.rnn", name, globals())
