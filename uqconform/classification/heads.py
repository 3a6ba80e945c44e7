"""Self-ensembled classification heads: several diverse copies of one classifier.

Multi-dimensional scores need several heads whose errors differ. Without a shared neural
backbone, diversity comes from training each clone on a (class-stratified) bootstrap sample,
on a random subset of the features, or with a different seed. A list of already fitted
classifiers with identical ``classes_`` works too.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from joblib import delayed
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted

from uqconform._parallel import run_fits
from uqconform._rows import (
    check_sample_weight_rows,
    fit_params_rows,
    n_rows,
    row_sliceable,
    take_rows,
)
from uqconform._seeding import check_random_state_value, random_generator, seed_parameters
from uqconform._validation import (
    check_class_labels,
    check_features,
    check_fitted_model,
    check_frozen_is_fitted,
    check_int,
    check_n_jobs,
    check_row_order,
    check_verbose,
    check_weights_row_order,
    class_probabilities,
    labels_text,
    missing_proba_error,
    model_classes,
    reading_features,
    refuse_model_class,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    RefusesNestedDefaultParams,
    check_nan_accepted,
    forward_input_tags,
    keeps_a_frozen_model,
    keeps_state_on_error,
)
from uqconform.routing import RoutesFitParams

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["HeadEnsemble"]


def given_head_ensemble(estimator: Any) -> HeadEnsemble | None:
    """``estimator`` when it is a HeadEnsemble (in a FrozenEstimator or not), else None."""
    model = estimator.estimator if isinstance(estimator, FrozenEstimator) else estimator
    return model if isinstance(model, HeadEnsemble) else None


def given_heads(estimator: Any) -> bool:
    """Whether ``estimator`` is heads for ``calibrate`` to adopt: a list or tuple of
    models, or a HeadEnsemble (frozen or not). Set after fit, they replace fit's heads."""
    return isinstance(estimator, (list, tuple)) or given_head_ensemble(estimator) is not None


def check_head_ensemble_fitted(ensemble: HeadEnsemble, lead: str = "") -> None:
    """Refuse an unfitted HeadEnsemble given to ``calibrate`` (fit does not take one);
    ``lead`` starts the message (the base class adds its own for the plain ensemble)."""
    if not hasattr(ensemble, "heads_"):
        raise NotFittedError(
            f"{lead}`estimator` is an unfitted HeadEnsemble: fit it first "
            "(HeadEnsemble(...).fit(X_train, y_train)), or pass the classifier inside it "
            "and call fit(X_train, y_train), which makes the heads (fit does not take a "
            "HeadEnsemble)."
        )


def refuse_head_ensemble_at_fit(owner: Any) -> None:
    """Refuse ``owner.fit`` when its ``estimator`` is a HeadEnsemble: fit would train
    ``n_heads`` copies of it, heads that each average heads."""
    if given_head_ensemble(owner.estimator) is None:
        return
    name = type(owner).__name__
    if isinstance(owner.estimator, FrozenEstimator):
        raise ValueError(
            f"`estimator` is a frozen HeadEnsemble, which {name}.fit does not train: pass it "
            "to calibrate(X_calib, y_calib) alone, which uses its heads and their columns."
        )
    raise ValueError(
        f"`estimator` is a HeadEnsemble: {name}.fit would train n_heads copies of it, each "
        f"head an average of its heads. Pass an unfitted classifier instead (fit makes the "
        f"heads from it: {name}(estimator, diversity=...)), or pass it fitted "
        "(HeadEnsemble(...).fit(X_train, y_train)) to calibrate(X_calib, y_calib) alone, "
        "which uses its heads and their columns."
    )


DIVERSITY = ("bootstrap", "subspace", "seeds")


def _columns(X: Any, columns: NDArray | None) -> Any:
    if columns is None:
        return X
    if isinstance(X, (list, tuple)):  # scikit-learn indexes columns of arrays, not of lists
        X = np.asarray(X)
    return _safe_indexing(X, columns, axis=1)


