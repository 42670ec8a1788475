"""Checkpoints that never lose work (issue 23, item 4), one test per case a user met:

- training in a copy of a checkpoint folder (the index once held absolute paths);
- a damaged newest checkpoint (truncated, bytes flipped, emptied);
- a damaged or missing ``checkpoint`` index;
- SIGKILL during a save (temporary leftovers, a kill at each point of the save, kills at random);
- restarting a job that already reached its last step.

Each shows that no step of progress is lost beyond the damaged checkpoint (the model's variable
counts the steps trained, so its value is the progress a restart resumes with) and that no file
outside the run's folder is touched (a sibling checkpoint folder is compared byte for byte).
"""

from __future__ import annotations

import json
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import trainer as T
from tests.trainer.counting_model import counting_model
from trainer.checkpoint_format import checkpoint_damage
from trainer.checkpoint_index import step_of
from trainer.saver import CheckpointWarning

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 50_000  # 200 KB of float32: a flipped byte in the middle of the file lands in the data


def _build(width: int = WIDTH):
    """A model whose variable counts the steps trained: its value is the progress."""
    return counting_model(width, "progress")


def _train(folder: Path, *, last_step: int, save_steps: int = 2, max_to_keep: int = 5, use_hook: bool = False):
    """Train in ``folder`` to global step ``last_step``: (restored step, final step, progress)."""
    g, v, train = _build()
    with g.as_default():
        hooks = [T.train.StopAtStepHook(last_step=last_step)] if use_hook else []
    with T.MonitoredTrainingSession(str(folder), graph=g, hooks=hooks, save_steps=save_steps, save_secs=None,
                                    max_to_keep=max_to_keep, max_steps=None if use_hook else last_step) as sess:
        start = sess.step
        while not sess.should_stop():
            sess.run(train)
        progress = sess.session.run(v)
        assert np.all(progress == progress[0])
        return start, sess.step, int(progress[0])


