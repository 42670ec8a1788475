"""TF1 image input pipelines: files written with Pillow (scikit-learn's digits scaled up, synthetic
gradients and noise) decoded in the graph by ``tf.image.decode_*``, resized and batched, through a
WholeFileReader queue and through tf.data; the codecs against Pillow's own decode, round trips and
the errors corrupt bytes give."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from PIL import Image

import trainer as tf
from exporter.freeze import FreezeError, freeze
from tests.tf1_compat.queue_runs import run_to_the_end

pytestmark = pytest.mark.timeout(120)


def _encode(pixels: np.ndarray, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels).save(out, format=fmt, **options)
    return out.getvalue()


def _gradient(height: int = 40, width: int = 56) -> np.ndarray:
    """Smooth RGB ramps with a little noise, so a JPEG is large enough to truncate mid-scan."""
    y, x = np.mgrid[:height, :width]
    noise = np.random.default_rng(0).integers(0, 24, (height, width, 3))
    return np.clip(np.stack([x * 4, y * 5, (x + y) * 2], -1) + noise, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def digit_images():
    """Twenty 8x8 digits scaled up to 32x32 RGB (white on black), with their labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    gray = (d.images[:20] * (255 / 16)).astype(np.uint8)
    big = np.kron(gray, np.ones((4, 4), np.uint8))
    return np.repeat(big[..., None], 3, axis=-1), d.target[:20].astype(np.int64)


def _decode(op, data: bytes):
    contents = tf.placeholder(tf.string, [])
    image = op(contents)
    with tf.Session() as sess:
        return sess.run(image, {contents: data})


def _label_of(name) -> np.int64:
    """The label in a file name "..._<label>.jpg" (py_func hands strings in as bytes or str)."""
    name = np.asarray(name).item()
    return np.int64((name.decode() if isinstance(name, bytes) else name)[-5])


def _classifier(images, labels):
    """A linear model over 16x16x3 standardized images; returns (train_op, loss)."""
    flat = tf.reshape(images, [-1, 16 * 16 * 3])
    w = tf.Variable(tf.zeros([16 * 16 * 3, 10]))
    logits = tf.matmul(flat, w)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return tf.train.GradientDescentOptimizer(0.1).minimize(loss), loss


def test_a_whole_file_reader_pipeline_decodes_resizes_batches_and_trains(tmp_path, digit_images):
    pixels, labels = digit_images
    for i, (image, label) in enumerate(zip(pixels, labels)):
        (tmp_path / f"{i:02d}_{label}.jpg").write_bytes(_encode(image, "JPEG", quality=95))
    filename_queue = tf.train.string_input_producer(tf.train.match_filenames_once(str(tmp_path / "*.jpg")),
                                                    num_epochs=5, shuffle=False)
    key, contents = tf.WholeFileReader().read(filename_queue)
    image = tf.image.decode_jpeg(contents, channels=3)
    assert image.get_shape().as_list() == [None, None, 3]
    image = tf.image.per_image_standardization(tf.image.resize_images(image, [16, 16]))
    label = tf.py_func(_label_of, [key], tf.int64)
    label.set_shape([])
    images, batch_labels = tf.train.batch([image, label], batch_size=10)
    assert images.get_shape().as_list() == [10, 16, 16, 3]
    train_op, loss = _classifier(images, batch_labels)
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        losses = [value for _, value in run_to_the_end(sess, [train_op, loss])]
    assert len(losses) == 10  # 20 files, 5 epochs, batches of 10
    assert losses[-1] < 0.5 * losses[0]


