"""Ellipsoid and box regions around any multi-output regressor: the baselines of CONTRA.

Both wrap a scikit-learn regressor that predicts ``(n, d)`` (a multi-output model, a
``Pipeline``, or ``sklearn.multioutput.MultiOutputRegressor`` around a scalar one) and
learn the *shape* of the region from residuals on the fit data:

* `EllipsoidalConformalRegressor`: Mahalanobis score ``||L^{-1}(y - f(x))||_2`` with
  ``L L^T`` the residual covariance, global or local (k nearest neighbours in X, shrunk
  toward the global one); the region is an ellipsoid around the prediction.
* `RectangularConformalRegressor`: max-norm of the residuals standardised by a per-output
  scale; the region is a box. ``bonferroni=True`` gives the per-output split-conformal
  intervals at ``alpha / d`` instead (a box too, valid by the union bound).

The shape is estimated on **out-of-fold** residuals of the fit data (``cv`` folds, the
model refitted on each), so it reflects the test-time error of the model rather than its
optimistic in-sample error; the calibration data only fix the radius. With ``cv=None`` the
in-sample residuals of the fitted model are used (cheaper, often too tight a shape: the
coverage still holds because the radius is calibrated on held-out data). A model that
reproduces its fit rows (a default decision tree, one nearest neighbour) has in-sample
residuals 0: a warning names those outputs, and when every output is such the shape is the
spread of each output of Y instead (the same at every x for a local ellipse). A prefit
``estimator`` calibrated without ``fit`` learns the shape on a random half of the
calibration rows and calibrates the radius on the other half.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.frozen import FrozenEstimator
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_array
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
)
from sklearn.utils.extmath import row_norms

from uqconform._cross import out_of_fold_prediction
from uqconform._seeding import integer_seed, seeded_clone
from uqconform._warnings import warn_user
from uqconform.multioutput._base import (
    MultiOutputConformalRegressor,
)
from uqconform.multioutput.flows import COVARIANCE_RIDGE, regularised_covariance
from uqconform.regions import AffineMap, PredictionRegion

__all__ = ["EllipsoidalConformalRegressor", "RectangularConformalRegressor"]

# Neighbour residuals (rows x neighbours x outputs) gathered at once by the local
# covariance, so memory stays bounded for many rows.
_LOCAL_CELLS = 2**20

# In-sample residuals of an output at most this times its standard deviation in Y carry
# no scale (a model that reproduces its fit rows: exactly 0, or about 1e-15 for
# scikit-learn's ExtraTreesRegressor, which averages trees that each reproduce them).
_NEGLIGIBLE_RESIDUAL = 1e-8


# A matrix product's distances ``|q|^2 + |r|^2 - 2 q.r`` are off by at most this times
# ``|q|^2 + |r|^2`` (a bound for any summation order; about 1e-13 is seen), so every row
# within it of the k-th distance is a candidate whose exact distance decides.
_PRODUCT_DISTANCE_ERROR = 1e-9


def _neighbour_search(rows: Any) -> NearestNeighbors:
    """scikit-learn's search over ``rows``, built once at fit (a k-d tree costs about
    12 ms on 20,000 rows: more than a one-row query)."""
    # trees beat a brute-force search only in a few dimensions (measured: 20,000
    # rows, 50 neighbours, 10 features: kd-tree 6.3 s, brute force 0.8 s)
    search = "brute" if rows.shape[1] >= 5 else "auto"
    return NearestNeighbors(algorithm=search).fit(rows)


def _nearest_rows(
    query: Any, rows: Any, k: int, searcher: NearestNeighbors | None = None
) -> NDArray[np.intp]:
    """Indices ``(n, k)`` of the ``k`` rows nearest each query row, nearest first.

    Euclidean distance; rows at equal computed distance are taken in index order. The
    order does not depend on the BLAS build, its thread count or the other query rows:
    scikit-learn's search screens candidates (its distances' last bits, and its order
    among ties, vary with those), and the candidates within rounding of the k-th
    distance are ranked by distances summed coordinate by coordinate (rows tied in exact
    arithmetic can differ there in the last bits: their order is then that of those
    bits, the same at every call). A query row whose screened candidates are all that
    close (many ties) is searched again with more, so the cost grows with the size of
    the tie groups (one-hot features: a group can hold most rows). Dense arrays or CSR
    matrices; ``searcher``: `_neighbour_search` of ``rows`` (built when None).

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.array([[0.0], [1.0], [-1.0], [3.0]])
    >>> _nearest_rows(np.array([[0.0], [2.0]]), rows, k=2).tolist()
    [[0, 1], [1, 3]]
    """
    n_rows = rows.shape[0]
    searcher = _neighbour_search(rows) if searcher is None else searcher
    slack = _PRODUCT_DISTANCE_ERROR * (
        row_norms(query, squared=True) + row_norms(rows, squared=True).max()
    )
    out = np.empty((query.shape[0], k), dtype=np.intp)
    pending = np.arange(query.shape[0])
    wanted = min(n_rows, k + max(8, k // 4))
    while pending.size:
        crowded_rows = []
        step = max(1, _LOCAL_CELLS // wanted)  # bounded memory: (rows x wanted) at a time
        for start in range(0, pending.size, step):  # a loop over row blocks
            block = pending[start : start + step]
            distance, candidates = searcher.kneighbors(query[block], n_neighbors=wanted)
            squared = distance**2
            near = squared <= (squared[:, [k - 1]] + slack[block, None])
            crowded = near[:, -1] & (wanted < n_rows)
            settled = ~crowded
            # candidates come nearest first, so the near ones are a prefix of each row
            width = int(near[settled].sum(axis=1).max(initial=k))
            out[block[settled]] = _rank_exactly(
                query[block[settled]], rows, candidates[settled, :width], near[settled, :width], k
            )
            crowded_rows.append(block[crowded])
        pending = np.concatenate(crowded_rows)
        wanted = min(n_rows, 4 * wanted)
    return out


def _rank_exactly(query: Any, rows: Any, candidates: NDArray, near: NDArray, k: int) -> NDArray:
    """The ``k`` of each row's ``near`` candidates with the least coordinate-wise distance."""
    n, m = candidates.shape
    out = np.empty((n, k), dtype=np.intp)
    step = max(1, _LOCAL_CELLS // (m * rows.shape[1]))
    for start in range(0, n, step):  # a loop over row blocks: bounded memory
        block = slice(start, start + step)
        b = candidates[block].shape[0]
        difference = (
            query[np.repeat(np.arange(start, start + b), m)] - rows[candidates[block].ravel()]
        )
        if sparse.issparse(difference):
            exact = np.asarray(difference.multiply(difference).sum(axis=1)).reshape(b, m)
        else:
            exact = np.einsum("ij,ij->i", difference, difference).reshape(b, m)
        exact[~near[block]] = np.inf
        order = np.lexsort((candidates[block], exact), axis=1)[:, :k]
        out[block] = np.take_along_axis(candidates[block], order, axis=1)
    return out


def _second_moment(residuals: NDArray) -> NDArray:
    """``mean(e e^T)`` over the residual rows (about zero, so a bias widens the shape)."""
    return residuals.T @ residuals / residuals.shape[0]


class _ResidualShapeRegressor(MultiOutputConformalRegressor):
    """A point model plus a region shape learned from its residuals (private base)."""

    _needs_shape: ClassVar[bool] = True

    _parameter_constraints: ClassVar[dict] = {
        "estimator": [HasMethods(["fit", "predict"]), HasMethods(["predict"]), None],
        "cv": ["cv_object"],
        "random_state": ["random_state", np.random.Generator],
    }

    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The model and its seed, and what gave the shape: the folds of the out-of-fold
        residuals (a model trained here), or the seed of the calibration half that learnt
        it (a fitted model adopted by calibrate)."""
        names = super()._fit_params
        if self._needs_shape and self.__dict__.get("_estimator_adopted", False):
            return (*names, "random_state")
        if self._needs_shape and self._fit_trained_estimator():
            return (*names, "cv")
        return names

    # ---- the shape ---------------------------------------------------------------------------
    def _fit_shape(self, X: Any, residuals: NDArray, spread: NDArray | None = None) -> None:
        """Learn the region shape from residuals ``(n, d)`` of rows ``X``; ``spread`` (the
        standard deviations of ``Y``, ``(d,)``) replaces residuals that carry no scale."""

    def _residuals(self, X: Any, Y: NDArray, **fit_params: Any) -> NDArray:
        """Out-of-fold residuals (``cv``), or the fitted model's own (``cv=None``, frozen)."""
        point = self._estimator_or_default()
        if self.cv is None or isinstance(point, FrozenEstimator):
            return Y - self._estimator_prediction(X)
        out_of_fold = out_of_fold_prediction(
            seeded_clone(point, self.random_state, owner=self),
            X,
            Y,
            self.cv,
            integer_seed(self.random_state),
            fit_params,
            self.n_jobs,
            "the region's shape",
        )
        return Y - out_of_fold.reshape(Y.shape)

    def _fit(self, X: Any, Y: NDArray, **fit_params: Any) -> None:
        out_of_fold = self.cv is not None and not isinstance(
            self._estimator_or_default(), FrozenEstimator
        )
        if self._needs_shape and out_of_fold:  # before the model's fit, as in _residuals
            self._refuse_group_splitter("the region's shape")
        self._fit_estimator(X, Y, **fit_params)
        if self._needs_shape:
            residuals = self._residuals(X, Y, **fit_params)
            spread = None if out_of_fold else self._check_in_sample_residuals(residuals, Y)
            self._fit_shape(X, residuals, spread)

    def _check_in_sample_residuals(self, residuals: NDArray, Y: NDArray) -> NDArray | None:
        """Warn about outputs whose in-sample residuals are 0 (or negligible: at most
        ``1e-8`` times the output's standard deviation in ``Y``), as for a model that
        reproduces its fit rows (a default decision tree, one nearest neighbour): the
        shape learnt from them has no scale. Returns the standard deviations of ``Y``, the
        shape to use instead, when every output that varies is such; None otherwise (the
        residuals of the other outputs give the shape). Constant outputs are not named."""
        spread = Y.std(axis=0)
        negligible = (spread > 0) & (
            np.abs(residuals).max(axis=0) <= _NEGLIGIBLE_RESIDUAL * spread
        )
        if not negligible.any():
            return None
        names = self.__dict__.get("output_names_in_")
        outputs = np.flatnonzero(negligible)
        named = [names[j] for j in outputs] if names is not None else outputs.tolist()
        every = bool(negligible[spread > 0].all())
        frozen = isinstance(self._estimator_or_default(), FrozenEstimator)
        if frozen:
            remedy = (
                "fit on rows the frozen model was not trained on (its residuals on them "
                "give the shape)"
            )
        else:
            remedy = "use cv=5 (the default): out-of-fold residuals give the shape"
        local = getattr(self, "covariance", None) == "local"
        consequence = (
            "the shape falls back to the spread of each output in Y, which ignores "
            "the model's errors"
            + (
                " (and covariance='local' uses that same shape at every x: the local "
                "information is lost)"
                if local
                else ""
            )
            if every
            else "their test errors alone set the radius, and the region is far too "
            "wide along the other outputs"
        )
        warn_user(
            f"The in-sample residuals of outputs {named} are 0 (at most 1e-8 times their "
            f"spread in Y): {type(self).__name__} with "
            f"{'a frozen estimator' if frozen else 'cv=None'} learns the "
            "region's shape from them, and the model reproduces its fit rows (or predicts "
            f"these outputs exactly), so {consequence}. Unless these outputs are exact "
            f"functions of X, {remedy}.",
            UserWarning,
        )
        return spread if every else None

    def _prepare_calibration(self, X: Any, Y: NDArray, *, prefit: bool) -> NDArray | None:
        if not (prefit and self._needs_shape):
            return None
        return self._learn_on_half(X, Y, self._fit_shape, "learns the region shape")

    def _point_prediction(self, X: Any) -> NDArray:
        return self._estimator_prediction(X)


class EllipsoidalConformalRegressor(_ResidualShapeRegressor):
    """Ellipsoidal conformal regions: a Mahalanobis ball around any multi-output regressor.

    The score of a row is ``||L(x)^{-1} (y - f(x))||_2`` where ``L(x) L(x)^T`` is the
    residual covariance of the model, so the region
    ``{y : (y - f(x))^T Sigma(x)^{-1} (y - f(x)) <= r^2}`` is an ellipsoid; the radius
    ``r`` is the conformal quantile of the calibration scores, hence marginal coverage
    ``P(Y in region) >= 1 - alpha``. Best when the residuals are close to Gaussian; curved
    or multimodal residuals call for `CONTRA` / `ResidualCONTRA`.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor predicting ``(n, d)``; ``None`` means
        ``LinearRegression()``. A fitted model (or ``FrozenEstimator(model)``) can be
        calibrated without ``fit``.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    covariance : {"global", "local"}, default="global"
        ``"global"``: one covariance (the second moment of the out-of-fold residuals), the
        same ellipsoid translated to every prediction. ``"local"``: the second moment of the
        residuals of the ``n_neighbors`` nearest fit rows in X (standardised features),
        shrunk toward the global one, so the ellipsoid adapts to ``x``.
    n_neighbors : int, default=50
        Neighbours of the local covariance (capped at the number of fit rows).
    shrinkage : float in [0, 1], default=0.2
        Weight of the global covariance in the local one.
    cv : int, cross-validation splitter or None, default=5
        Folds for the out-of-fold residuals; ``None``: in-sample residuals. A splitter
        by group (``GroupKFold``) is refused: ``fit`` takes no groups.
    random_state : int, Generator or None, default=None
        Seeds the folds (and the shape/score split of a prefit estimator), and the models
        trained here whose own ``random_state`` is None.
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).

    Attributes
    ----------
    estimator_ : regressor
    covariance_ : ndarray of shape (n_outputs, n_outputs)
        The global residuals' regularised second moment (uncentred, as the parameter
        says), the matrix of the Mahalanobis score.
    conformity_scores_ : ndarray of shape (n_calibration,)
    radius_ : float or ndarray
        Calibrated radius for the constructor's ``alpha`` at `calibrate` (one per level
        for a sequence, per group with Mondrian groups; a later ``set_params(alpha=...)``
        does not change it, the prediction methods read ``alpha`` afresh).
    n_calibration_, n_outputs_, n_features_in_ : int
    output_names_in_ : ndarray of object, shape (n_outputs,)
        The column labels of a DataFrame ``Y`` at fit (strings, numbers, MultiIndex
        tuples), unless they are ``0, ..., d - 1`` in order; later DataFrame targets with
        labels of the same kind must have the same columns in the same order.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 3))
    >>> Y = X[:, :2] + rng.multivariate_normal([0, 0], [[1, 0.8], [0.8, 1]], size=600)
    >>> model = EllipsoidalConformalRegressor(Ridge(), alpha=0.1, random_state=0)
    >>> model = model.fit(X[:300], Y[:300]).calibrate(X[300:500], Y[300:500])
    >>> region = model.predict_set(X[500:])
    >>> len(region), region.dim
    (100, 2)
    >>> bool(region.contains(Y[500:]).mean() > 0.8)
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        **_ResidualShapeRegressor._parameter_constraints,
        "covariance": [StrOptions({"global", "local"})],
        "n_neighbors": [Interval(numbers.Integral, 1, None, closed="left")],
        "shrinkage": [Interval(numbers.Real, 0, 1, closed="both")],
    }
    norm = "l2"

    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        # the neighbours and the shrinkage count only for the local covariance: a global
        # ellipse refused to predict after set_params of either
        local = ("n_neighbors",) if self.covariance == "local" else ()
        return (*super()._fit_params, "covariance", *local)

    @property
    def _calibration_params(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("shrinkage",) if self.covariance == "local" else ()

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        covariance: str = "global",
        n_neighbors: int = 50,
        shrinkage: float = 0.2,
        cv: int | Any | None = 5,
        random_state: int | np.random.Generator | None = None,
        n_jobs: int | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.covariance = covariance
        self.n_neighbors = n_neighbors
        self.shrinkage = shrinkage
        self.cv = cv
        self.random_state = random_state
        self.n_jobs = n_jobs

    def __setstate__(self, state: dict[str, Any]) -> None:
        # older pickles kept a fitted NearestNeighbors where the scaled rows are now kept
        searcher = state.pop("_neighbors", None)
        if searcher is not None:
            state["_neighbour_rows"] = searcher._fit_X
            state["_n_neighbours"] = searcher.n_neighbors
            state["_neighbour_search"] = searcher
        super().__setstate__(state)

    def _fit_shape(self, X: Any, residuals: NDArray, spread: NDArray | None = None) -> None:
        if spread is None:
            self._warn_if_degenerate(residuals, "learn the ellipsoid's covariance")
            second = _second_moment(residuals)
        else:  # in-sample residuals all 0: each output's own spread in Y
            second = np.diag(spread**2)
        self.covariance_ = regularised_covariance(second)
        self._cholesky = np.linalg.cholesky(self.covariance_)
        if self.covariance == "local":
            features = self._numeric_features(X)
            self._scaler = StandardScaler(with_mean=not sparse.issparse(features)).fit(features)
            k = min(int(self.n_neighbors), residuals.shape[0])
            if k < residuals.shape[1] and self.shrinkage == 0 and spread is None:
                warn_user(
                    f"covariance='local' with n_neighbors={k} below the {residuals.shape[1]} "
                    "outputs and shrinkage=0: each local covariance is singular, so the "
                    "regions degenerate (a huge radius, needle-shaped ellipses). Use "
                    "n_neighbors >= the number of outputs, or shrinkage > 0.",
                    UserWarning,
                )
            self._neighbour_rows = self._scaler.transform(features)
            self._n_neighbours = k
            self._neighbour_search = _neighbour_search(self._neighbour_rows)
            # residuals without scale (all 0 in-sample): every local moment is the spread's,
            # the fallback shape, rather than the floor 1e-9 (mixed in by `shrinkage` only)
            self._shape_residuals = residuals if spread is None else None
        else:
            for name in (
                "_scaler",
                "_neighbour_rows",
                "_n_neighbours",
                "_neighbour_search",
                "_shape_residuals",
            ):
                self.__dict__.pop(name, None)

    @staticmethod
    def _numeric_features(X: Any) -> NDArray:
        try:
            # C order: a DataFrame's column-ordered values scale in other last bits than the
            # same array's, and integer features then break distance ties otherwise
            return check_array(
                X, accept_sparse="csr", dtype=float, order="C", ensure_all_finite=True
            )
        except (TypeError, ValueError) as error:
            raise ValueError(
                "covariance='local' finds neighbours in X and needs numeric, finite features "
                f"({error}); encode or impute X first, or use covariance='global'."
            ) from None

    def _local_cholesky(self, X: Any) -> NDArray:
        """Cholesky factors ``(n, d, d)`` of the shrunk local covariances.

        Computed in blocks of about ``_LOCAL_CELLS / (k d)`` rows, so the gathered
        neighbour residuals never hold more than about ``_LOCAL_CELLS`` numbers. When the
        spread of ``Y`` replaced in-sample residuals that were all 0, every factor is the
        global one.
        """
        features = self._scaler.transform(self._numeric_features(X))
        if self._shape_residuals is None:  # the spread of Y replaced the residuals
            return np.repeat(self._cholesky[None], features.shape[0], axis=0)
        neighbours = _nearest_rows(
            features, self._neighbour_rows, self._n_neighbours, self._neighbour_search
        )
        n, k = neighbours.shape
        d = self._shape_residuals.shape[1]
        weight = float(self.shrinkage)
        out = np.empty((n, d, d))
        step = max(1, _LOCAL_CELLS // (k * d))
        for start in range(0, n, step):  # a loop over row blocks: bounded memory
            near = self._shape_residuals[neighbours[start : start + step]]  # (b, k, d)
            local = np.einsum("nki,nkj->nij", near, near) / k
            mixed = (1 - weight) * local + weight * self.covariance_
            out[start : start + step] = np.linalg.cholesky(regularised_covariance(mixed))
        return out

    def _latent_map(self, X: Any) -> AffineMap:
        center = self._estimator_prediction(X)
        if self.covariance == "local":
            # the factors are made here (no copy); the centre is the model's output, which a
            # model may keep and refill (diff review 52): copied
            return AffineMap(center.copy(), self._local_cholesky(X), copy=False)
        return AffineMap(center, self._cholesky[None])


class RectangularConformalRegressor(_ResidualShapeRegressor):
    """Box-shaped conformal regions around any multi-output regressor.

    Default: the score is ``max_j |y_j - f_j(x)| / s_j``, the max-norm of the residuals
    standardised by a per-output scale ``s_j`` (root mean square of the out-of-fold
    residuals of output ``j``); the region is the box ``f(x) +- r s`` with ``r`` the
    conformal quantile of the scores (exact joint coverage ``>= 1 - alpha``).

    ``bonferroni=True``: one split-conformal interval per output on ``|y_j - f_j(x)|`` at
    level ``alpha / d`` (the union bound gives joint coverage ``>= 1 - alpha``, usually
    with room to spare, hence larger boxes); no scale is needed.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor predicting ``(n, d)``; ``None`` means
        ``LinearRegression()``. A fitted model (or ``FrozenEstimator(model)``) can be
        calibrated without ``fit``.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    bonferroni : bool, default=False
        Per-output intervals at ``alpha / d`` instead of the max-norm score.
    cv : int, cross-validation splitter or None, default=5
        Folds for the out-of-fold residuals giving the scales; ``None``: in-sample. A
        splitter by group (``GroupKFold``) is refused: ``fit`` takes no groups.
    random_state : int, Generator or None, default=None
        Seeds the folds (and the shape/score split of a prefit estimator), and the models
        trained here whose own ``random_state`` is None.
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).

    Attributes
    ----------
    estimator_ : regressor
    scale_ : ndarray of shape (n_outputs,)
        Per-output residual scale (ones with ``bonferroni=True``).
    conformity_scores_ : ndarray of shape (n_calibration,) or (n_calibration, n_outputs)
        Max-norm scores, or one column of absolute residuals per output (Bonferroni).
    radius_ : float or ndarray
        Calibrated radius for the constructor's ``alpha`` at `calibrate`; with
        ``bonferroni=True`` one half-width per output (trailing level axis for a sequence
        of alphas).
    n_calibration_, n_outputs_, n_features_in_ : int
    output_names_in_ : ndarray of object, shape (n_outputs,)
        The column labels of a DataFrame ``Y`` at fit (strings, numbers, MultiIndex
        tuples), unless they are ``0, ..., d - 1`` in order; later DataFrame targets with
        labels of the same kind must have the same columns in the same order.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 3))
    >>> Y = X[:, :2] + rng.normal(size=(600, 2)) * [1.0, 3.0]
    >>> model = RectangularConformalRegressor(Ridge(), alpha=0.1, random_state=0)
    >>> model = model.fit(X[:300], Y[:300]).calibrate(X[300:500], Y[300:500])
    >>> model.predict_interval(X[500:]).shape  # lower/upper bound per output
    (100, 2, 2)
    >>> bool(model.predict_set(X[500:]).contains(Y[500:]).mean() > 0.8)
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        **_ResidualShapeRegressor._parameter_constraints,
        "bonferroni": ["boolean"],
    }
    norm = "linf"

    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*super()._fit_params, "bonferroni")

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        bonferroni: bool = False,
        cv: int | Any | None = 5,
        random_state: int | np.random.Generator | None = None,
        n_jobs: int | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.bonferroni = bonferroni
        self.cv = cv
        self.random_state = random_state
        self.n_jobs = n_jobs

    @property
    def _needs_shape(self) -> bool:  # type: ignore[override]
        return not self.bonferroni

    def _fit(self, X: Any, Y: NDArray, **fit_params: Any) -> None:
        self.scale_ = np.ones(Y.shape[1])
        super()._fit(X, Y, **fit_params)

    def _prepare_calibration(self, X: Any, Y: NDArray, *, prefit: bool) -> NDArray | None:
        if prefit:
            self.scale_ = np.ones(Y.shape[1])
        return super()._prepare_calibration(X, Y, prefit=prefit)

    def _fit_shape(self, X: Any, residuals: NDArray, spread: NDArray | None = None) -> None:
        scale = np.sqrt((residuals**2).mean(axis=0)) if spread is None else spread
        positive = scale[scale > 0]
        # only a zero scale (a constant output) is lifted, so each output keeps its units
        floor = COVARIANCE_RIDGE * (positive.max() if positive.size else 1.0)
        self.scale_ = np.where(scale > 0, scale, floor)

    def _latent_map(self, X: Any) -> AffineMap:
        return AffineMap(self._estimator_prediction(X), self.scale_[None])

    def _scores(self, X: Any, Y: NDArray) -> NDArray:
        if not self.bonferroni:
            return super()._scores(X, Y)
        return np.abs(self._latent_map(X).to_latent(Y))  # one score per output

    def _regions(self, X: Any, thresholds: NDArray) -> list[PredictionRegion]:
        if not self.bonferroni:
            return super()._regions(X, thresholds)
        center = self._estimator_prediction(X)
        regions = []
        for j in range(thresholds.shape[-1]):  # a loop over levels
            half = thresholds[..., j] * self.scale_  # (d,) or (n, d) with groups
            whole = np.isinf(half).any(axis=-1)
            half = np.where(np.isinf(half), self.scale_, half)
            half = np.where(half > 0, half, 1e-300)  # a zero-width side stays invertible
            radius = np.where(whole, np.inf, 1.0)
            regions.append(
                PredictionRegion(
                    AffineMap(center, np.atleast_2d(half)),
                    radius,
                    self.norm,
                    output_names=self.__dict__.get("output_names_in_"),
                )
            )
        return regions
