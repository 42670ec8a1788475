"""``RunConfig``: where and how often an Estimator checkpoints and writes summaries."""

from __future__ import annotations

import dataclasses

__all__ = ["RunConfig"]


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """TensorFlow 1.x's RunConfig fields that a single-process Estimator uses."""

    model_dir: str | None = None
    tf_random_seed: int | None = None
    save_summary_steps: int = 100
    save_checkpoints_steps: int | None = None
    save_checkpoints_secs: float | None = 600
    keep_checkpoint_max: int = 5
    log_step_count_steps: int = 100
    session_config: object = None

    def __post_init__(self):
        if self.save_checkpoints_steps is not None and self.save_checkpoints_secs not in (None, 600):
            raise ValueError("RunConfig: give save_checkpoints_steps or save_checkpoints_secs, not both")

    def replace(self, **kwargs) -> "RunConfig":
        return dataclasses.replace(self, **kwargs)
