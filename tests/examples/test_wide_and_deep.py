"""examples/wide_and_deep.py: sharded tables, sparse updates, and a model that learns."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

import wide_and_deep  # noqa: E402

import edge_runtime  # noqa: E402
from flowstack_cli.main import main as cli_main  # noqa: E402
from trainer.saver import latest_checkpoint, load_checkpoint  # noqa: E402


@pytest.mark.slow
def test_wide_and_deep_learns_with_two_shard_tables(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    result = wide_and_deep.main(["--steps", "400", "--logdir", str(tmp_path)])
    _, _, _, labels, _ = wide_and_deep.make_data(60_000)
    majority = max(labels[50_000:].mean(), 1 - labels[50_000:].mean())
    assert result["accuracy"] > majority + 0.1
    assert result["accuracy"] > result["true_model_accuracy"] - 0.1
    _, values = load_checkpoint(latest_checkpoint(str(tmp_path)))
    assert values["deep/user_embedding"].shape == (wide_and_deep.USERS, 8)  # saved whole, by logical name
    assert "deep/user_embedding/Adam" in values and not any("part_" in k for k in values)
    # the sharded lookups freeze and run on the edge runtime (parity checked by the exporter)
    out = tmp_path / "wide_and_deep.flow"
    assert cli_main(["export", str(tmp_path), "--inputs", "users=users,items=items,dense=dense",
                     "--outputs", "logits=logits", "-o", str(out)]) == 0
    users, items, dense, _, _ = wide_and_deep.make_data(50)
    logits = edge_runtime.load(out).run({"users": users, "items": items, "dense": dense})["logits"]
    assert logits.shape == (50,) and np.isfinite(logits).all()


def test_tables_are_two_shards_read_by_gathers_on_each_shard():
    g, m = wide_and_deep.build_model()
    assert [len(t) for t in m["tables"]] == [2, 2, 2, 2]
    shard_names = {v.op.name for t in m["tables"] for v in t}
    gathered = {n.inputs[0].node.name for n in g.nodes if n.op_type == "Gather"}
    assert shard_names <= gathered
    assert not any(n.op_type in ("ApplyAdam", "ApplyAdagrad") and n.inputs[0].node.name in shard_names
                   for n in g.nodes)  # tables get sparse updates only
    assert np.all([any(n.op_type.startswith("SparseApply") and n.inputs[0].node.name == s for n in g.nodes)
                   for s in shard_names])
