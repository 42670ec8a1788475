"""Placement balance (issue 22, measurement g): bytes per PS task for a model with mixed variable sizes.

    python benchmarks/distributed_placement.py [--ps 3]

Builds the graph under ``replica_device_setter`` with the greedy-by-bytes strategy (ours, the
default) and with round robin (TensorFlow's default; tensorflow#24953 put 93.7 MB on one PS and
0.7 MB on another), and prints the bytes each PS task holds and max/mean for each (target: ours
at most 1.1). Graph building only: no task runs, so the figures are exact, not timings.

The model: a wide-and-deep network with three embedding tables (the largest split in 4 shards by
``fixed_size_partitioner``), a VGG-style conv stack with weight, bias and batch-norm scale per layer
(the three-per-layer pattern round robin lines up on one PS) and dense layers.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trainer  # noqa: E402
from trainer.devices import DeviceSpec  # noqa: E402
from trainer.train import GreedyLoadBalancingStrategy, RoundRobinStrategy, replica_device_setter  # noqa: E402

CONV_CHANNELS = [(3, 64), (64, 64), (64, 128), (128, 128), (128, 256), (256, 256), (256, 256)]
EMBEDDINGS = {"user": (200_000, 32), "item": (50_000, 32), "category": (500, 16)}
DENSE = [(80, 512), (512, 256), (256, 1)]


def build(strategy, num_ps: int) -> trainer.Graph:
    """The model's variables under a replica_device_setter with ``strategy``."""
    from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable

    g = trainer.Graph()
    setter = replica_device_setter(ps_tasks=num_ps, ps_strategy=strategy)
    zeros = lambda shape, dtype=np.float32: np.zeros(shape, dtype)  # noqa: E731 - values do not matter here
    with g.as_default(), trainer.device(setter):
        for name, shape in EMBEDDINGS.items():
            if shape[0] >= 100_000:
                partitioned_variable(f"emb_{name}", shape, initializer=zeros, partitioner=fixed_size_partitioner(4))
            else:
                trainer.Variable(zeros(shape), name=f"emb_{name}")
        for i, (cin, cout) in enumerate(CONV_CHANNELS):
            trainer.Variable(zeros((cout, cin, 3, 3)), name=f"conv{i}/kernel")
            trainer.Variable(zeros((cout,)), name=f"conv{i}/bias")
            trainer.Variable(zeros((cout,)), name=f"conv{i}/bn_scale")
        for i, (fin, fout) in enumerate(DENSE):
            trainer.Variable(zeros((fin, fout)), name=f"dense{i}/kernel")
            trainer.Variable(zeros((fout,)), name=f"dense{i}/bias")
    return g


def bytes_per_task(graph: trainer.Graph, num_ps: int) -> list[int]:
    """Bytes each PS task holds: every Variable node, slots included, by its device's task."""
    per = [0] * num_ps
    for v in trainer.global_variables(graph):
        spec = DeviceSpec.parse(v.node.device)
        assert spec.job == "ps", f"{v.name} is on {v.node.device}, not a PS task"
        per[spec.task] += int(np.prod(v.shape)) * v.dtype.itemsize
    return per


def balance(per: list[int]) -> float:
    return max(per) / (sum(per) / len(per))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ps", type=int, default=3)
    args = p.parse_args(argv)
    results = {}
    for label, strategy in (("ours (greedy by bytes)", GreedyLoadBalancingStrategy(args.ps)),
                            ("peer (round robin, TF's default)", RoundRobinStrategy(args.ps))):
        per = bytes_per_task(build(strategy, args.ps), args.ps)
        results[label] = balance(per)
        mb = ", ".join(f"{b / 1e6:.2f}" for b in per)
        print(f"{label:34s} MB per PS: [{mb}]  max/mean {balance(per):.3f}")
    ours, peer = results.values()
    print(f"max/mean ours/peer: {ours / peer:.3f}  (target: ours <= 1.1)")
    return results


if __name__ == "__main__":
    main()
