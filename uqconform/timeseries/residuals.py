"""Out-of-sample residuals of a point predictor, the raw material of sequential conformal.

Two sources:

* ``"bootstrap"``: the leave-one-out bootstrap ensemble of EnbPI (Xu and Xie, 2021). ``B``
  clones are fitted on bootstrap samples of the training block; the residual of training
  point ``i`` uses only the models that did not see it, and the test prediction is the
  mean of those leave-one-out ensembles, a fixed weighted average of the ``B`` models.
* ``"holdout"``: one model fitted on the first part of the block, residuals on the rest.

Either way the residuals are honest (never in-sample residuals of a flexible model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from joblib import delayed
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, clone

from uqconform._parallel import run_fits
from uqconform._rows import fit_params_rows, take_rows
from uqconform._validation import point_predictions
from uqconform._warnings import warn_user

__all__ = ["ResidualSource", "bootstrap_residuals", "holdout_residuals", "prefit_residuals"]


def _fit_one(
    estimator: BaseEstimator,
    X: Any,
    y: NDArray,
    index: NDArray,
    fit_params: dict[str, Any] | None = None,
) -> BaseEstimator:
    """A clone fitted on the rows ``index``; per-row fit parameters (``sample_weight``)
    are taken on the same rows, the others passed as given."""
    params = fit_params_rows(fit_params or {}, y.shape[0], index)
    return clone(estimator).fit(take_rows(X, index), y[index], **params)


@dataclass
class ResidualSource:
    """Fitted models and the weights that combine them into the point prediction."""

    models: list[BaseEstimator]
    model_weights: NDArray  # (B,), sums to one
    residuals: NDArray  # signed out-of-sample residuals, in time order

    def predict(self, X: Any) -> NDArray:
        """Weighted ensemble prediction ``sum_b w_b f_b(X)``."""
        total = np.zeros(len(X) if not hasattr(X, "shape") else X.shape[0])
        for weight, model in zip(self.model_weights, self.models, strict=True):
            if weight > 0:  # a loop over models
                total += weight * point_predictions(model.predict(X))
        return total


def bootstrap_residuals(
    estimator: BaseEstimator,
    X: Any,
    y: NDArray,
    n_bootstrap: int,
    rng: np.random.Generator,
    n_jobs: int | None = None,
    verbose: bool = False,
    fit_params: dict[str, Any] | None = None,
) -> ResidualSource:
    """Leave-one-out bootstrap residuals (EnbPI) with models fitted through joblib.

    Parameters
    ----------
    estimator : regressor
    X : array-like of shape (n, d)
    y : ndarray of shape (n,)
    n_bootstrap : int
        Number of bootstrap models ``B``.
    rng : numpy Generator
        Draws the bootstrap samples (so results do not depend on ``n_jobs``).
    n_jobs : int, optional
        Parallel fits; ``joblib.parallel_config(backend="dask")`` moves them to a cluster.
    verbose : bool, default=False
        Show a progress bar of the fits.
    fit_params : dict, optional
        Passed to every model's ``fit``; arrays with one entry per row (``sample_weight``)
        are resampled with the rows.

    Returns
    -------
    ResidualSource

    Warns
    -----
    UserWarning
        When more than 5% of the points were seen by every model: their residual falls
        back to the whole ensemble, an in-sample residual (expected share about
        ``0.632 ** n_bootstrap``: 10% at 5 models, 4% at 7).
    """
    n = y.shape[0]
    samples = rng.integers(0, n, size=(n_bootstrap, n))
    models = run_fits(
        (delayed(_fit_one)(estimator, X, y, index, fit_params) for index in samples),
        n_jobs=n_jobs,
        verbose=verbose,
        desc="bootstrap models",
        total=n_bootstrap,
    )
    seen = np.zeros((n_bootstrap, n), dtype=bool)
    np.put_along_axis(seen, samples, True, axis=1)
    unseen = ~seen  # (B, n): model b did not see point i
    counts = unseen.sum(axis=0)
    # A point every model saw (rare for B >= 20) falls back to the whole ensemble.
    in_sample = float(np.mean(counts == 0))
    if in_sample > 0.05:
        warn_user(
            f"With `n_bootstrap`={n_bootstrap}, {in_sample:.0%} of the {n} fit points were "
            "seen by every bootstrap model: their residuals are in-sample (too small for a "
            "flexible model), which narrows the intervals. "
            + (
                "Use more models (n_bootstrap >= 10)."
                if n_bootstrap < 10
                else "Give more fit rows or more models (`n_bootstrap`)."
            ),
            UserWarning,
        )
    share = np.where(counts > 0, unseen / np.maximum(counts, 1), 1.0 / n_bootstrap)
    predictions = np.stack([point_predictions(m.predict(X)) for m in models])  # (B, n)
    out_of_bag = (share * predictions).sum(axis=0)
    return ResidualSource(
        models=list(models), model_weights=share.mean(axis=1), residuals=y - out_of_bag
    )


def holdout_residuals(
    estimator: BaseEstimator,
    X: Any,
    y: NDArray,
    holdout_fraction: float,
    fit_params: dict[str, Any] | None = None,
) -> ResidualSource:
    """One model on the first ``1 - holdout_fraction`` of the block, residuals on the rest
    (per-row ``fit_params`` such as ``sample_weight`` are cut like the rows)."""
    n = y.shape[0]
    cut = round(n * (1 - holdout_fraction))
    if cut < 2 or n - cut < 2:
        raise ValueError(
            f"`holdout_fraction`={holdout_fraction} leaves {cut} rows to fit and {n - cut} "
            "to compute residuals; both need at least 2."
        )
    model = _fit_one(estimator, X, y, np.arange(cut), fit_params)
    tail = np.arange(cut, n)
    residuals = y[tail] - point_predictions(model.predict(take_rows(X, tail)))
    return ResidualSource(models=[model], model_weights=np.ones(1), residuals=residuals)


def prefit_residuals(model: BaseEstimator, X: Any, y: NDArray) -> ResidualSource:
    """A fitted model used as it is (a ``FrozenEstimator``): its residuals on every row,
    which are out-of-sample only if it was trained on other rows."""
    residuals = y - point_predictions(model.predict(X))
    return ResidualSource(models=[model], model_weights=np.ones(1), residuals=residuals)
