"""BinCP: conformal sets robust to l2 input perturbations, with one binary certificate.

Randomised smoothing looks at a classifier through Gaussian noise: every input ``x`` is
replaced by ``m`` noisy copies ``x + eps_j``, ``eps_j ~ N(0, sigma^2 I)``. For any bounded
function ``f`` of the input, ``Phi^{-1}(E_eps f(x + eps))`` moves by at most ``||delta|| / sigma``
when ``x`` moves by ``delta`` (Cohen et al., 2019; Salman et al., 2019). BinCP (Zargarbashi and
Bojchevski, ICLR 2025) applies this to an *indicator* ``1{s(x + eps, y) >= t}`` of the
conformity score ``s`` (higher is better), so one probability ``p`` is certified once:

* ``mode="p"``: per calibration row, ``lambda_i`` is the largest threshold that a fraction
  ``p`` of its noisy scores reach; ``t`` is the conformal (lower) quantile of the
  ``lambda_i``. A clean test point then has ``P_eps[s >= t] >= p_cons``, the Clopper-Pearson
  *lower* bound of ``p`` from ``m`` samples, and after a perturbation of norm ``r`` at least
  ``p_r = Phi(Phi^{-1}(p_cons) - r / sigma)``.
* ``mode="tau"``: ``t = tau`` is fixed; the calibration score is the Clopper-Pearson *lower*
  bound of the fraction of noisy scores ``>= tau``, and ``p*`` is their conformal quantile.

At test time a label stays in the set when the Clopper-Pearson *upper* bound of its fraction of
noisy scores ``>= t`` reaches ``p_r``. Both bounds err towards inclusion; swapping them breaks
coverage. Each bound holds with probability ``1 - eta / (n_calibration + n_classes)`` (a union
bound, the paper's bookkeeping) and the conformal quantile is taken at ``alpha - eta``, so
the sets cover the true label with probability at least ``1 - alpha`` for *every* perturbation
of l2 norm at most ``radius``.

`MeanSmoothedClassifier` is the mean-bounding baseline (RSCP with a Hoeffding bound): the
same noise, the same samples, but the certified quantity is the smoothed *mean* score, whose
Monte Carlo error shrinks like ``1 / sqrt(m)``; it needs far more samples for small sets.
"""

from __future__ import annotations

import numbers
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse, stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from uqconform._rows import fit_params_rows
from uqconform._seeding import check_random_state_value, integer_seed, seeded_generator
from uqconform._validation import (
    NonFiniteOutputError,
    check_class_labels,
    check_int,
    check_nonnegative_float,
    check_positive_float,
    check_row_order,
    check_weights_row_order,
    class_probabilities,
    missing_proba_error,
    model_classes,
    model_given_hint,
    refuse_model_class,
    refuse_sparse_columns,
    value_summary,
)
from uqconform._warnings import warn_user
from uqconform.base import (
    ConformalPredictor,
    check_calibration_settings,
    check_not_retrained,
    keeps_a_frozen_model,
    keeps_state_on_error,
    record_calibration_settings,
    remember_calibration_rows,
    remember_training_rows,
)
from uqconform.classification.split import encode_labels
from uqconform.quantiles import (
    check_alpha,
    check_call_alpha,
    check_miscoverage,
    conformal_quantile,
    count_text,
    minimum_scores,
)
from uqconform.scores.classification import APSScore, ClassificationScore, LACScore

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "BinarizedSmoothedClassifier",
    "MeanSmoothedClassifier",
    "certified_probability",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
]

# Automatic batching: about this many model-input cells (rows x samples x features) per call.
_BATCH_CELLS = 2**21
_SCORES = ("tps", "aps")


# ---- the certificate and the binomial bounds ----------------------------------------------------
def certified_probability(p: ArrayLike, radius: float, sigma: float) -> NDArray:
    """Lower bound on ``P_eps[E]`` after an l2 shift of norm ``radius``, given ``P_eps[E] >= p``.

    ``Phi(Phi^{-1}(p) - radius / sigma)`` for Gaussian noise ``N(0, sigma^2 I)`` and any event
    ``E`` of the noisy input (Cohen et al., 2019). ``p <= 0`` stays 0, ``radius = 0`` returns
    ``p``.

    Parameters
    ----------
    p : float or array-like
        Probability of the event at the unperturbed input.
    radius : float
        l2 norm of the perturbation, >= 0.
    sigma : float
        Standard deviation of the smoothing noise, > 0.

    Returns
    -------
    ndarray
        The certified lower probability, same shape as ``p``.

    Examples
    --------
    >>> print(certified_probability(0.6, 0.12, 0.25).round(3))
    0.41
    >>> certified_probability(0.6, 0.0, 0.25)
    array(0.6)
    """
    shift = check_nonnegative_float(radius, "radius") / check_positive_float(sigma, "sigma")
    p = np.asarray(p, dtype=float)
    if not ((p >= 0.0) & (p <= 1.0)).all():  # NaN too
        raise ValueError(f"`p` must hold probabilities in [0, 1], got {p!r}.")
    return np.asarray(stats.norm.cdf(stats.norm.ppf(p) - shift))


def _check_binomial(successes: ArrayLike, n: ArrayLike, level: float) -> NDArray:
    """``successes`` as floats, after checking that ``n`` and ``successes`` are whole
    counts with ``0 <= successes <= n`` and ``level`` in (0, 1) (a ``ValueError`` naming
    the argument: a bound of NaN, or of 2.5 successes, helps nobody)."""
    k, trials = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    if not np.isfinite(trials).all() or (trials < 0).any() or (trials % 1 != 0).any():
        raise ValueError(f"`n` must be a whole number of trials >= 0, got {n!r}.")
    if np.isnan(k).any() or (k < 0).any() or (k > trials).any() or (k % 1 != 0).any():
        raise ValueError(
            f"`successes` must be whole counts between 0 and n={n!r}, got {successes!r}."
        )
    check_alpha(level, "level")
    return k


