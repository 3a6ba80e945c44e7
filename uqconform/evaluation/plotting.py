"""Matplotlib figures for coverage reports and 1-D regression bands.

matplotlib is an optional dependency (``pip install "uqconform[plot]"``); it is imported
only when a function here is called.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from uqconform._validation import check_row_order
from uqconform.evaluation.metrics import _numeric_target, _parse_prediction, _widths

__all__ = ["plot_coverage", "plot_efficiency", "plot_intervals"]

_INSTALL_HINT = 'plotting needs matplotlib: pip install "uqconform[plot]"'


def require_pyplot() -> Any:
    """Import and return ``matplotlib.pyplot``, or raise an ``ImportError`` saying how."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(_INSTALL_HINT) from error
    return plt


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    return require_pyplot().subplots()[1]


def _floats(values: ArrayLike, name: str) -> NDArray:
    """``values`` as a flat float array, or an error naming the argument."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must hold numbers, got {values!r:.80}.") from None
    if array.ndim > 1 and array.size != max(array.shape):
        raise ValueError(f"`{name}` must be 1-D, got shape {array.shape}.")
    return array.reshape(-1)


def _paired(nominal: ArrayLike, values: ArrayLike, name: str) -> tuple[NDArray, NDArray]:
    """Two flat float arrays of equal length: the levels, in (0, 1), and one value per
    level."""
    levels = _floats(nominal, "nominal")
    paired = _floats(values, name)
    if levels.size == 0:
        raise ValueError("`nominal` is empty: give at least one level.")
    if levels.shape != paired.shape:
        raise ValueError(f"`{name}` has {paired.size} values but `nominal` has {levels.size}.")
    if not ((levels > 0) & (levels < 1)).all():
        raise ValueError(
            f"`nominal` holds coverages 1 - alpha strictly between 0 and 1 (fractions, not "
            f"percent), got {levels.tolist()!r:.80}."
        )
    return levels, paired


def plot_coverage(
    nominal: ArrayLike,
    observed: ArrayLike,
    bounds: ArrayLike | None = None,
    ax: Any = None,
    label: str | None = None,
) -> Any:
    """Observed against nominal coverage, with the valid-coverage interval as error bars.

    Parameters
    ----------
    nominal : array-like of shape (k,)
        Target coverages ``1 - alpha``.
    observed : array-like of shape (k,)
        Coverages measured on test data.
    bounds : array-like of shape (k, 2), optional
        Interval in which a valid split-conformal method's coverage falls
        (`uqconform.evaluation.coverage_bounds`); NaN rows are not drawn.
    ax : matplotlib Axes, optional
        Where to draw; a new figure by default.
    label : str, optional
        Legend label of the observed points.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_coverage([0.8, 0.9], [0.82, 0.88], bounds=[[0.75, 0.85], [0.86, 0.94]])
    >>> ax.get_xlabel()
    'nominal coverage (1 - alpha)'
    >>> matplotlib.pyplot.close("all")
    """
    nominal_, observed_ = _paired(nominal, observed, "observed")
    if not (np.isnan(observed_) | ((observed_ >= 0) & (observed_ <= 1))).all():
        raise ValueError("`observed` holds coverages in [0, 1] (NaN for a level not measured).")
    if bounds is not None:
        try:
            band = np.asarray(bounds, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"`bounds` must hold numbers, got {bounds!r:.80}.") from None
        if band.shape == (2,):  # one (low, high) pair
            band = band[None, :]
        if band.shape != (nominal_.size, 2):
            raise ValueError(
                f"`bounds` must have shape ({nominal_.size}, 2), one (low, high) row per "
                f"level, got {band.shape}."
            )
        if not (np.isnan(band) | ((band >= 0) & (band <= 1))).all():
            raise ValueError("`bounds` holds coverages in [0, 1] (NaN rows are not drawn).")
        if np.any(band[:, 0] > band[:, 1]):
            raise ValueError("`bounds` has rows with low > high; each row is (low, high).")
    ax = _axes(ax)
    if bounds is not None:
        center = band.mean(axis=1)
        shown = np.isfinite(center)
        ax.errorbar(
            nominal_[shown],
            center[shown],
            yerr=np.abs(band[shown] - center[shown, None]).T,
            fmt="none",
            ecolor="0.6",
            elinewidth=6,
            alpha=0.6,
            label="valid-coverage interval",
        )
    low = float(np.append(nominal_, observed_[~np.isnan(observed_)]).min())  # NaN: not drawn
    ax.plot([low, 1], [low, 1], color="0.3", linestyle="--", linewidth=1, label="nominal")
    ax.plot(nominal_, observed_, "o", color="C0", label=label or "observed")
    ax.set_xlabel("nominal coverage (1 - alpha)")
    ax.set_ylabel("observed coverage")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def plot_efficiency(
    nominal: ArrayLike, efficiency: ArrayLike, ax: Any = None, ylabel: str = "mean width"
) -> Any:
    """Efficiency (mean width, set size or volume) against nominal coverage.

    Parameters
    ----------
    nominal : array-like of shape (k,)
    efficiency : array-like of shape (k,)
        Non-negative. Infinite values are drawn at the top of the axes as open markers
        labelled with the infinity sign (their height is a placeholder); NaN values (a
        level not measured) are not drawn.
    ax : matplotlib Axes, optional
    ylabel : str, default="mean width"

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_efficiency([0.8, 0.9, 0.95], [1.0, 1.4, 2.1], ylabel="mean set size")
    >>> ax.get_ylabel()
    'mean set size'
    >>> matplotlib.pyplot.close("all")
    """
    nominal_, values = _paired(nominal, efficiency, "efficiency")
    if (values < 0).any():
        raise ValueError(f"`efficiency` must be non-negative, got {values.tolist()!r:.80}.")
    ax = _axes(ax)
    order = np.argsort(nominal_)
    finite = np.isfinite(values[order])
    infinite = np.isposinf(values[order])
    ax.plot(nominal_[order][finite], values[order][finite], "o-", color="C1")
    if infinite.any():
        top = np.max(values[order][finite]) * 1.1 if finite.any() else 1.0
        ax.plot(
            nominal_[order][infinite],
            np.full(int(infinite.sum()), top),
            "^",
            color="C1",
            fillstyle="none",
            label="infinite",
        )
        for x in nominal_[order][infinite]:  # the height is a placeholder, not a value
            ax.annotate(
                "\u221e",
                (x, top),
                xytext=(0, -7),
                textcoords="offset points",
                ha="center",
                va="top",
                fontsize="large",
                color="C1",
            )
        ax.legend(loc="upper left", fontsize="small")
    ax.set_xlabel("nominal coverage (1 - alpha)")
    ax.set_ylabel(ylabel)
    return ax


def plot_intervals(
    x: ArrayLike,
    y: ArrayLike | None,
    intervals: ArrayLike,
    ax: Any = None,
    labels: list[str] | None = None,
) -> Any:
    """Prediction bands of a 1-D regression problem, rows sorted by ``x``.

    Points outside their narrowest interval are drawn in red: the level unbounded on the
    fewest rows, and among those the one of smallest median finite width (for nested
    sets, the largest ``alpha``), which the legend names (its label, or "the narrowest
    band") when there are several. Infinite bounds leave a gap in the band.

    Parameters
    ----------
    x : array-like of shape (n,)
        The single feature.
    y : array-like of shape (n,), optional
        Observed targets, drawn as points. Rows are paired with ``x``'s by position: a
        pandas ``y`` (or ``intervals``) holding ``x``'s row labels in another order is
        refused.
    intervals : array-like of shape (n, 2) or (n, 2, k)
        One band per level (widest drawn first, lightest).
    ax : matplotlib Axes, optional
    labels : list of str, optional
        Legend label per level.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> x = np.array([2.0, 0.0, 1.0])
    >>> bands = np.column_stack([x - 1, x + 1])
    >>> ax = plot_intervals(x, x + np.array([0.5, 0.0, 3.0]), bands)
    >>> len(ax.collections) >= 1
    True
    >>> matplotlib.pyplot.close("all")
    """

    # pandas x, y and intervals are paired by position: refuse one row order read as another
    check_row_order(x, y, "y", rows_of="x")
    check_row_order(x, intervals, "intervals", rows_of="x")
    check_row_order(intervals, y, "y", rows_of="intervals")  # x may carry no row labels
    x_ = np.asarray(x)
    if x_.ndim == 2 and x_.shape[1] == 1:
        x_ = x_[:, 0]
    if x_.ndim != 1:
        raise ValueError(f"`x` must be 1-D (a single feature), got shape {x_.shape}.")
    if x_.dtype.kind in "biuf":  # numbers checked; dates and categories plotted as given
        _numeric_target(x_, "x")
    elif pd.isna(x_).any():
        raise ValueError(f"`x` contains {int(pd.isna(x_).sum())} missing values (NaN/NaT).")
    y_ = None
    if y is not None:
        y_ = np.asarray(y)
        if y_.ndim == 2 and y_.shape[1] == 1:
            y_ = y_[:, 0]
        if y_.ndim != 1:
            raise ValueError(f"`y` must be 1-D, got shape {y_.shape}.")
        if y_.shape[0] != x_.shape[0]:
            raise ValueError(f"`y` has {y_.shape[0]} entries but `x` has {x_.shape[0]}.")
        y_ = _numeric_target(y_, "y")
    parsed = _parse_prediction(intervals, None, name="intervals", intervals_only=True)
    if parsed.kind != "interval":
        raise TypeError("`intervals` must be a float array (n, 2) or (n, 2, k).")
    bands: NDArray = parsed.data.astype(float)
    if bands.shape[0] != x_.shape[0]:
        raise ValueError(f"`intervals` has {bands.shape[0]} rows but `x` has {x_.shape[0]}.")
    n_levels = bands.shape[2]
    if labels is not None and len(labels) != n_levels:
        raise ValueError(f"`labels` has {len(labels)} entries for {n_levels} levels.")
    ax = _axes(ax)
    order = np.argsort(x_, kind="stable")
    xs = x_[order]
    shown = np.where(np.isfinite(bands), bands, np.nan)[order]
    # levels ranked narrowest first by their unbounded rows, then by the median of their
    # finite widths: nested sets are unbounded on fewer rows, and narrower on the others,
    # at a smaller level (the median of all widths tied at inf when most rows were
    # unbounded, and the widest level was taken for the narrowest; a mean is inf as soon
    # as one row is)
    widths = _widths(bands)
    bounded = np.isfinite(widths)
    unbounded = (~bounded).sum(axis=0)
    finite_median = np.array(
        [
            np.median(w[ok]) if ok.any() else np.inf
            for w, ok in zip(widths.T, bounded.T, strict=True)
        ]
    )
    narrowest_first = np.lexsort((finite_median, unbounded))  # ties: the first level given
    for rank, level in enumerate(narrowest_first[::-1]):  # widest drawn first, lightest
        ax.fill_between(
            xs,
            shown[:, 0, level],
            shown[:, 1, level],
            color="C0",
            alpha=0.15 + 0.5 * (rank + 1) / (n_levels + 1),
            linewidth=0,
            label=None if labels is None else labels[level],
        )
    if y_ is not None:
        inner_level = int(narrowest_first[0])
        inner = bands[:, :, inner_level]
        outside = (y_ < inner[:, 0]) | (y_ > inner[:, 1])
        by = ""  # with several levels, say which one the points are judged by
        if n_levels > 1:
            by = " by the narrowest band" if labels is None else f" ({labels[inner_level]})"
        ax.scatter(x_[~outside], y_[~outside], s=8, color="k", label=f"covered{by}")
        ax.scatter(x_[outside], y_[outside], s=8, color="C3", label=f"not covered{by}")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    if labels is not None or y is not None:
        ax.legend(loc="best", fontsize="small")
    return ax
