"""TF1's object-oriented layers (``tf.layers.Dense(10)``, ``tf.layers.Conv2D(...)``): the layer
functions of trainer/layers.py with their arguments bound at construction, applied by calling.

The first call builds the variables in the layer's scope (its ``name``, else ``dense``,
``dense_1``, ... made unique); every later call reuses them, wherever it is made, as a Keras-style
layer object in TF1 does (a decoder's output projection applied at every step).
"""

from __future__ import annotations

from trainer import layers
from trainer.graph import get_default_graph
from trainer.separable_conv1d import separable_conv1d
from trainer.variable_scopes import VariableScope
from trainer.variables import global_variables

__all__ = ["AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "BatchNormalization", "Conv1D", "Conv2D",
           "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Dense", "Dropout", "Flatten", "Layer", "MaxPooling1D",
           "MaxPooling2D", "MaxPooling3D", "SeparableConv1D", "SeparableConv2D"]


class Layer:
    """A layer function with bound arguments; ``variables`` are those its first call made."""

    _function = None  # the trainer.layers function a subclass applies
    _scoped = True  # whether it makes variables (and takes name= and reuse=)

    def __init__(self, *args, trainable: bool = True, name: str | None = None, **kwargs):
        self._args, self._kwargs = args, kwargs
        self.trainable, self.name = trainable, name
        self.built = False
        self._scope: VariableScope | None = None
        self._variables: list = []

    def __call__(self, inputs, *args, **kwargs):
        fn = type(self)._function
        if not self._scoped:
            return fn(inputs, *self._args, *args, **{**self._kwargs, **kwargs}, name=self.name)
        known = {id(v) for v in global_variables(get_default_graph())}
        # built under a reusing scope, a layer made no variables of its own: it reuses by name
        name = self._scope if self._scope is not None else self.name
        out = fn(inputs, *self._args, *args, **{**self._kwargs, **kwargs}, trainable=self.trainable, name=name,
                 reuse=True if self.built else None)
        if not self.built:
            self._variables = [v for v in global_variables(get_default_graph()) if id(v) not in known]
            if self._variables:
                full = self._variables[0].op.name.rsplit("/", 1)[0]
                self._scope = VariableScope(name=full, reuse=True)
                self.name = self.name or full.rsplit("/", 1)[-1]
            self.built = True
        return out

    def apply(self, inputs, *args, **kwargs):
        return self(inputs, *args, **kwargs)

    @property
    def variables(self) -> list:
        return list(self._variables)

    weights = variables

    @property
    def trainable_variables(self) -> list:
        return [v for v in self._variables if v.trainable] if self.trainable else []

    trainable_weights = trainable_variables

    def _named(self, leaf: str):
        found = [v for v in self._variables if v.op.name.rsplit("/", 1)[-1] == leaf]
        if not found:
            raise AttributeError(f"layer {self.name!r} has no variable {leaf!r} (is it built? call it first)")
        return found[0]

    @property
    def kernel(self):
        return self._named("kernel")

    @property
    def bias(self):
        return self._named("bias")


def _layer_class(name: str, function, scoped: bool = True) -> type:
    return type(name, (Layer,), {"_function": staticmethod(function), "_scoped": scoped,
                                 "__doc__": f"``tf.layers.{function.__name__}`` as an object.",
                                 "__module__": __name__})


Dense = _layer_class("Dense", layers.dense)
Conv1D = _layer_class("Conv1D", layers.conv1d)
Conv2D = _layer_class("Conv2D", layers.conv2d)
Conv2DTranspose = _layer_class("Conv2DTranspose", layers.conv2d_transpose)
Conv3D = _layer_class("Conv3D", layers.conv3d)
Conv3DTranspose = _layer_class("Conv3DTranspose", layers.conv3d_transpose)
SeparableConv1D = _layer_class("SeparableConv1D", separable_conv1d)
SeparableConv2D = _layer_class("SeparableConv2D", layers.separable_conv2d)
BatchNormalization = _layer_class("BatchNormalization", layers.batch_normalization)
MaxPooling1D = _layer_class("MaxPooling1D", layers.max_pooling1d, scoped=False)
MaxPooling2D = _layer_class("MaxPooling2D", layers.max_pooling2d, scoped=False)
AveragePooling1D = _layer_class("AveragePooling1D", layers.average_pooling1d, scoped=False)
AveragePooling2D = _layer_class("AveragePooling2D", layers.average_pooling2d, scoped=False)
MaxPooling3D = _layer_class("MaxPooling3D", layers.max_pooling3d, scoped=False)
AveragePooling3D = _layer_class("AveragePooling3D", layers.average_pooling3d, scoped=False)
Flatten = _layer_class("Flatten", layers.flatten, scoped=False)
Dropout = _layer_class("Dropout", layers.dropout, scoped=False)
