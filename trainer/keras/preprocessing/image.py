"""``tf.keras.preprocessing.image``: ``ImageDataGenerator`` (random augmentation and standardization of
image batches) with its array and directory iterators, and the image file helpers.

Batches are NumPy arrays, made in the caller's thread; ``fit_generator``/``fit`` take the iterators as
they take any ``keras.utils.Sequence``. Images are channels-last, as in TF 1.x's default.
"""

from __future__ import annotations

import os

import numpy as np

from trainer.keras.image_utils import array_to_img, img_to_array, load_img, save_img
from trainer.keras.preprocessing.affine import FILL_MODES, apply_affine_transform
from trainer.keras.utils import Sequence, to_categorical

__all__ = ["DirectoryIterator", "ImageDataGenerator", "Iterator", "NumpyArrayIterator", "apply_affine_transform",
           "array_to_img", "img_to_array", "load_img", "save_img"]

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".tif", ".tiff", ".gif")
_CLASS_MODES = ("categorical", "binary", "sparse", "input", None)


def _range(value, name: str) -> tuple[float, float]:
    """A (low, high) range from Keras' forms: a number r (-r..r, or 1-r..1+r for zoom) or a pair."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return float(value[0]), float(value[1])
    if isinstance(value, (int, float)):
        return -float(value), float(value)
    raise ValueError(f"`{name}` should be a float or a tuple or list of two floats; received: {value!r}")


class ImageDataGenerator:
    """Random transforms (rotation, shifts, shear, zoom, channel shift, brightness, flips) and
    standardization (rescale, centring, normalization, per sample or from ``fit``) of image batches."""

    def __init__(self, featurewise_center: bool = False, samplewise_center: bool = False,
                 featurewise_std_normalization: bool = False, samplewise_std_normalization: bool = False,
                 zca_whitening: bool = False, zca_epsilon: float = 1e-6, rotation_range: float = 0,
                 width_shift_range=0.0, height_shift_range=0.0, brightness_range=None, shear_range: float = 0.0,
                 zoom_range=0.0, channel_shift_range: float = 0.0, fill_mode: str = "nearest", cval: float = 0.0,
                 horizontal_flip: bool = False, vertical_flip: bool = False, rescale=None,
                 preprocessing_function=None, data_format=None, validation_split: float = 0.0,
                 interpolation_order: int = 1, dtype="float32"):
        if zca_whitening:
            raise NotImplementedError("ImageDataGenerator(zca_whitening=True) is not built in flowstack")
        if data_format not in (None, "channels_last"):
            raise NotImplementedError(f"ImageDataGenerator(data_format={data_format!r}) is not built in flowstack; "
                                      "images are channels_last")
        if fill_mode not in FILL_MODES and fill_mode != "constant":
            raise ValueError(f"fill_mode should be one of {sorted([*FILL_MODES, 'constant'])}; received: {fill_mode!r}")
        if not 0 <= validation_split < 1:
            raise ValueError(f"`validation_split` must be strictly between 0 and 1. Received: {validation_split}")
        self.featurewise_center, self.samplewise_center = featurewise_center, samplewise_center
        self.featurewise_std_normalization = featurewise_std_normalization
        self.samplewise_std_normalization = samplewise_std_normalization
        self.rotation_range, self.shear_range = float(rotation_range), float(shear_range)
        self.width_shift_range, self.height_shift_range = width_shift_range, height_shift_range
        low, high = _range(zoom_range, "zoom_range")
        self.zoom_range = (1 + low, 1 + high) if not isinstance(zoom_range, (list, tuple)) else (low, high)
        if brightness_range is not None and not (isinstance(brightness_range, (list, tuple))
                                                 and len(brightness_range) == 2):
            raise ValueError(f"`brightness_range` should be a tuple or list of two floats; received: {brightness_range!r}")
        self.brightness_range = None if brightness_range is None else tuple(map(float, brightness_range))
        self.channel_shift_range = float(channel_shift_range)
        self.fill_mode, self.cval = fill_mode, cval
        self.horizontal_flip, self.vertical_flip = horizontal_flip, vertical_flip
        self.rescale, self.preprocessing_function = rescale, preprocessing_function
        self.validation_split, self.interpolation_order, self.dtype = validation_split, interpolation_order, dtype
        self.mean = self.std = None

    # -- one image ---------------------------------------------------------------------------
    @staticmethod
    def _shift(shift_range, size: int, rng: np.random.Generator) -> float:
        """Keras' rule: an int or a list picks a value (times a random sign), a float draws uniformly from
        (-range, range); a range below 1 is a fraction of the image's ``size``."""
        if not np.any(shift_range):
            return 0.0
        if isinstance(shift_range, (int, list, tuple, np.ndarray)) and not isinstance(shift_range, bool):
            choices = np.arange(shift_range) if isinstance(shift_range, int) else np.asarray(shift_range)
            shift = float(rng.choice(choices)) * rng.choice([-1, 1])
        else:
            shift = rng.uniform(-shift_range, shift_range)
        return shift * size if np.max(np.abs(shift_range)) < 1 else float(shift)

    def get_random_transform(self, img_shape, seed=None) -> dict:
        """The random parameters for one image of ``img_shape`` (as Keras names them)."""
        rng = np.random.default_rng(seed)
        rows, cols = img_shape[0], img_shape[1]
        zx, zy = (1.0, 1.0) if self.zoom_range == (1.0, 1.0) else rng.uniform(*self.zoom_range, 2)
        return {
            "theta": rng.uniform(-self.rotation_range, self.rotation_range) if self.rotation_range else 0.0,
            "tx": self._shift(self.height_shift_range, rows, rng),
            "ty": self._shift(self.width_shift_range, cols, rng),
            "shear": rng.uniform(-self.shear_range, self.shear_range) if self.shear_range else 0.0,
            "zx": float(zx), "zy": float(zy),
            "flip_horizontal": bool(self.horizontal_flip and rng.random() < 0.5),
            "flip_vertical": bool(self.vertical_flip and rng.random() < 0.5),
            "channel_shift_intensity": (rng.uniform(-self.channel_shift_range, self.channel_shift_range)
                                        if self.channel_shift_range else None),
            "brightness": rng.uniform(*self.brightness_range) if self.brightness_range else None,
        }

    def apply_transform(self, x: np.ndarray, transform_parameters: dict) -> np.ndarray:
        """One [rows, cols, channels] image with the given parameters applied."""
        p = transform_parameters
        x = apply_affine_transform(x, p.get("theta", 0), p.get("tx", 0), p.get("ty", 0), p.get("shear", 0),
                                   p.get("zx", 1), p.get("zy", 1), fill_mode=self.fill_mode, cval=self.cval,
                                   order=self.interpolation_order)
        if p.get("channel_shift_intensity") is not None:
            low, high = np.min(x), np.max(x)
            x = np.clip(x + p["channel_shift_intensity"], low, high)
        if p.get("flip_horizontal"):
            x = x[:, ::-1]
        if p.get("flip_vertical"):
            x = x[::-1]
        if p.get("brightness") is not None:
            x = x * p["brightness"]
        return np.ascontiguousarray(x)

    def random_transform(self, x: np.ndarray, seed=None) -> np.ndarray:
        return self.apply_transform(x, self.get_random_transform(x.shape, seed))

    def standardize(self, x: np.ndarray) -> np.ndarray:
        """Rescale, preprocessing function, and centring/normalization, in Keras' order."""
        if self.preprocessing_function is not None:
            x = self.preprocessing_function(x)
        if self.rescale:
            x = x * self.rescale
        if self.samplewise_center:
            x = x - np.mean(x, keepdims=True)
        if self.samplewise_std_normalization:
            x = x / (np.std(x, keepdims=True) + 1e-6)
        if self.featurewise_center:
            if self.mean is None:
                raise ValueError("ImageDataGenerator(featurewise_center=True) needs fit(x) on sample data first")
            x = x - self.mean
        if self.featurewise_std_normalization:
            if self.std is None:
                raise ValueError("ImageDataGenerator(featurewise_std_normalization=True) needs fit(x) first")
            x = x / (self.std + 1e-6)
        return x

    def fit(self, x, augment: bool = False, rounds: int = 1, seed=None) -> None:
        """The per-channel mean and std (``featurewise_*``) of sample images ``x`` [n, rows, cols, channels]."""
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != 4:
            raise ValueError(f"Input to `.fit()` should have rank 4; got array with shape {x.shape}")
        if augment:
            rng = np.random.default_rng(seed)
            x = np.concatenate([np.stack([self.random_transform(img, int(rng.integers(2**31))) for img in x])
                                for _ in range(rounds)])
        self.mean = np.mean(x, axis=(0, 1, 2)).reshape(1, 1, -1)
        self.std = np.std(x, axis=(0, 1, 2)).reshape(1, 1, -1)

    # -- iterators ---------------------------------------------------------------------------
    def flow(self, x, y=None, batch_size: int = 32, shuffle: bool = True, sample_weight=None, seed=None,
             save_to_dir=None, save_prefix: str = "", save_format: str = "png", subset=None) -> "NumpyArrayIterator":
        return NumpyArrayIterator(x, y, self, batch_size, shuffle, sample_weight, seed, subset)

    def flow_from_directory(self, directory, target_size=(256, 256), color_mode: str = "rgb", classes=None,
                            class_mode: str = "categorical", batch_size: int = 32, shuffle: bool = True, seed=None,
                            save_to_dir=None, save_prefix: str = "", save_format: str = "png",
                            follow_links: bool = False, subset=None,
                            interpolation: str = "nearest") -> "DirectoryIterator":
        return DirectoryIterator(directory, self, target_size, color_mode, classes, class_mode, batch_size, shuffle,
                                 seed, follow_links, subset, interpolation)


