"""ImageDecoder beyond its ONNX node cases: PNG (every color type and bit depth, every filter type,
Adam7 interlacing), BMP (palettes, 16/24/32-bit, bit fields, top-down rows) and the anymaps decoded
without Pillow and compared with files written independently (by hand or by Pillow); the Pillow
formats with Pillow absent; malformed data and nodes named in the error."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import edge_runtime
from edge_runtime.plan import ExecutionError
from exporter.onnx_import import onnx_to_flow_bytes
from tests.import_guard import edge_only_imports

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(20)
# Pillow's RGB to L, in its fixed point
LUMA = np.array([19595, 38470, 7471], np.uint64)


def _model(pixel_format: str = "RGB") -> bytes:
    node = helper.make_node("ImageDecoder", ["data"], ["image"], name="decode", pixel_format=pixel_format)
    graph = helper.make_graph([node], "decode", [helper.make_tensor_value_info("data", TensorProto.UINT8, [None])],
                              [helper.make_tensor_value_info("image", TensorProto.UINT8, None)])
    return onnx_to_flow_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))


def _decode(data: bytes, pixel_format: str = "RGB") -> np.ndarray:
    return edge_runtime.load(_model(pixel_format)).run({"data": np.frombuffer(data, np.uint8)})["image"]


# ------------------------------------------------------------------------------------ PNG


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _filtered(rows: np.ndarray, bpp: int, first_kind: int) -> bytes:
    """Rows of bytes, row y filtered with type (first_kind + y) % 5, as the PNG spec defines them."""
    out, prior = b"", np.zeros(rows.shape[1], np.int64)
    for y, row in enumerate(rows.astype(np.int64)):
        left = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        corner = np.concatenate([np.zeros(bpp, np.int64), prior[:-bpp]])
        p = left + prior - corner
        pa, pb, pc = abs(p - left), abs(p - prior), abs(p - corner)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, corner))
        kind = (first_kind + y) % 5
        guess = [0, left, prior, (left + prior) // 2, paeth][kind]
        out += bytes([kind]) + ((row - guess) % 256).astype(np.uint8).tobytes()
        prior = row
    return out


def _png(samples: np.ndarray, color: int, depth: int, *, interlace: bool = False, extra: bytes = b"") -> bytes:
    """A PNG of (height, width, channels) samples, every filter type used, optionally Adam7-interlaced."""
    height, width, channels = samples.shape
    bpp = max(1, channels * depth // 8)

    def pack(part: np.ndarray) -> np.ndarray:
        flat = part.reshape(part.shape[0], -1)
        if depth == 16:
            return flat.astype(">u2").view(np.uint8)
        if depth == 8:
            return flat.astype(np.uint8)
        bits = ((flat[..., None] >> np.arange(depth - 1, -1, -1)) & 1).astype(np.uint8)
        return np.packbits(bits.reshape(flat.shape[0], -1), axis=1)

    passes = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1))
    raw = b""
    for i, (y0, x0, dy, dx) in enumerate(passes if interlace else ((0, 0, 1, 1),)):
        part = samples[y0::dy, x0::dx]
        if part.size:
            raw += _filtered(pack(part), bpp, first_kind=i)
    header = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, int(interlace))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + extra + _chunk(b"IDAT", zlib.compress(raw))
            + _chunk(b"IEND", b""))


def _rgb_of(samples: np.ndarray) -> np.ndarray:
    """What an RGB decode gives for stored samples: 16 bits to their high byte, gray repeated, alpha dropped."""
    if samples.dtype == np.uint16:
        samples = (samples >> 8).astype(np.uint8)
    color = samples[..., :3] if samples.shape[-1] >= 3 else samples[..., :1]
    return np.repeat(color, 3, axis=-1) if color.shape[-1] == 1 else color


@pytest.mark.parametrize("color, depth", [(0, 8), (0, 16), (2, 8), (2, 16), (4, 8), (4, 16), (6, 8), (6, 16)])
@pytest.mark.parametrize("interlace", [False, True])
def test_png_color_types_filters_and_interlacing(color, depth, interlace) -> None:
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    samples = RNG.integers(0, 1 << depth, (11, 13, channels)).astype(np.uint16 if depth == 16 else np.uint8)
    np.testing.assert_array_equal(_decode(_png(samples, color, depth, interlace=interlace)), _rgb_of(samples))


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_png_gray_below_a_byte_is_scaled_to_the_full_range(depth) -> None:
    levels = RNG.integers(0, 1 << depth, (9, 19, 1)).astype(np.uint8)
    want = levels * (255 // ((1 << depth) - 1))
    np.testing.assert_array_equal(_decode(_png(levels, 0, depth, interlace=depth == 2), "Grayscale"), want)


def test_png_palette_with_transparency() -> None:
    palette = RNG.integers(0, 256, (5, 3)).astype(np.uint8)
    indices = RNG.integers(0, 5, (7, 10, 1)).astype(np.uint8)
    extra = _chunk(b"PLTE", palette.tobytes()) + _chunk(b"tRNS", bytes([0, 128]))
    got = _decode(_png(indices, 3, 4, extra=extra))
    np.testing.assert_array_equal(got, palette[indices[..., 0]])


def test_png_written_by_pillow_in_each_pixel_format() -> None:
    Image = pytest.importorskip("PIL.Image")
    rgb = (np.add.outer(np.arange(40), np.arange(30))[..., None] * [1, 3, 7] % 256).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG", optimize=True)
    data = out.getvalue()
    np.testing.assert_array_equal(_decode(data), rgb)
    np.testing.assert_array_equal(_decode(data, "BGR"), rgb[..., ::-1])
    gray = np.asarray(Image.fromarray(rgb).convert("L"))[..., None]
    np.testing.assert_array_equal(_decode(data, "Grayscale"), gray)
    np.testing.assert_array_equal(gray, ((rgb.astype(np.uint64) @ LUMA + 0x8000) >> 16)[..., None])


# ------------------------------------------------------------------------------------ BMP


def _bmp(width: int, height: int, bits: int, pixel_rows: list[bytes], *, palette: bytes = b"",
         masks: tuple[int, ...] = (), top_down: bool = False) -> bytes:
    compression = 3 if masks else 0
    stride = (width * bits + 31) // 32 * 4
    body = b"".join(r.ljust(stride, b"\0") for r in (pixel_rows if top_down else pixel_rows[::-1]))
    extra = struct.pack(f"<{len(masks)}I", *masks) + palette
    offset = 14 + 40 + len(extra)
    info = struct.pack("<IiiHHIIiiII", 40, width, -height if top_down else height, 1, bits, compression,
                       len(body), 2835, 2835, len(palette) // 4, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset) + info + extra + body


def test_bmp_24_bit_top_down_and_bottom_up() -> None:
    rgb = RNG.integers(0, 256, (5, 3, 3)).astype(np.uint8)
    rows = [r[:, ::-1].tobytes() for r in rgb]
    for top_down in (False, True):
        np.testing.assert_array_equal(_decode(_bmp(3, 5, 24, rows, top_down=top_down)), rgb)


@pytest.mark.parametrize("bits", [1, 4, 8])
def test_bmp_palettes(bits) -> None:
    colors = RNG.integers(0, 256, (1 << bits, 3)).astype(np.uint8)
    indices = RNG.integers(0, 1 << bits, (4, 9)).astype(np.uint8)
    palette = np.concatenate([colors[:, ::-1], np.zeros((1 << bits, 1), np.uint8)], axis=1).tobytes()
    rows = [np.packbits(((r[:, None] >> np.arange(bits - 1, -1, -1)) & 1).reshape(-1)).tobytes() for r in indices]
    np.testing.assert_array_equal(_decode(_bmp(9, 4, bits, rows, palette=palette)), colors[indices])


def test_bmp_16_bit_565_and_32_bit_bit_fields() -> None:
    r, g, b = RNG.integers(0, 32, (3, 2)), RNG.integers(0, 64, (3, 2)), RNG.integers(0, 32, (3, 2))
    words = (r << 11 | g << 5 | b).astype("<u2")
    got = _decode(_bmp(2, 3, 16, [w.tobytes() for w in words], masks=(0xF800, 0x07E0, 0x001F)))
    np.testing.assert_array_equal(got, np.stack([r * 255 // 31, g * 255 // 63, b * 255 // 31], axis=-1))
    rgb = RNG.integers(0, 256, (3, 2, 3)).astype(np.uint32)
    words = (rgb[..., 0] << 8 | rgb[..., 1] << 16 | rgb[..., 2] << 24).astype("<u4")  # an unusual layout
    got = _decode(_bmp(2, 3, 32, [w.tobytes() for w in words], masks=(0xFF00, 0xFF0000, 0xFF000000)))
    np.testing.assert_array_equal(got, rgb)


# ------------------------------------------------------------------------------------ PNM


def test_anymaps_plain_and_raw() -> None:
    np.testing.assert_array_equal(_decode(b"P1\n# a comment\n3 2\n010\n1 1 0\n", "Grayscale")[..., 0],
                                  [[255, 0, 255], [0, 0, 255]])
    np.testing.assert_array_equal(_decode(b"P2 3 1 4\n0 2 4\n", "Grayscale")[..., 0], [[0, 128, 255]])
    np.testing.assert_array_equal(_decode(b"P3\n1 1\n255\n10 20 30\n"), [[[10, 20, 30]]])
    np.testing.assert_array_equal(_decode(b"P6 2 1 255\n" + bytes(range(6)), "BGR"), [[[2, 1, 0], [5, 4, 3]]])
    np.testing.assert_array_equal(_decode(b"P5 2 1 65535\n" + bytes([1, 2, 255, 255]), "Grayscale")[..., 0], [[1, 255]])
    np.testing.assert_array_equal(_decode(b"P4 10 1\n" + bytes([0b10100000, 0b01000000]), "Grayscale")[0, :, 0],
                                  [0, 255, 0, 255, 255, 255, 255, 255, 255, 0])


# ----------------------------------------------------------------------- Pillow and errors


def test_jpeg_through_pillow_matches_pillow() -> None:
    Image = pytest.importorskip("PIL.Image")
    rgb = (np.add.outer(np.arange(24), np.arange(32))[..., None] * [2, 5, 3] % 256).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="JPEG")
    want = np.asarray(Image.open(io.BytesIO(out.getvalue())))
    np.testing.assert_array_equal(_decode(out.getvalue()), want)


def test_without_pillow_png_decodes_and_jpeg_names_what_to_install(tmp_path) -> None:
    path = tmp_path / "decode.flow"
    path.write_bytes(_model())
    png = _png(np.full((2, 3, 3), 7, np.uint8), 2, 8)
    jpeg = b"\xff\xd8\xff\xe0" + bytes(60)
    script = edge_only_imports() + textwrap.dedent(f"""
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        import edge_runtime
        model = edge_runtime.load({str(path)!r})
        assert model.run({{"data": np.frombuffer({png!r}, np.uint8)}})["image"].tolist() == [[[7] * 3] * 3] * 2
        try:
            model.run({{"data": np.frombuffer({jpeg!r}, np.uint8)}})
        except edge_runtime.plan.ExecutionError as e:
            print(e)
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "'decode' (ImageDecoder): ImportError: ImageDecoder: decoding JPEG data needs Pillow" in result.stdout
    assert "pip install pillow" in result.stdout


