"""Shared data and helpers for the uqconform tests (all seeded)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

# The examples of these modules run torch or nflows: without the optional extras their
# doctests are skipped, as the tests that need those packages are (collected with tests/).
_EXAMPLES_NEED = {
    Path("uqconform", "bayes", "torch_network.py"): ("torch",),
    Path("uqconform", "multioutput", "contra.py"): ("torch", "nflows"),
    Path("uqconform", "multioutput", "flows.py"): ("torch", "nflows"),
}


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules: blocked
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if not isinstance(item, pytest.DoctestItem):
            continue
        try:
            module = Path(str(item.path)).relative_to(root)
        except ValueError:
            continue
        missing = [name for name in _EXAMPLES_NEED.get(module, ()) if not _installed(name)]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)}"))


@pytest.fixture(autouse=True, scope="session")
def _one_thread_per_worker():
    """One BLAS/OpenMP thread per test process: pytest-xdist already uses every core, and
    oversubscribed OpenMP makes HistGradientBoosting tens of times slower."""
    with threadpool_limits(1):
        yield


def regression_data(n: int = 600, d: int = 4, seed: int = 0):
    """Heteroscedastic linear data: the noise grows with the first feature."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ np.linspace(1.0, 0.2, d) + (0.5 + np.abs(X[:, 0])) * rng.normal(size=n)
    return X, y


def strongly_heteroscedastic(n: int, seed):
    """Linear mean; noise scale ``0.1 + x0**2``. The `regression_data` noise
    (``0.5 + |x0|``) varies too little for a clear width gain: there even the oracle
    normalized interval (``f -/+ q sigma(x)``) is only about 7 % narrower on average than the
    best constant width; here about 21 %."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, X @ [1.0, -0.5] + (0.1 + X[:, 0] ** 2) * rng.normal(size=n)


def classification_data(n: int = 600, seed: int = 0, labels=("cat", "dog", "emu")):
    """Three overlapping Gaussian classes with string labels."""
    rng = np.random.default_rng(seed)
    k = len(labels)
    index = rng.integers(0, k, size=n)
    centres = np.array([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])[:k]
    X = centres[index] + rng.normal(size=(n, 2))
    return X, np.asarray(labels)[index]


def thirds(X, y, *rest):
    """Split rows into fit / calibration / test thirds (rest: more per-row arrays)."""
    n = len(y)
    cut = [slice(0, n // 3), slice(n // 3, 2 * n // 3), slice(2 * n // 3, n)]
    return [tuple(a[c] for a in (X, y, *rest)) for c in cut]


class Unchanged:
    """Deep copies of inputs, to assert later that no call modified them."""

    def __init__(self, *arrays):
        self.originals = arrays
        self.copies = [copy.deepcopy(a) for a in arrays]

    def check(self):
        for original, saved in zip(self.originals, self.copies, strict=True):
            if hasattr(original, "equals"):
                assert original.equals(saved)
            else:
                np.testing.assert_array_equal(np.asarray(original), np.asarray(saved))


@pytest.fixture
def reg_data():
    return regression_data()


@pytest.fixture
def clf_data():
    return classification_data()
