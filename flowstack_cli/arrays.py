"""Named arrays from the command line: ``NAME=FILE.npy`` pairs, read without pickle."""

from __future__ import annotations

import numpy as np


def parse_named_arrays(pairs: list[str], flag: str) -> dict[str, np.ndarray]:
    """``["image=x.npy"]`` -> ``{"image": array}``; a malformed pair or unreadable file is a
    ``ValueError`` naming the flag, the pair and the file."""
    arrays: dict[str, np.ndarray] = {}
    for pair in pairs:
        name, sep, file = pair.partition("=")
        if not sep or not name or not file:
            raise ValueError(f"{flag} {pair!r}: expected NAME=FILE.npy")
        if name in arrays:
            raise ValueError(f"{flag} {pair!r}: {name!r} given twice")
        try:
            # allow_pickle=False: an .npy file must never execute code
            arrays[name] = np.load(file, allow_pickle=False)
        except FileNotFoundError:
            raise FileNotFoundError(f"{flag} {pair!r}: {file}: no such file") from None
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"{flag} {pair!r}: {file} is not a readable .npy file ({exc})") from None
        if not isinstance(arrays[name], np.ndarray):  # an .npz archive
            raise ValueError(f"{flag} {pair!r}: {file} is an .npz archive; give one .npy file per name")
    return arrays
