"""``tf.lite`` as a TF1 script ships a trained model: TFLiteConverter from a session or a
SavedModel, post-training quantization by the converter's switches, and tf.lite.Interpreter
running the result as LiteRT's Interpreter would."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

pytest.importorskip("sklearn")
pytestmark = pytest.mark.slow  # each trains an MLP and converts it with the parity checks


def trained_mlp(digits):
    x = tf.placeholder(tf.float32, [None, 64], name="pixels")
    y = tf.placeholder(tf.int64, [None])
    hidden = tf.layers.dense(x, 256, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 10)
    probs = tf.nn.softmax(logits, name="probabilities")
    loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    for i in range(200):
        lo = (i * 64) % 1336
        sess.run(train, {x: digits["x_train"][lo:lo + 64], y: digits["y_train"][lo:lo + 64]})
    return sess, x, probs


def interpret(content: bytes, images: np.ndarray) -> np.ndarray:
    interpreter = tf.lite.Interpreter(model_content=content)
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    interpreter.resize_tensor_input(inp["index"], list(images.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(inp["index"], images)
    interpreter.invoke()
    return interpreter.get_tensor(out["index"])


def test_a_session_converts_and_runs_float_and_quantized(digits):
    sess, x, probs = trained_mlp(digits)
    images = digits["x_test"]
    expected = sess.run(probs, {x: images})
    sizes, agreement = {}, {}
    for scheme in ("float", "dynamic-int8", "float16", "int8"):
        converter = tf.lite.TFLiteConverter.from_session(sess, [x], [probs])
        if scheme != "float":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if scheme == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if scheme == "int8":
            converter.representative_dataset = lambda: ([digits["x_train"][i:i + 1]] for i in range(100))
        content = converter.convert()
        got = interpret(content, images)
        sizes[scheme], agreement[scheme] = len(content), np.mean(got.argmax(1) == expected.argmax(1))
        if scheme == "float":
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    sess.close()
    assert sizes["dynamic-int8"] < sizes["float"] / 2.5 and sizes["float16"] < sizes["float"] / 1.8, sizes
    assert agreement["dynamic-int8"] >= 0.97 and agreement["float16"] >= 0.99 and agreement["int8"] >= 0.95, agreement


def test_a_saved_model_converts_by_its_signature(digits, tmp_path):
    sess, x, probs = trained_mlp(digits)
    expected = sess.run(probs, {x: digits["x_test"][:20]})
    tf.saved_model.simple_save(sess, str(tmp_path / "sm"), {"images": x}, {"scores": probs})
    sess.close()
    content = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm")).convert()
    interpreter = tf.lite.Interpreter(model_content=content)
    assert [d["name"] for d in interpreter.get_input_details()] == ["images"]
    np.testing.assert_allclose(interpret(content, digits["x_test"][:20]), expected, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="no signature 'predict'"):
        tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"), signature_key="predict")


def test_a_representative_dataset_of_the_wrong_arity_is_named(digits):
    sess, x, probs = trained_mlp(digits)
    converter = tf.lite.TFLiteConverter.from_session(sess, [x], [probs])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = tf.lite.RepresentativeDataset(
        lambda: ([digits["x_train"][:1], digits["x_train"][:1]] for _ in range(3)))
    with pytest.raises(ValueError, match=r"yielded 2 arrays; the model has 1 inputs \['pixels'\]"):
        converter.convert()
    sess.close()
