"""ClusterSpec and TF_CONFIG parsing: the Kubeflow training operator's format, and clear errors."""

from __future__ import annotations

import json

import pytest

import trainer as T
from trainer.distributed.cluster import ClusterConfigError

CLUSTER = {"chief": ["c:1"], "ps": ["p0:2", "p1:2"], "worker": ["w0:3", "w1:3"]}


def tf_config(task_type="worker", index=1, cluster=CLUSTER, **extra):
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}, **extra})}


def test_cluster_spec_accessors():
    spec = T.train.ClusterSpec(CLUSTER)
    assert spec.jobs == ["chief", "ps", "worker"]
    assert spec.as_dict() == CLUSTER
    assert spec.job_tasks("ps") == ["p0:2", "p1:2"]
    assert spec.num_tasks("worker") == 2
    assert spec.task_address("worker", 1) == "w1:3"
    assert T.train.ClusterSpec(spec) == spec
    assert spec.tasks()[0] == "/job:chief/task:0"


def test_sparse_jobs_keep_their_indices():
    spec = T.train.ClusterSpec({"worker": {1: "w1:3", 3: "w3:3"}})
    assert spec.task_indices("worker") == [1, 3]
    assert spec.as_dict() == {"worker": {1: "w1:3", 3: "w3:3"}}
    with pytest.raises(ClusterConfigError, match="task index 0 is out of range for job 'worker'"):
        spec.task_address("worker", 0)


@pytest.mark.parametrize("cluster, message", [
    ({"ps": "h:1"}, "job 'ps': expected a list"),
    ({"ps": ["h"]}, "job 'ps' task 0: address 'h' is not 'host:port'"),
    ({"bad name": ["h:1"]}, "job name 'bad name'"),
    (["h:1"], "cluster must be a dict"),
])
def test_bad_cluster_specs_name_the_field(cluster, message):
    with pytest.raises(ClusterConfigError, match=message):
        T.train.ClusterSpec(cluster)


def test_unknown_job_is_named():
    with pytest.raises(ClusterConfigError, match="job 'evaluator' is not in this cluster"):
        T.train.ClusterSpec(CLUSTER).num_tasks("evaluator")


def test_tf_config_as_the_training_operator_sets_it():
    r = T.train.TFConfigClusterResolver(tf_config(environment="cloud"))
    assert (r.task_type, r.task_id) == ("worker", 1)
    assert r.cluster_spec().as_dict() == CLUSTER
    assert r.master() == "grpc://w1:3"
    assert r.master("ps", 0) == "grpc://p0:2"
    assert r.environment == "cloud"


def test_tf_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", tf_config("ps", 0)["TF_CONFIG"])
    r = T.train.TFConfigClusterResolver()
    assert (r.task_type, r.task_id) == ("ps", 0)


@pytest.mark.parametrize("environ, message", [
    ({}, "TF_CONFIG is not set"),
    ({"TF_CONFIG": "{'cluster': 1}"}, "TF_CONFIG is not valid JSON: .* line 1 column 2"),
    ({"TF_CONFIG": "[]"}, "TF_CONFIG must be a JSON object"),
    ({"TF_CONFIG": json.dumps({"task": {"type": "ps", "index": 0}})}, r"TF_CONFIG.cluster is missing"),
    ({"TF_CONFIG": json.dumps({"cluster": CLUSTER})}, r"TF_CONFIG.task is missing"),
    ({"TF_CONFIG": json.dumps({"cluster": CLUSTER, "task": {"index": 0}})}, r"TF_CONFIG.task.type is missing"),
    (tf_config("worker", 2), r"TF_CONFIG.task.index 2 is out of range for job 'worker', which has 2 task"),
    (tf_config("worker", "1"), r"TF_CONFIG.task.index '1' is not an integer"),
    (tf_config("evaluator", 0), r"TF_CONFIG.task.type 'evaluator' is not a job of TF_CONFIG.cluster \(jobs: chief, ps, worker\)"),
    (tf_config(cluster={"ps": ["nohost"]}), r"TF_CONFIG.cluster: cluster job 'ps' task 0"),
])
def test_bad_tf_config_names_the_field(environ, message):
    with pytest.raises(ClusterConfigError, match=message):
        T.train.TFConfigClusterResolver(environ)
