"""Conformalized quantile regression (CQR, Romano, Patterson and Candès, 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted

from uqconform._rows import check_sample_weight_rows, n_rows
from uqconform._seeding import integer_seed, seeded_clone
from uqconform._validation import (
    check_bool,
    check_fitted_model,
    check_row_order,
    check_weights_row_order,
    is_sklearn_estimator,
    model_output_as_float,
    point_predictions,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import check_frozen_features, refuses_nan
from uqconform.quantiles import check_alpha
from uqconform.regression.split import SplitConformalRegressor
from uqconform.routing import RoutesFitParams
from uqconform.scores.regression import CQRScore

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["ConformalizedQuantileRegressor", "QuantileBand"]


class QuantileBand(VersionedState, RoutesFitParams, BaseEstimator):
    """Two quantile regressors seen as one model whose ``predict`` returns ``(n, 2)``.

    Parameters
    ----------
    lower, upper : regressor
        Models of the lower and upper conditional quantiles.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import QuantileRegressor
    >>> X = np.arange(20.0)[:, None]; y = X[:, 0] + np.tile([-1.0, 1.0], 10)
    >>> band = QuantileBand(QuantileRegressor(quantile=0.1, alpha=0),
    ...                     QuantileRegressor(quantile=0.9, alpha=0)).fit(X, y)
    >>> band.predict(X[:1]).round(2)
    array([[-1.,  1.]])
    """

    def __init__(self, lower: BaseEstimator, upper: BaseEstimator):
        self.lower = lower
        self.upper = upper

    def _routed_models(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": self.upper}

    def fit(self, X: Any, y: ArrayLike, **fit_params: Any) -> Self:
        """Fit clones of ``lower`` and ``upper`` (the given models are left as they are).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Passed to both models' ``fit`` (with scikit-learn's metadata routing on, those
            each requested, see `uqconform.routing`).

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")  # pandas rows in another order: refused, not paired
        check_weights_row_order(X, fit_params, y)
        if fit_params.get("sample_weight") is not None:  # named before the models' messages
            check_sample_weight_rows(fit_params, n_rows(X))
        return self._fit_models(clone(self.lower), clone(self.upper), X, y, fit_params)

    def _fit_models(
        self, lower: Any, upper: Any, X: Any, y: ArrayLike, fit_params: dict[str, Any]
    ) -> Self:
        """Train ``lower`` and ``upper`` in place as ``lower_`` and ``upper_`` (CQR passes
        the band's own models, clones it made of the user's)."""
        routed = self._routed_fit_params(fit_params)
        self.lower_ = lower.fit(X, y, **routed["lower"])
        self.upper_ = upper.fit(X, y, **routed["upper"])
        return self

    def _models(self) -> tuple[Any, Any]:
        """The models ``fit`` trained, else the given ones (a band of fitted models)."""
        fitted = self.__dict__
        return fitted.get("lower_", self.lower), fitted.get("upper_", self.upper)

    def predict(self, X: Any) -> NDArray:
        """The lower and upper quantiles of each row.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, 2)
            The lower model's prediction, then the upper one's (of the models ``fit``
            trained, else of the given ones, taken as fitted).
        """
        lower, upper = self._models()
        # each model's output read as the wrappers read one (a Keras-style column (n, 1),
        # a tensor), named by its role
        return np.stack(
            [
                point_predictions(lower.predict(X), "lower"),
                point_predictions(upper.predict(X), "upper"),
            ],
            axis=1,
        )

    def __sklearn_is_fitted__(self) -> bool:
        for model in self._models():
            check_fitted_model(model)
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if is_sklearn_estimator(self.lower):  # else: the defaults (the model decides itself)
            tags.input_tags = replace(get_tags(self.lower).input_tags)
        # NaN unless a model certainly refuses it (a Pipeline that imputes first, a model
        # outside scikit-learn: they decide; scikit-learn's tags refuse it for both)
        tags.input_tags.allow_nan = not (refuses_nan(self.lower) or refuses_nan(self.upper))
        return tags

    def __getattr__(self, name: str) -> Any:
        # only called for missing attributes; __dict__ may be empty while unpickling
        if name in ("n_features_in_", "feature_names_in_") and "lower" in self.__dict__:
            return getattr(self._models()[0], name)
        raise AttributeError(name)


