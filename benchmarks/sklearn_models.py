"""scikit-learn models as skl2onnx exports them (the ai.onnx.ml ops), against onnxruntime.

    python -m benchmarks.sklearn_models                      # every model, batch 1 and 1,000
    python -m benchmarks.sklearn_models --models random_forest,svc_probability --budget 2
    python -m benchmarks.sklearn_models --quick              # small models and budgets: a smoke run
    flock /tmp/bench.lock env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.sklearn_models

Each model is trained on scikit-learn's digits (a regression target for the regressors), exported
by skl2onnx with ``zipmap=False`` (the probabilities as a tensor, as users who serve them pass),
converted as ``flowstack convert`` does, checked against onnxruntime (2 intra-op threads) and timed
against it in alternating blocks (``benchmarks.edge_vs_onnxruntime.bench_onnx``). skl2onnx and
scikit-learn are benchmark peers, never dependencies of the runtime.
"""

from __future__ import annotations

import argparse
import warnings
from functools import lru_cache
from typing import Callable

import numpy as np
from sklearn.datasets import load_digits
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor, HistGradientBoostingClassifier,
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC
from sklearn.tree import DecisionTreeClassifier
from skl2onnx import to_onnx

from benchmarks.edge_vs_onnxruntime import Row, bench_onnx, chosen_models, ratio_table, run_sweep

# name -> (model at full size, model for --quick, is it a regressor)
SKLEARN_MODELS: dict[str, tuple[Callable[[], object], Callable[[], object], bool]] = {
    "logistic_regression": (lambda: LogisticRegression(max_iter=500), lambda: LogisticRegression(max_iter=50), False),
    "scaler_logistic_regression": (lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
                                   lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=50)), False),
    "decision_tree": (lambda: DecisionTreeClassifier(random_state=0),
                      lambda: DecisionTreeClassifier(max_depth=4, random_state=0), False),
    "random_forest": (lambda: RandomForestClassifier(n_estimators=100, random_state=0),
                      lambda: RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0), False),
    "gradient_boosting": (lambda: GradientBoostingClassifier(n_estimators=30, random_state=0),
                          lambda: GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0), False),
    "hist_gradient_boosting": (lambda: HistGradientBoostingClassifier(max_iter=50, random_state=0),
                               lambda: HistGradientBoostingClassifier(max_iter=3, random_state=0), False),
    "svc_probability": (lambda: SVC(probability=True, random_state=0),
                        lambda: SVC(probability=True, random_state=0), False),
    "linear_svc": (lambda: LinearSVC(), lambda: LinearSVC(max_iter=100), False),
    "k_neighbors": (lambda: KNeighborsClassifier(), lambda: KNeighborsClassifier(), False),
    "mlp": (lambda: MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=0),
            lambda: MLPClassifier(hidden_layer_sizes=(8,), max_iter=20, random_state=0), False),
    "random_forest_regressor": (lambda: RandomForestRegressor(n_estimators=100, random_state=0),
                                lambda: RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0), True),
    "gradient_boosting_regressor": (lambda: GradientBoostingRegressor(n_estimators=100, random_state=0),
                                    lambda: GradientBoostingRegressor(n_estimators=5, random_state=0), True),
}
BATCHES = (1, 1000)


def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Digits features (float32), class labels, and a regression target made from both."""
    x, y = load_digits(return_X_y=True)
    x = x.astype(np.float32)
    return x, y, (0.5 * x[:, 20] + y).astype(np.float32)


@lru_cache(maxsize=None)  # one training per model, whichever batches time it
def export(name: str, quick: bool):
    full, small, regressor = SKLEARN_MODELS[name]
    x, labels, target = digits()
    with warnings.catch_warnings():  # convergence warnings of the bounded training runs
        warnings.simplefilter("ignore")
        model = (small if quick else full)().fit(x, target if regressor else labels)
        options = {"zipmap": False} if hasattr(model, "predict_proba") else None
        return to_onnx(model, x[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3}), x


def run_model(name: str, quick: bool, budget_s: float, batches: tuple[int, ...] = BATCHES) -> list[Row]:
    onnx_model, x = export(name, quick)
    rows = []
    for batch in batches:
        feeds = {"X": np.resize(x, (batch, x.shape[1]))}
        rows.append(bench_onnx(f"{name} b{batch}", onnx_model, feeds, budget_s))
    return rows


def render(rows: list[Row]) -> str:
    return ratio_table(rows, "rows")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(SKLEARN_MODELS)}")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timed pairs a row (default 1, quick 0.1)")
    parser.add_argument("--quick", action="store_true", help="small models and budgets: a smoke run, not a measurement")
    args = parser.parse_args(argv)
    names = chosen_models(parser, args.models, SKLEARN_MODELS)
    budget = args.budget if args.budget is not None else (0.1 if args.quick else 1.0)
    jobs = [lambda name=name, batch=batch: run_model(name, args.quick, budget, (batch,))[0]
            for name in names for batch in BATCHES]
    return run_sweep(jobs, render)


if __name__ == "__main__":
    raise SystemExit(main())