class Iterator(Sequence):
    """Batches of ``n`` samples by index, reshuffled each epoch; a Sequence and a Python iterator."""

    def __init__(self, n: int, batch_size: int, shuffle: bool, seed):
        if n == 0:
            raise ValueError("the iterator has no samples (an empty array, directory or subset)")
        self.n, self.batch_size, self.shuffle, self.seed = n, int(batch_size), shuffle, seed
        self.epoch, self.batch_index, self.total_batches_seen = 0, 0, 0
        self._order()

    def _order(self) -> None:
        rng = np.random.default_rng(None if self.seed is None else self.seed + self.epoch)
        self.index_array = rng.permutation(self.n) if self.shuffle else np.arange(self.n)

    def __len__(self) -> int:
        return (self.n + self.batch_size - 1) // self.batch_size

    def __getitem__(self, index: int):
        if not 0 <= index < len(self):
            raise ValueError(f"Asked to retrieve element {index}, but the Sequence has length {len(self)}")
        self.total_batches_seen += 1
        return self._batch(self.index_array[index * self.batch_size:(index + 1) * self.batch_size])

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self._order()

    def __iter__(self):
        return self

    def __next__(self):
        if self.batch_index >= len(self):
            self.batch_index = 0
            self.on_epoch_end()
        batch = self[self.batch_index]
        self.batch_index += 1
        return batch

    def next(self):
        return self.__next__()

    def reset(self) -> None:
        self.batch_index = 0

    def _augmented(self, images: list) -> np.ndarray:
        rng = np.random.default_rng(None if self.seed is None else self.seed + self.total_batches_seen)
        out = []
        for x in images:
            x = self.generator.random_transform(np.asarray(x, dtype=self.generator.dtype), int(rng.integers(2**31)))
            out.append(self.generator.standardize(x))
        return np.stack(out).astype(self.generator.dtype)


