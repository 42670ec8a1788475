"""What the file-reading dataset makers (``make_csv_dataset``, ``make_batched_features_dataset``)
share: their files from a pattern, and TF 1.15's order of shuffling and repeating their records."""

from __future__ import annotations

from trainer.data.dataset import Dataset

__all__ = ["matching_files", "shuffle_and_repeat_epochs"]


def matching_files(file_pattern, what: str) -> list[str]:
    """The files matching ``file_pattern`` (a glob, or a list of them), sorted; an error naming
    ``what`` if none match."""
    from trainer.gfile import Glob

    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
    paths = sorted({p for pattern in patterns
                    for p in Glob(pattern.decode() if isinstance(pattern, bytes) else pattern)})
    if not paths:
        raise ValueError(f"{what}: no files match file_pattern {file_pattern!r}")
    return paths


def shuffle_and_repeat_epochs(dataset: Dataset, num_epochs: int | None, shuffle: bool, buffer_size: int,
                              seed: int | None) -> Dataset:
    """Records shuffled (afresh each epoch) and repeated ``num_epochs`` times (None: forever)."""
    if shuffle:
        dataset = dataset.shuffle(buffer_size, seed=seed)
    return dataset.repeat(num_epochs) if num_epochs != 1 else dataset
