"""``slim.learning``: the train op slim scripts build (``create_train_op``) and the loop that runs
it (``train``, on a ``tf.train.Supervisor`` as TensorFlow's is)."""

from __future__ import annotations

import logging

from trainer.graph import GraphKeys, control_dependencies, get_default_graph
from trainer.ops import identity
from trainer.supervisor import USE_DEFAULT

__all__ = ["clip_gradient_norms", "create_train_op", "multiply_gradients", "train"]

logger = logging.getLogger("tensorflow")


def clip_gradient_norms(gradients_to_variables, max_norm: float) -> list:
    """Each gradient clipped to the L2 norm ``max_norm`` on its own."""
    from trainer.array_ops import clip_by_norm

    return [(None if g is None else clip_by_norm(g, max_norm), v) for g, v in gradients_to_variables]


def multiply_gradients(grads_and_vars, gradient_multipliers: dict) -> list:
    """Gradients scaled per variable: ``gradient_multipliers`` maps a variable (or its op name) to a factor."""
    from trainer.ops import multiply

    if not gradient_multipliers:
        raise ValueError("multiply_gradients: gradient_multipliers is empty")
    factors = {(k if isinstance(k, str) else k.op.name): f for k, f in gradient_multipliers.items()}
    return [(multiply(g, factors[v.op.name]) if g is not None and v.op.name in factors else g, v)
            for g, v in grads_and_vars]


def create_train_op(total_loss, optimizer, global_step=USE_DEFAULT, update_ops=None, variables_to_train=None,
                    transform_grads_fn=None, summarize_gradients: bool = False, gate_gradients=1,
                    aggregation_method=None, colocate_gradients_with_ops: bool = False, gradient_multipliers=None,
                    clip_gradient_norm: float = 0, check_numerics: bool = True):
    """A tensor that, when run, runs ``update_ops`` (default: UPDATE_OPS, batch norm's moving
    averages), then one ``optimizer`` step on ``variables_to_train`` (default: the trainable
    variables) with ``global_step`` incremented, and evaluates to ``total_loss``."""
    from trainer.debugging import check_numerics as check_finite
    from trainer.train import get_or_create_global_step
    from trainer.variables import trainable_variables

    graph = get_default_graph()
    if global_step is USE_DEFAULT:
        global_step = get_or_create_global_step()
    if update_ops is None:
        update_ops = graph.get_collection(GraphKeys.UPDATE_OPS)
    if update_ops:
        with control_dependencies(list(update_ops)):
            total_loss = identity(total_loss)
    if variables_to_train is None:
        variables_to_train = trainable_variables()
    grads = optimizer.compute_gradients(total_loss, var_list=variables_to_train)
    if transform_grads_fn is not None:
        grads = transform_grads_fn(grads)
    if gradient_multipliers:
        grads = multiply_gradients(grads, gradient_multipliers)
    if clip_gradient_norm > 0:
        grads = clip_gradient_norms(grads, clip_gradient_norm)
    step = optimizer.apply_gradients(grads, global_step=global_step)
    with control_dependencies([step]):
        train_op = check_finite(total_loss, "LossTensor is inf or nan") if check_numerics else identity(total_loss)
    if not any(op is train_op for op in graph.get_collection(GraphKeys.TRAIN_OP)):
        graph.add_to_collection(GraphKeys.TRAIN_OP, train_op)
    return train_op


def train(train_op, logdir, train_step_fn=None, train_step_kwargs=None, log_every_n_steps: int = 1, graph=None,
          master: str = "", is_chief: bool = True, global_step=None, number_of_steps: int | None = None,
          init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT, init_fn=None, ready_op=USE_DEFAULT,
          summary_op=USE_DEFAULT, save_summaries_secs: float = 600, summary_writer=USE_DEFAULT,
          startup_delay_steps: int = 0, saver=None, save_interval_secs: float = 600, sync_optimizer=None,
          session_config=None, session_wrapper=None, trace_every_n_steps=None, ignore_live_threads: bool = False):
    """Run ``train_op`` until ``number_of_steps`` global steps (or the input ends), starting from
    ``logdir``'s newest checkpoint, else from the initializers and ``init_fn(session)``;
    checkpoints every ``save_interval_secs`` and at the end. Returns the last loss."""
    from trainer.supervisor import Supervisor
    from trainer.train import get_global_step

    unsupported = {"train_step_fn": train_step_fn, "sync_optimizer": sync_optimizer,
                   "session_wrapper": session_wrapper, "trace_every_n_steps": trace_every_n_steps}
    named = [k for k, v in unsupported.items() if v is not None]
    if named:
        raise NotImplementedError(f"slim.learning.train: {', '.join(named)} not supported")
    if logdir is None and is_chief and (save_interval_secs or save_summaries_secs):
        raise ValueError("slim.learning.train: logdir is None; pass save_interval_secs=0 and save_summaries_secs=0 "
                         "to train without writing")
    graph = graph or train_op.graph
    with graph.as_default():
        global_step = global_step if global_step is not None else get_global_step()
        if global_step is None:
            raise ValueError("slim.learning.train: the graph has no global step (create_train_op makes one)")
        supervisor = Supervisor(graph=graph, is_chief=is_chief, logdir=logdir, init_op=init_op,
                                init_feed_dict=init_feed_dict, local_init_op=local_init_op, ready_op=ready_op,
                                summary_op=summary_op, summary_writer=summary_writer, global_step=global_step,
                                saver=saver if saver is not None else USE_DEFAULT,
                                save_summaries_secs=save_summaries_secs, save_model_secs=save_interval_secs,
                                init_fn=init_fn)
    loss = None
    with supervisor.managed_session(master, config=session_config) as sess:
        step = sess.run(global_step)
        while not supervisor.should_stop() and (number_of_steps is None or step < number_of_steps):
            loss, step = sess.run([train_op, global_step])
            if log_every_n_steps and step % log_every_n_steps == 0:
                logger.info("global step %d: loss = %.4f", step, loss)
        if logdir and is_chief and supervisor.saver is not None:
            supervisor.saver.save(sess, supervisor.save_path, global_step=global_step)
    return loss


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.slim.learning", name, globals())
