"""CONTRA and ResidualCONTRA: conformal regions shaped by a normalizing flow.

CONTRA (Fang, Tan and Huang, ICLR 2025) trains a conditional normalizing flow
``z = g(y; x)`` with a standard normal latent ``z``, scores a calibration row by the distance
of its latent code from the centre, ``||g(y; x)||_2``, and returns the region
``{y : ||g(y; x)||_2 <= r}``: the image of a latent ball of the calibrated radius ``r``
under the flow. The region follows curved and skewed conditional distributions (a banana,
a moon) where ellipsoids and boxes must cover empty space, and split conformal calibration
gives marginal coverage ``>= 1 - alpha`` whatever the quality of the flow.

ResidualCONTRA keeps any scikit-learn point model ``f`` and trains a (by default
unconditional) flow on its out-of-fold residuals ``y - f(x)``: the region is the prediction
plus the image of the latent ball, one shape translated to every prediction.

The flows come from `uqconform.multioutput.flows` (torch and nflows, the ``flows`` extra).
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import chi
from sklearn.base import BaseEstimator
from sklearn.ensemble import BaggingRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.utils import check_array
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
)

from uqconform._cross import out_of_fold_prediction
from uqconform._rows import fit_params_rows
from uqconform._seeding import integer_seed, seeded_clone
from uqconform._warnings import warn_user
from uqconform.base import keeps_state_on_error
from uqconform.multioutput._base import (
    MultiOutputConformalRegressor,
    take_rows,
)
from uqconform.multioutput.flows import FlowMap, fit_flow, require_flows

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["CONTRA", "ResidualCONTRA"]

_FLOW_CONSTRAINTS: dict[str, list[Any] | str] = {
    "flow": [StrOptions({"maf", "spline"})],
    "n_blocks": [Interval(numbers.Integral, 1, None, closed="left")],
    "hidden_features": [Interval(numbers.Integral, 1, None, closed="left")],
    "max_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
    "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
    "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
    "patience": [Interval(numbers.Integral, 1, None, closed="left"), None],
    "validation_fraction": [Interval(numbers.Real, 0, 1, closed="left")],
    "device": "no_validation",  # checked by torch at fit
    "verbose": ["verbose"],
    "random_state": ["random_state", np.random.Generator],
}

#: What the flow is trained with (``random_state`` comes from the base class; ``device``,
#: ``verbose`` and ``n_jobs`` say where and how it runs, not what it learns).
_FLOW_FIT_PARAMS = (
    "flow",
    "n_blocks",
    "hidden_features",
    "max_epochs",
    "batch_size",
    "learning_rate",
    "patience",
    "validation_fraction",
)


class _FlowRegions(MultiOutputConformalRegressor):
    """Shared parts of the flow methods: parameters, training call, chi diagnostic."""

    norm = "l2"
    _parameter_constraints: ClassVar[dict] = _FLOW_CONSTRAINTS
    # What the flow is trained on, and what a flow that kept its Gaussian start means.
    _trained_on: ClassVar[str] = ""
    _start_kept: ClassVar[str] = ""

    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*super()._fit_params, *_FLOW_FIT_PARAMS)

    def _train_flow(self, Y: NDArray, X: NDArray | None, desc: str) -> None:
        require_flows()
        self.flow_ = fit_flow(
            Y,
            X,
            kind=self.flow,
            n_blocks=self.n_blocks,
            hidden_features=self.hidden_features,
            max_epochs=self.max_epochs,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            patience=self.patience,
            validation_fraction=self.validation_fraction,
            device=self.device,
            verbose=bool(self.verbose),
            random_state=integer_seed(self.random_state),
            desc=desc,
        )
        self.n_epochs_ = len(self.flow_.history["train_loss"])
        if self.flow_.history["best_epoch"] == 0:
            warn_user(
                f"{type(self).__name__} kept its untrained start ({Y.shape[0]} "
                f"{self._trained_on}; no trained state beat it on the validation rows): "
                f"{self._start_kept}",
                UserWarning,
            )

    @staticmethod
    def _numeric(X: Any) -> NDArray:
        if hasattr(X, "toarray"):  # scipy sparse: the torch network takes dense rows
            raise TypeError(
                "The flow's context needs dense features X: convert a sparse matrix with "
                "X.toarray() first."
            )
        try:
            return check_array(X, dtype=float, ensure_all_finite=True)
        except (TypeError, ValueError) as error:
            kind = TypeError if isinstance(error, TypeError) else ValueError
            raise kind(
                f"The flow's context needs numeric, finite features X ({error}); encode or "
                "impute X first."
            ) from None

    def chi_diagnostic(self, alpha: float | ArrayLike | None = None) -> dict[str, Any]:
        """The calibrated radius against the radius a perfect flow would give.

        If the flow were the true conditional law, the latent code of a new row would be
        standard normal and its norm would follow a chi distribution with ``d`` degrees
        of freedom, so the radius would be ``chi(d).ppf(1 - alpha)``. A ratio well above
        1 means the flow is too confident (calibration widened the region), well below 1
        that it is too diffuse. Coverage holds either way; the ratio tells how well the
        flow fits.

        Parameters
        ----------
        alpha : float or sequence of float, optional
            Levels; defaults to the constructor's ``alpha``.

        Returns
        -------
        dict
            ``alpha``, ``radius`` (calibrated), ``chi_quantile`` and ``ratio``, arrays
            with one entry per level (per group and level with Mondrian groups).
        """
        self._check_calibrated("chi_diagnostic")
        alphas, _ = self._resolve_alpha(alpha)
        # not _threshold_table: too few points give an infinite radius here, without the
        # warning (and no catch_warnings, which is not thread-safe)
        table = self._compute_threshold_table(alphas)[0][:-1, 0, 0]  # (groups, k)
        radius = table[0] if getattr(self, "groups_", None) is None else table
        quantile = chi(self.n_outputs_).ppf(1 - alphas)
        return {
            "alpha": alphas,
            "radius": radius,
            "chi_quantile": quantile,
            "ratio": radius / quantile,
        }

    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike, *, groups: ArrayLike | None = None) -> Self:
        """Score held-out calibration rows by the norm of their latent codes.

        Also sets ``chi_quantile_``, the radius a perfect flow would give (see
        `chi_diagnostic`).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration features.
        y : array-like of shape (n_samples, n_outputs)
            Calibration targets.
        groups : array-like of shape (n_samples,), optional
            Group labels for Mondrian (group-conditional) calibration.

        Returns
        -------
        self
        """
        super().calibrate(X, y, groups=groups)
        alphas, scalar = self._resolve_alpha(None)
        quantile = chi(self.n_outputs_).ppf(1 - alphas)
        self.chi_quantile_ = float(quantile[0]) if scalar else quantile
        return self

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        self.__dict__.pop("chi_quantile_", None)


class CONTRA(_FlowRegions):
    """Conformal regions from a conditional normalizing flow of ``Y`` given ``X`` (CONTRA).

    ``fit`` trains a flow ``z = g(y; x)`` (standard normal ``z``) by maximum likelihood,
    with early stopping on a validation part of the fit data; ``calibrate`` scores held-out
    rows by ``||g(y_i; x_i)||_2``; the region of a new ``x`` is
    ``{y : ||g(y; x)||_2 <= r}``, the image of the latent ball of the calibrated radius
    ``r`` (marginal coverage ``>= 1 - alpha`` for any flow). The region is connected
    (the image of a ball): it bridges well-separated modes rather than splitting.

    ``x`` is standardised and ``y`` whitened on the fit rows, and the flow starts as the
    identity, i.e. as the Gaussian fit of ``y`` (ellipsoidal regions); training keeps the
    state with the best validation likelihood, and the start unless the trained flow beats
    it by more than one standard error. Small data fall back to that start, which ignores
    ``x`` (one ellipse around the mean of ``y`` for every row), with a warning.

    Needs torch and nflows: ``pip install "uqconform[flows]"``.

    Parameters
    ----------
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    flow : {"maf", "spline"}, default="maf"
        ``"maf"``: masked affine autoregressive layers; ``"spline"``: rational-quadratic
        spline autoregressive layers (more flexible, for multimodal targets; identity
        beyond 5 standard deviations).
    n_blocks : int, default=5
        Autoregressive layers, each followed by a reversal of the outputs.
    hidden_features : int, default=64
        Width of the networks giving each layer its parameters.
    max_epochs : int, default=300
        Passes over the training part of the fit data.
    batch_size : int, default=256
        Mini-batch size (Adam).
    learning_rate : float, default=1e-3
        Adam step size. Training that diverges raises a ``RuntimeError`` asking for a
        smaller one.
    patience : int or None, default=20
        Stop after this many epochs without a better validation loss; the best state is
        kept (None: run ``max_epochs``).
    validation_fraction : float in [0, 1), default=0.1
        Share of the fit rows held out for early stopping (never the calibration rows).
    device : str, default="cpu"
        torch device of the flow.
    verbose : bool, default=False
        Show a progress bar over the epochs.
    random_state : int, Generator or None, default=None
        Seeds the validation split, the weights and the mini-batches: the same seed gives
        the same flow bit for bit on the same machine (CPU). torch's global random state
        is not changed.

    Attributes
    ----------
    flow_ : uqconform.multioutput.flows.ConditionalFlow
        The trained flow (``flow_.history``: losses per epoch).
    n_epochs_ : int
        Epochs run.
    conformity_scores_ : ndarray of shape (n_calibration,)
        Latent norms of the calibration rows.
    radius_ : float or ndarray
        Calibrated radius (per level for a sequence of alphas, per group with groups), at
        the ``alpha`` of `calibrate` (a later ``set_params(alpha=...)`` does not change it;
        the prediction methods read ``alpha`` afresh).
    chi_quantile_ : float or ndarray
        ``chi(d).ppf(1 - alpha)``: the radius of a perfect flow (see `chi_diagnostic`), at
        the same ``alpha`` as ``radius_``.
    n_calibration_, n_outputs_, n_features_in_ : int
    output_names_in_ : ndarray of object, shape (n_outputs,)
        The column labels of a DataFrame ``Y`` at fit (strings, numbers, MultiIndex
        tuples), unless they are ``0, ..., d - 1`` in order; later DataFrame targets with
        labels of the same kind must have the same columns in the same order.

    See Also
    --------
    ResidualCONTRA : a flow on the residuals of any scikit-learn model.
    uqconform.multioutput.EllipsoidalConformalRegressor : the Gaussian-shaped baseline.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(1500, 1))
    >>> Y = np.c_[X[:, 0], X[:, 0] ** 2] + 0.1 * rng.normal(size=(1500, 2))
    >>> model = CONTRA(alpha=0.1, n_blocks=2, hidden_features=16, max_epochs=20,
    ...                random_state=0)
    >>> model = model.fit(X[:800], Y[:800]).calibrate(X[800:1200], Y[800:1200])
    >>> region = model.predict_set(X[1200:])
    >>> len(region), region.dim
    (300, 2)
    >>> bool(region.contains(Y[1200:]).mean() > 0.8)
    True
    >>> round(float(model.chi_quantile_), 3)  # the radius of a perfect flow
    2.146
    """

    _uses_estimator: ClassVar[bool] = False
    _trained_on = "fit rows"
    _start_kept = (  # the start ignores x
        "the Gaussian fit of Y, so every x gets the same ellipse around the mean of Y, "
        "whatever X says. Give more rows or epochs, or put a region around a model of X "
        "(ResidualCONTRA, EllipsoidalConformalRegressor)."
    )

    def __init__(
        self,
        alpha: float | ArrayLike = 0.1,
        flow: str = "maf",
        n_blocks: int = 5,
        hidden_features: int = 64,
        max_epochs: int = 300,
        batch_size: int = 256,
        learning_rate: float = 1e-3,
        patience: int | None = 20,
        validation_fraction: float = 0.1,
        device: str = "cpu",
        verbose: bool = False,
        random_state: int | np.random.Generator | None = None,
    ):
        self.alpha = alpha
        self.flow = flow
        self.n_blocks = n_blocks
        self.hidden_features = hidden_features
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.device = device
        self.verbose = verbose
        self.random_state = random_state

    def _fit(self, X: Any, Y: NDArray, **fit_params: Any) -> None:
        if fit_params:
            raise TypeError(f"CONTRA.fit takes no fit parameters, got {sorted(fit_params)}.")
        self._warn_if_degenerate(  # the flow starts from the Gaussian fit of Y
            Y - Y.mean(axis=0), "train the flow", "Fit on more rows."
        )
        self._train_flow(Y, self._numeric(X), desc="CONTRA flow")

    def _latent_map(self, X: Any) -> FlowMap:
        return FlowMap(self.flow_, X=self._numeric(X))

    def _point_prediction(self, X: Any) -> NDArray:
        """The image of the latent origin: the centre of every region."""
        latent = self._latent_map(X)
        return latent.from_latent(np.zeros((latent.n_rows, 1, self.n_outputs_)))[:, 0]


class ResidualCONTRA(_FlowRegions):
    """A normalizing flow on the residuals of any multi-output regressor (ResCONTRA).

    ``fit`` trains a clone of ``estimator`` and a flow ``z = g(e)`` on its honest
    residuals ``e = y - f(x)`` (out-of-fold, out-of-bag or on a held-out part of the fit
    data, see ``residuals``); ``calibrate`` scores held-out rows by ``||g(y - f(x))||_2``;
    the region of a new ``x`` is ``f(x) + {e : ||g(e)||_2 <= r}``, one shape translated to
    every prediction (marginal coverage ``>= 1 - alpha``). With ``conditional=True`` the
    flow takes ``x`` as context, so the shape changes with ``x`` (heteroscedastic errors).

    Needs torch and nflows: ``pip install "uqconform[flows]"``.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor predicting ``(n, d)`` (or a ``MultiOutputRegressor``);
        ``None`` means ``LinearRegression()``. A fitted model (or
        ``FrozenEstimator(model)``) can be calibrated without ``fit``: the flow is then
        trained on a random half of the calibration rows and the radius calibrated on the
        other half.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1).
    residuals : {"oof", "oob", "split"}, default="oof"
        Where the flow's residuals come from: ``"oof"`` out-of-fold predictions
        (``cross_val_predict`` with ``cv`` folds; the final model is fitted on all fit
        rows); ``"oob"`` the out-of-bag predictions of a forest fitted with
        ``bootstrap=True, oob_score=True`` (or of a ``BaggingRegressor`` for one output,
        the only case scikit-learn's bagging scores out of bag; no refits); ``"split"``
        the model is fitted on ``1 - split_size`` of the fit rows and the flow on the
        residuals of the others.
        In-sample residuals would be too small (a forest nearly interpolates) and give a
        poor shape.
    conditional : bool, default=False
        Condition the residual flow on ``x`` (numeric X only).
    cv : int or cross-validation splitter, default=5
        Folds for ``residuals="oof"`` (``None`` is refused: unlike the ellipse's in-sample
        residuals, a residual flow needs held-out ones; so is a splitter by group,
        ``GroupKFold``: ``fit`` takes no groups).
    split_size : float in (0, 1), default=0.3
        Share of the fit rows giving residuals with ``residuals="split"``.
    flow, n_blocks, hidden_features, max_epochs, batch_size, learning_rate, patience,
    validation_fraction, device, verbose
        The flow and its training, as in `CONTRA`. The residual flow is usually simpler
        than CONTRA's: the defaults are smaller (3 blocks of width 32).
    random_state : int, Generator or None, default=None
        Seeds the folds, the split, the flow, and the models trained here whose own
        ``random_state`` is None.
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).

    Attributes
    ----------
    estimator_ : regressor
    flow_ : uqconform.multioutput.flows.ConditionalFlow
        The residual flow.
    n_epochs_ : int
    conformity_scores_ : ndarray of shape (n_calibration,)
    radius_ : float or ndarray
        As in `CONTRA`: at the ``alpha`` of `calibrate`.
    chi_quantile_ : float or ndarray
        ``chi(d).ppf(1 - alpha)`` (see `chi_diagnostic`), at the same ``alpha``.
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
    >>> X = rng.normal(size=(1500, 3))
    >>> noise = rng.normal(size=1500)
    >>> Y = X[:, :2] + np.c_[noise, noise**2] * 0.5
    >>> model = ResidualCONTRA(Ridge(), alpha=0.1, n_blocks=2, max_epochs=20,
    ...                        random_state=0)
    >>> model = model.fit(X[:800], Y[:800]).calibrate(X[800:1200], Y[800:1200])
    >>> bool(model.predict_set(X[1200:]).contains(Y[1200:]).mean() > 0.8)
    True
    """

    _trained_on = "residuals"
    _start_kept = (  # the whitening of fit_flow: the residuals' mean and centred covariance
        "the Gaussian fit of the residuals, so every region is an ellipse around the "
        "prediction plus the residuals' mean, shaped by their centred covariance (the "
        "ellipse of EllipsoidalConformalRegressor around the same model when the residuals "
        "average 0: it is centred on the prediction and shaped by their second moment), at "
        "the cost of a flow. Give more rows or epochs, or use EllipsoidalConformalRegressor."
    )
    _parameter_constraints: ClassVar[dict] = {
        **_FLOW_CONSTRAINTS,
        "estimator": [HasMethods(["fit", "predict"]), HasMethods(["predict"]), None],
        "residuals": [StrOptions({"oof", "oob", "split"})],
        "conditional": ["boolean"],
        "cv": ["cv_object"],
        "split_size": [Interval(numbers.Real, 0, 1, closed="neither")],
    }

    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The model, the flow's settings and seed (also when the flow is trained on half
        of the calibration rows around an adopted model), and where fit took the
        residuals from when it trained the model (``residuals``, with ``cv`` or
        ``split_size``)."""
        names = (*super()._fit_params, "conditional")
        if not self._fit_trained_estimator():
            return names if "random_state" in names else (*names, "random_state")
        source = {"oof": ("cv",), "split": ("split_size",)}.get(self.residuals, ())
        return (*names, "residuals", *source)

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        residuals: str = "oof",
        conditional: bool = False,
        cv: int | Any = 5,
        split_size: float = 0.3,
        flow: str = "maf",
        n_blocks: int = 3,
        hidden_features: int = 32,
        max_epochs: int = 300,
        batch_size: int = 256,
        learning_rate: float = 1e-3,
        patience: int | None = 20,
        validation_fraction: float = 0.1,
        device: str = "cpu",
        verbose: bool = False,
        random_state: int | np.random.Generator | None = None,
        n_jobs: int | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.residuals = residuals
        self.conditional = conditional
        self.cv = cv
        self.split_size = split_size
        self.flow = flow
        self.n_blocks = n_blocks
        self.hidden_features = hidden_features
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.device = device
        self.verbose = verbose
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ---- the residuals -----------------------------------------------------------------------
    def _fit(self, X: Any, Y: NDArray, **fit_params: Any) -> None:
        require_flows()  # fail before a long model fit
        seed = integer_seed(self.random_state)
        frozen = isinstance(self._estimator_or_default(), FrozenEstimator)
        if self.cv is None and self.residuals == "oof":
            raise ValueError(
                "`cv` must be an int or a cross-validation splitter for residuals='oof' "
                "(out-of-fold residuals), got None; in-sample residuals would be too small."
            )
        if self.residuals == "oof" and not frozen:
            self._refuse_group_splitter("the residual flow")
        final = self._estimator_or_default()
        final = final[-1] if isinstance(final, Pipeline) else final
        if self.residuals == "oob" and Y.shape[1] > 1 and isinstance(final, BaggingRegressor):
            raise ValueError(
                "residuals='oob' with several outputs: scikit-learn's BaggingRegressor "
                "computes out-of-bag predictions for one output only. Use "
                "RandomForestRegressor or ExtraTreesRegressor(bootstrap=True) with "
                "oob_score=True, or residuals='oof'."
            )
        if self.residuals == "split" and not frozen:
            rows = np.arange(Y.shape[0])
            n_flow = math.ceil(Y.shape[0] * self.split_size)  # scikit-learn's test share
            if Y.shape[0] < 3:  # no split_size leaves 2 rows to the flow and 1 to the model
                raise ValueError(
                    f"residuals='split' needs at least 3 fit rows (2 to train the residual "
                    f"flow, 1 to train the model), got {Y.shape[0]}: pass more rows."
                )
            if n_flow < 2 or Y.shape[0] - n_flow < 1:
                raise ValueError(
                    f"`split_size`={self.split_size} of {Y.shape[0]} fit rows leaves "
                    f"{Y.shape[0] - n_flow} to train the model and {n_flow} to train the "
                    f"residual flow, which needs at least 2 (and the model 1): choose a "
                    f"split_size above {1 / Y.shape[0]:.3g} and at most "
                    f"{(Y.shape[0] - 1) / Y.shape[0]:.3g}, or residuals='oof'."
                )
            model_rows, flow_rows = train_test_split(
                rows, test_size=self.split_size, random_state=seed
            )
            model_rows, flow_rows = np.sort(model_rows), np.sort(flow_rows)
            params = fit_params_rows(fit_params, Y.shape[0], model_rows)
            self._fit_estimator(take_rows(X, model_rows), Y[model_rows], **params)
            X_flow = take_rows(X, flow_rows)
            residuals = Y[flow_rows] - self._estimator_prediction(X_flow, flow_rows)
        else:
            self._fit_estimator(X, Y, **fit_params)
            X_flow = X
            if frozen:  # a fitted model: the fit rows are already held out from it
                residuals = Y - self._estimator_prediction(X)
            elif self.residuals == "oob":
                residuals = self._oob_residuals(Y)
            else:
                point = seeded_clone(self._estimator_or_default(), self.random_state, owner=self)
                residuals = Y - out_of_fold_prediction(
                    point, X, Y, self.cv, seed, fit_params, self.n_jobs, "the residual flow"
                ).reshape(Y.shape)
            keep = np.isfinite(residuals).all(axis=1)
            if not keep.all():
                warn_user(
                    f"{int((~keep).sum())} fit rows have no out-of-bag prediction (too few "
                    "trees); the residual flow is trained without them.",
                    UserWarning,
                )
                residuals = residuals[keep]
                X_flow = take_rows(X, np.flatnonzero(keep))
        self._warn_if_degenerate(residuals, "train the residual flow")
        self._train_residual_flow(X_flow, residuals)

    def _oob_residuals(self, Y: NDArray) -> NDArray:
        model = self.estimator_
        if isinstance(model, Pipeline):
            model = model[-1]
        oob = getattr(model, "oob_prediction_", None)
        if oob is None:
            raise ValueError(
                "residuals='oob' needs a bagging model or forest fitted with oob_score=True "
                f"(it sets oob_prediction_); {type(model).__name__} has no oob_prediction_. "
                "Use residuals='oof' for other models."
            )
        oob = np.asarray(oob, dtype=float).reshape(Y.shape).copy()
        # rows in every bootstrap sample have no out-of-bag prediction; scikit-learn fills
        # them with 0 (with its own warning), so mark them missing from the samples drawn
        samples = getattr(model, "estimators_samples_", None)
        if samples is not None:
            in_bag = np.zeros((len(samples), Y.shape[0]), dtype=bool)
            for tree, rows in enumerate(samples):  # a loop over trees
                in_bag[tree, rows] = True
            oob[in_bag.all(axis=0)] = np.nan
        return Y - oob

    def _train_residual_flow(self, X: Any, residuals: NDArray) -> None:
        context = self._numeric(X) if self.conditional else None
        self._train_flow(residuals, context, desc="ResidualCONTRA flow")

    def _prepare_calibration(self, X: Any, Y: NDArray, *, prefit: bool) -> NDArray | None:
        if not prefit:
            return None
        return self._learn_on_half(X, Y, self._train_residual_flow, "trains the residual flow")

    def _latent_map(self, X: Any) -> FlowMap:
        center = self._estimator_prediction(X)
        context = self._numeric(X) if self.conditional else None
        return FlowMap(self.flow_, X=context, offset=center)

    def _point_prediction(self, X: Any) -> NDArray:
        return self._estimator_prediction(X)
