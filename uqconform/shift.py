"""Density ratios for weighted conformal prediction under covariate shift.

Weighted conformal prediction (the ``likelihood_ratio`` of the split wrappers) needs the
ratio ``w(x) = dP_target / dP_source(x)`` of the test population's feature density to the
calibration population's. When it is not known, a probabilistic classifier trained to tell
target rows from source rows estimates it: with ``p(x) = P(target | x)``,
``w(x) = (n_source / n_target) p(x) / (1 - p(x))``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse
from sklearn.base import ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from uqconform._rows import n_rows, shared_categories
from uqconform._seeding import check_random_state_value, seeded_clone
from uqconform._validation import (
    check_positive_float,
    missing_proba_error,
    nullable_as_float,
)
from uqconform._warnings import warn_user

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ClassifierDensityRatio"]


_NEVER = object()  # no warning of hard probabilities given yet

# The attributes the weights are computed from: assigning one a new value renews the fit
# token (the first assignment creates it).
_WEIGHT_SETTINGS = frozenset({"clip", "classifier_", "prior_ratio_"})


def _same_weight_setting(old: Any, new: Any) -> bool:
    """Whether ``new`` gives the weights ``old`` gave: the same object, or an equal number
    (``float(ratio.prior_ratio_)`` for an integer one)."""
    if old is new:
        return True
    numbers = (int, float, np.integer, np.floating)
    return isinstance(old, numbers) and isinstance(new, numbers) and bool(old == new)


# What the warning of hard probabilities advises, for the default logistic classifier
# (its probabilities round to 0 or 1 only far from both samples) and for another one.
_CERTAIN_DEFAULT = (
    "The default logistic classifier is this certain only on rows far outside both samples "
    "(its probability rounds to 0 or 1 in floating point there): check those inputs (a "
    "unit or scale error?), and pass a lower `clip` to bound the weight of rows off the "
    "source's support."
)
_CERTAIN_OTHER = (
    "Hard 0/1 probabilities (a fully grown tree, a forest on separable rows) make weighted "
    "conformal prediction under-cover without other sign: use a smoother classifier (the "
    "default logistic one, min_samples_leaf, or the classifier wrapped in "
    'CalibratedClassifierCV(..., method="sigmoid"): its "isotonic" method gives 0 and 1 '
    "itself)."
)
_CERTAIN_ISOTONIC = (
    "The classifier's isotonic calibration itself gives 0 and 1 (past the extreme scores of "
    "its calibration folds), which makes weighted conformal prediction under-cover without "
    'other sign: use CalibratedClassifierCV(..., method="sigmoid"), or the default logistic '
    "classifier."
)


def _certain_advice(classifier: Any) -> str:
    """What the warning of hard probabilities advises for ``classifier`` (None: the
    default one); a pipeline's last step decides."""
    if classifier is None:
        return _CERTAIN_DEFAULT
    steps = getattr(classifier, "steps", None)
    last = steps[-1][1] if isinstance(steps, list) and steps else classifier
    isotonic = type(last).__name__ == "CalibratedClassifierCV" and (
        getattr(last, "method", None) == "isotonic"
    )
    return _CERTAIN_ISOTONIC if isotonic else _CERTAIN_OTHER


