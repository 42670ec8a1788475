"""Row-index blocks give exactly the order the element-by-element transformations give."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from trainer.data.dataset import shuffle_buffer
from trainer.data.rows import index_blocks, regroup, shuffle_blocks, skip_blocks, take_blocks


def flat(blocks):
    return [i for b in blocks for i in b.tolist()]


@pytest.mark.parametrize("n, size, block", [(1000, 5, 7), (1000, 300, 64), (100, 500, 4096), (3000, 1, 1000)])
def test_shuffle_blocks_reproduces_the_shuffle_buffer_draw_for_draw(n, size, block):
    by_element = list(shuffle_buffer(iter(range(n)), size, np.random.default_rng(11)))
    by_block = flat(shuffle_blocks(index_blocks(n, block), size, np.random.default_rng(11)))
    assert by_block == by_element and sorted(by_block) == list(range(n))


def test_take_skip_and_regroup_match_islice():
    def blocks():
        return index_blocks(50, 6)

    assert flat(take_blocks(blocks(), 13)) == list(range(13))
    assert flat(take_blocks(blocks(), -1)) == list(range(50))
    assert flat(skip_blocks(blocks(), 13)) == list(range(13, 50))
    assert flat(skip_blocks(blocks(), -1)) == []
    groups = [g.tolist() for g in regroup(blocks(), 16)]
    assert groups == [list(itertools.islice(range(50), i, i + 16)) for i in range(0, 50, 16)]
