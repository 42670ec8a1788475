"""The runnable examples in the TF1-compatibility modules' docstrings."""

from __future__ import annotations

import doctest

import pytest

import trainer.array_ops
import trainer.debugging
import trainer.dtypes
import trainer.flags
import trainer.functional_ops
import trainer.initializers
import trainer.random_ops
import trainer.rnn
import trainer.tensor_shape
import trainer.variable_scopes

MODULES = [trainer.array_ops, trainer.debugging, trainer.dtypes, trainer.flags, trainer.functional_ops, trainer.initializers, trainer.random_ops,
           trainer.rnn, trainer.tensor_shape, trainer.variable_scopes]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