def _names_text(names: list[Any], shown: int = 10) -> str:
    """A head's column names, the first ``shown`` of a long list."""
    if len(names) <= shown:
        return str(names)
    return f"{str(names[:shown])[:-1]}, ...] ({len(names)} columns)"


def _fit_head(
    estimator: Any,
    X: Any,
    y: NDArray,
    rows: NDArray,
    columns: NDArray | None,
    seed: int | None,
    fit_params: dict[str, Any],
    index: int = 0,
) -> Any:
    """Fit head ``index``: a clone of ``estimator`` on its rows and columns of ``X``."""
    model = clone(estimator)
    if seed is not None:
        model.set_params(**{name: seed for name in seed_parameters(model)})
    params = fit_params_rows(fit_params, len(y), rows)  # per-row ones follow the rows
    if columns is None:
        return model.fit(take_rows(X, rows), y[rows], **params)
    try:
        return model.fit(_columns(take_rows(X, rows), columns), y[rows], **params)
    except (ValueError, KeyError, IndexError) as error:
        if type(error) not in (ValueError, KeyError, IndexError):  # a parameter error, say
            raise
        text = str(error).rstrip()
        raise ValueError(
            f"Head {index} of diversity='subspace' failed to fit on its random subset of "
            f"{len(columns)} of the {_n_columns(X)} columns of X, "
            f"{_names_text(_column_names(X, columns))}: {type(error).__name__}: {text}"
            f"{'' if text.endswith(('.', '!', '?')) else '.'} If the model selects columns "
            "by name or position (a ColumnTransformer, say), it cannot take a subset of "
            "them: use diversity='bootstrap' or 'seeds'."
        ) from error


def _n_columns(X: Any) -> int:
    return int(np.shape(X)[1])


def _column_names(X: Any, columns: NDArray) -> list:
    """The names of ``columns`` of ``X`` (a DataFrame's), else their positions."""
    names = getattr(X, "columns", None)
    if names is None:
        return [int(column) for column in columns]
    return [str(names[column]) for column in columns]


