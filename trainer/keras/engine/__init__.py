"""The Keras engine: layers, networks, models and their training loops."""

from trainer.keras.engine.base_layer import InputSpec, Layer
from trainer.keras.engine.input_layer import Input, InputLayer
from trainer.keras.engine.network import Network
from trainer.keras.engine.sequential import Sequential
from trainer.keras.engine.training import Model

__all__ = ["Input", "InputLayer", "InputSpec", "Layer", "Model", "Network", "Sequential"]
