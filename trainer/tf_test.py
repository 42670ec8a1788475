"""``tf.test``: what a TF 1.15 unit-test file needs to run under pytest or ``python file.py``.

``TestCase`` is a ``unittest.TestCase`` that gives each test a fresh default graph, sessions on it
(``session()``, ``cached_session()``, ``test_session()``), ``evaluate`` and TensorFlow's array
assertions (``assertAllClose`` on nested structures and tensors, ``assertAllEqual``,
``assertAllCloseAccordingToType``, ``assertShapeEqual``, ``assertArrayNear``, ...).
``compute_gradient`` / ``compute_gradient_error`` compare tf.gradients' Jacobian with central
differences in the default session, as TensorFlow's gradient checker does.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import unittest
from unittest import mock  # noqa: F401 - tf.test.mock is the standard library's mock

import numpy as np

from trainer.devices import gpu_available
from trainer.graph import Graph, Tensor, get_default_graph, reset_default_graph

__all__ = ["TestCase", "compute_gradient", "compute_gradient_error", "get_temp_dir", "gpu_device_name",
           "is_built_with_cuda", "is_built_with_rocm", "is_gpu_available", "main", "mock"]

_TEMP_DIR: list[str] = []


def get_temp_dir() -> str:
    """A temporary directory for this test process (made on first use)."""
    if not _TEMP_DIR:
        _TEMP_DIR.append(tempfile.mkdtemp(prefix="flowstack_test_"))
    return _TEMP_DIR[0]


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability=None) -> bool:
    """Whether a CUDA device can run flowstack's kernels (through CuPy)."""
    if min_cuda_compute_capability is not None and gpu_available():
        import cupy  # noqa: PLC0415 - optional, present when gpu_available()

        major, minor = min_cuda_compute_capability
        cc = cupy.cuda.Device(0).compute_capability
        return (int(cc[:-1]), int(cc[-1])) >= (major, minor)
    return gpu_available()


def gpu_device_name() -> str:
    """``/device:GPU:0`` when a GPU is available, else the empty string."""
    return "/device:GPU:0" if gpu_available() else ""


def is_built_with_cuda() -> bool:
    """Whether flowstack can use CUDA here: CuPy is importable."""
    try:
        import cupy  # noqa: F401, PLC0415 - optional
    except Exception:
        return False
    return True


def is_built_with_rocm() -> bool:
    return False


def main(argv=None) -> None:
    """Runs the calling module's tests, as ``tf.test.main()`` at the bottom of a test file does."""
    unittest.main(module="__main__", argv=argv)


# -- the gradient checker --------------------------------------------------------------------------
def _session():
    from trainer.interactive import get_default_session

    sess = get_default_session()
    if sess is None:
        raise ValueError("compute_gradient: needs a default session (run it inside `with tf.Session():` or "
                         "`with self.cached_session():`)")
    return sess


def _jacobians(sess, x: Tensor, x_shape, y: Tensor, y_shape, x_init_value, delta: float, extra_feed_dict):
    from trainer.tf1_gradients import gradients

    x_shape, y_shape = tuple(x_shape), tuple(y_shape)
    dtype = np.dtype(x.dtype) if x.dtype is not None else np.dtype(np.float64)
    x0 = (np.asarray(x_init_value, dtype) if x_init_value is not None else
          np.random.default_rng(0).uniform(-1, 1, x_shape).astype(dtype))
    if x0.shape != x_shape:
        raise ValueError(f"compute_gradient: x_init_value has shape {x0.shape}, x_shape says {x_shape}")
    feed = dict(extra_feed_dict or {})
    n_x, n_y = int(np.prod(x_shape)), int(np.prod(y_shape))
    from trainer.ops import placeholder

    seed = placeholder(y.dtype, y_shape)
    (grad,) = gradients([y], [x], grad_ys=[seed])
    theoretical = np.zeros((n_x, n_y))
    for j in range(n_y):
        onehot = np.zeros(n_y, np.dtype(y.dtype))
        onehot[j] = 1
        g = sess.run(grad, {**feed, x: x0, seed: onehot.reshape(y_shape)})
        theoretical[:, j] = np.zeros(n_x) if g is None else np.asarray(g, np.float64).reshape(-1)
    numerical = np.zeros((n_x, n_y))
    flat = x0.reshape(-1)
    for i in range(n_x):
        old = flat[i]
        flat[i] = old + delta
        up = np.asarray(sess.run(y, {**feed, x: x0}), np.float64).reshape(-1)
        flat[i] = old - delta
        down = np.asarray(sess.run(y, {**feed, x: x0}), np.float64).reshape(-1)
        flat[i] = old
        numerical[i] = (up - down) / (2 * delta)
    return theoretical, numerical


