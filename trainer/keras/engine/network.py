"""``Network``: a graph of layers, from a functional ``Model(inputs, outputs)`` (its topology read from
the tensors' Keras history) or a subclass with ``call`` (its layers tracked as attributes). A network
is itself a layer: calling it on new tensors re-runs its layers, sharing their weights."""

from __future__ import annotations

import json

import numpy as np

from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer, keras_history, to_list, unique_layer_name, unpack
from trainer.keras.engine.input_layer import InputLayer
from trainer.keras.serialization import snake_case

__all__ = ["Network"]


def _unique(items: list) -> list:
    seen, out = set(), []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


class Network(Layer):
    def __init__(self, *args, **kwargs):
        inputs = kwargs.pop("inputs", args[0] if len(args) > 0 else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        self.__dict__["_tracked_layers"] = []
        name = kwargs.pop("name", None)
        super().__init__(name=name or unique_layer_name(
            "model" if type(self).__name__ in ("Model", "Network") else snake_case(type(self).__name__)), **kwargs)
        self.inputs, self.outputs = [], []
        self._graph_layers: list = []
        self._network_nodes: list = []
        self.is_graph_network = False
        self.stop_training = False
        if inputs is not None and outputs is not None:
            self.init_graph_network(inputs, outputs)

    def __setattr__(self, name, value):
        if isinstance(value, Layer) and not name.startswith("_") and value is not self:
            tracked = self.__dict__.setdefault("_tracked_layers", [])
            if all(value is not t for t in tracked):
                tracked.append(value)
        object.__setattr__(self, name, value)

    # -- topology --------------------------------------------------------------------------
    def init_graph_network(self, inputs, outputs) -> None:
        self.inputs, self.outputs = to_list(inputs), to_list(outputs)
        for x in self.inputs:
            history = keras_history(x)
            if history is None or not isinstance(history.layer, InputLayer):
                raise ValueError(f"Input tensors to a Model must come from `tf.keras.Input`. Received: {x} "
                                 "(missing previous layer metadata).")
        nodes, seen = [], set()

        def visit(tensor):
            history = keras_history(tensor)
            if history is None:
                raise ValueError(f"Output tensors to a Model must be the output of a Keras `Layer` (thus holding "
                                 f"past layer metadata). Found: {tensor}")
            node = history.layer.inbound_nodes[history.node_index]
            if id(node) in seen:
                return
            seen.add(id(node))
            for t in node.input_tensors:
                visit(t)
            unknown_input = not any(node.output_tensors[0] is x for x in self.inputs)
            if isinstance(node.outbound_layer, InputLayer) and unknown_input:
                raise ValueError(f"Graph disconnected: cannot obtain value for tensor {node.output_tensors[0]} at "
                                 f"layer {node.outbound_layer.name!r}. It is not among the model's inputs.")
            nodes.append(node)

        for o in self.outputs:
            visit(o)
        input_layers = [keras_history(x).layer for x in self.inputs]
        self._network_nodes = nodes
        self._graph_layers = _unique(input_layers + [n.outbound_layer for n in nodes])
        self.input_layers = input_layers
        self.output_layers = [keras_history(o).layer for o in self.outputs]
        self.is_graph_network = True
        self.built = True

    # A network's own inputs and outputs (a layer's are those of its first call).
    input = property(lambda self: unpack(self.inputs) if self.inputs else Layer.input.fget(self))  # noqa: A003
    output = property(lambda self: unpack(self.outputs) if self.outputs else Layer.output.fget(self))
    input_shape = property(lambda self: unpack([K.int_shape(x) for x in self.inputs]) if self.inputs
                           else Layer.input_shape.fget(self))
    output_shape = property(lambda self: unpack([K.int_shape(o) for o in self.outputs]) if self.outputs
                            else Layer.output_shape.fget(self))

    @property
    def input_names(self) -> list[str]:
        return [keras_history(x).layer.name for x in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [keras_history(o).layer.name for o in self.outputs]

    @property
    def layers(self) -> list:
        return list(self._graph_layers) if self.is_graph_network else list(self._tracked_layers)

    def get_layer(self, name: str | None = None, index: int | None = None) -> Layer:
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError(f"Was asked to retrieve layer at index {index} but model only has "
                                 f"{len(self.layers)} layers.")
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"No such layer: {name}")

    def run_internal_graph(self, inputs: list) -> list:
        """The outputs of this network's layers re-applied to ``inputs`` (in place of ``self.inputs``)."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"Model {self.name!r} expects {len(self.inputs)} input(s), got {len(inputs)}")
        values = {id(x): new for x, new in zip(self.inputs, inputs)}
        for node in self._network_nodes:
            if isinstance(node.outbound_layer, InputLayer):
                continue
            args = [values[id(t)] for t in node.input_tensors]
            outs = node.outbound_layer(unpack(args) if len(args) == 1 else args, **node.arguments)
            for old, new in zip(node.output_tensors, to_list(outs)):
                values[id(old)] = new
        return [values[id(o)] for o in self.outputs]

    def call(self, inputs, training=None, mask=None):
        if not self.is_graph_network:
            raise NotImplementedError(f"Model {self.name!r}: a subclassed Model must define call(inputs)")
        return unpack(self.run_internal_graph(to_list(inputs)))

    # -- weights ---------------------------------------------------------------------------
    def _sublayers(self) -> list:
        return [layer for layer in self.layers if layer is not self]

    @property
    def trainable_weights(self) -> list:
        if not self.trainable:
            return []
        return _unique(list(self._trainable_weights) + [w for l in self._sublayers() for w in l.trainable_weights])

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return _unique(list(self._trainable_weights) + list(self._non_trainable_weights)
                           + [w for l in self._sublayers() for w in l.weights])
        trainable = {id(w) for w in self.trainable_weights}
        candidates = list(self._non_trainable_weights) + [w for l in self._sublayers() for w in l.non_trainable_weights]
        return [w for w in _unique(candidates) if id(w) not in trainable]

    @property
    def weights(self) -> list:
        """Layer by layer, as Keras orders them (what get_weights/set_weights exchange)."""
        own = list(self._trainable_weights) + list(self._non_trainable_weights)
        return _unique(own + [w for l in self._sublayers() for w in l.weights])

    @property
    def losses(self) -> list:
        return list(self._losses) + [loss for l in self._sublayers() for loss in l.losses]

    @property
    def updates(self) -> list:
        if not self.trainable:
            return []
        return list(self._updates) + [u for l in self._sublayers() for u in l.updates]

    def updates_of_outputs(self) -> list:
        """The updates made by the calls that compute ``self.outputs`` (not by calls of the same layers on
        other inputs, which a training step could not feed)."""
        if self.is_graph_network:
            return [u for node in self._network_nodes for u in node.updates]
        history = [keras_history(o) for o in self.outputs]
        nodes = _unique([h.layer.inbound_nodes[h.node_index] for h in history if h is not None])
        return [u for node in nodes for u in node.updates]

    def get_weights(self) -> list:
        return K.batch_get_value(self.weights)

    def set_weights(self, weights) -> None:
        params = self.weights
        if len(params) != len(weights):
            raise ValueError(f"Model {self.name!r} has {len(params)} weights, set_weights got {len(weights)}")
        for p, w in zip(params, weights):
            if tuple(p.shape) != tuple(np.shape(w)):
                raise ValueError(f"set_weights: weight {p.op.name} has shape {tuple(p.shape)}, got {np.shape(w)}")
        K.batch_set_value(list(zip(params, weights)))

    def save_weights(self, filepath: str, overwrite: bool = True, save_format=None) -> None:
        from trainer.keras import saving

        saving.save_weights(self, filepath)

    def load_weights(self, filepath: str, by_name: bool = False) -> None:
        from trainer.keras import saving

        saving.load_weights(self, filepath, by_name=by_name)

    # -- config ----------------------------------------------------------------------------
    def get_config(self) -> dict:
        if not self.is_graph_network:
            raise NotImplementedError(f"get_config of a subclassed Model ({type(self).__name__}) is not available: "
                                      "its topology is Python code; save its weights with save_weights instead")
        from trainer.keras.serialization import to_json_value

        relative: dict = {}  # (layer, global node index) -> index among this network's nodes of that layer
        for node in self._network_nodes:
            layer = node.outbound_layer
            global_index = layer.inbound_nodes.index(node)
            relative[(id(layer), global_index)] = sum(1 for k in relative if k[0] == id(layer))

        def ref(tensor):
            h = keras_history(tensor)
            return [h.layer.name, relative[(id(h.layer), h.node_index)], h.tensor_index]

        layers = []
        for layer in self.layers:
            inbound = []
            for node in self._network_nodes:
                if node.outbound_layer is layer and not isinstance(layer, InputLayer):
                    inbound.append([ref(t) + [to_json_value(node.arguments)] for t in node.input_tensors])
            layers.append({"class_name": type(layer).__name__, "name": layer.name,
                           "config": to_json_value(layer.get_config()), "inbound_nodes": inbound})
        return {"name": self.name, "layers": layers, "input_layers": [ref(x) for x in self.inputs],
                "output_layers": [ref(o) for o in self.outputs]}

    @classmethod
    def from_config(cls, config: dict, custom_objects=None, input_tensors: dict | None = None):
        """The network ``config`` describes; ``input_tensors`` (input layer name -> tensor) builds it on
        existing tensors instead of new placeholders (an Estimator's features)."""
        from trainer.keras.layers import deserialize

        made: dict = {}
        outputs_of: dict = {}  # (layer name, node index) -> output tensors
        pending = []
        for data in config["layers"]:
            if data["class_name"] == "InputLayer" and input_tensors and data["name"] in input_tensors:
                layer = InputLayer(input_tensor=input_tensors[data["name"]], name=data["name"],
                                   dtype=data["config"].get("dtype"))
            else:
                layer = deserialize({"class_name": data["class_name"], "config": data["config"]}, custom_objects)
            made[data["name"]] = layer
            if isinstance(layer, InputLayer):
                outputs_of[(layer.name, 0)] = layer.inbound_nodes[0].output_tensors
            for index, node in enumerate(data["inbound_nodes"]):
                pending.append((layer, index, node))
        while pending:  # a shared layer's later call may wait on layers listed after it
            progressed, waiting = False, []
            for layer, index, node in pending:
                if index != sum(1 for k in outputs_of if k[0] == layer.name) or \
                        any((name, i) not in outputs_of for name, i, *_ in node):
                    waiting.append((layer, index, node))
                    continue
                args = [outputs_of[(name, i)][t] for name, i, t, *_ in node]
                kwargs = node[0][3] if len(node[0]) > 3 and node[0][3] else {}
                outputs_of[(layer.name, index)] = to_list(layer(unpack(args) if len(args) == 1 else args, **kwargs))
                progressed = True
            if not progressed:
                raise ValueError(f"model config: cannot connect layer(s) {[p[0].name for p in waiting]} "
                                 "(their inbound layers are missing from the config)")
            pending = waiting
        inputs = [outputs_of[(name, i)][t] for name, i, t in config["input_layers"]]
        outputs = [outputs_of[(name, i)][t] for name, i, t in config["output_layers"]]
        return cls(inputs=inputs, outputs=outputs, name=config.get("name"))

    def to_json(self, **kwargs) -> str:
        from trainer.keras.serialization import to_json_value

        return json.dumps({"class_name": type(self).__name__, "config": to_json_value(self.get_config()),
                           "keras_version": "2.2.4-tf", "backend": "tensorflow"}, **kwargs)

    def to_yaml(self, **kwargs) -> str:
        """The ``to_json`` document as YAML (needs PyYAML, as Keras does)."""
        return _yaml().safe_dump(json.loads(self.to_json()), **kwargs)

    def summary(self, line_length: int | None = None, positions=None, print_fn=None) -> None:
        """Layer, output shape and parameter count per layer, then the totals, as Keras prints them."""
        if not self.built or not (self.outputs or self.layers):
            raise ValueError("This model has not yet been built. Build the model first by calling `build()` or "
                             "calling `fit()` with some data, or specify an `input_shape` argument in the first "
                             "layer(s) for automatic build.")
        print_fn = print_fn or print
        width = line_length or 65
        cols = [int(width * 0.45), int(width * 0.8), width]
        def row(fields):
            line = ""
            for text, stop in zip(fields, cols):
                line = (line + str(text))[:stop].ljust(stop)
            print_fn(line.rstrip())
        print_fn(f'Model: "{self.name}"')
        print_fn("_" * width)
        row(["Layer (type)", "Output Shape", "Param #"])
        print_fn("=" * width)
        for i, layer in enumerate(self.layers):
            try:
                shape = layer.output_shape
            except AttributeError:
                shape = "multiple"
            row([f"{layer.name} ({type(layer).__name__})", shape, layer.count_params() if layer.built else 0])
            print_fn(("=" if i == len(self.layers) - 1 else "_") * width)
        trainable = int(sum(np.prod(tuple(w.shape)) for w in self.trainable_weights))
        non_trainable = int(sum(np.prod(tuple(w.shape)) for w in self.non_trainable_weights))
        print_fn(f"Total params: {trainable + non_trainable:,}")
        print_fn(f"Trainable params: {trainable:,}")
        print_fn(f"Non-trainable params: {non_trainable:,}")
        print_fn("_" * width)


def _yaml():
    try:
        import yaml
    except ImportError:
        raise ImportError("Requires yaml module installed (`pip install pyyaml`).") from None
    return yaml
