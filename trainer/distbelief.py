"""The DistBelief baseline (the paper's section 2.1): workers ``get`` every parameter, compute dense
gradients on their copy, ``put`` them back, and the parameter server applies a fixed SGD rule.

Here as three Session runs per step over the same graph the dataflow version trains: ``get``
fetches each variable whole; ``compute`` runs the gradients with the variables' outputs fed with
those copies (so nothing reads the PS during the step); ``put`` feeds the dense gradients to an
ApplyGradientDescent per variable, colocated with it. Under a cluster session each run crosses
tasks, so it moves all parameters and all (densified) gradients every step: the cost the
dataflow version avoids by reading only the rows an embedding lookup needs and applying sparse
updates where the variable lives. ``bytes_per_step`` is that cost.
"""

from __future__ import annotations

import numpy as np

from trainer.gradients import IndexedSlices, gradients
from trainer.graph import TRAINER_DOMAIN
from trainer.ops import constant, convert_to_tensor, group, placeholder
from trainer.variables import trainable_variables

__all__ = ["DistBeliefTrainer"]


class DistBeliefTrainer:
    """``DistBeliefTrainer(loss, learning_rate)``; ``step(sess, feed_dict)`` = get, compute, put."""

    def __init__(self, loss, learning_rate: float, var_list=None, global_step=None, name: str = "distbelief"):
        loss = convert_to_tensor(loss)
        g = loss.graph
        self.loss = loss
        self.var_list = list(var_list) if var_list is not None else trainable_variables(g)
        if not self.var_list:
            raise ValueError("DistBeliefTrainer: no trainable variables")
        with g.as_default(), g.name_scope(name):
            grads = gradients(loss, self.var_list)
            missing = [v.name for v, gr in zip(self.var_list, grads) if gr is None]
            if missing:
                raise ValueError(f"DistBeliefTrainer: the loss does not depend on {missing}")
            # DistBelief's gradients are dense: a sparse one is densified before it is put.
            self.gradients = [gr.to_dense() if isinstance(gr, IndexedSlices) else gr for gr in grads]
            self.grad_inputs = [placeholder(v.dtype, v.shape, name=f"put_{v.op.name.replace('/', '_')}") for v in self.var_list]
            updates = []
            for v, gin in zip(self.var_list, self.grad_inputs):
                with g.colocate_with(v.node):
                    lr = constant(np.asarray(learning_rate, v.dtype))
                    updates.append(g.create_op("ApplyGradientDescent", [v.tensor, lr, gin], {}, domain=TRAINER_DOMAIN,
                                               name=f"apply_{v.op.name.replace('/', '_')}").outputs[0])
            if global_step is not None:
                with g.control_dependencies(updates):
                    updates = [global_step.assign_add(np.asarray(1, global_step.dtype))]
            self.put_op = group(*updates, name="put")

    @property
    def bytes_per_step(self) -> int:
        """Bytes a worker moves per step: every parameter fetched and every gradient sent, whole."""
        return 2 * sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in self.var_list)

    def get(self, sess) -> list[np.ndarray]:
        return sess.run([v.tensor for v in self.var_list])

    def compute(self, sess, params, feed_dict=None) -> tuple[float, list[np.ndarray]]:
        """(loss, dense gradients) on the worker's copy ``params``."""
        feeds = dict(feed_dict or {})
        feeds.update({v.tensor: p for v, p in zip(self.var_list, params)})
        loss, grads = sess.run([self.loss, self.gradients], feeds)
        return loss, grads

    def put(self, sess, grads) -> None:
        sess.run(self.put_op, dict(zip(self.grad_inputs, grads)))

    def step(self, sess, feed_dict=None):
        """One DistBelief step; returns the loss computed on the fetched parameters."""
        loss, grads = self.compute(sess, self.get(sess), feed_dict)
        self.put(sess, grads)
        return loss
