"""Image decoders the edge runtime needs without a third-party library: PNG (zlib is standard),
BMP and the portable anymaps (PBM, PGM, PPM), each in pure Python and NumPy.

Each ``decode(data)`` returns the image as the file stores it, (height, width, channels) with 1
(gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA) channels, uint8 or, for 16-bit files, uint16, and
raises ``ImageDataError`` saying what is wrong with the data.
"""

from edge_runtime.codecs.errors import ImageDataError

__all__ = ["ImageDataError"]