def _with_quantile(estimator: BaseEstimator, level: float, param: str | None) -> BaseEstimator:
    """A clone of ``estimator`` set to fit the ``level`` quantile."""
    if isinstance(estimator, FrozenEstimator):
        raise ValueError(
            "A single frozen (prefit) `estimator` cannot be refitted at the two quantile "
            "levels CQR needs: pass the pair (lower, upper) of fitted quantile models, e.g. "
            "estimator=(FrozenEstimator(lower), FrozenEstimator(upper))."
        )
    model = seeded_clone(estimator, None)  # a plain clone; names a model it cannot clone
    names = model.get_params(deep=True)
    if param is None:
        # scikit-learn's HistGradientBoosting / QuantileRegressor; XGBoost's quantile_alpha
        candidates = [k for k in names if k.split("__")[-1] in ("quantile", "quantile_alpha")]
        if not candidates:  # GradientBoostingRegressor / LightGBM: loss="quantile", alpha=q
            candidates = [
                k
                for k in names
                if k.split("__")[-1] == "alpha"
                and "quantile"
                in (
                    names.get(k[: -len("alpha")] + "loss"),
                    names.get(k[: -len("alpha")] + "objective"),
                )
            ]
        if not candidates:  # XGBoost lists quantile_alpha only once it is set (**kwargs)
            candidates = [
                k[: -len("objective")] + "quantile_alpha"
                for k, value in names.items()
                if k.split("__")[-1] == "objective" and _names_quantile_loss(value)
            ]
        losses = {
            k: value
            for k, value in names.items()
            if k.split("__")[-1] in ("loss", "objective") and isinstance(value, str)
        }
        if not candidates and losses and not any(map(_names_quantile_loss, losses.values())):
            # GradientBoostingRegressor() or (loss="huber"): the loss is what to change
            raise _not_a_quantile_loss(estimator, *next(iter(losses.items())))
        if not candidates and not any(k.split("__")[-1] in ("loss", "objective") for k in names):
            raise ValueError(
                f"`estimator` {type(estimator).__name__} has no quantile (pinball) loss "
                "parameter: CQR needs models that predict quantiles, such as "
                "HistGradientBoostingRegressor(loss='quantile'), QuantileRegressor, or a pair "
                "of models (lower, upper) as `estimator`; for a quantile model whose level "
                "parameter has another name, give that name as `quantile_param`. Around a "
                "mean model use SplitConformalRegressor (conformity_score='normalized' for "
                "intervals that follow the spread)."
            )
        if len(candidates) != 1:
            raise ValueError(
                f"Cannot tell which parameter of {type(estimator).__name__} sets the quantile "
                "level: give `quantile_param` (e.g. 'quantile' for "
                "HistGradientBoostingRegressor(loss='quantile'), 'quantile_alpha' for "
                "XGBRegressor(objective='reg:quantileerror')), or pass a pair of models "
                "(lower, upper) as `estimator`."
            )
        param = candidates[0]
    prefix = param[: -len(param.split("__")[-1])]
    key = prefix + "loss" if prefix + "loss" in names else prefix + "objective"
    loss = names.get(key)
    if isinstance(loss, str) and not _names_quantile_loss(loss):
        # e.g. HistGradientBoostingRegressor() would silently ignore `quantile` and fit the
        # mean twice: a band of width zero
        raise _not_a_quantile_loss(estimator, key, loss)
    try:  # a model may take settings it does not list before they are set (XGBoost)
        return model.set_params(**{param: level})
    except (ValueError, TypeError):
        raise ValueError(
            f"`quantile_param` {param!r} is not a parameter of {type(estimator).__name__}."
        ) from None


def _not_a_quantile_loss(estimator: Any, key: str, loss: str) -> ValueError:
    return ValueError(
        f"`estimator` {type(estimator).__name__} has {key}={loss!r}; CQR needs "
        f"quantile models: set `{key.split('__')[-1]}` to a quantile (pinball) loss, "
        "e.g. loss='quantile' (scikit-learn, LightGBM) or "
        "objective='reg:quantileerror' (XGBoost)."
    )


def _names_quantile_loss(value: Any) -> bool:
    """Whether a ``loss`` / ``objective`` setting names a quantile loss: 'quantile'
    (scikit-learn, LightGBM), 'reg:quantileerror' (XGBoost), a 'pinball' loss."""
    return isinstance(value, str) and any(w in value.lower() for w in ("quantile", "pinball"))


