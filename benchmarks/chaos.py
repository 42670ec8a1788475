"""Chaos runs: a job under ``LocalJob`` (the launcher) with tasks SIGKILLed on a schedule.

Each run trains ``chaos_task.py`` (softmax regression on digits, 1 PS + n workers) with the chief
checkpointing every ``save_steps`` steps, kills tasks when the job reaches given global steps (or,
for ``at="save"``, as the chief starts a save), and reports the exit status, the test accuracy, the
restarts, the global step each restarted chief resumed from and the steps lost (the step reached
before the kill minus the step resumed from; at most the steps since the last checkpoint).

    python benchmarks/chaos.py --schedules 10            # 10 seeded random schedules, 1 PS + 3 workers
    python benchmarks/chaos.py --schedules 3 --seed 3 --baseline 0.9639   # schedules 3-5, no baseline run
"""

from __future__ import annotations

import argparse
import io
import random
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from trainer.distributed.launcher import LocalJob  # noqa: E402

TASK = Path(__file__).with_name("chaos_task.py")
_LINE = re.compile(r"^\[([\w:]+)\] (.*)$")


@dataclass
class Kill:
    label: str          # "ps:0", "worker:1"
    at: int | str       # a global step, or "save" (as the chief starts its first save after step `after`)
    after: int = 0


@dataclass
class ChaosResult:
    code: int
    elapsed: float
    accuracy: float | None
    restarts: int
    resumed_from: list[int] = field(default_factory=list)
    lost_steps: list[int] = field(default_factory=list)
    since_checkpoint: list[int] = field(default_factory=list)
    restored_equal: list[bool] = field(default_factory=list)
    killed_at: list[float] = field(default_factory=list)  # monotonic times of the kills
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (time, task, line)
    log: str = ""


class _Watcher(io.TextIOBase):
    """The launcher's output: parsed for progress, kills fired when their moment comes."""

    def __init__(self, kills: list[Kill]):
        self.kills = list(kills)
        self.job: LocalJob | None = None
        self.step = 0
        self.last_saved = 0
        self.result = ChaosResult(0, 0.0, None, 0)
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._step_at_kill: list[tuple[int, int]] = []  # (global step reached, last checkpoint step)

    def write(self, text: str) -> int:
        with self._lock:
            for line in text.splitlines():
                self._lines.append(line)
                self._see(line)
        return len(text)

    def _see(self, line: str) -> None:
        m = _LINE.match(line)
        if not m:
            return
        task, msg = m.groups()
        now = time.monotonic()
        self.result.events.append((now, task, msg))
        saving = None
        if s := re.match(r"saving checkpoint at step (\d+)", msg):
            saving = int(s.group(1))
            self.step = max(self.step, saving)
        elif s := re.match(r"global step (\d+)$", msg):
            self.step = max(self.step, int(s.group(1)))
        if s := re.match(r"restored step (\d+); values equal the checkpoint: (\w+)", msg):
            resumed = int(s.group(1))
            self.result.resumed_from.append(resumed)
            self.result.restored_equal.append(s.group(2) == "True")
            if self._step_at_kill:
                reached, saved = self._step_at_kill.pop(0)
                self.result.lost_steps.append(max(0, reached - resumed))
                self.result.since_checkpoint.append(max(0, reached - saved))
            self.step = resumed
        if s := re.match(r"test accuracy ([\d.]+)", msg):
            self.result.accuracy = float(s.group(1))
        if "restarting it" in msg and task == "launcher":
            self.result.restarts += 1
        for kill in list(self.kills):
            due = (saving is not None and saving > kill.after) if kill.at == "save" else self.step >= kill.at
            if due:
                self.kills.remove(kill)
                self._step_at_kill.append((self.step, self.last_saved))
                self.result.killed_at.append(now)
                threading.Thread(target=self.job.kill, args=(kill.label,), daemon=True).start()
        if saving is not None:
            self.last_saved = saving

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)


def run_job(kills: list[Kill], *, workers: int = 2, steps: int = 300, save_steps: int = 40,
            sync_backups: int | None = None, timeout: float = 150.0, max_restarts: int = 3,
            logdir: str | None = None, extra: tuple[str, ...] = ()) -> ChaosResult:
    """Run one job with ``kills``; its ``ChaosResult``."""
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        watcher = _Watcher(kills)
        job = LocalJob(ps=1, workers=workers, timeout=timeout, grace=15.0, out=watcher, max_restarts=max_restarts)
        watcher.job = job
        command = [sys.executable, str(TASK), "--logdir", logdir or f"{tmp}/ckpt", "--steps", str(steps),
                   "--save-steps", str(save_steps), *extra]
        if sync_backups is not None:
            command += ["--sync-backups", str(sync_backups)]
        t0 = time.monotonic()
        code = job.run(command)
        result = watcher.result
        result.code, result.elapsed, result.log = code, time.monotonic() - t0, watcher.text()
        return result


def random_schedule(seed: int, workers: int, steps: int) -> list[Kill]:
    """One or two kills of random tasks at random steps (seeded)."""
    rng = random.Random(seed)
    labels = ["ps:0"] + [f"worker:{i}" for i in range(workers)]
    count = rng.choice((1, 2))
    moments = sorted(rng.sample(range(steps // 6, steps * 2 // 3), count))
    return [Kill(rng.choice(labels), at) for at in moments]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedules", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--baseline", type=float, default=None,
                   help="the no-failure run's accuracy, from an earlier run (skips that run; to split a long series)")
    args = p.parse_args(argv)
    base = ChaosResult(0, 0.0, args.baseline, 0)
    if args.baseline is None:
        base = run_job([], workers=args.workers, steps=args.steps)
        print(f"no failures: status {base.code}, accuracy {base.accuracy}, {base.elapsed:.1f} s", flush=True)
    bad = 0
    for i in range(args.schedules):
        kills = random_schedule(args.seed + i, args.workers, args.steps)
        r = run_job(kills, workers=args.workers, steps=args.steps)
        ok = (r.code == 0 and r.accuracy is not None and base.accuracy is not None
              and abs(r.accuracy - base.accuracy) <= 0.005
              and all(lost <= since for lost, since in zip(r.lost_steps, r.since_checkpoint)))
        bad += not ok
        print(f"schedule {args.seed + i}: kills {[(k.label, k.at) for k in kills]} -> status {r.code}, accuracy "
              f"{r.accuracy}, restarts {r.restarts}, resumed from {r.resumed_from}, lost steps {r.lost_steps} "
              f"(steps since the last checkpoint {r.since_checkpoint}), {r.elapsed:.1f} s: {'ok' if ok else 'FAILED'}",
              flush=True)
    print(f"{args.schedules - bad} of {args.schedules} schedules finished within 0.5 points of the no-failure run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