def _split(n: int, generator: ImageDataGenerator, subset) -> slice:
    """The samples ``subset`` ("training" or "validation", by ``validation_split``) takes, in order."""
    if subset is None:
        return slice(0, n)
    if subset not in ("training", "validation"):
        raise ValueError(f'Invalid subset name: {subset!r}; expected "training" or "validation"')
    if not generator.validation_split:
        raise ValueError(f"subset={subset!r} needs ImageDataGenerator(validation_split=...)")
    cut = int(generator.validation_split * n)
    return slice(0, cut) if subset == "validation" else slice(cut, n)


class NumpyArrayIterator(Iterator):
    """Augmented batches of in-memory images ``x`` [n, rows, cols, channels] (with ``y``, ``sample_weight``)."""

    def __init__(self, x, y, generator: ImageDataGenerator, batch_size: int = 32, shuffle: bool = False,
                 sample_weight=None, seed=None, subset=None):
        x = np.asarray(x, dtype=generator.dtype)
        if x.ndim != 4:
            raise ValueError(f"Input data in `NumpyArrayIterator` should have rank 4; got shape {x.shape}")
        if y is not None and len(x) != len(y):
            raise ValueError(f"`x` (images tensor) and `y` (labels) should have the same length. Found: "
                             f"x.shape = {x.shape}, y.shape = {np.asarray(y).shape}")
        part = _split(len(x), generator, subset)
        self.x = x[part]
        self.y = None if y is None else np.asarray(y)[part]
        self.sample_weight = None if sample_weight is None else np.asarray(sample_weight)[part]
        self.generator = generator
        super().__init__(len(self.x), batch_size, shuffle, seed)

    def _batch(self, indices: np.ndarray):
        batch_x = self._augmented([self.x[i] for i in indices])
        if self.y is None:
            return batch_x
        out = (batch_x, self.y[indices])
        return out + (self.sample_weight[indices],) if self.sample_weight is not None else out


