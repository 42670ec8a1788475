"""scikit-learn models exported by skl2onnx convert (`flowstack convert`'s path) and match onnxruntime.

Each model is trained on scikit-learn's digits, exported with skl2onnx (ai.onnx.ml ops), converted
by ``exporter.onnx_import.convert_onnx`` (import, passes, parity check, .flow writer) and run by
the edge runtime; labels must equal onnxruntime's and probabilities or values agree within 1e-5.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("skl2onnx")
ort = pytest.importorskip("onnxruntime")

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,  # noqa: E402
                              HistGradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor)
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC, LinearSVC  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

import edge_runtime  # noqa: E402
from exporter.onnx_import import convert_onnx  # noqa: E402

# Small but real: the sizes users train on digits, kept to a second or two of training each.
CLASSIFIERS = {
    "logistic_regression": lambda: LogisticRegression(max_iter=300),
    "scaler_logistic_regression": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)),
    "decision_tree": lambda: DecisionTreeClassifier(random_state=0),
    "random_forest": lambda: RandomForestClassifier(n_estimators=30, random_state=0),
    "gradient_boosting": lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0),
    "hist_gradient_boosting": lambda: HistGradientBoostingClassifier(max_iter=15, random_state=0),
    "svc_probability": lambda: SVC(probability=True, random_state=0),
    "linear_svc": lambda: LinearSVC(),
    "k_neighbors": lambda: KNeighborsClassifier(n_neighbors=5),
    "mlp": lambda: MLPClassifier(hidden_layer_sizes=(32,), max_iter=200, random_state=0),
}
REGRESSORS = {
    "random_forest_regressor": lambda: RandomForestRegressor(n_estimators=20, random_state=0),
    "gradient_boosting_regressor": lambda: GradientBoostingRegressor(n_estimators=30, random_state=0),
}


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    return x.astype(np.float32), y


def _fit(model, x, y):
    with warnings.catch_warnings():  # convergence warnings of the short training runs
        warnings.simplefilter("ignore")
        return model.fit(x, y)


def _export(model, x, options=None):
    from skl2onnx import to_onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_onnx(model, x[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3})


def _converted(onnx_model, tmp_path, x):
    path = tmp_path / "model.flow"
    convert_onnx(onnx_model, path, samples={"X": x[:64]})
    return edge_runtime.load(path)


def _onnxruntime(onnx_model, x):
    session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"X": x})))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifier_matches_onnxruntime(name, digits, tmp_path):
    x, y = digits
    model = _fit(CLASSIFIERS[name](), x, y)
    # LinearSVC has no probabilities, so no ZipMap either: its scores are the decision function
    options = {"zipmap": False} if hasattr(model, "predict_proba") else None
    onnx_model = _export(model, x, options=options)
    want = _onnxruntime(onnx_model, x)
    got = _converted(onnx_model, tmp_path, x).run({"X": x})
    np.testing.assert_array_equal(got["label"], want["label"])
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=0, atol=1e-5)
    assert (got["label"] == y).mean() > 0.8  # a trained model, not a degenerate one


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressor_matches_onnxruntime(name, digits, tmp_path):
    x, y = digits
    target = (x[:, 20] * 0.5 + y).astype(np.float32)
    model = _fit(REGRESSORS[name](), x, target)
    onnx_model = _export(model, x)
    want = _onnxruntime(onnx_model, x)
    got = _converted(onnx_model, tmp_path, x).run({"X": x})
    (key,) = want
    np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-5)


def test_zipmap_gives_one_dict_per_row_like_onnxruntime(digits, tmp_path):
    x, y = digits
    model = _fit(RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0), x, y)
    onnx_model = _export(model, x)  # skl2onnx's default: probabilities through ZipMap
    want = _onnxruntime(onnx_model, x[:20])
    got = _converted(onnx_model, tmp_path, x).run({"X": x[:20]})
    np.testing.assert_array_equal(got["output_label"], want["output_label"])
    assert isinstance(got["output_probability"], list) and len(got["output_probability"]) == 20
    for mine, theirs in zip(got["output_probability"], want["output_probability"]):
        assert mine.keys() == theirs.keys()
        np.testing.assert_allclose([mine[k] for k in theirs], list(theirs.values()), atol=1e-6)


def test_binary_forest_with_string_labels(digits, tmp_path):
    x, y = digits
    names = np.where(y % 2 == 0, "even", "odd")
    model = _fit(RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0), x, names)
    onnx_model = _export(model, x, options={"zipmap": False})
    want = _onnxruntime(onnx_model, x)
    got = _converted(onnx_model, tmp_path, x).run({"X": x})
    np.testing.assert_array_equal(got["label"].astype(str), want["label"].astype(str))
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-5)


def test_to_onnx_writes_ai_onnx_ml_nodes_back(digits):
    import onnx

    from exporter.onnx_export import to_onnx
    from exporter.onnx_import import import_onnx

    x, y = digits
    model = _fit(RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0), x, y)
    onnx_model = _export(model, x)  # with ZipMap: a sequence of maps comes back out too
    exported = to_onnx(import_onnx(onnx_model))
    onnx.checker.check_model(exported, full_check=True)
    assert {o.domain for o in exported.opset_import} == {"", "ai.onnx.ml"}
    want, got = _onnxruntime(onnx_model, x[:10]), _onnxruntime(exported, x[:10])
    np.testing.assert_array_equal(got["output_label"], want["output_label"])
    assert got["output_probability"] == want["output_probability"]
