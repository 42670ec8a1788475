"""``tf.keras.callbacks``: hooks ``fit`` calls around epochs and batches."""

from __future__ import annotations

import csv
import math
import os

import numpy as np

from trainer.keras import backend as K

__all__ = ["BaseLogger", "CSVLogger", "Callback", "CallbackList", "EarlyStopping", "History", "LambdaCallback",
           "LearningRateScheduler", "ModelCheckpoint", "ProgbarLogger", "ReduceLROnPlateau",
           "TensorBoard", "TerminateOnNaN"]


class Callback:
    def __init__(self):
        self.model = None
        self.params: dict = {}
        self.validation_data = None

    def set_params(self, params: dict) -> None:
        self.params = params

    def set_model(self, model) -> None:
        self.model = model

    def on_epoch_begin(self, epoch, logs=None): pass  # noqa: E704
    def on_epoch_end(self, epoch, logs=None): pass  # noqa: E704
    def on_batch_begin(self, batch, logs=None): pass  # noqa: E704
    def on_batch_end(self, batch, logs=None): pass  # noqa: E704
    def on_train_begin(self, logs=None): pass  # noqa: E704
    def on_train_end(self, logs=None): pass  # noqa: E704

    # TF 1.15's finer hooks; training batches also reach on_batch_*
    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_test_begin(self, logs=None): pass  # noqa: E704
    def on_test_end(self, logs=None): pass  # noqa: E704
    def on_predict_begin(self, logs=None): pass  # noqa: E704
    def on_predict_end(self, logs=None): pass  # noqa: E704


class CallbackList:
    """Calls every callback's hook of the same name."""

    def __init__(self, callbacks):
        self.callbacks = list(callbacks)

    def __getattr__(self, hook: str):
        if not hook.startswith("on_") and hook not in ("set_model", "set_params"):
            raise AttributeError(hook)

        def call_all(*args, **kwargs):
            for cb in self.callbacks:
                getattr(cb, hook)(*args, **kwargs)
        return call_all


class BaseLogger(Callback):
    """Kept for API compatibility: ``fit`` itself averages the batch metrics over each epoch."""


class History(Callback):
    """``history.history[name]``: the value of each logged quantity per epoch."""

    def on_train_begin(self, logs=None):
        self.epoch: list[int] = []
        self.history: dict[str, list] = {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class ProgbarLogger(Callback):
    """What ``verbose`` prints: "Epoch i/n", then one line per epoch with the logged values."""

    def __init__(self, count_mode: str = "samples", stateful_metrics=None):
        super().__init__()
        self.count_mode = count_mode

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("verbose", 0) == 1:
            print(f"Epoch {epoch + 1}/{self.params.get('epochs')}")

    def on_epoch_end(self, epoch, logs=None):
        verbose = self.params.get("verbose", 0)
        if not verbose:
            return
        values = " - ".join(f"{k}: {v:.4f}" for k, v in (logs or {}).items())
        count = self.params.get("samples") or self.params.get("steps")
        head = f"{count}/{count}"
        print(f"{head} - {values}" if verbose == 1 else f"Epoch {epoch + 1}/{self.params.get('epochs')} - {values}")


def _monitor_op(mode: str, monitor: str, min_delta: float):
    """(is_better(current, best), min_delta signed, initial best)."""
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode {mode!r} is unknown; expected 'auto', 'min' or 'max'")
    if mode == "max" or (mode == "auto" and ("acc" in monitor or monitor.startswith("fmeasure"))):
        return (lambda a, b: a > b), abs(min_delta), -np.inf
    return (lambda a, b: a < b), -abs(min_delta), np.inf


class EarlyStopping(Callback):
    """Stops training once ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs."""

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0, patience: int = 0, verbose: int = 0,
                 mode: str = "auto", baseline=None, restore_best_weights: bool = False):
        super().__init__()
        self.monitor, self.patience, self.verbose = monitor, patience, verbose
        self.baseline, self.restore_best_weights = baseline, restore_best_weights
        self.better, self.min_delta, self.initial = _monitor_op(mode, monitor, min_delta)
        self.stopped_epoch = 0

    def on_train_begin(self, logs=None):
        self.wait, self.stopped_epoch, self.best_weights = 0, 0, None
        self.best = self.baseline if self.baseline is not None else self.initial

    def on_epoch_end(self, epoch, logs=None):
        current = (logs or {}).get(self.monitor)
        if current is None:
            raise KeyError(f"EarlyStopping conditioned on metric {self.monitor!r} which is not available. Available "
                           f"metrics are: {', '.join(logs or {})}")
        if self.better(current - self.min_delta, self.best):
            self.best, self.wait = current, 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.restore_best_weights and self.best_weights is not None:
                self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1:05d}: early stopping")


class ModelCheckpoint(Callback):
    """Saves the model (or its weights) after epochs; ``filepath`` may hold ``{epoch:02d}`` and logged names."""

    def __init__(self, filepath: str, monitor: str = "val_loss", verbose: int = 0, save_best_only: bool = False,
                 save_weights_only: bool = False, mode: str = "auto", period: int = 1, save_freq="epoch"):
        super().__init__()
        self.filepath, self.monitor, self.verbose = os.fspath(filepath), monitor, verbose
        self.save_best_only, self.save_weights_only, self.period = save_best_only, save_weights_only, period
        self.better, _, self.best = _monitor_op(mode, monitor, 0)
        self.epochs_since_last_save = 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.epochs_since_last_save += 1
        if self.epochs_since_last_save < self.period:
            return
        self.epochs_since_last_save = 0
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                raise KeyError(f"ModelCheckpoint: can save best model only with {self.monitor} available "
                               f"(logged: {', '.join(logs)})")
            if not self.better(current, self.best):
                return
            if self.verbose > 0:
                print(f"Epoch {epoch + 1:05d}: {self.monitor} improved from {self.best:.5f} to {current:.5f}, "
                      f"saving model to {path}")
            self.best = current
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)


