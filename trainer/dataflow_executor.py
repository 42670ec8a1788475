"""The frame-aware dataflow executor for plans with control flow.

Every value carries a tag: the tuple of (frame, iteration) pairs of the loops it lives in (``()``
outside all loops). A step runs at a tag once all its inputs for that tag have arrived, so
iterations of a loop body overlap as far as their data dependencies allow. Switch sends its data
to one output and a *dead* marker to the other; a step with a dead input is skipped and its
outputs are dead, so an untaken branch costs nothing. Merge fires on its first live input (or
dead if all are dead). Enter moves a value into iteration 0 of a child frame (a constant Enter
into every iteration), NextIteration into the next iteration, Exit back to the parent frame;
dead values never leave or continue a loop. A Send to another task runs even when its value is
dead and sends the marker (the receiving task's Recv returns it), so a cond may span tasks.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from trainer.errors import GraphError, KernelError, node_error

NORMAL, SWITCH, MERGE, ENTER, EXIT, NEXT, SEND = range(7)
_KINDS = {"Switch": SWITCH, "Merge": MERGE, "Enter": ENTER, "Exit": EXIT, "NextIteration": NEXT, "Send": SEND}


class _Dead:
    __slots__ = ()

    def __repr__(self):
        return "<dead>"


DEAD = _Dead()


class _Meta:
    """Per-plan facts about the steps, computed once and cached on the plan."""

    def __init__(self, plan):
        steps = plan.steps
        self.kind = [(_KINDS.get(s.node.op_type, NORMAL) if s.node.domain == "flowstack" else NORMAL) for s in steps]
        self.frame = [s.attrs.get("frame_name") if k == ENTER else None for s, k in zip(steps, self.kind)]
        self.const_enter = [k == ENTER and bool(s.attrs.get("is_constant")) for s, k in zip(steps, self.kind)]
        self.ctrl_consumers: dict[int, list[int]] = {}
        self.n_deps = []
        for i, s in enumerate(steps):
            owned = sum(1 for slot in s.ins if slot in plan.slot_owner)
            ctrl = plan.controls[i]
            for c in ctrl:
                self.ctrl_consumers.setdefault(c, []).append(i)
            self.n_deps.append(owned + len(ctrl))
        self.initial = [i for i, d in enumerate(self.n_deps) if d == 0]
        self.outs = [((s.outs,) if isinstance(s.outs, int) else s.outs) for s in steps]


def run_dataflow(plan, feed_values, rctx):
    meta = plan.schedule
    if meta is None:
        meta = plan.schedule = _Meta(plan)
    steps = plan.steps
    root = plan.template[:]
    for spec, v in zip(plan.feeds, feed_values):
        root[spec.slot] = v
    owner = plan.slot_owner
    consumers = plan.consumers
    vals: dict = {}
    pending: dict = {}
    dead_ctrl: set = set()
    merge_seen: dict = {}
    ready: deque = deque((i, (), -1) for i in meta.initial)
    frames: dict = {}  # (parent tag, frame name) -> {"iters": set, "consts": [(slot, value)]}

    def notify(ci, tag, dead_control=False):
        key = (ci, tag)
        if dead_control:
            dead_ctrl.add(key)
        left = pending.get(key, meta.n_deps[ci]) - 1
        if left == 0:
            pending.pop(key, None)
            ready.append((ci, tag, -1))
        else:
            pending[key] = left

    def deliver(slot, tag, value):
        vals[(slot, tag)] = value
        for ci, pos in consumers.get(slot, ()):
            if meta.kind[ci] == MERGE:
                key = (ci, tag)
                seen = merge_seen.setdefault(key, [False, 0])
                if seen[0]:
                    continue
                if value is DEAD:
                    seen[1] += 1
                    if seen[1] == len(steps[ci].ins):
                        seen[0] = True
                        ready.append((ci, tag, -2))
                else:
                    seen[0] = True
                    ready.append((ci, tag, pos))
            else:
                notify(ci, tag)

    def finish(si, tag, outputs):
        outs = meta.outs[si]
        for slot, v in zip(outs, outputs):
            deliver(slot, tag, v)
        for ci in meta.ctrl_consumers.get(si, ()):
            notify(ci, tag, dead_control=outputs[0] is DEAD if outputs else False)

    def start_iteration(parent, frame, it_tag):
        fr = frames.setdefault((parent, frame), {"iters": set(), "consts": []})
        if it_tag in fr["iters"]:
            return
        fr["iters"].add(it_tag)
        for slot, v in fr["consts"]:
            deliver(slot, it_tag, v)

    def read(slot, tag):
        if slot in owner:
            return vals.get((slot, tag), DEAD)
        return root[slot]

    while ready:
        si, tag, pos = ready.popleft()
        step = steps[si]
        kind = meta.kind[si]
        n_out = len(meta.outs[si])
        if kind == MERGE:
            if pos == -2:
                finish(si, tag, [DEAD] * n_out)
            else:
                finish(si, tag, [read(step.ins[pos], tag), np.asarray(pos, dtype=np.int32)][:n_out])
            continue
        args = [read(s, tag) for s in step.ins]
        is_dead = (si, tag) in dead_ctrl or any(a is DEAD for a in args)
        if kind == ENTER:
            frame = meta.frame[si]
            child = tag + ((frame, 0),)
            if is_dead:
                continue  # a loop in an untaken branch never starts
            fr = frames.setdefault((tag, frame), {"iters": set(), "consts": []})
            if meta.const_enter[si]:
                slot = meta.outs[si][0]
                fr["consts"].append((slot, args[0]))
                for it in list(fr["iters"]):
                    deliver(slot, it, args[0])
                for ci in meta.ctrl_consumers.get(si, ()):
                    for it in list(fr["iters"]):
                        notify(ci, it)
            else:
                start_iteration(tag, frame, child)
                finish(si, child, [args[0]])
            continue
        if kind == EXIT:
            if not is_dead:
                finish(si, tag[:-1], [args[0]])
            continue
        if kind == NEXT:
            if not is_dead:
                frame, it = tag[-1]
                nxt = tag[:-1] + ((frame, it + 1),)
                start_iteration(tag[:-1], frame, nxt)
                finish(si, nxt, [args[0]])
            continue
        if kind == SEND:
            if tag:  # (passes/frames.py refuses such plans where the graph records its loops)
                raise GraphError(f"{step.node.name!r} sends a value to another task from inside while_loop frame "
                                 f"{tag[-1][0]!r}: values cross tasks only at a loop's boundary")
            step.fn(rctx, DEAD if is_dead else args[0], **step.attrs)
            finish(si, tag, [None] * n_out)
            continue
        if is_dead:
            finish(si, tag, [DEAD] * n_out)
            continue
        if kind == SWITCH:
            data, pred = args
            finish(si, tag, [DEAD, data] if bool(pred) else [data, DEAD])
            continue
        try:
            if step.wants_ctx:
                r = step.fn(rctx, *args, **step.attrs)
            else:
                r = step.fn(*args, **step.attrs)
        except (GraphError, KernelError):
            raise
        except Exception as e:
            raise node_error(step.node, e) from e
        if n_out == 1:
            finish(si, tag, [r[0] if r.__class__ is tuple else r])
        else:
            finish(si, tag, list(r) if isinstance(r, (tuple, list)) else [r])

    out = []
    for i, slot in enumerate(plan.fetch_slots):
        v = read(slot, ())
        if v is DEAD:
            raise GraphError(f"fetched tensor {plan.fetch_names[i]!r} was not computed: it is on an untaken "
                             "branch or its inputs never arrived")
        out.append(v)
    for i in plan.copy_fetch:
        out[i] = out[i].copy()
    return out
