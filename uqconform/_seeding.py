"""Random states: checking them, seeding the models a wrapper trains, and the generators
of randomised scores (seeded by the rows they serve)."""

from __future__ import annotations

import copy
import numbers
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from sklearn.base import clone

from uqconform._rows import rows_digest
from uqconform._validation import model_given_hint


def seed_parameters(estimator: Any, only_unset: bool = False) -> list[str]:
    """Names of every ``random_state`` parameter, nested ones (Pipeline steps) included.

    With ``only_unset``, only those still ``None`` (the ones a library seed may fill in
    without overriding the user's choice).

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> seed_parameters(make_pipeline(StandardScaler(), RandomForestRegressor()))
    ['randomforestregressor__random_state']
    """
    _check_trainable(estimator)
    params = estimator.get_params(deep=True)
    return [
        name
        for name, value in params.items()
        if (name == "random_state" or name.endswith("__random_state"))
        and (value is None or not only_unset)
    ]


def _check_trainable(estimator: Any, owner: Any = None) -> None:
    """A model to be cloned and trained must be a scikit-learn estimator (``get_params``
    and ``fit``); the advice names ``owner``'s own call when it has ``calibrate``."""
    if not hasattr(estimator, "get_params"):
        if hasattr(owner, "calibrate"):
            name = type(owner).__name__
            remedy = (
                f"Train it yourself and skip fit: {name}(model).calibrate(X_cal, y_cal) uses "
                "it as it is."
            )
        else:
            remedy = (
                "Train it yourself and call calibrate without fit where the method has it: a "
                "model outside scikit-learn is then used as it is (the ensemble classifiers "
                "and RPS also take a list of such fitted models). The time-series methods "
                "train their models, so they need a scikit-learn estimator."
            )
        raise TypeError(
            f"`estimator` ({type(estimator).__name__}) is not a scikit-learn estimator (no "
            f"get_params), so it cannot be cloned and trained here. {remedy}"
        )
    if not callable(getattr(estimator, "fit", None)):
        raise TypeError(
            f"`estimator` ({type(estimator).__name__}) has no `fit` method, so it cannot be "
            "trained here: pass a scikit-learn estimator, or a fitted model to calibrate "
            "without fit."
        )


def seeded_clone(estimator: Any, random_state: Any, owner: Any = None) -> Any:
    """A clone of ``estimator`` whose ``random_state`` parameters left at None are seeded
    (``owner``: the wrapper training it, named in the refusal of a model it cannot clone).

    A wrapper's seed then also fixes the models it trains (same seed, same numbers, also
    around an unseeded random forest); each unset parameter gets its own seed, seeds the
    user set are kept, and ``random_state=None`` changes nothing. A Generator or
    RandomState ``random_state`` gives one draw when some parameter is unset.

    Examples
    --------
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> a, b = seeded_clone(RandomForestRegressor(), 3), seeded_clone(RandomForestRegressor(), 3)
    >>> a.random_state == b.random_state is not None
    True
    >>> seeded_clone(RandomForestRegressor(random_state=1), 3).random_state
    1
    """
    _check_trainable(estimator, owner)
    model = clone(estimator)
    if random_state is None:
        return model
    unset = seed_parameters(model, only_unset=True)
    if unset:  # one seed each: two unseeded members of an ensemble stay independent
        seeds = np.random.default_rng(integer_seed(random_state)).integers(2**31, size=len(unset))
        model.set_params(**{name: int(seed) for name, seed in zip(unset, seeds, strict=True)})
    return model


