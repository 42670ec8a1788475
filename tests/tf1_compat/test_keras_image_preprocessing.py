"""``tf.keras.preprocessing.image.ImageDataGenerator``, as TF 1.x CNN scripts augment images: the
transforms against SciPy's ``affine_transform`` (what Keras itself calls), the array and directory
iterators, and a CNN fitted on augmented digits."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

image = tf.keras.preprocessing.image
ndimage = pytest.importorskip("scipy.ndimage")


def keras_reference(x, theta=0.0, tx=0.0, ty=0.0, shear=0.0, zx=1.0, zy=1.0, fill_mode="nearest"):
    """Keras 2.2's apply_affine_transform, written with SciPy as Keras writes it."""
    t, s = np.deg2rad(theta), np.deg2rad(shear)
    matrix = (np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
              @ np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]])
              @ np.array([[1, -np.sin(s), 0], [0, np.cos(s), 0], [0, 0, 1]])
              @ np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]]))
    h, w = x.shape[:2]
    ox, oy = h / 2 + 0.5, w / 2 + 0.5
    matrix = np.array([[1, 0, ox], [0, 1, oy], [0, 0, 1]]) @ matrix @ np.array([[1, 0, -ox], [0, 1, -oy], [0, 0, 1]])
    channels = [ndimage.affine_transform(x[..., c], matrix[:2, :2], matrix[:2, 2], order=1, mode=fill_mode)
                for c in range(x.shape[-1])]
    return np.stack(channels, axis=-1)


@pytest.mark.parametrize("params", [dict(theta=17), dict(tx=2.5, ty=-1.25), dict(shear=12), dict(zx=0.8, zy=1.3),
                                    dict(theta=-30, tx=1, shear=5, zx=1.1, zy=0.9)])
@pytest.mark.parametrize("fill_mode", ["nearest", "reflect"])
def test_affine_transforms_match_keras_scipy_procedure(params, fill_mode) -> None:
    x = np.random.default_rng(0).random((9, 11, 2))
    ours = image.apply_affine_transform(x, **params, fill_mode=fill_mode)
    np.testing.assert_allclose(ours, keras_reference(x, **params, fill_mode=fill_mode), atol=1e-6)


def test_flips_rescale_and_standardization() -> None:
    x = np.arange(2 * 3 * 1, dtype=np.float32).reshape(2, 3, 1)
    generator = image.ImageDataGenerator(horizontal_flip=True, vertical_flip=True, rescale=0.5)
    flipped = generator.apply_transform(x, {"flip_horizontal": True, "flip_vertical": True})
    np.testing.assert_array_equal(flipped, x[::-1, ::-1])
    np.testing.assert_array_equal(generator.standardize(x), x * 0.5)
    assert np.array_equal(image.ImageDataGenerator().random_transform(x, seed=3), x)  # no transform asked

    samples = np.random.default_rng(1).random((20, 4, 4, 3)).astype(np.float32) * 10
    featurewise = image.ImageDataGenerator(featurewise_center=True, featurewise_std_normalization=True)
    with pytest.raises(ValueError, match="needs fit"):
        featurewise.standardize(samples[0])
    featurewise.fit(samples)
    standardized = np.stack([featurewise.standardize(s) for s in samples])
    np.testing.assert_allclose(standardized.mean(axis=(0, 1, 2)), 0, atol=1e-5)
    np.testing.assert_allclose(standardized.std(axis=(0, 1, 2)), 1, atol=1e-4)


def test_flow_batches_arrays_with_labels_weights_and_subsets() -> None:
    x = np.random.default_rng(2).random((10, 4, 4, 1)).astype(np.float32)
    y = np.arange(10)
    generator = image.ImageDataGenerator(rotation_range=20, validation_split=0.2)
    plain = image.ImageDataGenerator().flow(x, y, batch_size=4, shuffle=False, sample_weight=np.ones(10))
    assert len(plain) == 3
    batch_x, batch_y, weights = plain[2]
    assert batch_x.shape == (2, 4, 4, 1) and batch_y.tolist() == [8, 9] and weights.tolist() == [1, 1]
    np.testing.assert_array_equal(batch_x, x[8:])
    def epoch(iterator):  # a Keras iterator is endless; one epoch is its len() batches
        return [iterator[i][1].tolist() for i in range(len(iterator))]

    first = epoch(generator.flow(x, y, batch_size=3, seed=5, subset="training"))
    again = epoch(generator.flow(x, y, batch_size=3, seed=5, subset="training"))
    assert first == again and sorted(sum(first, [])) == list(range(2, 10))  # the first 20% is validation
    assert epoch(generator.flow(x, y, batch_size=3, shuffle=False, subset="validation")) == [[0, 1]]
    iterator = image.ImageDataGenerator().flow(x, y, batch_size=4, shuffle=False)
    assert [next(iterator)[1].tolist() for _ in range(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="should have rank 4"):
        generator.flow(x[0], y)
    with pytest.raises(ValueError, match="should have the same length"):
        generator.flow(x, y[:3])
    with pytest.raises(ValueError, match="fill_mode"):
        image.ImageDataGenerator(fill_mode="mirror")


def test_flow_from_directory_reads_labelled_folders(tmp_path, digits) -> None:
    pytest.importorskip("PIL")
    for label in (3, 7):
        folder = tmp_path / "train" / f"digit{label}"
        folder.mkdir(parents=True)
        for i, pixels in enumerate(digits["x_train"][digits["y_train"] == label][:5].reshape(-1, 8, 8)):
            image.save_img(str(folder / f"{i}.png"), (pixels * 255).astype(np.uint8)[..., None], scale=False)
    generator = image.ImageDataGenerator(rescale=1 / 255.0)
    iterator = generator.flow_from_directory(str(tmp_path / "train"), target_size=(16, 16), color_mode="grayscale",
                                             batch_size=4, shuffle=False)
    assert iterator.class_indices == {"digit3": 0, "digit7": 1} and iterator.samples == 10
    assert iterator.classes.tolist() == [0] * 5 + [1] * 5
    batch_x, batch_y = iterator[0]
    assert batch_x.shape == (4, 16, 16, 1) and 0 <= batch_x.min() and batch_x.max() <= 1
    assert batch_y.tolist() == [[1, 0]] * 4
    sparse = generator.flow_from_directory(str(tmp_path / "train"), target_size=(8, 8), color_mode="grayscale",
                                           class_mode="sparse", shuffle=False)
    assert sparse[0][1].tolist() == [0] * 5 + [1] * 5
    with pytest.raises(ValueError, match="is not a directory"):
        generator.flow_from_directory(str(tmp_path / "missing"))


def test_a_cnn_fits_on_augmented_digits(digits) -> None:
    tf.set_random_seed(0)
    np.random.seed(0)
    layers = tf.keras.layers
    x_train, x_test = digits["x_train"].reshape(-1, 8, 8, 1), digits["x_test"].reshape(-1, 8, 8, 1)
    model = tf.keras.Sequential([layers.Conv2D(16, 3, padding="same", activation="relu", input_shape=(8, 8, 1)),
                                 layers.MaxPooling2D(2), layers.Flatten(), layers.Dense(10, activation="softmax")])
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    augment = image.ImageDataGenerator(rotation_range=8, width_shift_range=0.1, height_shift_range=0.1)
    model.fit_generator(augment.flow(x_train, digits["y_train"], batch_size=32, seed=0), epochs=6, verbose=0)
    assert model.evaluate(x_test, digits["y_test"], verbose=0)[1] >= 0.85