class LearningRateScheduler(Callback):
    """Sets the optimizer's learning rate to ``schedule(epoch)`` (or ``schedule(epoch, lr)``) each epoch."""

    def __init__(self, schedule, verbose: int = 0):
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        lr = float(K.get_value(self.model.optimizer.lr))
        try:
            new = self.schedule(epoch, lr)
        except TypeError:  # the one-argument form
            new = self.schedule(epoch)
        if not isinstance(new, (float, int, np.floating, np.integer)):
            raise ValueError('The output of the "schedule" function should be float.')
        K.set_value(self.model.optimizer.lr, float(new))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(K.get_value(self.model.optimizer.lr))


class ReduceLROnPlateau(Callback):
    def __init__(self, monitor: str = "val_loss", factor: float = 0.1, patience: int = 10, verbose: int = 0,
                 mode: str = "auto", min_delta: float = 1e-4, cooldown: int = 0, min_lr: float = 0, **kwargs):
        super().__init__()
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau does not support a factor >= 1.0.")
        self.monitor, self.factor, self.patience, self.verbose = monitor, factor, patience, verbose
        self.cooldown, self.min_lr = cooldown, min_lr
        self.better, self.min_delta, self.initial = _monitor_op(mode, monitor, min_delta)

    def on_train_begin(self, logs=None):
        self.best, self.wait, self.cooldown_counter = self.initial, 0, 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["lr"] = float(K.get_value(self.model.optimizer.lr))
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self.better(current - self.min_delta, self.best):
            self.best, self.wait = current, 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old = logs["lr"]
                if old > self.min_lr:
                    new = max(old * self.factor, self.min_lr)
                    K.set_value(self.model.optimizer.lr, new)
                    if self.verbose > 0:
                        print(f"Epoch {epoch + 1:05d}: ReduceLROnPlateau reducing learning rate to {new}.")
                    self.cooldown_counter, self.wait = self.cooldown, 0


class CSVLogger(Callback):
    """One row per epoch: ``epoch`` and the logged values."""

    def __init__(self, filename: str, separator: str = ",", append: bool = False):
        super().__init__()
        self.filename, self.sep, self.append = os.fspath(filename), separator, append
        self.keys = None
        self.file = None

    def on_train_begin(self, logs=None):
        exists = self.append and os.path.exists(self.filename) and os.path.getsize(self.filename) > 0
        self.file = open(self.filename, "a" if self.append else "w", newline="")
        self.keys = None
        self.header_written = exists

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
        writer = csv.DictWriter(self.file, fieldnames=["epoch"] + self.keys, delimiter=self.sep)
        if not self.header_written:
            writer.writeheader()
            self.header_written = True
        writer.writerow({"epoch": epoch, **{k: logs.get(k, "NA") for k in self.keys}})
        self.file.flush()

    def on_train_end(self, logs=None):
        self.file.close()


class LambdaCallback(Callback):
    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None, on_batch_end=None,
                 on_train_begin=None, on_train_end=None, **kwargs):
        super().__init__()
        hooks = {"on_epoch_begin": on_epoch_begin, "on_epoch_end": on_epoch_end, "on_batch_begin": on_batch_begin,
                 "on_batch_end": on_batch_end, "on_train_begin": on_train_begin, "on_train_end": on_train_end,
                 **kwargs}
        for name, fn in hooks.items():
            if fn is not None:
                setattr(self, name, fn)


class TerminateOnNaN(Callback):
    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and (math.isnan(loss) or math.isinf(loss)):
            print(f"Batch {batch}: Invalid loss, terminating training")
            self.model.stop_training = True


class TensorBoard(Callback):
    """The logged scalars per epoch, written with ``tf.summary.FileWriter`` to ``log_dir``."""

    def __init__(self, log_dir: str = "./logs", histogram_freq: int = 0, batch_size: int = 32,
                 write_graph: bool = True, write_grads: bool = False, write_images: bool = False,
                 update_freq="epoch", **kwargs):
        super().__init__()
        if histogram_freq or write_grads or write_images:
            raise NotImplementedError("TensorBoard: histogram_freq, write_grads and write_images are not built in "
                                      "flowstack; scalars (and the graph) are written")
        self.log_dir, self.write_graph = os.fspath(log_dir), write_graph
        self.writer = None

    def on_train_begin(self, logs=None):
        import trainer as tf

        self.writer = tf.summary.FileWriter(self.log_dir, graph=tf.get_default_graph() if self.write_graph else None)

    def on_epoch_end(self, epoch, logs=None):
        import trainer as tf

        values = [tf.Summary.Value(tag=k, simple_value=float(v)) for k, v in (logs or {}).items()]
        self.writer.add_summary(tf.Summary(value=values), epoch)
        self.writer.flush()

    def on_train_end(self, logs=None):
        self.writer.close()


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.callbacks", name, globals())
