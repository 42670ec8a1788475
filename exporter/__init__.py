"""flowstack exporter: freeze trained graphs, import ONNX, optimize, verify, write .flow and ONNX.

The ONNX entry points are imported on first use, so freezing and writing .flow work without the
``onnx`` package installed.
"""

from exporter.freeze import FreezeError, check_trainer_parity, export_trained, freeze
from exporter.passes import PassReport, optimize
from exporter.pipeline import ExportReport, export
from exporter.repository import write_repository
from exporter.verify import ParityError, ParityReport, check_parity

_ONNX_NAMES = {"to_onnx": "exporter.onnx_export", "import_onnx": "exporter.onnx_import",
               "convert_onnx": "exporter.onnx_import"}


def __getattr__(name: str):
    if name in _ONNX_NAMES:
        import importlib

        return getattr(importlib.import_module(_ONNX_NAMES[name]), name)
    raise AttributeError(f"module 'exporter' has no attribute {name!r}")


__all__ = [
    "ExportReport", "FreezeError", "ParityError", "ParityReport", "PassReport", "check_parity",
    "check_trainer_parity", "convert_onnx", "export", "export_trained", "freeze", "import_onnx",
    "optimize", "to_onnx", "write_repository",
]
