"""Device names with a task part: ``/job:ps/task:0``, ``/job:worker/task:1/CPU:0``.

A device name has an optional task part (job and task index) and an optional local part (the
device inside that task, ``CPU:0`` or ``GPU:0``). ``DeviceSpec`` parses, prints and merges them
as TensorFlow's ``DeviceSpec`` does: in ``a.merged_with(b)`` the fields ``b`` sets win.
A single-process Session runs every task's nodes itself and only looks at the local part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["DeviceSpec", "local_device"]

_FIELD = re.compile(r"^(job|replica|task|device|cpu|gpu):?(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class DeviceSpec:
    """The parts of a device name; ``None`` where the name leaves a part unset."""

    job: str | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, name: str) -> "DeviceSpec":
        """Parse ``/job:ps/replica:0/task:1/device:GPU:0`` (any part may be missing; ``cpu:0`` works)."""
        job = task = dtype = index = None
        parts = [p for p in name.strip().split("/") if p]
        for part in parts:
            m = _FIELD.match(part)
            if not m:
                raise ValueError(f"device {name!r}: cannot parse {part!r}; expected /job:<name>/task:<n>/CPU:<n>")
            key, rest = m.group(1).lower(), m.group(2)
            if key == "job":
                if not re.fullmatch(r"[A-Za-z][\w-]*", rest):
                    raise ValueError(f"device {name!r}: bad job name {rest!r}")
                job = rest
            elif key in ("replica", "task"):
                if not rest.isdigit():
                    raise ValueError(f"device {name!r}: {key} must be a non-negative integer, got {rest!r}")
                if key == "task":
                    task = int(rest)
            else:
                kind, _, idx = (rest if key == "device" else f"{key}:{rest}").partition(":")
                if kind.upper() not in ("CPU", "GPU") or (idx and not idx.isdigit()):
                    raise ValueError(f"device {name!r}: unknown device {part!r}; expected CPU:<n> or GPU:<n>")
                dtype, index = kind.upper(), int(idx or 0)
        return cls(job, task, dtype, index)

    def merged_with(self, other: "DeviceSpec") -> "DeviceSpec":
        """This spec with every part ``other`` sets replaced by ``other``'s."""
        return replace(self, **{k: v for k, v in other.__dict__.items() if v is not None})

    @property
    def local(self) -> str:
        """The device inside the task (``"CPU:0"``), or "" when the name does not say."""
        return "" if self.device_type is None else f"{self.device_type}:{self.device_index or 0}"

    def to_string(self) -> str:
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.local:
            out += f"/{self.local}" if out else self.local
        return out

    __str__ = to_string


def local_device(name: str) -> str:
    """The local part of a canonical device name: ``"/job:ps/task:0/CPU:0"`` -> ``"CPU:0"``, ``"/job:ps"`` -> ""."""
    return DeviceSpec.from_string(name).local if name else ""
