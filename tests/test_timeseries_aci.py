"""Adaptive conformal inference (``aci_gamma``) on the sequential regressors."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from uqconform.timeseries import KOWCPI, SPCI, EnbPI


def regime_shift(n: int = 900, seed: int = 0):
    """Linear signal whose noise grows fourfold after row 500: the residual memory of the
    fit rows is too narrow afterwards, so every method under-covers there."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    noise = np.where(np.arange(n) < 500, 1.0, 4.0)
    return X, X @ [1.0, -1.0] + noise * rng.normal(size=n)


def models(gamma):
    return {
        "EnbPI": EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, aci_gamma=gamma),
        "SPCI": SPCI(
            LinearRegression(),
            window=3,
            n_bootstrap=8,
            memory=150,
            random_state=0,
            aci_gamma=gamma,
        ),
        "KOWCPI": KOWCPI(
            LinearRegression(), window=2, n_bootstrap=8, random_state=0, aci_gamma=gamma
        ),
    }


def aci_bound(alpha, gamma, steps):
    """Gibbs and Candes (2021), Proposition 4.1, started at the nominal level."""
    return (max(alpha, 1 - alpha) + gamma) / (gamma * steps)


@pytest.mark.parametrize("name", ["EnbPI", "SPCI", "KOWCPI"])
@pytest.mark.parametrize("gamma", [0.05, 0.1])
def test_long_run_miss_rate_is_within_the_deterministic_bound(name, gamma):
    """The miss rate over every online step, in two calls, is within the ACI bound of
    alpha; the same method without ACI misses more often than the bound allows."""
    X, y = regime_shift()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # few residuals for KOWCPI's window
        model = models(gamma)[name].fit(X[:300], y[:300])
        plain = models(None)[name].fit(X[:300], y[:300])
        for part in (slice(300, 600), slice(600, 900)):
            model.predict_interval(X[part], y=y[part])
            plain.predict_interval(X[part], y=y[part])
    steps = 600
    miss = 1 - model.coverage_history_.mean()
    assert len(model.coverage_history_) == steps
    assert abs(miss - 0.1) <= aci_bound(0.1, gamma, steps), miss
    assert 1 - plain.coverage_history_.mean() > 0.1 + aci_bound(0.1, gamma, steps)


def test_levels_follow_the_recursion_and_the_first_step_is_the_plain_method():
    X, y = regime_shift(seed=1)
    gamma = 0.05
    model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, aci_gamma=gamma)
    plain = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0)
    model.fit(X[:300], y[:300])
    plain.fit(X[:300], y[:300])
    np.testing.assert_array_equal(
        model.predict_interval(X[300:301]), plain.predict_interval(X[300:301])
    )
    model.predict_interval(X[300:700], y=y[300:700])
    levels, hits = model.aci_alpha_history_, model.coverage_history_
    assert levels[0] == 0.1 and levels.shape == hits.shape == (400,)
    np.testing.assert_allclose(np.diff(levels), gamma * (0.1 - ~hits[:-1]), atol=1e-12)
    final = levels[-1] + gamma * (0.1 - (not hits[-1]))
    assert model.aci_alphas_ == {0.1: pytest.approx(final, abs=1e-12)}
    # without y the current level is used and nothing moves
    now = model.predict_interval(X[700:710])
    assert model.aci_alphas_[0.1] == pytest.approx(final, abs=1e-12)
    plain_now = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, alpha=final)
    plain_now.fit(X[:300], y[:300]).update(X[300:700], y[300:700])
    if 0 < final < 1:
        np.testing.assert_allclose(now, plain_now.predict_interval(X[700:710]), rtol=1e-12)
    # update() absorbs residuals but issues no interval: the level stays
    model.update(X[710:720], y[710:720])
    assert model.aci_alphas_[0.1] == pytest.approx(final, abs=1e-12)


