"""``tf.keras.layers``: the layer classes, their functional merge forms, and (de)serialization by class name."""

from __future__ import annotations

from trainer.keras.engine.base_layer import InputSpec, Layer
from trainer.keras.engine.input_layer import Input, InputLayer
from trainer.keras.layers.advanced_activations import ELU, LeakyReLU, PReLU, ReLU, Softmax, ThresholdedReLU
from trainer.keras.layers.conv import (Conv1D, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose, Cropping1D,
                                       Cropping2D, Cropping3D, DepthwiseConv2D, SeparableConv1D, SeparableConv2D,
                                       UpSampling1D, UpSampling2D, UpSampling3D, ZeroPadding1D, ZeroPadding2D,
                                       ZeroPadding3D)
from trainer.keras.layers.convolutional_recurrent import ConvLSTM2D
from trainer.keras.layers.core import (Activation, ActivityRegularization, Dense, Dropout, Flatten, Lambda, Masking,
                                       Permute, RepeatVector, Reshape, SpatialDropout1D, SpatialDropout2D,
                                       SpatialDropout3D)
from trainer.keras.layers.cudnn_recurrent import CuDNNGRU, CuDNNLSTM
from trainer.keras.layers.embeddings import Embedding
from trainer.keras.layers.feature_columns import DenseFeatures
from trainer.keras.layers.local import LocallyConnected1D, LocallyConnected2D
from trainer.keras.layers.merge import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,
                                        average, concatenate, dot, maximum, minimum, multiply, subtract)
from trainer.keras.layers.noise import AlphaDropout, GaussianDropout, GaussianNoise
from trainer.keras.layers.normalization import BatchNormalization, LayerNormalization
from trainer.keras.layers.pooling import (AveragePooling1D, AveragePooling2D, AveragePooling3D, GlobalAveragePooling1D,
                                          GlobalAveragePooling2D, GlobalAveragePooling3D, GlobalMaxPooling1D,
                                          GlobalMaxPooling2D, GlobalMaxPooling3D, MaxPooling1D, MaxPooling2D,
                                          MaxPooling3D)
from trainer.keras.layers.recurrent import (GRU, LSTM, RNN, AbstractRNNCell, GRUCell, LSTMCell, SimpleRNN,
                                            SimpleRNNCell, StackedRNNCells)
from trainer.keras.layers.wrappers import Bidirectional, TimeDistributed, Wrapper
from trainer.keras.serialization import deserialize as deserialize_object, to_json_value

# Keras' other spellings of the same layers
Convolution1D, Convolution2D, Convolution2DTranspose, Convolution3D = Conv1D, Conv2D, Conv2DTranspose, Conv3D
Convolution3DTranspose = Conv3DTranspose
SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D
MaxPool1D, MaxPool2D, MaxPool3D = MaxPooling1D, MaxPooling2D, MaxPooling3D
AvgPool1D, AvgPool2D, AvgPool3D = AveragePooling1D, AveragePooling2D, AveragePooling3D
GlobalAvgPool1D, GlobalAvgPool2D = GlobalAveragePooling1D, GlobalAveragePooling2D
GlobalAvgPool3D = GlobalAveragePooling3D
GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D = GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D

LAYER_CLASSES: dict[str, type] = {cls.__name__: cls for cls in (
    InputLayer, Dense, Activation, Dropout, SpatialDropout1D, SpatialDropout2D, Flatten, Reshape, Permute,
    RepeatVector, Lambda, Masking, ActivityRegularization, Conv1D, Conv2D, Conv2DTranspose, SeparableConv2D,
    DepthwiseConv2D, ZeroPadding1D, ZeroPadding2D, UpSampling1D, UpSampling2D, Cropping1D, Cropping2D, MaxPooling1D,
    MaxPooling2D, AveragePooling1D, AveragePooling2D, GlobalAveragePooling1D, GlobalAveragePooling2D,
    GlobalMaxPooling1D, GlobalMaxPooling2D, BatchNormalization, Embedding, SimpleRNN, GRU, LSTM, RNN, SimpleRNNCell,
    GRUCell, LSTMCell, StackedRNNCells, Bidirectional, TimeDistributed, Add, Subtract, Multiply, Average, Maximum,
    Minimum, Concatenate, Dot, LeakyReLU, ReLU, PReLU, ELU, Softmax, ThresholdedReLU, SpatialDropout3D, Conv3D,
    SeparableConv1D, ZeroPadding3D, UpSampling3D, Cropping3D, MaxPooling3D, AveragePooling3D, GlobalAveragePooling3D,
    GlobalMaxPooling3D, GaussianNoise, GaussianDropout, AlphaDropout, LayerNormalization, CuDNNLSTM, CuDNNGRU,
    LocallyConnected1D, LocallyConnected2D, AbstractRNNCell, ConvLSTM2D, Conv3DTranspose)}


def serialize(layer) -> dict:
    return to_json_value(layer)


def deserialize(config: dict, custom_objects=None) -> object:
    """A layer (or model) from ``{"class_name", "config"}``; unknown class names are a clear error."""
    from trainer.keras.engine.sequential import Sequential
    from trainer.keras.engine.training import Model

    table = {**LAYER_CLASSES, "Model": Model, "Sequential": Sequential}
    if isinstance(config, dict) and "class_name" in config:
        name = config["class_name"]
        lookup = {**table, **(custom_objects or {})}
        from trainer.keras.serialization import custom_objects as scoped

        lookup.update(scoped())
        if name not in lookup:
            raise ValueError(f"Unknown layer: {name!r}. Pass its class in custom_objects when loading")
        cls = lookup[name]
        if name in ("Model", "Sequential") or hasattr(cls, "from_config") and \
                "custom_objects" in cls.from_config.__code__.co_varnames:
            return cls.from_config(config["config"], custom_objects=custom_objects)
        return cls.from_config(config["config"])
    return deserialize_object(config, table, "layer", custom_objects)


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.layers", name, globals())
