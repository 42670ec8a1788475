"""The plan compiler's passes, run in this order by ``trainer.executor.compile_plan``:

prune (``prune.py``) -> place (``trainer/placement.py``) -> fuse loops (``fuse_loops.py``) ->
lower (``lower.py``) -> partition by task and device (``partition.py``, which describes each other
task's share with ``subgraph.py``) -> schedule (``schedule.py``). Each is a function of the
previous one's output; see ``trainer/executor.py``.
"""
