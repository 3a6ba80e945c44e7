"""From Gaussian moments of the outputs to predictions and log-likelihoods.

* regression: ``N(mean, var + noise)``;
* classification: the probit (mean-field) approximation per logit,
  ``p = link(mean / sqrt(1 + pi var / 8))`` with ``link`` the logistic (one logit, binary)
  or the softmax (one logit per class); covariances between logits are ignored.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, log_expit, log_softmax, softmax

__all__ = ["class_probabilities", "gaussian_log_density", "log_probabilities", "probit_logits"]

LOG_2PI = float(np.log(2.0 * np.pi))


def gaussian_log_density(y: NDArray, mean: NDArray, var: NDArray | float) -> NDArray:
    """Per-row log density of ``y`` under ``N(mean, var)`` (element-wise); -inf, without
    numpy's overflow warning, for a ``y`` whose squared distance float64 cannot hold."""
    with np.errstate(over="ignore"):
        return -0.5 * (LOG_2PI + np.log(var) + (y - mean) ** 2 / var)


def probit_logits(mean: NDArray, var: NDArray) -> NDArray:
    """Logits shrunk by the probit approximation: ``mean / sqrt(1 + pi var / 8)``."""
    return mean / np.sqrt(1.0 + np.pi * var / 8.0)


def log_probabilities(logits: NDArray, output: str) -> NDArray:
    """Log class probabilities ``(n, n_classes)`` from logits ``(n, K)``.

    ``output="logistic"`` has one logit (the second class); ``"softmax"`` one per class.
    """
    if output == "logistic":
        z = logits[:, 0]
        return np.column_stack([log_expit(-z), log_expit(z)])
    return log_softmax(logits, axis=1)


def class_probabilities(logits: NDArray, output: str) -> NDArray:
    """Class probabilities ``(n, n_classes)`` from logits (see `log_probabilities`).

    The binary first column is ``expit(-z)`` where ``z > 0``: ``1 - expit(z)`` there loses
    digits and is exactly 0 from ``z`` of about 37 on (``1 - expit(z)`` elsewhere, which
    loses none). For logarithms use `log_probabilities`, exact on either side.
    """
    if output == "logistic":
        z = logits[:, 0]
        p = expit(z)
        return np.column_stack([np.where(z > 0, expit(-z), 1.0 - p), p])
    return softmax(logits, axis=1)
