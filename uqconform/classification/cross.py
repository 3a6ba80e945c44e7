"""Cross-conformal classification: CV+ and jackknife+ prediction sets (Romano, Sesia and
Candes, 2020; Barber, Candes, Ramdas and Tibshirani, 2021), in which every row both
trains and calibrates.

``K`` models are trained, model ``k`` on every row outside fold ``k``; row ``i``'s score
``s_i`` is its true label's score under the model that did not see it. A test row ``x``
gets the labels ``y`` with

``1 + #{i : s_i >= s_{k(i)}(x, y)} > alpha (n + 1)``,

``s_{k(i)}(x, y)`` being the score of ``(x, y)`` under the model of row ``i``'s fold: the
label's cross-conformal p-value exceeds ``alpha``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression

from uqconform._cross import CrossFitWrapper, many_labels
from uqconform._rows import n_rows, row_sliceable, slice_rows
from uqconform._validation import (
    check_bool,
    check_class_labels,
    check_score_output,
    class_probabilities,
    missing_proba_error,
    model_classes,
)
from uqconform._warnings import warn_user
from uqconform.base import _plain, warn_infinite_scores
from uqconform.classification.split import ClassificationScoreMixin, encode_labels
from uqconform.quantiles import (
    _warn_too_few,
    check_call_alpha,
    check_miscoverage,
    conformal_rank,
    count_text,
    levels_text,
    minimum_scores,
)
from uqconform.scores.classification import ClassificationScore

__all__ = ["CrossConformalClassifier", "CrossFitClassifier"]

_EVERY_CLASS = "a set holding every class"


class CrossFitClassifier(ClassifierMixin, CrossFitWrapper):
    """Base class of the cross-fitted classifiers (not used directly): the classes are
    the labels of ``y`` in ``fit``, each fold model's probabilities are read in their
    columns, and ``predict`` is the most probable class of `predict_proba`."""

    #: What the probabilities are needed for (in the error for a model without them).
    _needs_probabilities_for: str = "conformal sets need class probabilities"

    def _default_estimator(self) -> BaseEstimator:
        return LogisticRegression()

    def _validate_params(self) -> None:
        super()._validate_params()
        model = self._estimator_or_default()
        if not hasattr(model, "predict_proba"):
            raise missing_proba_error(
                model, "`estimator`", self._needs_probabilities_for, owner=self
            )

    def _check_target(self, y: ArrayLike, n: int, *, calibrating: bool) -> NDArray:
        labels = check_class_labels(y, n, training=True)
        self.classes_ = np.unique(labels)
        if many_labels(labels):  # once here, not once per fold by scikit-learn
            warn_user(
                f"`y` has {self.classes_.size} distinct labels in {n} rows: a continuous "
                "target read as classes? Each class then has a row or two, most of them "
                "unseen by the fold models that score them. For a numeric target use a "
                "regressor (CrossConformalRegressor); for classes, bin the values first "
                "(e.g. pd.cut)."
            )
        return labels

    def _reads_distribution(self) -> bool:
        """Whether the probabilities are read as a distribution (rows checked to sum to 1)."""
        return True

    def _model_output(self, model: Any, X: Any) -> NDArray:
        """A fold model's probabilities in the columns of ``classes_`` (0 for the classes
        the model never saw: a class whose rows all fell in its fold)."""
        seen = model_classes(model)
        proba = class_probabilities(model, X, seen.size, check_sums=self._reads_distribution())
        if np.array_equal(seen, self.classes_):
            return proba
        full = np.zeros((proba.shape[0], self.classes_.size))
        full[:, encode_labels(seen, self.classes_, "the classes of a fold model")] = proba
        return full

    @abstractmethod
    def _combine(self, proba: NDArray) -> NDArray:
        """One probability per class ``(b, n_classes)`` from the fold models'
        ``(b, K, n_classes)``."""

    def predict_proba(self, X: Any) -> NDArray:
        """Class probabilities combined over the fold models (see the class description).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        self._check_fitted("predict_proba")
        X = row_sliceable(self._validate_X(X, reset=False))
        n = n_rows(X)
        out = np.empty((n, self.classes_.size))
        for rows in self._row_batches(n, 2 * len(self.estimators_) * self.classes_.size):
            out[rows] = self._combine(self._fold_outputs(slice_rows(X, rows.start, rows.stop)))
        return out

    def predict(self, X: Any) -> NDArray:
        """The most probable class under `predict_proba`.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class CrossConformalClassifier(ClassificationScoreMixin, CrossFitClassifier):
    """Prediction sets from models trained without one fold each: CV+ and jackknife+.

    Every row trains all models but one and calibrates the one that did not see it, so no
    data is set aside: on small data the sets are smaller than split conformal
    prediction's, which trains on one part and calibrates on the other. The price is ``K``
    fits and, at prediction, ``K`` model calls per row.

    A label enters the set of ``x`` when its cross-conformal p-value
    ``(1 + #{i : s_i >= s_{k(i)}(x, y)}) / (n + 1)`` exceeds ``alpha``: each training
    row's out-of-fold score ``s_i`` is compared with the score of ``(x, y)`` under the
    same fold's model.

    Guarantee under exchangeability of the ``n`` training rows and the test row (Romano,
    Sesia and Candes, 2020, after Barber et al., 2021, for any model trained
    symmetrically in its rows): coverage at least ``1 - 2 alpha`` for jackknife+
    (``cv=LeaveOneOut()``) and at least ``1 - 2 alpha - min(2 (1 - 1/K) / (n/K + 1),
    (1 - K/n) / (K + 1))`` for CV+ with ``K`` equal folds. That is a worst-case floor: in
    practice coverage is near ``1 - alpha`` (a little below it on some data sets), and
    flexible models on small data can over-cover. `predict_proba` is the fold models' mean
    probability, each weighted by its fold's share of the rows.

    With ``class_conditional=True`` (Mondrian), label ``y``'s p-value counts only the
    ``n_y`` training rows of class ``y``: ``(1 + #{i : y_i = y, s_i >= s_{k(i)}(x, y)}) /
    (n_y + 1)``. Barber et al.'s argument, applied to the rows of one class, then gives
    jackknife+ coverage at least ``1 - 2 alpha`` within every class. For CV+ no
    class-wise floor is proved here (the folds split a class unevenly); the tests check
    each class's coverage over resplits against the marginal floor with ``n_y`` rows in
    place of ``n``. A class with too few rows for a level is in every set, with a
    warning. There is no group-conditional variant: use `SplitConformalClassifier`.

    Parameters
    ----------
    estimator : classifier with predict_proba, default=None
        Any scikit-learn classifier or Pipeline (not fitted: it is cloned and fitted once
        per fold); ``None`` means ``LogisticRegression()``. A fold model that never saw a
        class gives it probability 0.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    conformity_score : {"lac", "aps", "raps", "saps", "topk"} or ClassificationScore, \
default="lac"
        As in `SplitConformalClassifier`; top-k sets no longer share one size, since each
        fold's model ranks the labels its own way.
    randomized : bool, default=True
        Randomise APS/RAPS/SAPS with one uniform draw per row, shared by the fold models
        (as in the split classifier).
    k_reg : int, default=1
        RAPS: number of top labels not penalised.
    lambda_reg : float, default=0.01
        RAPS: penalty per rank beyond ``k_reg``.
    saps_weight : float, default=0.3
        SAPS: cost of each rank beyond the first.
    class_conditional : bool, default=False
        Compare each label's score with the training rows of that class only (see
        above): coverage within every class instead of on average over classes (at least
        ``1 - 2 alpha`` for jackknife+; no proved floor for CV+).
    cv : int, cross-validation splitter or list of (train, test) pairs, default=5
        An int ``K >= 2``: ``KFold(K, shuffle=True)`` seeded by ``random_state`` (not
        stratified: folds that depend on the labels of the training rows, but not on the
        test row's, would break the symmetry the guarantee rests on; pass a
        ``StratifiedKFold`` to accept that). A splitter, or a list of ``(train, test)``
        index pairs, must put every row in exactly one test fold and train on all the
        other rows (``KFold``, ``StratifiedKFold``,
        ``GroupKFold`` with ``groups`` in ``fit``, ``LeaveOneOut`` for jackknife+).
    batch_size : int, default=None
        Test rows whose ``(rows, K, n_classes)`` scores are built at once (``None``:
        automatic).
    n_jobs : int, default=None
        Folds fitted in parallel (joblib; a ``joblib.parallel_config`` applies).
    random_state : int, Generator or None, default=None
        Seeds the folds of an int ``cv``, the fold models whose own ``random_state`` is
        None, and the uniform draws of randomised scores (as in `SplitConformalClassifier`:
        with an int seed the same rows in the same order get the same sets, and identical
        rows predicted one per call share one draw; for streams of repeated rows use
        ``None`` or a Generator, which draw afresh at every call, or predict in batches).
    verbose : bool, default=False
        Show a progress bar of the fold fits.

    Attributes
    ----------
    estimators_ : list of classifiers
        The ``K`` fold models, model ``k`` trained without fold ``k``.
    classes_ : ndarray of shape (n_classes,)
        Labels in the column order of `predict_set`: every label of ``y`` in ``fit``.
    fold_index_ : ndarray of shape (n_samples,)
        The fold of each training row (the model that did not see it).
    conformity_scores_ : ndarray of shape (n_samples,)
        Out-of-fold score of each training row's true label.
    class_index_ : ndarray of int, shape (n_samples,)
        Each training row's class, as its position in ``classes_``.
    n_calibration_ : int
        ``n``: every training row is a calibration row.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.

    See Also
    --------
    SplitConformalClassifier : one model and held-out calibration rows: the better choice
        when data is plentiful (its guarantee is ``1 - alpha`` exactly, it costs one fit,
        and it offers group-conditional sets).
    uqconform.regression.CrossConformalRegressor : CV+ and jackknife+ intervals.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X, y = load_iris(return_X_y=True)
    >>> cp = CrossConformalClassifier(alpha=0.1, cv=10, random_state=0).fit(X[::2], y[::2])
    >>> sets = cp.predict_set(X[1::2])
    >>> sets.shape, len(cp.estimators_)
    ((75, 3), 10)
    >>> bool((cp.predict_pvalue(X[1::2]) > 0.1).tolist() == sets.tolist())
    True
    """

    _split_alternative = "SplitConformalClassifier"
    #: What the fit depends on: changed after fit, prediction asks for a new fit
    #: (``alpha`` and ``batch_size`` are read at prediction).
    _fit_params = (
        "estimator",
        "cv",
        "random_state",
        "conformity_score",
        "randomized",
        "k_reg",
        "lambda_reg",
        "saps_weight",
        "class_conditional",
    )

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        conformity_score: str | ClassificationScore = "lac",
        randomized: bool = True,
        k_reg: int = 1,
        lambda_reg: float = 0.01,
        saps_weight: float = 0.3,
        class_conditional: bool = False,
        cv: int | Any = 5,
        batch_size: int | None = None,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.randomized = randomized
        self.k_reg = k_reg
        self.lambda_reg = lambda_reg
        self.saps_weight = saps_weight
        self.class_conditional = class_conditional
        self.cv = cv
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _validate_params(self) -> None:
        super()._validate_params()
        check_miscoverage(self.alpha, "alpha", owner=self)
        check_bool(self.class_conditional, "class_conditional")
        self._score_object()

    # ---- fit: out-of-fold scores ---------------------------------------------------------
    def _uniforms(self, stream: int, X: Any, n: int) -> NDArray | None:
        """One uniform per row for randomised scores (stream 0: training rows, 1: test)."""
        if not self._score_object().randomized:
            return None
        return self._rng(stream, content=X).random(n)

    def _store_scores(self, y: NDArray, outputs: NDArray, scored: NDArray, X: Any) -> None:
        u = self._uniforms(0, X, n_rows(X))
        score = self._score_object()
        labels = encode_labels(y, self.classes_)
        self.class_index_ = labels
        with np.errstate(over="ignore"):  # an overflow is an infinite score: warned below
            label_scores = score.label_scores(outputs, labels, None if u is None else u[scored])
        self.conformity_scores_ = check_score_output(
            label_scores, (outputs.shape[0],), f"{score!r}.label_scores"
        )
        warn_infinite_scores(
            self.conformity_scores_,
            "out-of-fold scores",
            "each counts as at least every label's score, raising every p-value: at levels "
            "below about their share of the rows, predictions are sets holding every class",
        )

    def _after_scoring(self) -> None:
        levels = check_call_alpha(None, self.alpha)
        self._warn_if_too_few(levels)
        self._warn_if_unseen()

    # ---- strata: every row, or each class's rows -----------------------------------------
    def _stratum_sizes(self) -> NDArray:
        """The number of training rows each label is compared with: its class's rows with
        ``class_conditional=True`` (one entry per class), else all ``n`` (one entry)."""
        if self.class_conditional:
            return np.bincount(self.class_index_, minlength=self.classes_.size)
        return np.array([self.n_calibration_])

    def _floor_ranks(self, levels: NDArray) -> NDArray:
        """``floor(alpha (n_s + 1))`` of each stratum (rows) and level (columns)."""
        return np.stack(
            [
                conformal_rank(int(size), levels, kind="conformity")
                for size in self._stratum_sizes()
            ]
        )

    def _warn_if_too_few(self, levels: NDArray) -> None:
        short = self._floor_ranks(levels) < 1  # (strata, levels)
        if not short.any():
            return
        if not self.class_conditional:
            _warn_too_few(self.n_calibration_, levels[short[0]], _EVERY_CLASS)
            return
        sizes = self._stratum_sizes()
        classes = np.flatnonzero(short.any(axis=1))
        named = ", ".join(
            f"class {_plain(self.classes_[c])!r} ({sizes[c]} "
            f"{'row' if sizes[c] == 1 else 'rows'}; alpha={levels_text(levels[short[c]])})"
            for c in classes[:3]
        )
        more = f" and {classes.size - 3} more" if classes.size > 3 else ""
        warn_user(
            f"Too few training rows in {named}{more}: with class_conditional=True a class "
            f"needs at least {count_text(minimum_scores(levels.min()))} rows at alpha="
            f"{levels.min():g} (1 / alpha - 1, rounded up, at the smallest level), so that "
            "class is in "
            "every prediction set at those levels.",
            UserWarning,
        )

    def _warn_if_unseen(self) -> None:
        """A class whose rows all fell in one fold: that fold's model never saw it."""
        for k, model in enumerate(self.estimators_):  # a loop over folds
            unseen = np.setdiff1d(self.classes_, model_classes(model))
            if unseen.size:
                warn_user(
                    f"The model of fold {k} never saw class(es) "
                    f"{[_plain(c) for c in unseen[:3]]} (all their rows are in that fold): "
                    "it gives them probability 0, so their out-of-fold scores are the "
                    "largest possible and the p-values of those classes (of every class "
                    "without class_conditional) rise toward 1, making the sets larger. "
                    "Use folds that keep every class in every training part (a "
                    "StratifiedKFold, whose label-dependent folds leave the 1 - 2 alpha "
                    "floor unproved) or more rows of those classes.",
                    UserWarning,
                )
                return

    # ---- prediction ----------------------------------------------------------------------
    def _fold_sorted_scores(self) -> list[list[NDArray]]:
        """Each fold's out-of-fold scores, sorted, split by stratum (each class's with
        ``class_conditional=True``, else one array)."""
        n_strata, folds = self._stratum_sizes().size, len(self.estimators_)
        stratum = self.class_index_ if self.class_conditional else 0
        key = self.fold_index_ * n_strata + stratum
        order = np.lexsort((self.conformity_scores_, key))
        ends = np.cumsum(np.bincount(key, minlength=folds * n_strata))
        parts = np.split(self.conformity_scores_[order], ends[:-1])
        return [parts[k * n_strata : (k + 1) * n_strata] for k in range(folds)]

    def _counts_at_least(
        self, X: Any, method: str, sides: tuple[Literal["left", "right"], ...] = ("left",)
    ) -> NDArray:
        """``(n_samples, n_classes)``: for each row and label, the number of training rows
        (of the label's class with ``class_conditional=True``) whose score is at least the
        label's score under their fold's model; ``sides=("left", "right")``: shape
        ``(2, n_samples, n_classes)``, those at least and those greater, from the same
        scores (one pass: randomised scores draw once)."""
        self._check_fitted(method)
        X = row_sliceable(self._validate_X(X, reset=False))
        n, folds = n_rows(X), len(self.estimators_)
        u = self._uniforms(1, X, n)
        score = self._score_object()
        by_fold = self._fold_sorted_scores()
        counts = np.empty((len(sides), n, self.classes_.size), dtype=np.intp)
        for rows in self._row_batches(n, folds * self.classes_.size):
            proba = self._fold_outputs(slice_rows(X, rows.start, rows.stop))  # (b, K, classes)
            draws = None if u is None else u[rows]
            total = np.zeros((len(sides), proba.shape[0], self.classes_.size), dtype=np.intp)
            for k, strata in enumerate(by_fold):  # a loop over folds
                with np.errstate(over="ignore"):  # infinite scores: fit warns of the cause
                    set_scores = score.set_scores(proba[:, k], draws)
                test = check_score_output(set_scores, proba[:, k].shape, f"{score!r}.set_scores")
                for j, side in enumerate(sides):  # at least, and greater
                    if len(strata) == 1:
                        total[j] += strata[0].size - np.searchsorted(strata[0], test, side=side)
                        continue
                    for c, scores in enumerate(strata):  # and over classes: Mondrian counts
                        found = np.searchsorted(scores, test[:, c], side=side)
                        total[j, :, c] += scores.size - found
            counts[:, rows] = total
        return counts[0] if len(sides) == 1 else counts

    def predict_pvalue(self, X: Any, *, smooth: bool = False) -> NDArray:
        """Cross-conformal p-value of every class for every row:
        ``(1 + #{i : s_i >= s_{k(i)}(x, c)}) / (n + 1)``; with ``class_conditional=True``
        ``(1 + #{i : y_i = c, s_i >= s_{k(i)}(x, c)}) / (n_c + 1)``, over the ``n_c``
        training rows of class ``c``.

        ``predict_set(X, alpha)`` holds exactly the classes whose p-value exceeds
        ``alpha`` (for randomised scores with an int ``random_state``: the same draws for
        the same rows in the same order), but for levels within the rank tolerance of
        `uqconform.quantiles.conformal_rank` below a multiple of ``1 / (n + 1)`` (of
        ``1 / (n_c + 1)``), which the sets read as that multiple (``alpha = 0.1 - 1e-11``
        as 0.1).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        smooth : bool, default=False
            Smoothed p-values ``(g + u (e + 1)) / (n + 1)``, as
            `SplitConformalClassifier.predict_pvalue` gives: ``g`` training rows scoring
            above the label under their fold's model, ``e`` equal to it, ``u`` uniform on
            [0, 1] (one draw per row and class, from ``random_state``). The sets of
            `predict_set` are those of the unsmoothed p-values. With an int
            ``random_state`` the draws are a function of the seed and the rows of the
            call: a row given again in another call gets the same draw, so over repeated
            rows predicted one call at a time the p-values are no longer uniform (use
            ``None`` or a Generator there).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_bool(smooth, "smooth")
        if not smooth:
            counts = self._counts_at_least(X, "predict_pvalue")
            return (1.0 + counts) / (self._stratum_sizes() + 1.0)
        at_least, greater = self._counts_at_least(X, "predict_pvalue", ("left", "right"))
        draws = self._rng(stream=3, content=X).random(at_least.shape)
        return (greater + draws * (at_least - greater + 1.0)) / (self._stratum_sizes() + 1.0)

    def predict_set(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        """Prediction sets as a boolean mask over ``classes_``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.

        Returns
        -------
        ndarray of bool, shape (n_samples, n_classes) or (n_samples, n_classes, k)
            ``sets[i, j]`` is True when ``classes_[j]`` is in the set of row ``i``. Every
            class, with a warning, where ``n`` rows are too few for the level (with
            ``class_conditional=True``: the classes whose ``n_c`` rows are too few).
        """
        self._check_fitted("predict_set")
        value = self.alpha if alpha is None else alpha
        levels = check_call_alpha(alpha, self.alpha, X)
        counts = self._counts_at_least(X, "predict_set")
        self._warn_if_too_few(levels)
        # p > alpha  <=>  1 + count > floor(alpha (n + 1)), counts being integers (n: the
        # label's class's rows with class_conditional=True)
        sets = (1 + counts)[..., None] > self._floor_ranks(levels)
        return sets[..., 0] if np.ndim(value) == 0 else sets

    def _combine(self, proba: NDArray) -> NDArray:
        """The fold models' mean, each weighted by its fold's share of the rows."""
        return np.einsum("nkc,k->nc", proba, self._model_shares())