def test_levels_outside_zero_one_give_the_line_and_the_empty_set():
    """A large step sends the level below 0 (the whole line, a hit) and above 1 (the
    empty set: a zero-width interval at the prediction, a miss); the bound still holds."""
    X, y = regime_shift(seed=2)
    gamma, alpha = 0.9, 0.5
    model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, alpha=alpha, aci_gamma=gamma)
    model.fit(X[:300], y[:300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # infinite ends of ACI's doing are not warned about
        out = model.predict_interval(X[300:700], y=y[300:700])
    levels, hits = model.aci_alpha_history_, model.coverage_history_
    line, empty = levels <= 0, levels >= 1
    assert line.any() and empty.any()
    assert np.isinf(out[line]).all() and hits[line].all()
    centre = model.predict(X[300:700])
    np.testing.assert_allclose(out[empty, 0], centre[empty], rtol=1e-12)
    np.testing.assert_allclose(out[empty, 1], centre[empty], rtol=1e-12)
    assert not hits[empty].any()
    assert abs((1 - hits.mean()) - alpha) <= aci_bound(alpha, gamma, len(hits))


def test_each_level_of_a_call_keeps_its_own_bound():
    X, y = regime_shift(seed=3)
    gamma = 0.05
    model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, aci_gamma=gamma)
    model.fit(X[:300], y[:300])
    out = model.predict_interval(X[300:], y=y[300:], alpha=[0.1, 0.3])
    assert set(model.aci_alphas_) == {0.1, 0.3}
    for j, alpha in enumerate((0.1, 0.3)):
        level = model.aci_alphas_[alpha]
        assert -gamma <= level <= 1 + gamma
        if j == 0:
            misses = ~model.coverage_history_
        else:  # from the intervals (an empty set's point holds y with probability 0)
            misses = ~((out[:, 0, j] <= y[300:]) & (y[300:] <= out[:, 1, j]))
        assert abs(misses.mean() - alpha) <= aci_bound(alpha, gamma, len(misses))


def test_state_is_pickled_reset_by_fit_and_kept_when_a_call_is_refused():
    X, y = regime_shift(seed=4)
    model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, aci_gamma=0.05)
    model.fit(X[:300], y[:300]).predict_interval(X[300:400], y=y[300:400])
    copy = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(
        copy.predict_interval(X[400:500], y=y[400:500]),
        model.predict_interval(X[400:500], y=y[400:500]),
    )
    assert copy.aci_alphas_ == model.aci_alphas_
    before = dict(model.aci_alphas_), model.aci_alpha_history_.copy()
    bad = y[500:510].copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.predict_interval(X[500:510], y=bad)
    assert model.aci_alphas_ == before[0]
    np.testing.assert_array_equal(model.aci_alpha_history_, before[1])
    model.fit(X[:300], y[:300])
    assert model.aci_alphas_ == {} and model.aci_alpha_history_.size == 0


@pytest.mark.parametrize("gamma", [0, -0.1, 1.5, "0.1", True, np.nan])
def test_bad_gamma_is_refused_naming_it(gamma):
    X, y = regime_shift(400)
    with pytest.raises(ValueError, match=r"`aci_gamma` must be None, a step size in \(0, 1\]"):
        EnbPI(LinearRegression(), n_bootstrap=8, aci_gamma=gamma).fit(X, y)


def test_a_zero_dimensional_array_is_the_step_size_itself():
    """Review finding (stop 54): ``aci_gamma=np.array(0.05)`` was refused as "a sequence of
    at least two distinct step sizes" (``alpha=np.array(0.1)`` is accepted); it is the
    number, with the same levels, hits and intervals as ``aci_gamma=0.05``."""
    X, y = regime_shift(400)
    runs = []
    for gamma in (0.05, np.array(0.05)):
        model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, aci_gamma=gamma)
        intervals = model.fit(X[:300], y[:300]).predict_interval(X[300:], y=y[300:])
        runs.append((intervals, model.aci_alpha_history_, model.coverage_history_))
    for plain, array in zip(*runs, strict=True):
        np.testing.assert_array_equal(array, plain)
    assert np.unique(runs[0][1]).size > 1  # the level moved: ACI ran


@pytest.mark.parametrize(
    "gamma, shown",
    [
        ([0.05], "[0.05]"),
        ((0.05,), "(0.05,)"),
        (np.array([0.05]), "[0.05]"),
        (pd.Series([0.05]), "[0.05]"),
    ],
)
def test_one_step_size_in_a_sequence_is_told_to_pass_a_number(gamma, shown):
    """Review finding (stop 54): a one-element sequence was refused as "a sequence of at
    least two distinct step sizes", without saying that ACI takes the number itself.
    Review finding (diffrev12): a pandas Series was shown by its repr, across lines (index
    and dtype); arrays and pandas objects are shown as lists, on one line."""
    X, y = regime_shift(100)
    message = (
        f"`aci_gamma`.*got {re.escape(shown)}: for ACI with one step size pass it as a "
        r"number, e\.g\. aci_gamma=0\.05\.$"
    )
    with pytest.raises(ValueError, match=message) as error:
        EnbPI(LinearRegression(), n_bootstrap=8, aci_gamma=gamma).fit(X, y)
    assert "\n" not in str(error.value)


