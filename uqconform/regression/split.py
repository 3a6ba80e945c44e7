"""Split conformal regression with absolute, normalized or user-defined scores."""

from __future__ import annotations

import inspect
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import TransformedTargetRegressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import Pipeline
from sklearn.utils.metadata_routing import get_routing_for_object
from sklearn.utils.validation import has_fit_parameter

from uqconform._cross import out_of_fold_prediction, reads_groups, refuse_split_iterator
from uqconform._rows import n_rows, row_sliceable
from uqconform._seeding import integer_seed, seeded_clone
from uqconform._validation import (
    candidate_grid,
    candidate_values,
    check_bool,
    check_fitted_model,
    check_regression_target,
    check_row_order,
    check_score_output,
    is_sklearn_estimator,
    point_predictions,
    refuse_model_class,
    refuse_non_finite,
)
from uqconform._warnings import warn_user
from uqconform.base import ConformalPredictor
from uqconform.routing import routing_enabled
from uqconform.scores.regression import CQRScore, RegressionScore, get_regression_score

__all__ = ["SplitConformalRegressor"]


def predictive_spread(model: Any, X: Any) -> NDArray:
    """Per-row spread of a fitted model: ``predict_std(X)``, else ``predict(X, return_std=True)``.

    A model without either is taken to predict the spread itself (e.g. a regressor trained
    on absolute residuals).
    """
    if hasattr(model, "predict_std"):
        return point_predictions(model.predict_std(X), "difficulty_estimator")
    if isinstance(model, Pipeline):
        # the last step asked directly: under metadata routing, Pipeline.predict refuses to
        # forward return_std to a step that did not request it
        if len(model) > 1:
            X = model[:-1].transform(X)
        return predictive_spread(model[-1], X)
    parameters = inspect.signature(model.predict).parameters
    forwards = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if "return_std" in parameters or forwards:  # a meta-estimator may forward it
        try:
            return point_predictions(model.predict(X, return_std=True)[1], "difficulty_estimator")
        except TypeError:  # the last step does not take return_std
            pass
        except (AttributeError, ValueError) as error:
            # a TransformedTargetRegressor forwards return_std and then fails to
            # inverse-transform the (mean, std) pair: falling back to predict would take
            # its predicted mean for a spread (any other model's error is its own)
            if not isinstance(model, TransformedTargetRegressor):
                raise
            raise ValueError(
                f"`difficulty_estimator` ({type(model).__name__}) failed when asked for "
                f"predict(X, return_std=True): {error}. A model that transforms the target "
                "has no predictive standard deviation in the units of y: pass the inner "
                "model (fitted on y itself), or a model fitted on absolute residuals."
            ) from error
    return point_predictions(model.predict(X), "difficulty_estimator")


def _checked_scores(score: RegressionScore, values: Any, n: int) -> NDArray:
    """``score.score``'s ``values`` for ``n`` targets, checked: ``(n,)`` for a one-sided
    score, ``(n, n_components)`` otherwise, no NaN."""
    components = int(score.n_components)
    shape = (n,) if components == 1 else (n, components)
    return check_score_output(values, shape, f"{score!r}.score")


# The smallest spread a row can have when no training spread sets a floor (a prefit
# difficulty model, or a difficulty model that predicts zero everywhere): the smallest
# normal float, so that only zero spreads are lifted, whatever the units of y.
_ZERO_SPREAD_FLOOR = float(np.finfo(float).tiny)


# Calibration rows lifted to the floor with residuals above it, as a share of all rows,
# from which calibration warns: a few such rows (a boundary between a noiseless and a noisy
# region) barely move the threshold; a share near alpha inflates every interval.
_LIFTED_SHARE_WARNED = 0.01


