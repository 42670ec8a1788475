"""``tf.linalg``: TF 1.15's linear-algebra namespace, resolved to flowstack's ``tf.matrix_*`` & co."""

from __future__ import annotations

from trainer.linalg_ops import (  # noqa: F401 - tf.linalg's own names (not at tf.*)
    adjoint, cholesky_solve, eigh, eigvalsh, expm, logdet, lstsq, lu, matvec, normalize, set_diag, slogdet,
    tensor_diag, tensor_diag_part, triangular_solve, tridiagonal_matmul, tridiagonal_solve)
from trainer.tf1_aliases import resolve

_RENAMED = {"inv": "matrix_inverse", "det": "matrix_determinant", "diag": "matrix_diag",
            "diag_part": "matrix_diag_part", "band_part": "matrix_band_part", "transpose": "matrix_transpose",
            "solve": "matrix_solve"}


def __getattr__(name: str):
    return resolve("tf.linalg", name, _RENAMED, globals())
