"""The graph-side distributed benchmarks run and meet their targets at a small size."""

from benchmarks import distributed_modes, distributed_placement


def test_placement_balance_meets_target_where_round_robin_does_not(capsys):
    ours, peer = distributed_placement.main([]).values()
    assert ours <= 1.1 < peer
    assert "max/mean" in capsys.readouterr().out


def test_modes_benchmark_counts_bytes_and_backups_help(capsys):
    result = distributed_modes.main(["--steps", "4"])
    (ours_bytes, _), (db_bytes, _) = result["d"]["ours"], result["d"]["distbelief"]
    table = distributed_modes.USERS * distributed_modes.EMB * 4
    assert db_bytes >= 2 * table  # every parameter and gradient, whole
    assert ours_bytes < table / 100  # the batch's rows, the dense layers and their gradients
    assert result["e"][3] < 0.8 * result["e"][4]
    assert "ours/peer" in capsys.readouterr().out