def clopper_pearson_lower(successes: ArrayLike, n: int, level: float) -> NDArray:
    """One-sided Clopper-Pearson lower bound: ``P[p >= bound] >= 1 - level``.

    ``Beta(level; k, n - k + 1)`` quantile, 0 when ``k = 0``.

    Parameters
    ----------
    successes : int or array-like of int
        Numbers of successes ``k``, whole counts between 0 and ``n``.
    n : int
        Number of trials, a whole number >= 0.
    level : float
        Error probability of the bound, in (0, 1).

    Returns
    -------
    ndarray
        One bound per entry of ``successes``, of its shape (0-d for a scalar).

    Raises
    ------
    ValueError
        If ``n`` or ``successes`` are not such counts, or ``level`` is not in (0, 1).

    Examples
    --------
    >>> print(clopper_pearson_lower(90, 150, 0.001 / 210).round(3))
    0.417
    >>> clopper_pearson_lower([0, 5, 10], 10, 0.05).round(3)
    array([0.   , 0.222, 0.741])
    """
    k = _check_binomial(successes, n, level)
    with np.errstate(invalid="ignore"):
        bound = stats.beta.ppf(level, np.maximum(k, 1e-300), n - k + 1)
    return np.where(k <= 0, 0.0, bound)


def clopper_pearson_upper(successes: ArrayLike, n: int, level: float) -> NDArray:
    """One-sided Clopper-Pearson upper bound: ``P[p <= bound] >= 1 - level``.

    ``Beta(1 - level; k + 1, n - k)`` quantile, 1 when ``k = n``.

    Parameters
    ----------
    successes : int or array-like of int
        Numbers of successes ``k``, whole counts between 0 and ``n``.
    n : int
        Number of trials, a whole number >= 0.
    level : float
        Error probability of the bound, in (0, 1).

    Returns
    -------
    ndarray
        One bound per entry of ``successes``, of its shape (0-d for a scalar).

    Raises
    ------
    ValueError
        If ``n`` or ``successes`` are not such counts, or ``level`` is not in (0, 1).

    Examples
    --------
    >>> print(clopper_pearson_upper(0, 150, 0.001 / 210).round(3))
    0.078
    >>> clopper_pearson_upper([0, 5, 10], 10, 0.05).round(3)
    array([0.259, 0.778, 1.   ])
    """
    k = _check_binomial(successes, n, level)
    with np.errstate(invalid="ignore"):
        bound = stats.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, bound)


def _is_real(value: Any) -> bool:
    # cast: numpy's stubs do not list numbers.Real among the ufunc inputs
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and np.isfinite(cast(float, value))
    )


