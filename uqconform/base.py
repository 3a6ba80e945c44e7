"""The fit / calibrate / predict state machine shared by every split-conformal wrapper.

A wrapper is a scikit-learn meta-estimator around any model. Its life has three steps:

1. ``fit(X, y)`` fits a clone of ``estimator`` (skipped for a prefit model);
2. ``calibrate(X, y, groups=None)`` turns held-out data into conformity scores, one stratum
   per group (Mondrian calibration) and, for class-conditional sets, per class;
3. ``predict_interval`` / ``predict_set`` turn the scores into one threshold per stratum and
   level (the single conformal quantile of `uqconform.quantiles`) and apply the
   score's inverse to the model's output, batch by batch so memory stays bounded.

Subclasses only say how to validate a target, how to score calibration data and how to
turn a batch of model outputs and thresholds into intervals or sets.
"""

from __future__ import annotations

import copy
import functools
import inspect
import numbers
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.utils import get_tags

from uqconform._rows import (
    check_sample_weight_rows,
    n_rows,
    row_sliceable,
    rows_fingerprint,
    slice_rows,
)
from uqconform._seeding import check_random_state_value, seeded_clone, seeded_generator
from uqconform._validation import (
    NonFiniteOutputError,
    _dates_as_datetime64,
    _plain,
    check_features,
    check_fitted_model,
    check_frozen_is_fitted,
    check_groups,
    check_int,
    check_n_jobs,
    check_paired_rows,
    check_regression_model,
    check_row_order,
    check_verbose,
    check_weights_row_order,
    check_wrapper_fitted,
    class_probabilities,
    distinct_labels,
    labels_text,
    model_classes,
    non_finite_parts,
    point_predictions,
    refuse_model_class,
    refuse_unencoded_features,
    sklearn_tags,
    sorted_groups,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.linearize import digest_change, parameter_digest
from uqconform.quantiles import (
    _shared_weight_thresholds,
    check_call_alpha,
    check_miscoverage,
    conformal_quantile,
    conformal_rank,
    count_text,
    effective_sample_size,
    levels_text,
    minimum_scores,
)
from uqconform.routing import RoutesFitParams

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["ConformalPredictor"]

# Automatic batching (cells = rows x output columns). Small problems run in one batch, so
# the model is called once; large ones in about _BATCHES_PER_CALL batches, so the model's
# and the score's temporaries stay a small fraction of the output array, within bounds.
_ONE_BATCH_CELLS = 2**21
_MIN_BATCH_CELLS = 2**16
_MAX_BATCH_CELLS = 2**22
_BATCHES_PER_CALL = 128
# Strata of at least this many calibration rows on average get a selection each; smaller
# ones are all read off one sort of the scores (see `_stratum_quantiles`).
_SELECTION_STRATUM_ROWS = 256


def _sort_by_stratum(strata: NDArray, n_strata: int) -> tuple[NDArray, NDArray]:
    """Row order grouped by stratum (stable) and each stratum's bounds in that order."""
    order = np.argsort(strata, kind="stable")
    return order, np.searchsorted(strata[order], np.arange(n_strata + 1))


def _pvalue(calibration: NDArray, scores: NDArray, u: NDArray | float | None) -> NDArray:
    """``(1 + #{calibration >= s}) / (n + 1)`` for each score ``s`` (``calibration`` sorted);
    smoothed with ``u``: ``(#{> s} + u (#{= s} + 1)) / (n + 1)``."""
    n = calibration.size
    below = np.searchsorted(calibration, scores, side="left")
    if u is None:
        return (1 + n - below) / (n + 1)
    # (n - below - above + 1) and above, in place: the arrays are as large as the scores
    # (a distribution function on a grid), and the same float operations give the same bits
    above = np.searchsorted(calibration, scores, side="right")
    ties = np.subtract(above, below, out=below)
    ties += 1
    above = np.subtract(n, above, out=above)
    p = u * ties
    p += above
    p /= n + 1
    return p


def _weighted_pvalue(
    calibration: NDArray,
    cumulative: NDArray,
    total: float,
    scores: NDArray,
    test_weights: NDArray,
    u: NDArray | float | None,
) -> NDArray:
    """`_pvalue` with calibration weights (``cumulative``: their running sum in the order
    of the sorted ``calibration``) and the test row's own weight ``w`` on its score:
    ``(W_{>=s} + w) / (W + w)``, smoothed ``(W_{>s} + u (W_{=s} + w)) / (W + w)``; 1 where
    there is no weight at all; at an infinite ``w`` their limits, 1 and ``u``."""
    running = np.concatenate([[0.0], cumulative])
    below = running[np.searchsorted(calibration, scores, side="left")]
    mass = total + test_weights
    with np.errstate(invalid="ignore", divide="ignore"):
        if u is None:
            p = (total - below + test_weights) / mass
        else:
            up_to = running[np.searchsorted(calibration, scores, side="right")]
            p = (total - up_to + u * (up_to - below + test_weights)) / mass
    p = np.where((mass > 0) & np.isfinite(mass), np.minimum(p, 1.0), 1.0)
    if u is not None:  # the test row's weight swamps the rest: only its own tie draw is left
        p = np.where(np.isposinf(test_weights), u, p)
    return p


def sets_within_thresholds(scores: NDArray, thresholds: NDArray, n_levels: int) -> NDArray:
    """Boolean sets ``scores <= threshold`` of shape ``(b, c, k)``: ``scores`` ``(b, c)``
    (one per row and candidate label), ``thresholds`` as `_predict_batch` receives them
    ``(b or 1, 1, 1, k)``. Written level by level into one array (no ``(b, c, k)`` float
    temporary)."""
    out = np.empty((*scores.shape, n_levels), dtype=bool)
    for j in range(n_levels):  # a loop over levels, not rows
        np.less_equal(scores, thresholds[:, :, 0, j], out=out[:, :, j])
    return out


def _points_text(count: int) -> str:
    """A stratum's count of calibration points for a message: "no calibration points",
    "1 point", "5 points"."""
    if count == 0:
        return "no calibration points"
    return "1 point" if count == 1 else f"{count} points"


def warn_infinite_scores(
    scores: NDArray, what: str, consequence: str, *, regression: bool = False
) -> None:
    """Warn when some rows of ``scores`` (calibration or out-of-fold scores, one row each;
    any column for a score of several columns) are +inf: ``what`` names the scores and
    ``consequence`` says what that does to the predictions; ``regression`` gives the
    cause and the remedy of a regressor (an overflowing target), else of a classifier.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_infinite_scores(np.array([0.5, np.inf]), "calibration scores", "none")
    >>> str(caught[0].message)[:40]
    '1 of the 2 calibration scores are infini'
    """
    overflowed = np.isposinf(scores.reshape(scores.shape[0], -1)).any(axis=1)
    if not overflowed.any():
        return
    cause, remedy = (
        ("the model's output and the target overflow in the score: values near the float "
         "limit, about 1e308?", "Rescale the target (and the model) to moderate units.")
        if regression
        else ("e.g. -log p at a probability of 0, or a score setting near the float limit "
              "such as a huge RAPS `lambda_reg`", "If that is not meant, bound the score's "
              "settings, or the model's probabilities away from 0.")
    )  # fmt: skip
    warn_user(
        f"{int(overflowed.sum())} of the {scores.shape[0]} {what} are infinite ({cause}): "
        f"{consequence}. {remedy}",
        UserWarning,
    )


def remember_training_rows(model: Any, X: Any, y: Any, *, trained: bool = True) -> None:
    """Keep a fingerprint of the rows ``fit`` trained on (for `remember_calibration_rows`
    and `uqconform.evaluation.evaluate`); ``trained=False`` (fit trained nothing: a
    ``FrozenEstimator``, models fitted elsewhere) forgets it."""
    if trained:
        model.__dict__["_training_rows"] = rows_fingerprint(X, y)
    else:
        model.__dict__.pop("_training_rows", None)


def remember_calibration_rows(
    model: Any, X: Any, y: Any, consequence: str = "the prediction sets will under-cover"
) -> None:
    """Keep a fingerprint of the calibration rows (`uqconform.evaluation.evaluate` warns
    when it gets them as test rows), and warn when they are the rows ``fit`` trained on
    (the same ``X`` and ``y`` in the same order, in any container): a model's errors on
    its own training rows are optimistic, so the sets would under-cover (``consequence``
    says what happens to the wrapper's output). A subset or a shuffle of them is not
    recognised."""
    trained = model.__dict__.get("_training_rows")
    fingerprint = rows_fingerprint(X, y)
    model.__dict__["_calibration_rows"] = fingerprint
    if trained is not None and fingerprint == trained:
        warn_user(
            f"{type(model).__name__}.calibrate got the rows fit trained on (the same "
            f"{trained[0]} rows): the model's errors on its own training rows are smaller "
            f"than on new data, so {consequence}. Calibrate on rows "
            "held out from fit (e.g. split with sklearn.model_selection.train_test_split).",
            UserWarning,
        )


def record_calibration_settings(model: Any, *, step: str = "calibrate") -> None:
    """Remember the parameters a step's result depends on: ``_calibration_params`` after
    ``calibrate`` (``step="fit"``: ``_fit_params``, for what fit learnt and prediction reads)."""
    names = tuple(getattr(model, "_fit_params" if step == "fit" else "_calibration_params", ()))
    if step == "calibrate" and model.__dict__.get("_estimator_adopted", False):
        # a fitted model adopted by calibrate: another one set afterwards needs a new
        # calibration (the scores came from this one)
        names += ("estimator",) if "estimator" not in names else ()
    model.__dict__[f"_{step}_settings"] = {
        name: _FittedState.of(getattr(model, name)) for name in names
    }
    if step == "calibrate":
        # an adopted model (or a difficulty model given fitted) is held by reference: the
        # user can train it again in place
        models = _adopted_models(model)
        model.__dict__["_adopted_digest"] = (
            parameter_digest(models, arrays_only=True) if models else None
        )


def _adopted_models(model: Any) -> list[Any]:
    """The fitted models a wrapper holds by reference (given fitted, so the user can train
    them again in place): an adopted ``estimator_`` (or RPS's list ``estimators_``) and a
    difficulty model given fitted (one that fit trained is the wrapper's own)."""
    held = []
    if model.__dict__.get("_estimator_adopted", False):
        held.append(model.__dict__.get("estimator_", model.__dict__.get("estimators_")))
    if not model.__dict__.get("_difficulty_is_residual_model", False):
        held.append(model.__dict__.get("difficulty_estimator_"))
    return [item for item in held if item is not None]


#: Nested parameters that change how a model runs, not what it learns: changing them after
#: a step does not ask for the step again (as for the wrappers' own ``n_jobs``).
_RUNTIME_PARAMS = frozenset({"n_jobs", "verbose"})


def _learning_params(value: Any) -> dict[str, Any] | None:
    """A scikit-learn estimator's own and nested parameters (``get_params(deep=True)``)
    but the runtime ones and the nested estimator objects themselves; None for other
    values."""
    get_params = getattr(value, "get_params", None)
    if get_params is None or isinstance(value, type):
        return None
    return {
        name: param
        for name, param in _deep_params(value).items()
        if name.rsplit("__", 1)[-1] not in _RUNTIME_PARAMS and not hasattr(param, "get_params")
    }


def _deep_params(estimator: Any) -> dict[str, Any]:
    """``get_params(deep=True)``, with the parameters of every frozen model too: a
    ``FrozenEstimator``'s ``get_params`` ignores ``deep``, so a frozen k-NN's
    ``n_neighbors`` changed in place went unseen (coverage 0.91 -> 0.58, silently) where
    the same model given bare was refused."""
    params = dict(estimator.get_params(deep=True))
    frozen = [("", estimator)] if isinstance(estimator, FrozenEstimator) else []
    frozen += [(f"{name}__", p) for name, p in params.items() if isinstance(p, FrozenEstimator)]
    for prefix, model in frozen:  # (a loop over the frozen models)
        if hasattr(model.estimator, "get_params"):  # (a model from outside scikit-learn: none)
            inner = _deep_params(model.estimator)
            params.update({f"{prefix}estimator__{name}": p for name, p in inner.items()})
    return params


def _fit_owner(value: Any) -> Any:
    """The object whose fit ``value`` reads: the owner of a bound method with a
    ``_fit_token`` (``ratio.predict`` for a refittable ``ratio``), else ``value`` itself."""
    owner = getattr(value, "__self__", None)
    if not hasattr(value, "_fit_token") and hasattr(owner, "_fit_token"):
        return owner
    return value


class _FittedState:
    """A recorded parameter that can change without being replaced: an estimator whose
    parameters are set in place (``set_params(estimator__C=...)``), or an object with a
    ``_fit_token`` that its ``fit`` renews (`uqconform.shift.ClassifierDensityRatio`
    refitted in place, or passed as its bound ``ratio.predict``). Equal to the same object
    only while it keeps the parameters and the fit it had when recorded; its repr is the
    object as it was then."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: Any):
        self.value, self.owner = value, _fit_owner(value)
        self.token = getattr(self.owner, "_fit_token", None)
        self.params = _learning_params(self.owner) or {}
        self.text = repr(value)
        self.frozen_inner = True  # with frozen models' parameters (False: an older pickle)

    @classmethod
    def of(cls, value: Any) -> Any:
        learned = _learning_params(value) is not None
        if not learned and hasattr(value, "split") and hasattr(value, "get_n_splits"):
            return _SplitterState(value)  # a cross-validation splitter
        if getattr(value, "_conformity_score", False) and hasattr(value, "__dict__"):
            return _ScoreState(value)  # a score object, whose settings can be set in place
        tracked = learned or hasattr(_fit_owner(value), "_fit_token")
        return cls(value) if tracked else cls.snapshot(value)

    @staticmethod
    def snapshot(value: Any) -> Any:
        """A setting as recorded: a copy of a numpy array, and of a plain list or tuple
        (with the lists and tuples nested in it), so that a change in place
        (``grid[:] = ...``) is seen; any other value, and the other items of those
        containers (estimators, arrays in a list), as it is."""
        if isinstance(value, np.ndarray):
            return value.copy()
        if type(value) in (list, tuple):  # models in it (fitted heads, a quantile pair):
            return type(value)(  # watched for parameters set in place, as one model is
                _FittedState.snapshot(item)
                if type(item) in (list, tuple)
                else _FittedState(item)
                if _learning_params(item) is not None
                else item
                for item in value
            )
        return value

    def _changed(self) -> dict[str, Any]:
        """The parameters whose value differs from the recorded one, with their new value
        (of a state an older build pickled, only those it recorded: it did not record the
        parameters of frozen models)."""
        now = _learning_params(self.owner) or {}
        names = set(self.params)
        if self.__dict__.get("frozen_inner", False):
            names |= now.keys()
        return {
            name: now.get(name, _MISSING)
            for name in names
            if not _same_setting(self.params.get(name, _MISSING), now.get(name, _MISSING))
        }

    def __eq__(self, other: object) -> bool:
        # each `ratio.predict` lookup is a new bound method: the same one when it binds
        # the same function to the same owner
        same = other is self.value or (
            self.owner is not self.value
            and getattr(other, "__self__", None) is self.owner
            and getattr(other, "__func__", None) is getattr(self.value, "__func__", None)
        )
        return (
            same and getattr(self.owner, "_fit_token", None) is self.token and not self._changed()
        )

    def notes(self) -> str:
        """What changed since it was recorded, as `` (...)`` ("" for nothing)."""
        notes = []
        if getattr(self.owner, "_fit_token", None) is not self.token:
            notes.append("refitted or changed since")
        changed = self._changed()
        if changed:
            now = ", ".join(f"{name}={value!r}" for name, value in sorted(changed.items()))
            notes.append(f"set in place since: now {now}")
        return f" ({'; '.join(notes)})" if notes else ""

    def __repr__(self) -> str:
        return self.text + self.notes()


class _SplitterState:
    """A recorded cross-validation splitter (``KFold(5)``): equal to a splitter of the same
    type and parameters (its repr), so that an equal new object is the same setting and a
    change in place (``cv.n_splits = 3``) is not."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: Any):
        self.kind, self.text = type(value), repr(value)

    def __eq__(self, other: object) -> bool:
        return type(other) is self.kind and repr(other) == self.text

    def __repr__(self) -> str:
        return self.text


class _ScoreState(_SplitterState):
    """A recorded conformity score object (``RAPSScore(lambda_reg=0.01)``), compared by its
    attributes rather than its repr (a score's repr need not show them all)."""

    def __init__(self, value: Any):
        super().__init__(value)
        self.attributes = copy.deepcopy(vars(value))

    def __eq__(self, other: object) -> bool:
        if type(other) is not self.kind:
            return False
        now = vars(other)
        return now.keys() == self.attributes.keys() and all(
            _same_setting(value, now[name]) for name, value in self.attributes.items()
        )


# A recorded setting longer than this is shortened in messages (models holding arrays print
# thousands of digits).
_SETTING_TEXT_LIMIT = 200


def _setting_text(value: Any) -> str:
    """A recorded setting for a message, on one line and short: a long list or tuple (of
    models holding arrays, say) by its length and item types, other long values by both ends.

    Examples
    --------
    >>> _setting_text(0.1), _setting_text([np.zeros(1000)] * 3)
    ('0.1', '[3 items: ndarray]')
    """
    text = " ".join(repr(value).split())
    if len(text) <= _SETTING_TEXT_LIMIT:
        return text
    if type(value) in (list, tuple) and value:
        items = [item.value if isinstance(item, _FittedState) else item for item in value]
        kinds = " / ".join(dict.fromkeys(type(item).__name__ for item in items))
        notes = "".join(  # the recorded models changed since, by position
            f"; item {i}{item.notes()}"
            for i, item in enumerate(value)
            if isinstance(item, _FittedState) and item.notes()
        )
        bracket = "[]" if isinstance(value, list) else "()"
        return f"{bracket[0]}{len(value)} items: {kinds}{notes}{bracket[1]}"
    return f"{text[:120]} ... {text[-60:]}"


def _changed_setting_text(name: str, used: Any, now: Any) -> str:
    """``name=<the value a step used>`` for a message, told apart from the value now when
    both print alike: a model is compared by identity, so an equal new object (the same
    constructor call again) is a change, and so is the same model fitted again; a long
    array may differ where its text is cut."""
    text = _setting_text(used)
    if " ".join(repr(used).split()) != " ".join(repr(now).split()):  # whole, not cut
        if text == _setting_text(now):
            return f"{name}={text}; now a value that differs where this text is cut"
        return f"{name}={text}"
    models = [getattr(item, "value", item) for item in used] if type(used) in (list, tuple) else []
    if models and all(hasattr(item, "fit") for item in models):
        return f"{name}={text}; now other models that print the same (compared by identity)"
    if not isinstance(used, _FittedState):
        return f"{name}={text}; now a value that prints the same but differs"
    if used.owner is _fit_owner(now):
        return f"{name}={text}, fitted again since"
    return f"{name}={text}; now another object that prints the same (compared by identity)"


def check_calibration_settings(
    model: Any,
    method: str,
    *,
    step: str = "calibrate",
    again: str | None = None,
    only: Collection[str] | None = None,
) -> None:
    """Refuse to go on when a parameter the calibration (or the fit) depends on changed since.

    ``set_params(conformity_score=...)`` after ``calibrate`` would score test points with
    one function and compare them with thresholds of another: the sets would lose their
    guarantee without any error. ``again`` names the call that mends it (default: fit and
    calibrate, or calibrate); ``only`` restricts the check to those parameters (what
    ``method`` depends on).
    """
    used = model.__dict__.get(f"_{step}_settings", {})
    changed = [
        _changed_setting_text(name, value, getattr(model, name))
        for name, value in used.items()
        if (only is None or name in only) and not _same_setting(value, getattr(model, name))
    ]
    if changed:
        refit = step == "fit" and not model.__dict__.get("_estimator_adopted", False)
        # a new setting that needs something only fit trains (a difficulty model)
        refit = refit or bool(getattr(model, "_calibration_needs_fit", lambda: False)())
        if again is None:
            again = (
                "fit(X, y) and calibrate(X_calib, y_calib)"
                if refit
                else "calibrate(X_calib, y_calib)"
            )
        # a model adopted by calibrate never ran fit: its "fit" settings date from calibrate
        since = "calibrate" if model.__dict__.get("_estimator_adopted", False) else step
        raise NotFittedError(
            f"{type(model).__name__}.{method}: parameters changed since {since} (it used "
            f"{', '.join(changed)}); call {again} again."
        )


def check_frozen_features(
    wrapper: Any, estimator: Any, members: Sequence[str] | None = None
) -> None:
    """Refuse an ``X`` given to ``wrapper.fit`` whose features (recorded by its
    ``_validate_X``) are not those a ``FrozenEstimator``'s model was fitted on, as
    ``calibrate`` does for a fitted model: fit does not train it, and every later call
    would fail. ``estimator``: the wrapper's model, or a list or tuple of models (CQR's
    pair, an ensemble's heads), each checked and named in a message by ``members`` (by
    default "model i of `estimator`")."""
    models = list(estimator) if isinstance(estimator, (list, tuple)) else [estimator]
    given = wrapper.__dict__.get("n_features_in_")  # X's, recorded by _validate_X
    given_names = wrapper.__dict__.get("feature_names_in_")
    lead = f"{type(wrapper).__name__}.fit: "
    for index, frozen_model in enumerate(models):  # a loop over the (one to a few) models
        if not isinstance(frozen_model, FrozenEstimator):
            continue
        model = frozen_model.estimator
        which = ""
        if len(models) > 1:
            which = f", {members[index] if members else f'model {index} of `estimator`'},"
        frozen = f"the frozen {type(model).__name__}{which} (fit does not train a FrozenEstimator)"
        expected = getattr(model, "n_features_in_", None)
        if expected is not None and given is not None and given != expected:
            raise ValueError(
                f"{lead}`X` has {given} feature{'s' * (given != 1)}, but {frozen} was fitted "
                f"on {expected}: pass `X` with the features the model was fitted on."
            )
        names = getattr(model, "feature_names_in_", None)
        if names is not None and given_names is not None and list(given_names) != list(names):
            raise ValueError(
                f"{lead}`X` has the columns {labels_text(given_names)}, but {frozen} was "
                f"fitted on {labels_text(names)}: pass `X` with those columns, in that order."
            )


def check_calibrated(model: Any, method: str, attribute: str = "conformity_scores_") -> None:
    """``model.method`` needs a fitted ``estimator_`` and a calibration (its ``attribute``)
    made with the parameters it still has: a NotFittedError naming what is missing or
    what changed since, otherwise."""
    if "estimator_" not in model.__dict__:  # neither fit nor calibrate has run
        raise NotFittedError(
            f"{type(model).__name__}.{method} needs a fitted model and a calibration: call "
            "fit(X, y) and then calibrate(X_calib, y_calib), or calibrate(X_calib, y_calib) "
            "alone when `estimator` is already fitted."
        )
    if not hasattr(model, attribute):
        raise NotFittedError(
            f"{type(model).__name__}.{method} needs calibration: call "
            "calibrate(X_calib, y_calib) on held-out data first."
        )
    check_calibration_settings(model, method, step="fit")
    check_calibration_settings(model, method)
    check_not_retrained(model, method)


def warn_older_digest(model: Any, method: str, what: str, again: str) -> None:
    """Warn that the learnt parameters of ``what`` differ from the digest an older build
    recorded (`uqconform.linearize.digest_change` says "maybe"): trained again, or hashed
    otherwise; ``again`` is the call that settles it."""
    warn_user(
        f"{type(model).__name__}.{method}: the learnt parameters of the {what} differ "
        "from those an older build of uqconform recorded (it pickled this model): it may "
        "have been trained again since, or the older build hashed it otherwise. Call "
        f"{again} again to be sure.",
        UserWarning,
    )


def refuse_changed_digest(
    owner: Any,
    method: str,
    recorded: Any,
    current: Callable[[], str],
    *,
    what: str,
    since: str,
    how: str = "it was trained again",
    stale: str,
    again: str,
) -> None:
    """Compare the digest of learnt parameters ``recorded`` at ``since`` ("fit",
    "calibrate") with the digest now (`uqconform.linearize.digest_change`): an older
    build's digest that differs warns (`warn_older_digest`), a changed one refuses; with
    none recorded, nothing is computed.

    Parameters
    ----------
    owner : object
        The wrapper, named in the messages with ``method``.
    method : str
        The call being refused.
    recorded : str or None
        The recorded digest (None when nothing was recorded, e.g. pickled by a build that
        recorded none: nothing to compare).
    current : callable
        Returns the digest of the models now (`uqconform.linearize.parameter_digest`),
        called only when a digest was recorded.
    what : str
        The models, e.g. "fitted `estimator`".
    since : str
        The step that recorded the digest.
    how : str, default="it was trained again"
        How they may have changed.
    stale : str
        What now belongs to the old models, e.g. "the calibration is the old model's".
    again : str
        The call that settles it, e.g. "fit(X, y)".

    Raises
    ------
    NotFittedError
        When the learnt parameters changed since ``since``.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> from uqconform.linearize import parameter_digest
    >>> model = Ridge().fit([[0.0], [1.0]], [0.0, 1.0])
    >>> recorded = parameter_digest(model, arrays_only=True)
    >>> settings = dict(what="model", since="fit", stale="the scores are old", again="fit(X, y)")
    >>> def current():
    ...     return parameter_digest(model, arrays_only=True)
    >>> refuse_changed_digest(model, "predict", recorded, current, **settings)  # unchanged
    >>> model.fit([[0.0], [1.0]], [1.0, 0.0])
    Ridge()
    >>> refuse_changed_digest(model, "predict", recorded, current, **settings)
    Traceback (most recent call last):
    ...
    sklearn.exceptions.NotFittedError: Ridge.predict: the learnt parameters of the model ...
    """
    if recorded is None:
        return
    change = digest_change(recorded, current())
    if change == "maybe":
        warn_older_digest(owner, method, what, again)
    elif change == "changed":
        raise NotFittedError(
            f"{type(owner).__name__}.{method}: the learnt parameters of the {what} changed "
            f"since {since} ({how}, or updates itself when predicting, e.g. a torch module in "
            f"train mode: call model.eval()), so {stale}: call {again} again."
        )


def check_not_retrained(model: Any, method: str) -> None:
    """Refuse a fitted model adopted by ``calibrate`` that was trained again in place since
    (its learnt numbers changed, `parameter_digest`): the scores and thresholds are those of
    the old model, and the sets would lose their guarantee silently (coverage 0.60 at 0.90
    in a review, or a broadcast error when the number of classes changed). It covers the
    models `_adopted_models` lists (a difficulty model given fitted, RPS's partition
    models); a digest recorded by an older build only warns. Models that keep what they
    learnt outside numpy arrays and float scalars (scikit-learn's trees) are not covered,
    and integer attributes are left out (a model may count its calls in one)."""
    recorded = model.__dict__.get("_adopted_digest")  # older builds: none, untagged or d2
    named = "`estimator`"
    if "difficulty_estimator_" in model.__dict__:
        named += " (or `difficulty_estimator`)"
    refuse_changed_digest(
        model,
        method,
        recorded,
        lambda: parameter_digest(_adopted_models(model), arrays_only=True, like=recorded),
        what=f"fitted {named}",
        since="calibrate",
        stale="the calibration is the old model's",
        again="calibrate(X_calib, y_calib)",
    )


def _same_setting(old: Any, new: Any) -> bool:
    """Whether a parameter still has the value a step used (arrays compared by value; NaN
    equals NaN, also inside arrays, e.g. SimpleImputer's `missing_values` after a pickle
    round-trip)."""
    if old is new:
        return True
    if isinstance(old, float) and isinstance(new, float) and old != old and new != new:
        return True
    if type(old) in (list, tuple) and type(new) is type(old):  # nested, ragged: item by item
        try:
            if old == new:  # C speed; a NaN equals itself only as the same object
                return True
        except ValueError:  # arrays among the items: compared one by one below
            pass
        return len(old) == len(new) and all(map(_same_setting, old, new))
    sequences = (list, tuple, np.ndarray)
    try:
        if (
            isinstance(old, sequences)
            and isinstance(new, sequences)
            and type(old) is not type(new)
        ):
            old, new = np.asarray(old, dtype=object), np.asarray(new, dtype=object)  # [1] == (1,)
        equal = old == new
        if np.ndim(equal) == 0:
            if equal or not (isinstance(old, sequences) and isinstance(new, sequences)):
                return bool(equal)
            # lists differing in a NaN only (another NaN object, e.g. a pickled copy of
            # the recorded list): compared entry by entry below
            old, new = np.asarray(old, dtype=object), np.asarray(new, dtype=object)
            equal = old == new
        if np.shape(old) != np.shape(new):
            return False
        equal = np.asarray(equal, dtype=bool)
        if equal.all():
            return True
        # NaN entries equal NaN (an array setting is recorded as a copy, not the same object)
        old, new = np.asarray(old), np.asarray(new)
        if old.dtype.kind not in "fcO" or new.dtype.kind not in "fcO":
            return False
        return bool(np.all(equal | (np.asarray(old != old) & np.asarray(new != new))))
    except (TypeError, ValueError):  # values that cannot be compared differ
        return False


_MISSING = object()


def keeps_state_on_error(method: Callable) -> Callable:
    """Decorator: when ``method`` raises, the estimator's attributes are put back as they
    were, so a rejected ``calibrate`` call keeps the previous (good) calibration.

    Attributes the method rebinds are restored from a shallow snapshot; lists it extends in
    place (diagnostics appended step by step) are cut back to their old length, which costs
    nothing per call however long they grow. Methods must not change other attribute
    objects in place.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        saved = dict(self.__dict__)
        lengths = {name: len(value) for name, value in saved.items() if isinstance(value, list)}
        generator = getattr(self, "random_state", None)  # Generators advance in place
        state: Any = None  # a Generator's bit-generator state or a RandomState's state
        if isinstance(generator, np.random.Generator):
            state = generator.bit_generator.state
        elif isinstance(generator, np.random.RandomState):
            state = generator.get_state()
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            # Put back name by name (never an empty object in between, for other threads).
            state_now = self.__dict__
            for name in [name for name in list(state_now) if name not in saved]:
                state_now.pop(name, None)
            for name, value in saved.items():
                if state_now.get(name, _MISSING) is not value:
                    state_now[name] = value
            for name, length in lengths.items():
                del saved[name][length:]
            if isinstance(generator, np.random.Generator):
                generator.bit_generator.state = state
            elif isinstance(generator, np.random.RandomState):
                generator.set_state(state)
            raise

    return wrapper


def explains_call_mistakes(method: Callable) -> Callable:
    """Decorator: a call of ``method`` (``calibrate``, ``predict``, ...) with arguments it
    does not take raises a TypeError naming the wrapper and saying where they go (a level
    to the predict methods or the constructor, weights to ``fit``, ``groups`` by keyword or
    to a wrapper with group-conditional calibration),
    instead of Python's bare message naming the base class that defines it.

    Python's own refusal is recognised by binding the arguments to ``method``'s signature
    again, after the call failed: nothing is checked on a successful call, and a TypeError
    raised inside the method keeps its message. The signature seen by `inspect` (and
    scikit-learn) is ``method``'s.
    """
    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except TypeError:
            try:
                signature.bind(self, *args, **kwargs)
            except TypeError as refusal:
                raise TypeError(
                    _call_mistake_message(self, method.__name__, signature, args, kwargs, refusal)
                ) from None
            raise
        except ValueError as error:
            if not _looks_swapped(self, str(error), args, kwargs):
                raise
            raise ValueError(
                f"{error} Were X and y swapped? {method.__name__}(X, y) takes the features "
                "first and the targets second."
            ) from None

    wrapper._explains_call_mistakes = True  # type: ignore[attr-defined]
    return wrapper


def _looks_swapped(model: Any, message: str, args: tuple, kwargs: dict[str, Any]) -> bool:
    """Whether a refusal of a 1-D ``X`` came with a 2-D ``y`` of as many rows as ``X``
    has entries, for a wrapper of one target per row: the arguments of ``fit(y, X)`` (not
    already said by a wrapper around the same call, a subclass's ``super().fit``)."""
    if not message.startswith("`X` must be 2-D") or "Were X and y swapped?" in message:
        return False
    try:  # multi-output regions and label matrices take a 2-D y
        if not get_tags(model).target_tags.single_output:
            return False
    except (AttributeError, TypeError, ValueError):
        pass
    X = args[0] if args else kwargs.get("X")
    y = args[1] if len(args) > 1 else kwargs.get("y")
    if X is None or y is None:
        return False
    try:
        x_shape, y_shape = np.shape(X), np.shape(y)
    except (TypeError, ValueError):  # ragged or odd objects: no hint
        return False
    return len(x_shape) == 1 and len(y_shape) == 2 and y_shape[0] == x_shape[0]


class ExplainsCallMistakes:
    """Mixin: the ``fit``, ``calibrate``, ``predict``, ``predict_interval``, ``predict_set``,
    ``predict_pvalue`` and ``update`` methods of every subclass (its own or inherited from a
    class outside this hierarchy) are wrapped by `explains_call_mistakes`, so that
    arguments they do not take (``alpha`` at calibration, ``groups`` where there is no
    Mondrian calibration, weights) get a message saying where those go instead of Python's
    bare TypeError, and a 1-D ``X`` refused next to a 2-D ``y`` of as many rows asks
    whether they were swapped."""

    _EXPLAINED: ClassVar[tuple[str, ...]] = (
        "fit",
        "calibrate",
        "predict",
        "predict_interval",
        "predict_set",
        "predict_pvalue",
        "update",
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        for name in cls._EXPLAINED:
            # plain functions only: a descriptor (scikit-learn's `available_if`) is kept
            method = inspect.getattr_static(cls, name, None)
            if (
                inspect.isfunction(method)
                and not getattr(method, "_explains_call_mistakes", False)
                and "X" in inspect.signature(method).parameters
            ):
                setattr(cls, name, explains_call_mistakes(method))
        super().__init_subclass__(**kwargs)


def _call_mistake_message(
    model: Any,
    method: str,
    signature: inspect.Signature,
    args: tuple,
    kwargs: dict[str, Any],
    refusal: TypeError,
) -> str:
    """What `explains_call_mistakes` says of a call of ``model.method`` with ``args`` and
    ``kwargs`` that ``signature`` refused (``refusal``, Python's message)."""
    name = f"{type(model).__name__}.{method}"
    parameters = list(signature.parameters.values())[1:]  # without self
    positional = [
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    keyword_only = [p.name for p in parameters if p.kind == inspect.Parameter.KEYWORD_ONLY]
    level_method = next(
        (m for m in ("predict_interval", "predict_set") if hasattr(type(model), m)), None
    )
    extra = args[len(positional) :]

    def real(value: Any) -> bool:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)

    # the keywords the method does not take (a misspelt one next to a taken `alpha` or
    # `groups` is named as such by Python's message, at the end)
    refused = set(kwargs) - set(signature.parameters)
    reads_extra = method in ("predict", "predict_pvalue")  # an extra argument: a level?
    value: Any = kwargs.get("alpha", extra[0] if extra and reads_extra else None)
    level = f"{float(value):g}" if real(value) else "..."  # never a whole target array
    # an extra positional argument of predict is read as a level only when it looks like one
    given_level = "alpha" in refused or (
        reads_extra and bool(extra) and real(extra[0]) and 0 < float(extra[0]) < 1
    )
    has_alpha = "alpha" in model.get_params(deep=False)
    default = " (or the constructor's default `alpha`)" if has_alpha else ""
    if method == "predict" and extra and not given_level:
        if hasattr(model, "calibrate"):  # (a property that refuses on the cross wrappers)
            targets = "calibrate(X_calib, y_calib)"
        elif hasattr(type(model), "update"):  # the time-series wrappers
            targets = "fit(X, y), or online to predict_interval(X, y=y) or update(X, y)"
        else:
            targets = "fit(X, y)"
        return (
            f"{name} takes {', '.join(positional)} ({len(args)} positional arguments given): "
            f"targets go to {targets}, or to uqconform.evaluation.evaluate for a test set."
        )
    if level_method is not None and given_level:
        if method == "predict":
            return (
                f"{name} gives the model's point predictions and takes no `alpha`: for "
                f"{level_method[8:]}s at a level use {level_method}(X, alpha={level})"
                f"{default}."
            )
        if method == "predict_pvalue":
            return (
                f"{name} gives p-values, which do not depend on the level: the set at a "
                f"level is predict_pvalue(...) > alpha, or {level_method}(X, alpha={level})."
            )
        constructor = (
            f", or as the default level in the constructor, "
            f"{type(model).__name__}(..., alpha={level})"
            if has_alpha
            else ""
        )
        return (
            f"{name} takes no `alpha`: {method} does not depend on the level. Give it at "
            f"prediction, {level_method}(X, alpha={level}){constructor}."
        )
    if "sample_weight" in refused and method == "calibrate":
        shift = (
            " For calibration rows drawn from another population than the test rows "
            "(covariate shift), give the constructor a `likelihood_ratio`."
            if "likelihood_ratio" in model.get_params(deep=False)
            else ""
        )
        guarantee = (  # a wrapper without sets or intervals calibrates probabilities
            "split conformal prediction's coverage guarantee"
            if level_method is not None
            else "the calibration guarantee of Venn predictors"
        )
        return (
            f"{name} takes no `sample_weight`: every calibration row counts once ({guarantee} "
            "is for exchangeable, unweighted rows). Weights for training go to "
            f"fit(X, y, sample_weight=w), which passes them to the model.{shift}"
        )
    if "groups" in refused:
        takes_groups = (
            level_method is not None
            and "groups" in inspect.signature(getattr(type(model), level_method)).parameters
        )
        if takes_groups and level_method:  # (level_method: narrowed for mypy)
            return (
                f"{name} gives the model's point predictions and takes no `groups`: for "
                f"group-conditional {level_method[8:]}s use {level_method}(X, groups=g)."
            )
        fit = getattr(type(model), "fit", None)
        folds = (
            " (the `groups` that fit takes are the cross-validation folds' groups)"
            if fit is not None and "groups" in inspect.signature(fit).parameters
            else ""
        )
        if level_method is None:
            return (
                f"{name} takes no `groups`: {type(model).__name__} calibrates probabilities "
                f"over all rows{folds}. For probabilities calibrated within each group, fit "
                f"one {type(model).__name__} per group on that group's rows."
            )
        return (
            f"{name} takes no `groups`: {type(model).__name__} has no group-conditional "
            f"(Mondrian) calibration{folds}. For coverage within each group, calibrate a "
            "split wrapper with calibrate(X, y, groups=g) and predict with the same keyword "
            "(e.g. SplitConformalRegressor, SplitConformalClassifier); to measure coverage "
            "by group, use uqconform.evaluation.coverage_by_group."
        )
    if extra:
        keywords = ", ".join(f"`{k}`" for k in keyword_only)
        hint = (
            f": {keywords} {'is' if len(keyword_only) == 1 else 'are'} keyword-only, e.g. "
            f"{method}({', '.join(positional)}, {keyword_only[0]}=...)"
            if keyword_only
            else ""
        )
        level_hint = (
            f"; the miscoverage level goes to {level_method}(X, alpha=...) or the constructor's "
            "`alpha`"
            if level_method is not None and isinstance(extra[0], (float, np.floating))
            else ""
        )
        return (
            f"{name} takes {len(positional)} positional arguments "
            f"({', '.join(positional)}), got {len(args)}{hint}{level_hint}."
        )
    bare = signature.replace(
        parameters=[p.replace(annotation=inspect.Parameter.empty) for p in parameters],
        return_annotation=inspect.Signature.empty,
    )
    return f"{name}{bare}: {refusal}."


@contextmanager
def naming_refused_groups(owner: Any, params: dict[str, Any]) -> Iterator[None]:
    """Re-raise a model's refusal of the ``groups`` that ``owner.fit`` passed it among
    ``params`` as `refused_groups_error` words it (other errors as they are)."""
    try:
        yield
    except (TypeError, ValueError) as error:
        explained = refused_groups_error(owner, error, params)
        if explained is None:
            raise
        raise explained from error


def refused_groups_error(owner: Any, error: Exception, params: dict[str, Any]) -> Exception | None:
    """The error to raise when the model refused the ``groups`` that ``owner.fit`` passed it
    among ``params`` (None: ``error`` is about something else): ``groups`` at fit are the
    model's (routed to a grouped splitter, say); Mondrian groups go to calibration, where
    ``owner`` has it, and a wrapper without it takes none."""
    refused = ("unexpected keyword argument 'groups'", "accept the groups parameter")
    if "groups" not in params or not any(text in str(error) for text in refused):
        return None
    name = type(owner).__name__
    calibrate = getattr(type(owner), "calibrate", None)
    mondrian = calibrate is not None and "groups" in inspect.signature(calibrate).parameters
    advice = (
        "Mondrian groups belong to calibration: give them to `calibrate(X, y, groups=...)` "
        "and to `predict_*(X, groups=...)`."
        if mondrian
        else f"{name} has no group-conditional (Mondrian) calibration: leave `groups` out."
    )
    return type(error)(
        f"{name}.fit passed `groups` to the model, which refused it ({error}). {advice}"
    )


def refuse_nested_default_params(
    owner: Any, params: dict[str, Any], default: str | Callable[[], str]
) -> None:
    """ValueError for ``set_params(estimator__<name>=...)`` while ``estimator`` is (or is
    set to) None: the default model (``default``, its description, or a callable giving
    it, read only then) is made at fit and has no parameters to set yet (scikit-learn
    raised "'NoneType' object has no attribute 'set_params'", and a grid search over such a
    name failed so)."""
    nested = sorted(name for name in params if name.startswith("estimator__"))
    if nested and params.get("estimator", owner.__dict__.get("estimator", 0)) is None:
        default = default() if callable(default) else default
        raise ValueError(
            f"{type(owner).__name__}.set_params({nested[0]}=...): `estimator` is None, so "
            f"the default model ({default}) is made at fit and has no parameters to set yet. "
            "Pass a model explicitly as `estimator` (e.g. that one) and set or search its "
            "parameters then (GridSearchCV too)."
        )


class RefusesNestedDefaultParams:
    """Mixin of the estimators with an ``estimator`` parameter: ``set_params`` refuses
    ``estimator__<name>`` while ``estimator`` is None (`refuse_nested_default_params`),
    naming the default model by `_default_model_text`."""

    def _default_model_text(self) -> str:
        """The default model as built (its repr), read only when refusing."""
        return repr(cast(Any, self)._default_estimator())

    def set_params(self, **params: Any) -> Any:
        refuse_nested_default_params(self, params, self._default_model_text)
        return cast(Any, super()).set_params(**params)


def adoption_lead(owner: Any, fitted_attribute: str = "estimator_") -> str:
    """How ``calibrate`` starts its refusal of an unfitted model it was to adopt as given:
    before any fit, again after an earlier calibrate adopted one, or for models set after
    fit (``fitted_attribute``: where a model in use is kept)."""
    name = type(owner).__name__
    if not hasattr(owner, fitted_attribute):
        return f"{name}.calibrate was called before fit"
    if owner.__dict__.get("_estimator_adopted", False):
        return f"{name}.calibrate adopts `estimator` as given, as it did before"
    return f"{name}.calibrate adopts `estimator`, set after fit, as given"


def adoption_refusal(owner: Any, detail: str) -> str:
    """`adoption_lead` followed by the library's own account of what is unfitted."""
    return f"{adoption_lead(owner)}, and {detail[:1].lower()}{detail[1:]}"


def keeps_a_frozen_model(estimator: Any) -> bool:
    """Whether fitting a clone of ``estimator`` leaves its final model as it is: a
    ``FrozenEstimator`` as the model, a pipeline's last step or a wrapper's ``estimator``,
    at any depth (``clone`` returns a frozen model itself). A frozen preprocessing step
    before a trainable model is fine."""
    model = estimator
    while not isinstance(model, FrozenEstimator):
        steps = getattr(model, "steps", None)
        if isinstance(steps, list) and steps:
            model = steps[-1][1]
        elif isinstance(getattr(model, "estimator", None), BaseEstimator):
            model = model.estimator
        else:
            return False
    return True


def check_nan_accepted(model: Any, X: Any) -> None:
    """Raise a ValueError naming ``model`` when ``X`` holds NaN and ``model`` refuses it,
    or missing object entries (``None``, ``pd.NA``) or infinity and the model that refuses
    NaN sees ``X`` itself (not a Pipeline's first transformer, which may replace them: an
    imputer with ``missing_values=None``, a ``FunctionTransformer``, a clip).

    Checked before the model sees X, not only after it fails: a model that declares no NaN
    support but does not check its input (a hand-written rule, a wrapper around a torch
    network) would otherwise train or predict on NaN silently.
    """
    if not refuses_nan(model):
        return
    nan, missing, infinite = non_finite_parts(X)
    if not (nan or missing or infinite):
        return
    # missing objects and infinity: only where the refuser is the model itself (a
    # Pipeline's first step may be a transformer that replaces them, whatever its tags
    # say of NaN); float NaN wherever the refuser is
    sees_x = not hasattr(_refuser(model)[0], "transform")
    if nan or (missing and sees_x):
        raise ValueError(
            f"`X` contains NaN and {_refuser_name(model)} does not accept missing values: "
            "impute them (e.g. sklearn.impute.SimpleImputer in a Pipeline) or use a model "
            "that handles NaN, such as HistGradientBoosting."
        )
    if infinite and sees_x:
        raise ValueError(
            f"`X` contains infinity and {_refuser_name(model)} does not accept it: replace "
            "the infinite values (clip them to a finite range, or set them to NaN and "
            "impute them) before fitting or predicting."
        )


def _refuser(model: Any) -> tuple[Any, Any]:
    """The model that refuses NaN and the user's model holding it: the user's model, not a
    wrapper of two (CQR's band), and within it the model that refuses (a
    OneVsRestClassifier takes NaN when the classifier it wraps does)."""
    routed = getattr(model, "_routed_models", None)
    inner: list[Any] = list(routed().values()) if callable(routed) else []
    model = next((m for m in inner if refuses_nan(m)), model)
    return _nan_refuser(model), model


def _refuser_name(model: Any) -> str:
    """`_refuser`'s model for a message: ``Ridge``, or ``Ridge (in Pipeline)``."""
    refuser, holder = _refuser(model)
    name = type(refuser).__name__
    return name if refuser is holder else f"{name} (in {type(holder).__name__})"


def refuses_nan(estimator: Any) -> bool:
    """True when a model certainly cannot take NaN in ``X``.

    A plain estimator says so in its tags. A meta-estimator's tags do not (scikit-learn
    marks every ``Pipeline`` and search as refusing NaN, even one that imputes first): a
    ``Pipeline`` is judged by its first step, which sees the raw rows, a wrapper with an
    inner ``estimator`` (a search, ``FrozenEstimator``) by that model, and a
    ``ColumnTransformer`` decides for itself (it is never refused here).

    Examples
    --------
    >>> from sklearn.impute import SimpleImputer
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.pipeline import make_pipeline
    >>> refuses_nan(Ridge()), refuses_nan(make_pipeline(SimpleImputer(), Ridge()))
    (True, False)
    """
    return _nan_refuser(estimator) is not None


def _nan_refuser(estimator: Any) -> Any:
    """The model that refuses NaN in ``X`` for ``estimator`` (itself, its first pipeline
    step, or the model it wraps, followed down), or None when NaN may pass (`refuses_nan`)."""
    tags = sklearn_tags(estimator)
    if tags is None:  # a model outside scikit-learn decides itself
        return None
    if tags.input_tags.allow_nan:
        return None
    steps = getattr(estimator, "steps", None)
    if isinstance(steps, (list, tuple)) and steps:  # a Pipeline: its first real step sees X
        first = next((step for _, step in steps if step not in (None, "passthrough")), None)
        return None if first is None else _nan_refuser(first)
    if hasattr(estimator, "transformers"):  # a ColumnTransformer: its own business
        return None
    for name in ("estimator", "regressor", "base_estimator"):  # searches, FrozenEstimator,
        inner = getattr(estimator, name, None)  # TransformedTargetRegressor, calibrated ...
        if isinstance(inner, BaseEstimator):
            return _nan_refuser(inner)
    return estimator


def forward_input_tags(tags: Any, model: Any) -> Any:
    """``tags`` with the input tags of the ``model`` that receives ``X`` as given: a wrapper
    takes NaN, sparse matrices, categorical and string features exactly when its model does.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> from sklearn.ensemble import HistGradientBoostingRegressor
    >>> tags = forward_input_tags(BaseEstimator().__sklearn_tags__(),
    ...                           HistGradientBoostingRegressor())
    >>> tags.input_tags.allow_nan, tags.input_tags.sparse
    (True, False)
    """
    inner = sklearn_tags(model)
    if inner is None:  # not a scikit-learn estimator: fit says so, clearly
        return tags
    tags.input_tags.allow_nan = not refuses_nan(model)
    tags.input_tags.sparse = inner.input_tags.sparse
    tags.input_tags.categorical = inner.input_tags.categorical
    tags.input_tags.string = inner.input_tags.string
    return tags


class ModelWrapper(
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    VersionedState,
    RoutesFitParams,
    BaseEstimator,
    metaclass=ABCMeta,
):
    """Base class of the wrappers around one model (not used directly): parameter and
    feature validation, `fit`, adoption of a fitted model at calibration, the NaN check
    of ``X`` and the "calibrate first" check. It knows no miscoverage level: the
    Venn-Abers calibrator builds on it directly; `ConformalPredictor` adds the levels.

    Subclasses implement `_default_estimator` and `_check_target`, and name the attribute
    their calibration sets (`_calibrated_attribute`). The ``calibrate`` and ``predict``
    they define are wrapped by `explains_call_mistakes` (arguments they do not take, such
    as ``alpha``, get a message saying where those go: `ExplainsCallMistakes`).
    """

    #: The attribute ``calibrate`` sets: prediction before it is refused.
    _calibrated_attribute: str = "conformity_scores_"
    #: What the model trained by `fit` depends on: changed after fit (``set_params``),
    #: calibration and prediction ask for a new fit instead of using the old model.
    _fit_params: ClassVar[tuple[str, ...]] = ("estimator",)
    #: False for methods that train a model of their own instead of ``estimator`` (flows).
    _uses_estimator: ClassVar[bool] = True

    # ---- hooks -----------------------------------------------------------------------
    @abstractmethod
    def _default_estimator(self) -> BaseEstimator:
        """The model used when ``estimator=None``."""

    @abstractmethod
    def _check_target(self, y: ArrayLike, n: int, *, calibrating: bool) -> NDArray:
        """Validate ``y`` (finite values, labels the model knows...)."""

    def _validate_params(self) -> None:
        """Check constructor arguments (called by ``fit`` and ``calibrate``)."""
        check_int(getattr(self, "batch_size", None), "batch_size", allow_none=True)
        check_random_state_value(getattr(self, "random_state", None))
        check_n_jobs(getattr(self, "n_jobs", None))
        check_verbose(getattr(self, "verbose", False))
        refuse_model_class(getattr(self, "estimator", None), self)
        if isinstance(self, RegressorMixin) and self._uses_estimator:
            check_regression_model(self._estimator_or_default(), self)

    # ---- the estimator ---------------------------------------------------------------
    def _estimator_or_default(self) -> BaseEstimator:
        return self._default_estimator() if self.estimator is None else self.estimator

    def __sklearn_tags__(self):
        return forward_input_tags(super().__sklearn_tags__(), self._estimator_or_default())

    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        """Record or check the number and names of features; X itself is passed through."""
        return check_features(self, X, reset=reset)

    @contextmanager
    def _reading_features(self, X: Any) -> Iterator[None]:
        """Context of the wrapped model's calls on ``X``: its failure to read columns of
        ``X`` that are not numbers (text, categories, dates) is re-raised naming them and
        the encoding to use (`refuse_non_numeric_features`). ``X`` is not refused up front:
        a Pipeline in ``estimator`` may encode those columns."""
        try:
            yield
        except (TypeError, ValueError) as error:
            model = getattr(self, "estimator", None)  # the user's (not a pair made of it)
            if model is None and hasattr(self, "estimator"):
                model = self._estimator_or_default()
            refuse_unencoded_features(X, model, error)
            raise

    def _check_nan(self, X: Any) -> None:
        # Before ``fit`` (or for wrappers that keep several models) the given
        # ``estimator`` decides.
        model = self.__dict__.get("estimator_")
        check_nan_accepted(self._estimator_or_default() if model is None else model, X)

    @keeps_state_on_error
    def fit(self, X: Any, y: ArrayLike, **fit_params: Any) -> Self:
        """Fit a clone of ``estimator`` on training data.

        A ``FrozenEstimator`` is not refitted. Any previous calibration is discarded (a call
        that raises keeps it).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training features, passed to the estimator unchanged.
        y : array-like of shape (n_samples,)
            Training targets.
        **fit_params : dict
            Passed to the estimator's ``fit`` (with scikit-learn's metadata routing on,
            those it requested, see `uqconform.routing`).

        Returns
        -------
        self
        """
        self._validate_params()
        model_params = self._model_fit_params(fit_params)
        self._reset_calibration()
        check_row_order(X, y, "y")
        check_weights_row_order(X, fit_params, y)
        X = self._validate_X(X, reset=True)
        check_sample_weight_rows(fit_params, n_rows(X))
        self._check_frozen_features()
        y = self._check_target(y, n_rows(X), calibrating=False)
        self.estimator_ = self._make_estimator()
        self._estimator_adopted = False
        self._check_nan(X)
        with naming_refused_groups(self, model_params), self._reading_features(X):
            self._train_estimator(X, y, model_params)
        self._after_fit(X, y, **fit_params)
        remember_training_rows(self, X, y, trained=self._fit_trains_on_rows())
        record_calibration_settings(self, step="fit")
        return self

    def _check_frozen_features(self) -> None:
        """Refuse an ``X`` given to ``fit`` whose features are not those of a
        ``FrozenEstimator``'s model (`check_frozen_features`; a hook: CQR checks both
        models of its pair)."""
        check_frozen_features(self, self.estimator)

    def _train_estimator(self, X: Any, y: Any, params: dict[str, Any]) -> None:
        """Train ``estimator_`` in `fit` (a hook: a wrapper may explain the model's own
        errors)."""
        self.estimator_.fit(X, y, **params)

    def _fit_trains_on_rows(self) -> bool:
        """Whether ``fit`` trained a model on its rows (not for a ``FrozenEstimator`` or a
        list of models fitted elsewhere, such as an ensemble's heads)."""
        return not isinstance(self.estimator, (FrozenEstimator, list, tuple))

    def _model_fit_params(self, fit_params: dict[str, Any]) -> dict[str, Any]:
        """The parameters of the estimator's ``fit`` (see `uqconform.routing`)."""
        return self._routed_fit_params(fit_params)["estimator"]

    def _make_estimator(self) -> BaseEstimator:
        """The unfitted model that ``fit`` trains: a clone of ``estimator`` (its unset
        seeds from ``random_state``; a ``FrozenEstimator`` must hold a fitted model, since
        fit does not train it)."""
        check_frozen_is_fitted(self.estimator, self)
        model = self._estimator_or_default()
        return seeded_clone(model, getattr(self, "random_state", None), owner=self)

    def _after_fit(self, X: Any, y: NDArray, **fit_params: Any) -> None:
        """Hook for extra training (difficulty estimators); default does nothing."""

    def _reset_calibration(self) -> None:
        """Drop the calibration (``fit`` and ``calibrate`` start with it)."""
        for name in (self._calibrated_attribute, "n_calibration_"):
            self.__dict__.pop(name, None)

    def _prefit_estimator(self) -> BaseEstimator:
        """The fitted model adopted when ``calibrate`` comes without ``fit``.

        A model outside scikit-learn (no ``get_params``: a LightGBM ``Booster``, a torch or
        Keras model behind a small class with ``predict``/``predict_proba``) is taken as
        fitted: there is no scikit-learn way to ask it, and it is never trained here.
        """
        if self.estimator is None:
            raise NotFittedError("no estimator")
        check_fitted_model(self.estimator)
        return self.estimator

    def _use_prefit_estimator(self) -> None:
        """Adopt ``estimator`` as is when ``calibrate`` comes without ``fit``."""
        try:
            prefit = self._prefit_estimator()
        except NotFittedError as error:
            detail = str(error)
            lead = adoption_lead(self)
            if "`estimator`" in detail:  # the library's own: which part is unfitted (a head)
                raise NotFittedError(adoption_refusal(self, detail)) from None
            if isinstance(self.estimator, FrozenEstimator):  # frozen before it was fitted
                raise NotFittedError(
                    f"{lead}, and `estimator` is a FrozenEstimator around an unfitted "
                    f"{type(self.estimator.estimator).__name__}: fit the model before "
                    "freezing it (a frozen model is never trained here)."
                ) from None
            raise NotFittedError(
                f"{lead}, and `estimator` is not fitted. Either call fit(X_train, y_train) "
                "first, or pass an already fitted model (optionally as "
                "sklearn.frozen.FrozenEstimator(model))."
            ) from None
        self.estimator_ = prefit
        self._estimator_adopted = True  # re-adopted at each calibrate, so set_params applies
        self.__dict__.pop("_fit_settings", None)  # nothing was trained by fit
        self.__dict__.pop("_column_labels_in", None)  # the column order the model saw
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(prefit, name):
                setattr(self, name, getattr(prefit, name))
            else:
                self.__dict__.pop(name, None)

    def _rng(self, stream: int, content: Any = None) -> np.random.Generator:
        """Independent generator per use (0: calibration, 1: prediction), fixed by the seed.

        ``content`` (the rows being predicted) enters the seed: see `seeded_generator`.
        """
        seed = self.random_state
        if isinstance(seed, np.random.Generator):
            return seed
        if isinstance(seed, np.random.RandomState):
            seed = int(seed.randint(np.iinfo(np.int32).max))
        if seed is None:
            return np.random.default_rng()
        return seeded_generator(int(seed), stream, content)

    # ---- calibration -----------------------------------------------------------------
    def _start_calibration(self, X: Any) -> Any:
        """Check the parameters, adopt a fitted ``estimator`` if `fit` was not called (or
        adopted it before), drop the previous calibration, and validate ``X``."""
        self._validate_params()
        if (
            not hasattr(self, "estimator_")
            or self.__dict__.get("_estimator_adopted", False)
            or self._adopts_after_fit()
        ):
            self._use_prefit_estimator()
        else:  # the model fit trained: the parameters it was trained with still hold?
            check_calibration_settings(self, "calibrate", step="fit")
        self._reset_calibration()
        return self._validate_X(X, reset=not hasattr(self, "n_features_in_"))

    def _adopts_after_fit(self) -> bool:
        """Whether ``calibrate`` adopts an ``estimator`` set after fit trained a model
        (fitted heads for the head ensembles); by default a change is refused instead."""
        return False

    def _check_calibrated(self, method: str) -> None:
        check_calibrated(self, method, self._calibrated_attribute)


class ConformalPredictor(ModelWrapper):
    """Base class of the split-conformal wrappers (not used directly): `ModelWrapper`
    with miscoverage levels, calibration scores and their thresholds.

    Subclasses implement `_default_estimator` and `_check_target`; those that use the
    default ``calibrate`` also `_calibration_scores`, and those that predict through
    `_predict_batched` also `_output_columns` and `_predict_batch`.
    """

    #: What a prediction is when a stratum has too few calibration points (for warnings).
    _unbounded_prediction: str = "the whole output space"
    #: What the prediction of a row of a group unseen at calibration is (for warnings),
    #: after ``_unseen_group_lead``.
    _unseen_group_prediction: str = "the whole output space"
    _unseen_group_lead: str = "their sets are"
    #: Covariate-shift weights ``w(X)``; wrappers that offer it take it in ``__init__``
    #: (weighted conformal prediction, see `_weighted_threshold_rows`).
    likelihood_ratio: Callable[[Any], ArrayLike] | None = None

    # ---- hooks -----------------------------------------------------------------------
    def _calibration_scores(self, X: Any, y: NDArray) -> tuple[NDArray, NDArray, int]:
        """Scores ``(n,)`` or ``(n, c)``, sub-stratum index per row, number of sub-strata."""
        raise NotImplementedError(f"{type(self).__name__} overrides calibrate.")

    def _output_columns(self) -> int:
        """Output cells per row and level (2 for intervals, n_classes for sets)."""
        raise NotImplementedError(f"{type(self).__name__} does not use _predict_batched.")

    def _check_levels(self) -> None:
        """Check ``alpha`` (a miscoverage level: a warning when it looks like coverage)."""
        check_miscoverage(self.alpha, "alpha", owner=self)

    def _predict_batch(self, X: Any, thresholds: NDArray, alphas: NDArray, rng: Any) -> NDArray:
        """The prediction of rows ``X``, shape ``(b, *output shape, k)`` (trailing axis:
        levels); with a single batch it is returned to the user as it is.

        ``thresholds`` has shape ``(b, n_sub, c, k)``: for each row, its group's thresholds
        per sub-stratum, score component and level; ``(1, n_sub, c, k)``, broadcast over the
        rows, when there are no Mondrian groups.
        """
        raise NotImplementedError(f"{type(self).__name__} does not use _predict_batched.")

    def _validate_params(self) -> None:
        super()._validate_params()
        self._check_levels()
        ratio = self.likelihood_ratio
        if isinstance(ratio, type):  # the class, not a fitted instance
            raise TypeError(
                f"`likelihood_ratio` is the class {ratio.__name__}: pass a fitted instance, "
                f"e.g. {ratio.__name__}().fit(X_source, X_target), on rows of the training "
                "population and unlabelled rows of the test population that are neither "
                "the calibration nor the test rows."
            )
        if ratio is not None and not callable(ratio):
            raise TypeError(
                "`likelihood_ratio` must be None or a callable X -> weights (the density "
                "ratio dP_test / dP_calibration of the features, one weight per row), got "
                f"{type(ratio).__name__}."
            )

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        for name in (
            "calibration_strata_",
            "groups_",
            "_n_sub_strata",
            "_strata_sorting",
            "_last_threshold_table",
            "_last_quantile_table",  # ConformalPredictiveSystem's
            "calibration_weights_",
            "_weighted_strata",
            "_ranked_strata",
        ):
            self.__dict__.pop(name, None)

    # ---- calibration -----------------------------------------------------------------
    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike, *, groups: ArrayLike | None = None) -> Self:
        """Compute conformity scores on calibration data held out from training.

        Without a prior ``fit``, a fitted ``estimator`` is used as is (never refitted).
        Given exactly the rows ``fit`` trained on, it warns (the sets would under-cover).
        Every calibration row counts once, or with its weight ``likelihood_ratio(x)``
        under covariate shift (wrappers with that parameter).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration features.
        y : array-like of shape (n_samples,)
            Calibration targets.
        groups : array-like of shape (n_samples,), optional
            Group label per row for Mondrian (group-conditional) calibration; the same
            argument must then be given at prediction.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        check_paired_rows(X, y, groups, "groups")
        X = self._start_calibration(X)
        n = n_rows(X)
        y = self._check_target(y, n, calibrating=True)
        remember_calibration_rows(self, X, y)
        group_labels = check_groups(groups, n)
        self._check_nan(X)
        with self._reading_features(X):
            self._store_calibration(X, y, group_labels)
        # Warn now, next to the cause, if a stratum is too small for the default level
        # (prediction warns again for the levels it is asked for); the table is kept.
        # Weighted thresholds depend on each test row's weight (prediction warns about
        # infinite ones); the count each stratum needs with equal weights is checked here.
        if not hasattr(self, "calibration_weights_"):
            self._threshold_table(self._resolve_alpha(None)[0])
        else:
            self._warn_few_weighted_rows(self._resolve_alpha(None)[0])
        return self

    def _warn_few_weighted_rows(self, alphas: NDArray) -> None:
        """The too-few warning of weighted calibration: strata with fewer rows than a finite
        threshold needs when a test row weighs as much as they do (the unweighted rule;
        the weighted table is computed per test row, so it cannot warn here)."""
        scores = self.conformity_scores_
        n_components = 1 if scores.ndim == 1 else scores.shape[1]
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        counts = np.bincount(self.calibration_strata_, minlength=n_groups * self._n_sub_strata)
        needed = np.array([minimum_scores(level / n_components) for level in alphas])
        short = counts.min() < needed
        if short.any():
            too_few = {int(s): int(c) for s, c in enumerate(counts) if c < needed.max()}
            self._warn_too_few(too_few, alphas[short], n_groups, n_components, weighted=True)

    def _store_calibration(self, X: Any, y: NDArray, group_labels: NDArray | None) -> None:
        """Score the (validated) calibration rows and record their groups and strata."""
        scores, sub_strata, n_sub = self._calibration_scores(X, y)
        warn_infinite_scores(
            scores,
            "calibration scores",
            "thresholds that reach them are infinite, and predictions at those levels are "
            f"{self._unbounded_prediction}",
            regression=isinstance(self, RegressorMixin),
        )
        if group_labels is None:
            strata = sub_strata
        else:
            self.groups_, group_index, counts = sorted_groups(group_labels)
            alone = int((counts == 1).sum())
            if 2 * alone > group_labels.size:
                warn_user(  # a single-row group never gets a finite threshold below 0.5
                    f"`groups` puts {alone} of the {group_labels.size} calibration rows alone "
                    f"in their group ({counts.size} distinct values): such groups get no "
                    "finite threshold below alpha = 0.5. A continuous feature: bin it "
                    "(np.digitize(values, bins) or pandas.cut(values, k), the same bins at "
                    "calibration and at prediction); identifiers of units: merge them into "
                    "groups of many rows each.",
                    UserWarning,
                )
            strata = group_index * n_sub + sub_strata
        weights = self._ratio_weights(X, int(y.shape[0]), "calibration rows")
        if weights is not None:
            self._warn_about_weights(weights, None if group_labels is None else group_index)
            if n_sub > 1:
                self._warn_about_class_weights(weights, strata, n_sub)
        self.conformity_scores_ = scores
        if weights is not None:
            self.calibration_weights_ = weights
        record_calibration_settings(self)
        self.calibration_strata_ = strata
        self._n_sub_strata = n_sub
        n_strata = (1 if group_labels is None else self.groups_.size) * n_sub
        if n_strata > 1:  # sorted once here, not at every prediction
            self._strata_sorting = _sort_by_stratum(self.calibration_strata_, n_strata)
        self.n_calibration_ = int(y.shape[0])

    def _warn_about_weights(self, weights: NDArray, group_index: NDArray | None) -> None:
        """Warn when ``likelihood_ratio`` gives weight 0 to every calibration row (of some
        Mondrian groups): no score counts there, so every prediction is unbounded; and
        when the weights leave fewer effective rows than the default level needs."""
        if weights.size and not weights.any():
            warn_user(
                f"`likelihood_ratio` gives weight 0 to all {weights.size} calibration rows, "
                "so no calibration score counts: every prediction will be "
                f"{self._unbounded_prediction}. Check the ratio (fitted on the right "
                "data? clipped at 0?) or calibrate on rows from the test distribution's "
                "support.",
                UserWarning,
            )
            return
        effective = effective_sample_size(weights)
        needed = minimum_scores(float(np.min(self._resolve_alpha(None)[0])))
        if effective < needed:
            warn_user(
                f"`likelihood_ratio`'s weights leave an effective calibration size of "
                f"{effective:.1f} of {weights.size} rows (Kish: (sum w)^2 / sum w^2), below "
                f"the {count_text(needed)} scores a finite threshold needs at alpha: a few "
                "rows decide every threshold, so coverage varies widely from one calibration "
                "set to another. Check the ratio (weights near 0 or at the clip: a classifier "
                "that separates the populations), or calibrate on more rows.",
                UserWarning,
            )
        if group_index is None:
            return
        mass = np.bincount(group_index, weights=weights, minlength=self.groups_.size)
        empty = self.groups_[mass <= 0]
        if empty.size:
            warn_user(
                f"`likelihood_ratio` gives weight 0 to every calibration row of "
                f"{empty.size} group{'s' if empty.size > 1 else ''} "
                f"({empty[:5].tolist()}{' ...' if empty.size > 5 else ''}): every "
                f"prediction in {'them' if empty.size > 1 else 'it'} will be "
                f"{self._unbounded_prediction}.",
                UserWarning,
            )
        # the same check per group: a group with rows enough for alpha (else the too-few
        # warning speaks) whose weights leave fewer effective ones
        counts = np.bincount(group_index, minlength=self.groups_.size)
        squares = np.bincount(group_index, weights=weights**2, minlength=self.groups_.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_group = np.where(squares > 0, mass**2 / squares, 0.0)
        thin = self.groups_[(mass > 0) & (counts >= needed) & (per_group < needed)]
        if thin.size:
            warn_user(
                f"`likelihood_ratio`'s weights leave fewer effective calibration rows than "
                f"the {count_text(needed)} a finite threshold needs at alpha in {thin.size} group"
                f"{'s' if thin.size > 1 else ''} ({thin[:5].tolist()}"
                f"{' ...' if thin.size > 5 else ''}; Kish: (sum w)^2 / sum w^2 per group): "
                "a few rows decide those groups' thresholds.",
                UserWarning,
            )

    def _group_index(
        self, groups: ArrayLike | None, n: int, *, warn: bool = True
    ) -> NDArray | None:
        """Row -> calibration group (None without Mondrian groups).

        Groups unseen at calibration map to an extra, empty group: the whole output space
        (with a warning, unless ``warn=False``: a caller that predicted already warned).
        """
        labels = check_groups(groups, n)
        known = getattr(self, "groups_", None)
        if known is None:
            if labels is not None:
                raise ValueError(
                    "`groups` was given at prediction but not at calibration; calibrate "
                    "with groups=... to get group-conditional (Mondrian) sets."
                )
            return None
        if labels is None:
            raise ValueError(
                "The model was calibrated with `groups` (Mondrian calibration): pass the "
                "group of every row to this call as groups=..."
            )
        if known.dtype.kind == "O":  # (dates an older build kept as objects)
            known = _dates_as_datetime64(known)
        kinds = {known.dtype.kind, labels.dtype.kind}
        try:
            if kinds & set("US") and kinds & set("biuf"):  # strings against numbers
                raise TypeError
            if labels.dtype.kind == "O":  # objects: compared once per distinct label
                distinct, codes = distinct_labels(labels)
            else:
                distinct, codes = labels, None
            position = np.minimum(np.searchsorted(known, distinct), known.size - 1)
        except TypeError:
            raise ValueError(
                f"`groups` at prediction ({labels.dtype}) cannot be compared with the groups "
                f"seen at calibration ({known.dtype}, e.g. {_plain(known[0])!r}): give the "
                "same kind of labels."
            ) from None
        unseen = np.asarray(known[position] != distinct, dtype=bool)
        if codes is not None:
            position, unseen = position[codes], unseen[codes]
        if unseen.any():
            count = int(unseen.sum())
            if warn:
                warn_user(
                    f"{'1 row belongs' if count == 1 else f'{count} rows belong'} to groups "
                    "without calibration data "
                    f"(e.g. {_plain(labels[unseen][0])!r}); {self._unseen_group_lead} "
                    f"{self._unseen_group_prediction}.",
                    UserWarning,
                )
            position = np.where(unseen, known.size, position)  # the empty extra group
        return position

    def _kept_for_calibration(
        self, attribute: str, settings: Any, compute: Callable[[], Any]
    ) -> Any:
        """``compute()``, kept in ``attribute`` for the next call with equal ``settings``
        (one-row predictions would otherwise recompute every stratum's quantiles); tied to
        the calibration arrays themselves, so a new calibration never reuses it."""
        key = (self.conformity_scores_, self.__dict__.get("calibration_strata_"))
        kept = self.__dict__.get(attribute)
        if (
            isinstance(kept, tuple)
            and len(kept) == 4  # (an older build kept another layout: computed again)
            and kept[0] is key[0]
            and kept[1] is key[1]
            and kept[2] == settings
        ):
            return kept[3]
        value = compute()
        self.__dict__[attribute] = (*key, settings, value)
        return value

    def _threshold_table(self, alphas: NDArray) -> NDArray:
        """Thresholds of shape ``(n_groups + 1, n_sub, c, k)``; the last group is empty.
        The last table is kept for the next call at the same levels."""
        table, too_few = self._kept_for_calibration(
            "_last_threshold_table",
            alphas.tobytes(),
            lambda: self._compute_threshold_table(alphas),
        )
        if too_few:
            n_groups = table.shape[0] - 1
            short = np.isinf(table[:-1]).any(axis=(0, 1, 2))  # the levels that lack points
            self._warn_too_few(too_few, alphas[short], n_groups, table.shape[2])
        return table.copy()

    def _compute_threshold_table(self, alphas: NDArray) -> tuple[NDArray, dict[int, int]]:
        """The thresholds, and the strata (with their sizes) too small for some level."""
        scores = self.conformity_scores_
        scores2d = scores[:, None] if scores.ndim == 1 else scores
        n_components = scores2d.shape[1]
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        n_sub = self._n_sub_strata
        table = np.full((n_groups + 1, n_sub, n_components, alphas.size), np.inf)
        # An asymmetric score has one column per side, each calibrated at alpha/c.
        thresholds = np.stack(
            [
                self._stratum_quantiles(scores2d[:, component], alphas / n_components)
                for component in range(n_components)
            ],
            axis=1,
        )  # (strata, c, k), the strata group-major, then sub-stratum
        table[:-1] = thresholds.reshape(n_groups, n_sub, n_components, alphas.size)
        order, bounds = self._stratum_sorting()
        counts = np.diff(bounds)
        reaching = np.asarray(np.isposinf(scores2d).any(axis=1))  # rows with an infinite score
        reached = np.concatenate([[0], np.cumsum(reaching if order is None else reaching[order])])
        needed = minimum_scores(float(np.min(alphas)) / n_components)  # at the lowest level
        infinite = np.isinf(thresholds).any(axis=(1, 2))
        # infinite scores (warned at calibrate), not too few points, can make it so
        short = infinite & ((counts < needed) | (reached[bounds[1:]] == reached[bounds[:-1]]))
        too_few = {int(stratum): int(counts[stratum]) for stratum in np.flatnonzero(short)}
        return table, too_few

    def _stratum_quantiles(self, column: NDArray, alphas: NDArray) -> NDArray:
        """``conformal_quantile(column[rows], alphas)`` for the calibration ``rows`` of each
        stratum (`_stratum_rows`): shape ``(n_strata, k)``, infinite where a stratum has too
        few rows for a level.

        Many small strata (Mondrian groups) are read off one sort of the column by stratum
        then value, at the rank `conformal_rank` gives each stratum size, instead of a
        selection per stratum in a Python loop (20,000 groups: seconds per new level); a
        few large strata keep the selection, faster than sorting every row.
        """
        values = np.asarray(column, dtype=float)
        order, bounds = self._stratum_sorting()
        n_strata = bounds.size - 1
        if (
            order is None
            or values.size >= _SELECTION_STRATUM_ROWS * n_strata
            or np.isnan(values).any()  # refused by conformal_quantile, as it says
        ):
            return np.array(
                [
                    conformal_quantile(values[rows], alphas, warn=False)
                    for rows in self._stratum_rows()
                ]
            ).reshape(n_strata, alphas.size)
        counts = np.diff(bounds)
        ranked = values[order]  # stratum by stratum
        strata = np.repeat(np.arange(n_strata), counts)
        ranked = ranked[np.lexsort((ranked, strata))]  # then by value within each
        sizes, size_index = np.unique(counts, return_inverse=True)  # few distinct sizes
        ranks = np.stack([conformal_rank(int(size), alphas) for size in sizes])[size_index]
        finite = ranks <= counts[:, None]
        positions = np.minimum(bounds[:-1, None] + ranks - 1, values.size - 1)
        return np.where(finite, ranked[positions], np.inf)

    def _stratum_sorting(self) -> tuple[NDArray | None, NDArray]:
        """The calibration rows in stratum order and each stratum's bounds in that order, as
        `_stratum_rows` reads them (plain split CP: ``None``, every row in one stratum)."""
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        n_strata = n_groups * self._n_sub_strata
        if n_strata == 1:
            return None, np.array([0, len(self.conformity_scores_)])
        sorting = self.__dict__.get("_strata_sorting")
        if sorting is None:  # a model pickled before the sorting was stored
            sorting = _sort_by_stratum(self.calibration_strata_, n_strata)
        return sorting

    def _stratum_rows(self) -> list[slice | NDArray]:
        """The calibration rows of each stratum (group-major, then sub-stratum), from the
        sorting stored at calibration (plain split CP: one slice of every row)."""
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        n_strata = n_groups * self._n_sub_strata
        if n_strata == 1:  # plain split CP: every row, no sorting by stratum
            return [slice(None)]
        sorting = self.__dict__.get("_strata_sorting")
        if sorting is None:  # a model pickled before the sorting was stored
            sorting = _sort_by_stratum(self.calibration_strata_, n_strata)
        order, bounds = sorting
        return [order[bounds[s] : bounds[s + 1]] for s in range(n_strata)]

    def _stratum_name(self, stratum: int, n_sub: int, grouped: bool) -> str:
        """A calibration stratum as a message names it: its group and its class."""
        parts = []
        if grouped:
            parts.append(f"group {_plain(self.groups_[stratum // n_sub])!r}")
        if n_sub > 1:
            parts.append(f"class {_plain(self.classes_[stratum % n_sub])!r}")
        return " / ".join(parts) or "the calibration set"

    def _warn_too_few(
        self,
        too_few: dict[int, int],
        alphas: NDArray,
        n_groups: int,
        n_components: int = 1,
        weighted: bool = False,
    ) -> None:
        n_sub = self._n_sub_strata
        grouped = n_groups > 1 or getattr(self, "groups_", None) is not None
        where = [
            f"{self._stratum_name(stratum, n_sub, grouped)} ({_points_text(count)})"
            for stratum, count in list(too_few.items())[:3]
        ]
        if n_sub > 1:
            rows = "of that group's rows " if grouped else ""
            consequence = (
                f"that class is in every prediction set {rows}(its threshold is infinite)"
            )
        else:
            consequence = f"those predictions are {self._unbounded_prediction}"
        more = f" and {len(too_few) - 3} more" if len(too_few) > 3 else ""
        each = ""
        if n_components > 1:  # each score column is calibrated at alpha / c
            each = (
                f" (each of the score's {n_components} columns at alpha / {n_components} = "
                f"{levels_text(alphas / n_components)})"
            )
        if weighted and min(too_few.values()) > 0:  # no weight helps a stratum of 0 rows
            consequence += (
                " unless `likelihood_ratio` gives the test row far less weight than these rows"
            )
        # the count each level needs, the smallest level (the most points) first
        levels = np.unique(alphas)
        needed = [count_text(minimum_scores(float(a) / n_components)) for a in levels[:3]]
        if levels.size == 1:
            plural = "point is" if needed[0] == "1" else "points are"
            needs = f"at least {needed[0]} {plural} needed"
        else:
            pairs = zip(needed[1:], levels[1:3], strict=True)
            later = ", ".join(f"{count} at alpha={level:g}" for count, level in pairs)
            needs = (
                f"at least {needed[0]} points are needed at alpha={levels[0]:g}, {later}"
                f"{', ...' if levels.size > 3 else ''}"
            )
            if len(too_few) > 1:  # not every stratum named need be short at every level
                needs += " (each is short at the levels needing more points than it has)"
        note = self._too_few_note(too_few)
        warn_user(
            f"Too few calibration points for alpha={levels_text(alphas)}{each} in "
            f"{', '.join(where)}{more}: {needs}, so {consequence}.{f' {note}' if note else ''}",
            UserWarning,
        )

    def _too_few_note(self, too_few: dict[int, int]) -> str:
        """What a wrapper adds to the too-few warning for the strata ``too_few`` (how its
        calibration rows were used, say); none by default."""
        return ""

    # ---- prediction ------------------------------------------------------------------
    def _resolve_alpha(
        self, alpha: float | Sequence[float] | ArrayLike | None, X: Any = None
    ) -> tuple[NDArray, bool]:
        value = self.alpha if alpha is None else alpha
        return check_call_alpha(alpha, self.alpha, X), np.ndim(value) == 0

    def _batch_rows(self, n: int, columns: int | None = None) -> int:
        """Rows per model call: ``batch_size``, or automatic (see the constants above) for
        ``columns`` output cells per row (default: `_output_columns`)."""
        # read at each call (set_params after calibrate is allowed), so checked here: a
        # negative size ran no batch and returned the empty result array as it was
        given = check_int(self.batch_size, "batch_size", allow_none=True)
        if given is not None:
            return given
        columns = max(1, self._output_columns() if columns is None else columns)
        if n * columns <= _ONE_BATCH_CELLS:
            return max(n, 1)
        rows = -(-n // _BATCHES_PER_CALL)
        return int(np.clip(rows, _MIN_BATCH_CELLS // columns, _MAX_BATCH_CELLS // columns))

    def _draws_at_prediction(self) -> bool:
        """Whether predictions use random draws (then the rows are hashed into the seed)."""
        return False

    def _predict_batched(
        self,
        X: Any,
        alpha: float | Sequence[float] | ArrayLike | None,
        groups: ArrayLike | None,
        dtype: type,
        method: str,
    ) -> NDArray:
        self._check_calibrated(method)
        alphas, scalar = self._resolve_alpha(alpha, X)
        check_row_order(X, groups, "groups")
        X = row_sliceable(self._validate_X(X, reset=False))
        n = n_rows(X)
        group_index = self._group_index(groups, n)
        weighted = hasattr(self, "calibration_weights_")
        table = None if weighted else self._threshold_table(alphas)
        infinite, short = 0, np.zeros(alphas.size, bool)  # rows, levels: infinite (weighted)
        n_sub = self._n_sub_strata
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        by_stratum = np.zeros(n_groups * n_sub, np.intp)  # rows with an infinite threshold
        rng = self._rng(stream=1, content=X if self._draws_at_prediction() else None)
        step = self._batch_rows(n)
        # one batch: its prediction is the result (no second full-size buffer to copy into);
        # several: a buffer shaped like the first batch's prediction, for all rows
        out: NDArray | None = None
        for start in range(0, n, step):  # a loop over batches of rows, for bounded memory
            stop = min(start + step, n)
            block = slice_rows(X, start, stop)
            self._check_nan(block)
            if weighted:  # each row its own thresholds, from its own weight
                block_groups = None if group_index is None else group_index[start:stop]
                rows = self._weighted_threshold_rows(block, block_groups, alphas, (start, stop, n))
                unbounded = np.isinf(rows).any(axis=(1, 2))  # (rows, levels)
                cells = np.isinf(rows).any(axis=(2, 3))  # (rows, classes)
                first = np.zeros((stop - start, 1), np.intp)  # each row's first stratum
                if block_groups is not None:  # unseen groups were warned about already
                    seen = block_groups < n_groups
                    unbounded &= seen[:, None]
                    cells &= seen[:, None]
                    first = block_groups[:, None] * n_sub
                infinite += int(unbounded.any(axis=1).sum())
                short |= unbounded.any(axis=0)
                strata = first + np.arange(n_sub)
                by_stratum += np.bincount(strata[cells], minlength=by_stratum.size)
            else:  # without groups every row shares one threshold row, broadcastable
                assert table is not None
                rows = table[:1] if group_index is None else table[group_index[start:stop]]
            try:
                with self._reading_features(block):
                    batch = self._predict_batch(block, rows, alphas, rng)
            except NonFiniteOutputError as error:  # name the row of X, not of the batch
                raise error.renumbered(np.arange(start, stop), more_rows=stop < n) from None
            if step >= n:
                out = batch
            else:
                if out is None:
                    out = np.empty((n, *batch.shape[1:]), dtype=dtype)
                out[start:stop] = batch
        assert out is not None  # X has at least one row (check_features), so one batch ran
        if weighted:
            self._warn_weighted_infinite(infinite, alphas[short], by_stratum)
        return out[..., 0] if scalar else out

    # ---- weighted conformal prediction (covariate shift) ----------------------------------
    def _ratio_weights(
        self, X: Any, n: int, where: str, *, test: bool = False, first_row: int = 0
    ) -> NDArray | None:
        """``likelihood_ratio(X)`` checked: one non-negative weight per row, finite on
        calibration rows (``test``: +inf allowed, a row off the calibration support).
        ``first_row``: the position of X's first row in the caller's data (a batch)."""
        ratio = self.likelihood_ratio
        if ratio is None:
            return None
        try:
            ratio_output = ratio(X)
            raw = np.asarray(ratio_output)
        except NotFittedError as error:  # an unfitted ratio: the caller's step to take
            raise NotFittedError(f"`likelihood_ratio` is not fitted: {error}") from error
        except Exception as error:  # a column-name typo (KeyError) included
            raise ValueError(
                f"`likelihood_ratio` failed on the {where}: {type(error).__name__}: {error}"
            ) from error
        check_row_order(
            X, ratio_output, f"`likelihood_ratio`'s output for the {where}", verb="return"
        )
        if raw.dtype.kind not in "iuf":  # booleans (a mask?), complex, text: not weights
            raise ValueError(
                f"`likelihood_ratio` returned values of dtype {raw.dtype} for the {where}; "
                "it must return real numbers (one weight per row)"
                + (
                    ": a boolean mask is not a ratio (cast it to float if 0/1 weights are meant)."
                    if raw.dtype.kind == "b"
                    else "."
                )
            )
        weights = raw.astype(float)
        if weights.shape != (n,):
            raise ValueError(
                f"`likelihood_ratio` returned shape {weights.shape} for {n} {where}; it must "
                "return one weight per row, shape (n_samples,)."
            )
        allowed = (weights >= 0) & (np.isfinite(weights) | (test & (weights > 0)))
        if not allowed.all():
            kinds = "NaN or negative" if test else "NaN, infinite or negative"
            first = int(np.flatnonzero(~allowed)[0])
            raise ValueError(
                f"`likelihood_ratio` returned {int((~allowed).sum())} {kinds} weights for "
                f"the {where} (e.g. row {first_row + first}: {float(weights[first])}); weights "
                "must be "
                "non-negative"
                + (" (+inf: a row off the calibration support)." if test else " and finite.")
                + (
                    " (A ClassifierDensityRatio with clip=None gives an infinite weight "
                    "where its classifier is certain a row is from the target population: "
                    "give it a finite clip.)"
                    if not test and np.isposinf(weights).any()
                    else ""
                )
            )
        return weights

    def _weight_scale(self) -> float:
        """The largest calibration weight (1 if all are 0): weights are divided by it, so
        any positive multiple of the ratio gives the same sets (no overflow or
        underflow in their sums)."""
        largest = float(np.max(self.calibration_weights_, initial=0.0))
        return largest if largest > 0 else 1.0

    def _scaled_test_weights(self, block: Any, rows: tuple[int, int, int]) -> NDArray:
        """Test weights of a batch over the calibration scale; ``rows``: the batch's
        start and stop in ``X`` and the rows of ``X`` (for messages)."""
        start, stop, n = rows
        where = "rows of `X`" if stop - start == n else f"rows {start} to {stop - 1} of `X`"
        weights = self._ratio_weights(block, stop - start, where, test=True, first_row=start)
        assert weights is not None
        with np.errstate(over="ignore"):  # a weight far above every calibration one: inf
            return weights / self._weight_scale()

    def _prepare_weighted_strata(self) -> list[tuple[NDArray, NDArray]]:
        """Per stratum: its scores sorted column by column ``(n_s, c)`` and the cumulative
        calibration weights in each column's order ``(n_s, c)`` (read them as
        ``prepared[s][:2]``: older builds' pickles hold their first column's total third)."""
        prepared = self.__dict__.get("_weighted_strata")
        if prepared is None:
            scores = self.conformity_scores_.reshape(len(self.conformity_scores_), -1)
            weights = self.calibration_weights_ / self._weight_scale()
            prepared = []
            for rows in self._stratum_rows():  # a loop over strata, not rows
                order = np.argsort(scores[rows], axis=0, kind="stable")
                sorted_scores = np.take_along_axis(scores[rows], order, axis=0)
                cumulative = np.cumsum(weights[rows][order], axis=0)
                prepared.append((sorted_scores, cumulative))
            self._weighted_strata = prepared
        return prepared

    def _weighted_threshold_rows(
        self,
        block: Any,
        block_groups: NDArray | None,
        alphas: NDArray,
        batch: tuple[int, int, int],
    ) -> NDArray:
        """Thresholds ``(b, n_sub, c, k)`` of weighted conformal prediction (Tibshirani et
        al., 2019) for the rows of ``block``: in each stratum, at level ``alpha / c``, the
        rule ``conformal_quantile(weights=, test_weight=)`` applies (one shared routine,
        on scores sorted and weights summed once per calibration). ``batch``: the block's
        start and stop in ``X`` and the rows of ``X`` (messages)."""
        b = n_rows(block)
        test_weights = self._scaled_test_weights(block, batch)
        prepared = self._prepare_weighted_strata()
        n_sub = self._n_sub_strata
        n_components = prepared[0][0].shape[1] if prepared else 1
        out = np.full((b, n_sub, n_components, alphas.size), np.inf)
        row_groups = np.zeros(b, np.intp) if block_groups is None else block_groups
        # the block's rows by group (one sort): only the groups present are visited, so a
        # one-row call does not walk every stratum (10,000 groups: 68 ms against 5 ms)
        order = np.argsort(row_groups, kind="stable")
        present, starts = np.unique(row_groups[order], return_index=True)
        stops = np.append(starts[1:], b)
        n_groups = len(prepared) // n_sub
        for group, start, stop in zip(present, starts, stops, strict=True):  # over groups
            if not 0 <= group < n_groups:  # (a group unseen at calibration: left infinite)
                continue
            rows = order[start:stop]
            for label in range(n_sub):
                sorted_scores, cumulative = prepared[group * n_sub + label][:2]
                if not sorted_scores.shape[0]:
                    continue
                for component in range(n_components):  # a loop over sides, not rows
                    out[rows, label, component] = _shared_weight_thresholds(
                        sorted_scores[:, component],
                        cumulative[:, component],
                        test_weights[rows],
                        alphas / n_components,
                    )
        return out

    def _warn_about_class_weights(self, weights: NDArray, strata: NDArray, n_sub: int) -> None:
        """Warn when ``likelihood_ratio`` gives weight 0 to every calibration row of a class
        (class-conditional calibration): that class's threshold is infinite, so it joins
        every prediction set (of that group's rows)."""
        if not weights.any():  # every row weighs 0: warned for the whole set already
            return
        n_strata = int(strata.max()) + 1 if strata.size else 0
        counts = np.bincount(strata, minlength=n_strata)
        mass = np.bincount(strata, weights=weights, minlength=n_strata)
        groups = np.arange(n_strata) // n_sub
        group_mass = np.bincount(groups, weights=mass)  # a group of weight 0: warned already
        empty = np.flatnonzero((counts > 0) & (mass <= 0) & (group_mass[groups] > 0))
        if not empty.size:
            return
        grouped = getattr(self, "groups_", None) is not None
        names = [self._stratum_name(stratum, n_sub, grouped) for stratum in empty[:3]]
        more = f" and {empty.size - 3} more" if empty.size > 3 else ""
        rows = "of that group's rows " if grouped else ""
        that = "that class is" if empty.size == 1 else "each of those classes is"
        warn_user(
            f"`likelihood_ratio` gives weight 0 to every calibration row of "
            f"{', '.join(names)}{more}: {that} in every prediction set {rows}(its "
            "threshold is infinite). Check the ratio, or calibrate on rows of that class "
            "from the test distribution's support.",
            UserWarning,
        )

    def _warn_weighted_infinite(self, infinite: int, alphas: NDArray, by_stratum: NDArray) -> None:
        """Warn of rows whose weighted threshold is infinite, naming their strata (the
        counts ``by_stratum``) when calibration had groups or classes."""
        if infinite:
            n_sub = self._n_sub_strata
            outcome = (
                "the class of that stratum in every set for them"
                if n_sub > 1
                else f"{self._unbounded_prediction} for them"
            )
            grouped = getattr(self, "groups_", None) is not None
            where = ""
            if grouped or n_sub > 1:
                named = np.flatnonzero(by_stratum)
                where = "; " + ", ".join(
                    f"{self._stratum_name(int(stratum), n_sub, grouped)}: "
                    f"{by_stratum[stratum]} row{'s' if by_stratum[stratum] > 1 else ''}"
                    for stratum in named[:3]
                )
                where += f" and {named.size - 3} more" if named.size > 3 else ""
            warn_user(
                f"{infinite} row{'s' if infinite > 1 else ''} got an infinite threshold at "
                f"alpha={levels_text(alphas)} "
                f"({outcome}{where}): weighted by `likelihood_ratio`, "
                "the calibration scores of their stratum carry too little of the total "
                "weight (the row's own weight outweighs them far in the shifted region, or "
                "the stratum has too few calibration points). More calibration rows from "
                "that region, or a ratio closer to uniform, give finite ones.",
                UserWarning,
            )

    def _conformal_pvalues(
        self,
        X: Any,
        groups: ArrayLike | None,
        smooth: bool,
        n_columns: int,
        batch_scores: Callable[[Any, int, int], NDArray],
        component: int | None = None,
        tie_fraction: float | None = None,
    ) -> NDArray:
        """Conformal p-values of ``n_columns`` candidates for every row of a checked ``X``.

        ``batch_scores(block, start, stop)`` gives the conformity scores of the candidates
        of rows ``start:stop`` (shape ``(rows, n_columns)``, or ``(rows, n_columns, c)``
        for a score with ``c`` components). A candidate's p-value is ``(1 + m) / (n + 1)``,
        ``m`` of the ``n`` calibration scores of its stratum at least its score (each
        sub-stratum, a class, owns its column); smoothed, ``(g + u (e + 1)) / (n + 1)``
        with ``g`` greater, ``e`` equal and ``u`` uniform (stream 3). With ``c`` components,
        each calibrated at ``alpha / c``: ``min(1, c * min_k p_k)``, so ``p > alpha``
        exactly when every component is within its threshold. A stratum without
        calibration data gives 1: its sets hold every candidate.

        ``component`` keeps that column alone, as a one-sided p-value (no factor ``c``);
        ``tie_fraction`` replaces ``u`` by that constant when not smoothing. With both, an
        empty stratum gives ``u`` (the formula at ``n = 0``): a conformal predictive
        distribution is the p-value of one side of a signed score. With ``component``
        every candidate of a row shares the row's ``u``, so that the smoothed values are a
        distribution function of the candidate.
        """
        n = n_rows(X)
        group_index = self._group_index(groups, n)
        row_groups = np.zeros(n, np.intp) if group_index is None else group_index
        n_sub = self._n_sub_strata
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        calibration_scores = self.conformity_scores_.reshape(len(self.conformity_scores_), -1)
        n_components = calibration_scores.shape[1]
        # each stratum's calibration scores, sorted once (column by column)
        # sorted once per calibration (tied to its arrays, as the threshold table is); the
        # weighted strata hold them sorted already, beside their cumulative weights
        weighted = hasattr(self, "calibration_weights_")
        prepared = self._prepare_weighted_strata() if weighted else None
        key = (self.conformity_scores_, self.__dict__.get("calibration_strata_"))
        cached = self.__dict__.get("_ranked_strata")
        if prepared is not None:
            ranked = [stratum[0] for stratum in prepared]
        elif cached is not None and cached[0] is key[0] and cached[1] is key[1]:
            ranked = cached[2]
        else:
            ranked = [np.sort(calibration_scores[rows], axis=0) for rows in self._stratum_rows()]
            self._ranked_strata = (*key, ranked)
        # drawn whole before the batches: with a Generator as random_state, interleaving
        # these draws with the scores' own batch by batch would tie them to batch_size
        # one draw per row for a distribution function (`component`): Q(y, tau) at one
        # tau is non-decreasing in y; p-values of candidates draw one each
        ties = None
        if smooth:
            draws = self._rng(stream=3, content=X).random(
                (n, 1 if component is not None else n_columns)
            )
            ties = np.broadcast_to(draws, (n, n_columns))
        used = range(n_components) if component is None else range(component, component + 1)
        factor = n_components if component is None else 1
        pvalues = np.ones((n, n_columns))  # strata without calibration data: 1
        if component is not None and (smooth or tie_fraction is not None):
            pvalues[:] = tie_fraction if ties is None else ties  # one side at n = 0: u
        # the scores of every row first (the model called in batches, for bounded memory;
        # the scores are the size of the p-values), then each stratum once, on its own
        # rows (strata inside the batches cost batches x groups x classes loop steps);
        # only the components read are kept (a distribution function reads one side)
        scores = np.empty((n, n_columns, len(used)))
        test_weights = np.empty(n) if weighted else None
        step = self._batch_rows(n, n_columns * n_components)
        for start in range(0, n, step):  # a loop over batches of rows, for bounded memory
            stop = min(start + step, n)
            block = slice_rows(X, start, stop)
            self._check_nan(block)
            try:
                batch = np.asarray(batch_scores(block, start, stop), dtype=float)
            except NonFiniteOutputError as error:  # name the row of X, not of the batch
                raise error.renumbered(np.arange(start, stop), more_rows=stop < n) from None
            batch = batch.reshape(stop - start, n_columns, n_components)
            scores[start:stop] = batch[:, :, used.start : used.stop]
            if test_weights is not None:
                test_weights[start:stop] = self._scaled_test_weights(block, (start, stop, n))
        order = np.argsort(row_groups, kind="stable")  # the rows of each group, contiguous
        bounds = np.searchsorted(row_groups[order], np.arange(n_groups + 1))
        for group in range(n_groups):  # a loop over strata: groups, then classes
            members = order[bounds[group] : bounds[group + 1]]
            if not members.size:
                continue
            for label in range(n_sub):
                calibration = ranked[group * n_sub + label]
                if not calibration.shape[0]:  # no calibration data: as set above
                    continue
                # (rows, columns) of the stratum: without sub-strata every column, and
                # every row in order when one group holds them all (read without a copy)
                where: tuple[Any, Any]
                if n_sub > 1:
                    where = (members[:, None], np.array([label]))
                else:
                    where = (slice(None) if members.size == n else members, slice(None))
                u = tie_fraction if ties is None else ties[where]
                smallest: NDArray | None = None
                for position, side in enumerate(used):  # one per side of the score
                    if prepared is None:
                        p = _pvalue(calibration[:, side], scores[(*where, position)], u)
                    else:
                        assert test_weights is not None
                        sorted_scores, cumulative = prepared[group * n_sub + label][:2]
                        # this side's own total: the sides' sums differ in the last bits,
                        # and the first side's total gave p = -4e-16 where it is 0
                        total = float(cumulative[-1, side]) if cumulative.shape[0] else 0.0
                        p = _weighted_pvalue(
                            sorted_scores[:, side],
                            cumulative[:, side],
                            total,
                            scores[(*where, position)],
                            test_weights[members][:, None],
                            u,
                        )
                    smallest = p if smallest is None else np.minimum(smallest, p)
                assert smallest is not None
                if factor != 1:
                    smallest = factor * smallest
                pvalues[where] = np.minimum(1.0, smallest, out=smallest)
        return pvalues

    def predict(self, X: Any) -> NDArray:
        """Point prediction of the wrapped model (available after ``fit`` alone).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_wrapper_fitted(
            self,
            "estimator_",
            "predict",
            needs="fit(X, y) (or calibrate(X_calib, y_calib) alone around a fitted `estimator`)",
        )
        X = self._validate_X(X, reset=False)
        model = self.estimator_
        with self._reading_features(X):
            if not hasattr(model, "predict") and hasattr(model, "predict_proba"):
                # a classifier outside scikit-learn with predict_proba and classes_ only
                classes = model_classes(model)  # columns read by label when labelled
                proba = class_probabilities(model, X, len(classes), check_sums=False)
                return classes[np.argmax(proba, axis=1)]
            return self._point_output(model.predict(X))

    def _point_output(self, output: Any) -> NDArray:
        """The model's ``predict`` output as `predict` returns it: an ndarray as documented
        (a model's Series was passed through, where the cross and time-series wrappers gave
        arrays); a regressor's as floats of shape (n,), as its intervals read it (a column,
        a tensor, a sparse column)."""
        return point_predictions(output) if is_regressor(self) else np.asarray(output)
