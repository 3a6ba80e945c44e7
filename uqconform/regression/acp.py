"""Approximate full conformal prediction for neural regressors (ACP-GN).

Full conformal prediction refits the model once per test point and candidate label, which
is out of reach for a neural network. ACP-GN (Gauss-Newton influence) approximates each
refit by one Newton step from the trained weights with the Gauss-Newton curvature and
linearises the network there. The residuals then become linear in the candidate label, as
for ridge regression, and the ridge confidence machine (:mod:`uqconform.regression.crr`)
finds the set exactly for the linearised model: ridge regression on the parameter
Jacobian ("Jacobian features") with the model's weight decay as ridge strength.

The full mode takes the trained weights to be the optimum of the training loss (that is
the Newton step's premise): it is exact full CP for the linearised network whose Gaussian
prior is re-centred so that the trained weights are exactly its training optimum, and
approximate for the network itself (no finite-sample guarantee). It equals full CP of the
linearised network with the model's own prior (centred at 0) only at an exact stationary
point: on 8 converged tanh MLPs in a review (`stationarity_` 1.7e-5 to 3.8e-4) the ends of
the two differed by 0.02 to 0.5 of the interval's width, because a small gradient along a
nearly flat direction (a bias) moves the linearised optimum far. (Around a ridge-type linear
model, full mode steps to the ridge optimum and is exact full CP of the ridge.)
``calibrate(X_cal, y_cal)`` switches to the split+refine mode:
the network is frozen, and the ridge machine on its Jacobian features is fitted on held-out
calibration data only, which is finite-sample valid.
"""

from __future__ import annotations

import inspect
import numbers
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import TransformedTargetRegressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import _num_samples, check_is_fitted

from uqconform._rows import row_sliceable
from uqconform._seeding import check_random_state_value, integer_seed, seeded_clone
from uqconform._validation import (
    candidate_values,
    check_features,
    check_frozen_is_fitted,
    check_regression_target,
    check_row_order,
    check_wrapper_fitted,
    float_rows_without_nan,
    is_row_weight,
    named_as_fitted,
    refuse_model_class,
    refuse_non_numeric_features,
    sklearn_tags,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    adoption_lead,
    check_calibration_settings,
    keeps_state_on_error,
    record_calibration_settings,
    refuse_changed_digest,
    remember_calibration_rows,
    remember_training_rows,
)
from uqconform.linearize import (
    Linearization,
    _unwrap,
    check_squared_error_loss,
    check_standard_target,
    is_torch_module,
    last_layer_name,
    linearize,
    noise_variance,
    parameter_digest,
    standard_target_scaling,
    weight_decay,
)
from uqconform.regression.crr import LinearConfidenceMachine, label_tie_size
from uqconform.regression.full import FullConformalMixin
from uqconform.routing import RoutesFitParams, routing_enabled

# what a prediction before fit or calibrate needs (full mode, or split+refine mode)
_BEFORE_PREDICTING = "fit(X, y) (or calibrate(X_calib, y_calib) alone around a fitted `estimator`)"

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["ApproximateFullConformalRegressor"]


_DEFAULT_WEIGHT_DECAYS = (0.1, 1.0, 10.0, 100.0)
#: Fitting rows with a leverage above this get a warning (near-exact fit, wide intervals).
_HIGH_LEVERAGE = 0.99
_BIAS_PRIOR = 1e-10
#: A relative gradient norm above this at the trained weights gets a warning in full mode
#: (converged networks read about 1e-3 or less, networks stopped early 0.03 and more).
_FAR_FROM_STATIONARY = 0.02
# Predictions spread less than this share of the targets': a network weight decay shrank to
# a constant, whose stationarity ratio is meaningless (its reference vanishes too).
_CONSTANT_PREDICTION = 1e-3
# Labels the default model standardises: spread above 1 / this, magnitudes below it (their
# variance then neither underflows nor overflows in float64).
_LABEL_LIMIT = 1e150


def _is_search(model: Any) -> bool:
    """A hyper-parameter search (GridSearchCV, RandomizedSearchCV, ...) over one model."""
    return hasattr(model, "estimator") and (
        hasattr(model, "param_grid") or hasattr(model, "param_distributions")
    )


def _fit_takes(model: Any, name: str) -> bool:
    """Whether ``model.fit`` has a parameter ``name`` (or takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(model.fit).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return True  # cannot tell: let the model decide
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _check_kind(model: Any) -> None:
    """Raise TypeError before any training unless the model can be linearised."""
    if isinstance(model, FrozenEstimator):
        model = model.estimator
    if _is_search(model):  # a search over, e.g., the weight decay
        if getattr(model, "refit", True) is False:  # found before the search runs
            raise TypeError(
                f"`estimator`: {type(model).__name__} needs refit=True to give a fitted model."
            )
        return _check_kind(model.estimator)
    if isinstance(model, TransformedTargetRegressor):
        check_standard_target(model)  # before any training
        model = model.regressor
        if model is None:
            raise TypeError(
                "ApproximateFullConformalRegressor needs "
                "TransformedTargetRegressor(regressor=...) to name its regressor."
            )
    # TypeError naming the supported kinds; a Poisson network before training it
    check_squared_error_loss(_unwrap(model, None)[0])


def _final_model(model: Any) -> Any:
    """The model at the end of FrozenEstimator, searches, TransformedTargetRegressor and
    Pipelines: the one whose fit the influence describes."""
    while True:
        if isinstance(model, FrozenEstimator) or _is_search(model):
            model = model.estimator
        elif isinstance(model, TransformedTargetRegressor):
            model = model.regressor
        elif isinstance(model, Pipeline):
            model = model.steps[-1][1]
        else:
            return model


def _in_pipeline(model: Any) -> bool:
    """Whether the final model sits in a Pipeline, under FrozenEstimator, searches (their
    best estimator once fitted) and TransformedTargetRegressor (its fitted regressor): the
    pipeline's own steps then take ``X`` (text columns, missing values)."""
    while True:
        if isinstance(model, FrozenEstimator):
            model = model.estimator
        elif _is_search(model):
            model = getattr(model, "best_estimator_", model.estimator)
        elif isinstance(model, TransformedTargetRegressor):
            model = getattr(model, "regressor_", model.regressor)
        else:
            return isinstance(model, Pipeline)


