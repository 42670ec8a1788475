"""The table that hangs things off an op by name: forward kernels, stateful kernels, gradient rules.

Every entry remembers the module that registered it. An op lives in four places named by one
family (``schemas/ops/<family>.py``, ``edge_runtime/kernels/<family>.py``,
``trainer/gradients/<family>.py``, ``trainer/kernels/<family>.py``), so the last part of that
module's name is the family the entry was filed under; tests/test_op_families.py holds the four
equal for every op.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


def registering_module() -> str:
    """The module whose code called the function that calls this one (where a decorator is used).

    >>> def register():
    ...     return registering_module()
    >>> register() == __name__
    True
    """
    return sys._getframe(2).f_globals.get("__name__", "")


def family_of(module: str) -> str:
    """The op family a registering module files its ops under: the last part of its name.

    >>> family_of("edge_runtime.kernels.nn")
    'nn'
    """
    return module.rsplit(".", 1)[-1]


def import_families(package: str) -> None:
    """Import ``<package>.<family>`` for every op family (``schemas.ops.FAMILIES``) that has one there."""
    from schemas.ops import FAMILIES

    for family in FAMILIES:
        module = f"{package}.{family}"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)


class OpTable(Generic[T]):
    """Entries keyed by ``(domain, op name)``, each registered once, looked up after ``load`` runs.

    ``what`` names an entry in the "registered twice" error; ``missing(name, domain)`` builds the
    exception a lookup of an absent op raises.

    >>> table = OpTable("kernel", missing=lambda name, domain: KeyError(name))
    >>> table.add("Relu", "", abs, module="edge_runtime.kernels.math")
    >>> table.get("Relu", "") is abs, table.has("Relu", ""), table.has("Elu", "")
    (True, True, False)
    >>> table.modules()
    {('', 'Relu'): 'edge_runtime.kernels.math'}
    """

    def __init__(self, what: str, *, missing: Callable[[str, str], Exception],
                 load: Callable[[], None] = lambda: None) -> None:
        self.what = what
        self._missing = missing
        self._load = load
        self._entries: dict[tuple[str, str], T] = {}
        self._modules: dict[tuple[str, str], str] = {}

    def add(self, name: str, domain: str, entry: T, *, module: str) -> None:
        key = (domain, name)
        if key in self._entries:
            raise ValueError(f"{self.what} for {name} registered twice")
        self._entries[key] = entry
        self._modules[key] = module

    def get(self, name: str, domain: str) -> T:
        self._load()
        try:
            return self._entries[(domain, name)]
        except KeyError:
            raise self._missing(name, domain) from None

    def has(self, name: str, domain: str) -> bool:
        self._load()
        return (domain, name) in self._entries

    def keys(self) -> list[tuple[str, str]]:
        """Every registered ``(domain, name)``, sorted."""
        self._load()
        return sorted(self._entries)

    def modules(self) -> dict[tuple[str, str], str]:
        """The module that registered each entry (its family file)."""
        self._load()
        return dict(self._modules)
