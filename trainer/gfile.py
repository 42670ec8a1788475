"""``tf.gfile``: TensorFlow 1.x's file helpers on the local file system."""

from __future__ import annotations

import glob as _glob
import os
import shutil

__all__ = ["Copy", "DeleteRecursively", "Exists", "FastGFile", "GFile", "Glob", "IsDirectory", "ListDirectory",
           "MakeDirs", "MkDir", "Open", "Remove", "Rename", "Stat", "Walk"]


class GFile:
    """``open`` with TensorFlow's extras (``size()``); text or binary by ``mode``, as ``open``."""

    def __init__(self, name: str, mode: str = "r"):
        self.name = name
        self._f = open(name, mode)  # noqa: SIM115 - closed by close()/__exit__

    def __getattr__(self, attr):
        return getattr(self._f, attr)

    def __iter__(self):
        return iter(self._f)

    def size(self) -> int:
        return os.path.getsize(self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


Open = FastGFile = GFile


def Exists(filename: str) -> bool:  # noqa: N802 - TF's names
    return os.path.exists(filename)


def IsDirectory(dirname: str) -> bool:  # noqa: N802
    return os.path.isdir(dirname)


def MakeDirs(dirname: str) -> None:  # noqa: N802
    os.makedirs(dirname, exist_ok=True)


def MkDir(dirname: str) -> None:  # noqa: N802
    os.mkdir(dirname)


def ListDirectory(dirname: str) -> list[str]:  # noqa: N802
    return os.listdir(dirname)


def Glob(filename: str) -> list[str]:  # noqa: N802
    return sorted(_glob.glob(filename))


def Remove(filename: str) -> None:  # noqa: N802
    os.remove(filename)


def DeleteRecursively(dirname: str) -> None:  # noqa: N802
    shutil.rmtree(dirname)


def Rename(oldname: str, newname: str, overwrite: bool = False) -> None:  # noqa: N802
    if os.path.exists(newname) and not overwrite:
        raise FileExistsError(f"{newname} exists; pass overwrite=True")
    os.replace(oldname, newname)


def Copy(oldpath: str, newpath: str, overwrite: bool = False) -> None:  # noqa: N802
    if os.path.exists(newpath) and not overwrite:
        raise FileExistsError(f"{newpath} exists; pass overwrite=True")
    shutil.copyfile(oldpath, newpath)


def Stat(filename: str) -> os.stat_result:  # noqa: N802
    return os.stat(filename)


def Walk(top: str, in_order: bool = True):  # noqa: N802
    yield from os.walk(top, topdown=in_order)
