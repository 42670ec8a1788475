"""``Sequential``: a linear stack of layers. Given an input shape (``input_shape=`` on the first layer,
or an ``InputLayer``) it is a functional model from the start; otherwise it is built from the first
data ``fit``/``predict`` sees."""

from __future__ import annotations

import numpy as np

from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer, keras_history, to_list
from trainer.keras.engine.input_layer import Input, InputLayer
from trainer.keras.engine.training import Model

__all__ = ["Sequential"]


class Sequential(Model):
    def __init__(self, layers=None, name=None):
        super().__init__(name=name)
        self._stack: list[Layer] = []
        self.build_input_shape = None
        for layer in layers or []:
            self.add(layer)

    @property
    def layers(self) -> list:
        return list(self._stack)

    def add(self, layer) -> None:
        if not isinstance(layer, Layer):
            raise TypeError(f"The added layer must be an instance of class Layer. Found: {layer}")
        if isinstance(layer, InputLayer):
            if self.outputs:
                raise ValueError("An InputLayer can only be the first layer of a Sequential model")
            self.inputs = self.outputs = list(layer.inbound_nodes[0].output_tensors)
            return
        first_shape = getattr(layer, "batch_input_shape", None)
        if first_shape is None and isinstance(layer, Model) and layer.inputs:  # a built model as first layer
            first_shape = K.int_shape(layer.inputs[0])
        if not self.outputs and not self._stack and first_shape is not None:
            x = Input(batch_shape=first_shape, dtype=layer.dtype, name=f"{layer.name}_input")
            self.inputs = self.outputs = [x]
        self._stack.append(layer)
        if self.outputs:
            out = layer(self.outputs[0])
            if len(to_list(out)) != 1:
                raise ValueError("All layers in a Sequential model should have a single output tensor. For "
                                 "multi-output layers, use the functional API.")
            self.outputs = to_list(out)
            self.init_graph_network(self.inputs, self.outputs)
        self.train_function = self.test_function = self.predict_function = None

    def pop(self) -> None:
        if not self._stack:
            raise TypeError("There are no layers in the model.")
        self._stack.pop()
        inputs = self.inputs
        self.outputs = []
        if inputs:
            self.outputs = inputs
            for layer in self._stack:
                self.outputs = to_list(layer(self.outputs[0]))
            self.init_graph_network(self.inputs, self.outputs)
        self.train_function = self.test_function = self.predict_function = None

    def predict_proba(self, x, batch_size: int = 32, verbose: int = 0) -> np.ndarray:
        """TF 1.15's Sequential.predict_proba: ``predict``."""
        return self.predict(x, batch_size=batch_size, verbose=verbose)

    def predict_classes(self, x, batch_size: int = 32, verbose: int = 0) -> np.ndarray:
        """The argmax class per example, or 0/1 by a 0.5 threshold for a one-unit output."""
        probabilities = self.predict(x, batch_size=batch_size, verbose=verbose)
        if probabilities.shape[-1] > 1:
            return probabilities.argmax(axis=-1)
        return (probabilities > 0.5).astype("int32")

    def build_on_shape(self, input_shape, dtype=None) -> None:
        """The deferred build: an Input of ``input_shape`` run through the stack."""
        if self.outputs:
            return
        if not self._stack:
            raise TypeError("Sequential model has no layers to build")
        kind = np.dtype(dtype or K.floatx())
        first = self._stack[0]
        dtype = first.dtype if first.dtype != K.floatx() else (K.floatx() if kind.kind == "f" else kind.name)
        x = Input(batch_shape=tuple(input_shape), dtype=dtype)
        self.build_input_shape = tuple(input_shape)
        self.inputs = self.outputs = [x]
        for layer in self._stack:
            self.outputs = to_list(layer(self.outputs[0]))
        self.init_graph_network(self.inputs, self.outputs)

    def build(self, input_shape=None) -> None:
        if input_shape is not None:
            self.build_on_shape(input_shape)

    def call(self, inputs, training=None, mask=None):
        if self.is_graph_network:
            return super().call(inputs, training, mask)
        x = inputs
        for layer in self._stack:
            x = layer(x)
        return x

    def init_graph_network(self, inputs, outputs) -> None:
        super().init_graph_network(inputs, outputs)
        self._graph_layers = [keras_history(self.inputs[0]).layer] + list(self._stack)

    def _sublayers(self) -> list:
        return list(self._stack)

    def get_config(self) -> dict:
        from trainer.keras.serialization import to_json_value

        layers = []
        for i, layer in enumerate(self._stack):
            config = to_json_value(layer.get_config())
            if i == 0 and self.inputs and "batch_input_shape" not in config:
                config["batch_input_shape"] = list(K.int_shape(self.inputs[0]))
            layers.append({"class_name": type(layer).__name__, "config": config})
        return {"name": self.name, "layers": layers}

    @classmethod
    def from_config(cls, config: dict, custom_objects=None):
        from trainer.keras.layers import deserialize

        layer_configs = config["layers"] if isinstance(config, dict) else config
        model = cls(name=config.get("name") if isinstance(config, dict) else None)
        for data in layer_configs:
            model.add(deserialize(data, custom_objects))
        return model
