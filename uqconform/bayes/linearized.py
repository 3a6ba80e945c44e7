"""The sampling-free (single-pass) posterior predictive of a network, with its baselines.

`LinearizedPredictive` turns a Gaussian weight posterior (`LaplacePosterior`) into a Gaussian
over the network's outputs (regression values or logits) in one deterministic forward pass:
Gaussian moments are propagated through every layer, linear layers exactly and activations by
local linearisation (Li et al., "Streamlining Prediction in Bayesian Deep Learning",
ICLR 2025). Classification probabilities use the probit approximation. The two classical
predictives run through the same object and the same posterior, for comparison:

* ``method="mc"``: Monte Carlo over weight samples (``n_samples`` forward passes);
* ``method="glm"``: the linearised Laplace (GLM) predictive, ``Var f = J Sigma J'``, with
  the Jacobians of `uqconform.linearize`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp, ndtri
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from uqconform._rows import take_rows
from uqconform._seeding import integer_seed, seed_parameters
from uqconform._validation import (
    check_bool,
    check_class_labels,
    check_features,
    check_int,
    check_positive_float,
    check_regression_target,
    check_row_order,
    check_rows,
    labels_text,
    non_finite_kinds,
    non_finite_parts,
    refuse_model_class,
    refuse_non_numeric_features,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    ExplainsCallMistakes,
    check_calibration_settings,
    keeps_state_on_error,
    record_calibration_settings,
    refuse_changed_digest,
    refuses_nan,
)
from uqconform.bayes.convert import (
    NETWORK,
    NETWORK_NAN_MESSAGE,
    as_network,
    network_infinity_message,
    output_jacobians,
    transforms_input,
)
from uqconform.bayes.laplace import (
    STRUCTURES,
    LaplacePosterior,
    _encode_labels,
    checked_noise_variance,
    lbfgs_training_loss,
)
from uqconform.bayes.likelihood import (
    class_probabilities,
    gaussian_log_density,
    log_probabilities,
    probit_logits,
)
from uqconform.bayes.network import MOMENT_MODES, _row_blocks, refuse_overflowed_moments
from uqconform.linearize import is_torch_module, parameter_digest
from uqconform.quantiles import check_call_alpha

__all__ = ["LinearizedPredictive"]

METHODS = ("onepass", "mc", "glm")
#: Cells (draws x parameters, float64) of one block of ``method="mc"`` weight draws: 32 MB.
MC_DRAW_CELLS = 2**22


def _is_fitted(model: Any) -> bool:
    try:
        as_network(model)
    except NotFittedError:
        return False
    return True


def _digest_of(model: Any, like: str | None = None) -> str:
    """`parameter_digest` (``arrays_only``) of a fitted network; a torch module's parameters
    and buffers are hashed as numpy arrays (views, not copies), which it samples when large
    as it does a scikit-learn network's (it hashes a module's tensors whole: about 3 ms at
    each prediction for a (512, 512) network in a measurement, more than the prediction)."""
    if not is_torch_module(model):
        return parameter_digest(model, arrays_only=True, like=like)
    state = {}
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        data = tensor.detach().cpu()
        try:
            state[name] = data.numpy()
        except (TypeError, RuntimeError):  # dtypes numpy lacks (bfloat16)
            state[name] = data.double().numpy()
    return parameter_digest(state, arrays_only=True, like=like)


def _posterior_digest(posterior: LaplacePosterior, like: str | None = None) -> str:
    """`parameter_digest` (``arrays_only``) of what a fitted posterior learnt and the
    predictive reads: its curvature, prior precision, mean and (regression) noise variance
    on the network's scale. Large arrays are hashed by a sample of 4,096 numbers, as the
    network's weights are: a refit on other rows changes them all."""
    state = {
        "curvature_": posterior.curvature_,
        "prior_precision_": posterior.prior_precision_,
        "mean_": posterior.mean_,
        "noise": posterior.__dict__.get("_network_noise_variance"),
    }
    return parameter_digest(state, arrays_only=True, like=like)


def _task_of(model: Any) -> str:
    """``"classification"`` for a (wrapped) scikit-learn classifier, else ``"regression"``."""
    if is_torch_module(model):
        return "regression"
    try:
        return "classification" if is_classifier(model) else "regression"
    except (AttributeError, TypeError):  # objects without scikit-learn tags
        return "regression"


def _is_classifier(self: LinearizedPredictive) -> bool:
    task = getattr(self, "task_", None) or _task_of(self.estimator)
    return task == "classification"


def _is_regressor(self: LinearizedPredictive) -> bool:
    return not _is_classifier(self)


#: Step of the coarse grid of log scales searched before the local refinement.
_LOG_SCALE_STEP = 3.0


def _minimise_log_scale(objective: Callable[[float], float], low: float, high: float) -> float:
    """Minimiser of ``objective`` over ``[low, high]``: the best point of a coarse grid,
    refined by bounded Brent between its neighbours. The validation NLL of the single pass
    need not be unimodal in the log scale (a flat part towards scale 0 and a dip), which a
    search of the whole range alone can miss."""
    grid = np.arange(low, high + 1e-9, _LOG_SCALE_STEP)
    if grid[-1] < high:  # the step need not divide the range: the top end is searched too
        grid = np.append(grid, high)
    values = [objective(float(point)) for point in grid]  # a loop over the coarse grid
    best = int(np.argmin(values))
    bracket = (float(grid[max(best - 1, 0)]), float(grid[min(best + 1, grid.size - 1)]))
    result = minimize_scalar(objective, bounds=bracket, method="bounded")
    return float(result.x) if result.fun <= values[best] else float(grid[best])