def test_a_dataset_pipeline_reads_any_format_with_decode_image_and_trains(tmp_path, digit_images):
    pixels, labels = digit_images
    formats = ["PNG", "BMP", "JPEG", "GIF"]
    paths = []
    for i, image in enumerate(pixels):
        fmt = formats[i % 4]
        paths.append(str(tmp_path / f"{i:02d}.{fmt.lower()}"))
        (tmp_path / f"{i:02d}.{fmt.lower()}").write_bytes(_encode(image, fmt))

    def load(path, label):
        image = tf.image.decode_image(tf.read_file(path), channels=3, dtype=tf.float32, expand_animations=False)
        return tf.image.resize_images(image, [16, 16]), label

    dataset = tf.data.Dataset.from_tensor_slices((np.array(paths, object), labels)).map(load).repeat(5).batch(10)
    images, batch_labels = dataset.make_one_shot_iterator().get_next()
    train_op, loss = _classifier(images, batch_labels)
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(images)  # the first batch: PNG, BMP, JPEG, GIF, PNG, ...
        for _ in range(9):
            losses.append(sess.run([train_op, loss])[1])
    lossless = pixels[[0, 1, 3, 4]].astype(np.float32) / 255  # PNG, BMP, GIF, PNG: exact before resizing
    np.testing.assert_allclose(first[[0, 1, 3, 4]], lossless[:, ::2, ::2], atol=1e-6)  # nearest pixels at 2x
    assert np.abs(first[2] - pixels[2, ::2, ::2] / 255).mean() < 0.03  # JPEG: within its loss
    assert losses[-1] < 0.5 * losses[0]


def test_decoders_match_pillow_exactly_and_the_source_within_jpeg_loss():
    source = _gradient()
    jpeg = _encode(source, "JPEG", quality=90)
    pillow_rgb = np.asarray(Image.open(io.BytesIO(jpeg)))
    decoded = _decode(lambda c: tf.image.decode_jpeg(c, channels=3), jpeg)
    np.testing.assert_array_equal(decoded, pillow_rgb)
    assert np.abs(decoded.astype(int) - source).mean() < 6  # the noise costs JPEG most
    gray = _decode(lambda c: tf.image.decode_jpeg(c, channels=1), jpeg)
    assert gray.shape == (40, 56, 1)
    luma = source.astype(float) @ [0.299, 0.587, 0.114]
    assert np.abs(gray[..., 0] - luma).mean() < 6
    for ratio in (2, 4, 8):
        small = _decode(lambda c, r=ratio: tf.image.decode_jpeg(c, ratio=r, dct_method="INTEGER_ACCURATE"), jpeg)
        assert small.shape == (-(-40 // ratio), -(-56 // ratio), 3)
    assert np.abs(small.astype(int) - source[::8, ::8].astype(int)).mean() < 40  # an 8x8 block's average
    np.testing.assert_array_equal(_decode(tf.io.decode_png, _encode(source, "PNG")), source)
    np.testing.assert_array_equal(_decode(tf.image.decode_bmp, _encode(source, "BMP")), source)
    # TensorFlow's JPEG and PNG decoders take each other's formats
    np.testing.assert_array_equal(_decode(tf.image.decode_jpeg, _encode(source, "PNG")), source)
    np.testing.assert_array_equal(_decode(tf.image.decode_png, jpeg), pillow_rgb)


@pytest.mark.parametrize("channels, expected", [(0, 4), (1, 1), (3, 3), (4, 4)])
def test_png_channels_convert_from_rgba(channels, expected):
    rgba = np.concatenate([_gradient(), np.full((40, 56, 1), 200, np.uint8)], -1)
    image = _decode(lambda c: tf.image.decode_png(c, channels=channels), _encode(rgba, "PNG"))
    assert image.shape == (40, 56, expected)
    if expected >= 3:
        np.testing.assert_array_equal(image, rgba[..., :expected])
    else:
        np.testing.assert_array_equal(image[..., 0], np.asarray(Image.fromarray(rgba[..., :3]).convert("L")))


def test_gray_png_gains_opaque_channels_and_uint16_round_trips_exactly():
    gray = _gradient()[..., :1]
    rgba = _decode(lambda c: tf.image.decode_png(c, channels=4), _encode(gray, "PNG"))
    np.testing.assert_array_equal(rgba, np.concatenate([np.repeat(gray, 3, -1), np.full_like(gray, 255)], -1))
    for channels in (1, 3, 4):
        deep = ((np.arange(40 * 56 * channels, dtype=np.uint64) * 2654435761) % 65536).astype(np.uint16)
        deep = deep.reshape(40, 56, channels)
        image = tf.placeholder(tf.uint16, [40, 56, channels])
        encoded = tf.image.encode_png(image, compression=9)
        outputs = [encoded, tf.image.decode_png(encoded, dtype=tf.uint16), tf.image.decode_png(encoded),
                   tf.image.decode_image(encoded, dtype=tf.float32)]
        with tf.Session() as sess:
            png, back, low, floats = sess.run(outputs, {image: deep})
        assert back.dtype == np.uint16 and back.shape == deep.shape
        np.testing.assert_array_equal(back, deep)
        np.testing.assert_array_equal(low, (deep >> 8).astype(np.uint8))
        np.testing.assert_allclose(floats, deep / 65535.0, rtol=1e-6)
        if channels == 1:  # Pillow reads 16-bit gray exactly: our PNG is a standard one
            np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))), deep[..., 0])
    # and a 16-bit PNG from another encoder (Pillow's, rows filtered), read back exactly
    gray16 = ((np.add.outer(np.arange(40), np.arange(56)) * 977) % 65536).astype(np.uint16)
    out = io.BytesIO()
    Image.fromarray(gray16).save(out, format="PNG", optimize=True)
    np.testing.assert_array_equal(_decode(lambda c: tf.io.decode_png(c, dtype=tf.uint16), out.getvalue())[..., 0],
                                  gray16)


