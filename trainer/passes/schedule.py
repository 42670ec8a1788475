"""Schedule: let independent expensive steps of one step run concurrently (single-device plans).

Steps are grouped in dependency levels; within a level, steps the cost model deems expensive go
to the session's thread pool (NumPy releases the GIL in BLAS and most ufuncs) while the rest run
inline. The level barrier keeps it simple and safe. The result is ``FlatPlan.levels``:
``[(light fast tuples, light Steps, [([heavy fast tuple], [heavy Step]), ...]), ...]``.
"""

from __future__ import annotations

from trainer.passes.fuse_loops import LoopStep
from trainer.plan import FlatPlan, step_outputs

__all__ = ["schedule_levels"]


def schedule_levels(plan: FlatPlan, cost_model, threshold_s: float = 1e-4) -> None:
    """Set ``plan.levels`` for a plan of one local partition and no remote ones."""
    if len(plan.partitions) != 1 or plan.remote_partitions:
        return
    steps = plan.partitions[0][1]
    slot_level: dict = {}
    node_level: dict = {}
    levels: list = []
    for i, st in enumerate(steps):
        lv = 0
        for slot in st.ins:
            lv = max(lv, slot_level.get(slot, -1) + 1)
        for c in st.node.control_inputs:
            lv = max(lv, node_level.get(c, -1) + 1)
        for o in step_outputs(st):
            slot_level[o] = lv
        node_level[st.node] = lv
        while len(levels) <= lv:
            levels.append([])
        levels[lv].append(i)
    fast = plan.fast[0]
    plan.levels = []
    for level in levels:
        heavy = [i for i in level if not isinstance(steps[i].node, LoopStep)
                 and cost_model.estimate(steps[i].node) >= threshold_s]
        light = [i for i in level if i not in heavy]
        plan.levels.append(([fast[i] for i in light], [steps[i] for i in light],
                            [([fast[i]], [steps[i]]) for i in heavy]))