class LinearizedPredictive(ExplainsCallMistakes, VersionedState, BaseEstimator):
    """Sampling-free Bayesian predictive of a scikit-learn or torch MLP under a Laplace posterior.

    Parameters
    ----------
    estimator : MLPRegressor or MLPClassifier, or a torch ``nn.Sequential``
        Fitted (used as is; also in a ``FrozenEstimator`` or a ``Pipeline``), or unfitted (a
        clone is trained in `fit` on the rows not held out for validation). Regression
        networks have one output (a 1-D ``y``; several outputs are refused). A regression
        network may also be wrapped, fitted or not, in ``TransformedTargetRegressor(
        regressor=..., transformer=StandardScaler())``: the network, its posterior and the
        scale then work on the standardised target ``z = (y - shift) / scale`` (the
        scaler's ``mean_`` and ``scale_``), while every input and output here is in the
        units of ``y``: the ``y`` given to `fit`, means (``shift + scale * mean_z``),
        variances (``scale**2`` times), standard deviations, intervals, densities of
        `log_predictive`, `score` and ``noise_variance_``. Other target transforms
        (``func`` / ``inverse_func``, other transformers) raise TypeError. A fitted network
        needs rows held out from its training in `fit`: they set the noise (all of them)
        and the scale
        (on its training rows both come out too small and the intervals under-cover; this
        is detected, with a warning, when they are exactly the training rows of a
        scikit-learn network trained by ``lbfgs``). The
        predictive is a scikit-learn regressor or classifier like the network:
        `predict_proba` exists only for classifiers, `predict_std` and `predict_interval`
        only for regressors. A torch module (torch is optional) is always taken as trained
        (`fit` never trains it, so give it rows held out from its training) and read as a
        regression network with one output (see `LaplacePosterior` for the layers an
        ``nn.Sequential`` may hold; ``X`` is then 2-D); other modules, a
        ``TransformerEncoderLayer`` included, raise TypeError, whatever the shape of ``X``.
        A fitted network is held as it is: trained again or changed in place after `fit`
        (``partial_fit``, new weights, a torch module in train mode updating its
        statistics), it makes every prediction raise NotFittedError until `fit` runs
        again, as does a change of ``estimator``, ``posterior``, ``structure``,
        ``prior_precision``, ``scale`` or ``validation_fraction`` (the other settings act
        at prediction and may change). The check hashes a sample of 4,096 numbers of each
        larger weight array (it runs at every prediction): retraining changes them all,
        but an edit of a few weights of such an array can go unseen.
    posterior : LaplacePosterior, array-like or None, default=None
        ``None``: a ``LaplacePosterior(structure, prior_precision)`` fitted in `fit`. An
        unfitted `LaplacePosterior`: its settings, fitted in `fit`. A fitted one: used as is
        (it must belong to the same network, and when both were given frames, have the
        columns of ``X``, in its order); fitted again after `fit` (on other rows, say), it
        makes every prediction raise NotFittedError until `fit` runs again, since the scale
        was tuned for it as it was. An array ``(n_parameters,)``: posterior
        variances of a diagonal posterior, in the parameter order of `Network.parameters`
        (per layer ``coefs_[l].ravel()`` then ``intercepts_[l]``).
    structure : {"diag", "kron", "full", "last_layer"}, default="diag"
        Posterior structure when the posterior is built here. With ``"full"`` use
        ``method="glm"``: the single pass drops the covariances between layers and can
        overstate the variance many times (`fit` warns).
    prior_precision : "auto", "marglik" or float, default="auto"
        Prior precision when the posterior is built here (see `LaplacePosterior`).
        ``"auto"`` is tuned on the default one-pass predictive (linearised activations,
        per-unit variances; full covariances for ``"kron"``, GLM for ``"full"``), not on
        the one configured here by ``method``, ``covariance``, ``activation_moments`` and
        ``link``: its prior need not be the best for them (with ``covariance="full"`` and
        ``activation_moments="exact_relu"`` a review found another grid prior better for
        them on 6 of 6 seeds, by 0.004 to 0.016 nats of validation NLL). To tune for them,
        score a few fixed priors with the configured predictive on validation rows.
    method : {"onepass", "mc", "glm"}, default="onepass"
        The predictive: single forward pass of moments, Monte Carlo over weights, or
        linearised Laplace. Every prediction call may override it. For a softmax classifier
        the single pass and GLM give each logit's variance only, not the covariances between
        logits, and the probabilities treat the logits as independent (see ``link``);
        ``"mc"`` draws weights and keeps their joint distribution.
    activation_moments : {"linearize", "exact_relu", "matched"}, default="linearize"
        One-pass activations: local linearisation; exact rectified-Gaussian moments for
        ReLU; or those plus probit-style moments for tanh and the logistic.
    covariance : {"diag", "full"}, default="diag"
        One-pass: propagate per-unit variances, or full covariances between units (forced to
        ``"full"`` by a ``"kron"`` posterior, whose layers are correlated).
    link : {"probit", "mc"}, default="probit"
        Classification: probit approximation, or Monte Carlo over the Gaussian logits. With
        more than two classes the probit shrinks each logit on its own, a heuristic that can
        reorder close classes (a certain logit can overtake a larger, uncertain one); prefer
        ``"mc"`` when their order matters. The scale and an ``"auto"`` prior are tuned with
        the probit link either way (on digits the two links' validation NLLs differed by
        at most about 0.005 nats over three resplits). Both links ignore the covariances
        between logits (``"mc"`` draws each logit independently), although a softmax
        network's logits share a common shift that the softmax does not see and the data
        leave at its prior variance: per-row probabilities then differ from the joint
        linearised predictive's. In reviews on overfitted 3-class networks, with a
        ``structure="full"`` posterior and ``method="glm"`` the shift was 76 to 94% of a
        logit's variance and the largest differences 0.40 to 0.55; with the default
        diagonal posterior 15 to 19%, and at most 0.06 to 0.16 for ``"mc"``, 0.27 to 0.45
        for the probit. On digits (default posterior) it was 7 to 9%, the missing
        covariances cost at most about 0.02 per row, and the probit's own error up to
        about 0.09. ``method="mc"`` keeps the joint distribution.
    scale : "auto" or float, default="auto"
        Factor on the posterior covariance. ``"auto"``: fitted (as ``log scale``, bounded)
        by the validation negative log-likelihood of the one-pass predictive (of the GLM
        predictive when ``method="glm"``), then shared by every method.
    n_samples : int, default=1000
        Samples for ``method="mc"`` and ``link="mc"``.
    validation_fraction : float, default=0.25
        Share of the rows of `fit` held out to tune the prior precision and the scale (and,
        when `fit` trains the network, the regression noise; a network passed fitted has
        its noise from every row, since none trained it). The others give the curvature.
    random_state : int, Generator or None, default=None
        Seeds the validation split, the Monte Carlo draws and, when `fit` trains a
        scikit-learn network whose own ``random_state`` is None, that network.

    Attributes
    ----------
    estimator_ : fitted estimator
    posterior_ : LaplacePosterior
    scale_ : float
    noise_variance_ : float
        Regression: variance of the Gaussian observation noise added to the predictive, the
        network's mean squared residual on rows it was not trained on: the validation rows
        when `fit` trains the network, every row of `fit` for a network passed fitted
        (``scale_ -> 0`` gives the MAP network with this noise), in the units of ``y``.
    classes_ : ndarray
        Classification only.
    n_features_in_ : int
        Columns of the ``X`` given to `fit` (before any Pipeline step).
    feature_names_in_ : ndarray of str
        Column names seen at fit (only when X has string column names).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(300, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=300)
    >>> net = MLPRegressor(hidden_layer_sizes=(16,), activation="tanh", max_iter=3000)
    >>> net = net.set_params(random_state=0)
    >>> model = LinearizedPredictive(net, random_state=0).fit(X, y)
    >>> mean, var = model.predict_distribution(X[:3])
    >>> mean.shape, bool((var > 0).all())
    ((3,), True)
    >>> model.predict_interval(X[:3], alpha=0.1).shape
    (3, 2)
    """

    _parameter_constraints: ClassVar[dict] = {
        "estimator": [object],
        "posterior": [None, LaplacePosterior, "array-like"],
        "structure": [StrOptions(set(STRUCTURES))],
        "prior_precision": [
            StrOptions({"auto", "marglik"}),
            Interval(numbers.Real, 0, None, closed="neither"),
        ],
        "method": [StrOptions(set(METHODS))],
        "activation_moments": [StrOptions(set(MOMENT_MODES))],
        "covariance": [StrOptions({"diag", "full"})],
        "link": [StrOptions({"probit", "mc"})],
        "scale": [StrOptions({"auto"}), Interval(numbers.Real, 0, None, closed="neither")],
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
    }

    # What fit learnt from (changed since: refused at prediction); ``method``,
    # ``activation_moments``, ``covariance``, ``link`` and ``n_samples`` act at prediction.
    _fit_params: ClassVar[tuple[str, ...]] = (
        "estimator",
        "posterior",
        "structure",
        "prior_precision",
        "scale",
        "validation_fraction",
    )

    def __init__(
        self,
        estimator: Any,
        posterior: LaplacePosterior | ArrayLike | None = None,
        structure: str = "diag",
        prior_precision: str | float = "auto",
        method: str = "onepass",
        activation_moments: str = "linearize",
        covariance: str = "diag",
        link: str = "probit",
        scale: str | float = "auto",
        n_samples: int = 1000,
        validation_fraction: float = 0.25,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.posterior = posterior
        self.structure = structure
        self.prior_precision = prior_precision
        self.method = method
        self.activation_moments = activation_moments
        self.covariance = covariance
        self.link = link
        self.scale = scale
        self.n_samples = n_samples
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if _task_of(self.estimator) == "classification":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        # scikit-learn MLPs take sparse X (densified per call); torch modules do not
        tags.input_tags.sparse = not is_torch_module(self.estimator)
        return tags

    # ---- fit --------------------------------------------------------------------------------
    @keeps_state_on_error
    def fit(self, X: ArrayLike, y: ArrayLike) -> LinearizedPredictive:
        """Build the posterior (unless given) and fit the scale (and noise) on validation rows.

        ``validation_fraction`` of the rows tune the prior precision and the scale; the
        others train the network (if unfitted) and give the GGN. The regression noise comes
        from the held-out rows when the network is trained here, from every row when it is
        passed fitted (none of them trained it). When
        the network is fitted and a fitted posterior is given, every row tunes the scale: for
        a network trained elsewhere, build the posterior on its training data
        (``LaplacePosterior(net).fit(X_train, y_train, X_val, y_val)``), pass it, and fit on
        held-out rows. A classifier trained here needs rows of two classes at least; a
        fitted one takes rows of a single class, with a warning (its scale is then tuned
        on that class alone).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Targets (regression) or class labels.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        refuse_model_class(self.estimator, self)
        self._validate_params()
        # the model's kind before X's shape: a model that can never be read (a torch
        # TransformerEncoderLayer, say, whose own inputs are 3-D) gets its TypeError, not a
        # complaint about X that reshaping would not cure
        prefit = _is_fitted(self.estimator)
        for name in ("prior_precision", "scale"):  # numbers, not booleans
            if isinstance(getattr(self, name), numbers.Real):
                check_positive_float(getattr(self, name), name)
        check_int(self.n_samples, "n_samples")
        seed = integer_seed(self.random_state)
        self.seed_ = seed
        X = check_features(self, X, reset=True)  # None, no rows: named errors
        # named before training the network: NaN where the model refuses it, and infinity
        # where the network reads X itself (no network takes it); a pipeline's steps may
        # clip or impute it, so there it is judged in their output (by the view below) or
        # named when training fails on it
        nan, missing_objects, infinite = non_finite_parts(X)
        # missing objects (None) only where the network reads X itself: a pipeline's first
        # step may replace them whatever its tags say of NaN
        refused = nan or (missing_objects and not transforms_input(self.estimator))
        if refused and refuses_nan(self.estimator):
            raise ValueError(NETWORK_NAN_MESSAGE)
        if infinite and not transforms_input(self.estimator):
            raise ValueError(network_infinity_message(X))
        n = _n_rows(X)
        if is_torch_module(self.estimator) and hasattr(X, "toarray"):
            raise TypeError(
                "sparse input is not supported for torch modules; pass a dense array "
                "(X.toarray())."
            )
        # every row, before any split
        if _task_of(self.estimator) == "regression":
            dtype = np.asarray(y).dtype
            y = check_regression_target(check_rows("y", y, n), n)
            if is_torch_module(self.estimator) and dtype.kind in "iuO":
                warn_user(
                    f"`y` holds {'labels' if dtype.kind == 'O' else 'integers'} "
                    f"(dtype {dtype}), but a torch module is linearised as a regression "
                    "network: they are read as numbers, with a Gaussian likelihood. "
                    "Classification is supported for MLPClassifier.",
                    UserWarning,
                )
        else:
            present = np.unique(check_class_labels(y, n))
            if present.size < 2 and not prefit:  # a network trained here needs two classes
                raise ValueError(
                    "`y` has only one class; a classifier's predictive needs at least 2 classes."
                )
            known = getattr(self.estimator, "classes_", present)  # unseen: refused below
            if present.size < 2 and np.isin(present, known).all():  # the NLL is defined
                warn_user(
                    f"every row of `y` is of class {present.tolist()[0]!r}: the scale (and a "
                    "posterior built here) is tuned on that class alone, which rewards "
                    "confidence in it; give held-out rows of every class.",
                    UserWarning,
                )
        if hasattr(X, "tocsr"):
            X = X.tocsr()  # COO/DIA/... sparse formats cannot be indexed by rows
        given = self.posterior is not None and (
            not isinstance(self.posterior, LaplacePosterior)
            or hasattr(self.posterior, "prior_precision_")
        )
        if given and not prefit:
            raise ValueError(
                "a fitted posterior (or an array of variances) belongs to a trained network, "
                "but `estimator` is not fitted: pass the network the posterior was built for."
            )
        if prefit and given:
            # nothing to train: every row tunes the scale (and the regression noise)
            X_fit = y_fit = None
            X_val, y_val = X, y
        else:
            order = np.random.default_rng(seed).permutation(n)
            n_val = round(self.validation_fraction * n)
            if n_val < 1 or n - n_val < 2:
                raise ValueError(
                    f"too few rows, n_samples={n}: `validation_fraction`="
                    f"{self.validation_fraction} must leave at least one validation row and "
                    "two rows to fit the network and the posterior."
                )
            val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
            X_fit, y_fit = take_rows(X, train), take_rows(y, train)
            X_val, y_val = take_rows(X, val), take_rows(y, val)
        if prefit:
            self.estimator_ = self.estimator
        else:
            network = clone(self.estimator)
            if seed is not None and hasattr(network, "get_params"):
                # a scikit-learn network without its own seed (Pipeline steps included)
                unset = seed_parameters(network, only_unset=True)
                network.set_params(**dict.fromkeys(unset, seed))
            try:
                network.fit(X_fit, y_fit)
            except ValueError as error:  # a scaler's "Input X contains infinity ...", say
                # (not scikit-learn's InvalidParameterError, a TypeError too: a bad setting)
                if non_finite_kinds(X_fit)[1] and not isinstance(error, TypeError):
                    raise ValueError(network_infinity_message(X)) from error
                if not transforms_input(self.estimator) and not isinstance(error, TypeError):
                    # numpy's "could not convert string to float"
                    refuse_non_numeric_features(X, NETWORK, "pipeline", error)
                raise
            if is_classifier(network):  # after fit: its own check refuses continuous y
                missing = np.setdiff1d(np.asarray(y_val), np.asarray(y_fit))
                if missing.size:  # the network never saw them: say why
                    raise ValueError(
                        f"class(es) {missing[:5].tolist()} of `y` fell only in the "
                        f"{self.validation_fraction} of rows held out to tune the scale "
                        "(`validation_fraction`), so the network would be trained without "
                        "them: give more rows of each class, or train the network yourself "
                        "and pass it fitted."
                    )
            self.estimator_ = network
        view = as_network(self.estimator_)
        self.view_ = view
        self.task_ = view.task
        # classification only: a regressor has no classes_ (hasattr says so)
        if view.classes is not None:
            self.classes_ = view.classes
        else:
            self.__dict__.pop("classes_", None)
        # the validation rows first, so their errors name `X` and `y` (not the posterior's
        # `X_val` and `y_val`)
        Xv = view.transform(X_val)
        if view.task == "regression":  # on the network's (standardised) scale
            target = view.network_target(check_regression_target(y_val, Xv.shape[0]))
        else:
            assert view.classes is not None  # a classifier's view has its classes
            target = _encode_labels(y_val, view.classes, Xv.shape[0])
        # the regression noise: a trained network saw none of these rows, so all of them set
        # it (the held-out part alone, a quarter by default, made it noisier: the coverage
        # of 90% intervals varied more over seeds, sd 0.039 against 0.025 in a 40-seed
        # run); a network trained here saw the others. Set before the posterior, so that
        # targets whose squared residuals overflow are named `y`, not its `y_val`.
        noise = None
        if view.task == "regression":
            if prefit and X_fit is not None:
                X_noise, t_noise = view.transform(X), view.network_target(np.asarray(y))
            else:
                X_noise, t_noise = Xv, target
            residual = t_noise - view.network.forward(X_noise)[:, 0]
            noise = checked_noise_variance(residual, t_noise, "y", "X")  # y checked above
        if prefit:
            self._warn_if_training_rows(X, y)
        self.posterior_ = self._posterior(view, X_fit, y_fit, X_val, y_val)
        variance = self.posterior_.variance()
        if not np.all(np.isfinite(variance)) or np.any(variance < 0) or not np.any(variance > 0):
            raise ValueError(
                "the posterior has non-positive or non-finite variances; every variance must "
                "be positive (or zero for parameters held fixed)."
            )
        self._warn_if_full_onepass()
        self._fit_scale(Xv, target, noise)
        record_calibration_settings(self, step="fit")
        # the network is held by reference (the user's, when given fitted): trained again or
        # edited in place, it would no longer be the one the posterior was built at
        self._network_digest = _digest_of(self.estimator_)
        # so is a posterior given fitted: fitted again in place (on other rows, say), the
        # scale and the noise tuned here would be applied to another posterior
        self._posterior_digest = _posterior_digest(self.posterior_)
        return self

    def _warn_if_training_rows(self, X: Any, y: Any) -> None:
        """Warn when the rows given to `fit` are the training rows of a scikit-learn network
        trained by ``lbfgs`` (`uqconform.bayes.laplace.lbfgs_training_loss`): residuals of
        training rows understate the noise and the scale, and 90% intervals then cover
        about a quarter."""
        total = lbfgs_training_loss(self.view_, X, y)
        if total is not None:
            warn_user(
                f"The rows given to fit are the training rows of the network (its loss on "
                f"them, {total:.6g}, is its final training loss): fit tunes the noise and "
                "the scale on the rows it is given, and on training rows they come out too "
                "small, so the intervals under-cover. Pass rows held out from its training.",
                UserWarning,
            )

    def _warn_unused_posterior_settings(self) -> None:
        """``structure`` and ``prior_precision`` build the posterior only when none is given."""
        changed = [
            f"{name}={getattr(self, name)!r}"
            for name, default in (("structure", "diag"), ("prior_precision", "auto"))
            if not (isinstance(getattr(self, name), str) and getattr(self, name) == default)
        ]
        if changed:
            warn_user(
                f"{', '.join(changed)} unused: `posterior` is given, and its own structure "
                "and prior precision (or variances) apply; set them on it, or pass "
                "posterior=None to have these used.",
                UserWarning,
            )

    def _posterior(self, view, X_fit, y_fit, X_val, y_val) -> LaplacePosterior:
        given = self.posterior
        if given is not None:
            self._warn_unused_posterior_settings()
        if given is None:
            posterior = LaplacePosterior(
                self.estimator_,
                structure=self.structure,
                prior_precision=self.prior_precision,
                random_state=self.seed_,
            )
            return posterior.fit(X_fit, y_fit, X_val, y_val)
        if isinstance(given, LaplacePosterior):
            try:
                check_is_fitted(given, "prior_precision_")
            except NotFittedError:
                posterior = clone(given).set_params(estimator=self.estimator_)
                return posterior.fit(X_fit, y_fit, X_val, y_val)
            theirs, ours = given.mean_, view.network.parameters()
            if theirs.shape != ours.shape:
                raise ValueError(
                    f"the posterior has {theirs.size} parameters but the network has "
                    f"{ours.size}: it was built for another network."
                )
            if not np.allclose(theirs, ours):
                raise ValueError(
                    "the posterior's mean differs from the network's weights: it was built "
                    "for another (or a refitted) network."
                )
            self._check_posterior_columns(given)
            return given
        if view.task != "regression":  # the validation rows set a regressor's noise only
            X_val = y_val = None
        return LaplacePosterior.from_variance(self.estimator_, given, X_val=X_val, y_val=y_val)

    def _check_posterior_columns(self, posterior: LaplacePosterior) -> None:
        """Refuse a fitted posterior built on other columns than the ``X`` of `fit`: their
        names, where both recorded them, must be the same in the same order, and integer
        labels must not be the same labels in another order (other integer labels, as of a
        renumbered frame, are read by position with a warning, as `check_features` reads
        them). The network reads columns by position, and one trained on an array compares
        no names: a posterior of frames (a, b, c) with a predictive fitted and used on
        frames (c, a, b) predicted means 4.7 away in a review, silently."""
        for name in ("feature_names_in_", "_column_labels_in"):
            theirs, ours = posterior.__dict__.get(name), self.__dict__.get(name)
            if theirs is None or ours is None or list(theirs) == list(ours):
                continue
            if name == "_column_labels_in" and set(theirs) != set(ours):
                # other labels (a frame renumbered): read by position, as check_features does
                warn_user(
                    f"`X` has the column labels {labels_text(ours)}, not those of the "
                    f"posterior's fit ({labels_text(theirs)}): columns are read by position; "
                    "check that they are the same features in the same order.",
                    UserWarning,
                )
                continue
            raise ValueError(
                f"`posterior` was fitted on the columns {labels_text(theirs)}, but `X` has "
                f"{labels_text(ours)}: the network reads columns by position, so each "
                "feature would get another's values. Pass X with the posterior's columns, "
                "in its order, or fit the posterior on these."
            )

    def _warn_if_full_onepass(self) -> None:
        """A ``"full"`` posterior's layers are correlated; the single pass drops that."""
        if self.posterior_.structure == "full" and self.method != "glm":
            warn_user(
                "the single pass treats the layers of a 'full' posterior as independent: it "
                "drops the covariances between layers and can overstate the variance many "
                "times (tens to thousands of times GLM's were measured with a weak prior), "
                f"and method={self.method!r} tunes the scale on it. Use method='glm' (the "
                "exact linearised predictive, on which the scale is then tuned) or a 'diag', "
                "'kron' or 'last_layer' posterior.",
                UserWarning,
            )

    def _fit_scale(self, Xv: NDArray, target: NDArray, noise: float | None) -> None:
        """Tune the scale on the validation rows ``(Xv, target)``; regression: set the noise
        (``noise``, the variance on the network's scale; None for a classifier)."""
        fixed = None if self.scale == "auto" else float(self.scale)
        # GLM's variance is linear in the scale: one set of Jacobians serves every candidate
        # (computed only when there is a search)
        glm = self._glm(Xv, 1.0) if self.method == "glm" and fixed is None else None

        # The predictive of `method` for "glm"; otherwise the one pass at each candidate
        # scale: its moments are not linear in the scale (a layer adds the product of
        # propagated and weight variances; exact ReLU moments move the mean), so scaling the
        # variance at scale 1 would tune another predictive.
        def moments(log_scale: float) -> tuple[NDArray, NDArray]:
            scale = float(np.exp(log_scale))
            if glm is not None:
                return glm[0], glm[1] * scale
            return self._onepass(Xv, scale)

        def bounded(value: float) -> float:  # an overflowing candidate loses, never NaN
            return value if np.isfinite(value) else 1e300

        if self.task_ == "regression":
            # the noise is the network's validation mean squared residual (as for the MAP
            # baseline); only the epistemic part is scaled, so scale -> 0 recovers that baseline.
            # Tuned on the network's scale z; reported in the units of y.
            t = target
            assert noise is not None  # set by fit for a regressor
            noise_z: float = noise  # (the closure below reads it)
            self.noise_variance_ = noise_z * self.view_.target_scale**2

            def nll_regression(log_scale: float) -> float:
                mean, var = moments(log_scale)
                with np.errstate(over="ignore", invalid="ignore"):
                    log_density = gaussian_log_density(t, mean[:, 0], var[:, 0] + noise_z)
                    return bounded(-float(np.mean(log_density)))

            if fixed is not None:
                self.scale_ = fixed
            else:
                self.scale_ = float(np.exp(_minimise_log_scale(nll_regression, -20.0, 12.0)))
            return
        self.__dict__.pop("noise_variance_", None)  # regression only (a refit on a regressor)
        output = self.view_.network.output
        rows = np.arange(target.size)

        def nll_scale(log_scale: float) -> float:
            mean, var = moments(log_scale)
            with np.errstate(over="ignore", invalid="ignore"):
                logits = probit_logits(mean, var)
                return bounded(-float(np.mean(log_probabilities(logits, output)[rows, target])))

        if fixed is not None:
            self.scale_ = fixed
        else:
            self.scale_ = float(np.exp(_minimise_log_scale(nll_scale, -12.0, 12.0)))

    # ---- predictive moments -------------------------------------------------------------------
    def _check(self, method: str) -> None:
        """Refuse ``method`` before fit, after a change of a setting fit used, or when the
        network was trained or changed in place since fit."""
        check_is_fitted(self, "posterior_")
        check_calibration_settings(self, method, step="fit", again="fit(X, y)")
        recorded = self.__dict__.get("_network_digest")  # none when pickled by older builds
        refuse_changed_digest(
            self,
            method,
            recorded,
            lambda: _digest_of(self.estimator_, like=recorded),
            what="network (`estimator`)",
            since="fit",
            how="it was trained again or edited in place",
            stale="the posterior and the predictive are the old network's",
            again="fit(X, y)",
        )
        recorded = self.__dict__.get("_posterior_digest")  # none when pickled by older builds
        if recorded is not None and _posterior_digest(self.posterior_, like=recorded) != recorded:
            raise NotFittedError(
                f"{type(self).__name__}.{method}: the fitted posterior (`posterior`) changed "
                "since fit (it was fitted again or edited in place), so the scale and the "
                "noise tuned at fit belong to the old posterior: call fit(X, y) again."
            )

    def _transform(self, X: Any) -> NDArray:
        """The network input for ``X``; None, 1-D input and no rows refused naming `X`."""
        return self.view_.transform(check_features(self, X, reset=False))

    def _onepass(self, Xt: NDArray, scale: float) -> tuple[NDArray, NDArray]:
        covariance = "full" if self.posterior_.structure == "kron" else self.covariance
        return self.view_.network.moments(
            Xt,
            self.posterior_._blocks(scale),  # checked with this predictive
            covariance=covariance,
            activation_moments=self.activation_moments,
        )

    def _glm(self, Xt: NDArray, scale: float) -> tuple[NDArray, NDArray]:
        mean = self.view_.network.forward(Xt)
        var = np.concatenate(
            [self.posterior_.output_variance(J, scale) for J in output_jacobians(self.view_, Xt)]
        )
        return mean, var

    def _monte_carlo_outputs(
        self, Xt: NDArray, n_samples: int, random_state: Any
    ) -> Iterator[tuple[int, slice, NDArray]]:
        """The network outputs under ``n_samples`` posterior draws, in pieces: ``(block,
        rows, f)`` with ``f (S_block, n_rows, K)`` the outputs of the rows ``Xt[rows]``
        (row block number ``block``) under one block of draws.

        The weights are drawn in blocks of at most `MC_DRAW_CELLS` cells (draws x
        parameters) from one stream seeded by ``random_state`` (None: the one fixed in
        `fit`): together the draws of one ``posterior_.sample(n_samples)`` call, never all
        held (1000 draws of a (256, 256) regressor's 68,865 weights, all at once, peaked at
        1,653 MB for a 10-row "diag" prediction; in blocks at 106 MB).
        Under each block the rows go through in blocks of about ``2**22`` (samples x rows x
        units) cells, the same row blocks whatever the block of draws.
        """
        seed = self.seed_ if random_state is None else integer_seed(random_state)
        network = self.view_.network
        width = max(Xt.shape[1], *(layer.n_out for layer in network.dense_layers))
        row_blocks = _row_blocks(Xt.shape[0], n_samples * width)
        step = max(1, MC_DRAW_CELLS // self.posterior_.n_parameters_)
        if step >= 16:  # BLAS-aligned, as the row blocks
            step -= step % 16
        draws = self.posterior_._sample_blocks(
            n_samples, np.random.default_rng(seed), self.scale_, step
        )
        for theta in draws:
            for block, rows in enumerate(row_blocks):
                yield block, rows, network.forward_samples(Xt[rows], theta)

    def _monte_carlo_moments(
        self, Xt: NDArray, n_samples: int, random_state: Any
    ) -> tuple[NDArray, NDArray]:
        """Mean and variance ``(n, K)`` of the network outputs over ``n_samples`` posterior
        draws (`_monte_carlo_outputs`), merged across blocks of draws (Chan et al.'s
        pairwise update: one block gives ``f.mean(0)`` and ``f.var(0)`` exactly)."""
        parts: dict[int, list[Any]] = {}
        for block, _, f in self._monte_carlo_outputs(Xt, n_samples, random_state):
            count, mean = f.shape[0], f.mean(axis=0)
            squares = np.sum((f - mean) ** 2, axis=0)
            if block not in parts:
                parts[block] = [count, mean, squares]
                continue
            seen, seen_mean, seen_squares = parts[block]
            total = seen + count
            step = mean - seen_mean
            parts[block] = [
                total,
                seen_mean + step * (count / total),
                seen_squares + squares + step**2 * (seen * count / total),
            ]
        ordered = [parts[block] for block in sorted(parts)]
        return (
            np.concatenate([mean for _, mean, _ in ordered]),
            np.concatenate([squares / count for count, _, squares in ordered]),
        )

    def _monte_carlo_log_mean(
        self,
        Xt: NDArray,
        n_samples: int,
        random_state: Any,
        log_terms: Callable[[NDArray, slice], NDArray],
    ) -> NDArray:
        """``log mean_s exp(log_terms(f_s, rows))`` per row over ``n_samples`` posterior
        draws (`_monte_carlo_outputs`): ``log_terms(f, rows)`` maps the outputs ``(S_block,
        n_rows, K)`` of the rows ``Xt[rows]`` to log terms ``(S_block, n_rows, ...)``,
        summed by log-sum-exp across blocks of draws (one block: ``logsumexp`` over them
        all)."""
        sums: dict[int, NDArray] = {}
        overflowed = np.zeros(Xt.shape[0], dtype=bool)  # as the other predictives refuse
        for block, rows, f in self._monte_carlo_outputs(Xt, n_samples, random_state):
            with np.errstate(over="ignore", invalid="ignore"):  # refused below instead
                # outputs whose squares (their moments) float64 cannot hold, as the other
                # predictives refuse them; a far target alone gives -inf, as theirs do
                overflowed[rows] |= ~np.isfinite(f * f).all(axis=(0, 2))
                if overflowed.any():
                    continue
                part = logsumexp(log_terms(f, rows), axis=0)
            sums[block] = np.logaddexp(sums[block], part) if block in sums else part
        refuse_overflowed_moments(np.where(overflowed, np.nan, 0.0), np.zeros(Xt.shape[0]), "mc")
        return np.concatenate([sums[block] for block in sorted(sums)]) - np.log(n_samples)

    def predict_distribution(
        self,
        X: ArrayLike,
        method: str | None = None,
        *,
        n_samples: int | None = None,
        random_state: Any = None,
        include_noise: bool = False,
    ) -> tuple[NDArray, NDArray]:
        """Gaussian mean and variance of the network's outputs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        method : {"onepass", "mc", "glm"}, optional
            Defaults to the constructor's ``method``.
        n_samples : int, optional
            Monte Carlo samples (``method="mc"``); defaults to ``n_samples``.
        random_state : int, Generator or None, optional
            Monte Carlo seed; defaults to the one fixed in `fit`.
        include_noise : bool, default=False
            Regression: add ``noise_variance_`` (the variance of ``y`` instead of ``f``).
            Refused for a classifier (its logits have no noise term). True or False only
            (a numpy bool too): other objects (``"False"``, ``0``) raise ValueError.

        Returns
        -------
        mean, var : ndarray of shape (n_samples,) for regression, (n_samples, K) for logits
            ``K`` is 1 for a binary classifier (the logit of ``classes_[1]``). Regression:
            in the units of ``y`` (for a ``TransformedTargetRegressor``, the network's
            moments mapped back: ``shift + scale * mean``, ``scale**2 * var``).
        """
        self._check("predict_distribution")
        check_bool(include_noise, "include_noise")  # "False" or [0] would read as True
        return self._distribution(X, method, n_samples, random_state, include_noise)

    def _distribution(
        self,
        X: ArrayLike,
        method: str | None,
        n_samples: int | None = None,
        random_state: Any = None,
        include_noise: bool = False,
    ) -> tuple[NDArray, NDArray]:
        """`predict_distribution` of a checked predictive (the public methods check once)."""
        method = self.method if method is None else method
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
        if include_noise and self.task_ != "regression":
            raise TypeError(
                "`include_noise` adds the regression noise variance; a classifier's logits "
                "have no noise term: leave it False."
            )
        count = self._n(n_samples)  # checked whatever the method (used by "mc")
        Xt = self._transform(X)
        if method == "onepass":
            mean, var = self._onepass(Xt, self.scale_)  # refuses overflowed moments itself
        else:
            if method == "glm":
                mean, var = self._glm(Xt, self.scale_)
            else:  # overflowed draws are refused just below, without numpy's warnings
                with np.errstate(over="ignore", invalid="ignore"):
                    mean, var = self._monte_carlo_moments(Xt, count, random_state)
            refuse_overflowed_moments(mean, var, method)
        if self.task_ == "regression":
            mean, var = self._to_target(mean[:, 0], var[:, 0])
            if include_noise:
                var = var + self.noise_variance_
        return mean, var

    def _to_target(self, mean: NDArray, var: NDArray | None = None) -> tuple[NDArray, Any]:
        """Regression moments of the network's output in the units of ``y`` (identity unless
        a ``TransformedTargetRegressor`` standardises the target)."""
        shift, scale = self.view_.target_shift, self.view_.target_scale
        if shift == 0.0 and scale == 1.0:
            return mean, var
        return shift + scale * mean, None if var is None else scale**2 * var

    def _n(self, n_samples: int | None) -> int:
        n = self.n_samples if n_samples is None else n_samples
        return check_int(n, "n_samples")

    # ---- regression outputs -----------------------------------------------------------------
    def _regression_only(self, name: str) -> None:
        self._check(name)
        if self.task_ != "regression":
            raise TypeError(f"{name} is defined for regression; use predict_proba.")

    @available_if(_is_regressor)
    def predict_std(self, X: ArrayLike, method: str | None = None) -> NDArray:
        """Predictive standard deviation of ``y`` (regression): ``sqrt(Var f + noise)``, in
        the units of ``y``.

        This is what `uqconform.regression.SplitConformalRegressor` reads from a fitted
        ``difficulty_estimator`` with ``conformity_score="normalized"``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        method : {"onepass", "mc", "glm"}, optional
            Defaults to the constructor's ``method``.

        Returns
        -------
        ndarray of shape (n_samples,)
            Includes the observation noise ``noise_variance_``, unlike the variance of
            `predict_distribution` (``include_noise=False`` by default).
        """
        self._regression_only("predict_std")
        return np.sqrt(self._distribution(X, method, include_noise=True)[1])

    @available_if(_is_regressor)
    def predict_interval(
        self, X: ArrayLike, alpha: float | ArrayLike = 0.1, method: str | None = None
    ) -> NDArray:
        """Central Gaussian predictive intervals (regression; no coverage guarantee).

        ``mean -/+ z * sqrt(Var f + noise_variance_)``: the intervals are for ``y``, with the
        observation noise, whereas `predict_distribution` leaves it out by default
        (``include_noise=False``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        alpha : float or array-like of shape (k,), default=0.1
            Miscoverage level(s) in (0, 1): each interval holds ``1 - alpha`` of the
            Gaussian predictive.
        method : {"onepass", "mc", "glm"}, optional
            Defaults to the constructor's ``method``.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            Lower and upper bounds, in the units of ``y``.
        """
        self._regression_only("predict_interval")
        levels = check_call_alpha(alpha, alpha, X)
        mean, var = self._distribution(X, method, include_noise=True)
        # from the lower tail below 1e-8, where 1 - alpha / 2 has lost the digits (the
        # same bits as the upper tail above it)
        z = np.where(levels > 1e-8, ndtri(1.0 - levels / 2.0), -ndtri(levels / 2.0))
        half = np.sqrt(var)[:, None] * z[None, :]
        out = np.stack([mean[:, None] - half, mean[:, None] + half], axis=1)
        return out[:, :, 0] if np.ndim(alpha) == 0 else out

    # ---- classification outputs -------------------------------------------------------------
    @available_if(_is_classifier)
    def predict_proba(
        self,
        X: ArrayLike,
        method: str | None = None,
        *,
        n_samples: int | None = None,
        random_state: Any = None,
    ) -> NDArray:
        """Class probabilities ``(n_samples, n_classes)``, columns in ``classes_`` order.

        One pass and GLM: the probit approximation of the Gaussian logits (``link="probit"``)
        or a Monte Carlo average over them (``link="mc"``); ``method="mc"``: the average of
        the probabilities over weight samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        method : {"onepass", "mc", "glm"}, optional
            Defaults to the constructor's ``method``.
        n_samples : int, optional
            Monte Carlo draws (``method="mc"`` or ``link="mc"``); defaults to the
            constructor's ``n_samples``.
        random_state : int, Generator or None, optional
            Monte Carlo seed; defaults to the one fixed in `fit`.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Two columns for a binary classifier.
        """
        self._check("predict_proba")
        if self.task_ != "classification":
            raise TypeError("predict_proba is defined for classifiers; use predict_distribution.")
        return self._proba(X, method, n_samples, random_state)

    def _proba(
        self,
        X: ArrayLike,
        method: str | None,
        n_samples: int | None = None,
        random_state: Any = None,
    ) -> NDArray:
        """`predict_proba` of a checked classifier."""
        method = self.method if method is None else method
        count = self._n(n_samples)
        output = self.view_.network.output
        if method == "mc":
            return np.exp(
                self._monte_carlo_log_mean(
                    self._transform(X),
                    count,
                    random_state,
                    lambda f, _: _log_proba_samples(f, output),
                )
            )
        mean, var = self._distribution(X, method)
        if self.link == "probit":
            return class_probabilities(probit_logits(mean, var), output)
        total: Any = 0.0  # then a sum of (n, K) arrays (one block at least)
        for log_p in self._link_samples(mean, var, count, random_state):
            total = total + np.exp(log_p).sum(axis=0)
        return total / count

    def _link_samples(
        self, mean: NDArray, var: NDArray, count: int, random_state: Any
    ) -> Iterator[NDArray]:
        """``link="mc"``: log class probabilities ``(S_block, n, n_classes)`` of ``count``
        draws of the Gaussian logits ``N(mean, var)``, block by block.

        The blocks are drawn in turn from one stream (seeded by ``random_state``; None:
        ``seed_``, from the estimator's ``random_state`` at `fit`, and fresh draws at every
        call when that is None): the draws of one ``(count, K)`` array, shared by every
        row, so a row's probabilities do not depend on its batch.
        """
        seed = self.seed_ if random_state is None else integer_seed(random_state)
        rng, std = np.random.default_rng(seed), np.sqrt(var)
        output = self.view_.network.output
        for samples in _row_blocks(count, mean.size):
            drawn = min(samples.stop, count) - samples.start
            logits = mean + std * rng.standard_normal((drawn, 1, mean.shape[-1]))
            yield _log_proba_samples(logits, output)

    def predict(self, X: ArrayLike, method: str | None = None) -> NDArray:
        """Predictive mean (regression) or the most probable class (classification).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        method : {"onepass", "mc", "glm"}, optional
            Defaults to the constructor's ``method``.

        Returns
        -------
        ndarray of shape (n_samples,)
            Means in the units of ``y``, or labels from ``classes_`` (the largest column of
            `predict_proba`).
        """
        self._check("predict")
        return self._predict(X, method)

    def _predict(self, X: ArrayLike, method: str | None) -> NDArray:
        """`predict` of a checked predictive."""
        if self.task_ == "regression":
            return self._distribution(X, method)[0]
        assert self.classes_ is not None  # a classifier's view has its classes
        return self.classes_[np.argmax(self._proba(X, method), axis=1)]

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Coefficient of determination of `predict` (regression) or its accuracy.

        The scikit-learn conventions for regressors and classifiers; for the quality of the
        predictive distribution use `log_predictive`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Targets (regression) or class labels.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
            R² or accuracy of `predict` with the constructor's ``method``.
        """
        self._check("score")
        check_row_order(X, y, "y")
        prediction = self._predict(X, None)
        if self.task_ == "regression":
            target = check_regression_target(y, prediction.shape[0])  # named like log_predictive's
            return float(r2_score(target, prediction, sample_weight=sample_weight))
        labels = check_class_labels(y, prediction.shape[0])  # length, missing labels: named
        return float(accuracy_score(labels, prediction, sample_weight=sample_weight))

    def log_predictive(
        self,
        X: ArrayLike,
        y: ArrayLike,
        method: str | None = None,
        *,
        n_samples: int | None = None,
    ) -> NDArray:
        """Per-row log predictive density (regression) or probability of the label.

        ``method="mc"`` uses the Monte Carlo mixture itself (not its Gaussian moments).
        Regression densities are of ``y`` in its units, with the observation noise
        ``noise_variance_`` (for a ``TransformedTargetRegressor``, the density of the
        standardised target minus ``log(scale)``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Targets (regression) or class labels from ``classes_``.
        method : {"onepass", "mc", "glm"}, optional
            Defaults to the constructor's ``method``.
        n_samples : int, optional
            Monte Carlo draws (``method="mc"`` or ``link="mc"``, with the seed fixed in
            `fit`); defaults to the constructor's ``n_samples``.

        Returns
        -------
        ndarray of shape (n_samples,)
            Natural logarithms.
        """
        self._check("log_predictive")
        check_row_order(X, y, "y")
        method = self.method if method is None else method
        count = self._n(n_samples)  # checked whatever the method (used by "mc")
        Xt = self._transform(X)
        if self.task_ == "regression":
            target = check_regression_target(y, Xt.shape[0])
            if method == "mc":

                def log_density(f: NDArray, rows: slice) -> NDArray:
                    f = self._to_target(f[:, :, 0])[0]  # in the units of y
                    return gaussian_log_density(target[None, rows], f, self.noise_variance_)

                return self._monte_carlo_log_mean(Xt, count, None, log_density)
            mean, var = self._distribution(X, method, include_noise=True)
            return gaussian_log_density(target, mean, var)
        assert self.classes_ is not None  # a classifier's view has its classes
        labels = _encode_labels(y, self.classes_, Xt.shape[0])
        if method == "mc":
            output = self.view_.network.output

            def label_log_p(f: NDArray, rows: slice) -> NDArray:
                log_p = _log_proba_samples(f, output)  # (S_block, n_rows, n_classes)
                return log_p[:, np.arange(log_p.shape[1]), labels[rows]]

            return self._monte_carlo_log_mean(Xt, count, None, label_log_p)
        # logarithms computed as such (log-sigmoid, log-softmax): the log of a probability
        # loses the digits of a confident mistake (1 - expit(z) is 0 from z of about 37 on)
        mean, var = self._distribution(X, method)
        if self.link == "probit":
            log_p = log_probabilities(probit_logits(mean, var), self.view_.network.output)
        else:  # the draws of predict_proba (the same ones when random_state is set)
            blocks = [
                logsumexp(block, axis=0) for block in self._link_samples(mean, var, count, None)
            ]
            log_p = logsumexp(np.stack(blocks), axis=0) - np.log(count)
        return log_p[np.arange(labels.size), labels]


def _log_proba_samples(logits: NDArray, output: str) -> NDArray:
    """Log class probabilities of stacked logits ``(S, n, K)``: ``(S, n, n_classes)``."""
    S, n, K = logits.shape
    return log_probabilities(logits.reshape(S * n, K), output).reshape(S, n, -1)


def _n_rows(X: Any) -> int:
    shape = getattr(X, "shape", None)
    if shape is None:
        X = np.asarray(X)
        shape = X.shape
    if len(shape) != 2:
        raise ValueError(f"`X` must be 2-D (one row per sample), got shape {tuple(shape)}.")
    return int(shape[0])