class _SmoothedClassifier(ClassifierMixin, ConformalPredictor):
    """Shared machinery: noisy copies, Monte Carlo conformity scores, one certificate.

    A subclass says how calibration samples become scores and a base probability, and how
    test samples become the statistic compared with the certified probability.
    """

    _unbounded_prediction = "sets holding every class"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # noise is added to every feature: X must be dense, finite and numeric
        tags.input_tags.allow_nan = tags.input_tags.sparse = False
        tags.input_tags.categorical = tags.input_tags.string = tags.input_tags.dict = False
        return tags

    # ---- parameters --------------------------------------------------------------------------
    def _default_estimator(self) -> BaseEstimator:
        return LogisticRegression(max_iter=1000)

    def _check_single_alpha(self, hint: str = "") -> None:
        if np.ndim(self.alpha) != 0:
            raise ValueError(
                f"`alpha` must be a single float in (0, 1) for smoothed sets, got "
                f"{self.alpha!r}{hint}."
            )

    def _validate_params(self) -> None:
        refuse_model_class(self.estimator, self)
        levels = check_miscoverage(self.alpha, "alpha", owner=self)
        self._check_single_alpha(
            " (the constructor's level fixes threshold_ and max_radius_); pass several "
            "levels to a prediction call instead, predict_set(X, alpha=[...])"
        )
        check_int(self.batch_size, "batch_size", allow_none=True)
        check_random_state_value(self.random_state)
        if not _is_real(self.sigma) or self.sigma <= 0:
            raise ValueError(
                f"`sigma` (the noise standard deviation) must be a finite number > 0, "
                f"got {self.sigma!r}.{model_given_hint(self.sigma)}"
            )
        self._check_radius(self.radius, "radius")
        check_int(self.n_samples, "n_samples")
        if not _is_real(self.eta) or not 0 < self.eta < levels[0]:
            raise ValueError(
                f"`eta` (the Monte Carlo failure probability) must lie in (0, alpha) = "
                f"(0, {levels[0]}), got {self.eta!r}."
            )
        if self.conformity_score not in _SCORES:
            raise ValueError(
                f"Unknown `conformity_score` {self.conformity_score!r}: use 'tps' (the "
                "probability of the label) or 'aps' (one minus the randomised APS score)."
            )
        if not hasattr(self._estimator_or_default(), "predict_proba"):
            raise missing_proba_error(
                self._estimator_or_default(),
                "`estimator`",
                "smoothed sets need class probabilities",
            )

    @staticmethod
    def _check_radius(radius: Any, name: str) -> float:
        if not _is_real(radius) or radius < 0:
            rows = ""
            if np.ndim(radius) == 2:  # rows given where a radius goes
                rows = " (rows? certified_probability takes a radius; certified_radius takes X)"
            raise ValueError(
                f"`{name}` (the l2 norm of the perturbation to be robust to) must be a finite "
                f"number >= 0, got {value_summary(radius)}{rows}."
            )
        return float(radius)

    def _score_object(self) -> ClassificationScore:
        return LACScore() if self.conformity_score == "tps" else APSScore(randomized=True)

    @property
    def classes_(self) -> NDArray:
        """Class labels, in the column order of the sets."""
        check_is_fitted(self, "estimator_")
        return model_classes(self.estimator_)

    def _check_target(self, y, n, *, calibrating):
        # a frozen model trains nothing at fit: its rows may hold one class
        training = not calibrating and not keeps_a_frozen_model(self.estimator)
        return check_class_labels(y, n, training=training)

    def _output_columns(self) -> int:
        return len(self.classes_)

    # ---- data --------------------------------------------------------------------------------
    @staticmethod
    def _numeric(X: Any) -> NDArray:
        """X as a dense, finite float array: the noise is added in the space the model sees
        (the same rule at fit, calibrate and prediction)."""
        if sparse.issparse(X):
            raise ValueError(
                "`X` must be a dense numeric array for randomised smoothing: sparse matrices "
                "are not supported (noise is added to every feature)."
            )
        refuse_sparse_columns(X, "randomised smoothing")
        encode = (
            ": encode text or categories as numbers before the wrapper (the noise then lives "
            "in the encoded space, where `sigma` and `radius` are measured)"
        )
        try:
            return check_array(X, dtype=np.float64, ensure_all_finite=True)
        except ValueError as error:
            # scikit-learn's first line: the next ones print the whole array
            reason = str(error).split("\n", 1)[0].rstrip(".: ")
            if "NaN" in reason:
                advice = ": impute missing values first, even for a model that handles them"
            elif "infinity" in reason:
                advice = ": replace or clip the infinite values (or drop those rows) first"
            elif "could not convert" in reason:  # text that is not a number
                advice = encode
            elif "Expected 2D" in reason:  # numbers held as objects in a 1-D array
                advice = ": give one row per sample (X.reshape(-1, 1) for a single feature)"
            else:
                advice = ""
            raise ValueError(
                f"`X` must be a finite numeric array for randomised smoothing ({reason}){advice}."
            ) from None
        except TypeError as error:  # objects that are not numbers (numpy's message kept)
            reason = str(error).rstrip(".")
            raise TypeError(
                f"`X` must be numeric for randomised smoothing ({reason}){encode}."
            ) from None

    def _as_model_input(self, block: NDArray) -> Any:
        """A DataFrame with the fitted column names when the model was fitted on one."""
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            return block
        import pandas as pd

        return pd.DataFrame(block, columns=names)

    def _rng(  # type: ignore[override]  # a pair; base's _predict_batched is not used here
        self, stream: int, content: Any = None
    ) -> tuple[np.random.Generator, np.random.Generator]:
        """(noise, uniforms) generators of a stream (0: calibration, 1: prediction, 2: fit).

        Two generators so that the draws do not depend on the batch size; the draws are
        tied to the rows they serve (`uqconform._seeding.seeded_generator`), so that a fixed
        seed does not pair the same noise with every calibration set.
        """
        seed = self.random_state
        if isinstance(seed, np.random.Generator):  # two streams seeded by draws on its state
            # (not `spawn`, which reads the Generator's seed sequence and a counter instead:
            # a state restored or jumped, or a pickle under numpy 1.x, gave other noise)
            noise, uniforms = (np.random.default_rng(s) for s in seed.integers(2**63, size=(2, 2)))
            return noise, uniforms
        if seed is None:
            return np.random.default_rng(), np.random.default_rng()
        base = cast(int, integer_seed(seed))  # not None: seed is not None here
        noise, uniforms = (seeded_generator(base, (stream, k), content) for k in (0, 1))
        return noise, uniforms

    def _rows_per_batch(self, n_features: int) -> int:
        # read at each call (set_params after calibrate is allowed): checked here too
        size = check_int(self.batch_size, "batch_size", allow_none=True)
        if size is not None:
            return size
        cells = self.n_samples * max(n_features, len(self.classes_))
        return max(1, _BATCH_CELLS // max(cells, 1))

    def _noisy_scores(self, X: NDArray, rngs) -> Any:
        """Conformity scores of the noisy copies, ``(b, n_samples, n_classes)``, batch by batch.

        A generator over ``(start, stop, scores)``; the model sees ``b * n_samples`` rows per call.
        """
        noise_rng, uniform_rng = rngs
        n, d = X.shape
        m = self.n_samples
        score = self._score_object()
        step = self._rows_per_batch(d)
        for start in range(0, n, step):  # a loop over batches of rows, for bounded memory
            stop = min(start + step, n)
            block = X[start:stop]
            noisy = block[:, None, :] + self.sigma * noise_rng.standard_normal(
                (stop - start, m, d)
            )
            try:
                proba = class_probabilities(
                    self.estimator_, self._as_model_input(noisy.reshape(-1, d)), len(self.classes_)
                )
            except NonFiniteOutputError as error:  # name the row of X whose copy failed
                copies_of = start + np.arange((stop - start) * m) // m
                raise error.renumbered(copies_of, more_rows=stop < n) from None
            u = uniform_rng.random(proba.shape[0]) if score.randomized else None
            conformity = 1.0 - score.validated_scores(proba, u)  # higher is better, in [0, 1]
            yield start, stop, conformity.reshape(stop - start, m, -1)

    # ---- fit ---------------------------------------------------------------------------------
    @keeps_state_on_error
    def fit(self, X: Any, y: ArrayLike, augment: int = 0, **fit_params: Any) -> Self:
        """Fit a clone of ``estimator``, optionally on Gaussian-noise augmented copies.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric training features.
        y : array-like of shape (n_samples,)
        augment : int, default=0
            Number of noisy copies ``X + N(0, sigma^2 I)`` of every row to train on, instead
            of ``X`` itself (0: train on ``X``). A model trained under the smoothing noise
            keeps its accuracy on noisy inputs, which is what the smoothed sets need.
        **fit_params : dict
            Passed to the estimator's ``fit``; per-row arrays are repeated with the copies.
            With scikit-learn's metadata routing on, only those the model requested (see
            `uqconform.routing`).

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        check_weights_row_order(X, fit_params, y)  # the copies repeat weights by position
        check_int(augment, "augment", low=0)
        if augment and keeps_a_frozen_model(self.estimator):
            raise ValueError(
                f"`augment={augment}` asks to train on noisy copies, but `estimator` holds a "
                "FrozenEstimator, whose fit trains nothing. Pass an unfitted classifier to "
                "train under the noise, or leave `augment` at 0 to use the frozen model as "
                "it is."
            )
        if augment == 0:
            # Calibration and prediction add noise to X, so they need it dense, finite and
            # numeric; the training X is held to the same, so a mismatch shows at fit
            # (a 1-D X first gets the library's 2-D message, as on the other paths).
            self._numeric(self._validate_X(X, reset=True))
            return super().fit(X, y, **fit_params)
        self._validate_params()
        model_params = self._model_fit_params(fit_params)
        self._reset_calibration()
        X = self._validate_X(X, reset=True)
        values = self._numeric(X)
        n, d = values.shape
        y = self._check_target(y, n, calibrating=False)
        noise_rng, _ = self._rng(2, values)
        noisy = values[None] + self.sigma * noise_rng.standard_normal((augment, n, d))
        params = fit_params_rows(model_params, n, np.tile(np.arange(n), augment))
        self.estimator_ = self._make_estimator()
        self._estimator_adopted = False
        self.estimator_.fit(
            self._as_model_input(noisy.reshape(-1, d)), np.tile(y, augment), **params
        )
        remember_training_rows(self, X, y, trained=self._fit_trains_on_rows())
        record_calibration_settings(self, step="fit")
        return self

    # ---- calibration -------------------------------------------------------------------------
    def _failure_level(self, n_calibration: int) -> float:
        """Failure probability of each binomial bound: ``eta / (n_calibration + n_classes)``."""
        return float(self.eta) / (n_calibration + len(self.classes_))

    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike) -> Self:
        """Monte Carlo scores of the calibration rows and the one certified base probability.

        There is no Mondrian (``groups``) calibration: the certificate holds marginally.

        Without a prior ``fit``, a fitted ``estimator`` is used as is (never refitted).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Clean calibration features (numeric).
        y : array-like of shape (n_samples,)
            Calibration labels, all seen by the model.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        X = self._start_calibration(X)
        values = self._numeric(X)
        n = values.shape[0]
        given = self._check_target(y, n, calibrating=True)
        remember_calibration_rows(self, X, given)
        labels = encode_labels(given, self.classes_)
        level = self._failure_level(n)
        if not self._informative(np.array([self.n_samples]), level)[0]:
            minimum = self._minimum_samples(level)
            advice = (
                f"Use n_samples >= {minimum}{self._minimum_hint()}."
                if minimum is not None
                else f"No n_samples up to 2**20 is enough: use a larger eta{self._minimum_hint()}."
            )
            raise ValueError(
                f"`n_samples`={self.n_samples} is too small for eta={self.eta} with {n} "
                f"calibration points and {len(self.classes_)} classes: every set would hold "
                f"every class even at radius 0. {advice}"
            )
        scores = np.empty(n)
        for start, stop, conformity in self._noisy_scores(values, self._rng(0, values)):
            true = conformity[np.arange(stop - start), :, labels[start:stop]]  # (b, m)
            scores[start:stop] = self._calibration_statistic(true, level)
        self.conformity_scores_ = scores
        record_calibration_settings(self)
        self.n_calibration_ = n
        self.failure_level_ = level
        self._after_calibration()
        self._calibration_at_alpha("calibrate")  # refuse alpha <= eta now, not at predict
        return self

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        for name in ("failure_level_", "_calibrations"):
            self.__dict__.pop(name, None)

    # The calibration at the current ``alpha``: looked up when read, so that
    # ``set_params(alpha=...)`` after ``calibrate`` takes effect. Kept per level (a quantile
    # of every calibration score costs O(n)); a dict, filled by one assignment per level.
    def _calibration_at_alpha(self, name: str) -> tuple[float, float, float]:
        if "failure_level_" not in vars(self):
            raise AttributeError(f"{type(self).__name__} is not calibrated.")
        check_calibration_settings(self, name)  # the levels kept depend on them
        levels, scalar = self._levels(None)
        if not scalar:  # an AttributeError, so that ``hasattr`` answers False
            raise AttributeError(
                f"`{name}` is defined for a single `alpha`, got alpha={self.alpha!r}; "
                "set one level with set_params(alpha=...)."
            )
        return self._calibration_for(float(levels[0]))

    @property
    def threshold_(self) -> float:
        return self._calibration_at_alpha("threshold_")[0]

    @property
    def base_probability_(self) -> float:
        return self._calibration_at_alpha("base_probability_")[1]

    @property
    def max_radius_(self) -> float:
        return self._calibration_at_alpha("max_radius_")[2]

    def _after_calibration(self) -> None:
        """Hook for quantities fixed by the calibration size (default: nothing)."""

    def _minimum_samples(self, level: float) -> int | None:
        """Fewest samples from which every larger count (up to 2**20) lets a set leave out a
        label at radius 0, or None.

        Not the first informative count: with ``mode="p"`` the rounding of ``ceil(p m)``
        makes the test go back and forth at small counts (29 samples informative, 30 not,
        31 again).
        """
        for low, high in ((1, 2**12), (2**12, 2**20 + 1)):  # small counts first, then the rest
            m = np.arange(low, high)
            ok = self._informative(m, level)
            if ok[-1]:  # from here on the bounds only tighten
                failing = np.flatnonzero(~ok)
                return int(m[failing[-1]] + 1) if failing.size else low
        return None

    def _minimum_hint(self) -> str:
        return ""

    # ---- the certificate ---------------------------------------------------------------------
    def _calibration_for(self, alpha: float) -> tuple[float, float, float]:
        """Threshold, base probability and largest certifiable radius at level ``alpha``.

        The conformal quantile of the calibration scores is taken at ``alpha - eta``.
        """
        known = self.__dict__.setdefault("_calibrations", {})
        if alpha not in known:
            known[alpha] = self._compute_calibration(alpha)
        return known[alpha]

    def _compute_calibration(self, alpha: float) -> tuple[float, float, float]:
        spent = alpha - float(self.eta)  # the Monte Carlo failure probability is spent
        quantile = conformal_quantile(
            self.conformity_scores_, spent, kind="conformity", warn=False
        )[0]
        if np.isneginf(quantile):
            n = self.conformity_scores_.size
            warn_user(
                f"Only {n} calibration points: too few for alpha={alpha:g} (the quantile is "
                f"taken at alpha - eta = {spent:.4g}, which needs at least "
                f"{count_text(minimum_scores(spent))}), so every set holds every class.",
                UserWarning,
            )
        threshold, base = self._base_from_quantile(quantile, self.failure_level_)
        floor = float(self._smallest_statistic(self.failure_level_))  # every label reaches it
        if base <= floor:
            if np.isfinite(quantile):  # (too few points: warned above)
                warn_user(self._no_radius_message(alpha, base, floor), UserWarning)
            return threshold, base, 0.0
        return threshold, base, float(self.sigma * (stats.norm.ppf(base) - stats.norm.ppf(floor)))

    def _levels(self, alpha: float | ArrayLike | None, X: Any = None) -> tuple[NDArray, bool]:
        value = self.alpha if alpha is None else alpha
        levels = check_call_alpha(alpha, self.alpha, X)
        if (levels <= self.eta).any():
            raise ValueError(
                f"`alpha` must exceed eta={self.eta} (the Monte Carlo failure probability is "
                f"spent out of alpha), got {levels[levels <= self.eta].tolist()}."
            )
        return levels, np.ndim(value) == 0

    def certified_probability(
        self, radius: float | None = None, alpha: float | None = None
    ) -> float:
        """``p_r``: the probability a label's statistic must reach to stay in the set.

        Parameters
        ----------
        radius : float, optional
            l2 radius of the perturbation; defaults to ``radius``.
        alpha : float, optional
            Miscoverage level; defaults to ``alpha``.

        Returns
        -------
        float
        """
        self._check_calibrated("certified_probability")
        r = self._check_radius(self.radius if radius is None else radius, "radius")
        levels, scalar = self._levels(alpha)
        if not scalar:
            value = self.alpha if alpha is None else alpha
            raise ValueError(f"`alpha` must be a single float here, got {value!r}.")
        base = self._calibration_for(float(levels[0]))[1]
        return float(certified_probability(base, r, self.sigma))

    def _prepare(
        self, alpha: float | ArrayLike | None, X: Any
    ) -> tuple[list[tuple[float, float, float]], bool]:
        """The calibration of every requested level (the constructor's for ``alpha=None``)
        for the rows ``X``."""
        if alpha is None:  # as fit and calibrate refuse several levels
            self._check_single_alpha("; pass several levels as predict_set(X, alpha=[...])")
        levels, scalar = self._levels(alpha, X)
        return [self._calibration_for(float(level)) for level in levels], scalar

    def _no_radius_message(self, alpha: float, base: float, floor: float) -> str:
        """Why a calibration certifies no radius, and what to change."""
        if getattr(self, "mode", None) == "tau":  # (the mean baseline has no mode)
            remedy = (
                f"with mode='tau', tau={self.tau} is more than this model's true-label scores "
                "reach under the noise: use a smaller tau (or mode='p')"
            )
        else:
            remedy = self._no_radius_remedy()
        return (
            f"At alpha={alpha:g} the calibrated base probability p*={base:.3g} is no more "
            f"than every label reaches ({floor:.3g}): every set holds every class, at every "
            f"radius; {remedy}."
        )

    def _no_radius_remedy(self) -> str:
        return "the model is too unsure of the true labels under this noise: use a smaller sigma"

    def _warn_trivial(self, radius: float, calibrations) -> None:
        largest = min(c[2] for c in calibrations)
        if largest == 0:
            return  # calibrate said why (no radius is certified at all)
        if radius >= largest:
            warn_user(
                f"radius={radius} is at least the largest certifiable radius {largest:.4g} "
                f"for sigma={self.sigma} and n_samples={self.n_samples}: every set holds "
                "every class.",
                UserWarning,
            )

    def _statistics(self, X: Any, thresholds: list[float]) -> NDArray:
        """Test statistic of every row, label and threshold, ``(n, n_classes, k)``.

        Each row gets fresh noise (the prediction stream), shared by every threshold.
        """
        X = self._validate_X(X, reset=False)
        values = self._numeric(X)
        out = np.empty((values.shape[0], len(self.classes_), len(thresholds)))
        for start, stop, conformity in self._noisy_scores(values, self._rng(1, values)):
            for j, threshold in enumerate(thresholds):  # a loop over levels, not rows
                out[start:stop, :, j] = self._test_statistic(conformity, threshold)
        return out

    def predict_set(
        self, X: Any, alpha: float | ArrayLike | None = None, *, radius: float | None = None
    ) -> NDArray:
        """Sets that keep ``1 - alpha`` coverage under any l2 perturbation of norm ``radius``.

        ``X`` holds the (possibly perturbed) test inputs; each row gets fresh noise, drawn
        from ``random_state``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s), each above ``eta``; defaults to the constructor's ``alpha``
            (the second positional argument, as for every classifier of uqconform).
        radius : float, optional, keyword-only
            Overrides the constructor's ``radius``; no recalibration is needed.

        Returns
        -------
        ndarray of bool, shape (n_samples, n_classes) or (n_samples, n_classes, k)
            ``sets[i, j]`` is True when ``classes_[j]`` is in the set of row ``i``.
        """
        self._check_calibrated("predict_set")
        r = self._check_radius(self.radius if radius is None else radius, "radius")
        calibrations, scalar = self._prepare(alpha, X)
        self._warn_trivial(r, calibrations)
        statistic = self._statistics(X, [c[0] for c in calibrations])
        needed = certified_probability(np.array([c[1] for c in calibrations]), r, self.sigma)
        # from max_radius_ on every label is in (its floor can round a hair below `needed`)
        trivial = r >= np.array([c[2] for c in calibrations])
        sets = (statistic >= needed) | trivial
        return sets[..., 0] if scalar else sets

    def certified_radius(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        """Radius from which each label is in the set: ``(n_samples, n_classes)``.

        ``predict_set(X, radius=r)[i, j]`` is ``certified_radius(X)[i, j] <= r`` (same
        noise) for ``r`` away from the entry: at ``r`` equal to it, rounding in the
        Gaussian tail can leave the label out (a review: a fifth of such cells; one unit
        in the last place above includes it). It is 0 for the labels of the radius-0 set,
        and a row's set stays its radius-0 set for every radius below the smallest
        positive entry of its row. An entry equal to
        ``max_radius_`` (the largest it can be) means the label only enters when the sets
        are trivial.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); a sequence adds a trailing axis.

        Returns
        -------
        ndarray of float, shape (n_samples, n_classes) or (n_samples, n_classes, k)
        """
        self._check_calibrated("certified_radius")
        calibrations, scalar = self._prepare(alpha, X)
        statistic = np.clip(self._statistics(X, [c[0] for c in calibrations]), 0.0, 1.0)
        base = np.array([c[1] for c in calibrations])
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = stats.norm.ppf(base) - stats.norm.ppf(statistic)
        radii = np.where(base > 0, np.maximum(self.sigma * gap, 0.0), 0.0)
        radii = np.minimum(radii, [c[2] for c in calibrations])  # every label by max_radius_
        return radii[..., 0] if scalar else radii

    # ---- hooks -------------------------------------------------------------------------------
    @abstractmethod
    def _calibration_statistic(self, true_scores: NDArray, level: float) -> NDArray:
        """Calibration score of each row from its noisy true-label scores ``(b, m)``."""

    @abstractmethod
    def _base_from_quantile(self, quantile: float, level: float) -> tuple[float, float]:
        """Binarisation threshold and certified probability at radius 0, from the quantile."""

    @abstractmethod
    def _test_statistic(self, scores: NDArray, threshold: float) -> NDArray:
        """Upper bound per row and label from noisy scores ``(b, m, K)``, shape ``(b, K)``."""

    @abstractmethod
    def _smallest_statistic(self, level: float) -> float:
        """The smallest value the test statistic can take."""

    @abstractmethod
    def _informative(self, m: NDArray, level: float) -> NDArray:
        """Whether ``m`` samples let a set leave out a label at radius 0 (vectorised)."""

    def _check_calibrated(self, method: str) -> None:
        if "estimator_" not in vars(self):  # fit, or a fitted `estimator`, then calibrate
            raise NotFittedError(
                f"{type(self).__name__}.{method} needs a fitted model and calibration: call "
                "fit(X, y) (or pass a fitted `estimator`), then calibrate(X_calib, y_calib) "
                "on held-out clean data."
            )
        if "failure_level_" not in vars(self):
            raise NotFittedError(
                f"{type(self).__name__}.{method} needs calibration: call "
                "calibrate(X_calib, y_calib) on held-out clean data first."
            )
        check_calibration_settings(self, method, step="fit")  # the model fit trained
        check_calibration_settings(self, method)
        check_not_retrained(self, method)


class BinarizedSmoothedClassifier(_SmoothedClassifier):
    """BinCP: robust conformal sets from binarised smoothed scores and one certificate.

    The sets contain the true label with probability at least ``1 - alpha`` (over the
    calibration data, the test point and the Monte Carlo noise) for **any** perturbation of
    the test input of l2 norm at most ``radius``, for a model whose noise-free behaviour is
    arbitrary. The guarantee is marginal, like split conformal prediction; it is conservative
    on clean inputs.

    Parameters
    ----------
    estimator : classifier with predict_proba, default=None
        Any scikit-learn classifier (``None``: ``LogisticRegression(max_iter=1000)``). A fitted
        model is used as is by ``calibrate`` without ``fit``. The noise is added to the
        features it receives, so ``sigma`` and ``radius`` are in those units, and ``X`` must
        be finite and numeric (NaN is refused even when the model handles missing values:
        impute first).
    sigma : float, default=0.25
        Standard deviation of the Gaussian smoothing noise.
    n_samples : int, default=150
        Noisy copies per calibration and test row (``m``); the model sees ``m`` rows per row.
    radius : float, default=0.0
        l2 norm of the perturbations the sets must withstand; ``predict_set`` may override it.
        With 0 the method is a binarised, smoothed split conformal classifier.
    mode : {"p", "tau"}, default="p"
        ``"p"``: the fraction ``p`` is fixed and the score threshold is calibrated (the
        paper's default); ``"tau"``: the score threshold ``tau`` is fixed and the fraction is
        calibrated.
    p : float, default=0.6
        ``mode="p"``: fraction of noisy samples that must reach the threshold. Fix it
        beforehand, or choose it on data disjoint from the calibration set.
    tau : float, default=0.3
        ``mode="tau"``: the fixed threshold on the conformity score, in (0, 1].
    eta : float, default=1e-3
        Total failure probability of the Monte Carlo bounds, spent out of ``alpha``.
    conformity_score : {"tps", "aps"}, default="tps"
        ``"tps"``: the model's probability of the label. ``"aps"``: one minus the randomised
        APS score (a fresh uniform per noisy sample). Named ``conformity_score`` as in
        `SplitConformalClassifier` (a ``score`` parameter would hide scikit-learn's
        ``score(X, y)``).
    alpha : float, default=0.1
        Miscoverage level in (0, 1), larger than ``eta``.
    batch_size : int, default=None
        Rows whose ``n_samples`` noisy copies go to the model at once (``None``: automatic).
    random_state : int, Generator or None, default=None
        Seeds the noise (and APS uniforms): independent streams for augmentation,
        calibration and prediction, and the classifier trained by ``fit`` where its own
        ``random_state`` is None. Same int seed, same sets for the same call: the noise of
        a call is seeded by its whole ``X``, so a row predicted with other rows (or alone)
        gets other draws and may get another set (valid either way); a Generator is used
        as it is, each call drawing on from its state. Against an adversary who can query
        ``predict_set``, use ``None`` (fresh noise at every call): with an int seed the
        draws are a function of the input, so moving a row by a negligible amount re-draws
        its noise, and an input whose set misses the true label, once found, misses again
        when predicted the same way later (e.g. alone). A fixed seed is for reproducible
        experiments.

    Attributes
    ----------
    estimator_ : classifier
    classes_ : ndarray of shape (n_classes,)
    conformity_scores_ : ndarray of shape (n_calibration,)
        Per calibration row: ``lambda_i`` (``mode="p"``) or the lower bound of the
        fraction of noisy scores ``>= tau`` (``mode="tau"``).
    threshold_ : float
        The binarisation threshold ``t`` (calibrated in ``mode="p"``, ``tau`` otherwise),
        at the current ``alpha`` (like ``base_probability_`` and ``max_radius_``: they
        follow ``set_params(alpha=...)`` without a new calibration).
    base_probability_ : float
        The certified probability at radius 0 (``p_cons`` or ``p*``).
    failure_level_ : float
        Failure probability of each Clopper-Pearson bound, ``eta / (n_calibration + K)``.
    max_radius_ : float
        Radius from which every set holds every class.
    n_calibration_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X, y = load_iris(return_X_y=True)
    >>> rng = np.random.default_rng(0)
    >>> order = rng.permutation(len(y))
    >>> fit, cal, test = order[:50], order[50:120], order[120:]
    >>> cp = BinarizedSmoothedClassifier(sigma=0.25, radius=0.1, random_state=0)
    >>> cp = cp.fit(X[fit], y[fit], augment=4).calibrate(X[cal], y[cal])
    >>> sets = cp.predict_set(X[test])
    >>> sets.shape
    (30, 3)
    >>> print(round(cp.certified_probability(0.1), 3) < cp.base_probability_)
    True
    """

    #: Parameters the calibration depends on (changing one needs a new calibrate).
    _calibration_params = ("sigma", "n_samples", "mode", "p", "tau", "eta", "conformity_score")

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        sigma: float = 0.25,
        n_samples: int = 150,
        radius: float = 0.0,
        mode: str = "p",
        p: float = 0.6,
        tau: float = 0.3,
        eta: float = 1e-3,
        conformity_score: str = "tps",
        alpha: float = 0.1,
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.sigma = sigma
        self.n_samples = n_samples
        self.radius = radius
        self.mode = mode
        self.p = p
        self.tau = tau
        self.eta = eta
        self.conformity_score = conformity_score
        self.alpha = alpha
        self.batch_size = batch_size
        self.random_state = random_state

    def _validate_params(self) -> None:
        super()._validate_params()
        if self.mode not in ("p", "tau"):
            raise ValueError(f"`mode` must be 'p' or 'tau', got {self.mode!r}.")
        if not _is_real(self.p) or not 0 < self.p < 1:
            raise ValueError(f"`p` must lie strictly between 0 and 1, got {self.p!r}.")
        if not _is_real(self.tau) or not 0 < self.tau <= 1:
            raise ValueError(
                f"`tau` must lie in (0, 1], got {self.tau!r}: the conformity scores are "
                "probabilities, so with tau <= 0 every noisy score reaches it and with tau > 1 "
                "none does; either way every set would hold every label."
            )

    def _successes(self, m: int | NDArray) -> NDArray:
        """Samples that reach ``lambda_i`` by construction: ``ceil(p m)``."""
        return np.ceil(float(self.p) * np.asarray(m) - 1e-9)

    def _calibration_statistic(self, true_scores, level):
        m = true_scores.shape[1]
        if self.mode == "p":
            # lambda_i: the k-th largest noisy score, so at least k = ceil(p m) reach it.
            k = int(self._successes(m))
            return np.partition(true_scores, m - k, axis=1)[:, m - k]
        hits = (true_scores >= self.tau).sum(axis=1)
        return clopper_pearson_lower(hits, m, level)  # calibration: LOWER bound

    def _base_from_quantile(self, quantile, level):
        if getattr(self, "mode", None) == "tau":  # (the mean baseline has no mode)
            return float(self.tau), float(max(quantile, 0.0))
        if np.isneginf(quantile):  # too few calibration points: every label
            return float(quantile), 0.0
        m = self.n_samples
        return float(quantile), float(clopper_pearson_lower(self._successes(m), m, level))

    def _test_statistic(self, scores, threshold):
        hits = (scores >= threshold).sum(axis=1)  # (b, K)
        return clopper_pearson_upper(hits, scores.shape[1], self.failure_level_)  # UPPER

    def _smallest_statistic(self, level):
        return float(clopper_pearson_upper(0, self.n_samples, level))

    def _informative(self, m, level):
        floor = clopper_pearson_upper(0, m, level)
        if self.mode == "p":
            return clopper_pearson_lower(self._successes(m), m, level) > floor
        return clopper_pearson_lower(m, m, level) > floor

    def _minimum_hint(self) -> str:
        return " (or a larger p)" if self.mode == "p" else ""


class MeanSmoothedClassifier(_SmoothedClassifier):
    """Mean-bounding baseline (RSCP with a Hoeffding bound): certify the smoothed mean score.

    The calibration score of a row is a Hoeffding *lower* bound on the mean of its noisy
    conformity scores (in [0, 1]); the conformal quantile ``q`` of those bounds is certified
    as ``q_r = Phi(Phi^{-1}(q) - r / sigma)``, and a label stays in the set when the Hoeffding
    *upper* bound of its mean noisy score reaches ``q_r``. The same guarantee as
    `BinarizedSmoothedClassifier` with the same parameters and noise (same ``random_state``,
    same draws), but the bounds widen by ``sqrt(log(1 / level) / (2 m))`` on each side: it
    needs many more samples (``m``) for informative sets.

    Parameters
    ----------
    estimator : classifier with predict_proba, default=None
        As in `BinarizedSmoothedClassifier`.
    sigma : float, default=0.25
        Standard deviation of the Gaussian smoothing noise.
    n_samples : int, default=150
        Noisy copies per calibration and test row.
    radius : float, default=0.0
        l2 norm of the perturbations the sets must withstand; ``predict_set`` may override it.
    eta : float, default=1e-3
        Total failure probability of the Hoeffding bounds, spent out of ``alpha``.
    conformity_score : {"tps", "aps"}, default="tps"
        As in `BinarizedSmoothedClassifier` (both lie in [0, 1], as Hoeffding needs).
    alpha : float, default=0.1
        Miscoverage level in (0, 1), larger than ``eta``.
    batch_size : int, default=None
        Rows whose noisy copies go to the model at once (``None``: automatic).
    random_state : int, Generator or None, default=None
        Seeds the noise (and the classifier trained by ``fit`` where its own
        ``random_state`` is None); the same seed as a `BinarizedSmoothedClassifier` gives
        the same draws, so the two compare on identical samples. Use ``None`` against an
        adversary who can query ``predict_set`` (see `BinarizedSmoothedClassifier`).

    Attributes
    ----------
    estimator_ : classifier
    classes_ : ndarray of shape (n_classes,)
    conformity_scores_ : ndarray of shape (n_calibration,)
        Hoeffding lower bounds of the calibration rows' mean scores.
    base_probability_ : float
        The calibrated threshold ``q`` on the smoothed mean at radius 0, at the current
        ``alpha`` (like ``max_radius_``: they follow ``set_params(alpha=...)``).
    margin_ : float
        The Hoeffding half-width ``sqrt(log(1 / failure_level_) / (2 n_samples))``.
    failure_level_ : float
        Failure probability of each Hoeffding bound, ``eta / (n_calibration + K)``.
    max_radius_ : float
        Radius from which every set holds every class.
    n_calibration_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X, y = load_iris(return_X_y=True)
    >>> order = np.random.default_rng(0).permutation(len(y))
    >>> fit, cal, test = order[:50], order[50:120], order[120:]
    >>> cp = MeanSmoothedClassifier(n_samples=500, random_state=0)
    >>> cp.fit(X[fit], y[fit], augment=4).calibrate(X[cal], y[cal]).predict_set(X[test]).shape
    (30, 3)
    """

    #: Parameters the calibration depends on (changing one needs a new calibrate).
    _calibration_params = ("sigma", "n_samples", "eta", "conformity_score")

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        sigma: float = 0.25,
        n_samples: int = 150,
        radius: float = 0.0,
        eta: float = 1e-3,
        conformity_score: str = "tps",
        alpha: float = 0.1,
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.sigma = sigma
        self.n_samples = n_samples
        self.radius = radius
        self.eta = eta
        self.conformity_score = conformity_score
        self.alpha = alpha
        self.batch_size = batch_size
        self.random_state = random_state

    def _no_radius_remedy(self) -> str:
        # the floor every label reaches is the Hoeffding margin, set by n_samples
        return (
            f"that floor is the Hoeffding margin of n_samples={self.n_samples} noisy copies "
            "(it shrinks as 1 / sqrt(n_samples)): use more n_samples, a smaller sigma if the "
            "model is unsure under this noise, or BinarizedSmoothedClassifier"
        )

    @staticmethod
    def _margin(m: int | NDArray, level: float) -> NDArray:
        return np.sqrt(np.log(1.0 / level) / (2.0 * np.asarray(m, dtype=float)))

    def _calibration_statistic(self, true_scores, level):
        lower = true_scores.mean(axis=1) - self._margin(true_scores.shape[1], level)
        return np.clip(lower, 0.0, 1.0)  # calibration: LOWER bound

    def _after_calibration(self) -> None:
        self.margin_ = float(self._margin(self.n_samples, self.failure_level_))

    def _base_from_quantile(self, quantile, level):
        return float("nan"), float(max(quantile, 0.0))  # no binarisation threshold

    def _test_statistic(self, scores, threshold):
        upper = scores.mean(axis=1) + self.margin_
        return np.clip(upper, 0.0, 1.0)  # test: UPPER bound

    def _smallest_statistic(self, level):
        return float(min(self._margin(self.n_samples, level), 1.0))

    def _informative(self, m, level):
        margin = self._margin(m, level)
        return 1.0 - margin > margin

    def _minimum_hint(self) -> str:
        return (
            "; this is only necessary: the Hoeffding margins leave a label out only when its "
            "mean score sits far below the calibrated bound, which usually takes several "
            "times more samples (or BinarizedSmoothedClassifier, which needs far fewer)"
        )

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        self.__dict__.pop("margin_", None)
