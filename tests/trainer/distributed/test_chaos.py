"""Chaos: tasks SIGKILLed mid-training under the launcher; the job recovers with no user code.

Each run is softmax regression on digits (benchmarks/chaos_task.py) on 1 PS + 2 workers, the chief
checkpointing every 40 steps. A run passes when it finishes with status 0, its test accuracy is
within 0.5 points of a run with no failures, and the steps lost are at most the steps since the
last checkpoint. (benchmarks/chaos.py runs 10 seeded random schedules on 1 PS + 3 workers.)
"""

from __future__ import annotations

import pytest

pytest.importorskip("sklearn")

from benchmarks.chaos import Kill, random_schedule, run_job  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def baseline():
    result = run_job([])
    assert result.code == 0 and result.accuracy is not None, result.log
    return result


def check_recovered(result, baseline, restarts: int) -> None:
    assert result.code == 0, result.log
    assert result.elapsed < 150
    assert result.restarts >= restarts, result.log
    assert result.accuracy is not None and abs(result.accuracy - baseline.accuracy) <= 0.005, result.log
    assert all(lost <= since for lost, since in zip(result.lost_steps, result.since_checkpoint)), result.log
    print(f"accuracy {result.accuracy} (no failures: {baseline.accuracy}), restarts {result.restarts}, resumed from "
          f"{result.resumed_from}, lost steps {result.lost_steps} (since the last checkpoint "
          f"{result.since_checkpoint}), {result.elapsed:.1f} s")


def test_a_ps_killed_mid_step_restarts_and_holds_exactly_the_checkpoint(baseline):
    result = run_job([Kill("ps:0", 100)])
    check_recovered(result, baseline, restarts=1)
    assert result.resumed_from and result.lost_steps, result.log
    assert "ps:0 exited with status 137 (retryable); restarting it" in result.log
    assert "exiting with status 138 so that the launcher restarts this task" in result.log
    # the chief read the restarted PS's variables before any step: bit for bit the checkpoint's
    assert result.restored_equal == [True] * len(result.restored_equal), result.log


def test_a_worker_killed_during_async_training_leaves_the_others_going(baseline):
    result = run_job([Kill("worker:1", 100)])
    check_recovered(result, baseline, restarts=1)
    assert result.resumed_from == [], result.log  # nobody restored: the PS and the chief went on
    assert "worker:1 exited with status 137 (retryable); restarting it" in result.log


def test_a_worker_killed_during_sync_training_with_one_backup(baseline):
    result = run_job([Kill("worker:1", 100)], sync_backups=1)
    check_recovered(result, baseline, restarts=1)


def test_the_chief_killed_as_it_saves_resumes_from_the_previous_checkpoint(baseline):
    result = run_job([Kill("worker:0", "save", after=80)])
    check_recovered(result, baseline, restarts=1)
    assert result.resumed_from, result.log


def test_a_seeded_random_schedule_on_one_ps_and_three_workers(baseline):
    # full-batch steps: the no-failure accuracy does not depend on the number of workers
    result = run_job(random_schedule(3, workers=3, steps=300), workers=3)
    check_recovered(result, baseline, restarts=1)


def test_a_task_that_keeps_failing_ends_the_job_after_max_restarts():
    result = run_job([Kill("worker:1", 30), Kill("worker:1", 60)], max_restarts=1, timeout=100)
    assert result.code == 137, result.log
    assert "worker:1 failed with exit status 137 after 1 restart(s) (--max-restarts 1); stopping the job" in result.log
