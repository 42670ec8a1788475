"""Writing a file so that it appears whole or not at all: temp file, fsync, rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable


def atomic_write(path: str | Path, chunks: Iterable[bytes | memoryview]) -> int:
    """Write ``chunks`` to ``path`` atomically; returns the size. A failure leaves no partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    size = 0
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                size += f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return size