def _png16_with_every_filter(pixels: np.ndarray) -> bytes:
    """A 16-bit RGB PNG whose row y uses filter type y % 5 (None, Sub, Up, Average, Paeth)."""
    import struct
    import zlib

    height, width, _ = pixels.shape
    rows = pixels.astype(">u2").reshape(height, -1).view(np.uint8).astype(np.int64)
    bpp, raw, prior = 6, b"", np.zeros(rows.shape[1], np.int64)
    for y, row in enumerate(rows):
        left = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        corner = np.concatenate([np.zeros(bpp, np.int64), prior[:-bpp]])
        p = left + prior - corner
        pa, pb, pc = abs(p - left), abs(p - prior), abs(p - corner)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, corner))
        guess = [0, left, prior, (left + prior) // 2, paeth][y % 5]
        raw += bytes([y % 5]) + ((row - guess) % 256).astype(np.uint8).tobytes()
        prior = row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def test_a_filtered_16_bit_rgb_png_decodes_exactly_and_a_cut_one_fails():
    pixels = ((np.arange(10 * 7 * 3, dtype=np.uint64) * 40503) % 65536).astype(np.uint16).reshape(10, 7, 3)
    png = _png16_with_every_filter(pixels)
    np.testing.assert_array_equal(_decode(lambda c: tf.image.decode_png(c, dtype=tf.uint16), png), pixels)
    with pytest.raises(tf.errors.InvalidArgumentError, match="DecodePng: corrupt or truncated PNG data: chunk"):
        _decode(lambda c: tf.image.decode_png(c, dtype=tf.uint16), png[:len(png) - 20])


def test_gif_frames_and_decode_image_dispatch_by_magic_bytes():
    frames = [np.full((6, 9, 3), (v, 255 - v, v // 2), np.uint8) for v in (0, 100, 200)]
    out = io.BytesIO()
    Image.fromarray(frames[0]).save(out, format="GIF", save_all=True,
                                    append_images=[Image.fromarray(f) for f in frames[1:]])
    gif = out.getvalue()
    decoded = _decode(tf.image.decode_gif, gif)
    assert decoded.shape == (3, 6, 9, 3)
    np.testing.assert_allclose(decoded.astype(int), np.stack(frames), atol=4)  # the GIF palette's rounding
    assert _decode(lambda c: tf.image.decode_image(c, expand_animations=False), gif).shape == (6, 9, 3)
    source = _gradient()
    by_format = {"PNG": source, "BMP": source, "JPEG": None}
    for fmt, exact in by_format.items():
        data = _encode(source, fmt)
        image = _decode(tf.image.decode_image, data)
        assert image.shape == (40, 56, 3) and image.dtype == np.uint8, fmt
        if exact is not None:
            np.testing.assert_array_equal(image, exact)
        floats = _decode(lambda c: tf.image.decode_image(c, dtype=tf.float32, channels=1), data)
        assert floats.shape == (40, 56, 1) and floats.dtype == np.float32 and 0 <= floats.min() <= floats.max() <= 1
    assert tf.image.decode_image(tf.constant(b"")).get_shape().ndims is None  # 3-D or 4-D: a GIF may be animated
    assert tf.image.decode_image(tf.constant(b""), channels=3, expand_animations=False).get_shape().as_list() == [
        None, None, 3]


def test_jpeg_shape_is_jpeg_crop_and_encode_options():
    source = _gradient()
    image = tf.constant(source)
    encoded = {name: tf.image.encode_jpeg(image, **options) for name, options in {
        "default": {}, "low": {"quality": 20}, "progressive": {"progressive": True, "optimize_size": True},
        "full_chroma": {"chroma_downsampling": False, "density_unit": "cm", "x_density": 72, "y_density": 72},
        "gray": {"format": "grayscale"}}.items() if name != "gray"}
    gray = tf.image.encode_jpeg(tf.constant(source[..., :1]), format="grayscale")
    with tf.Session() as sess:
        data = sess.run(encoded)
        gray_jpeg = sess.run(gray)
        assert sess.run(tf.image.extract_jpeg_shape(data["default"])).tolist() == [40, 56, 3]
        assert sess.run(tf.io.extract_jpeg_shape(gray_jpeg, output_type=tf.int64)).tolist() == [40, 56, 1]
        assert sess.run(tf.io.is_jpeg(data["low"])) and not sess.run(tf.image.is_jpeg(_encode(source, "PNG")))
        crop = sess.run(tf.io.decode_and_crop_jpeg(data["default"], [5, 7, 20, 30], channels=3))
        whole = sess.run(tf.image.decode_jpeg(data["default"]))
    np.testing.assert_array_equal(crop, whole[5:25, 7:37])
    assert len(data["low"]) < len(data["default"])
    assert Image.open(io.BytesIO(data["progressive"])).info.get("progressive") == 1
    full = Image.open(io.BytesIO(data["full_chroma"]))
    assert full.info["jfif_unit"] == 2 and full.info["jfif_density"] == (72, 72)
    for name, jpeg in data.items():
        back = np.asarray(Image.open(io.BytesIO(jpeg)))
        assert np.abs(back.astype(int) - source).mean() < (12 if name == "low" else 6), name
    assert Image.open(io.BytesIO(gray_jpeg)).mode == "L"


def test_corrupt_and_truncated_bytes_raise_invalid_argument_naming_the_op():
    jpeg = _encode(_gradient(), "JPEG", quality=95)
    tall = _encode(_gradient(160, 56), "JPEG", quality=95)  # its first half holds whole rows of blocks
    png = _encode(_gradient(), "PNG")
    cases = [(tf.image.decode_jpeg, b"not an image at all", r"DecodeJpeg: expected JPEG or PNG or GIF data, got data "
                                                           r"starting b'not an i'"),
             (tf.image.decode_image, b"\xff\xd8\xff" + b"\x00" * 40, r"DecodeImage: corrupt or truncated JPEG header"),
             (tf.image.decode_jpeg, tall[:len(tall) // 2], r"DecodeJpeg: corrupt or truncated JPEG data"),
             (tf.image.decode_png, png[:len(png) // 2], r"DecodePng: corrupt or truncated PNG data"),
             (tf.image.decode_bmp, png, r"DecodeBmp: expected BMP data, got PNG data"),
             (lambda c: tf.image.decode_and_crop_jpeg(c, [30, 0, 20, 10]), jpeg,
              r"crop window \[30, 0, 20, 10\] does not fit in the 40x56 image")]
    for op, data, message in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            _decode(op, data)
    recovered = _decode(lambda c: tf.image.decode_jpeg(c, try_recover_truncated=True), tall[:len(tall) // 2])
    assert recovered.shape == (160, 56, 3)
    top = np.asarray(Image.open(io.BytesIO(tall)))[:16]
    np.testing.assert_array_equal(recovered[:16], top)  # the rows that were there decode as they were
    also = _decode(lambda c: tf.image.decode_jpeg(c, acceptable_fraction=0.3), tall[:len(tall) // 2])
    np.testing.assert_array_equal(also, recovered)
    with pytest.raises(ValueError, match="channels must be 0, 1 or 3"):
        tf.image.decode_jpeg(tf.constant(b""), channels=4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="quality must be 0 to 100"):
        with tf.Session() as sess:
            sess.run(tf.image.encode_jpeg(tf.constant(_gradient()), quality=101))


def test_a_missing_pillow_names_the_op_and_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `from PIL import Image` raise ImportError
    with pytest.raises(tf.errors.KernelError, match=r"DecodePng decodes and encodes images with Pillow, which "
                                                    r"is not installed: pip install pillow") as failure:
        _decode(tf.image.decode_png, b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    assert isinstance(failure.value.__cause__, ImportError)


def test_a_served_output_that_decodes_images_is_refused_at_freeze():
    contents = tf.placeholder(tf.string, [], name="jpeg")
    pixels = tf.placeholder(tf.float32, [None, 4, 4, 3], name="pixels")
    decoded = tf.expand_dims(tf.image.resize_images(tf.image.decode_jpeg(contents, channels=3), [4, 4]), 0)
    w = tf.Variable(np.ones([4 * 4 * 3, 2], np.float32))
    from_pixels = tf.matmul(tf.reshape(pixels, [-1, 48]), w, name="logits")
    from_bytes = tf.matmul(tf.reshape(decoded, [-1, 48]), w)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        freeze(sess, inputs={"pixels": pixels}, outputs={"logits": from_pixels})
        with pytest.raises(FreezeError, match=r"flowstack::DecodeJpeg.*training-only op"):
            freeze(sess, inputs={"jpeg": contents}, outputs={"logits": from_bytes})


def test_decoded_images_go_through_the_tf_image_functions():
    image = tf.image.decode_png(tf.constant(_encode(_gradient(), "PNG")), channels=3)
    as_float = tf.image.convert_image_dtype(image, tf.float32)
    fixed = tf.reshape(as_float, [40, 56, 3])
    outputs = {"flip": tf.image.random_flip_left_right(fixed, seed=1), "center": tf.image.central_crop(fixed, 0.5),
               "pad": tf.image.resize_image_with_crop_or_pad(fixed, 48, 48),
               "std": tf.image.per_image_standardization(fixed),
               "nearest": tf.image.resize_nearest_neighbor(fixed[None], [20, 28]),
               "gray": tf.image.rgb_to_grayscale(image)}
    with tf.Session() as sess:
        out = sess.run(outputs)
    source = _gradient() / 255.0
    assert out["flip"].shape == (40, 56, 3) and out["center"].shape == (20, 28, 3) and out["pad"].shape == (48, 48, 3)
    np.testing.assert_allclose(out["nearest"][0], source[::2, ::2], atol=1e-6)
    assert abs(out["std"].mean()) < 1e-4 and out["gray"].shape == (40, 56, 1)