def _snapshot(root: Path, skip: Path | None = None) -> dict:
    """Every file and folder under ``root`` (but ``skip``): modification time and contents."""
    out = {}
    for p in sorted(root.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        out[p.relative_to(root).as_posix()] = (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None)
    return out


@pytest.fixture
def world(tmp_path):
    """(run folder, a function asserting nothing outside it changed): a sibling checkpoint folder
    trained beforehand sits next to the run and must stay byte-for-byte the same."""
    _train(tmp_path / "sibling", last_step=4)
    run = tmp_path / "run"
    run.mkdir()
    before = _snapshot(tmp_path, skip=run)

    def untouched_outside():
        assert _snapshot(tmp_path, skip=run) == before

    return run, untouched_outside


def _listed(folder: Path) -> list[str]:
    return json.loads((folder / "checkpoint").read_text())["all_model_checkpoint_paths"]


# -- a copy of a checkpoint folder ----------------------------------------------------------------
@pytest.mark.parametrize("index_style", ["relative (this Saver)", "absolute (older Savers)"])
def test_training_in_a_copy_never_reads_or_deletes_the_original(tmp_path, index_style):
    original, copy = tmp_path / "original", tmp_path / "copy"
    _train(original, last_step=10, max_to_keep=2)
    if index_style.startswith("absolute"):
        state = json.loads((original / "checkpoint").read_text())
        (original / "checkpoint").write_text(json.dumps({
            "model_checkpoint_path": str(original / state["model_checkpoint_path"]),
            "all_model_checkpoint_paths": [str(original / n) for n in state["all_model_checkpoint_paths"]]}))
    shutil.copytree(original, copy)
    before = _snapshot(original)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start, end, progress = _train(copy, last_step=20, max_to_keep=2)
    assert (start, end, progress) == (10, 20, 20)  # resumed where the original stopped
    assert _snapshot(original) == before  # the original's checkpoints were neither rotated nor read
    assert _listed(copy) == ["model-18.ckpt", "model-20.ckpt"]
    assert sorted(p.name for p in copy.glob("*.ckpt")) == ["model-18.ckpt", "model-20.ckpt"]
    messages = [str(w.message) for w in caught]
    assert all(issubclass(w.category, CheckpointWarning) for w in caught), messages
    if index_style.startswith("absolute"):
        assert any("outside that folder" in m and str(original) in m for m in messages), messages
    else:
        assert not messages


# -- a damaged newest checkpoint ------------------------------------------------------------------
def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


DAMAGE = {"truncated": _truncate, "bytes flipped": _flip_bytes, "emptied": _empty}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_newest_checkpoint_falls_back_to_the_newest_intact_one(world, damage):
    run, untouched_outside = world
    _train(run, last_step=10)  # checkpoints at steps 2, 4, 6, 8, 10
    DAMAGE[damage](run / "model-10.ckpt")
    assert checkpoint_damage(str(run / "model-10.ckpt")) is not None

    with pytest.warns(CheckpointWarning, match=r"restoring 'model-8.ckpt'.*skipped.*'model-10.ckpt': .*"
                                               r"(damaged|empty|unreadable)"):
        start, end, progress = _train(run, last_step=12)
    assert (start, end, progress) == (8, 12, 12)  # only the damaged checkpoint's steps were lost
    start, _, progress = _train(run, last_step=12)  # the next restart finds step 12 intact, quietly
    assert (start, progress) == (12, 12)
    untouched_outside()


def test_several_damaged_checkpoints_are_each_named_and_skipped(world):
    run, untouched_outside = world
    _train(run, last_step=10)
    for step, damage in zip((10, 8, 6), sorted(DAMAGE)):
        DAMAGE[damage](run / f"model-{step}.ckpt")
    with pytest.warns(CheckpointWarning) as caught:
        assert T.latest_checkpoint(str(run)) == str(run / "model-4")  # the prefix, as TF returns
    message = str(caught[0].message)
    assert all(f"'model-{s}.ckpt'" in message for s in (10, 8, 6)), message
    untouched_outside()


def test_a_checksum_catches_damage_the_archive_cannot_see(world):
    """A variable's bytes changed and the archive's own CRC rewritten to match: only the
    checkpoint's checksum (appended to the meta) tells."""
    import zipfile
    import zlib

    run, untouched_outside = world
    _train(run, last_step=4)
    path = run / "model-4.ckpt"
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    forged = bytearray(members["progress.npy"])
    forged[-4:] = np.float32(99).tobytes()
    members["progress.npy"] = bytes(forged)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:  # a valid archive, CRCs recomputed
        for name, data in members.items():
            z.writestr(name, data)
    with zipfile.ZipFile(path) as z:
        assert zlib.crc32(bytes(forged)) == z.getinfo("progress.npy").CRC
    assert "fails its checksum" in checkpoint_damage(str(path))
    with pytest.warns(CheckpointWarning, match="model-4.ckpt.*fails its checksum"):
        assert T.latest_checkpoint(str(run)) == str(run / "model-2")
    untouched_outside()


# -- a damaged or missing index -------------------------------------------------------------------
INDEX_DAMAGE = {
    "missing": lambda p: p.unlink(),
    "emptied": lambda p: p.write_bytes(b""),
    "truncated": _truncate,
    "garbage": lambda p: p.write_bytes(b"\xff\xfe not json \x00"),
    "not an index": lambda p: p.write_text('{"all_model_checkpoint_paths": "model-10.ckpt"}'),
}


@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE))
def test_a_damaged_or_missing_index_is_rebuilt_from_the_files(world, damage):
    run, untouched_outside = world
    _train(run, last_step=10)
    INDEX_DAMAGE[damage](run / "checkpoint")
    with pytest.warns(CheckpointWarning, match=r"checkpoint index .* is unusable: .*rebuilt it from the 5 "):
        start, end, progress = _train(run, last_step=12)
    assert (start, end, progress) == (10, 12, 12)  # not step 0
    assert _listed(run) == [f"model-{s}.ckpt" for s in (4, 6, 8, 10, 12)]
    untouched_outside()


def test_a_missing_index_and_a_damaged_newest_resume_from_the_newest_intact(world):
    run, untouched_outside = world
    _train(run, last_step=10)
    (run / "checkpoint").unlink()
    _flip_bytes(run / "model-10.ckpt")
    with pytest.warns(CheckpointWarning) as caught:
        start, _, progress = _train(run, last_step=10)
    assert (start, progress) == (8, 10)
    messages = " | ".join(str(w.message) for w in caught)
    assert "rebuilt it from the 5" in messages and "skipped newer checkpoint(s): 'model-10.ckpt'" in messages
    untouched_outside()


def test_a_fresh_folder_starts_at_step_zero_without_a_warning(world):
    run, untouched_outside = world
    assert _train(run, last_step=2) == (0, 2, 2)
    untouched_outside()