class ClassifierDensityRatio:
    """Density ratio ``dP_target / dP_source`` estimated by a domain classifier.

    Fit it on features of the source population (rows drawn like the ones the model is
    calibrated on, preferably not those rows themselves: see the last point below) and of
    the target population (unlabelled test rows); pass the
    fitted object as ``likelihood_ratio`` to a split wrapper. The weights are only as
    good as the classifier:

    * The default logistic classifier fits a log ratio linear in x (an exponential tilt).
      It misses every shift whose log ratio is not linear, silently: a shift *into a
      region* the source lacks (e.g. test rows with ``|x0| > 0.6`` when the source has
      none: the ratio stays near 1 there and the intervals stay finite and under-cover),
      and a change of spread on common support (in a review: features ``x0`` and an
      unrelated ``x1``, both standard normal in the source, target ``x0`` 1.5 times as
      spread; ``y = x0 + (0.2 + |x0|) e`` with standard normal ``e``; a ridge fitted on
      1,000 source rows, 1,000 calibration rows, coverage and mean finite width over 2,000
      target rows, ratios fitted on 2,000 rows of each population, 20 seeds: 0.82 coverage
      at 0.90, as unweighted; squared features (``PolynomialFeatures(2)``: ``x0**2``,
      ``x0 x1``, ``x1**2`` with the features, then ``StandardScaler`` and
      ``LogisticRegression(max_iter=1000)``) restored 0.90, as the true ratio, while
      ``HistGradientBoostingClassifier`` at its default settings over-covered, 0.93, with
      intervals a quarter to a third wider (mean width 6.98 against 5.30 with squared
      features, 5.23 with the true ratio; 6.59 against 5.23 with 1,000 target rows and
      other draws): its noisy weights leave far fewer effective calibration rows than the
      true ratio's, and it over-covered under a mean shift too). Use a flexible classifier
      (polynomial features before the logistic regression, or boosting at the price of
      wider intervals) unless the shift is known to be a tilt. Weights whose
      effective size ``(sum w)^2 / sum w^2`` stays close to the number of calibration
      rows under a shift known to be there are a warning sign.
    * A classifier that separates the populations too well (overfitting) gives extreme
      weights. Probabilities of exactly 0 or 1 (a fully grown tree) are the worst case:
      weight 0 drops a calibration row from the quantile, probability 1 puts the weight at
      the clip, and the intervals stay finite and cover well below the nominal level
      (a little above unweighted conformal prediction in a review); the ratio warns
      when it meets such rows, and the wrapper warns when the weights leave fewer
      effective calibration rows than ``alpha`` needs.
    * Fitting it on the calibration rows themselves makes their weights depend on them
      (not covered by the theory; in practice a mild effect for a simple classifier):
      prefer other source rows.

    Parameters
    ----------
    classifier : classifier with predict_proba, default=None
        ``None``: standardisation + logistic regression (the log ratio linear in x: an
        exponential tilt). Its probabilities must reflect the populations' sizes: one
        that reweights the classes itself (``class_weight="balanced"``) gets the
        ``n_source / n_target`` factor twice. The sets depend on the weights only up to a
        constant, but these weights are *nearly* that factor times the right ones, not
        exactly (the reweighted fit differs a little: 4.76 to 5.23 times the default's
        for a factor of 5 in a review, where 0.23% of the intervals then differed), and
        ``clip`` then acts at about ``clip`` divided by that factor.
    clip : float or None, default=1e3
        Largest weight returned (the true ratio averages 1 or less over the source
        population), so a row where the classifier is sure (probability 1: an infinite
        ratio) gets a large finite weight instead. A test row's interval is infinite
        when its weight exceeds about ``alpha / (1 - alpha)`` times ``W``, the sum of the
        calibration weights (``cp.calibration_weights_.sum()`` after ``cp.calibrate``;
        per stratum with groups or class-conditional sets): a clip below that cut keeps
        rows off the source's support finite, one above it keeps them infinite. ``W`` is
        not the number of calibration rows ``n_cal``: it falls below it under a shift
        (the ratio averages 1 over the source only when the target has no mass off the
        source's support, a skewed ratio's sum over a sample is usually below its mean,
        and clipping the calibration weights lowers it further), so calibrate, read
        ``W``, then choose the clip. In a review (the data of the covariate-shift page,
        ``make_heteroscedastic_regression(6000, noise=0.5, random_state=1)``: 1,000
        calibration rows with ``|x0| < 0.6``, the ratio a histogram gradient boosting
        classifier of the central training rows against all of them, alpha 0.1) ``W`` was
        about 700, a cut near 78: ``clip=100``, below ``n_cal alpha / (1 - alpha)`` = 111,
        left 98% of the off-support test rows infinite, ``clip=50`` none.
        ``None``: no clip (an infinite weight on a test row gives the whole space; on a
        calibration row it is refused). Clipping changes the weights, so it costs
        coverage where the true ratio exceeds the clip, more the larger the shift.
    random_state : int, Generator or None, default=None
        Seeds the classifier's ``random_state`` parameters left at None (a random forest,
        gradient boosting with early stopping): same seed, same weights.

    Attributes
    ----------
    classifier_ : classifier
    prior_ratio_ : float
        ``n_source / n_target`` of the fit.

    Notes
    -----
    Not a scikit-learn estimator on purpose: `sklearn.base.clone` of a wrapper holding a
    fitted ratio then copies it whole (an estimator parameter would be cloned unfitted).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> source, target = rng.normal(size=(2000, 1)), rng.normal(1.0, 1.0, size=(2000, 1))
    >>> ratio = ClassifierDensityRatio().fit(source, target)
    >>> w = ratio(np.array([[-1.0], [0.5], [2.0]]))  # true ratio exp(x - 0.5): 0.22, 1, 4.5
    >>> bool(w[0] < w[1] < w[2])
    True
    """

    #: The default of ratios pickled before the parameter existed.
    random_state: Any = None

    def __init__(self, classifier: Any = None, clip: float | None = 1e3, random_state: Any = None):
        self.classifier = classifier
        self.clip = clip
        self.random_state = random_state

    def fit(self, X_source: Any, X_target: Any) -> Self:
        """Train the domain classifier: source rows labelled 0, target rows 1.

        Parameters
        ----------
        X_source, X_target : array-like or DataFrame of shape (n, n_features)
            Features of each population (the same columns).

        Returns
        -------
        self
        """
        if self.clip is not None:
            try:
                check_positive_float(self.clip, "clip")
            except ValueError as error:  # an infinite clip means "none": say how
                raise ValueError(f"{error} For no clipping pass clip=None.") from None
        check_random_state_value(self.random_state)
        for name, value in (("X_source", X_source), ("X_target", X_target)):
            _refuse_complex_or_ragged(name, value)  # (np.ndim fails on ragged rows)
            if value is None or isinstance(value, (str, bytes)) or np.ndim(value) == 0:
                raise ValueError(
                    f"`{name}` must be rows of features (an array, DataFrame or list of "
                    f"rows), got {value!r:.60}."
                )
            shape = getattr(value, "shape", None)  # a list of rows is checked below
            if shape is not None and len(shape) != 2:
                raise ValueError(
                    f"`{name}` must be 2-D (rows of features), got shape {tuple(shape)}."
                )
        n_source, n_target = n_rows(X_source), n_rows(X_target)
        if n_source < 2 or n_target < 2:
            raise ValueError(
                f"`X_source` and `X_target` need at least 2 rows each, got {n_source} and "
                f"{n_target}."
            )
        categories: dict[int, pd.Index] = {}  # values present, category/text columns
        if hasattr(X_source, "iloc") and hasattr(X_target, "iloc"):
            if list(X_source.columns) != list(X_target.columns):
                raise ValueError(
                    "`X_source` and `X_target` must have the same columns in the same "
                    f"order, got {list(X_source.columns)[:5]} and {list(X_target.columns)[:5]}."
                )
            X_source, X_target, _ = shared_categories(X_source, X_target)
            categories = _present_values(X_source, X_target)
            X = pd.concat([X_source, X_target], ignore_index=True)
        elif sparse.issparse(X_source) or sparse.issparse(X_target):
            if not (sparse.issparse(X_source) and sparse.issparse(X_target)):
                raise ValueError(
                    "`X_source` and `X_target` must both be sparse or both dense, got "
                    f"{type(X_source).__name__} and {type(X_target).__name__}."
                )
            if X_source.shape[1] != X_target.shape[1]:
                raise ValueError(
                    f"`X_source` and `X_target` must have the same columns, got shapes "
                    f"{X_source.shape} and {X_target.shape}."
                )
            X = sparse.vstack([X_source, X_target], format="csr")
        else:
            source, target = np.asarray(X_source), np.asarray(X_target)
            if source.ndim != 2 or target.ndim != 2 or source.shape[1] != target.shape[1]:
                raise ValueError(
                    f"`X_source` and `X_target` must be 2-D with the same columns, got "
                    f"shapes {source.shape} and {target.shape}."
                )
            X = np.concatenate([source, target])
        if X.shape[1] == 0:  # (the same columns: both have none)
            raise ValueError(
                "`X_source` and `X_target` have no columns: pass at least one feature."
            )
        labels = np.r_[np.zeros(n_source, int), np.ones(n_target, int)]
        if self.classifier is None:  # the default pipeline takes finite numbers only
            _check_numbers_for_the_default("X_source", X_source)
            _check_numbers_for_the_default("X_target", X_target)
        elif isinstance(self.classifier, type):
            name = self.classifier.__name__
            remedy = (
                f"pass {name}() instead"
                if issubclass(self.classifier, ClassifierMixin)
                else "pass an instance of a classifier with predict_proba"
            )
            raise TypeError(
                f"`classifier` must be a classifier instance, got the class {name}: {remedy}."
            )
        elif not hasattr(self.classifier, "get_params"):
            raise TypeError(
                f"`classifier` must be a scikit-learn classifier with predict_proba, got "
                f"{self.classifier!r:.60}."
            )
        model = (
            # sparse rows keep their zeros: scaled, not centred
            make_pipeline(StandardScaler(with_mean=not sparse.issparse(X)), LogisticRegression())
            if self.classifier is None
            else seeded_clone(self.classifier, self.random_state)
        )
        if not hasattr(model, "predict_proba"):
            why = "the weights come from its probability of the target population"
            raise missing_proba_error(model, "`classifier`", why)
        self.classifier_ = model.fit(X, labels)
        # the values present in the samples, per category or text column: other values
        # are weighed by the classifier's handling of unknown categories, not from data
        self._fit_categories = categories
        # renewed at every fit: a wrapper calibrated with this ratio notices a refit in
        # place (its calibration weights came from the old fit)
        self._fit_token = object()
        self.prior_ratio_ = n_source / n_target
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        renew = name in _WEIGHT_SETTINGS and (
            "_fit_token" not in self.__dict__
            or not _same_weight_setting(self.__dict__.get(name, _NEVER), value)
        )
        super().__setattr__(name, value)
        if renew:
            # a new clip, or a fitted attribute replaced, changes the weights as a refit
            # does: a wrapper calibrated with the old ones notices (its calibration weights
            # came from them). The first such assignment creates the token, so a ratio
            # built by hand (classifier_ and prior_ratio_ assigned, no fit) is tracked too.
            super().__setattr__("_fit_token", object())

    def __call__(self, X: Any) -> NDArray:
        """The estimated ratio per row, clipped at ``clip`` (unless None).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if not hasattr(self, "classifier_"):
            raise NotFittedError(
                "This ClassifierDensityRatio is not fitted yet: call fit(X_source, X_target) "
                "first."
            )
        _refuse_complex_or_ragged("X", X)
        shape = tuple(getattr(X, "shape", None) or np.shape(X))
        if len(shape) != 2:
            one_row = (
                "frame.iloc[[i]] (a list of rows keeps a frame) or X.to_frame().T"
                if hasattr(X, "to_frame")
                else "X.reshape(1, -1)"
            )
            raise ValueError(
                f"`X` must be 2-D (rows of features), got shape {shape}; for one row use "
                f"{one_row}."
            )
        if shape[0] == 0:
            raise ValueError("`X` has no rows: pass at least one row to weigh.")
        expected = getattr(self.classifier_, "n_features_in_", None)
        if expected is not None and shape[1] != expected:
            raise ValueError(
                f"`X` has {shape[1]} columns, but the ratio was fitted on {expected}."
            )
        if self.classifier is None:
            if sparse.issparse(X) and not self._default_fitted_sparse():
                raise ValueError(
                    "`X` is sparse, but the ratio was fitted on dense rows, which its default "
                    "classifier centres (sparse rows cannot be centred): fit the ratio on "
                    "sparse rows (then it scales them without centring) or pass X.toarray()."
                )
            _check_numbers_for_the_default("X", X)
        # once per fit: a wrapper calls the ratio once per batch of rows, and the counts
        # differ from batch to batch (Python's filter would not merge the messages)
        token = self.__dict__.get("_fit_token")  # None in ratios pickled before it existed
        known = self.__dict__.get("_fit_categories")  # None in ratios from before it existed
        warned = self.__dict__.get("_warned_unseen", _NEVER) is token  # no scan after that
        if known and isinstance(X, pd.DataFrame) and not warned:
            unseen = _unseen_categories(X, known)
            if unseen:
                self.__dict__["_warned_unseen"] = token
                warn_user(
                    "`X` holds category (or text) values not seen when the ratio was fitted (in "
                    f"neither sample), in column {' and '.join(unseen)}: the domain "
                    "classifier weighs such rows by its handling of unknown categories "
                    "(HistGradientBoostingClassifier as missing values, "
                    'OneHotEncoder(handle_unknown="ignore") as no category), not from data. '
                    "A value the source sample lacks may be off the source's support (a true "
                    "ratio of infinity): refit the ratio on samples that hold it. Said once "
                    "per fit of the ratio.",
                    UserWarning,
                )
        proba = np.asarray(self.classifier_.predict_proba(X), dtype=float)[:, 1]
        zero, one = int(np.sum(proba == 0.0)), int(np.sum(proba == 1.0))
        if (zero or one) and self.__dict__.get("_warned_certain", _NEVER) is not token:
            self.__dict__["_warned_certain"] = token
            warn_user(
                f"The domain classifier is certain on {zero + one} of {proba.size} rows "
                f"(probability of the target population 0 on {zero}: weight 0, so such a "
                "calibration row drops out of the quantile and such a test row's threshold "
                f"comes from the calibration weights alone; 1 on {one}: weight "
                f"{'infinite' if self.clip is None else f'at the clip {self.clip:g}'}). "
                f"{_certain_advice(self.classifier)} Said "
                "once per fit of the ratio.",
                UserWarning,
            )
        with np.errstate(divide="ignore"):
            weights = self.prior_ratio_ * proba / (1.0 - proba)
        return weights if self.clip is None else np.minimum(weights, self.clip)

    def _default_fitted_sparse(self) -> bool:
        """Whether the default pipeline was fitted on sparse rows: its scaler then does not
        centre, and takes sparse rows at prediction (the dense fit's scaler refuses them)."""
        steps = getattr(self.classifier_, "steps", None) or [(None, None)]
        return not getattr(steps[0][1], "with_mean", True)

    def predict(self, X: Any) -> NDArray:
        """The same as calling the object: the estimated ratio per row."""
        return self(X)

    def __repr__(self) -> str:
        extra = "" if self.random_state is None else f", random_state={self.random_state!r}"
        return f"ClassifierDensityRatio(classifier={self.classifier!r}, clip={self.clip!r}{extra})"


def _check_numbers_for_the_default(name: str, value: Any) -> None:
    """A ValueError naming ``name`` when it holds text or other non-numbers, or NaN or
    inf: the default logistic pipeline takes finite numbers only."""
    nullable = nullable_as_float(value) if isinstance(value, pd.DataFrame) else None
    try:  # a nullable frame's pd.NA as NaN, named here like NaN
        if sparse.issparse(value):  # the stored entries (the rest are 0)
            numbers = np.asarray(value.data, dtype=float)
        else:
            numbers = np.asarray(value, dtype=float) if nullable is None else nullable
    except (TypeError, ValueError):
        raise ValueError(
            f"`{name}` holds values that are not numbers (text or category columns?), "
            "which the default classifier (StandardScaler + LogisticRegression) cannot "
            "take: pass a `classifier` that encodes them, e.g. a Pipeline with a "
            "ColumnTransformer and a OneHotEncoder before the classifier."
        ) from None
    if not np.isfinite(numbers).all():
        raise ValueError(
            f"`{name}` contains NaN or infinite values, which the default classifier cannot "
            "take: impute them, or pass a `classifier` that handles them (e.g. "
            "HistGradientBoostingClassifier for NaN)."
        )


def _refuse_complex_or_ragged(name: str, value: Any) -> None:
    """A ValueError naming ``name`` when it holds complex numbers (numpy discarded the
    imaginary part with a warning, then scikit-learn printed the whole array) or is a list
    of rows of different lengths (numpy's "inhomogeneous shape")."""
    if isinstance(value, pd.DataFrame):
        complex_ = any(dtype.kind == "c" for dtype in value.dtypes)
    else:
        kind = getattr(getattr(value, "dtype", None), "kind", None)  # arrays, sparse rows
        if kind is None:  # lists of rows (and tensors, whose dtype has no kind)
            try:
                kind = np.asarray(value).dtype.kind
            except ValueError:
                raise ValueError(
                    f"`{name}` holds rows of different lengths: every row needs one value "
                    "per feature."
                ) from None
        complex_ = kind == "c"
    if complex_:
        raise ValueError(
            f"Complex data not supported: `{name}` holds complex numbers, and the domain "
            "classifier takes real features; pass the real part (X.real), the modulus "
            "(np.abs(X)) or both as separate columns."
        )


def _present_values(source: pd.DataFrame, target: pd.DataFrame) -> dict[int, pd.Index]:
    """By column position, the non-missing values present in the two samples, for the
    category columns (after `shared_categories`: categorical in both) and the text columns
    (a string dtype, or object columns holding only text): what `_unseen_categories` checks
    later rows against. A category declared in the dtype but absent from both samples is
    not present (the classifier never saw a row with it). Only those columns are read."""
    present: dict[int, pd.Index] = {}
    for position, (first, second) in enumerate(zip(source.dtypes, target.dtypes, strict=True)):
        if isinstance(first, pd.CategoricalDtype):  # (then the same dtype in both)
            counts = sum(
                np.bincount(codes[codes >= 0], minlength=len(first.categories))
                for codes in (
                    frame.iloc[:, position].cat.codes.to_numpy() for frame in (source, target)
                )
            )
            present[position] = first.categories[np.asarray(counts) > 0]
        elif all(isinstance(d, pd.StringDtype) or d.kind == "O" for d in (first, second)):
            values = pd.concat(
                [source.iloc[:, position], target.iloc[:, position]], ignore_index=True
            ).dropna()
            if values.empty or pd.api.types.infer_dtype(values, skipna=True) == "string":
                present[position] = pd.Index(pd.unique(values.astype(object)))
    return present


def _unseen_categories(X: pd.DataFrame, known: dict[int, pd.Index]) -> list[str]:
    """Per category or text column of the fit, a description of the values of ``X`` not
    present in the samples at the fit (e.g. ``"'site' ('c', 'd')"``), for those that hold
    some. A category column whose categories all were present is not read row by row."""
    found = []
    for position, present in known.items():
        if position >= X.shape[1]:
            continue
        column = X.iloc[:, position]
        if isinstance(column.dtype, pd.CategoricalDtype):
            outside = ~column.cat.categories.isin(present)
            if not outside.any():  # the usual case: no row can hold an unseen value
                continue
            codes = column.cat.codes.to_numpy()
            used = np.bincount(codes[codes >= 0], minlength=outside.size) > 0
            unseen = column.cat.categories[used & outside].to_numpy(dtype=object)
        else:
            values = column.dropna()
            unseen = pd.unique(values[~values.isin(present)].astype(object))
        if unseen.size:
            shown = ", ".join(
                repr(str(value)) if isinstance(value, str) else str(value) for value in unseen[:5]
            )
            more = f" and {unseen.size - 5} more" if unseen.size > 5 else ""
            found.append(f"{X.columns[position]!r} ({shown}{more})")
    return found
