"""Optimizer slots in checkpoints written before slots were named as in TensorFlow 1.x.

Slots are named as TensorFlow names them: the optimizer's name under the variable's, made unique
in the order the optimizer makes them, so Adam's m and v of ``w`` are ``w/Adam`` and
``w/Adam_1`` (trainer/train.py, ``Optimizer._slot``). Checkpoints written before held them as
``<variable>/<optimizer>/<slot>`` (``w/Adam/m``, ``w/Adam/v``). ``stored_name`` finds a slot
under either name, so those checkpoints still restore.

>>> legacy_slot_name("dense/kernel/Adam_1"), legacy_slot_name("w/RMSProp"), legacy_slot_name("w")
('dense/kernel/Adam/v', 'w/RMSProp/rms', None)
"""

from __future__ import annotations

import re
from typing import Container

__all__ = ["SLOT_ORDER", "legacy_slot_name", "stored_name"]

# Each built-in optimizer's slots in the order its ``_apply`` makes them (trainer/train.py,
# trainer/optimizers.py): the i-th is named "<optimizer>" (i = 0) or "<optimizer>_<i>".
SLOT_ORDER: dict[str, tuple[str, ...]] = {
    "Adam": ("m", "v"),
    "Momentum": ("momentum",),
    "Adagrad": ("accumulator",),
    "RMSProp": ("rms", "momentum"),
    "Adadelta": ("accum", "accum_update"),
    "Ftrl": ("accum", "linear"),
}

_SLOT = re.compile(r"(?P<variable>.+)/(?P<optimizer>[A-Za-z]+)(?:_(?P<index>[0-9]+))?")


def legacy_slot_name(name: str) -> str | None:
    """The name a checkpoint from before the rename gave the slot now called ``name``, or None
    when ``name`` is not a built-in optimizer's slot name."""
    match = _SLOT.fullmatch(name)
    if match is None or match["optimizer"] not in SLOT_ORDER:
        return None
    slots = SLOT_ORDER[match["optimizer"]]
    index = int(match["index"] or 0)
    if index >= len(slots):
        return None
    return f"{match['variable']}/{match['optimizer']}/{slots[index]}"


def stored_name(name: str, stored: Container[str]) -> str:
    """The key ``stored`` (a checkpoint's names) holds ``name`` under: ``name`` itself, or else the
    slot's name from before the rename when the checkpoint has that one."""
    if name in stored:
        return name
    legacy = legacy_slot_name(name)
    return legacy if legacy is not None and legacy in stored else name