# -- SIGKILL during a save ------------------------------------------------------------------------
# The child trains with a checkpoint every step; at ``kill_at`` it dies at one point of the save
# of step KILL_STEP (or, with kill_at "none", runs until the test kills it at a random moment).
_CHILD = textwrap.dedent("""
    import io, os, signal, sys
    sys.path.insert(0, {root!r})
    import trainer as T
    import trainer.checkpoint_index as index
    import trainer.kernels.training as kernels
    import trainer.saver as saver
    from tests.trainer.counting_model import counting_model

    ckdir, kill_at = sys.argv[1], sys.argv[2]
    kill_step, width, max_to_keep = (int(a) for a in sys.argv[3:6])

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def torn_checkpoint(f, arrays):  # half the checkpoint's bytes reached the temporary file
        buf = io.BytesIO()
        real_write_npz(buf, arrays)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        f.flush()
        die()

    def before_index(directory, names):
        die()

    def torn_index(path, write):
        real_atomic_write(path, lambda f: (f.write(b'{{"model_checkpoint_path": "mo'), f.flush(), die()))

    def before_delete(path, *args, **kwargs):
        if str(path).endswith(".ckpt"):
            die()
        real_unlink(path, *args, **kwargs)

    real_write_npz, real_atomic_write, real_unlink = kernels.write_npz, index.atomic_write, os.unlink
    ARM = {{
        "checkpoint write": lambda: setattr(kernels, "write_npz", torn_checkpoint),
        "before index": lambda: setattr(saver, "write_index", before_index),
        "index write": lambda: setattr(index, "atomic_write", torn_index),
        "before delete": lambda: setattr(os, "unlink", before_delete),
        "none": lambda: None,
    }}

    g, v, train = counting_model(width, "progress")
    sess = T.MonitoredTrainingSession(ckdir, graph=g, save_steps=1, save_secs=None, max_to_keep=max_to_keep)
    print("start", sess.step, flush=True)
    while sess.step < 100_000:
        if sess.step + 1 == kill_step:
            ARM[kill_at]()
        sess.run(train)
        print("saved", sess.step, flush=True)  # save_steps=1: the step's checkpoint is complete
""")

KILL_STEP = 4
_REPORT = re.compile(r"^(start|saved) (\d+)\n$")