def seeded_splitter(cv: Any, random_state: Any) -> Any:
    """``cv``, or a copy of it seeded from ``random_state`` when it shuffles and was left
    unseeded (``KFold(5, shuffle=True)``, ``ShuffleSplit``): a wrapper's seed then fixes
    its folds too, as `seeded_clone` fixes its models. A splitter the user seeded, one that
    does not shuffle, and ``random_state=None`` are used as given; a Generator or
    RandomState gives one draw, only when a copy is seeded.

    Examples
    --------
    >>> from sklearn.model_selection import KFold
    >>> seeded_splitter(KFold(3, shuffle=True), 7).random_state
    7
    >>> seeded_splitter(KFold(3), 7).random_state is None  # no shuffling: nothing to seed
    True
    """
    shuffles = hasattr(cv, "random_state") and getattr(cv, "shuffle", True)
    if random_state is None or not shuffles or cv.random_state is not None:
        return cv
    try:
        seeded = copy.deepcopy(cv)
        seeded.random_state = integer_seed(random_state)
    except (TypeError, AttributeError, copy.Error):  # cannot be copied or seeded: as given
        return cv
    return seeded


def seeded_generator(
    seed: int, stream: int | Sequence[int], content: Any = None
) -> np.random.Generator:
    """The generator of one use of a seed, its draws tied to the rows they serve.

    With ``content`` (the rows of a prediction call) a hash of the rows joins the seed.
    Predicting the same rows again gives the same draws (predictions stay a function of
    the input), while other rows, such as one row per call, get fresh ones: a fixed seed
    restarted at every call would give each single-row call the same uniform, and the
    coverage of a row-by-row run would stray far from the nominal level.

    Examples
    --------
    >>> rows = np.arange(6.0).reshape(3, 2)
    >>> same = seeded_generator(0, 1, rows).random() == seeded_generator(0, 1, rows).random()
    >>> other = seeded_generator(0, 1, rows).random() != seeded_generator(0, 1, rows[:1]).random()
    >>> bool(same and other)
    True
    """
    entropy = [int(seed), *(int(word) for word in np.atleast_1d(stream))]
    if content is not None:
        digest = rows_digest(content)
        entropy += [int(digest[i : i + 8], 16) for i in range(0, len(digest), 8)]
    return np.random.default_rng(entropy)


def integer_seed(random_state: Any) -> int | None:
    """An int seed (or None) from ``random_state``: an int, None, a Generator or RandomState.

    A generator gives one draw, so a seeded generator still gives reproducible results.
    Anything else (a negative int, a string) is refused with a message naming it.
    """
    check_random_state_value(random_state)
    if random_state is None or isinstance(random_state, numbers.Integral):
        return None if random_state is None else int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31))
    return int(random_state.randint(2**31 - 1))  # a RandomState (checked above)


def check_random_state_value(random_state: Any) -> None:
    """``random_state`` is None, a non-negative int, a Generator or a RandomState.

    Examples
    --------
    >>> check_random_state_value(0)
    >>> check_random_state_value(1.5)
    Traceback (most recent call last):
    ...
    ValueError: `random_state` must be None, an int in [0, 2**32), ... got 1.5.
    """
    if random_state is None or isinstance(
        random_state, (np.random.Generator, np.random.RandomState)
    ):
        return
    if (
        isinstance(random_state, bool)
        or not isinstance(random_state, numbers.Integral)
        or not 0 <= cast(int, random_state) < 2**32
    ):
        raise ValueError(
            "`random_state` must be None, an int in [0, 2**32), a numpy Generator or a "
            f"RandomState, got {random_state!r}.{model_given_hint(random_state)}"
        )


def random_generator(random_state: Any) -> np.random.Generator:
    """``random_state`` as a numpy Generator, with a message naming it when numpy cannot
    use it: None, a non-negative int or sequence of them, a SeedSequence, a BitGenerator,
    a Generator or a RandomState (booleans, floats and text are refused).

    Examples
    --------
    >>> bool(random_generator(0).integers(10) == random_generator(0).integers(10))
    True
    >>> bool(random_generator([0, 11]).random() == random_generator([0, 11]).random())
    True
    """
    message = (
        "`random_state` must be None, a non-negative int (or a sequence of them), a "
        f"SeedSequence, a BitGenerator, a Generator or a RandomState, got {random_state!r}."
    )
    if isinstance(random_state, bool | float | str | bytes | np.bool_ | np.floating):
        raise ValueError(message)
    if isinstance(random_state, np.random.RandomState):  # what numpy >= 2.2 does itself
        return np.random.Generator(random_state._bit_generator)
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError):
        raise ValueError(message) from None
