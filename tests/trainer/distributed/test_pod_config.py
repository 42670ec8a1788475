"""TF_CONFIG built from a pod's environment (the plain Kubernetes manifests), and its bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trainer.distributed import exit_codes
from trainer.distributed.cluster import ClusterConfigError, TFConfigClusterResolver
from trainer.distributed.pod_config import tf_config_from_pod

POD = {"FLOWSTACK_JOB_NAME": "digits", "FLOWSTACK_REPLICAS": "worker=2,ps=1,evaluator=1",
       "FLOWSTACK_TASK_TYPE": "worker", "JOB_COMPLETION_INDEX": "1", "POD_NAMESPACE": "ml"}


def test_pod_tf_config_names_every_task_as_the_operator_does():
    config = json.loads(tf_config_from_pod(POD))
    assert config == {"cluster": {"ps": ["digits-ps-0.ml.svc:2222"],
                                  "worker": ["digits-worker-0.ml.svc:2222", "digits-worker-1.ml.svc:2222"]},
                      "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    resolver = TFConfigClusterResolver({"TF_CONFIG": tf_config_from_pod(POD)})
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)


def test_port_and_cluster_domain_are_taken_from_the_pod():
    pod = dict(POD, FLOWSTACK_TASK_PORT="3000", CUSTOM_CLUSTER_DOMAIN="cluster.local")
    assert json.loads(tf_config_from_pod(pod))["cluster"]["ps"] == ["digits-ps-0.ml.svc.cluster.local:3000"]


@pytest.mark.parametrize("change,words", [
    ({"FLOWSTACK_JOB_NAME": ""}, "FLOWSTACK_JOB_NAME is not set"),
    ({"FLOWSTACK_REPLICAS": "worker:2"}, "FLOWSTACK_REPLICAS item 'worker:2' is not TYPE=COUNT"),
    ({"FLOWSTACK_REPLICAS": "worker=2,worker=1"}, "names 'worker' twice"),
    ({"FLOWSTACK_TASK_TYPE": "chief"}, "FLOWSTACK_TASK_TYPE='chief' is not in FLOWSTACK_REPLICAS"),
    ({"JOB_COMPLETION_INDEX": "2"}, "JOB_COMPLETION_INDEX=2 is out of range"),
    ({"JOB_COMPLETION_INDEX": "-1"}, "JOB_COMPLETION_INDEX='-1' is not a non-negative integer"),
    ({"FLOWSTACK_TASK_PORT": "http"}, "FLOWSTACK_TASK_PORT='http'"),
])
def test_bad_pod_environment_is_refused_naming_the_variable(change, words):
    with pytest.raises(ClusterConfigError, match=words.replace("(", r"\(").replace("*", r"\*")):
        tf_config_from_pod(dict(POD, **change))


def run_pod_exec(env: dict, *command: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("FLOWSTACK_")}
    return subprocess.run([sys.executable, "-m", "flowstack_cli.main", "cluster", "pod-exec", "--", *command],
                          env=dict(clean, **env), capture_output=True, text=True, timeout=60)


def test_pod_exec_runs_the_command_with_tf_config_set():
    show = [sys.executable, "-c", "import os; print(os.environ['TF_CONFIG'])"]
    result = run_pod_exec(POD, *show)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == tf_config_from_pod(POD)
    given = '{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}}'
    assert run_pod_exec({"TF_CONFIG": given}, *show).stdout.strip() == given   # the operator's wins


def test_pod_exec_failures_exit_with_permanent_codes():
    bad = run_pod_exec(dict(POD, JOB_COMPLETION_INDEX="5"), sys.executable, "-c", "pass")
    assert bad.returncode == exit_codes.BAD_CONFIG and "JOB_COMPLETION_INDEX=5" in bad.stderr
    missing = run_pod_exec(POD, "no-such-command-flowstack")
    assert missing.returncode == 127 and "cannot run 'no-such-command-flowstack'" in missing.stderr
    assert not exit_codes.is_retryable(bad.returncode) and not exit_codes.is_retryable(missing.returncode)
