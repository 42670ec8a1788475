"""TF_CONFIG for a task running in a Kubernetes pod without the Kubeflow training operator.

The operator injects ``TF_CONFIG`` into every pod of a TFJob. Where it is not installed, the plain
manifests of ``deploy/kubernetes/plain/`` run each task type as an Indexed Job and give every pod
the few facts the operator would have used; this module turns them into the same ``TF_CONFIG``,
byte for byte, and then runs the training command::

    flowstack cluster pod-exec -- python examples/distributed_digits.py

The pod's environment (set by the manifest; ``JOB_COMPLETION_INDEX`` by Kubernetes itself):

==========================  ==============================================================
``FLOWSTACK_JOB_NAME``      the training job's name (the operator's TFJob name)
``FLOWSTACK_REPLICAS``      task counts, ``chief=1,ps=2,worker=4``
``FLOWSTACK_TASK_TYPE``     this pod's task type, one of the above
``JOB_COMPLETION_INDEX``    this pod's index within its type
``POD_NAMESPACE``           the namespace (downward API ``metadata.namespace``)
``FLOWSTACK_TASK_PORT``     the port every task listens on (default 2222, the operator's)
``CUSTOM_CLUSTER_DOMAIN``   appended to the host names when set, as the operator does
==========================  ==============================================================

A task ``<type>`` of index ``i`` is reached at ``<job>-<type>-<i>.<namespace>.svc:<port>``: the
operator's naming, served in the plain variant by one headless Service per task.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Mapping, Sequence

from trainer.distributed.cluster import ClusterConfigError
from trainer.distributed.exit_codes import BAD_CONFIG

__all__ = ["COMMAND_NOT_RUNNABLE", "DEFAULT_TASK_PORT", "EVALUATOR_JOB", "exec_with_tf_config", "task_host",
           "tf_config_from_pod"]

# What a shell answers for a command it cannot run: permanent under the ExitCode restart policy.
COMMAND_NOT_RUNNABLE = 127

DEFAULT_TASK_PORT = 2222
# The operator leaves evaluators out of the cluster: they do not take part in training steps.
EVALUATOR_JOB = "evaluator"


def task_host(job_name: str, task_type: str, index: int, namespace: str, domain: str = "") -> str:
    """The DNS name of one task's Service, as the operator names it."""
    host = f"{job_name}-{task_type}-{index}.{namespace}.svc"
    return f"{host}.{domain}" if domain else host


def _require(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "").strip()
    if not value:
        raise ClusterConfigError(f"{name} is not set in the pod's environment (the manifest sets it; see "
                                 "trainer/distributed/pod_config.py)")
    return value


def _replica_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in text.split(","):
        task_type, sep, count = item.strip().partition("=")
        if not sep or not task_type or not count.strip().isdigit():
            raise ClusterConfigError(f"FLOWSTACK_REPLICAS item {item.strip()!r} is not TYPE=COUNT "
                                     "(e.g. FLOWSTACK_REPLICAS=ps=1,worker=2)")
        if task_type in counts:
            raise ClusterConfigError(f"FLOWSTACK_REPLICAS names {task_type!r} twice")
        counts[task_type] = int(count)
    return counts


def _int_field(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name, "").strip()
    if not text and default is not None:
        return default
    if not text.isdigit():
        raise ClusterConfigError(f"{name}={text!r} is not a non-negative integer")
    return int(text)


def tf_config_from_pod(environ: Mapping[str, str] | None = None) -> str:
    """The ``TF_CONFIG`` JSON the Kubeflow training operator would inject into this pod."""
    env = os.environ if environ is None else environ
    job_name = _require(env, "FLOWSTACK_JOB_NAME")
    counts = _replica_counts(_require(env, "FLOWSTACK_REPLICAS"))
    task_type = _require(env, "FLOWSTACK_TASK_TYPE")
    namespace = _require(env, "POD_NAMESPACE")
    index = _int_field(env, "JOB_COMPLETION_INDEX")
    port = _int_field(env, "FLOWSTACK_TASK_PORT", DEFAULT_TASK_PORT)
    domain = env.get("CUSTOM_CLUSTER_DOMAIN", "").strip()
    if task_type not in counts:
        raise ClusterConfigError(f"FLOWSTACK_TASK_TYPE={task_type!r} is not in FLOWSTACK_REPLICAS "
                                 f"({', '.join(counts)})")
    if index >= counts[task_type]:
        raise ClusterConfigError(f"JOB_COMPLETION_INDEX={index} is out of range: FLOWSTACK_REPLICAS gives "
                                 f"{task_type} {counts[task_type]} task(s)")
    cluster = {t: [f"{task_host(job_name, t, i, namespace, domain)}:{port}" for i in range(n)]
               for t, n in sorted(counts.items()) if t != EVALUATOR_JOB}
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}, "environment": "cloud"},
                      separators=(",", ":"))


def exec_with_tf_config(command: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    """Replace this process by ``command`` with TF_CONFIG set (kept as it is where the operator set it).

    Returns only when it cannot: ``exit_codes.BAD_CONFIG`` for a configuration error, 127 for a
    command that cannot be run; both permanent, since a restart of the same pod would fail alike.
    """
    env = dict(os.environ if environ is None else environ)
    if not command:
        print("pod-exec: no command to run: flowstack cluster pod-exec -- python script.py ARGS", file=sys.stderr)
        return BAD_CONFIG
    if not env.get("TF_CONFIG"):
        try:
            env["TF_CONFIG"] = tf_config_from_pod(env)
        except ClusterConfigError as exc:
            print(f"pod-exec: {exc}", file=sys.stderr)
            return BAD_CONFIG
    sys.stdout.flush()
    try:
        os.execvpe(command[0], list(command), env)
    except OSError as exc:
        print(f"pod-exec: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
    return COMMAND_NOT_RUNNABLE
