"""The part of cross-conformal prediction that does not depend on the task: ``K`` models,
model ``k`` trained on every row outside fold ``k``, and each row scored by the model that
did not see it (Barber, Candes, Ramdas and Tibshirani, 2021; Vovk, 2015).

`CrossFitWrapper` checks the folds, fits the models and collects the out-of-fold outputs;
the regression and classification wrappers turn those outputs into scores and the scores
into intervals or sets.
"""

from __future__ import annotations

import numbers
import warnings
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from joblib import delayed
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.utils.metadata_routing import get_routing_for_object
from sklearn.utils.validation import check_is_fitted

from uqconform._parallel import run_fits
from uqconform._rows import fit_params_rows, n_rows, take_rows
from uqconform._seeding import integer_seed, seeded_clone, seeded_splitter
from uqconform._validation import (
    check_int,
    check_paired_rows,
    check_row_order,
    check_weights_row_order,
    model_given_hint,
    no_calibrate_step,
    refuse_non_finite,
)
from uqconform.base import (
    ModelWrapper,
    check_calibration_settings,
    keeps_state_on_error,
    record_calibration_settings,
    refuse_changed_digest,
    remember_training_rows,
)
from uqconform.linearize import parameter_digest

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["CrossFitWrapper"]

# Cells of the per-batch arrays of a prediction built at once (rows x models x classes,
# or rows x calibration rows for the CV+ interval ends).
_BATCH_CELLS = 2_000_000


def many_labels(y: NDArray) -> bool:
    """Whether class labels ``y`` look like a continuous target: more distinct labels than
    half the rows (scikit-learn's rule for its own warning, from 21 rows)."""
    return y.shape[0] > 20 and np.unique(y).size > round(0.5 * y.shape[0])


def _fit_fold(
    estimator: BaseEstimator,
    X: Any,
    y: NDArray,
    rows: NDArray,
    params: dict,
    fold: int,
    quiet: bool = False,
    stratified_caveat: str = "",
) -> Any:
    """``estimator`` fitted on the rows ``rows`` (per-row fit parameters taken with them);
    a classifier that refuses training rows of one class is named with its fold, and a
    stratified splitter advised (with ``stratified_caveat``, what it costs the wrapper).
    ``quiet``: scikit-learn's warning that the labels look continuous is silenced (the
    wrapper warned once, not once per fold)."""
    targets = y[rows]
    try:
        with warnings.catch_warnings() if quiet else nullcontext():
            if quiet:
                warnings.filterwarnings("ignore", "The number of unique classes", UserWarning)
            return estimator.fit(
                take_rows(X, rows), targets, **fit_params_rows(params, y.shape[0], rows)
            )
    except ValueError as error:
        # (another fault of the model, e.g. an invalid parameter, keeps its own message)
        one_class = is_classifier(estimator) and np.unique(targets).size == 1
        if not one_class or "class" not in str(error).lower():
            raise
        raise ValueError(
            f"The model of fold {fold} trains on {rows.size} rows of a single class, and "
            f"{type(estimator).__name__} refused them ({error}). Use a stratified splitter "
            f"(cv=StratifiedKFold(k){stratified_caveat}) or fewer folds, so that every "
            "fold's training rows hold at least two classes."
        ) from error


def check_fold_count(cv: int, n: int) -> None:
    """Refuse an int ``cv`` with more folds than the ``n`` rows, naming ``cv``."""
    if int(cv) > n:
        rows = f"{n} sample" + ("" if n == 1 else "s")
        raise ValueError(f"`cv`={cv} folds need at least {cv} rows; X has {rows}.")


def refuse_split_iterator(cv: Any) -> None:
    """Refuse a generator (or other iterator) of splits: the first fit would use it up, a
    second would find no folds, and ``clone`` cannot copy it."""
    if hasattr(cv, "__next__"):
        raise ValueError(
            "`cv` is an iterator of splits, which one fit would use up: pass "
            "list(cv), a list of (train, test) index pairs."
        )