class DirectoryIterator(Iterator):
    """Augmented batches of the images under ``directory``/<class>/, labelled by their subfolder."""

    def __init__(self, directory, generator: ImageDataGenerator, target_size=(256, 256), color_mode: str = "rgb",
                 classes=None, class_mode: str = "categorical", batch_size: int = 32, shuffle: bool = True,
                 seed=None, follow_links: bool = False, subset=None, interpolation: str = "nearest"):
        if class_mode not in _CLASS_MODES:
            raise ValueError(f"Invalid class_mode: {class_mode!r}; expected one of {_CLASS_MODES}")
        if color_mode not in ("grayscale", "rgb", "rgba"):
            raise ValueError(f'Invalid color mode: {color_mode!r}; expected "rgb", "rgba", or "grayscale"')
        directory = os.fspath(directory)
        if not os.path.isdir(directory):
            raise ValueError(f"flow_from_directory: {directory!r} is not a directory")
        self.directory, self.generator, self.class_mode = directory, generator, class_mode
        self.target_size, self.color_mode, self.interpolation = tuple(target_size), color_mode, interpolation
        self.image_shape = self.target_size + ({"grayscale": 1, "rgb": 3, "rgba": 4}[color_mode],)
        if classes is None:
            classes = sorted(d for d in os.listdir(directory) if os.path.isdir(os.path.join(directory, d)))
        self.class_indices = {name: i for i, name in enumerate(classes)}
        self.num_classes = len(classes)
        filenames, labels = [], []
        for name in classes:
            found = []
            for root, _, files in os.walk(os.path.join(directory, name), followlinks=follow_links):
                found += sorted(os.path.relpath(os.path.join(root, f), directory) for f in files
                                if f.lower().endswith(_IMAGE_SUFFIXES))
            part = _split(len(found), generator, subset)
            filenames += found[part]
            labels += [self.class_indices[name]] * len(found[part])
        self.filenames, self.classes = filenames, np.asarray(labels, dtype=np.int32)
        self.samples = len(filenames)
        print(f"Found {self.samples} images belonging to {self.num_classes} classes.")
        super().__init__(self.samples, batch_size, shuffle, seed)

    @property
    def filepaths(self) -> list[str]:
        return [os.path.join(self.directory, f) for f in self.filenames]

    def _batch(self, indices: np.ndarray):
        images = [img_to_array(load_img(os.path.join(self.directory, self.filenames[i]), color_mode=self.color_mode,
                                        target_size=self.target_size, interpolation=self.interpolation))
                  for i in indices]
        batch_x = self._augmented(images)
        labels = {
            "input": lambda: batch_x.copy(),
            "sparse": lambda: self.classes[indices].astype(self.generator.dtype),
            "binary": lambda: self.classes[indices].astype(self.generator.dtype),
            "categorical": lambda: to_categorical(self.classes[indices], self.num_classes).astype(self.generator.dtype),
        }
        if self.class_mode is None:
            return batch_x
        return batch_x, labels[self.class_mode]()