class HeadEnsemble(
    RefusesNestedDefaultParams, VersionedState, RoutesFitParams, ClassifierMixin, BaseEstimator
):
    """``n_heads`` diverse clones of a classifier, averaged by ``predict_proba``.

    Parameters
    ----------
    estimator : classifier or list of fitted classifiers, default=None
        The classifier to clone (``None``: ``LogisticRegression(max_iter=1000)``), or the
        heads themselves, already fitted, with identical ``classes_`` (then ``fit`` only
        checks them).
    n_heads : int, default=5
    diversity : {"bootstrap", "subspace", "seeds"}, default="bootstrap"
        Class-stratified bootstrap samples of the rows, random subsets of
        ``subspace_fraction`` of the features, or different ``random_state`` values.
    subspace_fraction : float, default=0.7
    n_jobs : int, default=None
        Heads are fitted through joblib.
    random_state : int, numpy Generator or None, default=None
        Seed of the heads' bootstrap rows or feature subsets and of each head's
        ``random_state`` parameters; None draws afresh at every fit.
    verbose : bool, default=False
        Show a progress bar of the fitted heads.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X, y = load_iris(return_X_y=True)
    >>> heads = HeadEnsemble(n_heads=3, random_state=0).fit(X, y)
    >>> heads.head_probabilities(X[:2]).shape
    (3, 2, 3)
    """

    def __init__(
        self,
        estimator: Any = None,
        n_heads: int = 5,
        diversity: str = "bootstrap",
        subspace_fraction: float = 0.7,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.n_heads = n_heads
        self.diversity = diversity
        self.subspace_fraction = subspace_fraction
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _prefit_heads(self) -> list | None:
        return list(self.estimator) if isinstance(self.estimator, (list, tuple)) else None

    def _base_estimator(self) -> Any:
        return LogisticRegression(max_iter=1000) if self.estimator is None else self.estimator

    def _routed_models(self) -> dict[str, Any]:
        return {} if self._prefit_heads() is not None else {"estimator": self._base_estimator()}

    def __sklearn_tags__(self):
        heads = self._prefit_heads()
        model = heads[0] if heads else self._base_estimator()
        return forward_input_tags(super().__sklearn_tags__(), model)

    def _validate_params(self) -> None:
        refuse_model_class(self.estimator, self)
        check_n_jobs(self.n_jobs)
        check_verbose(self.verbose)
        check_random_state_value(self.random_state)
        if self._prefit_heads() is not None:
            if len(self.estimator) < 1:
                raise ValueError("`estimator` as a list needs at least one fitted classifier.")
            return
        check_int(self.n_heads, "n_heads")
        if self.diversity not in DIVERSITY:
            raise ValueError(
                f"`diversity` must be one of {list(DIVERSITY)}, got {self.diversity!r}."
            )
        fraction = self.subspace_fraction
        if (
            isinstance(fraction, (bool, np.bool_))
            or not isinstance(fraction, numbers.Real)
            or not 0 < fraction <= 1
        ):
            raise ValueError(f"`subspace_fraction` must lie in (0, 1], got {fraction!r}.")
        if not hasattr(self._base_estimator(), "predict_proba"):  # before training any head
            raise missing_proba_error(
                self._base_estimator(),
                "`estimator`",
                "the heads' class probabilities are the scores",
            )

    def _adopt(self, heads: list) -> None:
        """Use fitted heads as they are, after checking they agree on the classes."""
        for index, head in enumerate(heads):
            try:
                check_fitted_model(head)
            except NotFittedError:
                raise NotFittedError(
                    f"Head {index} of `estimator` is not fitted: pass fitted classifiers, or "
                    "one classifier to be cloned and fitted."
                ) from None
            if not hasattr(head, "predict_proba"):
                raise missing_proba_error(head, f"Head {index}", "its probabilities are scores")
        classes = [model_classes(head) for head in heads]
        if any(c.shape != classes[0].shape or (c != classes[0]).any() for c in classes[1:]):
            raise ValueError(
                "The heads have different `classes_`: "
                f"{[c.tolist() for c in classes]}; every head must know the same labels in "
                "the same order."
            )
        widths = [getattr(head, "n_features_in_", None) for head in heads]
        known = {width for width in widths if width is not None}
        if len(known) > 1:  # each head reads every column of X here (no subspaces)
            raise ValueError(
                f"The heads of `estimator` take different numbers of features: "
                f"{dict(enumerate(widths))} (head: n_features_in_); every head must take "
                "the same columns of X."
            )
        named = [
            (index, [str(name) for name in head.feature_names_in_])
            for index, head in enumerate(heads)
            if getattr(head, "feature_names_in_", None) is not None
        ]
        unnamed = [
            index
            for index, head in enumerate(heads)
            if getattr(head, "n_features_in_", None) is not None
            and getattr(head, "feature_names_in_", None) is None
        ]
        if named and unnamed:  # the unnamed ones' column order cannot be checked
            raise ValueError(
                f"Head {named[0][0]} of `estimator` was fitted on a DataFrame (columns "
                f"{_names_text(named[0][1])}), head {unnamed[0]} on an array without column "
                "names, so its column order cannot be checked against the others': fit every "
                "head on the same kind of input (one DataFrame's columns, or arrays)."
            )
        differing = [(index, names) for index, names in named[1:] if names != named[0][1]]
        if differing:  # same widths (checked above), other names or order: sklearn refuses X
            (first, names), (other, other_names) = named[0], differing[0]
            pairs = enumerate(zip(names, other_names, strict=False))  # widths may differ
            position = next((i for i, (a, b) in pairs if a != b), None)
            where = (
                f" (first difference at column {position}: {names[position]!r} and "
                f"{other_names[position]!r})"
                if position is not None
                else ""
            )
            raise ValueError(
                "The heads of `estimator` were fitted on different columns (feature_names_in_): "
                f"head {first} on {_names_text(names)}, head {other} on "
                f"{_names_text(other_names)}{where}; every head must take the same columns of "
                "X in the same order: fit them on one DataFrame's columns."
            )
        self.heads_ = heads
        self.feature_subsets_: list[NDArray | None] = [None] * len(heads)
        self.classes_ = classes[0]
        self.__dict__.pop("_column_labels_in", None)  # the order the models saw: unknown
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(heads[0], name):
                setattr(self, name, getattr(heads[0], name))
            else:
                self.__dict__.pop(name, None)

    def _check_fit_data_against_heads(self, X: Any, y: Any) -> None:
        """``fit`` given fitted heads trains nothing: refuse an ``X`` of another width or
        labels the heads do not know (calibrate would refuse them later, naming fit), and
        say that fit only checked them."""
        widths = {getattr(head, "n_features_in_", None) for head in self.heads_} - {None}
        columns = np.shape(X)[1] if np.ndim(X) == 2 else None
        if widths and columns is not None and columns not in widths:
            raise ValueError(
                f"`X` has {columns} features, but the fitted heads take {widths.pop()} "
                "(`estimator` is a list of fitted heads, which fit does not train): give X "
                "with the features they were fitted on, or call calibrate directly."
            )
        try:  # the check calibrate makes (booleans against numeric classes refused too)
            check_class_labels(y, n_rows(X), classes=self.classes_)
        except ValueError as error:
            raise ValueError(
                f"{error} (`estimator` is a list of fitted heads, which fit does not train: "
                "y must hold labels they know.)"
            ) from None
        labels = pd.unique(pd.Series(np.asarray(y).reshape(-1), dtype=object))
        unknown = labels[~np.isin(labels, self.classes_)]
        if unknown.size:
            raise ValueError(
                f"`y` holds labels the fitted heads of `estimator` never saw: "
                f"{labels_text(unknown)} (they know {labels_text(self.classes_)}); fit does "
                "not train heads given fitted."
            )
        warn_user(
            f"`estimator` is a list of {len(self.heads_)} fitted heads: fit trains nothing "
            "(n_heads, diversity and the other training settings are not used) and only "
            "checked X and y against them. Call calibrate(X_calib, y_calib) directly.",
            UserWarning,
        )

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
            Passed to each head's ``fit``; per-row ones (``sample_weight``) follow the
            head's bootstrap rows. With scikit-learn's metadata routing on, only those the
            model requested (see `uqconform.routing`).

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        check_weights_row_order(X, fit_params, y)
        self._validate_params()
        check_frozen_is_fitted(self.estimator, self)
        prefit = self._prefit_heads()
        if prefit is not None:
            if fit_params:
                raise ValueError(
                    f"fit parameters {sorted(fit_params)} were given, but the heads are "
                    "already fitted (`estimator` is a list of fitted classifiers)."
                )
            self._adopt(prefit)
            if X is not None:  # a user's fit (adoption at calibrate passes None)
                self._check_fit_data_against_heads(X, y)
            return self
        fit_params = self._routed_fit_params(fit_params)["estimator"]
        X = row_sliceable(check_features(self, X, reset=True))  # COO, DIA, BSR: one CSR view
        check_sample_weight_rows(fit_params, n_rows(X))  # named before a head's own message
        y = check_class_labels(y, n_rows(X), training=True)  # before training any head
        rng = random_generator(self.random_state)
        n, n_features = len(y), getattr(self, "n_features_in_", None)  # None: text, dicts
        if self.diversity == "subspace" and n_features is None:
            raise ValueError(
                "diversity='subspace' draws columns of X, but X has none (a list of texts "
                "or dicts for a vectorising Pipeline): use diversity='bootstrap' or 'seeds'."
            )
        base = self._base_estimator()
        check_nan_accepted(base, X)  # the library's message, not the head's own, once
        if keeps_a_frozen_model(base):  # clone() returns the frozen model itself
            warn_user(
                f"`estimator` holds a FrozenEstimator, which fit does not train: the "
                f"{int(self.n_heads)} heads are identical copies of that one model "
                "(n_heads and diversity are not used), so the heads' scores are one score "
                "repeated. Pass an unfitted classifier for fit to train n_heads diverse "
                "heads, or a list of fitted heads as `estimator`.",
                UserWarning,
            )
        rows: list[NDArray] = []
        columns: list[NDArray | None] = []
        seeds: list[int | None] = []
        labels, inverse = np.unique(y, return_inverse=True)
        # stratified bootstrap: each row redrawn among the rows of its class, by a draw of
        # its own, in the rows' order (so the names of the classes, which set their sorted
        # order, change nothing; they moved 239 of 800 sets before)
        order = np.argsort(inverse, kind="stable")
        class_of_sorted = inverse[order]
        starts = np.searchsorted(class_of_sorted, np.arange(labels.size))[inverse]
        sizes = np.bincount(inverse, minlength=labels.size)[inverse]
        for _ in range(int(self.n_heads)):  # a loop over heads (few)
            if self.diversity == "bootstrap":  # stratified: every class stays in every head
                rows.append(order[starts + (rng.random(n) * sizes).astype(int)])
            else:
                rows.append(np.arange(n))
            if self.diversity == "subspace":
                assert n_features is not None  # checked above: subspace needs columns
                size = max(1, round(self.subspace_fraction * n_features))
                columns.append(np.sort(rng.choice(n_features, size=size, replace=False)))
            else:
                columns.append(None)
            seeds.append(int(rng.integers(2**31)) if seed_parameters(base) else None)
        if self.diversity == "seeds" and seeds[0] is None:
            raise ValueError(
                "diversity='seeds' needs an estimator with a `random_state` parameter; use "
                "'bootstrap' or 'subspace' for deterministic models."
            )
        with reading_features(X, base):
            self.heads_ = run_fits(
                (
                    delayed(_fit_head)(base, X, y, r, c, s, fit_params, index)
                    for index, (r, c, s) in enumerate(zip(rows, columns, seeds, strict=True))
                ),
                n_jobs=self.n_jobs,
                verbose=self.verbose,
                desc="heads",
                total=len(rows),
            )
        self.feature_subsets_ = columns
        self.classes_ = np.asarray(self.heads_[0].classes_)
        if self.diversity == "seeds" and len(self.heads_) > 1:
            sample = take_rows(X, np.arange(min(n, 200)))
            proba = self.head_probabilities(sample)
            if np.max(np.abs(proba - proba[:1])) < 1e-10:
                warn_user(
                    f"diversity='seeds' gave {len(self.heads_)} identical heads: "
                    f"{type(base).__name__}'s output did not change with the seeds given "
                    "to its random_state here; use diversity='bootstrap' or 'subspace'.",
                    UserWarning,
                )
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "heads_")

    def head_probabilities(self, X: ArrayLike) -> NDArray:
        """Class probabilities of every head: ``(n_heads, n_samples, n_classes)``.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix of shape (n_samples, n_features)
            All the features seen in `fit` (each head reads its own subset of them with
            ``diversity="subspace"``).

        Returns
        -------
        ndarray of shape (n_heads, n_samples, n_classes)
            Columns in ``classes_`` order.
        """
        check_is_fitted(self)
        if hasattr(self, "n_features_in_"):  # the number (and names) of features seen in fit
            X = check_features(self, X, reset=False)
        X = row_sliceable(X)  # COO, DIA, BSR cannot be indexed: one CSR view for every head
        return np.stack(
            [
                class_probabilities(head, _columns(X, columns), len(self.classes_))
                for head, columns in zip(self.heads_, self.feature_subsets_, strict=True)
            ]
        )

    def predict_proba(self, X: ArrayLike) -> NDArray:
        """Mean of the heads' probabilities (the plain ensemble).

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix of shape (n_samples, n_features)
            All the features seen in `fit` (each head reads its own subset of them with
            ``diversity="subspace"``).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in ``classes_`` order.
        """
        return self.head_probabilities(X).mean(axis=0)

    def predict(self, X: ArrayLike) -> NDArray:
        """Label with the largest mean probability.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix of shape (n_samples, n_features)
            All the features seen in `fit` (each head reads its own subset of them with
            ``diversity="subspace"``).

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)  # NotFittedError before fit (classes_ read after)
        return self.classes_[np.argmax(proba, axis=1)]