def out_of_fold_prediction(
    model: Any,
    X: Any,
    y: NDArray,
    cv: Any,
    seed: int | None,
    fit_params: dict[str, Any],
    n_jobs: int | None,
    learner: str,
) -> NDArray:
    """``cross_val_predict`` of ``model`` on ``(X, y)`` as floats: an int ``cv`` is a
    shuffled ``KFold`` seeded by ``seed`` (at most one fold per row); a splitter that is
    not a partition of the rows (``TimeSeriesSplit``) is refused naming ``cv`` and what
    ``learner`` learns from the out-of-fold residuals."""
    refuse_split_iterator(cv)
    if isinstance(cv, numbers.Integral):
        check_fold_count(int(cv), y.shape[0])
        cv = KFold(int(cv), shuffle=True, random_state=seed)
    else:  # a shuffling splitter left unseeded: seeded too (same seed, same folds)
        cv = seeded_splitter(cv, seed)
    try:
        predicted = cross_val_predict(model, X, y, cv=cv, params=fit_params, n_jobs=n_jobs)
    except ValueError as error:
        if "partition" not in str(error):
            raise
        raise ValueError(
            f"`cv` ({type(cv).__name__}) must hold every fit row out exactly once (a "
            f"partition of the rows, such as KFold): {learner} learns from the out-of-fold "
            "residuals of all of them. For time-ordered rows, KFold(k) without shuffling "
            "gives contiguous blocks."
        ) from None
    predicted = np.asarray(predicted, dtype=float)
    # a NaN would reach the residuals' shape and scale silently (a covariance of NaN, a
    # scale at its floor): refused as the model's own predictions are
    refuse_non_finite(
        predicted,
        "`estimator` predicted NaN or infinite values out of fold",
        "fit rows",
        f" ({learner} learns from those residuals; a model that predicts NaN outside its "
        "training range, such as IsotonicRegression(out_of_bounds='nan'), does so on "
        "held-out folds)",
    )
    return predicted


def reads_groups(cv: Any, unknown: bool = True) -> bool:
    """Whether a splitter's ``split`` reads ``groups`` (scikit-learn's metadata request;
    ``unknown`` for a splitter outside scikit-learn, which cannot tell)."""
    try:
        requests = get_routing_for_object(cv).split.requests
    except (AttributeError, TypeError):
        return unknown
    return bool(requests.get("groups"))


