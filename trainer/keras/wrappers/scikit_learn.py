"""``KerasClassifier`` and ``KerasRegressor``: a ``build_fn`` returning a compiled Keras model, used
through scikit-learn's ``fit``/``predict``/``score``/``get_params``. Parameters are routed as Keras'
wrappers route them: those ``build_fn`` takes go to it, those ``fit``/``predict`` take go there. Like
Keras' own wrappers they do not subclass scikit-learn's BaseEstimator (scikit-learn is not a
dependency), so scikit-learn 1.6+ helpers that require ``__sklearn_tags__`` (cross_val_score) refuse
them; fit/predict/score and get_params/set_params work in a loop of one's own."""

from __future__ import annotations

import copy
import inspect

import numpy as np

from trainer.keras.utils import to_categorical

__all__ = ["KerasClassifier", "KerasRegressor"]


class BaseWrapper:
    def __init__(self, build_fn=None, **sk_params):
        self.build_fn = build_fn
        self.sk_params = sk_params
        self.check_params(sk_params)

    def _build_target(self):
        return self.build_fn if self.build_fn is not None else self.__call__

    def check_params(self, params: dict) -> None:
        from trainer.keras.engine.sequential import Sequential

        legal = [Sequential.fit, Sequential.predict, Sequential.evaluate, self._build_target()]
        if hasattr(self, "predict_proba"):
            legal.append(Sequential.predict)
        names = {p for fn in legal for p in inspect.signature(fn).parameters}
        unknown = [p for p in params if p not in names and p != "nb_epoch"]
        if unknown:
            raise ValueError(f"{unknown} are not legal parameters of build_fn, fit, predict or evaluate")

    def get_params(self, **params) -> dict:
        res = copy.deepcopy(self.sk_params)
        res.update({"build_fn": self.build_fn})
        return res

    def set_params(self, **params):
        self.check_params(params)
        self.sk_params.update(params)
        return self

    def filter_sk_params(self, fn, override: dict | None = None) -> dict:
        accepted = inspect.signature(fn).parameters
        out = {k: v for k, v in self.sk_params.items() if k in accepted}
        out.update({k: v for k, v in (override or {}).items() if k in accepted})
        return out

    def fit(self, x, y, **kwargs):
        build = self._build_target()
        self.model = build(**self.filter_sk_params(build))
        loss = getattr(self.model, "loss", None)
        loss_name = loss if isinstance(loss, str) else getattr(loss, "__name__", "")
        if loss_name == "categorical_crossentropy" and np.ndim(y) != 2:
            y = to_categorical(y)
        fit_args = self.filter_sk_params(self.model.fit, kwargs)
        fit_args.setdefault("verbose", 0)
        return self.model.fit(x, y, **fit_args)


class KerasClassifier(BaseWrapper):
    """Labels of any kind: ``classes_`` holds them, the model sees their indices."""

    def fit(self, x, y, sample_weight=None, **kwargs):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] > 1:
            self.classes_ = np.arange(y.shape[1])
        else:
            self.classes_, y = np.unique(y, return_inverse=True)
        self.n_classes_ = len(self.classes_)
        if sample_weight is not None:
            kwargs["sample_weight"] = sample_weight
        return super().fit(x, y, **kwargs)

    def predict_proba(self, x, **kwargs) -> np.ndarray:
        probs = self.model.predict(x, **self.filter_sk_params(self.model.predict, kwargs))
        if probs.shape[1] == 1:  # a sigmoid output: the two classes' probabilities
            probs = np.hstack([1 - probs, probs])
        return probs

    def predict(self, x, **kwargs) -> np.ndarray:
        return self.classes_[self.predict_proba(x, **kwargs).argmax(-1)]

    def score(self, x, y, **kwargs) -> float:
        """The accuracy (the model must be compiled with metrics=["accuracy"])."""
        y = np.searchsorted(self.classes_, y)
        loss_name = getattr(self.model, "loss", "")
        if loss_name == "categorical_crossentropy" and np.ndim(y) == 1:
            y = to_categorical(y, len(self.classes_))
        outputs = self.model.evaluate(x, y, **{"verbose": 0, **self.filter_sk_params(self.model.evaluate, kwargs)})
        outputs = outputs if isinstance(outputs, list) else [outputs]
        for name, value in zip(self.model.metrics_names, outputs):
            if name in ("acc", "accuracy"):
                return value
        raise ValueError("The model is not configured to compute accuracy. You should pass "
                         "`metrics=['accuracy']` to the `model.compile()` method.")


class KerasRegressor(BaseWrapper):
    def predict(self, x, **kwargs) -> np.ndarray:
        return np.squeeze(self.model.predict(x, **self.filter_sk_params(self.model.predict, kwargs)))

    def score(self, x, y, **kwargs) -> float:
        """Minus the loss (scikit-learn maximizes scores)."""
        loss = self.model.evaluate(x, y, **{"verbose": 0, **self.filter_sk_params(self.model.evaluate, kwargs)})
        return -(loss[0] if isinstance(loss, list) else loss)
