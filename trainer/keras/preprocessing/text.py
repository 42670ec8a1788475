"""``tf.keras.preprocessing.text``: words of a text, and a ``Tokenizer`` mapping words to ids by frequency."""

from __future__ import annotations

import collections

import numpy as np

__all__ = ["Tokenizer", "text_to_word_sequence"]

DEFAULT_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


def text_to_word_sequence(text: str, filters: str = DEFAULT_FILTERS, lower: bool = True, split: str = " ") -> list:
    """>>> text_to_word_sequence("Hello, World!  hello")
    ['hello', 'world', 'hello']
    """
    if lower:
        text = text.lower()
    text = text.translate(str.maketrans({c: split for c in filters}))
    return [w for w in text.split(split) if w]


class Tokenizer:
    """Word ids 1, 2, ... by decreasing count (``word_index``); ``num_words`` keeps the most common
    ``num_words - 1`` when converting; ``oov_token`` takes id 1 and stands for unknown words."""

    def __init__(self, num_words: int | None = None, filters: str = DEFAULT_FILTERS, lower: bool = True,
                 split: str = " ", char_level: bool = False, oov_token: str | None = None, **kwargs):
        if char_level:
            raise NotImplementedError("Tokenizer(char_level=True) is not built in flowstack")
        self.num_words, self.filters, self.lower, self.split, self.oov_token = num_words, filters, lower, split, \
            oov_token
        self.word_counts: collections.OrderedDict = collections.OrderedDict()
        self.document_count = 0
        self.word_index: dict[str, int] = {}
        self.index_word: dict[int, str] = {}

    def _words(self, text: str) -> list:
        return text_to_word_sequence(text, self.filters, self.lower, self.split)

    def fit_on_texts(self, texts) -> None:
        for text in texts:
            self.document_count += 1
            for w in self._words(text):
                self.word_counts[w] = self.word_counts.get(w, 0) + 1
        ranked = sorted(self.word_counts.items(), key=lambda kv: -kv[1])  # stable: ties keep first-seen order
        words = ([self.oov_token] if self.oov_token is not None else []) + [w for w, _ in ranked]
        self.word_index = {w: i + 1 for i, w in enumerate(words)}
        self.index_word = {i: w for w, i in self.word_index.items()}

    def texts_to_sequences(self, texts) -> list[list[int]]:
        out = []
        oov = self.word_index.get(self.oov_token) if self.oov_token is not None else None
        for text in texts:
            ids = []
            for w in self._words(text):
                i = self.word_index.get(w)
                if i is not None and (self.num_words is None or i < self.num_words):
                    ids.append(i)
                elif oov is not None:
                    ids.append(oov)
            out.append(ids)
        return out

    def sequences_to_texts(self, sequences) -> list[str]:
        return [" ".join(self.index_word[i] for i in seq if i in self.index_word) for seq in sequences]

    def texts_to_matrix(self, texts, mode: str = "binary") -> np.ndarray:
        if mode not in ("binary", "count", "freq"):
            raise NotImplementedError(f"Tokenizer.texts_to_matrix(mode={mode!r}) is not built in flowstack")
        size = self.num_words or len(self.word_index) + 1
        matrix = np.zeros((len(texts), size))
        for row, seq in enumerate(self.texts_to_sequences(texts)):
            counts = collections.Counter(seq)
            for i, c in counts.items():
                matrix[row, i] = 1 if mode == "binary" else c if mode == "count" else c / len(seq)
        return matrix
