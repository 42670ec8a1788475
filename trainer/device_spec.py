"""Device names with a task part: ``/job:ps/task:0``, ``/job:worker/task:1/CPU:0``.

A device name has an optional task part (job, replica, task) and an optional local part (the
device inside that task, ``CPU:0`` or ``GPU:0``). ``DeviceSpec`` parses and prints them as
TensorFlow 1.x does (``/job:ps/replica:0/task:0/device:CPU:0``; a name without job or task
prints as its local part) and merges nested scopes: ``inner.merged_over(outer)`` keeps the parts
``inner`` sets and fills in the rest from ``outer``. The API matches the branch dist-runtime's
``trainer.devices.DeviceSpec`` so one can replace the other.

A single-process Session runs every task's nodes itself and only looks at the local part.
"""

from __future__ import annotations

import re
from dataclasses import astuple, dataclass

__all__ = ["DeviceSpec", "local_device"]

_PART = re.compile(r"^(?:(job):([A-Za-z_][\w-]*)|(replica):(\d+)|(task):(\d+)|(?:device:)?(cpu|gpu)(?::(\d+))?)$",
                   re.IGNORECASE)


@dataclass(frozen=True)
class DeviceSpec:
    """The parts of a device name; ``None`` where the name leaves a part unset."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def parse(cls, name: str) -> "DeviceSpec":
        """Parse ``/job:ps/replica:0/task:1/device:GPU:0`` (any part may be missing; ``cpu:0`` works)."""
        fields: dict = {}
        for part in (p for p in (name or "").strip().split("/") if p):
            m = _PART.match(part)
            if m is None:
                raise ValueError(f"unknown device {name!r}: cannot parse {part!r}; expected /job:<name>, "
                                 f"/replica:<n>, /task:<n> and a device CPU:<n> or GPU:<n>")
            if m.group(1):
                fields["job"] = m.group(2)
            elif m.group(3):
                fields["replica"] = int(m.group(4))
            elif m.group(5):
                fields["task"] = int(m.group(6))
            else:
                fields["device_type"], fields["device_index"] = m.group(7).upper(), int(m.group(8) or 0)
        return cls(**fields)

    def merged_over(self, outer: "DeviceSpec") -> "DeviceSpec":
        """This spec with its unset parts filled in from ``outer``."""
        return DeviceSpec(*(mine if mine is not None else theirs for mine, theirs in zip(astuple(self), astuple(outer))))

    @property
    def task_name(self) -> tuple[str, int] | None:
        """``(job, task)``, or None where the name names no job or task."""
        if self.job is None and self.task is None:
            return None
        return (self.job, self.task if self.task is not None else 0)

    @property
    def local_name(self) -> str | None:
        """The device inside the task (``"CPU:0"``), None where the name does not say."""
        return None if self.device_type is None else f"{self.device_type}:{self.device_index or 0}"

    def __str__(self) -> str:
        if self.job is None and self.task is None:
            return self.local_name or ""
        out = (f"/job:{self.job}" if self.job is not None else "") + f"/replica:{self.replica or 0}"
        out += f"/task:{self.task}" if self.task is not None else ""
        return out + (f"/device:{self.local_name}" if self.device_type is not None else "")


def local_device(name: str) -> str:
    """The local part of a device name: ``"/job:ps/task:0/CPU:0"`` -> ``"CPU:0"``, ``"/job:ps"`` -> ""."""
    return (DeviceSpec.parse(name).local_name or "") if name else ""
