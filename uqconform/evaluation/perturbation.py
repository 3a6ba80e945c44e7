"""Input perturbation simulators, to check robustness certificates against l2 attacks.

A certificate such as BinCP's promises coverage for *every* perturbation of norm at most
``r``; no finite simulation can check that, but two cheap attacks bracket what a user sees:

* `random_l2_perturbation`: a uniformly random direction on the sphere of radius ``r``,
  what noise or an unlucky sensor does (rarely harmful in high dimension);
* `worst_of_k_perturbation`: among ``k`` random directions of norm ``r`` per row, the one
  that most lowers the true label's score under a given model (a gradient-free attack).

Both return new arrays (a DataFrame with ``X``'s index and columns for a DataFrame ``X``);
the inputs are never modified.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.utils import check_array

from uqconform._seeding import random_generator
from uqconform._validation import (
    NonFiniteOutputError,
    check_int,
    check_nonnegative_float,
    check_row_order,
    real_values,
)
from uqconform.classification.split import encode_labels

__all__ = ["random_l2_perturbation", "worst_of_k_perturbation"]

# Rows x directions x features per model call in worst_of_k_perturbation.
_BATCH_CELLS = 2**21


def _features(X: ArrayLike) -> NDArray:
    """``X`` as a new writeable float array (the working copy the shifts are added to)."""
    try:
        # (scikit-learn's finiteness check sums the values: +inf and -inf give a
        # RuntimeWarning before its own error, which names them below)
        with np.errstate(invalid="ignore", over="ignore"):
            values = check_array(X, dtype=np.float64, ensure_all_finite=True, copy=True)
    except (TypeError, ValueError) as error:
        text = _text_columns(X)
        if text:
            raise ValueError(
                f"`X` has non-numeric columns {text[:5]!r}{' ...' if len(text) > 5 else ''}: "
                "every column is shifted, so every column must be numeric; encode them as "
                "numbers first (e.g. one-hot) or leave them out of the frame."
            ) from None
        raise ValueError(_not_features(X, error)) from None
    # a frame of booleans, or of one nullable column, comes back read-only (pandas 3)
    return np.require(values, requirements="W")


def _not_features(X: Any, error: Exception) -> str:
    """Why ``X`` is not a finite numeric 2-D array, with the remedy (never the array)."""
    if X is None:
        return "`X` is None: pass the rows of features to perturb (a 2-D array or DataFrame)."
    try:
        shape = tuple(getattr(X, "shape", None) or np.shape(X))
    except ValueError:  # ragged rows
        shape = None
    if shape is not None and len(shape) == 1:
        return (
            f"`X` must be 2-D (one row per sample), got shape {shape}: use X.reshape(-1, 1) "
            "for a single feature, or X.reshape(1, -1) for a single row."
        )
    if shape is not None and len(shape) > 2:
        return (
            f"`X` must be 2-D (one row per sample), got shape {shape}: put each sample's "
            "features in one row (X.reshape(len(X), -1)) first."
        )
    if shape == ():
        return f"`X` must be 2-D (one row per sample), got the scalar {X!r:.40}."
    if shape is not None and len(shape) == 2 and 0 in shape:
        missing, remedy = ("rows", "one row") if shape[0] == 0 else ("columns", "one feature")
        return f"`X` has no {missing} (shape {shape}): pass at least {remedy}."
    # scikit-learn's first line: its next ones may print the array
    generic = f"`X` must be a finite numeric 2-D array ({str(error).splitlines()[0].rstrip(':')})"
    try:
        values = check_array(X, dtype=np.float64, ensure_all_finite=False)
    except (TypeError, ValueError):
        return generic
    bad = ~np.isfinite(values).all(axis=1)
    if not bad.any():
        return generic
    nan, inf = bool(np.isnan(values).any()), bool(np.isinf(values).any())
    what = " and ".join(name for name, found in (("NaN", nan), ("infinite values", inf)) if found)
    # SimpleImputer refuses infinity: it only fills NaN
    remedy = {
        (True, False): "impute them (e.g. sklearn.impute.SimpleImputer)",
        (False, True): "replace them by finite numbers (e.g. np.nan_to_num, or np.clip to "
        "finite bounds)",
        (True, True): "impute the NaN (e.g. sklearn.impute.SimpleImputer) and replace the "
        "infinite values by finite numbers (e.g. np.nan_to_num, or np.clip to finite bounds)",
    }[nan, inf]
    return (
        f"`X` contains {what} in {int(bad.sum())} of {bad.size} rows (first: row "
        f"{int(np.argmax(bad))}): every value is shifted, so every value must be a finite "
        f"number; {remedy} or drop those rows first."
    )


def _text_columns(X: Any) -> list:
    """Names of the columns of a DataFrame ``X`` that are neither numeric nor boolean."""
    if not isinstance(X, pd.DataFrame):
        return []
    return [
        column
        for column, kind in X.dtypes.items()
        if not (pd.api.types.is_numeric_dtype(kind) or pd.api.types.is_bool_dtype(kind))
    ]


def _as_given(values: NDArray, X: ArrayLike) -> NDArray | pd.DataFrame:
    """``values`` as a DataFrame with ``X``'s index and columns when ``X`` is one."""
    if isinstance(X, pd.DataFrame):
        return pd.DataFrame(values, index=X.index, columns=X.columns, copy=False)
    return values