def test_a_refused_series_is_shown_on_one_line():
    """Review finding (diffrev12): the refusal showed a pandas Series by its repr, across
    lines; any refused Series, DataFrame or array is shown as a list."""
    X, y = regime_shift(100)
    for gamma, shown in (
        (pd.Series([0.05, 0.05]), "[0.05, 0.05]"),
        (pd.DataFrame({"gamma": [0.01, 0.05]}), "[[0.01], [0.05]]"),
        (np.array([[0.01, 0.05]]), "[[0.01, 0.05]]"),
    ):
        with pytest.raises(ValueError, match=f"got {re.escape(shown)}\\.$") as error:
            EnbPI(LinearRegression(), n_bootstrap=8, aci_gamma=gamma).fit(X, y)
        assert "\n" not in str(error.value)


def test_models_pickled_before_aci_existed_still_work():
    """A review found: a model pickled before ``aci_gamma`` existed raised AttributeError in
    predict_interval, get_params, repr and clone (no attribute to read)."""
    X, y = regime_shift(400, seed=5)
    model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0).fit(X[:300], y[:300])
    for name in ("aci_gamma", "aci_alphas_", "aci_alpha_history_"):
        del model.__dict__[name]  # as unpickled from the previous version
    old = pickle.loads(pickle.dumps(model))
    assert old.get_params()["aci_gamma"] is None and "EnbPI" in repr(old)
    assert clone(old).aci_gamma is None
    assert old.predict_interval(X[300:350], y=y[300:350]).shape == (50, 2)


def test_infinite_intervals_of_the_method_still_warn_beside_a_lowered_level():
    """A review found: with several levels, a row whose other level ACI had lowered hid the
    method's own infinite intervals from the warning. A memory of 20 residuals is too short
    for finite ends at 0.05 (39 needed): those are the method's, and are counted."""
    X, y = regime_shift(700, seed=2)
    model = EnbPI(
        LinearRegression(),
        n_bootstrap=8,
        memory=20,
        finite_sample=True,
        random_state=0,
        aci_gamma=0.05,
    ).fit(X[:150], y[:150])
    with pytest.warns(UserWarning, match=r"(\d+) of 300 intervals are infinite") as caught:
        out = model.predict_interval(X[150:450], y=y[150:450], alpha=[0.05, 0.3])
    level = model.aci_alpha_history_  # of 0.05, the first level
    own = np.isinf(out[:, :, 0]).any(axis=1) & (level >= 0.05)
    warned = [w for w in caught if "intervals are infinite" in str(w.message)]
    count = int(str(warned[0].message).split(" of ")[0])
    assert own.sum() > 100 and count >= own.sum()
    # the message names ACI's working level as a cause (it named only the memory)
    assert "`aci_alpha_history_`, which ACI lowers after misses" in str(warned[0].message)


def test_history_stays_aligned_when_aci_is_switched_off():
    X, y = regime_shift(600, seed=6)
    model = EnbPI(LinearRegression(), n_bootstrap=8, random_state=0, aci_gamma=0.05)
    model.fit(X[:300], y[:300]).predict_interval(X[300:400], y=y[300:400])
    model.set_params(aci_gamma=None).predict_interval(X[400:450], y=y[400:450])
    assert model.aci_alpha_history_.shape == model.coverage_history_.shape == (150,)
    np.testing.assert_array_equal(model.aci_alpha_history_[100:], 0.1)


def test_infinite_intervals_at_positive_lowered_levels_warn():
    """With finite_sample=True and memory=25 the nominal 0.1 is finite, but a level ACI
    lowers below about 0.077 needs 26 residuals and gives the whole line: that was not
    reported, as if ACI had taken the level to 0."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(750, 2))
    noise = np.where(np.arange(750) < 450, 1.0, 3.0)
    y = X @ [1.0, -1.0] + noise * rng.normal(size=750)
    model = EnbPI(
        LinearRegression(), n_bootstrap=10, memory=25, finite_sample=True, aci_gamma=0.02,
        random_state=0,
    ).fit(X[:150], y[:150])  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = model.predict_interval(X[150:], y=y[150:])
    levels = model.aci_alpha_history_
    assert (np.isinf(out).any(axis=1) & (levels > 0)).any()
    assert any("intervals are infinite" in str(w.message) for w in caught)
