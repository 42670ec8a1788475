"""Checkpoint files that are corrupt, stale or moved: errors that name the file, never unpickling,
rotation that never deletes what it should not; and variables that keep their dtype.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import trainer as T
from trainer.saver import CheckpointError


_VALUES = {
    "i64": np.arange(6, dtype=np.int64).reshape(2, 3) - 3,
    "flags": np.array([True, False, True]),
    "half": np.array([1.5, -2.0, 65504.0], np.float16),
    "scope/scalar": np.float64(3.25),
    "empty": np.zeros((0, 3), np.float32),
    "i32": np.array([2**31 - 1, -(2**31)], np.int32),
}


def _model(values=_VALUES, max_to_keep=5):
    g = T.Graph()
    with g.as_default():
        vs = {name: T.Variable(np.asarray(v), name=name) for name, v in values.items()}
        init = T.global_variables_initializer()
        saver = T.Saver(max_to_keep=max_to_keep)
    s = T.Session(g)
    s.run(init)
    return s, vs, saver


def test_checkpoint_round_trip_is_exact_for_every_dtype(tmp_path):
    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"), global_step=1)
    zeros = {k: np.zeros_like(np.asarray(v)) for k, v in _VALUES.items()}
    s2, vs2, saver2 = _model(zeros)
    saver2.restore(s2, path)
    for name, want in _VALUES.items():
        got = s2.run(vs2[name].tensor)
        assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cut", ["empty", "header", "half", "tail"])
def test_truncated_checkpoint_is_a_checkpoint_error_naming_the_file(tmp_path, cut):
    s, _, saver = _model()
    data = Path(saver.save(s, str(tmp_path / "m")) + ".ckpt").read_bytes()
    n = {"empty": 0, "header": 10, "half": len(data) // 2, "tail": len(data) - 5}[cut]
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(data[:n])
    with pytest.raises(CheckpointError, match="bad.ckpt"):
        saver.restore(s, str(bad))


@pytest.mark.parametrize("content", ["flipped", "npy", "text"])
def test_corrupt_checkpoint_is_a_checkpoint_error(tmp_path, content):
    s, _, saver = _model()
    bad = tmp_path / "bad.ckpt"
    if content == "flipped":
        data = bytearray(Path(saver.save(s, str(tmp_path / "m")) + ".ckpt").read_bytes())
        data[len(data) // 3: len(data) // 3 + 16] = b"\xff" * 16
        bad.write_bytes(bytes(data))
    elif content == "npy":
        with open(bad, "wb") as f:
            np.save(f, np.arange(3))
    else:
        bad.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="bad.ckpt"):
        saver.restore(s, str(bad))


def test_mismatched_checkpoint_names_the_variable(tmp_path):
    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"))
    other = dict(_VALUES, i64=np.zeros((3, 2), np.int64), extra=np.float32(1))
    s2, vs2, saver2 = _model(other)
    with pytest.raises(CheckpointError) as err:
        saver2.restore(s2, path)
    assert "'i64'" in str(err.value) and "(3, 2)" in str(err.value) and "'extra' is missing" in str(err.value)
    assert s2.run(vs2["flags"].tensor).tolist() == [True, False, True]  # nothing was half-restored


def test_restore_never_unpickles(tmp_path, monkeypatch):
    import pickle

    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"))

    def refuse(*a, **k):
        raise AssertionError("pickle used while loading a checkpoint")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    saver.restore(s, path)
    assert T.latest_checkpoint(str(tmp_path)) == path


@pytest.mark.parametrize("index", ["garbage{", "[1, 2]", "null", '""', '{"all_model_checkpoint_paths": [3, null]}'])
def test_malformed_checkpoint_index_is_ignored(tmp_path, index):
    (tmp_path / "checkpoint").write_text(index)
    assert T.latest_checkpoint(str(tmp_path)) is None
    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"), global_step=1)
    assert T.latest_checkpoint(str(tmp_path)) == path


def test_rotation_never_deletes_files_a_corrupt_index_spells_out(tmp_path, monkeypatch):
    # A string where the path list belongs was iterated letter by letter, and rotation deleted
    # files named "a" and "b" in the current directory.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for name in ("a", "b"):
        (cwd / name).write_text("precious")
    ckdir = tmp_path / "ck"
    ckdir.mkdir()
    (ckdir / "checkpoint").write_text('{"all_model_checkpoint_paths": "ab"}')
    s, _, saver = _model(max_to_keep=1)
    saver.save(s, str(ckdir / "m"), global_step=1)
    assert (cwd / "a").exists() and (cwd / "b").exists()


def test_latest_checkpoint_after_directory_is_moved(tmp_path):
    s, _, saver = _model()
    saver.save(s, str(tmp_path / "run" / "m"), global_step=1)
    path = saver.save(s, str(tmp_path / "run" / "m"), global_step=2)
    os.rename(tmp_path / "run", tmp_path / "moved")
    latest = T.latest_checkpoint(str(tmp_path / "moved"))
    assert latest == str(tmp_path / "moved" / os.path.basename(path))
    saver.restore(s, latest)


def test_latest_checkpoint_resolves_relative_entries_against_the_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s, _, saver = _model()
    saver.save(s, os.path.join("ck", "m"), global_step=7)  # the index records a cwd-relative path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a fresh process started somewhere else
    assert T.latest_checkpoint(str(tmp_path / "ck")) == str(tmp_path / "ck" / "m-7")
    (tmp_path / "ck" / "checkpoint").write_text('{"model_checkpoint_path": "m-7"}')  # TF-style: a relative prefix
    assert T.latest_checkpoint(str(tmp_path / "ck")) == str(tmp_path / "ck" / "m-7")
    (tmp_path / "ck" / "checkpoint").write_text('{"model_checkpoint_path": "m-7.ckpt"}')  # older flowstack: the file
    assert T.latest_checkpoint(str(tmp_path / "ck")) == str(tmp_path / "ck" / "m-7")


def test_max_to_keep_rotation_and_stale_entries(tmp_path):
    s, _, saver = _model(max_to_keep=2)
    paths = [saver.save(s, str(tmp_path / "m"), global_step=i) for i in range(4)]
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == ["m-2.ckpt", "m-3.ckpt"]
    os.unlink(paths[-1] + ".ckpt")  # the newest vanished: fall back to the newest that exists, and say so
    with pytest.warns(T.saver.CheckpointWarning, match="'m-3.ckpt': .*does not exist"):
        assert T.latest_checkpoint(str(tmp_path)) == paths[-2]


def test_restore_in_fresh_process(tmp_path):
    s, _, saver = _model()
    saver.save(s, str(tmp_path / "m"), global_step=3)
    script = textwrap.dedent(f"""
        import numpy as np, trainer as T
        g = T.Graph()
        with g.as_default():
            v = T.Variable(np.zeros((2, 3), np.int64), name="i64")
            saver = T.Saver([v])
        s = T.Session(g)
        saver.restore(s, T.latest_checkpoint({str(tmp_path)!r}))
        print(s.run(v.tensor).sum())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(int(_VALUES["i64"].sum()))


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_damaged_graph_file_is_a_graph_error_naming_it(tmp_path, damage):
    s, _, saver = _model()
    saver.save(s, str(tmp_path / "m"))
    graph_file = tmp_path / "graph.npz"
    if damage == "truncated":
        graph_file.write_bytes(graph_file.read_bytes()[:100])
    else:
        graph_file.unlink()
    with pytest.raises(T.GraphError, match="graph.npz"):
        T.import_graph(str(tmp_path))


def test_python_float64_scalar_keeps_its_dtype_in_variable():
    # np.float64 subclasses float; Variable treated it as a Python float and made float32.
    with T.Graph().as_default():
        assert T.Variable(np.float64(0.8)).dtype == np.float64
        assert T.Variable(0.8).dtype == np.float32
        assert T.constant(np.float64(0.8)).dtype == T.Variable(np.float64(0.8)).dtype
