"""``tf.contrib.training.HParams``: the hyperparameter bag TF 1.x research code passes around.

Values are typed by their first assignment: ``parse("lr=0.1,layers=[64,32]")`` and ``set_hparam``
convert to that type (an int may become a float, never the other way) and refuse anything else,
naming the hyperparameter, as TensorFlow's does.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["HParams"]

_SCALAR_TYPES = (bool, int, float, str)
# name=value or name[index]=value, comma-separated; a value is a [list] or runs to the next comma
_ASSIGNMENT = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*(?P<index>\d+)\s*\])?\s*=\s*"
                         r"(?P<value>\[[^\]]*\]|[^,\[]*)\s*(?:,|$)")


def _converted(name: str, value: Any, kind: type) -> Any:
    """``value`` as the hyperparameter ``name``'s type ``kind`` (TensorFlow's HParams casting rules)."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
            return value.strip().lower() in ("true", "1")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif kind is str:
        if isinstance(value, str):
            return value
    raise ValueError(f"hyperparameter {name!r} is a {kind.__name__}; cannot set it to {value!r}")


class HParams:
    """Named hyperparameters with attribute access: ``HParams(lr=0.1, layers=[64, 32]).lr``."""

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        if hparam_def is not None:
            raise ValueError("HParams(hparam_def=...) takes a serialized HParamDef protocol buffer, which is not "
                             "read here; pass the values as keyword arguments (or from_json text via parse_json)")
        self._hparam_types: dict[str, tuple[type, bool]] = {}
        self._model_structure = model_structure
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name: str, value: Any) -> None:
        """Add ``name``; its type (and whether it is a list) is fixed by ``value``."""
        if name in self._hparam_types or hasattr(self, name):
            raise ValueError(f"hyperparameter name {name!r} is already used")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"hyperparameter {name!r}: an empty list has no element type to keep")
            kind = type(value[0])
            self._hparam_types[name] = (kind, True)
            setattr(self, name, [_converted(name, v, kind) for v in value])
        elif isinstance(value, _SCALAR_TYPES) or value is None:
            self._hparam_types[name] = (type(value), False)
            setattr(self, name, value)
        else:
            raise ValueError(f"hyperparameter {name!r}: {type(value).__name__} values are not supported (bool, "
                             "int, float, str or a list of one of them)")

    def set_hparam(self, name: str, value: Any) -> None:
        """Set an existing hyperparameter, converting ``value`` to its type."""
        if name not in self._hparam_types:
            raise ValueError(f"unknown hyperparameter {name!r}; known: {sorted(self._hparam_types)}")
        kind, is_list = self._hparam_types[name]
        if is_list:
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"hyperparameter {name!r} is a list; cannot set it to {value!r}")
            setattr(self, name, [_converted(name, v, kind) for v in value])
        elif isinstance(value, (list, tuple)):
            raise ValueError(f"hyperparameter {name!r} is a single {kind.__name__}; cannot set it to the list {value!r}")
        else:
            setattr(self, name, value if kind is type(None) else _converted(name, value, kind))

    def del_hparam(self, name: str) -> None:
        if name in self._hparam_types:
            del self._hparam_types[name]
            delattr(self, name)

    def parse(self, values: str) -> HParams:
        """Override from ``"name=value,list=[1,2],list[0]=3"``; returns self. Every assignment is checked
        before any is made, so a bad one changes nothing."""
        updates: dict[str, Any] = {}
        pos, text = 0, values.strip()
        while pos < len(text):
            match = _ASSIGNMENT.match(text, pos)
            if not match or match.end() == pos:
                raise ValueError(f"could not parse hparam assignments at {text[pos:]!r} (expected name=value, "
                                 "comma-separated)")
            pos = match.end()
            name, index, raw = match.group("name"), match.group("index"), match.group("value").strip()
            if name not in self._hparam_types:
                raise ValueError(f"unknown hyperparameter {name!r} in {values!r}; known: {sorted(self._hparam_types)}")
            kind, is_list = self._hparam_types[name]
            if index is not None:
                if not is_list:
                    raise ValueError(f"hyperparameter {name!r} is not a list; {name}[{index}] cannot be set")
                items = list(updates.get(name, getattr(self, name)))
                if int(index) >= len(items):
                    raise ValueError(f"{name}[{index}]: the list has {len(items)} elements")
                items[int(index)] = _converted(name, raw, kind)
                updates[name] = items
            elif raw.startswith("["):
                if not is_list:
                    raise ValueError(f"hyperparameter {name!r} is a single {kind.__name__}; cannot set it to {raw}")
                updates[name] = [_converted(name, v.strip(), kind) for v in raw[1:-1].split(",") if v.strip()]
            else:
                if is_list:
                    raise ValueError(f"hyperparameter {name!r} is a list; cannot set it to {raw!r}")
                updates[name] = raw if kind is type(None) else _converted(name, raw, kind)
        for name, value in updates.items():
            setattr(self, name, value)
        return self

    def override_from_dict(self, values_dict: dict) -> HParams:
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    def values(self) -> dict:
        """{name: value} of every hyperparameter."""
        return {name: getattr(self, name) for name in self._hparam_types}

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self._hparam_types:
            return default
        return getattr(self, key)

    def to_json(self, indent=None, separators=None, sort_keys: bool = False) -> str:
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json: str) -> HParams:
        return self.override_from_dict(json.loads(values_json))

    def set_model_structure(self, model_structure) -> None:
        self._model_structure = model_structure

    def get_model_structure(self):
        return self._model_structure

    def __contains__(self, key: str) -> bool:
        return key in self._hparam_types

    def __str__(self) -> str:
        return str(sorted(self.values().items()))

    def __repr__(self) -> str:
        return f"HParams({self.values()!r})"