def _rows_for_pipeline(X: Any) -> Any:
    """``X`` for a pipeline's own steps (text columns, missing values) with its dtypes
    untouched (steps may select columns by dtype), C-ordered as a bare network gets its
    rows: a numeric array in C order, and a DataFrame of float64 columns rebuilt on a
    C-ordered array (kept a DataFrame, for steps that select columns by name), so that it
    and its array train the network alike. Any other DataFrame is passed as given."""
    if isinstance(X, np.ndarray) and X.dtype.kind in "biuf":
        return np.ascontiguousarray(X)
    if isinstance(X, pd.DataFrame) and X.shape[1] and all(X.dtypes == np.float64):
        # built on a C-ordered array without a copy: scikit-learn reads that array back
        values = np.ascontiguousarray(X.to_numpy(dtype=np.float64))
        return pd.DataFrame(values, index=X.index, columns=X.columns, copy=False)
    return X


def _routed_weight_names(model: Any) -> set[str]:
    """With metadata routing on, the ``fit`` parameter names that reach the final model's
    ``sample_weight`` (its request: True or an alias)."""
    if not routing_enabled() or not hasattr(_final_model(model), "get_metadata_routing"):
        return set()
    request = _final_model(model).get_metadata_routing()
    value = getattr(getattr(request, "fit", None), "requests", {}).get("sample_weight")
    if value is True:
        return {"sample_weight"}
    return {value} if isinstance(value, str) else set()


def _split_target_scaling(model: Any) -> tuple[Any, float, float]:
    """``(inner model, shift, scale)`` with ``y = shift + scale * inner(x)``.

    A ``TransformedTargetRegressor`` with a ``StandardScaler`` target transform is
    linearised in the standardised target space, where the network was trained, with the
    shift and scale fitted on the training rows held fixed; exact full CP would refit them
    with each candidate label. For a ridge-type model with an unpenalised intercept the
    intervals are still exact full CP of the whole regressor: the fit is linear in the
    target, so the scale cancels, and the intercept absorbs the shift. Without such an
    intercept (``fit_intercept=False``) the shift is not absorbed and full mode is
    approximate (`_warn_fixed_target_shift`); for a network the scale also sets the weight
    decay's strength against the data, one more approximation in the linearisation.
    """
    if isinstance(model, FrozenEstimator):
        model = model.estimator
    if _is_search(model):
        check_is_fitted(model)
        if not hasattr(model, "best_estimator_"):
            raise TypeError(
                f"`estimator`: {type(model).__name__} needs refit=True to give a fitted model."
            )
        return _split_target_scaling(model.best_estimator_)
    if not isinstance(model, TransformedTargetRegressor):
        return model, 0.0, 1.0
    check_is_fitted(model)
    shift, scale = standard_target_scaling(model)
    return model.regressor_, shift, scale


def _centres_target(model: Any) -> bool:
    """Whether a fitted model's target transform centres ``y`` by its training rows' mean
    (a ``StandardScaler`` with ``with_mean=True`` in a ``TransformedTargetRegressor``)."""
    if isinstance(model, FrozenEstimator):
        model = model.estimator
    if _is_search(model):
        model = model.best_estimator_
    return isinstance(model, TransformedTargetRegressor) and bool(
        getattr(model.transformer_, "with_mean", False)
    )


def _absorbs_shift(jacobian: NDArray, free: NDArray) -> bool:
    """Whether the columns of ``jacobian`` free of any penalty span the constant vector (an
    unpenalised intercept or output bias): a shift of all labels then moves those
    parameters alone, and the residuals do not change."""
    if not free.any():
        return False
    ones = np.ones(jacobian.shape[0])
    columns = jacobian[:, free]
    solution = np.linalg.lstsq(columns, ones, rcond=None)[0]
    return bool(np.linalg.norm(columns @ solution - ones) <= 1e-8 * np.sqrt(ones.size))


def _check_model_columns(model: Any, X: Any) -> None:
    """Refuse a DataFrame whose columns are not those (in that order) a fitted model was
    trained on: the linearisation reads X as an array, so the model's own check never
    sees the names."""
    names = getattr(model, "feature_names_in_", None)
    columns = getattr(X, "columns", None)
    if names is None or columns is None or not all(isinstance(c, str) for c in columns):
        return
    if list(columns) != list(names):
        raise ValueError(
            f"The columns of `X` {list(columns)[:6]}{' ...' if len(columns) > 6 else ''} are "
            f"not those `estimator` was fitted on, in that order "
            f"{list(names)[:6]}{' ...' if len(names) > 6 else ''}: give "
            "X[model.feature_names_in_]."
        )


def _not_squared_error(model: Any) -> str | None:
    """What a model known to be fitted otherwise than by squared error with a Gaussian (L2)
    prior minimises (its loss or its penalty), or None."""
    name = type(model).__name__
    losses = {
        "QuantileRegressor": "the quantile (pinball) loss",
        "HuberRegressor": "the Huber loss",
        "TheilSenRegressor": "no loss (a spatial median of least-squares solutions)",
        "PassiveAggressiveRegressor": "an epsilon-insensitive loss",
        "LinearSVR": "an epsilon-insensitive loss",
        "SVR": "an epsilon-insensitive loss",
    }
    if name in losses:
        return losses[name]
    if bool(getattr(model, "positive", False)):  # np.True_ too
        return "least squares with non-negative coefficients (positive=True)"
    if name == "ARDRegression":  # its posterior mean is not a ridge solution
        return "a Gaussian prior of its own precision for each weight (ARD)"
    if name == "SGDRegressor" and getattr(model, "loss", "squared_error") != "squared_error":
        return f"loss={model.loss!r}"
    # the fitted strength and mix where a search chose them (alpha_, l1_ratio_)
    strength = getattr(model, "alpha_", getattr(model, "alpha", 1.0))
    mix = getattr(model, "l1_ratio_", getattr(model, "l1_ratio", 1.0))
    penalised = bool(np.all(np.asarray(strength, dtype=float) != 0))
    l1 = penalised and np.any(np.asarray(mix) != 0)
    penalty = getattr(model, "penalty", "l2")
    if name == "SGDRegressor" and (
        (penalty == "l1" and penalised) or (penalty == "elasticnet" and l1)
    ):
        return f"an L1 penalty (penalty={model.penalty!r})"
    lasso_kinds = {"Lasso", "ElasticNet", "LassoCV", "ElasticNetCV", "LassoLars"}
    lasso_kinds |= {"LassoLarsCV", "LassoLarsIC"}
    if name in lasso_kinds and l1:
        return "an L1 penalty"
    subset_kinds = {"OrthogonalMatchingPursuit", "OrthogonalMatchingPursuitCV", "Lars", "LarsCV"}
    if name in subset_kinds and np.any(np.asarray(getattr(model, "coef_", 1.0)) == 0):
        return _SUBSET_FIT
    return None