def _pairs(x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict):
    sess = _session()
    if init_targets is not None:
        sess.run(init_targets)
    if isinstance(x, (list, tuple)):
        inits = x_init_value if x_init_value is not None else [None] * len(x)
        return [_jacobians(sess, xi, si, y, y_shape, vi, delta, extra_feed_dict)
                for xi, si, vi in zip(x, x_shape, inits)]
    return _jacobians(sess, x, x_shape, y, y_shape, x_init_value, delta, extra_feed_dict)


def compute_gradient(x, x_shape, y, y_shape, x_init_value=None, delta: float = 1e-3, init_targets=None,
                     extra_feed_dict=None):
    """(theoretical, numerical) Jacobians of ``y`` with respect to ``x``, each ``[x size, y size]``
    (a list of pairs when ``x`` is a list), in the default session."""
    return _pairs(x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict)


def compute_gradient_error(x, x_shape, y, y_shape, x_init_value=None, delta: float = 1e-3, init_targets=None,
                           extra_feed_dict=None) -> float:
    """The largest absolute difference between the theoretical and numerical Jacobians."""
    pairs = _pairs(x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict)
    pairs = pairs if isinstance(pairs, list) else [pairs]
    return max(float(np.max(np.abs(t - n))) if t.size else 0.0 for t, n in pairs)


# -- TestCase --------------------------------------------------------------------------------------
def _is_tensor(value) -> bool:
    return isinstance(value, Tensor) or hasattr(value, "as_tensor") or hasattr(value, "composite_parts")


