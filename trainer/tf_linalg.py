"""``tf.linalg``: TF 1.15's linear-algebra namespace, resolved to flowstack's ``tf.matrix_*`` & co."""

from __future__ import annotations

from trainer.tf1_aliases import resolve

_RENAMED = {"inv": "matrix_inverse", "det": "matrix_determinant", "diag": "matrix_diag",
            "diag_part": "matrix_diag_part", "band_part": "matrix_band_part", "transpose": "matrix_transpose",
            "solve": "matrix_solve", "set_diag": "matrix_set_diag", "triangular_solve": "matrix_triangular_solve"}


def __getattr__(name: str):
    return resolve("tf.linalg", name, _RENAMED, globals())