_SUBSET_FIT = "least squares over a selected subset of coefficients (the others held at 0)"


def _least_squares_optimum(lin: Linearization, target: NDArray) -> bool:
    """Whether every parameter's squared-error gradient at the trained weights is at
    round-off level (``1e-8`` of its Cauchy-Schwarz bound): a subset fit whose held
    coefficients sit on columns least squares cannot use (constant beside an intercept,
    all zero) is its optimum, and its sets exact; one that leaves out a weak real feature
    is not, however small the whole fit's `stationarity_` (0.0096 in a review)."""
    residual = target - lin.prediction
    gradient = np.abs(lin.jacobian.T @ residual)
    bound = np.hypot.reduce(lin.jacobian, axis=0) * float(np.linalg.norm(residual))
    return bool(np.all(gradient <= 1e-8 * bound))


def _features_the_module_takes(module: Any) -> int | None:
    """The number of input columns of a torch module whose first layer is a ``Linear``
    (directly, or first in nested ``Sequential`` containers), else None (not known)."""
    import torch

    while isinstance(module, torch.nn.Sequential) and len(module):
        module = module[0]
    if isinstance(module, torch.nn.Linear) and not isinstance(module, torch.nn.LazyLinear):
        return int(module.in_features)
    return None


def _check_default_target(y: NDArray) -> None:
    """Refuse fewer rows than the default model's search has folds, and labels its target
    ``StandardScaler`` cannot standardise: a variance that underflows (the scaler then
    takes the scale to be 1 and the intervals come out in the wrong units) or squares that
    overflow (every fit of its search fails)."""
    if y.shape[0] < 3:  # (the search's folds; scikit-learn's KFold message named neither)
        raise ValueError(
            f"`X` and `y` have {y.shape[0]} row{'s' * (y.shape[0] != 1)}: the default model "
            "chooses its weight decay by 3-fold cross-validation and needs at least 3 rows; "
            "pass a fitted `estimator`, or use FullConformalRidge on so few rows."
        )
    largest = float(np.max(np.abs(y), initial=0.0))
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        spread = float(np.std(y))
    tiny = np.ptp(y) > 0 and not spread > 1.0 / _LABEL_LIMIT
    if largest >= _LABEL_LIMIT or tiny:
        raise ValueError(
            f"`y` has standard deviation {spread:.3g} and largest magnitude {largest:.3g}: "
            "the default model standardises it with its variance, which float64 cannot "
            f"hold below a spread of {1.0 / _LABEL_LIMIT:.0e} or for magnitudes from "
            f"{_LABEL_LIMIT:.0e} on: rescale `y` (e.g. by a power of ten, or another unit) "
            "and scale the intervals back."
        )


