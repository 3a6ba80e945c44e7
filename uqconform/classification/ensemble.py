"""Split conformal prediction on the mean probability of several heads: the plain ensemble."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator

from uqconform._validation import (
    check_frozen_is_fitted,
    explaining_cloned_lists,
)
from uqconform._warnings import warn_user
from uqconform.classification.heads import (
    HeadEnsemble,
    check_head_ensemble_fitted,
    given_head_ensemble,
    given_heads,
    refuse_head_ensemble_at_fit,
)
from uqconform.classification.split import SplitConformalClassifier
from uqconform.scores.classification import ClassificationScore

__all__ = ["EnsembleConformalClassifier"]


class EnsembleConformalClassifier(SplitConformalClassifier):
    """Split conformal sets (LAC, APS, RAPS, SAPS, top-k) on the heads' mean probability.

    The baseline every multi-dimensional score is measured against: the same heads, their
    probabilities averaged, one scalar score, plain split CP (finite-sample valid).

    Parameters
    ----------
    estimator : classifier, list of fitted classifiers or fitted HeadEnsemble, default=None
        Cloned into ``n_heads`` diverse heads by ``fit``, or the fitted heads themselves
        (``calibrate`` then works without ``fit``; ``fit`` trains nothing then: it checks
        X and y against the heads and warns), or a fitted `HeadEnsemble` (``calibrate``
        alone: its heads, each reading its own columns of ``X``).
    n_heads : int, default=5
    diversity : {"bootstrap", "subspace", "seeds"}, default="bootstrap"
        How ``fit`` makes the heads differ: class-stratified bootstrap samples of the rows,
        random subsets of 70% of the columns (rounded, at least one; a head per subset), or
        different ``random_state`` values. For subsets of another share, pass
        ``HeadEnsemble(estimator, diversity="subspace", subspace_fraction=...)``, fitted,
        as ``estimator`` and call ``calibrate`` alone.
    n_jobs : int, default=None
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1).
    conformity_score : {"lac", "aps", "raps", "saps", "topk"} or ClassificationScore, \
default="lac"
        The score of the mean probability (see `SplitConformalClassifier`): a name, or a
        score object such as ``APSScore(randomized=False)`` or a subclass of
        `uqconform.scores.ClassificationScore` (an instance, not the class), which carries
        its own settings (``randomized``, ``k_reg``, ``lambda_reg`` and ``saps_weight``
        must then keep their defaults).
    randomized : bool, default=True
        Randomise APS/RAPS/SAPS so that coverage exceeds ``1 - alpha`` by less than
        ``1/(n + 1)`` (when no mean probability is exactly 0).
    k_reg : int, default=1
        RAPS: top labels not penalised.
    lambda_reg : float, default=0.01
        RAPS: penalty per rank beyond ``k_reg``.
    saps_weight : float, default=0.3
        SAPS: cost of each rank beyond the first.
    class_conditional : bool, default=False
        One threshold per class.
    batch_size : int, default=None
        Rows predicted at once.
    random_state : int, numpy Generator or None, default=None
        Seeds the heads and the uniform draws (each row's bootstrap draw is its own, so
        the names of the classes change nothing).
    verbose : bool, default=False
        Show a progress bar of the fitted heads.

    Attributes
    ----------
    estimator_ : HeadEnsemble
        The heads (trained by ``fit``, or the fitted ones given), whose mean probability
        the score reads.
    classes_ : ndarray of shape (n_classes,)
        The heads' labels, in the column order of the sets.
    conformity_scores_ : ndarray of shape (n_calibration,)
        The calibration rows' scores of their true labels.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> X, y = load_digits(return_X_y=True)
    >>> cp = EnsembleConformalClassifier(n_heads=3, alpha=0.1, random_state=0)
    >>> sets = cp.fit(X[:800], y[:800]).calibrate(X[800:1300], y[800:1300]).predict_set(X[1300:])
    >>> sets.shape
    (497, 10)
    """

    def __init__(
        self,
        estimator: Any = None,
        n_heads: int = 5,
        diversity: str = "bootstrap",
        alpha: float | ArrayLike = 0.1,
        conformity_score: str | ClassificationScore = "lac",
        randomized: bool = True,
        k_reg: int = 1,
        lambda_reg: float = 0.01,
        saps_weight: float = 0.3,
        class_conditional: bool = False,
        batch_size: int | None = None,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.n_heads = n_heads
        self.diversity = diversity
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.randomized = randomized
        self.k_reg = k_reg
        self.lambda_reg = lambda_reg
        self.saps_weight = saps_weight
        self.class_conditional = class_conditional
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _heads(self) -> HeadEnsemble:
        return HeadEnsemble(
            self.estimator,
            n_heads=self.n_heads,
            diversity=self.diversity,
            n_jobs=self.n_jobs,
            random_state=self.random_state,  # a Generator too: fit draws the heads' seeds
            verbose=self.verbose,
        )

    def _estimator_or_default(self) -> BaseEstimator:
        return self._heads()

    _fit_params = ("estimator", "n_heads", "diversity")  # the heads fit trained

    def _make_estimator(self) -> BaseEstimator:
        refuse_head_ensemble_at_fit(self)  # heads that would average heads
        check_frozen_is_fitted(self.estimator, self)
        return self._heads()

    def _train_estimator(self, X: Any, y: Any, params: dict[str, Any]) -> None:
        with explaining_cloned_lists(self.estimator):  # fitted heads, unfitted by a clone?
            super()._train_estimator(X, y, params)

    def _adopts_after_fit(self) -> bool:
        # heads (a list or a HeadEnsemble) set after fit replace fit's, as in
        # MultiDimScoreClassifier (fit refuses a HeadEnsemble: no other way in); one model
        # is a changed parameter, which the settings check names
        return given_heads(self.estimator)

    def _prefit_estimator(self) -> BaseEstimator:
        if isinstance(self.estimator, (list, tuple)):
            with explaining_cloned_lists(self.estimator):
                return self._heads().fit(None, None)
        ensemble = given_head_ensemble(self.estimator)  # fitted heads, as one object
        if ensemble is not None:
            check_head_ensemble_fitted(ensemble)
        model = super()._prefit_estimator()
        if given_head_ensemble(model) is not None:  # fitted heads, given as one object
            return model
        warn_user(
            f"{type(self).__name__}.calibrate adopted one fitted model: its sets are split "
            "conformal sets of that model alone (n_heads and diversity make heads at fit "
            "only). Pass a list of fitted heads as `estimator`, or call fit(X, y) to train "
            f"{self.n_heads} heads.",
            UserWarning,
        )
        return model
