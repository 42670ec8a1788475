"""``tf.keras.preprocessing``: ``sequence.pad_sequences``, ``text.Tokenizer`` and ``image``'s
``ImageDataGenerator``."""

from trainer.keras.preprocessing import image, sequence, text

__all__ = ["image", "sequence", "text"]