GOOD_PNG = _png(RNG.integers(0, 256, (4, 4, 3)).astype(np.uint8), 2, 8)


@pytest.mark.parametrize("data, pixel_format, message", [
    pytest.param(GOOD_PNG[:-30], "RGB", r"PNG data: corrupt or truncated PNG data: chunk b'IDAT' at byte 33 is cut off",
                 id="truncated-png"),
    pytest.param(GOOD_PNG[:45] + bytes([GOOD_PNG[45] ^ 1]) + GOOD_PNG[46:], "RGB",
                 r"PNG data: corrupt PNG data: chunk b'IDAT' at byte 33 fails its CRC", id="png-crc"),
    # a 100000 x 100000 header over a few bytes: refused without inflating or allocating that much
    pytest.param(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
                 + _chunk(b"IDAT", zlib.compress(bytes(1000))) + _chunk(b"IEND", b""), "RGB",
                 r"PNG data: corrupt or truncated PNG data: 1000 bytes of pixels where the image needs 30000100000",
                 id="png-claims-too-much"),
    pytest.param(b"GIF89a" + bytes(20), "RGB", r"not an image format it reads .* the data starts b'GIF89a", id="gif"),
    pytest.param(b"BM" + bytes(60), "RGB", r"BMP data: corrupt BMP data: a 0-byte info header", id="bmp-header"),
    pytest.param(b"P2 2 2 255\n1 2 3\n", "RGB", r"PNM data: corrupt or truncated P2 data: 3 samples where the image "
                 r"needs 4", id="pgm-short"),
    pytest.param(GOOD_PNG, "CMYK", r"pixel_format must be one of \('RGB', 'BGR', 'Grayscale'\), got 'CMYK'",
                 id="pixel-format"),
])
def test_malformed_data_or_node_is_named(data, pixel_format, message) -> None:
    with pytest.raises(ExecutionError, match=rf"'decode' \(ImageDecoder\): ValueError: ImageDecoder: {message}"):
        _decode(data, pixel_format)
