"""Multi-dimensional nonconformity scores from self-ensembled heads.

Each of ``H`` heads gives a scalar score for every candidate label; stacked, they form a
score vector in ``R^H`` where true-label and false-label vectors separate better than on
any single axis. Two ways to turn the vectors into sets, both reduced to split conformal
prediction on a scalar, hence finite-sample valid:

* ``"cells"`` (the paper's procedure): the true-label vectors of one part of the
  calibration data are cell centres; each cell is ranked by how many false-label vectors
  fall in it (impurity ``(F + T) / T``); the region made of the ``m`` purest cells (capped
  coordinate-wise by their centres' maxima) grows with ``m``, so the smallest ``m`` whose
  region accepts a vector is a scalar score, calibrated on the other part with the
  finite-sample rank ``ceil((n2 + 1)(1 - alpha))`` (the official code stops at empirical
  coverage ``1 - alpha``, which is short by up to ``1/(n2 + 1)``).
* ``"learned"`` (ours): a classifier trained on the first part to tell true-label from
  false-label vectors, its probability constrained to fall as any head's score grows; one
  minus that probability is the scalar score.

Measured: most of the gain over a single head comes from ensembling; LAC on the heads' mean
probability (`EnsembleConformalClassifier`) is the baseline to beat.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from joblib import effective_n_jobs
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import ThreadpoolController

from uqconform._rows import n_rows, row_sliceable, slice_rows
from uqconform._seeding import check_random_state_value, integer_seed, seeded_generator
from uqconform._validation import (
    check_bool,
    check_class_labels,
    check_features,
    check_frozen_is_fitted,
    check_int,
    check_n_jobs,
    check_row_order,
    check_rows,
    check_verbose,
    check_wrapper_fitted,
    explaining_cloned_lists,
    feature_axis_hint,
    refuse_model_class,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    adoption_lead,
    adoption_refusal,
    check_calibrated,
    check_calibration_settings,
    check_nan_accepted,
    forward_input_tags,
    keeps_state_on_error,
    naming_refused_groups,
    record_calibration_settings,
    remember_calibration_rows,
    remember_training_rows,
)
from uqconform.classification.heads import (
    HeadEnsemble,
    check_head_ensemble_fitted,
    given_head_ensemble,
    given_heads,
    refuse_head_ensemble_at_fit,
)
from uqconform.classification.split import encode_labels
from uqconform.quantiles import (
    check_alpha,
    check_call_alpha,
    check_miscoverage,
    conformal_quantile,
    conformal_rank,
    count_text,
    levels_text,
    minimum_scores,
)
from uqconform.routing import RoutesFitParams
from uqconform.scores.classification import get_classification_score

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["MultiDimScoreClassifier"]

# What predict, predict_proba and score_vectors need first (as the other wrappers say).
_BEFORE_PREDICTING = "fit(X, y) (or calibrate(X_calib, y_calib) alone around a fitted `estimator`)"

# Score-vector cells (rows x classes x heads) per block of predict_set: bounded memory.
_PREDICT_CELLS = 2**20

# The learned aggregator fits and predicts on one OpenMP thread, and on `n_jobs` threads
# from this many score vectors on (the same answers either way). More threads made its fit
# 2 to 18 times slower on a busy 2-core machine (a review's 300-row calibrate: 18.5 s
# against 0.8 s; 20,000 rows x 50 classes at the caller's default: 159 s against 18 s) and
# at most about 25% faster on a quieter one, from about 100,000 vectors.
_ONE_THREAD_VECTORS = 50_000

# Weight of the heads' mean score in the learned score, which breaks the ties of the
# aggregator's piecewise-constant probability (steps far above it) without reordering them.
_TIE_BREAK = 1e-9


def _aggregator_threads(
    n_jobs: int | None, n_vectors: int
) -> contextlib.AbstractContextManager[Any]:
    """The aggregator's OpenMP threads: one below ``_ONE_THREAD_VECTORS`` score vectors,
    else ``n_jobs`` (joblib's reading: None is one, or a ``parallel_config``'s)."""
    check_n_jobs(n_jobs)  # set_params after calibrate too (joblib's TypeError otherwise)
    threads = 1 if n_vectors < _ONE_THREAD_VECTORS else effective_n_jobs(n_jobs)
    return _openmp_controller().limit(limits=threads, user_api="openmp")


@functools.lru_cache(maxsize=1)
def _openmp_controller() -> ThreadpoolController:
    """One controller of the loaded thread pools, made at the first use: building one
    scans the loaded libraries (about 3 ms, which a one-row prediction paid at each call)."""
    return ThreadpoolController()


class MultiDimScoreClassifier(
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    VersionedState,
    RoutesFitParams,
    ClassifierMixin,
    BaseEstimator,
):
    """Conformal sets from multi-dimensional nonconformity scores of several heads.

    Parameters
    ----------
    estimator : classifier, list of fitted classifiers or fitted HeadEnsemble, default=None
        Cloned into ``n_heads`` diverse heads by ``fit`` (``None``: logistic regression),
        or the fitted heads themselves, with identical ``classes_``: a list, or a fitted
        `HeadEnsemble`, whose heads each read their own columns of ``X`` (``calibrate``
        then works without ``fit``, and ``n_heads`` and ``diversity`` are not used).
    n_heads : int, default=5
    diversity : {"bootstrap", "subspace", "seeds"}, default="bootstrap"
        How ``fit`` makes the heads differ: class-stratified bootstrap samples of the rows,
        random subsets of 70% of the columns (rounded, at least one; a head per subset), or
        different ``random_state`` values. For subsets of another share, pass
        ``HeadEnsemble(estimator, diversity="subspace", subspace_fraction=...)``, fitted,
        as ``estimator`` and call ``calibrate`` alone.
    base_score : {"lac", "aps", "raps", "saps"}, default="lac"
        The per-head score; randomised scores draw an independent uniform per head.
    calibration : {"cells", "learned"}, default="cells"
        ``"learned"``: the score is ``1 - P(true label | score vector)`` from a monotone
        gradient-boosting aggregator, its ties broken by ``1e-9`` times the heads' mean
        score (with one head: the base score's order).
    cells_fraction : float, default=0.5
        Share of the calibration data used to build the cells (or train the aggregator);
        the rest calibrates.
    n_neighbors : int, default=1
        A vector is in a cell region when at least half of its ``n_neighbors`` nearest
        centres are (``"cells"``). The warm start counts the cells part's true vectors
        that this region accepts (with one neighbour: the true counts of its cells, as
        in the official code).
    alpha : float or sequence of float, default=0.1
    k_reg : int, default=5
        RAPS: top labels not penalised (the official code's value).
    lambda_reg : float, default=0.05
        RAPS: penalty per rank beyond ``k_reg`` (the official code's value).
        `SplitConformalClassifier` and `EnsembleConformalClassifier` default to
        ``k_reg=1, lambda_reg=0.01``: set both pairs equal to compare RAPS sets.
    saps_weight : float, default=0.3
    fill_empty : bool, default=True
        Put in every set the row's best-scored label (the fill label: lowest scalar score,
        ties by lowest mean base score over the heads; all of them when labels tie on
        both), so that no set is empty, and calibrate with it: the scalar score of the fill
        label is ``-inf``, the threshold comes from these scores of the recalibration
        part's true labels (and the warm start from those of the cells part's), so the
        coverage follows the split-CP law instead of rising above it. When the fill label
        alone covers more than ``1 - alpha``, every set is that label and covers more; when
        it covers close to ``1 - alpha``, its ``-inf`` scores tie at the threshold and the
        sets cover somewhat above the law (a review: 0.82 at nominal 0.80, with the fill
        label alone covering 0.80 and 100 recalibration rows).
        ``False`` keeps the calibrated sets of the plain scalar score (some may be empty).
        Both can cover above the law's upper end with ``"cells"`` (a review: 0.94 at
        nominal 0.9 with 30 recalibration rows), since the scores of the cells tie at the
        threshold, the warm start (``cells_["warm_start"]``) can lift the prefix, and caps
        can fill every set. The lower bound holds either way. Switching it after
        ``calibrate`` needs no new calibration (both are calibrated). A model calibrated
        by an earlier version adds the fill label to an empty set after thresholding, as
        it did.
    n_jobs : int, default=None
        Heads fitted through joblib, and the OpenMP threads of the learned aggregator's fit
        and predictions from 50,000 score vectors (rows times classes) on; one thread below
        (joblib's reading: None is one, -1 every core).
    random_state : int, Generator or None, default=None
        Seeds the heads, the uniform draws and the calibration split. With an int the
        draws are fixed by the seed and the call's rows, so repeated `predict_set` calls
        give the same sets; a Generator (used as is, drawing in sequence) or None gives
        fresh draws at each call, so randomised sets can differ between calls. The split is drawn
        over positions, so reordering the calibration rows acts like another seed (valid
        either way); each row's bootstrap draw is its own, so the names of the classes
        change nothing. A seed set after calibrate asks for calibrate again.
    verbose : bool, default=False
        Show a progress bar of the fitted heads.

    Attributes
    ----------
    estimator_ : HeadEnsemble
    classes_ : ndarray
    conformity_scores_ : ndarray
        Scalar scores (cell prefix length, or ``1 - P(true)``) of the recalibration part's
        true labels (with ``fill_empty=True`` the thresholds take ``-inf`` instead where
        the true label is the fill label).
    n_cells_ : int
        Calibration rows in the cells part (the rest is the recalibration part).
    n_calibration_ : int
        Rows of the recalibration part: the calibration size of the split-CP guarantee
        (not every calibration row, as in the other wrappers).
    aggregator_ : HistGradientBoostingClassifier
        The learned aggregation: a classifier of true- against false-label score vectors,
        monotone in each head's score (``"learned"`` only).
    cells_ : dict
        Centres, their ranks, the coordinate-wise caps, the cells part's true vectors
        accepted by each prefix (without and with the fill label) and the warm start of the
        smallest level (``"cells"``).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> X, y = load_digits(return_X_y=True)
    >>> cp = MultiDimScoreClassifier(n_heads=3, alpha=0.1, random_state=0)
    >>> cp = cp.fit(X[:800], y[:800]).calibrate(X[800:1400], y[800:1400])
    >>> cp.predict_set(X[1400:]).shape
    (397, 10)
    """

    #: Parameters the calibration depends on (changing one needs a new calibrate).
    _fit_params = ("estimator", "n_heads", "diversity")  # the heads fit trained
    _calibration_params = (
        "random_state",  # the calibration rows' split between cells and thresholds
        "base_score",
        "k_reg",
        "lambda_reg",
        "saps_weight",
        "n_neighbors",
        "calibration",
        "cells_fraction",
    )

    def __init__(
        self,
        estimator: Any = None,
        n_heads: int = 5,
        diversity: str = "bootstrap",
        base_score: str = "lac",
        calibration: str = "cells",
        cells_fraction: float = 0.5,
        n_neighbors: int = 1,
        alpha: float | ArrayLike = 0.1,
        k_reg: int = 5,
        lambda_reg: float = 0.05,
        saps_weight: float = 0.3,
        fill_empty: bool = True,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.n_heads = n_heads
        self.diversity = diversity
        self.base_score = base_score
        self.calibration = calibration
        self.cells_fraction = cells_fraction
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.k_reg = k_reg
        self.lambda_reg = lambda_reg
        self.saps_weight = saps_weight
        self.fill_empty = fill_empty
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ---- parameters and heads ---------------------------------------------------------------
    def _validate_params(self) -> None:
        refuse_model_class(self.estimator, self)
        check_miscoverage(self.alpha, "alpha", owner=self)
        if self.base_score not in ("lac", "aps", "raps", "saps"):
            raise ValueError(
                f"Unknown `base_score` {self.base_score!r}: use 'lac', 'aps', 'raps' or 'saps'."
            )
        if self.calibration not in ("cells", "learned"):
            raise ValueError(
                f"`calibration` must be 'cells' or 'learned', got {self.calibration!r}."
            )
        fraction = self.cells_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, numbers.Real)
            or not 0 < fraction < 1
        ):
            raise ValueError(f"`cells_fraction` must lie in (0, 1), got {fraction!r}.")
        self._score()  # checks k_reg, lambda_reg and saps_weight
        check_bool(self.fill_empty, "fill_empty")
        check_random_state_value(self.random_state)
        check_int(self.n_neighbors, "n_neighbors")
        check_n_jobs(self.n_jobs)  # the aggregator's threads, however the heads are given
        check_verbose(self.verbose)
        if given_head_ensemble(self.estimator) is None:  # (its n_heads, diversity: unused)
            self._heads()._validate_params()

    def _routed_models(self) -> dict[str, Any]:
        return {"estimator": self._heads()}

    def __sklearn_tags__(self):
        return forward_input_tags(super().__sklearn_tags__(), self._heads())

    def _heads(self) -> HeadEnsemble:
        return HeadEnsemble(
            self.estimator,
            n_heads=self.n_heads,
            diversity=self.diversity,
            n_jobs=self.n_jobs,
            random_state=self.random_state,
            verbose=self.verbose,
        )

    def _score(self):
        return get_classification_score(
            self.base_score,
            randomized=True,
            k_reg=self.k_reg,
            lambda_reg=self.lambda_reg,
            saps_weight=self.saps_weight,
        )

    def _rng(self, stream: int, content: Any = None) -> np.random.Generator:
        """An independent stream per use (0: calibration, 1: prediction, 2: the split);
        prediction draws are tied to the rows (`uqconform._seeding.seeded_generator`)."""
        seed = self.random_state
        if isinstance(seed, np.random.Generator):  # used as is, draws in sequence
            return seed
        if seed is None:
            return np.random.default_rng()
        return seeded_generator(cast(int, integer_seed(seed)), stream, content)  # seed not None

    def _default_model_text(self) -> str:
        return "LogisticRegression(max_iter=1000)"

    @keeps_state_on_error
    def fit(self, X: ArrayLike, y: ArrayLike, **fit_params: Any) -> Self:
        """Fit the heads (or check the given fitted heads).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Passed to each head's ``fit`` (per-row ones follow the head's bootstrap rows).
            With scikit-learn's metadata routing on, only those the model requested (see
            `uqconform.routing`).

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        self._validate_params()
        refuse_head_ensemble_at_fit(self)  # heads that would average heads
        check_frozen_is_fitted(self.estimator, self)
        head_params = self._routed_fit_params(fit_params)["estimator"]
        self._reset_calibration()
        X = check_features(self, X, reset=True)
        self._check_nan(X)
        labels = check_rows("y", y, n_rows(X))
        with explaining_cloned_lists(self.estimator):  # fitted heads, unfitted by a clone?
            with naming_refused_groups(self, head_params):
                self.estimator_ = self._heads().fit(X, labels, **head_params)
        # fitted heads given as a list are only checked: re-read at each calibrate, so that
        # set_params(estimator=...) applies
        self._estimator_adopted = isinstance(self.estimator, (list, tuple))
        expected = getattr(self.estimator_.heads_[0], "n_features_in_", None)
        if self._estimator_adopted and expected is not None and expected != self.n_features_in_:
            raise ValueError(
                f"`X` has {self.n_features_in_} features, but the fitted heads take "
                f"{expected}: fit(X, y) with fitted heads only checks X against them."
            )
        remember_training_rows(self, X, labels, trained=not self._estimator_adopted)
        record_calibration_settings(self, step="fit")
        return self

    def _reset_calibration(self) -> None:
        for name in (
            "cells_",
            "aggregator_",
            "conformity_scores_",
            "n_calibration_",
            "n_cells_",
            "_tree",
            "_true_is_fill",
            "_calibrate_settings",
        ):
            self.__dict__.pop(name, None)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_tree", None)  # rebuilt from the centres on first use
        return state

    @property
    def classes_(self) -> NDArray:
        check_is_fitted(self, "estimator_")
        return self.estimator_.classes_

    def predict_proba(self, X: ArrayLike) -> NDArray:
        """Mean probability of the heads.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in ``classes_`` order.
        """
        check_wrapper_fitted(self, "estimator_", "predict_proba", needs=_BEFORE_PREDICTING)
        return self.estimator_.predict_proba(self._test_rows(X))

    def predict(self, X: ArrayLike) -> NDArray:
        """Label with the largest mean probability of the heads.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        check_wrapper_fitted(self, "estimator_", "predict", needs=_BEFORE_PREDICTING)
        return self.estimator_.predict(self._test_rows(X))

    def score_vectors(self, X: ArrayLike, rng: np.random.Generator | None = None) -> NDArray:
        """Score of every label under every head.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        rng : numpy Generator, optional
            The uniforms of randomised base scores (one per row and head); by default the
            prediction stream of ``random_state`` (seeded by the rows' content too).

        Returns
        -------
        ndarray of shape (n_samples, n_classes, n_heads)
            The base score (``base_score``) of each label under each head.
        """
        check_wrapper_fitted(self, "estimator_", "score_vectors", needs=_BEFORE_PREDICTING)
        X = self._test_rows(X)
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(f"`rng` must be None or a numpy Generator, got {rng!r}.")
        rng = self._rng(1, content=X) if rng is None else rng
        uniforms = rng.random((len(self.estimator_.heads_), n_rows(X)))  # a row per head
        return self._vectors(X, uniforms)

    def _test_rows(self, X: Any) -> Any:
        """Test rows checked against the fitted features (errors name this class, not its
        heads), in a format whose rows can be sliced."""
        if "n_features_in_" in self.__dict__:
            X = check_features(self, X, reset=False)
        self._check_columns_against_heads(X)
        self._check_nan(X)
        return row_sliceable(X)

    def _check_columns_against_heads(self, X: Any) -> None:
        """Refuse an ``X`` whose number of columns differs from the fitted heads' (given as
        a list or trained by fit), or of more than two dimensions when they count features
        (scikit-learn models), naming this class rather than the heads."""
        heads = self.estimator_
        expected = getattr(heads.heads_[0], "n_features_in_", None)
        if expected is None:  # heads that take other inputs (images): theirs to check
            return
        subsets = getattr(heads, "feature_subsets_", None) or []
        if any(subset is not None for subset in subsets):  # each head reads its own columns
            expected = getattr(heads, "n_features_in_", expected)  # of X, all of them
        columns = np.shape(X)[1] if np.ndim(X) >= 2 else None
        # (heads trained by fit may read subsets of the columns: fit's width is checked)
        if self._estimator_adopted and columns is not None and expected != columns:
            hint = f" {feature_axis_hint(X)}" if np.ndim(X) > 2 else ""
            if (
                np.ndim(X) == 2
                and columns > expected
                and not any(subset is not None for subset in subsets)
            ):
                hint = (
                    " If they are the heads_ of a HeadEnsemble fitted with "
                    "diversity='subspace' (each reading its own columns of X), pass the "
                    "fitted HeadEnsemble itself as `estimator`."
                )
            raise ValueError(
                f"`X` has {columns} features, but the fitted heads of this "
                f"{type(self).__name__} take {expected}.{hint}"
            )
        if np.ndim(X) > 2:
            width = self.__dict__.get("n_features_in_", expected)  # fit's X (subsets: wider)
            raise ValueError(
                f"`X` is a {np.ndim(X)}-D array of shape {np.shape(X)}, but the fitted heads "
                f"of this {type(self).__name__} take a 2-D `X` of {width} features: pass "
                "one row per sample with its features as columns."
            )

    def _check_nan(self, X: Any) -> None:
        """Refuse NaN in ``X`` naming the first head model that does not take it."""
        heads = self._heads()
        for model in heads._prefit_heads() or [heads._base_estimator()]:
            check_nan_accepted(model, X)

    def _vectors(self, X: Any, uniforms: NDArray) -> NDArray:
        """Score vectors ``(n, K, H)`` of rows ``X`` with one uniform per row and head."""
        probabilities = self.estimator_.head_probabilities(X)
        score = self._score()
        per_head = [
            score.validated_scores(p, u) for p, u in zip(probabilities, uniforms, strict=True)
        ]
        return np.stack(per_head, axis=-1)

    # ---- calibration --------------------------------------------------------------------------
    @keeps_state_on_error
    def calibrate(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Build the cells (or train the aggregator) on one part, calibrate on the other.

        There is no Mondrian (``groups``) calibration: use `SplitConformalClassifier`
        with one head for group-conditional coverage.

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
        # heads set after fit (a list or a HeadEnsemble) replace fit's, as in
        # EnsembleConformalClassifier; one model set after fit is a changed parameter
        adopting = (
            not hasattr(self, "estimator_")
            or self.__dict__.get("_estimator_adopted", False)
            or given_heads(self.estimator)
        )
        if not adopting:  # heads trained by fit: from the parameters fit used
            check_calibration_settings(self, "calibrate", step="fit", again="fit(X, y)")
        ensemble = given_head_ensemble(self.estimator)  # fitted heads, as one object
        if adopting and ensemble is not None:
            check_head_ensemble_fitted(ensemble, f"{adoption_lead(self)}, and ")
            self.estimator_ = ensemble
        elif adopting:
            if not isinstance(self.estimator, (list, tuple)):
                cause = (
                    adoption_lead(self)
                    if self.estimator is None
                    else f"`estimator` is one model ({type(self.estimator).__name__}), not a "
                    "list of fitted heads, and fit has not trained heads from it"
                )
                raise NotFittedError(
                    f"{cause}. Call fit(X_train, y_train) to train heads from it "
                    f"(n_heads={self.n_heads}), or pass a list of fitted heads (one or more) "
                    "as `estimator`."
                )
            try:
                with explaining_cloned_lists(self.estimator):
                    self.estimator_ = self._heads().fit(None, None)
            except NotFittedError as error:  # which head: named after how it was reached
                raise NotFittedError(adoption_refusal(self, str(error))) from None
        if adopting:  # re-read at each calibrate, so that set_params(estimator=...) applies
            self._estimator_adopted = True
            # nothing fit trained, nor what it recorded of its X, belongs to these heads
            for name in ("_fit_settings", "n_features_in_", "feature_names_in_", "_training_rows"):
                self.__dict__.pop(name, None)
        self._check_columns_against_heads(X)
        n = n_rows(X)
        given = check_class_labels(y, n, classes=self.classes_)  # no booleans as 0/1
        remember_calibration_rows(self, X, given)
        labels = encode_labels(given, self.classes_)
        levels = check_alpha(self.alpha, "alpha")
        order = self._rng(2).permutation(n)
        n_cells, n_recal = self._split_sizes(n)
        points = f"{n} calibration point{' is' if n == 1 else 's are'}"
        message = self._too_few_message(points, levels.min())
        if n_cells < 1 or n_recal < 1:  # nothing to build cells from, or to calibrate on
            raise ValueError(message)
        if conformal_rank(n_recal, levels.min())[0] > n_recal:  # the contract: whole space
            warn_user(message + " Until then every set holds every class.", UserWarning)
        self._reset_calibration()
        # the calibration rows enter the seed (a fixed seed alone drew the same uniforms for
        # every calibration set of n rows: a seed-dependent coverage bias)
        vectors = self.score_vectors(X, rng=self._rng(0, content=X))
        first, second = order[:n_cells], order[n_cells:]
        if self.calibration == "cells":
            self._build_cells(vectors[first], labels[first], levels)
        else:
            self._train_aggregator(vectors[first], labels[first])
        # every label's scalar score on the recalibration part: the fill label of each row
        scores = self._scalar_scores(vectors[second])  # (n_recal, K)
        recal = np.arange(n_recal)
        self.conformity_scores_ = scores[recal, labels[second]]
        # whether each row's true label is its fill label (in every set, score -inf):
        # fill_empty=True calibrates with it (its absence: a model calibrated before)
        self._true_is_fill = self._fill_labels(scores, vectors[second])[recal, labels[second]]
        self.n_calibration_ = n_recal
        self.n_cells_ = n_cells
        record_calibration_settings(self)
        if self.calibration == "cells":
            self._warn_beyond_caps(
                levels, conformal_quantile(self._threshold_scores(), levels, warn=False)
            )
        return self

    def _fill_labels(self, scores: NDArray, vectors: NDArray) -> NDArray:
        """The labels ``fill_empty`` puts in every set: lowest scalar score, ties by lowest
        mean base score over the heads, labels tied on both together (none of them scores
        worse than another under every head). ``scores (..., K)``, ``vectors (..., K, H)``."""
        at_lowest = scores == scores.min(axis=-1, keepdims=True)
        tie_break = np.where(at_lowest, vectors.mean(axis=-1), np.inf)
        return at_lowest & (tie_break == tie_break.min(axis=-1, keepdims=True))

    def _calibrated_fill(self) -> bool:
        """``fill_empty`` calibrated with the fill label (a model calibrated by an earlier
        version fills an empty set after the threshold instead)."""
        return bool(self.fill_empty) and "_true_is_fill" in self.__dict__

    def _threshold_scores(self) -> NDArray:
        """The recalibration scores the thresholds come from: with the calibrated fill,
        ``-inf`` where the true label is the fill label."""
        if self._calibrated_fill():
            return np.where(self._true_is_fill, -np.inf, self.conformity_scores_)
        return self.conformity_scores_

    def _too_few_message(self, given: str, level: float) -> str:
        needed = minimum_scores(level)
        return (
            f"{given} too few for alpha={level:g} with "
            f"cells_fraction={self.cells_fraction}: the cells part needs at least 1 point "
            f"and the calibration part at least {count_text(needed)}, so give at least "
            f"{self._minimum_calibration(needed)} calibration points."
        )

    def _warn_beyond_caps(self, levels: NDArray, quantiles: NDArray) -> None:
        """Warn when a level's calibrated ``quantiles`` is infinite although the calibration
        part is large enough: too many calibration vectors lie beyond every cell cap (their
        score is infinite), so every set holds every class."""
        n_recal = self.conformity_scores_.size
        enough = conformal_rank(n_recal, levels) <= n_recal
        infinite = np.isposinf(quantiles)  # -inf: the fill label alone reaches the level
        if (enough & infinite).any():
            beyond = int(np.isposinf(self._threshold_scores()).sum())
            level = float(np.min(levels[enough & infinite]))
            # the threshold is the rank-th smallest score: n - rank of them may lie above
            left_out = n_recal - int(conformal_rank(n_recal, level)[0])
            # a cell part of n1 rows leaves about n_heads / (n1 + 1) of the other rows'
            # vectors beyond every cap, and the level leaves out about alpha of them: at
            # n1 = n_heads / alpha the two are equal and half the calibration sets still
            # fail (the count varies a lot), so the advice is four times that, and never
            # less than twice the cells part given
            n_heads = len(self.estimator_.heads_)
            least = int(np.ceil(4 * n_heads / level))
            cells_rows = max(least, 2 * self.n_cells_)
            advice = int(np.ceil(cells_rows / float(self.cells_fraction)))
            failing = levels[enough & infinite]
            warn_user(
                f"At alpha={levels_text(failing)} every set holds every class: {beyond} of "
                f"the {n_recal} recalibration score vectors "
                f"{'lies' if beyond == 1 else 'lie'} beyond "
                "every cell cap (above all the cells' centres in some head), and the level "
                f"leaves out at most n - ceil((n + 1)(1 - alpha)) = {left_out} of them. Their "
                "share falls as the cells part grows (about n_heads / its rows), not as the "
                "recalibration part does, and varies a lot between calibration sets: give "
                f"the cells part (now {self.n_cells_} rows) at least 4 n_heads / alpha = "
                f"{least} rows and at least twice its size, {cells_rows} rows (about "
                f"{advice} calibration rows with cells_fraction={self.cells_fraction}), a "
                "larger cells_fraction, or use calibration='learned'.",
                UserWarning,
            )

    def _split_sizes(self, n: int) -> tuple[int, int]:
        n_cells = int(np.floor(self.cells_fraction * n))
        return n_cells, n - n_cells

    def _minimum_calibration(self, needed: int) -> int:
        """Smallest calibration size whose split leaves >= 1 cell point and ``needed`` others."""
        # Both parts grow with n, so search upwards from a lower bound (n - floor(f n) is at
        # most (1 - f) n + 1).
        fraction = float(self.cells_fraction)
        n = max(1, int(np.floor((needed - 1) / (1 - fraction))), int(np.ceil(1 / fraction)) - 1)
        while True:  # a loop over a few candidate sizes
            n_cells, n_recal = self._split_sizes(n)
            if n_cells >= 1 and n_recal >= needed:
                return n
            n += 1

    def _build_cells(self, vectors: NDArray, labels: NDArray, levels: NDArray) -> None:
        n, k, h = vectors.shape
        true = vectors[np.arange(n), labels]
        centres, counts = np.unique(true, axis=0, return_counts=True)
        false_mask = np.ones((n, k), dtype=bool)
        false_mask[np.arange(n), labels] = False
        tree = cKDTree(centres)
        # With one neighbour the scalar scores below need the nearest centre of every vector
        # of this part: one query of them all serves both (a vector's answer does not depend
        # on the others queried with it). With more, the k-nearest query may order tied
        # centres otherwise, so the false vectors are searched for one neighbour apart.
        one_neighbour = min(int(self.n_neighbors), centres.shape[0]) == 1
        every_nearest = None
        if one_neighbour:
            _, every_nearest = tree.query(vectors.reshape(-1, h), k=1)
            nearest = every_nearest[false_mask.reshape(-1)]
        else:
            _, nearest = tree.query(vectors[false_mask], k=1)
        false_counts = np.bincount(nearest, minlength=centres.shape[0])
        impurity = (false_counts + counts) / counts
        # Ties (pure cells) broken by the centre's norm, then its index: stable and seeded.
        ranking = np.lexsort(
            (np.arange(centres.shape[0]), np.linalg.norm(centres, axis=1), impurity)
        )
        rank = np.empty(centres.shape[0], dtype=np.int64)
        rank[ranking] = np.arange(1, centres.shape[0] + 1)
        limits = np.maximum.accumulate(centres[ranking], axis=0)  # (m, H) caps per prefix
        self.cells_: dict[str, Any] = {
            "centres": centres,
            "rank": rank,
            "limits": limits,
            "true_counts": counts,
            "false_counts": false_counts,
        }
        self._tree = tree
        if int(self.n_neighbors) > centres.shape[0]:
            warn_user(
                f"`n_neighbors`={self.n_neighbors} is more than the {centres.shape[0]} cell "
                f"centres: {centres.shape[0]} are used.",
                UserWarning,
            )
        # The cells part's own true vectors accepted by the region of the first m cells, for
        # m = 1..centres (membership as at prediction: n_neighbors and caps). With one
        # neighbour this is the cumulative true count of the ranked cells. With the fill
        # label (fill_empty=True) a row whose true label is its fill label is accepted
        # at every prefix.
        scores = self._scalar_scores(vectors, nearest=every_nearest)  # (n, K)
        own = scores[np.arange(n), labels]
        filled = np.where(self._fill_labels(scores, vectors)[np.arange(n), labels], -np.inf, own)
        prefixes = np.arange(1, centres.shape[0] + 1)
        self.cells_["true_accepted"] = np.searchsorted(np.sort(own), prefixes, side="right")
        self.cells_["true_accepted_filled"] = np.searchsorted(
            np.sort(filled), prefixes, side="right"
        )
        # The warm start of the smallest level, kept for inspection; prediction computes the
        # warm start of each requested level (one level's must not enlarge another's sets).
        self.cells_["warm_start"] = self._warm_start(
            float(levels.min()), filled=bool(self.fill_empty)
        )

    def _warm_start(self, level: float, filled: bool = False) -> int:
        """Longest prefix whose region accepts at most ``ceil((m + 1)(1 - alpha))`` of the
        cells part's own true vectors (``m`` centres); ``filled``: the region with the fill
        label (a row whose true label is its fill label counts at every prefix).

        The official code counts the true vectors in the first cells (their true counts),
        which is the same with one neighbour; with an even number of neighbours, where a
        vector joins when half of its nearest centres are in the prefix, the region mostly
        accepts more vectors than its cells hold, and counting them as the region does
        keeps the warm start from binding on most calibrations (with an odd number of three
        or more, where a vector needs a strict majority, the count can go either way).
        Depends on the cells part only, and only enlarges the region, so validity holds.
        """
        cells = self.cells_
        accepted = cells.get("true_accepted_filled" if filled else "true_accepted")
        if accepted is None:  # a model pickled before: its cells' cumulative true counts
            accepted = np.cumsum(cells["true_counts"][np.argsort(cells["rank"])])
        target = int(conformal_rank(accepted.size, level)[0])
        return int(np.searchsorted(accepted, target, side="right"))

    def _train_aggregator(self, vectors: NDArray, labels: NDArray) -> None:
        n, k, h = vectors.shape
        is_true = np.zeros((n, k), dtype=bool)
        is_true[np.arange(n), labels] = True
        seed = integer_seed(self.random_state)
        # P(true label) falls as any head's score grows: a label that every head scores
        # at least as well as a kept label is kept too (coherent sets, and smaller ones)
        self.aggregator_ = HistGradientBoostingClassifier(
            max_iter=200, monotonic_cst=[-1] * h, random_state=seed
        )
        with _aggregator_threads(self.n_jobs, n * k):
            self.aggregator_.fit(vectors.reshape(-1, h), is_true.reshape(-1))
        self._tie_break = _TIE_BREAK  # a model pickled before scores without it

    def _cell_tree(self) -> cKDTree:
        tree = getattr(self, "_tree", None)
        if tree is None:  # after unpickling
            self._tree = tree = cKDTree(self.cells_["centres"])
        return tree

    def _scalar_scores(
        self, vectors: NDArray, nearest: NDArray | None = None, call_vectors: int = 0
    ) -> NDArray:
        """The scalar score of score vectors ``(..., H)``: prefix length or 1 - P(true).

        ``nearest``: the cells' tree's answer for the flattened vectors when already known.
        ``call_vectors``: the vectors of the whole call when these are one block of it (the
        aggregator's threads are chosen for the call).
        """
        flat = vectors.reshape(-1, vectors.shape[-1])
        if "cells_" not in self.__dict__:  # the mode fitted at calibration, not set_params'
            true_column = list(self.aggregator_.classes_).index(True)
            with _aggregator_threads(self.n_jobs, max(call_vectors, flat.shape[0])):
                proba = self.aggregator_.predict_proba(flat)
            scores = 1.0 - proba[:, true_column]
            # the aggregator is piecewise constant: its ties are broken by the heads' mean
            # score, monotone too (sets stay coherent; one head: the base score's order)
            tie_break = self.__dict__.get("_tie_break", 0.0)
            if tie_break:
                scores = scores + tie_break * flat.mean(axis=1)
            return scores.reshape(vectors.shape[:-1])
        cells = self.cells_
        k = min(int(self.n_neighbors), cells["centres"].shape[0])
        if nearest is None:
            _, nearest = self._cell_tree().query(flat, k=k)
        nearest = nearest.reshape(flat.shape[0], k)
        # Accepted at prefix m when at least half of the k nearest centres rank <= m.
        ranks = np.sort(cells["rank"][nearest], axis=1)
        by_neighbours = ranks[:, (k + 1) // 2 - 1]
        limits = cells["limits"]
        by_limits = np.zeros(flat.shape[0], dtype=np.int64)
        for column in range(flat.shape[1]):  # a loop over heads
            first = np.searchsorted(limits[:, column], flat[:, column], side="left") + 1
            by_limits = np.maximum(by_limits, first)
        score = np.maximum(by_neighbours, by_limits).astype(float)
        score[by_limits > limits.shape[0]] = np.inf  # beyond every cap: never accepted
        return score.reshape(vectors.shape[:-1])

    # ---- prediction -------------------------------------------------------------------------
    def _thresholds(self, levels: NDArray) -> NDArray:
        """Calibrated threshold on the scalar score per level (cells: with the warm start)."""
        n_recal = self.conformity_scores_.size
        too_few = conformal_rank(n_recal, levels) > n_recal
        if too_few.any():  # the calibration size the user must give, as calibrate says
            message = self._too_few_message(
                f"The {n_recal} point{'' if n_recal == 1 else 's'} of the calibration part "
                f"{'is' if n_recal == 1 else 'are'}",
                levels[too_few].min(),
            )
            warn_user(message + " Every set holds every class.", UserWarning)
        thresholds = conformal_quantile(self._threshold_scores(), levels, warn=False)
        thresholds = thresholds.astype(float)
        if "cells_" in self.__dict__:
            self._warn_beyond_caps(levels, thresholds)
            filled = self._calibrated_fill()
            warm = [self._warm_start(float(level), filled) for level in levels]
            thresholds = np.maximum(thresholds, warm)
        return thresholds

    def cells_kept(self, alpha: float | ArrayLike | None = None) -> float | NDArray:
        """Number of ranked cells whose union is the accepted region, per level.

        A label joins a prediction set when its score vector falls in the first
        ``cells_kept(alpha)`` cells of the impurity ranking (``cells_["rank"]``); the rest
        are left out (but for the fill label, in every set with ``fill_empty=True``). This
        is the calibrated prefix, raised to the warm start when that is larger (the warm
        start alone, possibly 0, when the fill label reaches the level by itself); ``inf``
        (every label is then accepted) when the recalibration part is too small for the
        level, or when too many of its score vectors lie beyond every cell cap (a warning
        says so). Only for ``calibration="cells"``.

        Parameters
        ----------
        alpha : float or sequence of float, optional
            Level(s); the default is ``alpha``.

        Returns
        -------
        float or ndarray of shape (k,)

        Examples
        --------
        >>> from sklearn.datasets import load_digits
        >>> X, y = load_digits(return_X_y=True)
        >>> cp = MultiDimScoreClassifier(n_heads=3, alpha=[0.05, 0.1], random_state=0)
        >>> cp = cp.fit(X[:800], y[:800]).calibrate(X[800:1400], y[800:1400])
        >>> bool(cp.cells_kept(0.05) >= cp.cells_kept(0.1))
        True
        """
        check_calibrated(self, "cells_kept")
        if "cells_" not in self.__dict__:
            raise ValueError(
                "cells_kept needs a model calibrated with calibration='cells'; this one was "
                "calibrated with 'learned' (its score is 1 - P(true), not a cell prefix)."
            )
        value = self.alpha if alpha is None else alpha
        kept = self._thresholds(check_call_alpha(alpha, self.alpha))
        return float(kept[0]) if np.ndim(value) == 0 else kept

    def predict_set(self, X: ArrayLike, alpha: float | ArrayLike | None = None) -> NDArray:
        """Prediction sets as a boolean mask over ``classes_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Level(s); the default is ``alpha``. Any level works (the cells' warm start is
            computed per level).

        Returns
        -------
        ndarray of bool, shape (n_samples, n_classes) or (n_samples, n_classes, k)
        """
        check_calibrated(self, "predict_set")
        value = self.alpha if alpha is None else alpha
        levels = check_call_alpha(alpha, self.alpha, X)
        thresholds = self._thresholds(levels)
        X = self._test_rows(X)  # the blocks below are slices of it
        n, n_heads, n_classes = n_rows(X), len(self.estimator_.heads_), len(self.classes_)
        # the draws of score_vectors(X), made once; the rows are then scored block by block
        uniforms = self._rng(1, content=X).random((n_heads, n))
        out = np.empty((n, n_classes, levels.size), dtype=bool)
        calibrated_fill = self._calibrated_fill()
        post_hoc_fill = bool(self.fill_empty) and not calibrated_fill  # calibrated before
        step = max(_PREDICT_CELLS // (n_classes * n_heads), 1)
        for start in range(0, n, step):  # a loop over blocks of rows, for bounded memory
            rows = slice(start, min(start + step, n))
            vectors = self._vectors(slice_rows(X, rows.start, rows.stop), uniforms[:, rows])
            scores = self._scalar_scores(vectors, call_vectors=n * n_classes)  # (rows, K)
            if calibrated_fill:  # the fill label is in every set, as at calibration
                scores = np.where(self._fill_labels(scores, vectors), -np.inf, scores)
            for j, threshold in enumerate(thresholds):  # a loop over levels
                sets = scores <= threshold
                empty = ~sets.any(axis=1)
                if post_hoc_fill and empty.any():  # the fill label joins an empty set
                    sets[empty] = self._fill_labels(scores[empty], vectors[empty])
                out[rows, :, j] = sets
        return out[..., 0] if np.ndim(value) == 0 else out

    def plot_cells(
        self, X: ArrayLike, y: ArrayLike, heads: tuple[int, int] = (0, 1), ax: Any = None
    ) -> Any:
        """Score vectors of two heads: true labels, false labels, and the false labels the
        sets keep (circled; at the first level of ``alpha``).

        The vectors are those `predict_set` judges (the same draws for randomised scores,
        with an int `random_state`); for rows of the calibration data, randomised scores
        are drawn afresh, not as at calibration. The cells' caps and centres are not drawn
        (see the methods page).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to draw (e.g. calibration data).
        y : array-like of shape (n_samples,)
            Their true labels.
        heads : pair of int, default=(0, 1)
            The two heads whose scores are the axes (distinct, below the number of heads).
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib Axes
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:  # pragma: no cover - optional dependency
            raise ImportError(
                'plot_cells needs matplotlib: pip install "uqconform[plot]"'
            ) from error
        check_calibrated(self, "plot_cells")
        n_heads = len(self.estimator_.heads_)
        pair = tuple(heads) if np.ndim(heads) == 1 else ()
        if (
            len(pair) != 2
            or pair[0] == pair[1]
            # cast: numbers.Integral has no typed comparisons
            or not all(
                isinstance(h, numbers.Integral)
                and not isinstance(h, bool | np.bool_)
                and 0 <= cast(int, h) < n_heads
                for h in pair
            )
        ):
            raise ValueError(
                f"`heads` must be two distinct head indices in 0..{n_heads - 1}, got {heads!r}"
                + (" (a map of two heads needs a model with at least two)" if n_heads < 2 else "")
                + "."
            )
        ax = plt.gca() if ax is None else ax
        vectors = self.score_vectors(X)
        labels = encode_labels(
            check_class_labels(y, n_rows(X), classes=self.classes_), self.classes_
        )
        accepted = self.predict_set(X)  # at the constructor's (first) level
        accepted = accepted[..., 0] if accepted.ndim == 3 else accepted
        rows = np.arange(len(labels))
        false = np.ones(accepted.shape, dtype=bool)
        false[rows, labels] = False
        a, b = heads
        ax.scatter(
            vectors[false][:, a],
            vectors[false][:, b],
            s=4,
            c="tab:red",
            alpha=0.3,
            label="false labels",
        )
        ax.scatter(
            vectors[rows, labels][:, a],
            vectors[rows, labels][:, b],
            s=6,
            c="tab:blue",
            label="true labels",
        )
        kept = accepted & false
        ax.scatter(
            vectors[kept][:, a],
            vectors[kept][:, b],
            s=8,
            facecolors="none",
            edgecolors="black",
            linewidths=0.5,
            label="false labels kept in a set",
        )
        ax.set_xlabel(f"score of head {a}")
        ax.set_ylabel(f"score of head {b}")
        ax.legend(fontsize=8)
        return ax