class ApproximateFullConformalRegressor(
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    VersionedState,
    RoutesFitParams,
    FullConformalMixin,
    RegressorMixin,
    BaseEstimator,
):
    """Approximate full conformal prediction via Gauss-Newton influence (ACP-GN).

    Parameters
    ----------
    estimator : regressor or torch.nn.Module, default=None
        A scikit-learn linear regressor or ``MLPRegressor`` (optionally the last step of a
        Pipeline of transformers, inside a ``TransformedTargetRegressor`` with a
        ``StandardScaler`` target transform, inside a ``GridSearchCV``, or wrapped in
        ``FrozenEstimator``; the target's mean and scale are held as fitted on the
        training rows, which keeps full mode exact for a ridge with an intercept, but not
        without one: `fit` warns), or a trained ``torch.nn.Module`` with one output (used as is,
        never trained here). ``None`` means an ``MLPRegressor(hidden_layer_sizes=(50,),
        activation="tanh", solver="lbfgs")`` on standardised inputs and target, with its
        weight decay chosen among 0.1, 1, 10, 100 by 3-fold cross-validation: an
        overfitted network makes the full mode under-cover. Cross-validation picks the
        smallest prediction error, not coverage, and the chosen network can still fit its
        training rows clearly better than new ones (full-mode coverage then a few points
        below nominal); ``calibrate`` (split+refine) is the mode with a guarantee. The full
        mode assumes the weights are a stationary point of the regularised loss; train
        to convergence (scikit-learn's ``lbfgs`` stops on the loss's relative change
        whatever ``tol`` says, so a small gradient remains).
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1).
    conformity_score : {"studentized", "standard", "deleted"}, default="studentized"
        Residuals divided by ``sqrt(1 - h)``, as they are, or divided by ``1 - h``, where
        ``h`` is the leverage of a point in the linearised fit that includes the test point.
    curvature : {"full", "last_layer"}, default="full"
        Gauss-Newton curvature over all parameters, or over the last layer only (cheaper for
        large networks). Use ``"last_layer"`` with split+refine (`calibrate`): in full
        mode it holds hidden layers trained on the same rows fixed and under-covers.
    prior_precision : "auto" or float, default="auto"
        ``"auto"``: the model's own weight decay (``alpha`` of Ridge and MLPRegressor, which
        is the ridge strength in sum-of-squares units). A float ``P``: Gaussian prior
        precision of the weights, i.e. ridge strength ``noise**2 * P``. Intercepts and biases
        are not penalised. In full mode, a strength other than the model's own weight decay
        moves the weights by the Newton step to the linearised optimum under it (a ridge
        becomes `FullConformalRidge` at that strength); where the trained decay is unknown
        (a torch module, a Lasso or an SGDRegressor), a float is taken to be the one the
        model was trained with. A model known to minimise another loss or penalty
        (QuantileRegressor, HuberRegressor, TheilSenRegressor, an SGDRegressor with another
        loss or an L1 penalty, Lasso, ElasticNet and ARDRegression) is linearised as if
        fitted by squared error with this Gaussian prior, weights taken as its optimum:
        `fit` warns that the sets are then approximate (coverage held in a review, with
        ``prior_precision=1.0``: 0.91 at 0.90 for QuantileRegressor and 0.92 for
        HuberRegressor, over 600 data sets of 40 rows with heavy-tailed noise). In
        split+refine mode the guarantee needs a strength that does not depend on the
        calibration labels: ``"auto"``, or a float with a given ``noise`` (with
        ``noise="auto"`` it is the calibration residuals' mean square times ``P``).
    noise : "auto" or float, default="auto"
        Observation noise standard deviation: the root mean squared training (or
        calibration) residual, or a given value. Only the predictive standard deviation
        (:meth:`predict_std`) and a float ``prior_precision`` depend on it.
    algorithm : {"exact", "fast"}, default="exact"
        The ridge confidence machine used on the linearised model.
    batch_size : int, default=None
        Test points processed at once.
    random_state : int, Generator or None, default=None
        Seeds the default network (``estimator=None``) and its cross-validation folds; a
        given estimator keeps its own ``random_state``, or takes this seed where it is None.
        Same seed, same numbers bit for bit with the same BLAS thread count; another
        thread count changes the intervals in about the seventh digit (the Gram matrix of
        the Jacobian features is summed in another order, and it is ill-conditioned).

    Attributes
    ----------
    estimator_ : regressor or torch.nn.Module
    machine_ : LinearConfidenceMachine
        Ridge quantities of the Jacobian features of the fitting data.
    training_residuals_ : ndarray
    noise_ : float
        Noise standard deviation in the units of ``y``: the given ``noise``, or the root
        mean squared residual of the rows the machine was built on (the training rows in
        full mode; in split+refine mode the calibration residuals *before* the
        refinement, so `predict_std` is conservative there: rely on the conformal
        intervals).
    ridge_strength_ : float
        Penalty on the weights in sum-of-squares units of the target the network was
        trained on (standardised by a target scaler such as the default estimator's, so
        ``noise**2 * prior_precision`` divided by the target scale squared).
    mode_ : {"full", "split+refine"}
    stationarity_ : float
        Set by `fit` (removed by `calibrate`): the gradient of the loss the network was
        trained on (squared error plus its weight decay) at the trained weights, each
        parameter's entry divided by
        the norm of its Jacobian column (floored at 1e-2 of the largest of its kind, so
        that units switched off by weight decay do not count; the units of ``X`` matter
        only through that floor), in norm over that of the data gradient of a network
        predicting the mean target. Full mode assumes it is 0. It can be small while full
        mode is far from full CP of the linearised network with the model's own prior: the
        floor hides small gradients along nearly flat directions (biases), where the
        linearised optimum lies far from ``theta*`` (on 8 converged tanh MLPs of 5 units,
        60 rows, in a review, it read 1.7e-5 to 3.8e-4 while the ends of the two sets
        differed by 0.02 to 0.5 of the width). In our runs and reviews
        (diabetes, Friedman 1, 200 rows, 50 tanh units; weight decays 1 and 10 in the
        latest review): about 1e-3 or less (1.3e-3 at most over 300 fits in a review) for
        the default network and for lbfgs run to a tight tolerance; 0.005 to 0.14 for
        lbfgs stopped at 20 or 50 iterations; about 0.04 to 0.8 for adam after 100 (0.08
        to 0.10 with weight decay 1, 0.51 to 0.60 with 10, on one review's seed; 0.65 and
        0.79 with 10 on another; intervals 1.4 to 4.7 times as wide as the converged
        network's); about 0.006 to 0.033 for adam after 1,000 (intervals up to 3.6 times
        as wide); about 1 for an untrained network.
        `fit` warns above 0.02, which catches most networks stopped early but not every
        slow one; split+refine (`calibrate`) does not need it. A network whose weight
        decay shrank it to a constant prediction also reads high (its reference gradient
        is about 0).
    refinement_ : ndarray
        Parameter update from ``theta*``: in split+refine mode the ridge step fitted on
        the calibration rows. In full mode, around a ridge-type linear model, the exact
        step to the ridge optimum under ``ridge_strength_``; around a network, the Newton
        step from ``theta*``, taken to be the optimum at the weight decay it was trained
        with, to the optimum under ``ridge_strength_`` when a given ``prior_precision``
        differs from that decay (zero otherwise). It reaches the linearised network's own
        optimum only where ``theta*`` is an exact stationary point.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 2)); y = X @ [1.0, -1.0] + rng.normal(size=120)
    >>> acp = ApproximateFullConformalRegressor(Ridge(alpha=1.0), alpha=0.1)
    >>> acp.fit(X[:100], y[:100]).predict_interval(X[100:]).shape
    (20, 2)
    """

    # What the confidence machine is built from (changed after fit/calibrate: refused);
    # the network fit trained too (another `estimator` after fit needs a new fit).
    _calibration_params = ("curvature", "prior_precision", "noise")
    _fit_params = ("estimator", "random_state", *_calibration_params)

    def __init__(
        self,
        estimator: Any = None,
        alpha: float | ArrayLike = 0.1,
        conformity_score: str = "studentized",
        curvature: str = "full",
        prior_precision: str | float = "auto",
        noise: str | float = "auto",
        algorithm: str = "exact",
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.curvature = curvature
        self.prior_precision = prior_precision
        self.noise = noise
        self.algorithm = algorithm
        self.batch_size = batch_size
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        model = self.estimator
        if model is None or is_torch_module(model):  # the default scales X: dense only
            tags.input_tags.sparse = False
        elif (inner := sklearn_tags(model)) is not None:
            tags.input_tags.sparse = inner.input_tags.sparse
        return tags

    # ---- parameters -------------------------------------------------------------------
    def _validate_params(self) -> None:
        refuse_model_class(self.estimator, self)
        self._validate_full_params()
        check_random_state_value(self.random_state)
        if self.curvature not in ("full", "last_layer"):
            raise ValueError(
                f"`curvature` must be 'full' or 'last_layer', got {self.curvature!r}."
            )
        for name in ("prior_precision", "noise"):
            value = getattr(self, name)
            message = f"`{name}` must be 'auto' or a positive float, got {value!r}."
            if isinstance(value, str):
                if value != "auto":
                    raise ValueError(message)
            elif (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real)
                or not np.isfinite(cast(float, value))
                or value <= 0
            ):
                raise ValueError(message)

    def _routed_models(self) -> dict[str, Any]:
        model = self._default_estimator() if self.estimator is None else self.estimator
        if is_torch_module(model) or isinstance(model, FrozenEstimator):
            return {}  # not trained by fit
        return {"estimator": model}

    def _default_estimator(self) -> BaseEstimator:
        seed = integer_seed(self.random_state)
        network = MLPRegressor(
            hidden_layer_sizes=(50,),
            activation="tanh",
            solver="lbfgs",
            alpha=1.0,
            max_iter=5000,
            tol=1e-9,
            random_state=seed,
        )
        model = TransformedTargetRegressor(
            regressor=make_pipeline(StandardScaler(), network), transformer=StandardScaler()
        )
        # The weight decay decides whether the network overfits, and an overfitted network
        # makes ACP-GN under-cover: choose it by cross-validation on the training data.
        return GridSearchCV(
            model,
            {"regressor__mlpregressor__alpha": list(_DEFAULT_WEIGHT_DECAYS)},
            cv=KFold(3, shuffle=True, random_state=seed),
            scoring="neg_mean_squared_error",
        )

    def _check_X(self, X: Any, *, reset: bool, model: Any = None) -> Any:
        if model is None:
            model = self.estimator_ if hasattr(self, "estimator_") else self.estimator
        if isinstance(model, FrozenEstimator):
            model = model.estimator
        X = check_features(self, X, reset=reset)  # None, 1-D, no rows: named errors
        # a given pipeline's own steps handle the input (text, missing values); the default
        # model's scaler and network take neither
        if self.estimator is not None and _in_pipeline(model):
            X = _rows_for_pipeline(X)
            return X if reset else named_as_fitted(model, X)
        _check_model_columns(model, X)
        if np.ndim(X) > 2:  # was scikit-learn's "Found array with dim 3"
            raise ValueError(
                f"`X` is a {np.ndim(X)}-D array of shape {np.shape(X)}: "
                f"{type(self).__name__} linearises the model on one row of features per "
                "sample. Flatten each sample, X.reshape(len(X), -1); a torch module can get "
                f"its shape back with a first layer torch.nn.Unflatten(1, {np.shape(X)[1:]})."
            )
        refuse_non_numeric_features(X, "a linearised model", "pipeline")
        # Sparse input is densified by the linearisation; a torch module needs dense input.
        sparse = False if is_torch_module(model) else ["csr", "csc"]
        # check_features compared the features' number and names (one warning at most);
        # a model fitted on named columns gets them back (it would warn at every call)
        # C order: a DataFrame (column-major inside) and its array train the network alike
        remedy = "sklearn.impute.SimpleImputer in a Pipeline before the model"
        checked = float_rows_without_nan(
            self, X, "linearises the model", remedy, accept_sparse=sparse
        )
        if is_torch_module(model):
            takes = _features_the_module_takes(model)
            if takes is not None and checked.shape[1] != takes:
                raise ValueError(
                    f"`X` has {checked.shape[1]} columns, but the first layer of `estimator` "
                    f"(a torch Linear) takes {takes}: give X the columns the module was "
                    "trained on, in that order."
                )
        return named_as_fitted(model, checked)

    # ---- the linearised fit -----------------------------------------------------------
    def _linearize(self, X: Any, *, reset: bool = False) -> Linearization:
        """Linearisation of the model in the (standardised) target space it was trained in.

        A linear model with an unpenalised intercept gets its weight columns centred by
        the fitting rows' means (``reset=True`` learns them): an exact reparametrisation
        (the intercept absorbs the shift), as FullConformalRidge centres its features.
        Uncentred, features 1e6 from 0 against a unit spread put an eigenvalue of the
        Gram matrix under the singularity threshold, the machine dropped a direction the
        data pin, and full mode under-covered (0.736 at 0.80 for features 1e7 from 0).
        """
        inner, _, _ = _split_target_scaling(self.estimator_)
        lin = linearize(inner, X, curvature=self.curvature)
        if reset:
            centre = None
            if lin.exact and lin.n_parameters > 1 and not lin.penalized[-1]:
                centre = np.mean(lin.jacobian[:, :-1], axis=0)
            self.__dict__["_column_centre"] = centre
        centre = self.__dict__.get("_column_centre")  # None in builds before it existed
        if centre is None:
            return lin
        jacobian = lin.jacobian.copy()
        jacobian[:, :-1] -= centre
        parameters = lin.parameters.copy()  # the intercept that predicts at the centre
        parameters[-1] += float(centre @ lin.parameters[:-1])
        return replace(lin, jacobian=jacobian, parameters=parameters)

    def _prepare(self, lin: Linearization, y: NDArray, refine: bool) -> None:
        """Noise, ridge strength, confidence machine and residuals of the fitting data."""
        inner, self.target_shift_, self.target_scale_ = _split_target_scaling(self.estimator_)
        final = _unwrap(inner, None)[0]  # the model itself (a Pipeline's last step)
        if self.curvature == "last_layer" and is_torch_module(final) and not lin.jacobian.any():
            # checked on the fitting rows only (a test row a final ReLU clamps has a zero
            # Jacobian legitimately)
            raise ValueError(
                f"`estimator`: curvature='last_layer' takes the parameters of "
                f"{last_layer_name(final)!r}, the last child of {type(final).__name__} with "
                "trainable parameters, but its output does not depend on them on any "
                f"{'calibration' if refine else 'training'} row (their Jacobian is 0: a "
                "layer forward does not use?). Register the output layer last, freeze the "
                "unused one (requires_grad_(False)), or use curvature='full'."
            )
        target = (y - self.target_shift_) / self.target_scale_
        raw = target - lin.prediction
        if self.noise == "auto":  # floored relative to the target's spread (units of y)
            noise = float(np.sqrt(noise_variance(raw, target)))
        else:
            noise = float(self.noise) / self.target_scale_
        self.noise_ = noise * self.target_scale_  # in the units of y
        decay = weight_decay(inner)  # the one the model was trained with (None: unknown)
        if self.prior_precision == "auto":
            if decay is None:
                why = (
                    "fits non-negative coefficients (positive=True), a constrained optimum "
                    "that the influence of a new row cannot follow, and so has no known "
                    "weight decay: use calibrate(X_calib, y_calib) (split+refine, valid for "
                    "any model), or"
                    if bool(getattr(final, "positive", False))
                    else "has none that is known:"
                )
                raise ValueError(
                    f"prior_precision='auto' reads the weight decay of the model, but "
                    f"{type(final).__name__} {why} pass prior_precision=<float>."
                )
            self.ridge_strength_ = float(decay)
        else:
            self.ridge_strength_ = noise**2 * float(self.prior_precision)
        # A network's biases carry no weight decay; a prior 1e-10 times the bias's own
        # curvature (the average curvature for a bias no row moves: dead units) keeps the
        # Gauss-Newton matrix well conditioned without moving the fit. Its own, so that the
        # units of other parameters (X in micrometres) do not decide how much a bias is
        # pinned. A linear model's intercept gets none: as large as the tie margin, it broke
        # the exact ties of full CP (a group of one training row with an intercept), and
        # the confidence machine handles a singular system itself.
        curvature = np.einsum("ij,ij->j", lin.jacobian, lin.jacobian)
        floor = _BIAS_PRIOR * np.where(curvature > 0, curvature, float(np.mean(curvature)))
        if lin.exact:
            floor = np.zeros_like(floor)
        penalty = np.where(lin.penalized, self.ridge_strength_, floor)
        self.machine_ = LinearConfidenceMachine(lin.jacobian, penalty)
        self._parameter_digest = parameter_digest(self.estimator_)
        fitted_exactly = int(np.sum(self.machine_.leverage > _HIGH_LEVERAGE))
        if fitted_exactly:
            warn_user(
                f"{fitted_exactly} of {y.shape[0]} {'calibration' if refine else 'training'} "
                f"rows have leverage above {_HIGH_LEVERAGE} in the linearised model (up to "
                f"{float(self.machine_.leverage.max()):.6f}): it can fit them almost exactly "
                "(a direction with more freedom than data, such as the unpenalised bias of a "
                "unit active on few rows), and test rows like them get very wide (or "
                "infinite) intervals. Use more rows, a prior (prior_precision), a network "
                "with fewer units, or curvature='last_layer' with calibrate(X_cal, y_cal) "
                "(in full mode, last-layer curvature under-covers).",
                UserWarning,
            )
        if refine:  # the prior is centred at theta*: a ridge fit of the step
            self.refinement_: NDArray = self.machine_.solve(raw)
        elif lin.exact and decay is not None:
            # a ridge-type linear model: the step to the machine's own ridge optimum, exact
            # whatever the solver left (LinearRegression's lstsq drops directions below its
            # `tol`: fitted values a quarter of the residual s.d. from least squares, sets
            # up to 12% off exact full CP in a review); its gradient at the trained weights
            # is then no cause for a warning. (A Lasso or SGDRegressor, whose decay is not
            # known, keeps its weights: a given prior is taken as the one it was trained
            # with.)
            self.refinement_ = self.machine_.solve(raw) - self.machine_.solve_normal(
                penalty * lin.parameters
            )
            self.stationarity_ = self._stationarity(lin, target, decay, warn=False)
        else:
            self.refinement_ = self._penalty_change_step(lin, decay)
            loss = _not_squared_error(final)
            # a model at the optimum of another loss is not told to train longer
            self.stationarity_ = self._stationarity(lin, target, decay, warn=loss is None)
            if loss == _SUBSET_FIT and _least_squares_optimum(lin, target):
                loss = None  # the coefficients held at 0 would stay there: exact
            if loss is not None:
                warn_user(
                    f"`estimator` ({type(final).__name__}) is fitted by {loss}: full-mode "
                    "ACP-GN's Gauss-Newton influence assumes a squared-error loss with a "
                    "Gaussian (L2) prior, so the model is linearised as if trained by them, "
                    "its weights taken as that optimum (`stationarity_` measures the "
                    "squared-error gradient there, not its own convergence). The sets are "
                    "approximate full CP, not exact full CP of this model; "
                    "calibrate(X_calib, y_calib) (split+refine) is valid for any model.",
                    UserWarning,
                )
        self.training_residuals_ = raw - lin.jacobian @ self.refinement_
        # the residuals' rounding follows the targets' spread about the centre the model's
        # bias holds, and their resolution (not the step's residuals, nor the distance from
        # 0: labels 1e13 from 0 widened the sets of a Ridge by a third)
        self._label_size = label_tie_size(target, float(np.mean(target)))

    def _warn_fixed_target_shift(self, lin: Linearization) -> None:
        """Full mode: warn when the target transform centres ``y`` by the training rows'
        mean and no unpenalised intercept absorbs that shift. Exact full CP re-estimates the
        mean with each candidate label; held fixed, the sets are narrower (0.81 to 0.91
        times the refit full CP's width on 5 data sets of 9 rows, ridge without intercept,
        in a review). Split+refine mode needs no warning: the shift is fitted before the
        calibration labels are seen."""
        if not _centres_target(self.estimator_):
            return
        free = ~lin.penalized | (lin.exact and self.ridge_strength_ == 0)
        if _absorbs_shift(lin.jacobian, free):
            return
        inner = _final_model(self.estimator_)
        warn_user(
            "`estimator` centres the target (TransformedTargetRegressor with "
            "StandardScaler()) by the training rows' mean, and that shift is not absorbed "
            f"by an unpenalised intercept of {type(inner).__name__}: full-mode ACP-GN holds "
            "it fixed where exact full CP re-estimates it with each candidate label, so "
            "the intervals are narrower than full CP's (a ridge covered 0.74 at nominal "
            "0.80 with 9 training rows in a review, no shortfall visible with 29). Give the "
            "regressor an intercept (fit_intercept=True), or use "
            "StandardScaler(with_mean=False) or no target transform; or calibrate(X_calib, "
            "y_calib) (split+refine), which is valid.",
            UserWarning,
        )

    def _penalty_change_step(self, lin: Linearization, trained_decay: float | None) -> NDArray:
        """Full mode: the Newton step from ``theta*`` to the optimum under
        ``ridge_strength_`` when the network was trained with another weight decay (a
        given ``prior_precision``). Full-mode ACP-GN takes ``theta*`` to be a stationary
        point of the trained objective; at the trained decay ``lam0`` the gradient of the
        residuals is then ``lam0 * theta*``, so the step is ``Sigma (lam0 - lam) theta*``
        over the penalised weights (zero when they agree, or when the trained decay is
        unknown, as for a torch module). It is the step to the linearised network's own
        optimum only where ``theta*`` is exactly stationary: the gradient left by training
        is not taken into account (along nearly flat directions, such as biases, a small
        one moves that optimum far). Without the step the sets were those of neither ridge
        fit: 0.76 coverage at 0.90 for Ridge(0.01) with a machine of strength 100."""
        step = np.zeros(lin.n_parameters)
        if trained_decay is None or trained_decay == self.ridge_strength_:
            return step
        change = np.where(lin.penalized, (trained_decay - self.ridge_strength_), 0.0)
        return self.machine_.solve_normal(change * lin.parameters)

    def _stationarity(
        self, lin: Linearization, target: NDArray, trained_decay: float | None, warn: bool = True
    ) -> float:
        """Gradient norm of the trained objective ``sum r_i^2 / 2 + lam0 |w|^2 / 2`` at
        ``theta*`` over the norm of ``J^T (t - mean t)``, the data part of the gradient
        of a network that predicts the mean (``lam0``: the trained decay, else
        ``ridge_strength_``), each parameter's entry divided by the norm of its Jacobian
        column (so that the units of ``X`` matter only through the floor), floored at
        1e-2 of the largest norm of its kind (penalised weights, unpenalised biases): 0 at
        a stationary point, about 1 for an untrained network. Warns above
        ``_FAR_FROM_STATIONARY`` (unless ``warn`` is False: a linear model stepped to the
        optimum).
        (Without the floor, a unit that weight decay has switched off, with an output
        weight near 1e-4, has a gradient entry and a column norm of the same tiny size,
        and their ratio stays near 1 however long the network trains: converged networks
        read up to 3.3 in a review, and a median floor still let networks with half their
        units switched off read 0.1. Per kind, so that the weights of a linear model in
        extreme units of ``X`` are not floored against its bias.)"""
        decay = self.ridge_strength_ if trained_decay is None else trained_decay
        # column norms without squares (no underflow or overflow in extreme units of X)
        norms = np.hypot.reduce(lin.jacobian, axis=0)
        live = norms > 0  # a parameter no row moves has no data gradient to compare
        for kind in (lin.penalized, ~lin.penalized):
            if (live & kind).any():
                floor = 1e-2 * np.max(norms[live & kind])
                norms[kind] = np.maximum(norms[kind], floor)
        prior = np.where(lin.penalized, decay * lin.parameters, 0.0)
        gradient = (prior - lin.jacobian.T @ (target - lin.prediction))[live] / norms[live]
        reference = (lin.jacobian.T @ (target - target.mean()))[live] / norms[live]
        scale = float(np.linalg.norm(reference))
        relative = float(np.linalg.norm(gradient)) / scale if scale > 0 else 0.0
        spread = float(np.std(lin.prediction))
        if spread < _CONSTANT_PREDICTION * float(np.std(target)):  # (never for constant y)
            # the reference vanishes with the hidden units' variation: the ratio says nothing,
            # and training longer does not change it (a review: 5.55 at tol 1e-12 and 1e-15)
            cause, remedy = (
                ("the weight decay shrank it", "use a smaller weight decay")
                if decay > 0
                else ("the features barely move it (no weight decay)", "check the features")
            )
            warn_user(
                f"The model predicts almost a constant (spread of its predictions "
                f"{spread:.2g}, of the targets {float(np.std(target)):.2g}): {cause}, so "
                "`stationarity_` cannot judge convergence (training longer does not move "
                "it). The intervals are those of a nearly constant model; if the features "
                f"should predict the target, {remedy}.",
                UserWarning,
            )
        elif warn and relative > _FAR_FROM_STATIONARY:
            warn_user(
                f"The trained weights are far from a stationary point of the model's "
                f"regularised loss (relative gradient norm {relative:.2f}, `stationarity_`; "
                "0 at convergence; the weight decay is the model's own, or the one "
                "`prior_precision` gives when the model does not say it): full-mode "
                "ACP-GN takes the influence of a point to be a Newton step from an "
                "optimum, so its intervals are those of neither the "
                "trained nor the converged network (wider, in our runs). Train to "
                "convergence (more iterations, solver='lbfgs'), or use calibrate(X_calib, "
                "y_calib) (split+refine), which is valid for any network.",
                UserWarning,
            )
        return relative

    def _default_model_text(self) -> str:
        return (
            "MLPRegressor(activation='tanh', solver='lbfgs') on standardised X and y, its "
            "weight decay searched"
        )

    @keeps_state_on_error
    def fit(self, X: ArrayLike, y: ArrayLike, **fit_params: Any) -> Self:
        """Train a clone of the estimator (not a torch module or a FrozenEstimator) on all
        the data, then linearise it there: full-CP mode.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Passed to the estimator's ``fit``; ``sample_weight`` is refused (the confidence
            machine is that of an unweighted fit), also when metadata routing delivers it
            under another name.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        self._validate_params()
        check_frozen_is_fitted(self.estimator, self)
        model = self._default_estimator() if self.estimator is None else self.estimator
        if fit_params and (is_torch_module(model) or isinstance(model, FrozenEstimator)):
            raise ValueError(
                f"fit parameters {sorted(fit_params)} were given, but `estimator` is a "
                f"{type(model).__name__}, which fit does not train (it is linearised as it "
                "is): drop them."
            )
        if self.estimator is None and sp.issparse(X):
            raise ValueError(
                "`X` is sparse, and the default model centres every feature "
                "(StandardScaler): pass X.toarray(), or an `estimator` that takes sparse "
                "input (e.g. Ridge, or a Pipeline with StandardScaler(with_mean=False))."
            )
        if fit_params.get("groups") is not None and (
            self.estimator is None or not _fit_takes(model, "groups")
        ):
            why = (
                "the default model cross-validates with KFold"
                if self.estimator is None
                else f"{type(model).__name__}.fit takes no groups"
            )
            raise ValueError(
                f"`groups` is not a parameter of this fit: full-mode ACP-GN is marginal, and "
                f"{why}. "
                "For group-conditional (Mondrian) intervals use SplitConformalRegressor, "
                "with the groups given to `calibrate(X, y, groups=...)` and "
                "`predict_interval(X, groups=...)`; for grouped cross-validation pass a "
                "GridSearchCV(..., cv=GroupKFold()) as `estimator`."
            )
        if "groups" in fit_params and fit_params["groups"] is None:
            fit_params.pop("groups")  # groups=None: nothing given
        model_params = self._routed_fit_params(fit_params).get("estimator", {})
        weights = _routed_weight_names(model)
        if any(is_row_weight(name) or name in weights for name in [*fit_params, *model_params]):
            raise ValueError(
                "`sample_weight` is not supported: the full-CP influence of a test point is "
                "that of an unweighted fit, so weights would give a set that is not full "
                "conformal prediction of the weighted model. For weighted rows use "
                "SplitConformalRegressor or CrossConformalRegressor, which pass "
                "`sample_weight` to the model."
            )
        if not is_torch_module(model):
            _check_kind(model)  # before training
        for name in ("estimator_", "_calibrate_settings"):
            self.__dict__.pop(name, None)
        X = self._check_X(X, reset=True, model=model)
        y = check_regression_target(y, _num_samples(X))
        if self.estimator is None:
            _check_default_target(y)
        # a torch module or a FrozenEstimator is linearised as it is: fit trains nothing
        trained = not (is_torch_module(model) or isinstance(model, FrozenEstimator))
        if trained:
            self.estimator_ = seeded_clone(model, self.random_state).fit(X, y, **model_params)
        else:
            self.estimator_ = model
        self._estimator_adopted = False
        lin = self._linearize(X, reset=True)
        self._prepare(lin, y, refine=False)
        self._warn_fixed_target_shift(lin)
        self.mode_ = "full"
        network = _unwrap(_split_target_scaling(self.estimator_)[0], None)[0]
        # (scikit-learn sets rows aside and stops early for its stochastic solvers only)
        if (
            isinstance(network, MLPRegressor)
            and network.early_stopping
            and network.solver != "lbfgs"
        ):
            warn_user(
                "The network was trained with early_stopping=True: it stopped before a "
                "stationary point of its loss and never saw its validation_fraction of the "
                "rows, which full-mode ACP-GN assumes it did (the influence of a point is a "
                "Newton step from that optimum). Train with early_stopping=False, or use "
                "calibrate(X_calib, y_calib) (split+refine), which is valid for any network.",
                UserWarning,
            )
        record_calibration_settings(self, step="fit")
        remember_training_rows(self, X, y, trained=trained)
        return self

    @keeps_state_on_error
    def calibrate(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Split+refine mode: freeze the trained network, fit the ridge machine on its
        Jacobian features of held-out calibration data only (finite-sample valid). The
        ridge penalises the step away from the trained weights (a prior centred at
        ``theta*``, not at zero), so the refined network stays near the trained one.

        Without a prior ``fit``, a fitted estimator or a torch module is used as is.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        self._validate_params()
        # A model given fitted is adopted again at each calibrate (set_params(estimator=)
        # between two calibrations takes effect); a network fit trained is kept
        # (another `estimator` set after fit is refused, as by the other wrappers).
        if not hasattr(self, "estimator_") or self.__dict__.get("_estimator_adopted", False):
            model = self.estimator
            if model is None:
                raise NotFittedError(
                    f"{adoption_lead(self)}, and `estimator` is None: call "
                    "fit(X_train, y_train) first, or pass a fitted model."
                )
            if not is_torch_module(model):
                _check_kind(model)
                try:
                    check_is_fitted(model)
                except NotFittedError:
                    raise NotFittedError(
                        f"{adoption_lead(self)}, and `estimator` is not fitted: call "
                        "fit(X_train, y_train) first, or pass a fitted model."
                    ) from None
            self.estimator_ = model
            self._estimator_adopted = True
            X = self._check_X(X, reset=True)
        else:  # the network fit trained: from the `estimator` fit was given? (the other
            # settings are calibrate's own)
            check_calibration_settings(
                self, "calibrate", step="fit", again="fit(X, y)", only=("estimator",)
            )
            X = self._check_X(X, reset=False)
        y = check_regression_target(y, _num_samples(X))
        remember_calibration_rows(self, X, y)
        self._prepare(self._linearize(X, reset=True), y, refine=True)
        self.mode_ = "split+refine"
        fit_settings = self.__dict__.pop("_fit_settings", None)  # full-mode state ...
        self.__dict__.pop("stationarity_", None)
        if (
            fit_settings
            and "estimator" in fit_settings
            and not self.__dict__.get("_estimator_adopted", False)
        ):
            # ... but the `estimator` fit trained from, for the next calibrate's check
            self._fit_settings = {"estimator": fit_settings["estimator"]}
        record_calibration_settings(self)
        return self

    # ---- prediction ---------------------------------------------------------------------
    def _check_ready(self, method: str) -> None:
        check_wrapper_fitted(self, "machine_", method, _BEFORE_PREDICTING)
        # The machine was built with these settings: changed since, it no longer fits them.
        if self.mode_ == "full":
            check_calibration_settings(self, method, step="fit", again="fit(X, y)")
        else:
            check_calibration_settings(self, method)
            # a network fit trained: still from the `estimator` fit was given? (as calibrate)
            check_calibration_settings(
                self,
                method,
                step="fit",
                again="fit(X, y) and calibrate(X_calib, y_calib)",  # split+refine again
                only=("estimator",),
            )
        # ... and with these weights: a model held by reference may be retrained in place
        refuse_changed_digest(
            self,
            method,
            self.__dict__.get("_parameter_digest"),  # older builds: none, or untagged
            lambda: parameter_digest(self.estimator_),
            what="estimator",
            since="fit" if self.mode_ == "full" else "calibrate",
            stale="the confidence machine belongs to the old one",
            again="fit(X, y)" if self.mode_ == "full" else "calibrate(X_calib, y_calib)",
        )

    def _test_input(self, X: Any, method: str) -> Any:
        check_wrapper_fitted(self, "machine_", method, _BEFORE_PREDICTING)
        return row_sliceable(self._check_X(X, reset=False))  # batches are sliced from it

    def _test_features(self, X: Any) -> tuple[NDArray, NDArray]:
        lin = self._linearize(X)
        return lin.jacobian, lin.prediction + lin.jacobian @ self.refinement_

    def _to_target(self, values: NDArray) -> NDArray:
        return self.target_shift_ + self.target_scale_ * values

    def predict_interval(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        self._check_ready("predict_interval")
        return self._to_target(super().predict_interval(X, alpha=alpha))

    predict_interval.__doc__ = FullConformalMixin.predict_interval.__doc__

    def predict_set(
        self, X: Any, alpha: float | ArrayLike | None = None, union: bool = False
    ) -> NDArray | list[NDArray]:
        self._check_ready("predict_set")
        result = super().predict_set(X, alpha=alpha, union=union)
        if union:
            return [self._to_target(pieces) for pieces in result]
        return result  # the hull comes from self.predict_interval: already in y's units

    predict_set.__doc__ = FullConformalMixin.predict_set.__doc__

    def predict_pvalue(self, X: Any, y_candidates: ArrayLike) -> NDArray:
        self._check_ready("predict_pvalue")
        check_row_order(X, y_candidates, "y_candidates")  # checked before the index goes
        candidates = (candidate_values(y_candidates) - self.target_shift_) / (self.target_scale_)
        return super().predict_pvalue(X, candidates)

    predict_pvalue.__doc__ = FullConformalMixin.predict_pvalue.__doc__

    def predict(self, X: ArrayLike) -> NDArray:
        """The point the intervals are built around (not their midpoint: the sets of
        full CP need not be symmetric): the linearised network's prediction after
        `refinement_` (the network's own prediction when that step is zero).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        self._check_ready("predict")
        centre = self._map_feature_batches(
            self._test_input(X, "predict"), lambda _, centre: centre
        )
        return self._to_target(centre)

    def predict_std(self, X: ArrayLike) -> NDArray:
        """Linearised-Laplace predictive standard deviation ``noise * sqrt(1 + h(x))``.

        The posterior is the Gaussian with the Gauss-Newton precision of the fitting data;
        use it as the difficulty of a normalized split-conformal score (SCP-GN) or for
        Laplace intervals ``predict(X) -/+ z * predict_std(X)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        self._check_ready("predict_std")
        leverage = self._map_feature_batches(
            self._test_input(X, "predict_std"),
            lambda features, _: self.machine_.test_leverage(features),
        )
        return self.noise_ * np.sqrt(1.0 + leverage)  # noise_ is in the units of y
