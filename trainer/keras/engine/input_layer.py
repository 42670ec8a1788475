"""``InputLayer`` and ``Input``: the placeholder a functional model starts from."""

from __future__ import annotations

import numpy as np

from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer

__all__ = ["Input", "InputLayer"]


class InputLayer(Layer):
    def __init__(self, input_shape=None, batch_size=None, dtype=None, input_tensor=None, sparse: bool = False,
                 name=None, batch_input_shape=None, **kwargs):
        if name is None:
            name = f"input_{K.get_uid('input')}"
        super().__init__(name=name, dtype=dtype)
        if sparse:
            raise NotImplementedError("InputLayer(sparse=True) is not built in flowstack")
        self.sparse = False
        if input_tensor is not None:
            tensor = input_tensor
            batch_input_shape = K.int_shape(tensor)
        else:
            if batch_input_shape is None:
                if input_shape is None:
                    raise ValueError("An InputLayer should be passed either a `batch_input_shape` or an `input_shape`.")
                batch_input_shape = (batch_size,) + tuple(input_shape)
            tensor = K.placeholder(shape=tuple(batch_input_shape), dtype=self.dtype, name=self.name)
        self.batch_input_shape = tuple(batch_input_shape)
        self.is_placeholder = input_tensor is None
        self.built = True
        self._add_node([], [tensor], {})

    def get_config(self) -> dict:
        return {"batch_input_shape": list(self.batch_input_shape), "dtype": np.dtype(self.dtype).name,
                "sparse": self.sparse, "name": self.name}


def Input(shape=None, batch_size=None, name=None, dtype=None, sparse: bool = False, tensor=None,  # noqa: N802
          batch_shape=None, **kwargs):
    """A placeholder of shape ``(batch_size,) + shape`` with Keras history: a functional model's input."""
    if kwargs:
        raise TypeError(f"Input: unexpected keyword argument(s) {sorted(kwargs)}")
    if shape is None and batch_shape is None and tensor is None:
        raise ValueError("Please provide to Input either a `shape` or a `batch_shape` argument. Note that `shape` "
                         "does not include the batch dimension.")
    if batch_shape is None and shape is not None:
        batch_shape = (batch_size,) + tuple(shape)
    layer = InputLayer(batch_input_shape=batch_shape, name=name, dtype=dtype, sparse=sparse, input_tensor=tensor)
    return layer.inbound_nodes[0].output_tensors[0]
