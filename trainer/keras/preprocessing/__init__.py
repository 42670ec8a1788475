"""``tf.keras.preprocessing``: ``sequence.pad_sequences`` and ``text.Tokenizer`` (image augmentation is
not built)."""

from trainer.keras.preprocessing import sequence, text

__all__ = ["sequence", "text"]
