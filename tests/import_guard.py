"""Source for a child process in which every third-party import but a few fails, as on a phone.

Prepend ``edge_only_imports(...)`` to a ``python -c`` script: afterwards, importing anything that
is not in the standard library or in ``allowed`` raises ImportError naming the module.
"""

from __future__ import annotations

EDGE_RUNTIME_IMPORTS = frozenset({"numpy", "flatbuffers", "schemas", "edge_runtime"})


def edge_only_imports(allowed: frozenset[str] = EDGE_RUNTIME_IMPORTS, who: str = "edge_runtime") -> str:
    return f"""
import sys, importlib.abc
class _Block(importlib.abc.MetaPathFinder):
    allowed = {sorted(allowed)!r}
    stdlib = set(sys.stdlib_module_names)
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in self.allowed or top in self.stdlib or top.startswith("_"):
            return None
        raise ImportError(f"{who} must not need {{name}}")
sys.meta_path.insert(0, _Block())
"""
