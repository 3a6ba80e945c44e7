"""Laplace (Gaussian) posteriors at the trained weights of a fitted network.

The posterior precision is the generalised Gauss-Newton matrix (GGN) of the likelihood at the
trained weights plus an isotropic prior precision ``delta`` on *every* parameter, biases
included:

* regression (Gaussian noise ``sigma^2``, estimated from residuals):
  ``GGN = sum_n J_n' J_n / sigma^2``;
* classification: ``GGN = sum_n J_n' (diag p_n - p_n p_n') J_n`` (softmax), ``p (1 - p)``
  for the single logit of a binary `MLPClassifier`;

with ``J_n`` the Jacobian of the network's outputs (logits) with respect to its parameters.
For a scikit-learn network, ``"diag"``, ``"kron"`` and ``"last_layer"`` never form it: they
need only each layer's inputs and the roots of ``H_n`` (the output Hessian) back-propagated
to its outputs (``a_i d_o`` is the gradient in ``W[i, o]``); ``"full"`` and torch networks
take whole Jacobians from `uqconform.linearize` (the same numbers, to rounding).

Structures: ``"diag"`` (the GGN's diagonal), ``"kron"`` (one Kronecker-factored block per
layer, K-FAC, with damping split between the factors so the
posterior covariance itself is a Kronecker product: ``(A + b sqrt(delta) I) x (B + sqrt(delta)
I / b)``, whose cross terms ``sqrt(delta) (b I x B + A x I / b)`` add precision, so the posterior
is tighter than ``(A x B + delta I)^-1``, most where ``delta`` is not small against the
factors' eigenvalues), ``"full"`` (the whole GGN, small
networks only) and ``"last_layer"`` (the full GGN of the last layer's weights and biases, the
rest of the network fixed).

The prior precision matters more than anything else here: a weak prior (such as
scikit-learn's ``alpha`` taken at face value, with unpenalised biases) leaves parameters the
data never constrain (dead ReLU units, biases, near-zero output weights) with an enormous
posterior variance, and every predictive built on it (one pass, GLM, Monte Carlo) is then
meaningless. The default ``prior_precision="auto"`` tunes one precision by the negative
log-likelihood of the one-pass predictive (GLM's for ``"full"``) on validation data;
``"marglik"`` maximises the Laplace approximation of the marginal likelihood (known to give
too wide intervals here).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy.linalg import eigh
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from uqconform._seeding import check_random_state_value, random_generator
from uqconform._validation import (
    check_class_labels,
    check_features,
    check_int,
    check_positive_float,
    check_regression_target,
    check_row_order,
    check_wrapper_fitted,
    named_as_fitted,
    real_values,
    refuse_booleans,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    check_calibration_settings,
    explains_call_mistakes,
    keeps_state_on_error,
    record_calibration_settings,
)
from uqconform.bayes.convert import NetworkView, as_network, output_jacobians
from uqconform.bayes.likelihood import (
    gaussian_log_density,
    log_probabilities,
    probit_logits,
)
from uqconform.bayes.network import (
    Activation,
    Dense,
    DiagonalBlock,
    FullBlock,
    KroneckerBlock,
    Network,
)
from uqconform.classification.split import encode_labels
from uqconform.linearize import is_torch_module as _is_torch_module
from uqconform.linearize import noise_variance

__all__ = ["LaplacePosterior"]

STRUCTURES = ("diag", "kron", "full", "last_layer")
#: Largest number of parameters for structure="full" (its covariance is P x P).
MAX_FULL_PARAMETERS = 6000
#: The grid of ``prior_precision="auto"`` (log10 of the precision).
PRIOR_GRID = np.logspace(-3, 6, 19)


def _encode_labels(
    y: ArrayLike, classes: NDArray, n: int, name: str = "y", rows_of: str = "X"
) -> NDArray:
    return encode_labels(check_class_labels(y, n, name, rows_of), classes, name)


def checked_noise_variance(
    residual: NDArray, target: NDArray, name: str = "y", rows_of: str = "X"
) -> float:
    """`uqconform.linearize.noise_variance` of ``residual``, or a ValueError when the squared
    residuals overflow float64 (beyond about 1e154; the noise variance would be infinite,
    hence infinite intervals, or a prior grid with no finite validation NLL). It names the
    targets ``name`` when their own squares overflow, else the inputs ``rows_of`` (the
    network's outputs on them are too large).

    Parameters
    ----------
    residual, target : ndarray of shape (n,)
        Residuals of the network and its targets, on the network's scale.
    name : str, default="y"
        The argument that holds the targets (``"y"``, ``"y_val"``).
    rows_of : str, default="X"
        The argument that holds the inputs (``"X"``, ``"X_val"``).

    Returns
    -------
    float
        The noise variance on the network's scale, finite and > 0.

    Raises
    ------
    ValueError
        If the variance overflows.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        variance = noise_variance(residual, target)
        targets_overflow = not np.isfinite(np.mean(np.square(target)))
    if np.isfinite(variance):
        return variance
    if targets_overflow:
        raise ValueError(
            f"`{name}`: the network's squared residuals overflow float64 (targets beyond "
            f"about 1e154), so the noise variance would be infinite: rescale `{name}` "
            "(divide it by a power of ten, say) and fit again."
        )
    raise ValueError(
        f"`{rows_of}`: the network's outputs on these rows are too large (their squared "
        "residuals overflow float64), so the noise variance would be infinite: rescale "
        f"`{rows_of}`, or check it for corrupt values."
    )


def _check_validation_columns(posterior: LaplacePosterior, X_val: Any) -> None:
    """Compare ``X_val``'s columns with those of the ``X`` just recorded by
    `check_features`: a frame whose names (or integer labels) differ from ``X``'s, or come
    in another order, is refused naming `X_val`. The network reads columns by position,
    and one trained on an array does not compare names: ``X_val[["c", "a", "b"]]`` after
    ``X`` (a, b, c) gave each feature another's values, and moved the noise variance of a
    review's network from 0.201 to 1.843 and its tuned prior from 10 to 100, silently.
    Other mismatches scikit-learn warns of (an array after a frame) still only warn, their
    text naming `X_val` too.
    """
    _naming_x_val_in(lambda: check_features(posterior, X_val, reset=False))


def _naming_x_val_in(call: Any) -> Any:
    """``call()``, its errors (ValueError) and warnings about ``X`` rewritten to
    name ``X_val``; the warnings told again in the user's filters, from this frame (a
    context manager's exit would name contextlib's line instead of the user's)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call()
        except ValueError as error:
            raise ValueError(_naming_x_val(str(error))) from None
    for warning in caught:
        warn_user(_naming_x_val(str(warning.message)), warning.category)
    return result


def _naming_x_val(text: str) -> str:
    """A message about ``X`` (the library's, which names its argument, or scikit-learn's)
    rewritten for ``X_val``.

    Examples
    --------
    >>> _naming_x_val("X has 2 features, but LaplacePosterior is expecting 3 features.")
    '`X_val` has 2 features, but LaplacePosterior is expecting 3 features.'
    """
    if "`X`" in text:  # the library's own messages, which name the argument
        replaced = (("`X`", "`X_val`"), ("at the fit", "in `X`"), ("of the fit", "of `X`"))
        for old, new in (*replaced, ("X[", "X_val[")):
            text = text.replace(old, new)
        return text
    if text.startswith("X "):  # scikit-learn's "X has 2 features, but ..."
        return f"`X_val`{text[1:]}"
    if "feature names" in text:  # scikit-learn's: "fit" there is `X`
        return f"`X_val` must have the columns of `X`, in its order: {text.rstrip()}"
    return f"`X_val`: {text}"  # scikit-learn's, prefixed as for the other errors of X_val


def lbfgs_training_loss(view: NetworkView, X: Any, y: Any) -> float | None:
    """The regularised loss of a scikit-learn network trained by ``lbfgs`` on the rows
    ``(X, y)`` when they are its training rows (it then equals the final training loss
    ``loss_``, the loss at the returned weights, to rounding); None otherwise, or when
    that cannot be told.

    Only ``lbfgs`` leaves this exact signature (``adam`` / ``sgd`` report an average over
    the last epoch, which held-out rows of a network that does not overfit can match as
    closely as its training rows do). Measured on 36 lbfgs networks (friedman1, diabetes,
    digits, breast cancer; weight decay 1e-4 to 10): relative gap below 4e-16 on their
    training rows, above 7e-2 on held-out rows. A near-perfect fit (the penalty almost all
    of the loss) tells nothing, and gives None.
    """
    model = view.model
    if getattr(model, "solver", None) != "lbfgs" or not hasattr(model, "loss_"):
        return None
    # named as the network was fitted (one fitted on a DataFrame warns at an array)
    Xt = named_as_fitted(model, view.transform(X))
    n = Xt.shape[0]
    if view.task == "regression":  # the network's loss is on its (standardised) scale
        z = view.network_target(y)
        loss = 0.5 * float(np.mean((z - model.predict(Xt)) ** 2))
    else:  # scikit-learn's log loss clips the probabilities at eps
        eps = np.finfo(np.float64).eps
        proba = np.clip(model.predict_proba(Xt), eps, 1 - eps)
        assert view.classes is not None  # a classifier's view has its classes
        labels = _encode_labels(y, view.classes, n)
        loss = -float(np.mean(np.log(proba[np.arange(n), labels])))
    squares = sum(float(np.sum(np.square(coef))) for coef in model.coefs_)
    total, final = loss + 0.5 * model.alpha * squares / n, float(model.loss_)
    if loss >= 1e-3 * final and abs(total - final) <= 1e-6 * abs(final):
        return total
    return None


class LaplacePosterior(VersionedState, BaseEstimator):
    """A Gaussian posterior over the weights of a fitted network (Laplace, GGN precision).

    Parameters
    ----------
    estimator : fitted MLPRegressor or MLPClassifier, or a torch ``nn.Sequential``
        Also inside `sklearn.frozen.FrozenEstimator` or as the last step of a
        `sklearn.pipeline.Pipeline`. It is never refitted. A regression network has one
        output (networks of several are refused). A regression network may also be
        wrapped in a fitted ``TransformedTargetRegressor(regressor=...,
        transformer=StandardScaler())``: the network works on the standardised target
        ``z = (y - shift) / scale`` (the scaler's ``mean_`` and ``scale_``), while the ``y``
        and ``y_val`` given to `fit` and ``noise_variance_`` are in the units of ``y``. Other
        target transforms (``func`` / ``inverse_func``, other transformers) raise TypeError.
        A torch module, passed as it stands (its trained weights; torch is optional), is
        read by `uqconform.bayes.from_torch` as a regression network with one output and
        a Gaussian likelihood: an ``nn.Sequential`` (nested ones flattened) of ``Linear``
        (with bias), ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``BatchNorm1d``
        (evaluation mode), ``LayerNorm``, ``Dropout`` and ``Identity`` layers; ``X`` is
        then 2-D. Other modules (a bare ``Linear``, a ``TransformerEncoderLayer``, other
        layers, tied ``Linear`` layers) raise TypeError, several outputs ValueError.
    structure : {"diag", "kron", "full", "last_layer"}, default="diag"
        Structure of the GGN and of the posterior covariance.
    prior_precision : "auto", "marglik", float or array-like, default="auto"
        ``"auto"``: one precision on every parameter, the one of `PRIOR_GRID` with the best
        validation negative log-likelihood of the one-pass predictive (of the GLM
        predictive for ``"full"``, whose correlated layers the single pass drops). That is
        the default one pass (linearised activations, per-unit variances; full covariances
        for ``"kron"``), whatever predictive the posterior is later used with: the prior
        need not be the best one for another (``covariance="full"``,
        ``activation_moments="exact_relu"``, GLM or Monte Carlo in `LinearizedPredictive`).
        ``"marglik"``: the one maximising the Laplace marginal likelihood. A float: that
        precision on every parameter. An array ``(n_parameters,)`` (``"diag"`` and
        ``"full"`` only): one precision per parameter.
    validation_fraction : float, default=0.2
        With ``prior_precision="auto"`` and no ``X_val`` given to `fit`: the share of rows
        held out for tuning (the rest gives the GGN).
    random_state : int, Generator or None, default=None
        Seeds that split.

    Attributes
    ----------
    network_ : Network
        The layer-list view of the estimator.
    prior_precision_ : float or ndarray
    noise_variance_ : float
        Regression only: the Gaussian noise variance used in the GGN (mean squared residual of
        the network on the validation rows, or on the fitting rows without validation), in
        the units of ``y`` (with a ``TransformedTargetRegressor`` the GGN uses it divided by
        ``scale**2``, on the network's standardised scale).
    n_parameters_ : int
    curvature_ : ndarray or list
        The GGN: diagonal ``(P,)``, matrix ``(P, P)`` (``"full"``; last layer only for
        ``"last_layer"``), or per layer ``(A, B)`` Kronecker factors.
    prior_grid_nll_ : ndarray or None
        ``"auto"``: validation negative log-likelihood per grid value, of the one-pass
        predictive (full covariances for ``"kron"``, as `LinearizedPredictive` uses it), or
        for ``"full"`` of the linearised (GLM) predictive; a density of ``y``, in its
        units.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.neural_network import MLPRegressor
    >>> X, y = make_regression(200, 3, noise=5.0, random_state=0)
    >>> net = MLPRegressor(hidden_layer_sizes=(8,), max_iter=2000, random_state=0).fit(X, y / 100)
    >>> post = LaplacePosterior(net, prior_precision=1.0).fit(X, y / 100)
    >>> post.variance().shape == (post.n_parameters_,)
    True
    >>> bool((post.variance() > 0).all())
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        "estimator": [object],
        "structure": [StrOptions(set(STRUCTURES))],
        "prior_precision": [
            StrOptions({"auto", "marglik"}),
            Interval(numbers.Real, 0, None, closed="neither"),
            "array-like",
        ],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
    }

    # The posterior's layout, precision and network are those it was fitted with (changed
    # since: refused); ``validation_fraction`` and ``random_state``, which only pick the rows
    # that tune an "auto" prior, are left free.
    _fit_params = ("structure", "prior_precision", "estimator")

    def _validate_params(self) -> None:
        refuse_booleans(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )
        super()._validate_params()
        check_random_state_value(self.random_state)  # also refuses True and seeds >= 2**32

    def __init__(
        self,
        estimator: Any,
        structure: str = "diag",
        prior_precision: str | float | ArrayLike = "auto",
        validation_fraction: float = 0.2,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.structure = structure
        self.prior_precision = prior_precision
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    # ---- fitting ---------------------------------------------------------------------------
    @explains_call_mistakes  # fit(y, X): "Were X and y swapped?", as LinearizedPredictive's
    @keeps_state_on_error
    def fit(
        self, X: ArrayLike, y: ArrayLike, X_val: ArrayLike | None = None, y_val: Any = None
    ) -> LaplacePosterior:
        """Compute the GGN on ``(X, y)`` and set the prior precision.

        Parameters
        ----------
        X, y : array-like
            Data for the curvature (usually the network's training data); regression targets
            in the user's units (also for a ``TransformedTargetRegressor``).
        X_val, y_val : array-like, optional
            Validation data for ``prior_precision="auto"`` and the regression noise variance,
            given together. Without them, ``"auto"`` holds out ``validation_fraction`` of
            ``(X, y)``. ``X_val`` has the columns of ``X``: a frame's names (or integer
            labels) that differ from those of a frame ``X``, or come in another order, are
            refused.

        Returns
        -------
        self
        """
        self._validate_params()
        check_row_order(X, y, "y")
        if X_val is not None:
            check_row_order(X_val, y_val, "y_val", rows_of="X_val")
        self.__dict__.pop("_fit_settings", None)  # recorded again at the end
        try:
            view = as_network(self.estimator)
        except NotFittedError as error:
            raise NotFittedError(
                f"LaplacePosterior needs the trained network, and `estimator` is not fitted "
                f"({error}). Train it first; a clone of the posterior (sklearn.base.clone, a "
                "search) holds an unfitted copy: pass FrozenEstimator(network) to keep it."
            ) from None
        prior = self.prior_precision
        if isinstance(prior, numbers.Real):
            prior = check_positive_float(prior, "prior_precision")  # refuses True
        if not isinstance(prior, (str, numbers.Real)):
            values = real_values(prior)
            if values is None:
                raise ValueError(
                    "`prior_precision` must be 'auto', 'marglik', a float > 0 or an array "
                    f"of one per parameter, got {prior!r:.80}."
                )
            prior = values
            if prior.shape != (view.network.n_parameters,):
                raise ValueError(
                    f"array `prior_precision` must hold {view.network.n_parameters} positive "
                    f"values (one per parameter), got shape {prior.shape}."
                )
            bad = ~(np.isfinite(prior) & (prior > 0))
            if bad.any():
                raise ValueError(
                    f"array `prior_precision` must be finite and > 0: {int(bad.sum())} of its "
                    f"{prior.size} values are not (first: {float(prior[bad][0])})."
                )
            if self.structure in ("kron", "last_layer"):
                raise ValueError(
                    f"an array `prior_precision` is not supported with structure="
                    f"{self.structure!r}; pass a float, 'auto' or 'marglik'."
                )
        if self.structure == "full" and view.network.n_parameters > MAX_FULL_PARAMETERS:
            raise ValueError(
                f"structure='full' needs a {view.network.n_parameters}^2 covariance; it is "
                f"limited to {MAX_FULL_PARAMETERS} parameters: use 'kron' or 'diag'."
            )
        X = check_features(self, X, reset=True)  # 2-D, rows; n_features_in_ recorded
        view.check_feature_names(X)
        if X_val is not None:  # read by position too: its columns must be X's
            _check_validation_columns(self, X_val)
        Xt = view.transform(X)
        target = self._target(view, y, Xt.shape[0])
        Xv: NDArray | None
        target_val: NDArray | None
        if X_val is None and y_val is not None:
            raise ValueError("`X_val` is required with `y_val`.")
        if X_val is not None:
            if y_val is None:
                raise ValueError("`y_val` is required with `X_val`.")
            Xv, target_val = self._validation_rows(view, X_val, y_val)
        elif isinstance(prior, str) and prior == "auto":
            rng = check_random_state(_legacy_seed(self.random_state))
            order = rng.permutation(Xt.shape[0])
            n_val = max(1, round(self.validation_fraction * Xt.shape[0]))
            if Xt.shape[0] - n_val < 2:
                raise ValueError("too few rows to hold out validation data for 'auto'.")
            val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
            Xv, target_val, Xt, target = Xt[val], target[val], Xt[train], target[train]
        else:
            Xv = target_val = None
        self.view_ = view
        self.network_ = view.network
        self.n_parameters_ = view.network.n_parameters
        self.mean_ = view.network.parameters()
        self.task_ = view.task
        # classification only: a regressor has no classes_ (hasattr says so)
        if view.classes is not None:
            self.classes_ = view.classes
        else:
            self.__dict__.pop("classes_", None)
        if view.task == "regression":
            rows, t = (Xv, target_val) if Xv is not None else (Xt, target)
            assert t is not None  # target_val is set with Xv
            residual = t - view.network.forward(rows)[:, 0]
            # before the training-rows check, which squares the residuals too
            names = ("y", "X") if X_val is None else ("y_val", "X_val")
            network_noise = checked_noise_variance(residual, t, *names)
            noise_X, noise_y = (X, y) if X_val is None else (X_val, y_val)
            if lbfgs_training_loss(view, noise_X, noise_y) is not None:
                warn_user(
                    f"The noise variance comes from the network's training rows "
                    f"({'`X`, without `X_val`' if X_val is None else '`X_val`'}): its "
                    "residuals there are smaller than on new data, so noise_variance_ and "
                    "the intervals built on it come out too small. Pass rows held out from "
                    "its training as X_val, y_val.",
                    UserWarning,
                )
            self._set_noise(view, network_noise)
        else:  # regression only (a refit of a posterior fitted on a regressor)
            for name in ("noise_variance_", "_network_noise_variance"):
                self.__dict__.pop(name, None)
        self._curvature(view, Xt)
        self.prior_grid_nll_ = None
        self.prior_precision_: float | NDArray
        if isinstance(prior, str) and prior == "marglik":
            self.prior_precision_ = self._marglik()
        elif isinstance(prior, str):
            # "auto": validation rows given or held out above
            assert Xv is not None and target_val is not None
            self.prior_precision_ = self._tune(Xv, target_val)
        else:
            self.prior_precision_ = prior if isinstance(prior, np.ndarray) else float(prior)
        # a per-parameter prior does not share the GGN's eigenvectors: decompose it once
        self._prior_eig: tuple[NDArray, NDArray] | None = (
            eigh(self.curvature_ + np.diag(self.prior_precision_))
            if isinstance(self.prior_precision_, np.ndarray) and self.structure == "full"
            else None
        )
        record_calibration_settings(self, step="fit")
        return self

    @classmethod
    def from_variance(
        cls, estimator: Any, variance: ArrayLike, X_val: Any = None, y_val: Any = None
    ) -> LaplacePosterior:
        """A fitted diagonal posterior with the given variances (e.g. from another library).

        Parameters
        ----------
        estimator : fitted MLPRegressor or MLPClassifier, or a torch ``nn.Sequential``
            Also a fitted ``TransformedTargetRegressor`` with ``transformer=StandardScaler()``
            (``y_val`` then in the units of ``y``), or a torch regression network (the
            layers listed in the constructor), as in the constructor.
        variance : array-like of shape (n_parameters,)
            Positive posterior variances in the order of `Network.parameters` (per layer
            ``coefs_[l].ravel()`` then ``intercepts_[l]``).
        X_val, y_val : array-like, optional
            Regression: rows whose mean squared residual sets ``noise_variance_`` (given
            together).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.neural_network import MLPRegressor
        >>> X = np.linspace(0, 1, 20)[:, None]
        >>> net = MLPRegressor(hidden_layer_sizes=(3,), max_iter=50, random_state=0)
        >>> net = net.fit(X, X[:, 0])
        >>> post = LaplacePosterior.from_variance(net, np.full(10, 0.01))
        >>> float(post.variance()[0])
        0.01
        """
        view = as_network(estimator)
        P = view.network.n_parameters
        what = "the posterior variances (`variance`; an array `posterior` of LinearizedPredictive)"
        values = real_values(variance)
        if values is None:
            raise ValueError(f"{what} must be numbers, got {variance!r:.80}.")
        if values.shape != (P,):
            raise ValueError(
                f"{what} have shape {values.shape}, but must be 1-D with one entry per "
                f"parameter of the network, ({P},) (per layer coefs_[l].ravel() then "
                "intercepts_[l])."
            )
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            raise ValueError(
                f"{what} must be finite and positive: {int(bad.sum())} of {P} are not "
                f"(e.g. entry {int(np.flatnonzero(bad)[0])}: {float(values[bad][0])!r})."
            )
        post = cls(estimator, structure="diag", prior_precision=1.0)
        post.view_ = view
        post.network_ = view.network
        post.n_parameters_ = P
        post.mean_ = view.network.parameters()
        post.task_ = view.task
        # classification only: a regressor has no classes_ (hasattr says so)
        if view.classes is not None:
            post.classes_ = view.classes
        else:
            post.__dict__.pop("classes_", None)
        post.curvature_ = 1.0 / values
        post.prior_precision_ = 0.0
        post.prior_grid_nll_ = None
        if (X_val is None) != (y_val is None):
            raise ValueError("`X_val` and `y_val` must be given together.")
        if view.task != "regression" and X_val is not None:
            raise ValueError(
                "`X_val` and `y_val` estimate a regressor's noise; a classifier has none: "
                "drop them."
            )
        if view.task == "regression":
            if X_val is not None:
                Xv, target = post._validation_rows(view, X_val, y_val)
                residual = target - view.network.forward(Xv)[:, 0]
                post._set_noise(view, checked_noise_variance(residual, target, "y_val", "X_val"))
            else:
                post._set_noise(view, 1.0 / view.target_scale**2)  # 1.0 in the units of y
        record_calibration_settings(post, step="fit")  # a diagonal posterior, as fit's
        return post

    def _set_noise(self, view: NetworkView, network_variance: float) -> None:
        """Keep the noise variance on the network's scale (for the GGN and the tuning) and
        report it in the units of ``y``."""
        self._network_noise_variance = network_variance
        self.noise_variance_ = network_variance * view.target_scale**2

    def _target(
        self, view: NetworkView, y: Any, n: int, name: str = "y", rows_of: str = "X"
    ) -> NDArray:
        if view.task == "regression":  # on the network's (standardised) scale
            return view.network_target(check_regression_target(y, n, name, rows_of))
        assert view.classes is not None  # a classifier's view has its classes
        return _encode_labels(y, view.classes, n, name, rows_of)

    def _validation_rows(
        self, view: NetworkView, X_val: Any, y_val: Any
    ) -> tuple[NDArray, NDArray]:
        """The network input and targets of the validation rows, errors naming `X_val` and
        `y_val`."""
        Xv = _naming_x_val_in(lambda: view.transform(X_val))
        return Xv, self._target(view, y_val, Xv.shape[0], "y_val", "`X_val`")

    def _root_terms(
        self, view: NetworkView, Xt: NDArray, J: NDArray
    ) -> tuple[NDArray, NDArray | None]:
        """``(R, u)`` with ``J_n' H_n J_n = sum_k R_kn' R_kn - u_n' u_n`` (H: output Hessian).

        Regression: ``R = J / sigma``; binary: ``R = sqrt(p (1 - p)) J``; softmax:
        ``R_k = sqrt(p_k) J_k`` and ``u = sum_k p_k J_k`` (``H = diag p - p p'``).
        """
        w, v = self._output_hessian_roots(view, view.network.forward(Xt))  # (n, K)
        rank_one = None if v is None else np.einsum("nk,knp->np", v, J)
        return w.T[:, :, None] * J, rank_one

    def _output_hessian_roots(
        self, view: NetworkView, f: NDArray
    ) -> tuple[NDArray, NDArray | None]:
        """``(w, v)`` with the output Hessian of each row ``H_n = diag(w_n**2) - v_n v_n'``
        (``v`` None: no rank-one term), from the network's outputs ``f (n, K)``.

        The factors of `_root_terms` before the Jacobian: regression ``w = 1 / sigma``;
        binary ``w = sqrt(p (1 - p))``; softmax ``w = sqrt(p)`` and ``v = p``.
        """
        if view.task == "regression":
            return np.full(f.shape, 1.0 / np.sqrt(self._network_noise_variance)), None
        if view.network.output == "logistic":
            p = special.expit(f)  # (no overflow warning for very negative logits)
            return np.sqrt(p * (1.0 - p)), None
        p = np.exp(log_probabilities(f, "softmax"))  # (n, K)
        return np.sqrt(p), p

    def _curvature(self, view: NetworkView, Xt: NDArray) -> None:
        """The GGN of the structure on the rows ``Xt``, into ``curvature_`` (then
        decomposed): back-propagated output gradients for a scikit-learn network and the
        structures ``"diag"``, ``"kron"`` and ``"last_layer"``, whole Jacobians otherwise."""
        if self.structure != "full" and not _is_torch_module(view.model):
            self.curvature_ = _backprop_curvature(
                view.network, Xt, self.structure, lambda f: self._output_hessian_roots(view, f)
            )
            self._decompose()
            return
        self._jacobian_curvature(view, Xt)

    def _jacobian_curvature(self, view: NetworkView, Xt: NDArray) -> None:
        """`_curvature` from the whole per-output Jacobians (`output_jacobians`): for
        ``"full"`` and torch networks."""
        network = view.network
        slices = network.parameter_slices()
        structure = self.structure
        P = network.n_parameters
        if structure == "diag":
            curvature: Any = np.zeros(P)
        elif structure == "full":
            curvature = np.zeros((P, P))
        elif structure == "last_layer":
            size = slices[-1].stop - slices[-1].start
            curvature = np.zeros((size, size))
        else:
            curvature = [
                [np.zeros((d.n_in + 1, d.n_in + 1)), np.zeros((d.n_out, d.n_out))]
                for d in network.dense_layers
            ]
        offset = 0
        for J in output_jacobians(view, Xt):
            rows = slice(offset, offset + J.shape[1])
            offset = rows.stop
            positive, negative = self._root_terms(view, Xt[rows], J)
            if structure == "diag":
                curvature += np.einsum("knp,knp->p", positive, positive)
                if negative is not None:
                    curvature -= np.einsum("np,np->p", negative, negative)
            elif structure in ("full", "last_layer"):
                part = slice(None) if structure == "full" else slices[-1]
                flat = positive[:, :, part].reshape(-1, curvature.shape[0])
                curvature += flat.T @ flat
                if negative is not None:
                    curvature -= negative[:, part].T @ negative[:, part]
            else:
                inputs = Xt[rows]
                dense_index = 0
                for layer in network.layers:
                    if not hasattr(layer, "weight"):
                        inputs = layer.forward(inputs)
                        continue
                    d = layer
                    augmented = np.hstack([inputs, np.ones((inputs.shape[0], 1))])
                    bias = slice(
                        slices[dense_index].start + d.weight.size, slices[dense_index].stop
                    )
                    A, B = curvature[dense_index]
                    A += augmented.T @ augmented
                    B += np.einsum("knp,knq->pq", positive[:, :, bias], positive[:, :, bias])
                    if negative is not None:
                        B -= negative[:, bias].T @ negative[:, bias]
                    inputs = d.forward(inputs)
                    dense_index += 1
        if structure == "kron":
            n = max(Xt.shape[0], 1)
            for factors in curvature:
                factors[0] /= n
        self.curvature_ = curvature
        self._decompose()

    def _decompose(self) -> None:
        """Eigendecompositions reused for every prior precision."""
        if self.structure in ("full", "last_layer"):
            values, vectors = eigh(self.curvature_)
            # (values, vectors); for "kron" a list of per-layer factor eigensystems
            self._eig: Any = (np.maximum(values, 0.0), vectors)
        elif self.structure == "kron":
            eig = []
            for A, B in self.curvature_:
                a_val, a_vec = eigh(A)
                b_val, b_vec = eigh(B)
                a_val, b_val = np.maximum(a_val, 0.0), np.maximum(b_val, 0.0)
                mean_a, mean_b = a_val.mean(), b_val.mean()
                balance = np.sqrt(mean_a / mean_b) if mean_a > 0 and mean_b > 0 else 1.0
                eig.append((a_val, a_vec, b_val, b_vec, balance))
            self._eig = eig

    # ---- prior precision -------------------------------------------------------------------
    def _log_det_and_count(self, delta: float) -> tuple[float, int, NDArray]:
        """``log det(GGN + delta)``, the number of parameters and the parameters covered."""
        if self.structure == "diag":
            return float(np.sum(np.log(self.curvature_ + delta))), self.n_parameters_, self.mean_
        if self.structure == "full":
            return float(np.sum(np.log(self._eig[0] + delta))), self.n_parameters_, self.mean_
        if self.structure == "last_layer":
            last = self.network_.parameter_slices()[-1]
            return (
                float(np.sum(np.log(self._eig[0] + delta))),
                last.stop - last.start,
                (self.mean_[last]),
            )
        total, root = 0.0, np.sqrt(delta)
        for a_val, _, b_val, _, balance in self._eig:
            # eigenvalues of (A + balance root) kron (B + root / balance): products
            total += b_val.size * float(np.sum(np.log(a_val + balance * root)))
            total += a_val.size * float(np.sum(np.log(b_val + root / balance)))
        return total, self.n_parameters_, self.mean_

    def log_marginal_likelihood(self, prior_precision: float | None = None) -> float:
        """Laplace approximation of the log marginal likelihood, up to a constant.

        ``-0.5 delta |theta|^2 + 0.5 P log delta - 0.5 log det(H)`` plus the
        log-likelihood at the trained weights (constant in ``delta``, left out), with ``H``
        the posterior precision of the structure: ``GGN + delta`` restricted to its blocks
        (``diag``, ``full``, ``last_layer``), and for ``kron`` the damped Kronecker factors'
        product ``(A + b sqrt(delta)) x (G + sqrt(delta) / b)`` per layer (``b`` balances the
        factors' scales), whose determinant differs from that of ``GGN + delta``.

        Parameters
        ----------
        prior_precision : float, optional
            A finite number > 0. Defaults to the fitted ``prior_precision_`` (a scalar).

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If the precision is not a finite number > 0 (or, by default, if the fitted one is
            an array, or 0 for a posterior built by `from_variance`).
        """
        check_wrapper_fitted(self, "curvature_", "log_marginal_likelihood")
        check_calibration_settings(self, "log_marginal_likelihood", step="fit", again="fit(X, y)")
        delta = self.prior_precision_ if prior_precision is None else prior_precision
        if np.ndim(delta) != 0:
            raise ValueError("log_marginal_likelihood needs a scalar prior precision.")
        if isinstance(delta, np.ndarray):
            delta = delta.item()
        if prior_precision is None and not delta > 0:
            raise ValueError(
                f"the fitted prior_precision_ is {delta!r} (a posterior from `from_variance` "
                "has no prior): pass `prior_precision`."
            )
        delta = check_positive_float(delta, "prior_precision")
        log_det, count, theta = self._log_det_and_count(delta)
        return float(-0.5 * delta * theta @ theta + 0.5 * count * np.log(delta) - 0.5 * log_det)

    def _marglik(self) -> float:
        result = minimize_scalar(
            lambda log_delta: -self.log_marginal_likelihood(float(np.exp(log_delta))),
            bounds=(np.log(1e-6), np.log(1e8)),
            method="bounded",
        )
        return float(np.exp(result.x))

    def _tune(self, Xv: NDArray, target: NDArray) -> float:
        # the one-pass predictive the posterior is used with: a Kronecker posterior
        # correlates the units of a layer, so its moments propagate full covariances. A
        # "full" posterior also correlates the layers, which the single pass drops (it can
        # overstate the variance many times): it is tuned on the linearised (GLM)
        # predictive, exact for it, from one set of Jacobians projected on the GGN's
        # eigenvectors.
        if self.structure == "full":
            values, vectors = self._eig
            glm_mean = self.network_.forward(Xv)
            squared = (
                np.concatenate([J @ vectors for J in output_jacobians(self.view_, Xv)], axis=1)
                ** 2
            )  # (K, n, P)

            def moments(delta: float) -> tuple[NDArray, NDArray]:
                return glm_mean, np.einsum("knr,r->nk", squared, 1.0 / (values + delta))

        else:
            covariance = "full" if self.structure == "kron" else "diag"

            def moments(delta: float) -> tuple[NDArray, NDArray]:
                return self.network_.moments(Xv, self.blocks(), covariance=covariance)

        nll = np.empty(PRIOR_GRID.size)
        for index, delta in enumerate(PRIOR_GRID):  # a loop over the grid
            self.prior_precision_ = float(delta)  # read by blocks()
            mean, var = moments(float(delta))
            nll[index] = -np.mean(self._log_likelihood(mean, var, target))
        # the density of y is that of the network's z divided by the target scale
        self.prior_grid_nll_ = nll + np.log(self.view_.target_scale)
        best = int(np.nanargmin(nll))
        if best == 0 and self._smallest_curvature() < PRIOR_GRID[0]:
            # (where every direction is pinned by the data the weakest prior changes nothing)
            warn_user(
                f"prior_precision='auto' chose the weakest prior of its grid "
                f"({PRIOR_GRID[0]:g}): the validation NLL still fell at the grid's edge. "
                "Directions the training rows leave unconstrained (hidden units that never "
                f"fire on them) then get a variance of scale / {PRIOR_GRID[0]:g}, and rows "
                "that reach them very wide intervals. Pass a fixed prior_precision (e.g. "
                "0.1), or 'marglik'.",
                UserWarning,
            )
        return float(PRIOR_GRID[best])

    def _smallest_curvature(self) -> float:
        """The smallest eigenvalue of the GGN approximation (per-layer factor products for
        "kron"): directions below the prior precision are the prior's alone."""
        if self.structure == "diag":
            return float(np.min(self.curvature_))
        if self.structure == "kron":
            return min(float(a.min() * b.min()) for a, _, b, _, _ in self._eig)
        return float(np.min(self._eig[0]))

    def _log_likelihood(self, mean: NDArray, var: NDArray, target: NDArray) -> NDArray:
        """Per-row log-likelihood of the one-pass (probit) predictive, on the network's scale
        (``target``, ``mean`` and ``var`` of ``z`` for a transformed target)."""
        if self.task_ == "regression":
            noise = self._network_noise_variance
            return gaussian_log_density(target, mean[:, 0], var[:, 0] + noise)
        log_p = log_probabilities(probit_logits(mean, var), self.network_.output)
        return log_p[np.arange(target.size), target]

    # ---- the posterior ----------------------------------------------------------------------
    def _check(self, method: str, scale: float = 1.0) -> float:
        """Fitted, with the structure it was fitted with? Return ``scale`` checked."""
        check_wrapper_fitted(self, "prior_precision_", method)
        check_calibration_settings(self, method, step="fit", again="fit(X, y)")
        return check_positive_float(scale, "scale")

    def _kron_factors(self, scale: float) -> list[tuple[NDArray, NDArray]]:
        """Per layer ``(A, B)`` with ``Cov(vec [W; b]) = A kron B`` (row-major vec)."""
        root = np.sqrt(float(self.prior_precision_))
        factors = []
        for a_val, a_vec, b_val, b_vec, balance in self._eig:
            A = (a_vec / (a_val + balance * root)) @ a_vec.T
            B = (b_vec / (b_val + root / balance)) @ b_vec.T
            factors.append((scale * A, B))
        return factors

    def _dense_eig(self, scale: float) -> tuple[NDArray, NDArray]:
        """``(d, Q)`` with covariance ``Q diag(d) Q'`` for "full" / "last_layer"."""
        values, vectors = self._eig
        delta = self.prior_precision_
        if np.ndim(delta) == 0:
            return scale / (values + delta), vectors
        decomposed = self.__dict__.get("_prior_eig")  # GGN + diag(delta), at fit
        if decomposed is None:  # a posterior pickled before it was kept
            decomposed = eigh(self.curvature_ + np.diag(delta))
        values, vectors = decomposed
        return scale / values, vectors

    def variance(self, scale: float = 1.0) -> NDArray:
        """Marginal posterior variance of every parameter ``(P,)`` (``scale`` times).

        Parameters outside the last layer have variance 0 for ``"last_layer"``.

        Parameters
        ----------
        scale : float, default=1.0
            Factor (> 0) on the posterior covariance.

        Returns
        -------
        ndarray of shape (n_parameters,)
            In the parameter order of `Network.parameters`.
        """
        return self._variance(self._check("variance", scale))

    def _variance(self, scale: float) -> NDArray:
        """`variance` at a checked ``scale`` of a checked posterior."""
        if self.structure == "diag":
            return scale / (self.curvature_ + self.prior_precision_)
        if self.structure == "kron":
            return np.concatenate(
                [np.outer(np.diag(A), np.diag(B)).ravel() for A, B in self._kron_factors(scale)]
            )
        d, Q = self._dense_eig(scale)
        local = np.einsum("pk,k,pk->p", Q, d, Q)
        if self.structure == "full":
            return local
        out = np.zeros(self.n_parameters_)
        out[self.network_.parameter_slices()[-1]] = local
        return out

    def blocks(self, scale: float = 1.0) -> list[Any]:
        """One posterior block per Dense layer, for `Network.moments` (layers independent).

        ``"full"`` keeps each layer's own covariance block and drops the covariances between
        layers (the single-pass predictive assumes independent layers).

        Parameters
        ----------
        scale : float, default=1.0
            Factor (> 0) on the posterior covariance.

        Returns
        -------
        list of length n_dense_layers
            `DiagonalBlock` (``"diag"``), `KroneckerBlock` (``"kron"``) or `FullBlock`
            (``"full"``) per Dense layer, in order; for ``"last_layer"`` None (fixed
            weights) for every layer but the last, a `FullBlock`.
        """
        return self._blocks(self._check("blocks", scale))

    def _blocks(self, scale: float) -> list[Any]:
        """`blocks` at a checked ``scale`` of a checked posterior (`LinearizedPredictive`
        checks its posterior's settings at each prediction, through its own)."""
        network = self.network_
        dense = network.dense_layers
        slices = network.parameter_slices()
        if self.structure == "diag":
            var = self._variance(scale)
            return [
                DiagonalBlock(
                    var[s][: d.weight.size].reshape(d.weight.shape), var[s][d.weight.size :]
                )
                for d, s in zip(dense, slices, strict=True)
            ]
        if self.structure == "kron":
            return [KroneckerBlock(A, B) for A, B in self._kron_factors(scale)]
        d_val, Q = self._dense_eig(scale)
        blocks: list[Any] = [None] * len(dense)
        layers = range(len(dense)) if self.structure == "full" else [len(dense) - 1]
        for index in layers:
            layer = dense[index]
            rows = Q[slices[index]] if self.structure == "full" else Q
            cov = (rows * d_val) @ rows.T
            shape = (layer.n_in + 1, layer.n_out)
            blocks[index] = FullBlock(cov.reshape(*shape, *shape))
        return blocks

    def sample(self, n_samples: int, random_state: Any = None, scale: float = 1.0) -> NDArray:
        """Parameter vectors drawn from the posterior, ``(n_samples, P)``.

        Parameters
        ----------
        n_samples : int
            Number of draws.
        random_state : int, Generator or None, default=None
            Seed of the draws (None: fresh ones at every call).
        scale : float, default=1.0
            Factor (> 0) on the posterior covariance.

        Returns
        -------
        ndarray of shape (n_samples, n_parameters)
            Gaussian draws around the network's own weights (``mean_``), in the parameter
            order of `Network.parameters` (for ``"last_layer"`` the other layers keep them).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.neural_network import MLPClassifier
        >>> from sklearn.datasets import load_iris
        >>> X, y = load_iris(return_X_y=True)
        >>> net = MLPClassifier(hidden_layer_sizes=(5,), max_iter=3000, random_state=0).fit(X, y)
        >>> post = LaplacePosterior(net, prior_precision=10.0).fit(X, y)
        >>> post.sample(3, random_state=0).shape
        (3, 43)
        """
        scale = self._check("sample", scale)
        n_samples = check_int(n_samples, "n_samples")
        rng = random_generator(random_state)
        return next(self._sample_blocks(n_samples, rng, scale, max(1, n_samples)))

    def _sample_blocks(
        self, n_samples: int, rng: np.random.Generator, scale: float, block: int
    ) -> Iterator[NDArray]:
        """`sample`'s draws of a checked posterior in blocks of at most ``block`` rows
        ``(rows, P)``, in turn from ``rng``: stacked, the blocks are the draws of one call
        (the standard normals are taken from the stream in the same order), to rounding of
        the products by the covariance roots (none for ``"diag"`` and ``"kron"``, whose
        products are per draw), computed once for every block.
        """
        P = self.n_parameters_
        structure = self.structure
        if structure == "diag":
            std = np.sqrt(self._variance(scale))
        elif structure == "kron":
            roots = [(_sqrt_psd(A), _sqrt_psd(B)) for A, B in self._kron_factors(scale)]
        else:
            d_val, Q = self._dense_eig(scale)
            root = np.sqrt(d_val)
        for start in range(0, n_samples, block):
            noise = rng.standard_normal((min(block, n_samples - start), P))
            if structure == "diag":
                yield self.mean_ + noise * std
                continue
            if structure == "kron":
                out = np.empty_like(noise)
                for (LA, LB), part, layer in zip(
                    roots,
                    self.network_.parameter_slices(),
                    self.network_.dense_layers,
                    strict=True,
                ):
                    E = noise[:, part].reshape(-1, layer.n_in + 1, layer.n_out)
                    out[:, part] = (LA @ E @ LB.T).reshape(E.shape[0], -1)
                yield self.mean_ + out
                continue
            # Q sqrt(d) Q' noise, the symmetric root: continuous in the covariance, so a tiny
            # change of the network cannot rotate eigenvectors inside (near-)degenerate
            # eigenspaces and redraw the sample (Q sqrt(d) noise, the eigenbasis root, could).
            draws = ((noise[:, : d_val.size] @ Q) * root) @ Q.T
            if structure == "full":
                yield self.mean_ + draws
                continue
            out = np.tile(self.mean_, (noise.shape[0], 1))
            out[:, self.network_.parameter_slices()[-1]] += draws
            yield out

    def output_variance(self, jacobians: ArrayLike, scale: float = 1.0) -> NDArray:
        """``diag(J Sigma J')`` per row and output, from Jacobians ``(K, n, P)``: ``(n, K)``.

        The variance of the linearised (GLM) predictive.

        Parameters
        ----------
        jacobians : array-like of shape (K, n_samples, n_parameters)
            Finite Jacobians with respect to all the network's parameters, in the order of
            `Network.parameters` (the full ``n_parameters`` also for ``"last_layer"``); ``K``
            is usually the network's number of outputs (as yielded by
            `uqconform.bayes.convert.output_jacobians`).
        scale : float, default=1.0
            Factor on the posterior covariance.

        Returns
        -------
        ndarray of shape (n_samples, K)
            Infinite (or NaN) where finite Jacobians of extreme size overflow float64, without
            numpy's overflow warnings: the predictives refuse such rows, naming them.

        Raises
        ------
        ValueError
            If ``jacobians`` is not numeric, not 3-D, has another number of parameters or holds
            NaN or infinity.
        """
        scale = self._check("output_variance", scale)
        expected = f"(K, n_samples, n_parameters) = (K, n_samples, {self.n_parameters_})"
        try:
            jacobians = np.asarray(jacobians, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"`jacobians` must be a numeric array of shape {expected}.") from None
        if jacobians.ndim != 3 or jacobians.shape[2] != self.n_parameters_:
            raise ValueError(
                f"`jacobians` must have shape {expected} for this posterior, got "
                f"{jacobians.shape}."
            )
        if not np.all(np.isfinite(jacobians)):
            raise ValueError("`jacobians` contains NaN or infinite values.")
        with np.errstate(over="ignore", invalid="ignore"):  # refused by the predictives
            return self._output_variance(jacobians, scale)

    def _output_variance(self, jacobians: NDArray, scale: float) -> NDArray:
        """`output_variance` of checked Jacobians."""
        K, n, _P = jacobians.shape
        if self.structure == "diag":
            return np.einsum("knp,p->nk", jacobians**2, self._variance(scale))
        if self.structure == "kron":
            out = np.zeros((n, K))
            for (A, B), part, layer in zip(
                self._kron_factors(scale),
                self.network_.parameter_slices(),
                self.network_.dense_layers,
                strict=True,
            ):
                Jl = jacobians[:, :, part].reshape(K, n, layer.n_in + 1, layer.n_out)
                out += np.einsum("knio,ij,knjp,op->nk", Jl, A, Jl, B, optimize=True)
            return out
        d_val, Q = self._dense_eig(scale)
        if self.structure == "last_layer":
            jacobians = jacobians[:, :, self.network_.parameter_slices()[-1]]
        projected = jacobians @ Q  # (K, n, r)
        return np.einsum("knr,r->nk", projected**2, d_val)


#: Cells (float64) of the per-block arrays of `_backprop_curvature`: about 32 MB each.
CURVATURE_BLOCK_CELLS = 2**22


def _backprop_curvature(
    network: Network,
    Xt: NDArray,
    structure: str,
    roots: Callable[[NDArray], tuple[NDArray, NDArray | None]],
) -> Any:
    """The GGN ``sum_n J_n' H_n J_n`` of a network of `Dense` and `Activation` layers for
    ``"diag"``, ``"kron"`` (``(A, B)`` per layer, ``A`` averaged over the rows) or
    ``"last_layer"``, without forming the Jacobians ``J_n`` ``(K, P)``.

    With ``H_n = sum_m s_m g_nm g_nm'`` (``g_nm`` the columns ``w_nk e_k``, sign +1, and
    ``v_n``, sign -1, of ``roots(f)``), the gradient of ``g_nm' f`` with respect to a layer's
    ``W[i, o]`` is ``a_ni d_nmo`` (``a`` the layer's input, ``d`` the gradient
    back-propagated to its output) and with respect to ``b[o]`` it is ``d_nmo``. So the
    diagonal is ``sum_n a_ni**2 sum_m s_m d_nmo**2``; the Kronecker factor ``B`` is
    ``sum_nm s_m d_nm d_nm'`` at each layer; the last layer's block is
    ``sum_n (a_n a_n') kron H_n`` (``a`` with a trailing 1 for the bias). The same sums as
    those over whole Jacobians, in another order: equal to rounding. Rows go through in
    blocks of at most `CURVATURE_BLOCK_CELLS` cells of back-propagated gradients.

    Parameters
    ----------
    network : Network
        Its layers are `Dense` and `Activation` only.
    Xt : ndarray of shape (n, n_inputs)
        The network's input rows.
    structure : {"diag", "kron", "last_layer"}
    roots : callable
        ``roots(f)`` of the outputs ``f (rows, K)`` of a block: ``(w, v)`` with the output
        Hessian ``diag(w_n**2) - v_n v_n'`` per row, ``v`` None for none.

    Returns
    -------
    ndarray or list
        ``(P,)`` for ``"diag"``; the last layer's ``(P_last, P_last)`` for
        ``"last_layer"``; per Dense layer ``[A, B]`` for ``"kron"``.
    """
    dense = network.dense_layers
    K = network.n_outputs
    widths = [d.n_in + 1 for d in dense] + [d.n_out for d in dense]
    if structure == "last_layer":
        d_last = dense[-1].n_in + 1
        cells = sum(widths) + 2 * K * K + d_last
        out: Any = np.zeros((d_last, K, d_last, K))
    else:
        cells = sum(widths) + (K + 1) * max(widths)
        if structure == "diag":
            out = [[np.zeros(d.weight.shape), np.zeros(d.n_out)] for d in dense]
        else:
            out = [
                [np.zeros((d.n_in + 1, d.n_in + 1)), np.zeros((d.n_out, d.n_out))] for d in dense
            ]
    step = max(1, CURVATURE_BLOCK_CELLS // cells)
    for start in range(0, Xt.shape[0], step):
        inputs, slopes, f = _forward_record(network, Xt[start : start + step])
        w, v = roots(f)
        if structure == "last_layer":
            a = np.hstack([inputs[-1], np.ones((f.shape[0], 1))])
            hessian = w[:, :, None] ** 2 * np.eye(K)
            if v is not None:
                hessian = hessian - v[:, :, None] * v[:, None, :]
            for o in range(K):  # a loop over output pairs, not rows
                for q in range(o, K):
                    block = (a * hessian[:, o, q, None]).T @ a
                    out[:, o, :, q] += block
                    if q != o:
                        out[:, q, :, o] += block.T
            continue
        # the roots of H as gradient seeds at the outputs: (rows, M, K), M = K (+ 1)
        seeds = w[:, :, None] * np.eye(K)
        if v is not None:
            seeds = np.concatenate([seeds, v[:, None, :]], axis=1)
        grad = seeds
        for index in range(len(dense) - 1, -1, -1):
            positive = grad[:, :K]
            negative = grad[:, K] if v is not None else None
            a = inputs[index]
            if structure == "diag":
                squares = np.einsum("nmo,nmo->no", positive, positive)
                if negative is not None:
                    squares -= negative**2
                out[index][0] += (a * a).T @ squares
                out[index][1] += squares.sum(axis=0)
            else:
                augmented = np.hstack([a, np.ones((a.shape[0], 1))])
                out[index][0] += augmented.T @ augmented
                flat = positive.reshape(-1, positive.shape[2])
                out[index][1] += flat.T @ flat
                if negative is not None:
                    out[index][1] -= negative.T @ negative
            if index:  # to the previous Dense layer's output
                # one 2-D product (a 3-D one makes a BLAS call per row, each waking its
                # threads: 5-60 times slower on a busy machine)
                back = grad.reshape(-1, grad.shape[2]) @ dense[index].weight.T
                grad = back.reshape(*grad.shape[:2], -1) * slopes[index - 1][:, None, :]
    if structure == "last_layer":
        size = d_last * K
        return out.reshape(size, size)
    if structure == "diag":
        return np.concatenate([np.r_[W.ravel(), b] for W, b in out])
    n = max(Xt.shape[0], 1)
    for factors in out:
        factors[0] /= n
    return out


def _forward_record(network: Network, X: NDArray) -> tuple[list[NDArray], list[NDArray], NDArray]:
    """``(inputs, slopes, f)``: the input of every Dense layer, the product of the
    activation slopes between Dense layer ``l`` and the next (``slopes[l]``, the units of
    layer ``l``'s output) and the network's outputs ``f``, for the rows ``X``."""
    inputs: list[NDArray] = []
    slopes: list[NDArray] = []
    a = X
    for layer in network.layers:
        if isinstance(layer, Dense):
            inputs.append(a)
            a = layer.forward(a)
            slopes.append(np.ones_like(a))
        elif isinstance(layer, Activation):
            a, slope = layer.value_and_slope(a)
            if slopes:
                slopes[-1] = slopes[-1] * slope
            else:  # an activation before the first Dense layer acts on the inputs
                raise TypeError("the GGN needs a network that starts with a Dense layer.")
        else:
            raise TypeError(
                f"the back-propagated GGN needs Dense and Activation layers, got {layer!r}."
            )
    return inputs, slopes, a


def _sqrt_psd(M: NDArray) -> NDArray:
    """The symmetric square root ``V sqrt(L) V'`` of a symmetric PSD matrix ``M = V L V'``.

    Unlike the eigenbasis root ``V sqrt(L)``, it is continuous in ``M``: eigenvectors that rotate
    freely inside a (near-)degenerate eigenspace leave it unchanged, so draws made with it move
    only a little when ``M`` moves a little.
    """
    values, vectors = np.linalg.eigh(M)
    return (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def _legacy_seed(random_state: Any) -> Any:
    """An int (or None / RandomState) accepted by ``check_random_state``."""
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31))
    return random_state
