"""Row indices in blocks: what sliced sources and the order-only transformations pass along.

A ``RowSource`` (trainer/data/dataset.py) names its elements by row index; the indices travel as
non-empty 1-D int64 arrays ("blocks") so that shuffle, repeat, take, skip and batch cost a few
NumPy calls per block instead of a generator step per row (issue 21's speed target: per-row Python
over a 64-row batch cost ~40 us of a ~500 us training step). Each function here yields exactly the
order its element-wise counterpart yields; ``shuffle_blocks`` reproduces ``shuffle_buffer`` draw
for draw.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

__all__ = ["SHUFFLE_DRAW_BLOCK", "index_blocks", "regroup", "shuffle_blocks", "skip_blocks", "take_blocks"]

SHUFFLE_DRAW_BLOCK = 256  # random slots drawn at a time by both shuffles (the order depends on it)
_BLOCK = 4096

Blocks = Iterator[np.ndarray]


def index_blocks(n: int, block: int = _BLOCK) -> Blocks:
    """``range(n)`` as blocks."""
    for start in range(0, n, block):
        yield np.arange(start, min(start + block, n), dtype=np.int64)


def take_blocks(blocks: Blocks, count: int) -> Blocks:
    """The first ``count`` indices (all of them if ``count`` < 0)."""
    if count < 0:
        yield from blocks
        return
    left = count
    for b in blocks:
        if left <= 0:
            return
        yield b[:left]
        left -= len(b)


def skip_blocks(blocks: Blocks, count: int) -> Blocks:
    """All but the first ``count`` indices (none if ``count`` < 0)."""
    if count < 0:
        return
    left = count
    for b in blocks:
        if left >= len(b):
            left -= len(b)
            continue
        yield b[left:]
        left = 0


def regroup(blocks: Blocks, size: int) -> Blocks:
    """Blocks of exactly ``size`` indices, the last one shorter if the indices run out."""
    pieces: list[np.ndarray] = []
    have = 0
    for b in blocks:
        while len(b):
            need = size - have
            pieces.append(b[:need])
            have += len(pieces[-1])
            b = b[need:]
            if have == size:
                yield pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
                pieces, have = [], 0
    if pieces:
        yield np.concatenate(pieces)


def shuffle_blocks(blocks: Blocks, size: int, rng: np.random.Generator) -> Blocks:
    """``shuffle_buffer`` over indices: fill ``size`` slots, then each index replaces a random slot's."""
    buf = np.empty(0, dtype=np.int64)
    draws = np.empty(0, dtype=np.int64)  # the slots still to use, in the order of use
    for block in blocks:
        if len(buf) < size:
            fill = size - len(buf)
            buf = np.concatenate([buf, block[:fill]])
            block = block[fill:]
        while len(block):
            if not len(draws):
                draws = rng.integers(size, size=SHUFFLE_DRAW_BLOCK)[::-1]  # shuffle_buffer pops from the end
            k = min(len(block), len(draws))
            yield _replace(buf, draws[:k], block[:k])
            draws, block = draws[k:], block[k:]
    if len(buf):
        yield buf[rng.permutation(len(buf))]  # as shuffle_buffer drains


def _replace(buf: np.ndarray, slots: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Emit ``buf[slots[t]]`` then store ``items[t]`` there, for t in order; ``buf`` is updated in place.

    An emitted value is the item last stored in its slot earlier in this call, else the buffer's:
    sorting the steps by (slot, time) puts each step right after the previous one of its slot.
    """
    order = np.lexsort((np.arange(len(slots)), slots))
    s, it = slots[order], items[order]
    follows = np.zeros(len(s), dtype=bool)
    follows[1:] = s[1:] == s[:-1]
    emitted = buf[s]
    emitted[1:][follows[1:]] = it[:-1][follows[1:]]
    out = np.empty_like(items)
    out[order] = emitted
    last = np.ones(len(s), dtype=bool)
    last[:-1] = ~follows[1:]
    buf[s[last]] = it[last]
    return out

