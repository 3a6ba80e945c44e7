"""Split conformal classification: LAC, APS, RAPS and top-k sets, class-conditional option."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from uqconform._rows import row_sliceable
from uqconform._validation import (
    check_bool,
    check_class_labels,
    check_row_order,
    check_score_output,
    check_wrapper_fitted,
    class_probabilities,
    label_type_hint,
    labels_text,
    missing_proba_error,
    model_classes,
    refuse_boolean_labels,
    refuse_model_class,
)
from uqconform.base import ConformalPredictor, sets_within_thresholds
from uqconform.scores.classification import ClassificationScore, get_classification_score

__all__ = ["ClassificationScoreMixin", "SplitConformalClassifier", "encode_labels"]


def encode_labels(y: NDArray, classes: NDArray, name: str = "y") -> NDArray:
    """Column index of each label in ``classes`` (any label type); unknown labels raise.

    Examples
    --------
    >>> import numpy as np
    >>> encode_labels(np.array(["b", "a", "b"]), np.array(["a", "b"]))
    array([1, 0, 1])
    """
    labels = np.asarray(y)
    refuse_boolean_labels(labels, classes, name)  # True == 1: not class 1's label
    if (
        labels.dtype.kind in "iu"
        and classes.dtype.kind in "iu"
        and np.array_equal(classes, np.arange(classes.size))
        and labels.size
        and labels.min() >= 0
        and labels.max() < classes.size
    ):  # labels 0..K-1 are their own column index (a copy: never a view of the user's y)
        return labels.astype(np.intp)
    # int64 against uint64: numpy compares them as floats (2**60 + 1 == 2**60); labels that
    # do not compare with the classes (int and str): both matched as Python objects
    try:
        if {labels.dtype.kind, classes.dtype.kind} == {"i", "u"}:
            raise TypeError
        sorter = np.argsort(classes, kind="stable")
        position = np.searchsorted(classes, y, sorter=sorter)
        position = sorter[np.minimum(position, classes.size - 1)]
        unknown = np.asarray(classes[position] != y)
    except TypeError:
        position = pd.Index(classes.astype(object)).get_indexer(labels.astype(object))
        unknown = position < 0
    if np.any(unknown):
        try:
            unseen = np.unique(labels[unknown])
        except TypeError:  # unknown labels of several types: in order of appearance
            unseen = pd.unique(labels[unknown])
        raise ValueError(
            f"`{name}` contains labels the model never saw during fit: "
            f"{labels_text(unseen, 5)}. Known classes: {labels_text(classes)}."
            f"{label_type_hint(unseen, classes, name)}"
        )
    return position


def _estimator_has(name: str):
    def check(self) -> bool:
        model = getattr(self, "estimator_", None)
        if model is None:
            model = self._estimator_or_default()
        return hasattr(model, name)

    return check


class ClassificationScoreMixin:
    """The score object of a wrapper's ``conformity_score``, ``randomized``, ``k_reg``,
    ``lambda_reg`` and ``saps_weight`` parameters (the split and cross-conformal
    classifiers)."""

    conformity_score: str | ClassificationScore
    randomized: bool
    k_reg: int
    lambda_reg: float
    saps_weight: float

    def __getattr__(self, name: str) -> Any:
        """Reached only for attributes not found: ``predict_interval``, the regressors'
        method, gets a hint (``hasattr(model, "predict_interval")`` stays false: the
        library's evaluation tells classifiers by it)."""
        if name == "predict_interval":
            raise AttributeError(
                f"{type(self).__name__} is a classifier, and classifiers return sets: use "
                "predict_set(X, alpha=...) (one boolean column per class of `classes_`).",
                name=name,
                obj=self,
            )
        # the normal lookup again: a property's own AttributeError keeps its message
        return object.__getattribute__(self, name)

    def _reads_distribution(self) -> bool:
        """Whether the score reads the probabilities as a distribution (their rows are
        then checked to sum to 1)."""
        return bool(getattr(self._score_object(), "reads_distribution", True))

    def _score_object(self) -> ClassificationScore:
        refuse_model_class(self.conformity_score, name="conformity_score")
        return get_classification_score(
            self.conformity_score,
            randomized=self.randomized,
            k_reg=self.k_reg,
            lambda_reg=self.lambda_reg,
            saps_weight=self.saps_weight,
        )


class SplitConformalClassifier(ClassificationScoreMixin, ClassifierMixin, ConformalPredictor):
    """Split conformal prediction sets around any scikit-learn classifier.

    The sets contain the true label with probability at least ``1 - alpha`` (marginally;
    for every class with ``class_conditional=True``; for every group with ``groups=``).
    Randomised APS/RAPS/SAPS cover between ``1 - alpha`` and ``1 - alpha + 1/(n + 1)`` on
    average (``n`` calibration rows) when the scores have no ties, like LAC; without
    randomisation they cover more. Probabilities of exactly 0 (trees, nearest neighbours)
    tie APS scores whatever the draw, and then only the lower bound holds (on a depth-6
    tree on digits randomised APS over-covers, and non-randomised APS puts every class in
    every set: the "Ties" example of the split-conformal docs page).

    Parameters
    ----------
    estimator : classifier with predict_proba, default=None
        Any scikit-learn classifier or Pipeline; ``None`` means ``LogisticRegression()``.
        A fitted model (or ``FrozenEstimator(model)``) can be calibrated without ``fit``;
        so can a model outside scikit-learn with ``predict_proba`` and ``classes_``
        (taken as fitted).
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    conformity_score : {"lac", "aps", "raps", "saps", "topk"} or ClassificationScore, \
default="lac"
        ``"lac"``: ``1 - p(y|x)``, smallest sets on average. ``"aps"``: cumulative mass of the
        labels ranked above ``y``, sets adapt to how uncertain each row is. ``"raps"``: APS
        with a rank penalty, smaller sets when there are many classes. ``"saps"``: the top
        probability and the rank only, robust to poorly calibrated small probabilities.
        ``"topk"``: same size for every row.
    randomized : bool, default=True
        Randomise APS/RAPS/SAPS with one uniform draw per row, so coverage exceeds
        ``1 - alpha`` by less than ``1/(n + 1)`` (when no probability is exactly 0);
        randomised sets can be empty on confident rows (in reviews about 1-2% of the rows
        at accuracy 0.7, depending on the class geometry and the score, and about 10% at
        accuracy 0.99; the set-ups and figures are in docs/methods/split.md).
        ``False``: APS sets keep every label whose mass ranked above it is within the
        threshold, so the label that crosses it too; RAPS adds the label's own rank
        penalty to that mass, so a label that crosses the threshold through its penalty
        is left out (smaller sets than Angelopoulos et al.'s non-randomised rule, which
        keeps it; still at least ``1 - alpha``). Never empty, more conservative (on exact
        ties this keeps more labels than stopping at
        the first label that reaches the threshold, which could drop a true label of
        probability 0); SAPS scores with the draw ``u = 1`` and always keeps the
        top-ranked label (never empty: with ``u = 1`` alone, confident rows got empty
        sets). Non-randomised APS puts every class in every set when at least
        ``floor((n + 1) alpha)`` of the ``n`` calibration rows' true labels (about a
        fraction ``alpha``) have probability 0 or are their row's last label of positive
        probability (all score exactly 1): exact 0/1 probabilities (a fully grown tree),
        or a model that rounds small probabilities to 0.
        LAC and top-k draw nothing (LAC sets can be empty whatever this is).
    k_reg : int, default=1
        RAPS: number of top labels not penalised.
    lambda_reg : float, default=0.01
        RAPS: penalty per rank beyond ``k_reg``.
    saps_weight : float, default=0.3
        SAPS: cost of each rank beyond the first.
    class_conditional : bool, default=False
        Calibrate one threshold per class (Mondrian by label): coverage holds for each class.
    batch_size : int, default=None
        Rows predicted at once (``None``: automatic), to bound memory on large inputs.
    random_state : int, Generator or None, default=None
        Seeds the uniform draws of randomised scores (and the classifier trained by
        ``fit`` where its own ``random_state`` is None); the same seed gives the same sets
        (randomised scores draw at calibrate too: a seed set after calibrate asks for
        calibrate again).
        With an int seed a prediction call's draws depend on the seed and on the values of
        the rows it is given, in their order, so the same rows in the same order get the
        same sets again (another order, or other rows in the call, act like another seed:
        about as many sets change). Rows predicted one per call get fresh draws only where
        their values differ: identical rows (categorical features) predicted one per call
        share one draw, and such a run does not cover as a batch does; there, use ``None``
        or a Generator, or predict in batches. A Generator is used as it is: each call
        draws on from its state (as scikit-learn does with a RandomState), so predicting
        the same rows again can give other sets; ``None`` draws afresh at every call.
    likelihood_ratio : callable or None, default=None
        Weighted conformal prediction under covariate shift, as in
        `uqconform.regression.SplitConformalRegressor`: ``likelihood_ratio(X)`` gives
        each row's density ratio ``dP_test / dP_calibration``; rows far in the shifted
        region can get every class in their sets.

    Attributes
    ----------
    estimator_ : classifier
    classes_ : ndarray of shape (n_classes,)
        Labels in the column order of `predict_set`.
    conformity_scores_ : ndarray of shape (n_calibration,)
        Score of the true label of each calibration row.
    n_calibration_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.model_selection import train_test_split
    >>> X, y = load_iris(return_X_y=True)
    >>> X_fit, X_rest, y_fit, y_rest = train_test_split(X, y, test_size=0.6, random_state=0)
    >>> X_cal, X_test, y_cal, y_test = train_test_split(X_rest, y_rest, random_state=0)
    >>> cp = SplitConformalClassifier(alpha=0.1, conformity_score="aps", random_state=0)
    >>> sets = cp.fit(X_fit, y_fit).calibrate(X_cal, y_cal).predict_set(X_test)
    >>> sets.shape, sets.dtype
    ((23, 3), dtype('bool'))
    """

    _unbounded_prediction = "sets holding every class"

    # what the rows of a group unseen at calibration get (see `_group_index`)
    _unseen_group_lead = "their sets hold"
    _unseen_group_prediction = "every class (p-value 1 for every class)"

    #: Parameters the calibration scores depend on (changing one needs a new calibrate).
    _score_params = (
        "conformity_score",
        "randomized",
        "k_reg",
        "lambda_reg",
        "saps_weight",
        "class_conditional",
        "likelihood_ratio",
    )

    @property
    def _calibration_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The score's parameters, and the seed where the score draws uniforms at
        calibrate (a seed changed after calibrate gave sets no fresh model reproduces)."""
        return self._score_params + (("random_state",) if self._draws_at_prediction() else ())

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
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
        likelihood_ratio: Any = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.randomized = randomized
        self.k_reg = k_reg
        self.lambda_reg = lambda_reg
        self.saps_weight = saps_weight
        self.class_conditional = class_conditional
        self.batch_size = batch_size
        self.random_state = random_state
        self.likelihood_ratio = likelihood_ratio

    def _default_estimator(self) -> BaseEstimator:
        return LogisticRegression()

    def _validate_params(self) -> None:
        super()._validate_params()
        self._score_object()
        check_bool(self.class_conditional, "class_conditional")
        if not hasattr(self._estimator_or_default(), "predict_proba"):
            raise missing_proba_error(
                self._estimator_or_default(),
                "`estimator`",
                "conformal sets need class probabilities",
            )

    @property
    def classes_(self) -> NDArray:
        """Class labels, in the column order of the sets."""
        check_is_fitted(self, "estimator_")
        return model_classes(self.estimator_)

    def _check_target(self, y, n, *, calibrating):
        return check_class_labels(y, n, training=not calibrating)

    def _output_columns(self) -> int:
        return len(self.classes_)

    def _draws_at_prediction(self) -> bool:
        return bool(self._score_object().randomized)

    def _uniforms(self, rng: np.random.Generator, n: int) -> NDArray | None:
        return rng.random(n) if self._score_object().randomized else None

    def _calibration_scores(self, X, y):
        index = encode_labels(y, self.classes_)
        proba = class_probabilities(
            self.estimator_, X, len(self.classes_), check_sums=self._reads_distribution()
        )
        # The calibration rows enter the seed, as the predicted rows do: with the seed alone
        # every calibration of n rows drew the same n uniforms, and a fixed seed then shifted
        # coverage over fresh data by about 1/sqrt(n) (0.887 to 0.936 at n = 30, nominal 0.9).
        randomized = self._score_object().randomized
        u = self._uniforms(self._rng(0, content=X), len(y)) if randomized else None
        score = self._score_object()
        with np.errstate(over="ignore"):  # an overflow is an infinite score: warned later
            label_scores = score.label_scores(proba, index, u)
        scores = check_score_output(label_scores, (len(y),), f"{score!r}.label_scores")
        if self.class_conditional:
            return scores, index, len(self.classes_)
        return scores, np.zeros_like(index), 1

    def _set_scores(self, X: Any, rng: np.random.Generator) -> NDArray:
        """The score of every class for every row (the uniforms drawn on from ``rng``)."""
        proba = class_probabilities(
            self.estimator_, X, len(self.classes_), check_sums=self._reads_distribution()
        )
        score = self._score_object()
        with np.errstate(over="ignore"):  # an infinite score (calibrate warns of its cause)
            scores = score.set_scores(proba, self._uniforms(rng, proba.shape[0]))
        return check_score_output(scores, proba.shape, f"{score!r}.set_scores")

    def _predict_batch(self, X, thresholds, alphas, rng):
        scores = self._set_scores(X, rng)
        return sets_within_thresholds(scores, thresholds, alphas.size)

    def predict_set(
        self, X: Any, alpha: float | ArrayLike | None = None, *, groups: ArrayLike | None = None
    ) -> NDArray:
        """Prediction sets as a boolean mask over ``classes_``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups.

        Returns
        -------
        ndarray of bool, shape (n_samples, n_classes) or (n_samples, n_classes, k)
            ``sets[i, j]`` is True when ``classes_[j]`` is in the set of row ``i``.
        """
        return self._predict_batched(X, alpha, groups, bool, "predict_set")

    def predict_pvalue(
        self, X: Any, *, groups: ArrayLike | None = None, smooth: bool = False
    ) -> NDArray:
        """Conformal p-value of every class for every row.

        The p-value of class ``c`` for row ``x`` is ``(1 + m) / (n + 1)``, where ``m`` of
        the ``n`` calibration scores of the row's stratum (its group, and class ``c`` with
        ``class_conditional=True``) are at least the score of ``(x, c)``. For a true label
        it is uniform on ``{1/(n + 1), ..., 1}`` or above (valid), and
        ``predict_set(X, alpha)`` holds exactly the classes whose p-value exceeds
        ``alpha``: for every score that draws nothing (LAC, top-k, and APS, RAPS and SAPS
        with ``randomized=False``), and for randomised scores with an int
        ``random_state`` (the same draws for the same rows in the same order; with
        ``None`` or a Generator every call draws afresh), except at levels within
        rounding of a multiple of ``1 / (n + 1)`` (the sets' rank tolerance counts
        ``(n + 1) alpha`` near an integer as that integer; the p-values are exact). With
        ``likelihood_ratio``: ``(W_m + w) / (W + w)``, the calibration weights of those
        ``m`` scores and of all ``n``, plus the row's own weight ``w``; a ratio of float
        sums, exact only up to rounding, so there is one more exception: at an exact
        weighted tie (a p-value equal to ``alpha`` in exact arithmetic) it can read
        ``alpha`` plus a rounding error (4e-17 at ``alpha=0.1`` in a review) for a class
        the set rightly leaves out.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups. A stratum
            without calibration data (a group not seen at calibration, a class absent
            from its group's calibration rows) gives p-value 1, as its sets hold the class.
        smooth : bool, default=False
            Smoothed p-values ``(g + u (e + 1)) / (n + 1)``: ``g`` calibration scores
            greater than the class's score, ``e`` equal to it, ``u`` uniform on [0, 1]
            (one draw per row and class, from ``random_state``). Ties then no longer make
            the p-values conservative: a true label's p-value is exactly uniform on
            [0, 1], so ``p > alpha`` covers with probability exactly ``1 - alpha`` even
            for scores that tie (LAC on a tree's probabilities, top-k), for every score
            whose set score is its calibration score: all but APS, RAPS and SAPS with
            ``randomized=False``, whose sets always keep a label whatever its score
            and stay conservative either way. The sets of `predict_set` are those of the
            unsmoothed p-values. With an int ``random_state`` the draws are a function of
            the seed and the rows of the call: a row given again in another call gets the
            same draw, so over repeated rows predicted one call at a time the p-values are
            no longer uniform (use ``None`` or a Generator there).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.

        Examples
        --------
        >>> from sklearn.datasets import load_iris
        >>> X, y = load_iris(return_X_y=True)
        >>> cp = SplitConformalClassifier(alpha=0.1).fit(X[::2], y[::2])
        >>> p = cp.calibrate(X[1::4], y[1::4]).predict_pvalue(X[3::4])
        >>> bool(((p > 0.1) == cp.predict_set(X[3::4])).all())
        True
        """
        self._check_calibrated("predict_pvalue")
        check_bool(smooth, "smooth")
        check_row_order(X, groups, "groups")
        X = row_sliceable(self._validate_X(X, reset=False))
        # the draws of predict_set: one generator for the call, drawn on batch by batch
        rng = self._rng(stream=1, content=X if self._draws_at_prediction() else None)
        return self._conformal_pvalues(
            X, groups, smooth, len(self.classes_), lambda block, *_: self._set_scores(block, rng)
        )

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: Any) -> NDArray:
        """Class probabilities of the wrapped model, read as the sets read them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), float64
            A column per class of ``classes_``, in that order: a model's DataFrame labelled
            by class is read by label; a torch tensor, a list or a sparse matrix becomes an
            array.

        Raises
        ------
        ValueError
            When the model's output has another number of columns, NaN or infinite
            values, or values outside [0, 1] (logits, say), as for the sets.
        """
        check_wrapper_fitted(
            self,
            "estimator_",
            "predict_proba",
            needs="fit(X, y) (or calibrate(X_calib, y_calib) alone around a fitted `estimator`)",
        )
        X = self._validate_X(X, reset=False)
        return class_probabilities(self.estimator_, X, len(self.classes_), check_sums=False)
