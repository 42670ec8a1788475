"""The runnable examples in the trainer's docstrings."""

from __future__ import annotations

import doctest

import pytest

import trainer.devices
import trainer.inputs
import trainer.layers
import trainer.session


@pytest.mark.parametrize("module", [trainer.session, trainer.inputs, trainer.layers, trainer.devices], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