class SplitConformalRegressor(RegressorMixin, ConformalPredictor):
    """Split conformal prediction intervals around any scikit-learn regressor.

    Held-out calibration residuals give intervals with finite-sample marginal coverage
    ``P(y in interval) >= 1 - alpha`` under exchangeability (group-conditional with
    ``groups=``).

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor or Pipeline; ``None`` means ``LinearRegression()``.
        A fitted model (or ``FrozenEstimator(model)``) can be calibrated without ``fit``;
        so can a model outside scikit-learn with ``predict`` (taken as fitted).
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    conformity_score : {"absolute", "normalized"} or RegressionScore, default="absolute"
        ``"absolute"``: ``|y - y_hat|``, constant width. ``"normalized"``:
        ``|y - y_hat| / sigma(x)``, width proportional to a difficulty estimate.
    difficulty_estimator : regressor, default=None
        For ``conformity_score="normalized"``. Unfitted (or ``None``: a clone of
        ``estimator``): fitted in ``fit`` on the absolute out-of-fold residuals of
        ``estimator``, with ``fit``'s ``sample_weight`` when its fit takes it (with
        scikit-learn's metadata routing on, the parameters it requested). Fitted: used as is,
        through ``predict_std(X)`` or ``predict(X, return_std=True)`` when it has them
        (a Gaussian process, a Bayesian predictive), else ``predict(X)``. Spreads at or
        below a small floor are lifted to it; calibration warns when rows so lifted have
        residuals above it (a model that keeps spreads positive where there is noise,
        such as k-NN or a random forest, suits best). The out-of-fold residuals come from
        ``cv`` fresh copies of ``estimator``'s model, trained on the fit rows, also when
        ``estimator`` is a ``FrozenEstimator`` (the frozen model itself is never refitted;
        fit warns): pass a fitted ``difficulty_estimator`` to train nothing.
    cv : int or cross-validation splitter, default=5
        Folds for the out-of-fold residuals of the normalized score (one copy of the
        model trained per fold).
    batch_size : int, default=None
        Rows predicted at once (``None``: automatic), to bound memory on large inputs.
    random_state : int, Generator or None, default=None
        Seeds the out-of-fold split, the models trained here whose own
        ``random_state`` is left at None (the estimator, its out-of-fold copies, the
        difficulty model), and the draws of smoothed p-values (`predict_pvalue`).
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).
    likelihood_ratio : callable or None, default=None
        Weighted conformal prediction under covariate shift (Tibshirani et al., 2019):
        ``likelihood_ratio(X)`` returns, per row, the density ratio ``w(x) =
        dP_test / dP_calibration(x)`` of the features (any positive multiple will do;
        known, or estimated with `uqconform.shift.ClassifierDensityRatio`), in the
        rows' order (a pandas result is read by position; one indexed by ``X``'s row
        labels in another order is refused). Calibration
        scores are weighted by ``w(x_i)`` and each test row's own weight ``w(x)`` sits on
        +inf, so coverage holds on the shifted population if ``y`` given ``x`` did not
        change. Rows far in the shifted region can get infinite intervals.

    Attributes
    ----------
    estimator_ : regressor
        The fitted model (the user's own object when it was calibrated without ``fit``).
    difficulty_estimator_ : regressor
        The fitted difficulty model (normalized score only).
    conformity_scores_ : ndarray of shape (n_calibration,)
    calibration_weights_ : ndarray of shape (n_calibration,)
        ``likelihood_ratio`` on the calibration rows (only with it).
    n_calibration_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only with a DataFrame input.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.linear_model import Ridge
    >>> X, y = make_regression(n_samples=600, n_features=5, noise=10, random_state=0)
    >>> cp = SplitConformalRegressor(Ridge(), alpha=0.1)
    >>> cp = cp.fit(X[:300], y[:300]).calibrate(X[300:500], y[300:500])
    >>> intervals = cp.predict_interval(X[500:])
    >>> intervals.shape
    (100, 2)
    >>> bool(((intervals[:, 0] <= y[500:]) & (y[500:] <= intervals[:, 1])).mean() > 0.8)
    True
    """

    _unbounded_prediction = "infinite intervals"

    @property
    def _calibration_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The score and the weights, and a fitted difficulty model used as given (one
        that fit trained is a fit parameter)."""
        names: tuple[str, ...] = ("conformity_score", "likelihood_ratio")
        if self.difficulty_estimator is not None and not self.__dict__.get(
            "_difficulty_is_residual_model", False
        ):
            names += ("difficulty_estimator",)
        return names

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        conformity_score: str | RegressionScore = "absolute",
        difficulty_estimator: BaseEstimator | None = None,
        cv: int | Any = 5,
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
        n_jobs: int | None = None,
        likelihood_ratio: Any = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.difficulty_estimator = difficulty_estimator
        self.cv = cv
        self.batch_size = batch_size
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.likelihood_ratio = likelihood_ratio

    def _default_estimator(self) -> BaseEstimator:
        return LinearRegression()

    def _validate_params(self) -> None:
        super()._validate_params()
        self._score_object()
        if "cv" in self.__dict__:  # (CQR has none) checked whether the score reads it or not
            cv = self.cv
            refuse_split_iterator(cv)  # before any model is trained
            if (
                cv is None
                or isinstance(cv, bool | str | float)
                or (isinstance(cv, numbers.Integral) and cv < 2)
            ):
                unused = (
                    ""
                    if self._needs_difficulty()
                    else " (this score does not use it: leave the default, 5; a fitted "
                    "model is adopted by calibrate alone, without a `cv`)"
                )
                raise ValueError(
                    "`cv` (the folds of the out-of-fold residuals a difficulty model "
                    f"learns) must be an int >= 2 or a cross-validation splitter, got {cv!r}"
                    f"{unused}."
                )
        model = getattr(self, "difficulty_estimator", None)  # CQR has none
        refuse_model_class(model, name="difficulty_estimator")
        spread = ("predict", "predict_std")
        if model is not None and not any(callable(getattr(model, m, None)) for m in spread):
            raise TypeError(
                "`difficulty_estimator` must be None or a regressor (with predict, or "
                f"predict_std), unfitted or fitted, got {type(model).__name__}."
            )

    def _warn_unused_difficulty(self) -> None:
        """Say so when a difficulty model is given to a score that never reads it (called
        once per fit, or per calibrate of an adopted model)."""
        unused = not self._score_object().needs_difficulty
        if unused and getattr(self, "difficulty_estimator", None) is not None:
            warn_user(
                f"`difficulty_estimator` is ignored: {self._difficulty_switch(False)} does "
                f"not use a difficulty ({self._difficulty_switch(True)} does).",
                UserWarning,
            )

    def _difficulty_switch(self, on: bool) -> str:
        """The setting that uses a difficulty (``on``), or the current one that does not: a
        score object named as given (e.g. ``SignedResidualScore(normalized=True)``)."""
        given = self.conformity_score
        if not on or (not isinstance(given, str) and self._score_object().needs_difficulty):
            return f"conformity_score={given!r}"
        if not isinstance(given, str) and hasattr(given, "normalized"):  # its own switch
            return f"conformity_score={type(given).__name__}(normalized=True)"
        return "conformity_score='normalized'"

    def _start_calibration(self, X: Any) -> Any:
        X = super()._start_calibration(X)
        if self.__dict__.get("_estimator_adopted", False):  # prefit: no fit warned before
            self._warn_unused_difficulty()
        return X

    def _score_object(self) -> RegressionScore:
        refuse_model_class(self.conformity_score, name="conformity_score")
        return get_regression_score(self.conformity_score)

    def _check_target(self, y, n, *, calibrating):
        return check_regression_target(y, n)

    def _output_columns(self) -> int:
        return 2

    # ---- difficulty (normalized score) ---------------------------------------------------
    def _routed_models(self) -> dict[str, Any]:
        """The estimator, and a given difficulty model that ``fit`` trains."""
        models = super()._routed_models()
        if self._needs_difficulty() and self.difficulty_estimator is not None:
            if not self._difficulty_is_prefit():
                models["difficulty_estimator"] = self.difficulty_estimator
        return models

    def _needs_difficulty(self) -> bool:
        return self._score_object().needs_difficulty

    def _calibration_needs_fit(self) -> bool:
        """Whether calibrate alone cannot serve the current settings: a score that needs a
        difficulty model, none trained by fit and none given fitted."""
        return (
            self._needs_difficulty()
            and "difficulty_estimator_" not in self.__dict__
            and not self._difficulty_is_prefit()
        )

    def _difficulty_is_prefit(self) -> bool:
        if self.difficulty_estimator is None:
            return False
        if not hasattr(self.difficulty_estimator, "fit"):
            return True  # e.g. a plain object with predict_std: nothing to train
        try:
            check_fitted_model(self.difficulty_estimator)
        except NotFittedError:
            return False
        return True

    def _after_fit(self, X, y, **fit_params):
        self._warn_unused_difficulty()
        for name in ("difficulty_estimator_", "difficulty_floor_"):
            self.__dict__.pop(name, None)
        self._difficulty_is_residual_model = False
        if not self._needs_difficulty():
            return
        if not self._difficulty_is_prefit():
            if hasattr(self.difficulty_estimator, "predict_distribution"):
                raise ValueError(
                    f"{self._unfitted_predictive()}, so that its predictive std is the "
                    "difficulty; an unfitted one is refused, not trained on absolute residuals."
                )
            cv = self.cv
            if reads_groups(cv, unknown=False):
                raise ValueError(
                    f"`cv` ({type(cv).__name__}) splits by group, but fit takes no groups: "
                    "use KFold (or an int) for the out-of-fold residuals of the normalized "
                    "score."
                )
            point = self._estimator_or_default()
            if isinstance(point, FrozenEstimator):  # refit its model out of fold, not frozen
                point = point.estimator
                self._warn_frozen_copies(point)
            seed = self.random_state
            routed = self._routed_fit_params(fit_params)
            out_of_fold = point_predictions(
                out_of_fold_prediction(
                    seeded_clone(point, seed),
                    X,
                    y,
                    cv,
                    integer_seed(seed),
                    self._estimator_consumes(point, fit_params),
                    self.n_jobs,
                    "the difficulty model",
                )
            )
            base = self.difficulty_estimator
            model = seeded_clone(point if base is None else base, seed)
            if base is None:  # a clone of the estimator: the estimator's parameters
                params = routed["estimator"]
            elif routing_enabled():
                params = routed["difficulty_estimator"]
            else:
                params = self._unrouted_difficulty_params(model, fit_params)
            self.difficulty_estimator_ = model.fit(X, np.abs(y - out_of_fold), **params)
            self._difficulty_is_residual_model = True
        # The floor of the spread is fixed from training data, never from calibration data,
        # so that the score is the same function for calibration and test points.
        spread = self._raw_spread(X)
        positive = spread[spread > 0]
        self.difficulty_floor_ = (
            1e-3 * float(np.median(positive)) if positive.size else _ZERO_SPREAD_FLOOR
        )

    def _train_estimator(self, X: Any, y: Any, params: dict[str, Any]) -> None:
        """Train ``estimator_``; a ``FrozenEstimator`` around a model outside scikit-learn
        fails scikit-learn's own fitted check, explained here."""
        model = self.estimator_
        try:
            super()._train_estimator(X, y, params)
        except (TypeError, AttributeError) as error:  # (no tags: an AttributeError)
            if not isinstance(model, FrozenEstimator) or is_sklearn_estimator(model.estimator):
                raise
            difficulty = (
                f"; with {self._difficulty_switch(True)}, pass a fitted "
                "`difficulty_estimator` too (the difficulty model fit trains learns the "
                "out-of-fold residuals of copies of the model, which cannot be made)"
                if self._needs_difficulty() and not self._difficulty_is_prefit()
                else ""
            )
            raise type(error)(
                f"`estimator` is a FrozenEstimator around {type(model.estimator).__name__}, a "
                "model outside scikit-learn, which FrozenEstimator.fit cannot check "
                f"({str(error).rstrip('.')}). Call calibrate(X_calib, y_calib) without fit: "
                f"the model is taken as fitted{difficulty}."
            ) from error

    def _warn_frozen_copies(self, model: Any) -> None:
        """Say that fit, given a frozen model, trains copies of its kind for the difficulty
        model (the frozen model itself is never refitted)."""
        cv = self.cv
        copies = f"{int(cv)} copies" if isinstance(cv, numbers.Integral) else "one copy per fold"
        own = (
            ", and the difficulty model itself is one more copy"
            if self.difficulty_estimator is None
            else ""
        )
        warn_user(
            "`estimator` is a FrozenEstimator, which fit never refits, but the difficulty "
            f"model of {self._difficulty_switch(True)} learns out-of-fold residuals: fit "
            f"trains {copies} of {type(model).__name__} on the fit rows (cv={cv!r}){own}. "
            "Pass a fitted `difficulty_estimator` to train nothing.",
            UserWarning,
        )

    @staticmethod
    def _estimator_consumes(point: Any, fit_params: dict[str, Any]) -> dict[str, Any]:
        """The parameters for the out-of-fold copies of ``point`` (routed again by
        ``cross_val_predict``): all with routing off; with it on, those ``point``
        consumes (one meant for the difficulty model alone would be refused there)."""
        if not routing_enabled() or not fit_params:
            return fit_params
        consumed = get_routing_for_object(point).consumes("fit", set(fit_params))
        return {name: value for name, value in fit_params.items() if name in consumed}

    def _unrouted_difficulty_params(self, model: Any, fit_params: dict[str, Any]) -> dict:
        """With routing off, a given difficulty model gets ``sample_weight`` when its fit
        takes it (other parameters are the estimator's); a warning says when it cannot."""
        if "sample_weight" not in fit_params:
            return {}
        if has_fit_parameter(model, "sample_weight"):
            return {"sample_weight": fit_params["sample_weight"]}
        warn_user(
            f"`difficulty_estimator` ({type(model).__name__}) takes no sample_weight: it is "
            "trained on the absolute out-of-fold residuals unweighted (the estimator and its "
            "out-of-fold copies are weighted). Coverage does not depend on it.",
            UserWarning,
        )
        return {}

    def _unfitted_predictive(self) -> str:
        """What to do with an unfitted Bayesian predictive given as difficulty model."""
        return (
            f"`difficulty_estimator` is an unfitted {type(self.difficulty_estimator).__name__}: "
            "fit it first (on rows held out from the network's training if the network is "
            "already trained)"
        )

    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The model fit trained, and the difficulty model if fit trained one too."""
        if self.__dict__.get("_difficulty_is_residual_model", False):
            return ("estimator", "difficulty_estimator", "cv")
        return ("estimator",)

    def _fit_trains_on_rows(self) -> bool:
        # a difficulty model trained on the fit rows counts too (also around a frozen model)
        return super()._fit_trains_on_rows() or self.__dict__.get(
            "_difficulty_is_residual_model", False
        )

    def _difficulty_model(self) -> Any:
        if not hasattr(self, "difficulty_estimator_"):
            if not self._difficulty_is_prefit():
                if hasattr(self.difficulty_estimator, "predict_distribution"):
                    raise NotFittedError(
                        f"{self._difficulty_switch(True)} needs a difficulty estimate, and "
                        f"{self._unfitted_predictive()}, then calibrate."
                    )
                raise NotFittedError(
                    f"{self._difficulty_switch(True)} needs a difficulty estimate: call "
                    "fit(X_train, y_train) so the difficulty model is trained on out-of-fold "
                    "residuals, or pass a fitted `difficulty_estimator` (e.g. a model with "
                    "predict_std)."
                )
            self.difficulty_estimator_ = self.difficulty_estimator
        if getattr(self.difficulty_estimator_, "classes_", None) is not None:  # fitted classifier
            raise ValueError(
                f"`difficulty_estimator` is a classifier "
                f"({type(self.difficulty_estimator_).__name__}); the difficulty of a "
                "regression row is a spread (a predictive std or a predicted absolute "
                "residual): pass a regressor."
            )
        return self.difficulty_estimator_

    def _raw_spread(self, X: Any) -> NDArray:
        model = self._difficulty_model()
        if self.__dict__.get("_difficulty_is_residual_model", False):
            # trained on absolute residuals: its prediction is the spread (even for a model
            # that also has a predictive std, such as BayesianRidge)
            return point_predictions(model.predict(X), "difficulty_estimator")
        return predictive_spread(model, X)

    def _difficulty(self, X: Any) -> NDArray | None:
        if not self._needs_difficulty():
            return None
        # Without fit (a prefit difficulty model) there is no training data to set a floor
        # from: only zero spreads are lifted, so the score does not depend on the units of y.
        return np.maximum(self._raw_spread(X), self._spread_floor())

    def _spread_floor(self) -> float:
        return float(getattr(self, "difficulty_floor_", _ZERO_SPREAD_FLOOR))

    def _warn_lifted_spreads(self, difficulty: NDArray, residuals: NDArray) -> None:
        """Warn when at least 1% of the calibration rows had their spread lifted to the
        floor and have residuals above it: the difficulty model calls them noiseless and
        they are not (a spread of zero on a row the data show noiseless, as a k-NN average
        can give, is right)."""
        floor = self._spread_floor()
        lifted = difficulty <= floor
        wrong = int(np.count_nonzero(lifted & (residuals > floor)))
        many_wrong = wrong >= _LIFTED_SHARE_WARNED * lifted.size
        if lifted.size and lifted.all() and residuals.any() and not many_wrong:
            # every spread at the floor and (almost) every residual below it: targets in
            # units below the smallest normal float (about 2.2e-308); the scores are
            # residuals / floor (many residuals above it: the difficulty model's fault,
            # warned below)
            model = type(self._difficulty_model()).__name__
            warn_user(
                f"`difficulty_estimator` ({model}) gave spreads <= {floor:.3g} on every "
                "calibration row: all are lifted to that floor, so the normalized score is "
                "the absolute residual over a constant and the intervals are those of the "
                "absolute score (no adaptation). Targets in units this small (spreads below "
                "the smallest normal float) should be rescaled first."
            )
            return
        if many_wrong:
            model = type(self._difficulty_model()).__name__
            warn_user(
                f"`difficulty_estimator` ({model}) gave spreads <= {floor:.3g} on "
                f"{int(lifted.sum())} of {lifted.size} calibration rows, {wrong} of which have "
                f"absolute residuals above that ({wrong / lifted.size:.1%} of the rows): the "
                f"spreads are lifted to it, so such rows get {self._lifted_spreads_effect(floor)}"
                "Use a difficulty model whose spreads stay positive where there is noise, "
                "e.g. KNeighborsRegressor or RandomForestRegressor (averages of absolute "
                "residuals), or a model with predict_std."
            )

    def _lifted_spreads_effect(self, floor: float) -> str:
        """What rows whose spread was lifted to ``floor`` get (for the warning above)."""
        return (
            "intervals of almost no width, and their scores (residual / spread) are huge, "
            "which raises the threshold and widens every other interval (a linear or boosted "
            "model fitted to absolute residuals can extrapolate to zero or below). "
        )

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        if not self.__dict__.get("_difficulty_is_residual_model", False):
            # a prefit difficulty model is read again, so set_params(...) takes effect
            self.__dict__.pop("difficulty_estimator_", None)

    # ---- scores and intervals --------------------------------------------------------------
    def _model_output(self, X: Any) -> NDArray:
        return point_predictions(self.estimator_.predict(X))

    def _checked_output(self, X: Any, rows: int, where: str = "rows") -> NDArray:
        """`_model_output`, refused unless it has one prediction per row."""
        output = self._model_output(X)
        if len(output) != rows:
            raise ValueError(f"`estimator` predicted {len(output)} values for {rows} {where}.")
        return output

    @staticmethod
    def _refuse_non_finite(
        output: NDArray, difficulty: NDArray | None, where: str, advice: str = ""
    ) -> None:
        """Name the rows where the model's predictions (or spreads) are NaN or infinite:
        a conformity score or an interval around them means nothing (the rows of a band are
        checked whole)."""
        refuse_non_finite(output, "`estimator` predicted NaN or infinite values", where, advice)
        if difficulty is not None:
            what = "`difficulty_estimator` gave NaN or infinite spreads"
            refuse_non_finite(difficulty, what, where, advice)

    def _check_calibration_output(self, output: NDArray) -> None:
        """A look at the model's predictions on the calibration rows (none here)."""

    def _calibration_scores(self, X, y):
        score = self._score_object()
        if (
            isinstance(score, CQRScore)
            and type(self)._model_output is SplitConformalRegressor._model_output
        ):
            # a band model's (n, 2) output would be refused below as "several outputs"
            raise ValueError(
                f"`conformity_score={score!r}` scores a quantile band (lower, upper), which "
                "this wrapper's point predictions are not: use "
                "uqconform.regression.ConformalizedQuantileRegressor (it fits or adopts the "
                "band, e.g. a fitted QuantileBand)."
            )
        output = self._checked_output(X, len(y), "calibration rows")
        difficulty = self._difficulty(X)
        advice = "; conformity scores need finite values"
        self._refuse_non_finite(output, difficulty, "calibration rows", advice)
        self._check_calibration_output(output)
        if isinstance(score, CQRScore) and output.ndim == 1:  # a subclass's point output
            raise ValueError(
                f"`conformity_score={score!r}` scores a quantile band (lower, upper), but "
                "`estimator` predicts one value per row: use "
                "uqconform.regression.ConformalizedQuantileRegressor."
            )
        scores = _checked_scores(score, score.score(y, output, difficulty), len(y))
        if difficulty is not None:
            self._warn_lifted_spreads(difficulty, np.abs(y - output))
        return scores, np.zeros(y.shape[0], dtype=np.intp), 1

    def _predict_batch(self, X, thresholds, alphas, rng):
        score = self._score_object()
        output = self._checked_output(X, n_rows(X))
        difficulty = self._difficulty(X)
        self._refuse_non_finite(output, difficulty, "rows of `X`")
        intervals = [  # a loop over levels, not rows
            np.asarray(score.inverse(output, thresholds[:, 0, :, j], difficulty), dtype=float)
            for j in range(alphas.size)
        ]
        if intervals[0].shape != (output.shape[0], 2):
            raise ValueError(
                f"{score!r}.inverse must return an array of shape (n_samples, 2) = "
                f"({output.shape[0]}, 2), got {intervals[0].shape}."
            )
        if not type(score).__module__.startswith("uqconform."):
            self._check_user_intervals(score, intervals)
            if alphas.size == 1:  # a user score's array may be kept or read-only
                intervals[0] = intervals[0].copy()
        return intervals[0][..., None] if alphas.size == 1 else np.stack(intervals, axis=-1)

    @staticmethod
    def _check_user_intervals(score: RegressionScore, intervals: list[NDArray]) -> None:
        """Refuse NaN ends and lower > upper from a user score's ``inverse`` (the library's
        own scores never give either; an empty set is not an interval)."""
        for ends in intervals:
            bad = np.isnan(ends).any(axis=1) | (ends[:, 0] > ends[:, 1])
            if bad.any():
                rows = np.flatnonzero(bad)
                raise ValueError(
                    f"{score!r}.inverse returned NaN or lower > upper for {rows.size} row(s) "
                    f"(first: row {rows[0]}, {ends[rows[0]].tolist()}): it must return "
                    "[lower, upper] with lower <= upper."
                )

    def predict_interval(
        self, X: Any, alpha: float | ArrayLike | None = None, *, groups: ArrayLike | None = None
    ) -> NDArray:
        """Prediction intervals.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            Lower and upper bounds; infinite when there were too few calibration points.
        """
        return self._predict_batched(X, alpha, groups, float, "predict_interval")

    def predict_set(
        self, X: Any, alpha: float | ArrayLike | None = None, *, groups: ArrayLike | None = None
    ) -> NDArray:
        """The native prediction set of a scalar regressor: `predict_interval` (see it).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            Lower and upper bounds, as `predict_interval` returns them.
        """
        return self._predict_batched(X, alpha, groups, float, "predict_set")

    def predict_pvalue(
        self,
        X: Any,
        y_candidates: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        smooth: bool = False,
    ) -> NDArray:
        """Conformal p-values of candidate labels.

        The p-value of a label ``y`` for row ``x`` is ``(1 + m) / (n + 1)``, where ``m``
        of the ``n`` calibration scores of the row's stratum (its group) are at least the
        score of ``(x, y)``. For the true label it is uniform on ``{1/(n + 1), ..., 1}`` or
        above (valid), and the interval of `predict_interval` at level ``alpha`` holds
        exactly the labels whose p-value exceeds ``alpha`` (up to rounding at its ends,
        and for ``alpha`` not within 1e-9 of a multiple of ``1 / (n + 1)``, which the
        intervals take as that multiple; a quantile band that a negative CQR correction
        crosses is the exception: its set is empty, its interval a point). With a score
        calibrated side by side at ``alpha / 2`` (CQR with ``symmetric=False``):
        ``min(1, 2 min(p_low, p_high))``, valid but conservative. With
        ``likelihood_ratio``: ``(W_m + w) / (W + w)``, the calibration weights of those
        ``m`` scores and of all ``n``, plus the row's own weight ``w``; a ratio of float
        sums, exact only up to rounding, so there is one more exception: at an exact
        weighted tie (a p-value equal to ``alpha`` in exact arithmetic) it can read
        ``alpha`` plus a rounding error (4e-17 at ``alpha=0.1`` in a review) for a label
        the interval rightly leaves out.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y_candidates : array-like of shape (n_samples,), (g,), (1, g) or (n_samples, g)
            One candidate per row; or ``g`` candidates for every row (``g != n_samples``:
            a shared grid as long as ``X`` is read as one candidate per row; shape
            ``(1, g)`` is read as a shared grid whatever the batch size, the safe form in a
            loop over batches); or each row's own ``g`` candidates.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups. A group
            without calibration data gives p-value 1 (its interval is infinite).
        smooth : bool, default=False
            Smoothed p-values ``(g + u (e + 1)) / (n + 1)``: ``g`` calibration scores
            greater than the candidate's, ``e`` equal, ``u`` uniform on [0, 1] (one draw
            per row and candidate, from ``random_state``). A true label's p-value is
            then exactly uniform even when scores tie (a model and a target on a
            coarse grid), except with ``symmetric=False`` CQR (conservative); the
            intervals are those of the unsmoothed p-values. With an int
            ``random_state`` the draws are a function of the seed and the rows of the
            call, so a row given again in another call (repeated feature rows predicted
            one call at a time) gets the same draw, and the p-values are no longer
            uniform over such calls: use ``None`` or a Generator there.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, g)
            The first for one candidate per row.

        Examples
        --------
        >>> from sklearn.datasets import make_regression
        >>> X, y = make_regression(n_samples=500, n_features=3, noise=5, random_state=0)
        >>> cp = SplitConformalRegressor(alpha=0.1).fit(X[:200], y[:200])
        >>> cp = cp.calibrate(X[200:400], y[200:400])
        >>> p = cp.predict_pvalue(X[400:], y[400:])
        >>> low, high = cp.predict_interval(X[400:]).T
        >>> bool(((p > 0.1) == ((low <= y[400:]) & (y[400:] <= high))).all())
        True
        """
        return self._candidate_pvalues("predict_pvalue", X, y_candidates, groups, smooth)

    def _candidate_pvalues(
        self,
        method: str,
        X: Any,
        candidates: Any,
        groups: ArrayLike | None,
        smooth: bool,
        name: str = "y_candidates",
        number_for_every_row: bool = False,
        **options: Any,
    ) -> NDArray:
        """`_conformal_pvalues` of candidate labels (``(n,)``, ``(g,)`` or ``(n, g)``, see
        `candidate_grid`; a number too with ``number_for_every_row``), shaped as they were
        given; ``options`` go to it."""
        self._check_calibrated(method)
        check_bool(smooth, "smooth")
        check_row_order(X, candidates, name)
        check_row_order(X, groups, "groups")
        X = row_sliceable(self._validate_X(X, reset=False))
        if number_for_every_row:  # checked first: np.ndim of a ragged list would raise
            candidates = candidate_values(candidates, name)
            if candidates.ndim == 0:  # as one value per row
                candidates = np.full(n_rows(X), candidates)
        grid, single = candidate_grid(candidates, n_rows(X), name=name)
        score = self._score_object()
        width = grid.shape[1]

        def candidate_scores(block: Any, start: int, stop: int) -> NDArray:
            output = self._checked_output(block, stop - start)
            difficulty = self._difficulty(block)
            self._refuse_non_finite(output, difficulty, "rows of `X`")
            spread = None if difficulty is None else np.repeat(difficulty, width)
            values = score.score(grid[start:stop].ravel(), np.repeat(output, width, 0), spread)
            return _checked_scores(score, values, (stop - start) * width)

        pvalues = self._conformal_pvalues(X, groups, smooth, width, candidate_scores, **options)
        return pvalues[:, 0] if single else pvalues