def _check_clip(clip: Any) -> tuple[float, float] | None:
    """``clip`` as two numbers ``low < high`` (infinite bounds allowed), or None."""
    if clip is None:
        return None
    bounds = real_values(clip)
    if bounds is None or bounds.shape != (2,) or not bounds[0] < bounds[1]:
        raise ValueError(f"`clip` must be two numbers (low, high) with low < high, got {clip!r}.")
    return float(bounds[0]), float(bounds[1])


def _clip(values: NDArray, clip: tuple[float, float] | None) -> NDArray:
    if clip is None:
        return values
    low, high = clip
    return np.clip(values, low, high, out=values)


def _directions(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray:
    """Uniform unit vectors along the last axis (normalised Gaussians)."""
    directions = rng.standard_normal(shape)
    norms = np.linalg.norm(directions, axis=-1, keepdims=True)
    return directions / np.where(norms > 0, norms, 1.0)


def random_l2_perturbation(
    X: ArrayLike,
    radius: float,
    *,
    clip: tuple[float, float] | None = None,
    random_state: int | np.random.Generator | None = None,
) -> NDArray | pd.DataFrame:
    """Shift every row by a uniformly random vector of l2 norm ``radius``.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        Numeric inputs (not modified). Every column of a DataFrame is shifted, so every
        column must be numeric.
    radius : float
        l2 norm of each shift, >= 0.
    clip : (float, float), optional
        Clip the result to this box (e.g. ``(0, 1)`` for images); the shift's norm is then
        at most ``radius`` for rows inside the box (a row outside it is moved into it).
    random_state : int, Generator or None
        Seeds the directions.

    Returns
    -------
    ndarray of shape (n_samples, n_features), or a DataFrame with ``X``'s index and
    columns when ``X`` is a DataFrame (the same values as for ``X.to_numpy()``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.zeros((3, 4))
    >>> shifted = random_l2_perturbation(X, 0.5, random_state=0)
    >>> np.linalg.norm(shifted - X, axis=1).round(6).tolist()
    [0.5, 0.5, 0.5]
    """
    r = check_nonnegative_float(radius, "radius")
    values = _features(X)
    bounds = _check_clip(clip)
    rng = random_generator(random_state)
    values += r * _directions(rng, values.shape)
    return _as_given(_clip(values, bounds), X)


def _score_function(model: Any) -> Callable[[NDArray], NDArray]:
    if isinstance(model, type):  # a class has predict_proba too, and is callable
        name = model.__name__
        remedy = (
            f"pass a fitted instance instead, e.g. {name}().fit(X_train, y_train)"
            if hasattr(model, "predict_proba")
            else "pass a fitted classifier with predict_proba or a scoring function instead"
        )
        raise TypeError(
            f"`model` must be a fitted classifier instance or a function, got the class "
            f"{name}: {remedy}."
        )
    if callable(model) and not hasattr(model, "predict_proba"):
        return model
    if not hasattr(model, "predict_proba"):
        raise TypeError(
            "`model` must have predict_proba or be a callable returning one score per class "
            f"(higher: more confident), got {type(model).__name__}."
        )
    return model.predict_proba


def _score_name(model: Any) -> str:
    """How a message names ``model``: ``LogisticRegression.predict_proba``, ``score``."""
    if hasattr(model, "predict_proba"):
        return f"{type(model).__name__}.predict_proba"
    owner = getattr(model, "__self__", None)
    name = getattr(model, "__name__", None) or type(model).__name__
    return name if owner is None else f"{type(owner).__name__}.{name}"


def _scores_frames(model: Any) -> bool:
    """Whether ``model`` gets the candidates of a DataFrame ``X`` as a DataFrame: only a
    model (or the estimator of a bound method such as ``clf.predict_proba``) fitted with
    feature names. Any other function gets arrays, as it always did (a function written
    for arrays, ``lambda Z: clf.predict_proba(Z[:, :4])``, fails on a frame)."""
    owner = model if hasattr(model, "predict_proba") else getattr(model, "__self__", None)
    return getattr(owner, "feature_names_in_", None) is not None


def worst_of_k_perturbation(
    X: ArrayLike,
    y: ArrayLike,
    radius: float,
    model: Any,
    *,
    k: int = 16,
    classes: ArrayLike | None = None,
    clip: tuple[float, float] | None = None,
    batch_size: int | None = None,
    random_state: int | np.random.Generator | None = None,
) -> NDArray | pd.DataFrame:
    """Per row, the shift of norm ``radius`` among ``k`` random ones that hurts ``y`` most.

    Each row gets ``k`` uniformly random directions of l2 norm ``radius``; the one giving the
    lowest score of the row's true label under ``model`` is kept. A gradient-free attack: it
    finds a bad direction for smooth models only when ``k`` is large compared with the
    dimension, so it is a lower bound on what a real attacker achieves.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        Numeric inputs (not modified). Every column of a DataFrame is shifted, so every
        column must be numeric. A model fitted with feature names (or its bound
        ``predict_proba``) scores the candidates as DataFrames with ``X``'s columns, so one
        that selects columns by name (a ``ColumnTransformer``) can be attacked; any other
        model or function gets arrays.
    y : array-like of shape (n_samples,)
        True labels, in the order of ``X``'s rows (a pandas ``y`` indexed by ``X``'s row
        labels in another order is refused).
    radius : float
        l2 norm of each shift, >= 0.
    model : fitted classifier or callable
        A model with ``predict_proba`` (its ``classes_`` give the label columns), or a
        function ``X -> (n, n_classes)`` scores, higher meaning more confident; scores may
        be infinite (``-inf``: the worst candidate, e.g. a log-probability of 0) but not
        NaN. To attack a robust set itself rather than the model, pass e.g.
        ``lambda Z: -cp.certified_radius(Z)`` for a calibrated `BinarizedSmoothedClassifier`
        ``cp`` (with ``classes=cp.classes_``): the shift that makes the true label hardest to
        include.
    k : int, default=16
        Random directions tried per row.
    classes : array-like, optional
        Label of each score column, each label once, and every label of ``y`` among them;
        defaults to ``model.classes_`` (for a bound method such as ``clf.predict_proba``,
        its estimator's ``classes_``, unless ``y`` is of an integer dtype and those
        classes are not numbers: then ``y`` holds column indices), then ``0..K-1``.
    clip : (float, float), optional
        Clip the candidates to this box before scoring them; a candidate's shift is then
        at most ``radius`` for rows inside the box (a row outside it is moved into it,
        further than ``radius``).
    batch_size : int, optional
        Rows scored per model call (each with ``k`` candidates); ``None``: automatic.
    random_state : int, Generator or None
        Seeds the directions.

    Returns
    -------
    ndarray of shape (n_samples, n_features), or a DataFrame with ``X``'s index and
    columns when ``X`` is a DataFrame.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> model = LogisticRegression().fit(X, y)
    >>> worse = worst_of_k_perturbation(X, y, 0.5, model, k=32, random_state=0)
    >>> p = lambda Z: model.predict_proba(Z)[np.arange(200), y]
    >>> bool((p(worse) <= p(X)).mean() > 0.9)
    True
    """
    r = check_nonnegative_float(radius, "radius")
    values = _features(X)
    n, d = values.shape
    check_row_order(X, y, "y")
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"`y` must be 1-D with one label per row of X ({n}), got {labels.shape}.")
    check_int(k, "k")
    check_int(batch_size, "batch_size", allow_none=True)
    bounds = _check_clip(clip)
    score = _score_function(model)
    columns = getattr(X, "columns", None) if _scores_frames(model) else None
    known = _known_classes(classes, model)
    if known is None and classes is None:
        known = _owner_classes(model, labels)
    codes = None if known is None else _encode(labels, known, given=classes is not None)
    rng = random_generator(random_state)
    step = batch_size or max(1, _BATCH_CELLS // (k * max(d, 1)))
    for start in range(0, n, step):  # a loop over batches of rows, for bounded memory
        stop = min(start + step, n)
        # drawn batch by batch: the same stream as drawing every row's at once
        steps = r * _directions(rng, (stop - start, k, d))
        candidates = _clip(values[start:stop, None, :] + steps, bounds)
        flat = candidates.reshape(-1, d)
        # a DataFrame X: its column names, for a model that reads columns by name
        proba = np.asarray(
            score(flat if columns is None else pd.DataFrame(flat, columns=columns)),
            dtype=float,
        )
        if proba.ndim != 2 or proba.shape[0] != (stop - start) * k:
            raise ValueError(
                f"`model` returned scores of shape {proba.shape} for {(stop - start) * k} "
                "candidate rows; it must return one row of class scores per candidate, "
                "shape (rows, n_classes)."
            )
        if known is not None and len(known) != proba.shape[1]:
            raise ValueError(
                f"`classes` has {len(known)} labels but the model's scores have "
                f"{proba.shape[1]} columns: give one label per score column."
            )
        if np.isnan(proba).any():  # np.argmin would keep the first NaN candidate
            rows = np.flatnonzero(np.isnan(proba).any(axis=1)) // k
            raise NonFiniteOutputError(
                f"`model` ({_score_name(model)}) returned NaN scores for the shifted copies",
                np.unique(rows) + start,
                "rows of `X`",
                ": every candidate needs a score to be compared (+-inf allowed); check the "
                "model on inputs near `X`",
                more_rows=stop < n,
            )
        proba = proba.reshape(stop - start, k, -1)
        column = (
            _label_columns(labels[start:stop], proba.shape[2])
            if codes is None
            else codes[start:stop]
        )
        true = np.take_along_axis(proba, column[:, None, None], axis=2)[:, :, 0]  # (b, k)
        worst = np.argmin(true, axis=1)
        values[start:stop] = candidates[np.arange(stop - start), worst]
    return _as_given(values, X)


def _known_classes(classes: ArrayLike | None, model: Any) -> NDArray | None:
    """``classes``, checked against ``model.classes_`` when the model has them (the
    columns of its scores: other labels, or the same in another order, would make the
    attack raise another class's score)."""
    fitted = getattr(model, "classes_", None)
    if classes is None:
        return None if fitted is None else np.asarray(fitted)
    given = np.asarray(classes)
    if given.ndim != 1:
        raise ValueError(f"`classes` must be 1-D (one label per score column), got {given.shape}.")
    repeated = pd.Index(given)[pd.Index(given).duplicated()].unique()
    if repeated.size:
        raise ValueError(
            f"`classes` must hold each label once (one per score column), got "
            f"{repeated[:5].tolist()!r} more than once."
        )
    if fitted is not None and not (
        given.shape == np.shape(fitted) and (given == np.asarray(fitted)).all()
    ):
        raise ValueError(
            f"`classes` {given.tolist()!r:.60} disagree with `model.classes_` "
            f"{np.asarray(fitted).tolist()!r:.60}, the order of the model's score columns; "
            "leave `classes` out to use the model's."
        )
    return given


def _owner_classes(model: Any, labels: NDArray) -> NDArray | None:
    """The ``classes_`` of the estimator of a bound method such as ``clf.predict_proba``,
    the labels of its score columns; None when it has none, or when integer ``labels``
    meet classes that are not numbers (text: then they are column indices ``0..K-1``, as
    a function's labels are read: ``y`` encoded as ``np.searchsorted(clf.classes_, y)``).
    Decided by the dtypes alone, never by which values ``labels`` hold."""
    fitted = getattr(getattr(model, "__self__", None), "classes_", None)
    if fitted is None:
        return None
    fitted = np.asarray(fitted)
    if labels.dtype.kind in "iu" and fitted.dtype.kind not in "biuf":
        return None
    return fitted


def _encode(labels: NDArray, classes: NDArray, *, given: bool) -> NDArray:
    """Column of each label among ``classes``; a label outside them is named as outside
    the `classes` argument when ``given`` (else as unseen by the model)."""
    try:
        return encode_labels(labels, classes)
    except ValueError:
        if not given:
            raise
    outside = pd.unique(labels[pd.Index(classes).get_indexer(labels) < 0])
    raise ValueError(
        f"`y` contains labels that are not in `classes`: {outside[:5].tolist()!r}"
        f"{' ...' if outside.size > 5 else ''}; `classes` ({classes.tolist()!r:.60}) must "
        "name the score column of every label of `y`."
    )


def _label_columns(labels: NDArray, n_columns: int) -> NDArray:
    """Labels as score columns when no classes are known: they must be ``0..K-1``."""
    if labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() >= n_columns:
        raise ValueError(
            "`y` must hold column indices 0..K-1 when neither `classes` nor "
            "`model.classes_` is available."
        )
    return labels.astype(np.intp)