class Child:
    """The training child process, its output read line by line with timeouts."""

    def __init__(self, run: Path, kill_at: str, width: int, max_to_keep: int):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(root=str(ROOT)), str(run), kill_at, str(KILL_STEP), str(width),
             str(max_to_keep)], cwd=str(run.parent), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.output: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.saved = 0

    def _read(self):
        with self.proc.stdout:
            for line in self.proc.stdout:
                self.output.append(line)
                report = _REPORT.match(line)  # a whole line: a kill may cut the last one short
                if report:
                    self.lines.put([report.group(1), report.group(2)])
        self.lines.put(None)

    def next(self, timeout: float = 60.0) -> list[str] | None:
        """The child's next report (``start N`` or ``saved N``), or None once it exited."""
        item = self.lines.get(timeout=timeout)
        if item is not None and item[0] == "saved":
            self.saved = int(item[1])
        return item

    def wait_saved(self, step: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.saved < step:
            assert self.next(max(deadline - time.monotonic(), 0.01)) is not None, "".join(self.output)[-3000:]

    def finish(self, timeout: float = 60.0) -> int:
        """The child's exit status, once it died and everything it said was read."""
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.reader.join(timeout=timeout)
        while self.next(timeout) is not None:
            pass
        return code


def _newest_intact_step(run: Path) -> int:
    steps = [step_of(p.name) for p in run.glob("*.ckpt") if checkpoint_damage(str(p)) is None]
    return max(steps, default=0)


def _plant_user_files(run: Path) -> dict:
    """Files of the user's in the run folder that look like temporaries but are not the saver's."""
    files = {".tmp-notes.txt-abcdefgh": b"mine", "model.tmp": b"mine too", ".tmp-": b"and this"}
    for name, data in files.items():
        (run / name).write_bytes(data)
    return files


# kill point -> (the step a restart resumes from, a warning it gives or None)
KILL_POINTS = {
    "checkpoint write": (KILL_STEP - 1, None),
    "before index": (KILL_STEP, "newer than the index's newest entry"),
    "index write": (KILL_STEP, "newer than the index's newest entry"),
    "before delete": (KILL_STEP, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", sorted(KILL_POINTS))
def test_sigkill_at_each_point_of_a_save_loses_no_complete_checkpoint(world, kill_at):
    """max_to_keep=1, the case that lost everything: a kill anywhere in a save resumes from the
    newest complete checkpoint on disk, and the next start removes the saver's temporary files."""
    run, untouched_outside = world
    mine = _plant_user_files(run)
    child = Child(run, kill_at, width=WIDTH, max_to_keep=1)
    assert child.finish() == -signal.SIGKILL, "".join(child.output)[-3000:]
    assert child.saved == KILL_STEP - 1
    want_step, warning = KILL_POINTS[kill_at]
    assert _newest_intact_step(run) == want_step

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start, end, progress = _train(run, last_step=KILL_STEP + 2, save_steps=1, max_to_keep=1)
    messages = [str(w.message) for w in caught]
    assert (start, end, progress) == (want_step, KILL_STEP + 2, KILL_STEP + 2)
    if warning is None:
        assert messages == []
    else:
        assert messages and all(warning in m for m in messages), messages
    leftovers = [p.name for p in run.iterdir() if p.name.startswith(".tmp-") and p.name not in mine]
    assert leftovers == []
    assert {name: (run / name).read_bytes() for name in mine} == mine  # only the saver's own pattern went
    assert _listed(run) == [f"model-{KILL_STEP + 2}.ckpt"]
    untouched_outside()


@pytest.mark.slow
def test_a_damaged_only_listed_checkpoint_falls_back_to_one_rotation_left(world):
    """max_to_keep=1, a kill after the index named model-4 but before model-3 was deleted, then
    model-4 damaged: model-3, unlisted but intact, is restored rather than step 0."""
    run, untouched_outside = world
    child = Child(run, "before delete", width=WIDTH, max_to_keep=1)
    assert child.finish() == -signal.SIGKILL, "".join(child.output)[-3000:]
    assert _listed(run) == ["model-4.ckpt"] and (run / "model-3.ckpt").is_file()
    _truncate(run / "model-4.ckpt")
    with pytest.warns(CheckpointWarning, match="restoring 'model-3.ckpt'.*skipped.*'model-4.ckpt'"):
        start, end, progress = _train(run, last_step=5, save_steps=1, max_to_keep=1)
    assert (start, end, progress) == (3, 5, 5)
    untouched_outside()


@pytest.mark.slow
def test_sigkill_at_random_moments_never_resumes_behind_a_complete_checkpoint(world):
    """A real process killed at seeded random moments of a training loop that saves a 13 MB
    checkpoint every step, five times over one folder with max_to_keep=1 (and on, up to fifteen
    times, until a kill has landed in the middle of a save: where kills land depends on the host's
    speed): each restart resumes from the newest complete checkpoint, at or after the last step
    reported saved."""
    run, untouched_outside = world
    rng = random.Random(23)
    width = 3_300_000  # ~13 MB of float32, as in the report
    resumed, torn, kills = 0, 0, 0
    while kills < 5 or (torn == 0 and kills < 15):
        kills += 1
        child = Child(run, "none", width=width, max_to_keep=1)
        report = child.next(timeout=60)
        assert report == ["start", str(resumed)], "".join(child.output)[-3000:]
        child.wait_saved(resumed + 2)
        time.sleep(rng.uniform(0.0, 0.3))
        child.proc.send_signal(signal.SIGKILL)
        assert child.finish() == -signal.SIGKILL, "".join(child.output)[-3000:]
        torn += any(p.name.startswith(".tmp-model-") for p in run.iterdir())  # killed mid-write
        resumed = _newest_intact_step(run)
        assert resumed >= child.saved  # no reported save lost
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert T.latest_checkpoint(str(run)) == str(run / f"model-{resumed}")
        assert all("newer than the index's newest entry" in str(w.message) for w in caught)
    assert torn >= 1  # a save takes most of each step: some kills land in the middle of one
    g, v, _ = _build(width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CheckpointWarning)  # a kill between file and index warns
        with T.MonitoredTrainingSession(str(run), graph=g, save_secs=None, save_steps=None) as sess:
            assert sess.step == resumed and float(sess.session.run(v)[0]) == resumed
            assert not [p for p in run.iterdir() if p.name.startswith(".tmp-")]
    untouched_outside()


# -- restarting a finished job --------------------------------------------------------------------
@pytest.mark.parametrize("stop", ["StopAtStepHook(last_step=20)", "max_steps=20"])
def test_restarting_a_finished_job_takes_no_step(world, stop):
    run, untouched_outside = world
    use_hook = stop.startswith("StopAtStepHook")
    assert _train(run, last_step=20, save_steps=5, use_hook=use_hook) == (0, 20, 20)
    files = _snapshot(run)
    for _ in range(2):
        assert _train(run, last_step=20, save_steps=5, use_hook=use_hook) == (20, 20, 20)
    assert _snapshot(run) == files  # not a step, not a save
    untouched_outside()


def test_estimator_hooks_stop_a_finished_job_before_its_first_step(tmp_path):
    def model_fn(features, labels, mode):
        w = T.Variable(np.zeros((1,), np.float32), name="w")
        loss = T.reduce_sum(T.square(w - 1.0))
        step = T.train.get_or_create_global_step()
        train = T.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        return T.estimator.EstimatorSpec(mode, loss=loss, train_op=train)

    def input_fn():
        return {"x": T.constant(np.zeros((1, 1), np.float32))}, T.constant(np.zeros((1, 1), np.float32))

    est = T.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    for _ in range(3):
        est.train(input_fn, hooks=[T.train.StopAtStepHook(last_step=5)])
        assert est.get_variable_value("global_step") == 5