class CrossFitWrapper(ModelWrapper):
    """Base class of the cross-conformal wrappers (not used directly).

    ``fit`` splits the rows into folds (`_splits`), fits one clone of the estimator per
    fold on the other rows, and hands each row's output under the model that did not see
    it to `_store_scores`. Subclasses implement `_model_output` (one model's output on
    some rows), `_store_scores` and the prediction methods; `_splits` and
    `_out_of_sample` may be replaced (bootstrap samples instead of folds).
    """

    _calibrated_attribute = "conformity_scores_"
    #: What the fit depends on: changed after fit, prediction asks for a new fit.
    _fit_params: ClassVar[tuple[str, ...]] = ("estimator", "cv", "random_state")
    #: The split-conformal wrapper to advise when a fitted model is given.
    _split_alternative: str = ""
    # the splitters the messages suggest (Venn-Abers folds calibrate on their own rows, so
    # they drop LeaveOneOut)
    _splitter_examples: str = "KFold, StratifiedKFold, GroupKFold, LeaveOneOut"
    # the method's name in messages, and what a stratified splitter costs it
    _method_name: str = "cross-conformal prediction"
    _stratified_caveat: str = ", whose label-dependent folds leave the 1 - 2 alpha floor unproved"
    # what fit trains, for the progress bar
    _models_description: str = "fold models"
    # how fit scores every row out of sample, for the message of `calibrate`
    _scoring_scheme: str = (
        "trains one model per fold and scores every row with the model that did not see it"
    )

    @property
    def calibrate(self) -> Any:
        """Not a step of cross-conformal prediction: reading it raises an
        ``AttributeError`` that says so (``hasattr(model, "calibrate")`` stays false)."""
        raise no_calibrate_step(
            self, f"`fit(X, y)` {self._scoring_scheme}", self._split_alternative
        )

    # ---- hooks -----------------------------------------------------------------------
    @abstractmethod
    def _model_output(self, model: Any, X: Any) -> NDArray:
        """One fitted model's output on the rows ``X``: ``(n,)`` or ``(n, columns)``."""

    def _checked_model_output(self, model: Any, X: Any, where: str) -> NDArray:
        """`_model_output`, refused unless it has one entry per row of ``X``."""
        output = self._model_output(model, X)
        if len(output) != n_rows(X):
            raise ValueError(
                f"`estimator` (a fitted copy) gave {len(output)} predictions for {n_rows(X)} "
                f"{where}."
            )
        return output

    @abstractmethod
    def _store_scores(self, y: NDArray, outputs: NDArray, scored: NDArray, X: Any) -> None:
        """Set the calibration (``_calibrated_attribute``: conformity scores, tables) from
        the scored rows' targets ``y`` and their out-of-sample outputs."""

    # ---- parameters and folds ---------------------------------------------------------
    def _validate_params(self) -> None:
        super()._validate_params()
        self._check_resampling()
        if isinstance(self._estimator_or_default(), FrozenEstimator):
            raise ValueError(
                "`estimator` is a FrozenEstimator, but cross-conformal prediction trains one "
                "model per fold: pass the unfitted model, or calibrate the fitted one on "
                f"held-out rows with {self._split_alternative}."
            )

    def _check_resampling(self) -> None:
        cv = self.cv
        refuse_split_iterator(cv)
        if isinstance(cv, bool) or not (
            (isinstance(cv, numbers.Integral) and int(cv) >= 2)
            or hasattr(cv, "get_n_splits")
            or _is_list_of_splits(cv)
        ):
            raise ValueError(
                "`cv` must be an int >= 2 (the number of folds), a cross-validation "
                f"splitter such as {self._splitter_examples} (for predefined folds, "
                f"PredefinedSplit), or a list of (train, test) index pairs, got {cv!r:.80}."
                f"{model_given_hint(cv)}"
            )

    def _splits(self, X: Any, y: NDArray, groups: ArrayLike | None) -> list[tuple]:
        """The folds, checked to be a partition whose training sets are the complements."""
        n = y.shape[0]
        cv: Any = self.cv
        listed = _is_list_of_splits(cv)
        if isinstance(cv, numbers.Integral):
            check_fold_count(int(cv), n)
            if groups is not None:
                raise ValueError(
                    f"`groups` was given with `cv`={cv}, whose folds (KFold) ignore it: pass "
                    f"cv=GroupKFold({cv}) (sklearn.model_selection) to keep each group in one "
                    "fold, or leave `groups` out."
                )
            cv = KFold(int(cv), shuffle=True, random_state=integer_seed(self.random_state))
        elif listed:
            if groups is not None:
                raise ValueError(
                    "`groups` was given with `cv` as a list of (train, test) pairs, which "
                    "already fixes the folds: leave `groups` out."
                )
        elif groups is not None and not reads_groups(cv):
            raise ValueError(
                f"`groups` was given, but `cv` ({type(cv).__name__}) does not read it: its "
                "folds would mix the groups. Use a group splitter (GroupKFold, "
                "LeaveOneGroupOut, StratifiedGroupKFold), or leave `groups` out."
            )
        elif groups is None and reads_groups(cv, unknown=False):
            raise ValueError(
                f"`cv` ({type(cv).__name__}) splits by group: pass the group of every "
                "training row as fit(X, y, groups=...)."
            )
        if groups is not None and n_rows(groups) != n:
            raise ValueError(f"`groups` has {n_rows(groups)} entries but X has {n} rows.")
        if listed:
            splits = [_fold_indices(train, test, k, n) for k, (train, test) in enumerate(cv)]
        else:
            cv = seeded_splitter(cv, self.random_state)  # a shuffling splitter left unseeded
            splits = [
                (np.asarray(train, dtype=np.intp), np.asarray(test, dtype=np.intp))
                for train, test in cv.split(X, y, groups)
            ]
        held_out = np.zeros(n, dtype=np.intp)
        for train, test in splits:  # a loop over folds
            if not test.size:
                raise ValueError(
                    f"`cv` ({type(cv).__name__}) gives a fold without test rows: every fold "
                    "must hold at least one row out."
                )
            uses = _row_uses(train, test, n)
            if uses is None or not (uses == 1).all():
                raise ValueError(
                    f"`cv` ({type(cv).__name__}) trains a fold on rows other than all those "
                    f"outside its test rows; {self._method_name} needs K-fold splits "
                    f"({self._splitter_examples})."
                )
            held_out[test] += 1  # (each test row once: checked just above)
        if len(splits) < 2 or not (held_out == 1).all():
            raise ValueError(
                f"`cv` ({type(cv).__name__}) must hold every row out exactly once over at "
                f"least two folds; {int((held_out != 1).sum())} of {n} rows are held out "
                f"zero or several times (use {self._splitter_examples})."
            )
        return splits

    # ---- fit -------------------------------------------------------------------------
    @keeps_state_on_error
    def fit(
        self, X: Any, y: ArrayLike, groups: ArrayLike | None = None, **fit_params: Any
    ) -> Self:
        """Fit the models (one per fold, or per bootstrap sample) and score every row with
        the models that did not see it.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), optional
            Group labels that set the folds: passed to the splitter's ``split`` (a
            ``GroupKFold`` keeps each group in one fold); not Mondrian groups. Refused with
            a splitter that does not read them (an int ``cv``, ``KFold``) and with a list
            of (train, test) pairs. ``JackknifeAfterBootstrapRegressor`` refuses them
            always: its bootstrap samples draw rows, not groups.
        **fit_params : dict
            Passed to every model's ``fit``; per-row arrays (``sample_weight``) are taken
            on the model's training rows.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        check_paired_rows(X, y, groups, "groups")
        check_weights_row_order(X, fit_params, y)
        self._validate_params()
        params = self._model_fit_params(fit_params)
        self._reset_calibration()
        X = self._validate_X(X, reset=True)
        y = self._check_target(y, n_rows(X), calibrating=False)
        splits = self._splits(X, y, groups)
        template = self._estimator_or_default()
        seed = integer_seed(self.random_state)
        seeds = np.random.default_rng(seed).integers(2**31, size=len(splits))
        models = [seeded_clone(template, None if seed is None else int(s)) for s in seeds]
        self._check_nan(X)
        quiet = is_classifier(template) and many_labels(y)  # (then the wrapper warned)
        with self._reading_features(X):
            fitted = run_fits(
                (
                    delayed(_fit_fold)(
                        model, X, y, train, params, fold, quiet, self._stratified_caveat
                    )
                    for fold, (model, (train, _)) in enumerate(zip(models, splits, strict=True))
                ),
                n_jobs=self.n_jobs,
                verbose=self.verbose,
                desc=self._models_description,
                total=len(splits),
            )
            self.estimators_ = list(fitted)
            outputs, scored = self._out_of_sample(self.estimators_, splits, X)
        self._store_scores(y[scored], outputs, scored, X)
        self.n_calibration_ = int(scored.size)
        record_calibration_settings(self, step="fit")
        # the fold models are reachable (estimators_[k].fit(...) would retrain one in place)
        self._fold_models_digest = parameter_digest(self.estimators_, arrays_only=True)
        remember_training_rows(self, X, y)  # (evaluate warns when given them as test rows)
        self._after_scoring()
        return self

    def _after_scoring(self) -> None:
        """Hook run at the end of ``fit`` (warnings about too few rows)."""

    def _out_of_sample(
        self, models: list[Any], splits: list[tuple[NDArray, NDArray]], X: Any
    ) -> tuple[NDArray, NDArray]:
        """Each scored row's output under the model that did not see it, and the scored
        rows (here all; records ``fold_index_``)."""
        n = sum(test.size for _, test in splits)
        fold_index = np.empty(n, dtype=np.intp)
        out_of_fold: NDArray | None = None
        for k, (model, (_, test)) in enumerate(zip(models, splits, strict=True)):
            fold_index[test] = k  # a loop over folds
            output = self._checked_model_output(model, take_rows(X, test), "held-out rows")
            if out_of_fold is None:
                out_of_fold = np.empty((n, *output.shape[1:]))
            out_of_fold[test] = output
        self.fold_index_ = fold_index
        assert out_of_fold is not None  # at least two folds (checked by _splits)
        return out_of_fold, np.arange(n)

    def _model_shares(self) -> NDArray:
        """Weights of the models in a point prediction: each fold's share of the rows."""
        counts = np.bincount(self.fold_index_, minlength=len(self.estimators_))
        return counts / self.n_calibration_

    # ---- state -----------------------------------------------------------------------
    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        for name in (
            "estimators_",
            "fold_index_",
            "oob_weights_",
            "scored_rows_",
            "_fold_models_digest",
        ):
            self.__dict__.pop(name, None)

    def _check_fitted(self, method: str) -> None:
        if self._calibrated_attribute not in self.__dict__:
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet: call fit(X, y) first (it "
                "trains the models and scores every row)."
            )
        check_is_fitted(self, "estimators_")
        check_calibration_settings(self, method, step="fit", again="fit(X, y)")
        self._check_not_retrained(method)

    def _check_not_retrained(self, method: str) -> None:
        """Refuse fold models trained again in place since fit (their learnt numbers
        changed, `parameter_digest`): the scores are those of the old models. A wrapper
        pickled without the digest (an older build) is not checked; one of an older digest
        scheme only warns. Models that keep what they learnt outside numpy arrays and float
        scalars (scikit-learn's trees) are not covered."""
        recorded = self.__dict__.get("_fold_models_digest")
        refuse_changed_digest(
            self,
            method,
            recorded,
            lambda: parameter_digest(self.estimators_, arrays_only=True, like=recorded),
            what=f"{self._models_description} (`estimators_`)",
            since="fit",
            how="one was trained again",
            stale="the scores are the old models'",
            again="fit(X, y)",
        )

    def _row_batches(self, n: int, cells_per_row: int) -> Iterator[slice]:
        """Slices of ``n`` rows whose ``cells_per_row``-wide arrays stay within bounded
        memory (``batch_size`` rows when given)."""
        # read at each call (set_params after fit is allowed), so checked here too: a
        # negative size ran no batch and returned the empty result array as it was
        given = check_int(getattr(self, "batch_size", None), "batch_size", allow_none=True)
        step = given or max(1, _BATCH_CELLS // max(cells_per_row, 1))
        for start in range(0, n, step):  # a loop over batches of rows
            yield slice(start, min(start + step, n))

    def _fold_outputs(self, X: Any) -> NDArray:
        """``(n_samples, K, ...)``: every fold model's output on every row of ``X``."""
        self._check_nan(X)
        with self._reading_features(X):
            outputs = [
                self._checked_model_output(model, X, "rows of `X`") for model in self.estimators_
            ]
        return np.stack(outputs, axis=1)


def _is_list_of_splits(cv: Any) -> bool:
    """Whether ``cv`` is a list (or tuple) of ``(train, test)`` index pairs, the iterable
    form of folds scikit-learn accepts (checked as a partition by `_splits`)."""
    return (
        isinstance(cv, (list, tuple))
        and len(cv) > 0
        and all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in cv)
    )


def _row_uses(train: NDArray, test: NDArray, n: int) -> NDArray | None:
    """How many times each of the ``n`` rows is among a fold's train and test rows (in a
    K-fold split, once each: a row trained on twice while another is left out keeps the
    sizes); None when an index lies outside ``0..n-1``."""
    rows = np.concatenate([train, test])
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        return None
    return np.bincount(rows, minlength=n)


def _fold_indices(train: Any, test: Any, fold: int, n: int) -> tuple[NDArray, NDArray]:
    """One ``(train, test)`` pair of a list given as ``cv``: integer row indices in
    ``0..n-1`` (a boolean mask or float positions would be read as other rows)."""
    pair = []
    for part in (train, test):
        indices = np.asarray(part)
        if indices.size and indices.dtype.kind not in "iu":
            raise ValueError(
                f"`cv`'s fold {fold} holds {indices.dtype} entries: give integer row "
                "indices (np.flatnonzero(mask) for a boolean mask)."
            )
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise ValueError(
                f"`cv`'s fold {fold} has a row index outside 0..{n - 1} (X has {n} rows)."
            )
        pair.append(indices.astype(np.intp))
    return pair[0], pair[1]
