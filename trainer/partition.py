"""Partitioning: a plan's steps split per device, each cross-device edge replaced by Send -> Recv.

Each partition runs on its own thread; a Recv blocks until the matching Send has put the value
into the step's ``Rendezvous`` (keyed by tensor and device pair). The distributed runtime reuses
this: a remote rendezvous is a gRPC call instead of a dict.
"""

from __future__ import annotations

from trainer.kernels.training import recv, send

__all__ = ["partition_steps"]


class _SyntheticNode:
    """Stands in for a graph node in error messages for Send/Recv steps the partitioner adds."""

    def __init__(self, name, op_type):
        self.name, self.op_type, self.control_inputs, self.inputs = name, op_type, [], []


def partition_steps(steps, placement, template, session):
    """[(device, steps)] with Send/Recv pairs for every value crossing devices; main partition first."""
    from trainer.executor import Step

    devices = []
    for s in steps:
        if s.device not in devices:
            devices.append(s.device)
    if len(devices) <= 1:
        return [(devices[0] if devices else "CPU:0", steps)]
    producer: dict[int, str] = {}
    for s in steps:
        for o in ((s.outs,) if isinstance(s.outs, int) else s.outs):
            producer[o] = s.device
    parts: dict[str, list] = {d: [] for d in devices}
    received: dict[tuple[int, str], int] = {}
    sent: set = set()
    pending_sends: dict[int, list] = {}
    for s in steps:
        new_ins = []
        for slot in s.ins:
            src = producer.get(slot)
            if src is None or src == s.device:
                new_ins.append(slot)
                continue
            key = (slot, s.device)
            if key not in received:
                name = f"slot{slot}"
                if (slot, s.device) not in sent:
                    sent.add((slot, s.device))
                    attrs = {"tensor_name": name, "send_device": src, "recv_device": s.device, "xp": None}
                    pending_sends.setdefault(slot, []).append(
                        Step(_SyntheticNode(f"_send/{name}", "Send"), send, (slot,), _new_slot(template), attrs, True, src)
                    )
                r = _new_slot(template)
                attrs = {"tensor_name": name, "send_device": src, "recv_device": s.device, "xp": None}
                parts[s.device].append(Step(_SyntheticNode(f"_recv/{name}", "Recv"), recv, (), r, attrs, True, s.device))
                received[key] = r
            new_ins.append(received[key])
        s.ins = tuple(new_ins)
        parts[s.device].append(s)
    # Sends go right after their producer, so receivers wake as early as possible.
    for d, lst in parts.items():
        out = []
        for s in lst:
            out.append(s)
            for o in ((s.outs,) if isinstance(s.outs, int) else s.outs):
                out.extend(pending_sends.pop(o, []) if producer.get(o) == d else [])
        parts[d] = out
    main = devices[0]
    ordered = [(main, parts[main])] + [(d, parts[d]) for d in devices if d != main]
    return ordered


def _new_slot(template) -> int:
    template.append(None)
    return len(template) - 1