class TestCase(unittest.TestCase):
    """TensorFlow 1.15's ``tf.test.TestCase`` for graph-mode tests."""

    def setUp(self) -> None:
        super().setUp()
        reset_default_graph()
        self._cached: dict[int, object] = {}
        self._temp_dir: str | None = None

    def tearDown(self) -> None:
        for sess in self._cached.values():
            sess.close()
        self._cached.clear()
        super().tearDown()

    def get_temp_dir(self) -> str:
        """A temporary directory of this test's own."""
        if self._temp_dir is None:
            name = re.sub(r"[^\w.-]", "_", self.id())[-100:]
            self._temp_dir = tempfile.mkdtemp(prefix=name + "_", dir=get_temp_dir())
        return self._temp_dir

    # -- sessions ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def session(self, graph: Graph | None = None, config=None, use_gpu: bool = False, force_gpu: bool = False):
        """A new session on ``graph`` (the default graph), made the default session and graph inside."""
        from trainer.session import Session

        if force_gpu and not gpu_available():
            raise unittest.SkipTest("force_gpu: no GPU available")
        g = graph if graph is not None else get_default_graph()
        sess = Session(graph=g, config=config)
        with g.as_default(), sess.as_default():
            try:
                yield sess
            finally:
                sess.close()

    @contextlib.contextmanager
    def cached_session(self, graph: Graph | None = None, config=None, use_gpu: bool = False,
                       force_gpu: bool = False):
        """One session per graph for the whole test, made the default session and graph inside."""
        from trainer.session import Session

        if force_gpu and not gpu_available():
            raise unittest.SkipTest("force_gpu: no GPU available")
        g = graph if graph is not None else get_default_graph()
        sess = self._cached.get(id(g))
        if sess is None:
            sess = self._cached[id(g)] = Session(graph=g, config=config)
        with g.as_default(), sess.as_default():
            yield sess

    @property
    def test_session(self):
        """TF 1.15's deprecated name of ``cached_session``. A property, so that test loaders (which
        collect callables named ``test*``) do not run it as a test."""
        return self.cached_session

    def evaluate(self, tensors):
        """The values of ``tensors`` (any nested structure) in the default or this test's cached session."""
        from trainer.interactive import get_default_session

        sess = get_default_session()
        if sess is None:
            with self.cached_session() as cached:
                return cached.run(tensors)
        return sess.run(tensors)

    def _value(self, x):
        if _is_tensor(x):
            return self.evaluate(x)
        return x

    # -- assertions --------------------------------------------------------------------------------
    def _assert_close(self, a, b, rtol, atol, msg, path: str) -> None:
        a, b = self._value(a), self._value(b)
        if isinstance(a, dict) or isinstance(b, dict):
            if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b):
                self.fail(f"{path or 'value'}: {a!r} and {b!r} do not have the same keys. {msg or ''}")
            for key in a:
                self._assert_close(a[key], b[key], rtol, atol, msg, f"{path}[{key!r}]")
            return
        nested = (list, tuple)
        if isinstance(a, nested) and isinstance(b, nested) and not (_flat_numbers(a) and _flat_numbers(b)):
            if len(a) != len(b):
                self.fail(f"{path or 'value'}: lengths {len(a)} and {len(b)} differ. {msg or ''}")
            for k, (p, q) in enumerate(zip(a, b)):
                self._assert_close(p, q, rtol, atol, msg, f"{path}[{k}]")
            return
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape and x.size != 1 and y.size != 1:
            self.fail(f"{path or 'value'}: shape mismatch: {x.shape} vs {y.shape}. {msg or ''}")
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{path or 'value'}: not close. {msg or ''}")

    def assertAllClose(self, a, b, rtol: float = 1e-6, atol: float = 1e-6, msg=None) -> None:  # noqa: N802
        """``a`` and ``b`` (arrays, tensors, or nested lists/tuples/dicts of them) agree elementwise
        within ``atol + rtol * |b|``; NaNs must match."""
        self._assert_close(a, b, rtol, atol, msg, "")

    def assertNotAllClose(self, a, b, **kwargs) -> None:  # noqa: N802
        try:
            self.assertAllClose(a, b, **kwargs)
        except AssertionError:
            return
        raise AssertionError("The two values are close at all elements")

    def assertAllCloseAccordingToType(self, a, b, rtol=1e-6, atol=1e-6, float_rtol=1e-6, float_atol=1e-6,  # noqa: N802
                                      half_rtol=1e-3, half_atol=1e-3, bfloat16_rtol=1e-2, bfloat16_atol=1e-2,
                                      msg=None) -> None:
        """``assertAllClose`` with the tolerance loosened to the least precise dtype of ``a`` and ``b``."""
        a, b = np.asarray(self._value(a)), np.asarray(self._value(b))
        kinds = {a.dtype, b.dtype}
        if np.dtype(np.float32) in kinds or np.dtype(np.complex64) in kinds:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if np.dtype(np.float16) in kinds:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        if any(d.name == "bfloat16" for d in kinds):
            rtol, atol = max(rtol, bfloat16_rtol), max(atol, bfloat16_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def assertAllEqual(self, a, b, msg=None) -> None:  # noqa: N802
        """Same shape and the same values (strings compare as bytes, as TensorFlow returns them)."""
        x, y = np.asarray(self._value(a)), np.asarray(self._value(b))
        if x.shape != y.shape and x.size != 1 and y.size != 1:
            self.fail(f"shape mismatch: {x.shape} vs {y.shape}. {msg or ''}")
        np.testing.assert_array_equal(_as_bytes(x), _as_bytes(y), err_msg=msg or "")

    def assertNear(self, f1, f2, err, msg=None) -> None:  # noqa: N802
        self.assertTrue(f1 == f2 or abs(f1 - f2) <= err, f"{f1!r} != {f2!r} +/- {err!r}{' : ' + msg if msg else ''}")

    def assertArrayNear(self, farray1, farray2, err, msg=None) -> None:  # noqa: N802
        """Two 1-D float lists of the same length, each pair within ``err``."""
        self.assertEqual(len(farray1), len(farray2), msg=msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)

    def assertShapeEqual(self, np_array, tf_tensor, msg=None) -> None:  # noqa: N802
        """``np_array``'s shape is ``tf_tensor``'s static shape."""
        if not isinstance(np_array, (np.ndarray, np.generic)) or not _is_tensor(tf_tensor):
            raise TypeError("assertShapeEqual: takes a NumPy array and a Tensor")
        self.assertEqual(list(np_array.shape), list(tf_tensor.get_shape().as_list()), msg=msg)

    def assertDTypeEqual(self, target, expected_dtype) -> None:  # noqa: N802
        from trainer.dtypes import as_numpy_dtype

        self.assertEqual(np.asarray(target).dtype, np.dtype(as_numpy_dtype(expected_dtype)))

    def assertAllGreater(self, a, comparison_target) -> None:  # noqa: N802
        self.assertTrue(np.all(np.asarray(self._value(a)) > comparison_target))

    def assertAllGreaterEqual(self, a, comparison_target) -> None:  # noqa: N802
        self.assertTrue(np.all(np.asarray(self._value(a)) >= comparison_target))

    def assertAllLess(self, a, comparison_target) -> None:  # noqa: N802
        self.assertTrue(np.all(np.asarray(self._value(a)) < comparison_target))

    def assertAllLessEqual(self, a, comparison_target) -> None:  # noqa: N802
        self.assertTrue(np.all(np.asarray(self._value(a)) <= comparison_target))

    def assertAllInRange(self, target, lower_bound, upper_bound, open_lower_bound: bool = False,  # noqa: N802
                         open_upper_bound: bool = False) -> None:
        v = np.asarray(self._value(target))
        low = v > lower_bound if open_lower_bound else v >= lower_bound
        high = v < upper_bound if open_upper_bound else v <= upper_bound
        if not np.all(low & high):
            self.fail(f"{v[~(low & high)]!r} not in the range {lower_bound}..{upper_bound}")

    def assertAllInSet(self, target, expected_set) -> None:  # noqa: N802
        values = set(np.asarray(self._value(target)).reshape(-1).tolist())
        extra = values - set(expected_set)
        if extra:
            self.fail(f"{sorted(extra)!r} not in the set {set(expected_set)!r}")

    @contextlib.contextmanager
    def assertRaisesWithPredicateMatch(self, exception_type, expected_err_re_or_predicate):  # noqa: N802
        """The block raises ``exception_type`` whose message matches the regex (or the predicate)."""
        if callable(expected_err_re_or_predicate):
            predicate = expected_err_re_or_predicate
        else:
            def predicate(e):
                return re.search(expected_err_re_or_predicate, str(e)) is not None
        try:
            yield
        except exception_type as e:
            if not predicate(e):
                raise AssertionError(f"Exception of type {type(e).__name__}: {e}") from e
        else:
            self.fail(f"{getattr(exception_type, '__name__', 'an op error')} not raised")

    def assertRaisesOpError(self, expected_err_re_or_predicate):  # noqa: N802
        """The block fails a run with an op error (tf.errors.OpError) matching the regex."""
        from trainer.errors import OpError

        return self.assertRaisesWithPredicateMatch(OpError, expected_err_re_or_predicate)


def _flat_numbers(value) -> bool:
    """Whether a list/tuple is plain numbers (an array's worth), not a structure of arrays/tensors."""
    try:
        return np.asarray(value).dtype != object
    except ValueError:
        return False


def _as_bytes(a: np.ndarray) -> np.ndarray:
    if a.dtype == object or a.dtype.kind == "U":
        return np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(a)
    return a

