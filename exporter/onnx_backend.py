"""The ONNX backend adapter (``onnx.backend.base.Backend``): prepare = convert + load, run = edge runtime.

This is what the ONNX backend test suite drives in tests/conformance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from edge_runtime import Model, load
from exporter.onnx_import import onnx_to_flow_bytes


class FlowBackendRep(BackendRep):
    def __init__(self, model: Model):
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        specs = self.model.inputs
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            feeds = {spec.name: value for spec, value in zip(specs, inputs)}
        outputs = self.model.run(feeds)
        return tuple(outputs[spec.name] for spec in self.model.outputs)


class FlowBackend(Backend):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> FlowBackendRep:
        super().prepare(model, device, **kwargs)
        target = "gpu" if Device(device).type == DeviceType.CUDA else "cpu"
        return FlowBackendRep(load(onnx_to_flow_bytes(model), device=target))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        kind = Device(device).type
        if kind == DeviceType.CPU:
            return True
        try:
            import cupy

            return cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:
            return False


prepare = FlowBackend.prepare
run_model = FlowBackend.run_model
supports_device = FlowBackend.supports_device
