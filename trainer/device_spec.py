"""``tf.DeviceSpec`` as TensorFlow 1.15 has it: a mutable device name (job, replica, task, device
type and index) with TF's parsing, printing and merging rules.

flowstack's own ``trainer.devices.DeviceSpec`` is a frozen value its placer builds on; this one is
what TF1 scripts construct, edit and pass to ``tf.device`` (which takes its string).
"""

from __future__ import annotations

__all__ = ["DeviceSpec"]

_DEVICE_TYPES = ("CPU", "GPU", "TPU", "XLA_CPU", "XLA_GPU", "TPU_SYSTEM")
_FIELDS = ("job", "replica", "task", "device_type", "device_index")


def _device_type(value):
    """TF keeps the lowercase "cpu"/"gpu" of old names only upper-cased."""
    if value in ("cpu", "gpu"):
        return value.upper()
    return None if value is None else str(value)


def _int_or_none(value, what: str, spec: str):
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"DeviceSpec: {what} must be an integer, got {value!r} in {spec!r}") from None


def _components(spec: str) -> dict:
    """TF 1.15's ``_string_to_components``: a ValueError names an unknown part and the spec."""
    parts: dict = {}
    for piece in (p.split(":") for p in spec.split("/")):
        n = len(piece)
        if n == 2 and piece[0] in ("job", "replica", "task"):
            parts[piece[0]] = piece[1]
        elif n in (1, 2) and piece[0].upper() in _DEVICE_TYPES:
            if "device_type" in parts:
                raise ValueError(f"Cannot specify multiple device types: {spec}")
            parts["device_type"] = piece[0]
            if n == 2 and piece[1] != "*":
                parts["device_index"] = _int_or_none(piece[1], "the device index", spec)
        elif n == 3 and piece[0] == "device":
            if "device_type" in parts:
                raise ValueError(f"Cannot specify multiple device types: {spec}")
            parts["device_type"] = piece[1]
            if piece[2] != "*":
                parts["device_index"] = _int_or_none(piece[2], "the device index", spec)
        elif n and piece[0] != "":
            raise ValueError(f"Unknown attribute: '{piece[0]}' in '{spec}'")
    return parts


class DeviceSpec:
    """``DeviceSpec(job=None, replica=None, task=None, device_type=None, device_index=None)``.

    >>> DeviceSpec.from_string("/job:ps/replica:0/task:1/device:GPU:0").task
    1
    >>> DeviceSpec(job="worker", device_type="cpu").to_string()
    '/job:worker/device:CPU:*'
    """

    def __init__(self, job=None, replica=None, task=None, device_type=None, device_index=None):
        self.job = job
        self.replica = replica
        self.task = task
        self.device_type = device_type
        self.device_index = device_index

    # TF 1.x's DeviceSpec has settable properties that normalize what they are given.
    @property
    def job(self):
        return self._job

    @job.setter
    def job(self, value):
        self._job = None if value is None else str(value)

    @property
    def replica(self):
        return self._replica

    @replica.setter
    def replica(self, value):
        self._replica = _int_or_none(value, "replica", str(value))

    @property
    def task(self):
        return self._task

    @task.setter
    def task(self, value):
        self._task = _int_or_none(value, "task", str(value))

    @property
    def device_type(self):
        return self._device_type

    @device_type.setter
    def device_type(self, value):
        self._device_type = _device_type(value)

    @property
    def device_index(self):
        return self._device_index

    @device_index.setter
    def device_index(self, value):
        self._device_index = _int_or_none(value, "device_index", str(value))

    @classmethod
    def from_string(cls, spec: str) -> "DeviceSpec":
        """Parse ``"/job:<name>/replica:<n>/task:<n>/device:<TYPE>:<n>"`` (any part may be left out;
        ``"CPU:0"``, ``"gpu:1"`` and ``"device:GPU:*"`` name the device)."""
        if not isinstance(spec, str):
            raise TypeError(f"DeviceSpec.from_string: expected a string, got {type(spec).__name__}")
        return cls(**_components(spec))

    def parse_from_string(self, spec: str) -> "DeviceSpec":
        """Set the parts ``spec`` names (TF1's in-place parse); returns self."""
        for field, value in _components(spec).items():
            setattr(self, field, value)
        return self

    def merge_from(self, dev: "DeviceSpec") -> None:
        """Take every part ``dev`` specifies (its parts win over this spec's)."""
        for field in _FIELDS:
            value = getattr(dev, field)
            if value is not None:
                setattr(self, field, value)

    def make_merged_spec(self, dev: "DeviceSpec") -> "DeviceSpec":
        """A new spec: this one with ``dev``'s specified parts merged over it."""
        merged = self.replace()
        merged.merge_from(dev)
        return merged

    def replace(self, **kwargs) -> "DeviceSpec":
        unknown = set(kwargs) - set(_FIELDS)
        if unknown:
            raise TypeError(f"DeviceSpec.replace: unknown fields {sorted(unknown)}; expected some of {_FIELDS}")
        return DeviceSpec(**{field: kwargs.get(field, getattr(self, field)) for field in _FIELDS})

    def to_string(self) -> str:
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.replica is not None:
            out += f"/replica:{self.replica}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.device_type is not None:
            index = "*" if self.device_index is None else str(self.device_index)
            out += f"/device:{self.device_type}:{index}"
        return out

    __str__ = to_string

    def __repr__(self) -> str:
        return f"DeviceSpec({self.to_string()!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, DeviceSpec) and self.to_string() == other.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())
