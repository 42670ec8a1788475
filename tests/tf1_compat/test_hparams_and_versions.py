"""``tf.contrib.training.HParams`` as TF 1.x research code uses it, ``tf.__version__`` and
``tf.train.SaverDef``: names scripts reach for in their first lines."""

from __future__ import annotations

import pytest

import trainer as tf


def test_hparams_parse_typed_overrides_as_command_lines_give_them() -> None:
    hparams = tf.contrib.training.HParams(learning_rate=0.1, layers=[64, 32], cell="lstm", use_bn=True, steps=10)
    hparams.parse("learning_rate=1e-3, layers=[8,4,2],use_bn=false,steps=20,layers[0]=16,cell=gru")
    assert hparams.values() == {"learning_rate": 0.001, "layers": [16, 4, 2], "cell": "gru", "use_bn": False,
                                "steps": 20}
    assert hparams.learning_rate == 0.001 and "steps" in hparams and hparams.get("missing", 7) == 7
    hparams.set_hparam("learning_rate", 2)  # an int where a float is: widened
    assert hparams.learning_rate == 2.0 and isinstance(hparams.learning_rate, float)
    hparams.add_hparam("dropout", 0.5)
    restored = tf.contrib.training.HParams(**{k: v for k, v in hparams.values().items()})
    assert restored.parse_json(hparams.to_json()).values() == hparams.values()
    hparams.override_from_dict({"steps": 3})
    assert hparams.steps == 3


@pytest.mark.parametrize("assignment, message", [
    ("steps=2.5", "'steps' is a int"),
    ("nope=1", "unknown hyperparameter 'nope'"),
    ("use_bn=maybe", "'use_bn' is a bool"),
    ("steps[0]=1", "'steps' is not a list"),
    ("layers[5]=1", "the list has 2 elements"),
    ("steps", "could not parse"),
    ("steps=3,use_bn=maybe", "'use_bn' is a bool"),
])
def test_hparams_refuse_values_of_the_wrong_type_naming_them(assignment: str, message: str) -> None:
    hparams = tf.contrib.training.HParams(steps=10, use_bn=True, layers=[1, 2])
    with pytest.raises(ValueError, match=message):
        hparams.parse(assignment)
    assert hparams.values() == {"steps": 10, "use_bn": True, "layers": [1, 2]}  # a failed parse changes nothing


def test_versions_and_saver_def_are_where_scripts_look() -> None:
    assert tf.__version__ == tf.VERSION and tf.__version__.startswith("1.15")
    assert tf.train.SaverDef.V2 == 2 and tf.train.SaverDef.V1 == 1
    with tf.Graph().as_default():
        tf.Variable(1.0, name="v")
        assert tf.train.Saver(write_version=tf.train.SaverDef.V2) is not None
