"""The one failure of the image decoders: data that is not a well-formed image of the format."""

from __future__ import annotations


class ImageDataError(ValueError):
    """Encoded image data that cannot be decoded; the message says what is wrong and where."""