class ConformalizedQuantileRegressor(SplitConformalRegressor):
    """Conformalized quantile regression: a quantile band widened (or narrowed) on held-out data.

    The band adapts to heteroscedastic noise; calibration makes its coverage valid in finite
    samples: ``P(y in interval) >= 1 - alpha``.

    Parameters
    ----------
    estimator : regressor, (regressor, regressor) or QuantileBand, default=None
        A regressor with a quantile loss, fitted twice at levels ``alpha/2`` and
        ``1 - alpha/2`` (``None``: ``HistGradientBoostingRegressor(loss="quantile")``), or a
        pair ``(lower, upper)`` of quantile models (or a `QuantileBand` of them), fitted by
        ``fit`` or already fitted (then ``calibrate`` works without ``fit``).
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s). The quantile models are trained at the first level `fit`
        sees (a later ``set_params(alpha=...)`` keeps them); other levels are still valid,
        the calibration step absorbs the difference.
    symmetric : bool, default=True
        One correction for both ends (``max(lo - y, y - hi)``) or, with ``False``, one per end,
        each at ``alpha/2``. Negative corrections can cross a narrow band: the empty set is
        reported as a zero-width interval, placed inside the row's innermost non-empty
        interval of the same call (so that levels stay nested). Its place, not its
        emptiness, then depends on the levels asked for together. The coverage metrics
        read it as the closed point ``[p, p]``, so a target equal to ``p`` (integer
        targets and predictions) counts as covered.
    quantile_param : str, default=None
        Name of the parameter setting the quantile level (e.g. ``"quantile"``,
        ``"regressor__alpha"``); found automatically for scikit-learn's quantile models.
    batch_size : int, default=None
    random_state : int, numpy Generator or None, default=None
        Seeds the default quantile model (its early-stopping split on large data), given
        models whose own ``random_state`` is None, and the draws of smoothed p-values
        (`predict_pvalue`).
    likelihood_ratio : callable or None, default=None
        Weighted conformal prediction under covariate shift, as in
        `SplitConformalRegressor`: ``likelihood_ratio(X)`` gives each row's density ratio
        ``dP_test / dP_calibration``.

    Attributes
    ----------
    estimator_ : QuantileBand
        The fitted pair of quantile models.
    conformity_scores_ : ndarray of shape (n_calibration,) or (n_calibration, 2)
        The calibration scores: ``max(lower - y, y - upper)`` per row, or with
        ``symmetric=False`` one column per end (``lower - y`` and ``y - upper``), each
        calibrated at ``alpha / 2``.
    n_calibration_ : int
        Number of calibration rows.
    calibration_strata_ : ndarray of shape (n_calibration,)
        Each calibration row's stratum (its group's index; all 0 without ``groups``).
    n_features_in_ : int
        Number of features seen at fit (or calibrate around a fitted model).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> X, y = make_regression(n_samples=1000, n_features=4, noise=5, random_state=0)
    >>> cqr = ConformalizedQuantileRegressor(alpha=0.2)
    >>> cqr = cqr.fit(X[:500], y[:500]).calibrate(X[500:800], y[500:800])
    >>> cqr.predict_interval(X[800:]).shape
    (200, 2)
    """

    #: Parameters the calibration scores depend on (changing one needs a new calibrate).
    _calibration_params = ("symmetric", "likelihood_ratio")

    def __init__(
        self,
        estimator: BaseEstimator | tuple[BaseEstimator, BaseEstimator] | None = None,
        alpha: float | ArrayLike = 0.1,
        symmetric: bool = True,
        quantile_param: str | None = None,
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
        likelihood_ratio: Any = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.symmetric = symmetric
        self.quantile_param = quantile_param
        self.batch_size = batch_size
        self.random_state = random_state
        self.likelihood_ratio = likelihood_ratio

    def _score_object(self) -> CQRScore:
        check_bool(self.symmetric, "symmetric")
        return CQRScore(symmetric=bool(self.symmetric))

    def _needs_difficulty(self) -> bool:
        return False

    def _default_estimator(self) -> BaseEstimator:
        # Called by get_tags and parameter checks too: a Generator or RandomState is not
        # drawn from here (each call would take a draw and change the numbers); the model's
        # unset seed is filled once, when it is trained.
        seed = self.random_state
        drawn = isinstance(seed, np.random.Generator | np.random.RandomState)
        return HistGradientBoostingRegressor(
            loss="quantile", random_state=None if drawn else integer_seed(seed)
        )

    def _pair(self) -> Sequence[Any] | None:
        """The (lower, upper) models when ``estimator`` is given as a sequence or as a
        `QuantileBand` (its given models, whose settings fit trains)."""
        if isinstance(self.estimator, QuantileBand):
            return (self.estimator.lower, self.estimator.upper)
        return self.estimator if isinstance(self.estimator, (tuple, list)) else None

    def _validate_params(self) -> None:
        super()._validate_params()
        pair = self._pair()
        if pair is not None and len(pair) != 2:
            raise ValueError(
                f"`estimator` as a sequence must be a pair (lower, upper), got {len(pair)} models."
            )
        if self.quantile_param is not None and not isinstance(self.quantile_param, str):
            raise TypeError(
                "`quantile_param` must be None or the name of the parameter that sets the "
                "model's quantile level (a str, e.g. 'quantile' or 'regressor__alpha'), got "
                f"{type(self.quantile_param).__name__}."
            )
        if pair is not None and self.quantile_param is not None:
            raise ValueError(
                f"`quantile_param` ({self.quantile_param!r}) sets the levels of one quantile "
                "model cloned twice; a pair (lower, upper) or a QuantileBand keeps the levels "
                "its models were given: leave `quantile_param` at None."
            )

    def _check_frozen_features(self) -> None:
        check_frozen_features(
            self, self._pair() or self.estimator, ("the lower quantile model", "the upper one")
        )

    def _estimator_or_default(self) -> BaseEstimator:
        pair = self._pair()
        return super()._estimator_or_default() if pair is None else pair[0]

    def _fit_trains_on_rows(self) -> bool:
        # a (lower, upper) pair is trained by fit unless both models are frozen
        pair = self._pair()
        if pair is None:
            return super()._fit_trains_on_rows()
        return not all(isinstance(model, FrozenEstimator) for model in pair)

    def _routed_models(self) -> dict[str, Any]:
        pair = self._pair()
        if pair is not None:
            return {"estimator": QuantileBand(*pair)}
        base = self._estimator_or_default()
        return {"estimator": QuantileBand(base, base)}

    _fit_params = ("estimator", "quantile_param")  # the quantile models fit trained

    def _make_estimator(self) -> QuantileBand:
        seed = self.random_state
        pair = self._pair()
        if pair is not None:
            return QuantileBand(*(seeded_clone(model, seed) for model in pair))
        level = float(check_alpha(self.alpha)[0])
        base = self._estimator_or_default()
        return QuantileBand(
            seeded_clone(_with_quantile(base, level / 2, self.quantile_param), seed),
            seeded_clone(_with_quantile(base, 1 - level / 2, self.quantile_param), seed),
        )

    def _train_estimator(self, X: Any, y: Any, params: dict[str, Any]) -> None:
        # the band holds fit's own clones of the user's models: trained in place, so
        # estimator_.lower and .upper are the fitted models
        band = self.estimator_
        band._fit_models(band.lower, band.upper, X, y, params)

    def _prefit_estimator(self) -> QuantileBand:
        pair = self._pair()
        if pair is None:
            return super()._prefit_estimator()
        if isinstance(self.estimator, QuantileBand):  # the models its own fit trained
            pair = self.estimator._models()
        band = QuantileBand(*pair)
        check_is_fitted(band)
        return band

    def _model_output(self, X: Any) -> NDArray:
        band = np.asarray(self.estimator_.predict(X), dtype=float)
        if band.ndim != 2 or band.shape[1] != 2:
            raise ValueError(
                f"`estimator` must predict a band of shape (n, 2), got shape {band.shape}: a "
                "single fitted model gives one quantile; pass a pair (lower, upper) of fitted "
                "quantile models, or an unfitted quantile model and call fit."
            )
        return band

    def _check_calibration_output(self, output: NDArray) -> None:
        """Warn when the lower model is above the upper one on most calibration rows: a
        pair given as (upper, lower). Coverage holds either way (the correction absorbs
        it), but the band's shape is lost."""
        crossed = float(np.mean(output[:, 0] > output[:, 1])) if output.ndim == 2 else 0.0
        if crossed > 0.5:
            warn_user(
                f"{type(self).__name__}: the lower quantile model predicts above the upper "
                f"one on {crossed:.0%} of the calibration rows: was `estimator` given as "
                "(upper, lower)? It must be (lower, upper). The intervals stay valid, but "
                "they no longer follow the band."
            )

    def predict(self, X: Any) -> NDArray:
        """Centre of the fitted quantile band (not a median estimate).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return super().predict(X).mean(axis=1)

    def _point_output(self, output: Any) -> NDArray:
        return np.asarray(model_output_as_float(output), dtype=float)  # the band's (n, 2)

    def _predict_batch(self, X, thresholds, alphas, rng):
        out = super()._predict_batch(X, thresholds, alphas, rng)
        # A negative correction can cross a narrow band; an empty set is reported as a
        # zero-width interval, so lower <= upper always holds: at the band's centre, moved
        # into the innermost non-empty interval of the row (the corrections grow as alpha
        # falls, so the empty levels are the largest alphas), which keeps levels nested.
        crossed = out[:, 0, :] > out[:, 1, :]
        if crossed.any():
            rows = np.flatnonzero(crossed.any(axis=1))
            sub = out[rows]
            # the band's centre from a crossed level: its ends less their corrections
            t = np.broadcast_to(thresholds[:, 0], (out.shape[0], *thresholds.shape[2:]))[rows]
            level = np.argmax(crossed[rows], axis=1)
            at = np.arange(rows.size)
            point = (
                sub[at, 0, level] + t[at, 0, level] + sub[at, 1, level] - t[at, -1, level]
            ) / 2
            fine = ~crossed[rows]
            inner = np.argmax(np.where(fine, alphas[None, :], -np.inf), axis=1)
            low, high = sub[at, 0, inner], sub[at, 1, inner]
            point = np.where(fine.any(axis=1), np.clip(point, low, high), point)
            sub[:, :, :] = np.where(crossed[rows][:, None, :], point[:, None, None], sub)
            out[rows] = sub
        return out
