"""Independent fits (heads, partitions, bootstrap models): progress bars and identical results."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from joblib import delayed
from sklearn.datasets import make_classification
from sklearn.linear_model import LinearRegression
from sklearn.tree import DecisionTreeClassifier

from uqconform._parallel import run_fits
from uqconform.classification import (
    EnsembleConformalClassifier,
    MultiDimScoreClassifier,
    ReliablePredictionSets,
)
from uqconform.timeseries import KOWCPI, SPCI, EnbPI


def _classifiers():
    tree = DecisionTreeClassifier(max_depth=3)
    return {
        "ensemble": (EnsembleConformalClassifier(tree, n_heads=3, random_state=0), "heads"),
        "multidim": (MultiDimScoreClassifier(tree, n_heads=3, random_state=0), "heads"),
        "rps": (ReliablePredictionSets(tree, k_train=3, k_calib=3, random_state=0), "RPS"),
    }


@pytest.mark.parametrize("name", list(_classifiers()))
def test_classifier_verbose_shows_a_bar_and_changes_nothing(name, capsys):
    X, y = make_classification(300, n_features=6, n_informative=4, n_classes=3, random_state=0)
    model, desc = _classifiers()[name]
    quiet = model.fit(X[:200], y[:200]).calibrate(X[200:260], y[200:260]).predict_set(X[260:])
    assert desc not in capsys.readouterr().err
    model.set_params(verbose=True)
    loud = model.fit(X[:200], y[:200]).calibrate(X[200:260], y[200:260]).predict_set(X[260:])
    bar = capsys.readouterr().err
    assert desc in bar and "3/3" in bar  # a tqdm bar of finished fits
    np.testing.assert_array_equal(loud, quiet)


@pytest.mark.parametrize("method", [EnbPI, SPCI, KOWCPI])
def test_time_series_verbose_shows_a_bar_of_bootstrap_models(method, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=120)
    params = {"window": 5} if method is not EnbPI else {}
    model = method(LinearRegression(), n_bootstrap=10, random_state=0, **params)
    quiet = model.fit(X[:100], y[:100]).predict_interval(X[100:])
    model.set_params(verbose=True)
    loud = model.fit(X[:100], y[:100]).predict_interval(X[100:])
    bar = capsys.readouterr().err
    assert "bootstrap models" in bar and "10/10" in bar
    assert "[Parallel(" not in bar  # joblib's own text is not shown
    np.testing.assert_array_equal(loud, quiet)


def test_run_fits_keeps_the_order_of_the_jobs_with_two_workers():
    jobs = [delayed(pow)(i, 2) for i in range(20)]
    for verbose in (False, True):
        assert run_fits(iter(jobs), n_jobs=2, verbose=verbose, desc="squares", total=20) == [
            i**2 for i in range(20)
        ]


def _out_of_fold_models():
    from sklearn.linear_model import Ridge

    from uqconform.multioutput import (
        EllipsoidalConformalRegressor,
        RectangularConformalRegressor,
    )
    from uqconform.regression import SplitConformalRegressor

    return {
        "normalized split": SplitConformalRegressor(
            Ridge(), conformity_score="normalized", random_state=0
        ),
        "ellipse": EllipsoidalConformalRegressor(Ridge(), random_state=0),
        "box": RectangularConformalRegressor(Ridge(), random_state=0),
    }


@pytest.mark.parametrize("name", list(_out_of_fold_models()))
def test_out_of_fold_residuals_do_not_depend_on_n_jobs(name):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    Y = X[:, :2] * [1.0, -2.0] + rng.normal(size=(300, 2)) * (1 + np.abs(X[:, :1]))
    model = _out_of_fold_models()[name]
    y = Y[:, 0] if name == "normalized split" else Y
    one = model.fit(X[:150], y[:150]).calibrate(X[150:250], y[150:250]).predict_interval(X[250:])
    model.set_params(n_jobs=2)
    two = model.fit(X[:150], y[:150]).calibrate(X[150:250], y[150:250]).predict_interval(X[250:])
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("name", list(_out_of_fold_models()))
def test_n_jobs_reaches_the_out_of_fold_predictions(name, monkeypatch):
    from sklearn.model_selection import cross_val_predict

    import uqconform._cross  # the one out-of-fold helper every wrapper calls

    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs.get("n_jobs"))
        return cross_val_predict(*args, **kwargs)

    monkeypatch.setattr(uqconform._cross, "cross_val_predict", recording)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 3))
    Y = X[:, :2] + rng.normal(size=(100, 2))
    y = Y[:, 0] if name == "normalized split" else Y
    _out_of_fold_models()[name].set_params(n_jobs=3).fit(X, y)
    assert seen == [3]


def test_verbose_works_under_a_backend_without_generator_output():
    """joblib's multiprocessing backend cannot return results as they finish: the fits run
    as a plain list and the bar fills at the end, instead of failing."""
    from joblib import parallel_config

    jobs = [delayed(pow)(i, 2) for i in range(6)]
    with parallel_config(backend="multiprocessing"):
        assert run_fits(iter(jobs), n_jobs=2, verbose=True, desc="squares", total=6) == [
            i**2 for i in range(6)
        ]


def _estimators_with_n_jobs():
    from sklearn.linear_model import Ridge

    from uqconform.classification import HeadEnsemble
    from uqconform.multioutput import (
        EllipsoidalConformalRegressor,
        RectangularConformalRegressor,
    )
    from uqconform.regression import SplitConformalRegressor

    tree = DecisionTreeClassifier(max_depth=2)
    return {
        "split": (SplitConformalRegressor(Ridge()), "regression"),
        "ellipse": (EllipsoidalConformalRegressor(Ridge()), "multioutput"),
        "box": (RectangularConformalRegressor(Ridge()), "multioutput"),
        "heads": (HeadEnsemble(tree, n_heads=2), "classification"),
        "ensemble": (EnsembleConformalClassifier(tree, n_heads=2), "classification"),
        "multidim": (MultiDimScoreClassifier(tree, n_heads=2), "classification"),
        "rps": (ReliablePredictionSets(tree, k_train=2, k_calib=2), "classification"),
        "enbpi": (EnbPI(LinearRegression(), n_bootstrap=10), "regression"),
    }


@pytest.mark.parametrize("name", list(_estimators_with_n_jobs()))
@pytest.mark.parametrize(
    "param, value",
    [
        ("n_jobs", 0),
        ("n_jobs", "two"),
        ("n_jobs", True),
        ("verbose", "no"),
        ("random_state", 2**32),
        ("random_state", True),
    ],
)
def test_bad_n_jobs_and_verbose_are_named_at_fit(name, param, value):
    model, task = _estimators_with_n_jobs()[name]
    if param == "verbose" and "verbose" not in model.get_params():
        pytest.skip("no verbose parameter")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = {
        "regression": X[:, 0] + rng.normal(size=60),
        "multioutput": X[:, :2] + rng.normal(size=(60, 2)),
        "classification": (X[:, 0] > 0).astype(int),
    }[task]
    with pytest.raises(ValueError, match=param):
        model.set_params(**{param: value}).fit(X, y)


def test_a_job_error_under_the_fallback_is_not_chained_to_joblib_s():
    from joblib import parallel_config

    def fail():
        raise KeyError("the job's own error")

    with parallel_config(backend="multiprocessing"), pytest.raises(KeyError) as caught:
        run_fits(iter([delayed(fail)()]), n_jobs=1, verbose=True, desc="x", total=1)
    assert caught.value.__context__ is None


def test_predictions_from_many_threads_equal_sequential_ones():
    """The docs promise it (getting-started, section 10): one calibrated model predicting
    from eight threads at once, each with its own rows and levels, randomised scores,
    Mondrian groups and a time series without y included."""
    from concurrent.futures import ThreadPoolExecutor

    from uqconform import SplitConformalClassifier, SplitConformalRegressor

    X, labels = make_classification(
        900, n_features=5, n_classes=3, n_informative=3, random_state=0
    )
    y = X[:, 0] + np.random.default_rng(0).normal(size=900)
    groups = (X[:, 1] > 0).astype(int)
    classifier = SplitConformalClassifier(
        conformity_score="aps", class_conditional=True, random_state=0
    ).fit(X[:300], labels[:300])
    classifier.calibrate(X[300:600], labels[300:600], groups=groups[300:600])
    regressor = SplitConformalRegressor(
        LinearRegression(), conformity_score="normalized", random_state=0
    ).fit(X[:300], y[:300])
    regressor.calibrate(X[300:600], y[300:600])
    series = KOWCPI(LinearRegression(), n_bootstrap=10, random_state=0).fit(X[:600], y[:600])
    calls = [
        lambda rows, a: classifier.predict_set(X[rows], alpha=a, groups=groups[rows]),
        lambda rows, a: classifier.predict_pvalue(X[rows], groups=groups[rows]),
        lambda rows, a: regressor.predict_interval(X[rows], alpha=a),
        lambda rows, a: series.predict_interval(X[rows], alpha=a),
    ]
    jobs = [
        (call, slice(600 + 7 * k, 700 + 9 * k), [0.1 + 0.01 * k, 0.3])
        for k in range(8)
        for call in calls
    ]
    sequential = [call(rows, a) for call, rows, a in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            threaded = list(pool.map(lambda job: job[0](job[1], job[2]), jobs))
            for one, other in zip(sequential, threaded, strict=True):
                np.testing.assert_array_equal(one, other)


def _warn_and_square(value: int) -> int:
    warnings.warn(f"fit warning {value % 2}", UserWarning, stacklevel=1)
    return value**2


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_warnings_of_fits_reach_the_caller_whatever_the_process(n_jobs):
    """A fit's warnings reach the caller's filters with two worker processes too (before,
    the workers printed them, out of reach of ``pytest.warns`` and of filters): each
    distinct one once from workers; in the caller's own process, as raised."""
    jobs = (delayed(_warn_and_square)(i) for i in range(4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        squares = run_fits(jobs, n_jobs=n_jobs, verbose=False, desc="squares", total=4)
    assert squares == [0, 1, 4, 9]
    messages = [str(w.message) for w in caught]
    assert sorted(set(messages)) == ["fit warning 0", "fit warning 1"]
    assert len(messages) == (4 if n_jobs is None else 2)
    assert all(w.filename == __file__ for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the caller's filter applies
        with pytest.raises(UserWarning, match="fit warning"):
            run_fits(
                (delayed(_warn_and_square)(i) for i in range(4)),
                n_jobs=n_jobs,
                verbose=False,
                desc="squares",
                total=4,
            )


def test_cross_fitted_regressors_name_their_models_in_the_bar(capsys):
    """J+aB's bar read "fold models" for its bootstrap models (api review)."""
    from uqconform import CrossConformalRegressor, JackknifeAfterBootstrapRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=80)
    for model, desc in (
        (CrossConformalRegressor(LinearRegression(), cv=4, verbose=True), "fold models"),
        (
            JackknifeAfterBootstrapRegressor(
                LinearRegression(), n_bootstrap=20, random_state=0, verbose=True
            ),
            "bootstrap models",
        ),
    ):
        model.fit(X, y)
        bar = capsys.readouterr().err
        assert desc in bar and ("fold models" not in bar or desc == "fold models")
