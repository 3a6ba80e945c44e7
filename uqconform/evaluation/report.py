"""Evaluate a calibrated conformal model on test data: one call, one report.

`evaluate` predicts at several levels at once and measures, per level, the observed
coverage against the nominal one and against the interval in which a valid split-conformal
method's coverage falls (`uqconform.evaluation.coverage_bounds`), the efficiency of
the sets, and the prediction time. `CoverageReport` prints as a table and converts
to a dict (JSON), a pandas DataFrame or a figure.
"""

from __future__ import annotations

import copy
import datetime
import heapq
import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import signal
from sklearn.utils.validation import _num_samples

from uqconform._rows import rows_fingerprint
from uqconform._validation import check_int, check_row_order
from uqconform._warnings import warn_user
from uqconform.evaluation.bounds import (
    _carrying_mass,
    _single_count_law,
    central_share_interval,
    check_confidence,
    coverage_bounds,
)
from uqconform.evaluation.metrics import (
    EFFICIENCY_NAME,
    _covered,
    _group_codes,
    _group_table,
    _prepare,
    _sizes,
)
from uqconform.evaluation.plotting import plot_coverage, plot_efficiency, require_pyplot
from uqconform.quantiles import check_alpha

__all__ = ["CoverageReport", "evaluate"]


def _json_value(value: Any) -> Any:
    """A JSON-friendly Python scalar: numpy scalars unwrapped, NaN kept as float, dates and
    times as ISO 8601 text (a datetime64 or Timestamp group: ``"2024-01-01T00:00:00"``),
    missing labels (NaT, ``pd.NA``) as None, and any other label (a Period, a Timedelta,
    an Interval) as its text (``"2024-01"``)."""
    if isinstance(value, np.datetime64):  # .item() of a datetime64[ns] is an int
        value = pd.Timestamp(value)
    elif isinstance(value, np.timedelta64):
        value = pd.Timedelta(value)
    elif isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, (datetime.date, datetime.time)):  # Timestamp: a datetime
        return value.isoformat()
    return str(value)


def _same(first: Any, second: Any) -> bool:
    """Equality of `CoverageReport.to_dict` values, NaN equal to NaN."""
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(map(_same, first, second))
    if isinstance(first, float) and isinstance(second, float) and first != second:
        return math.isnan(first) and math.isnan(second)
    return bool(first == second)


@dataclass(repr=False, eq=False)
class CoverageReport:
    """Coverage and efficiency of a conformal model on test data, one row per level.

    Built by `evaluate`. ``str(report)`` is a fixed-width table; `to_dict`,
    `to_frame` and `plot` give the same numbers as JSON, pandas or a figure. Two reports
    are equal when their `to_dict` are, NaN equal to NaN (a report equals its pickled
    copy); reports are mutable, so not hashable.

    Attributes
    ----------
    model : str
        Class name of the evaluated model.
    task : {"regression", "classification", "multioutput"}
    efficiency : str
        Name of the efficiency column: ``"mean_width"``, ``"mean_set_size"`` or
        ``"mean_volume"``.
    n_test : int
    n_calibration : int or None
        ``model.n_calibration_`` (None when the model has none; the bounds are then NaN).
    confidence : float
        Probability of the coverage bounds.
    time_seconds : float
        Wall time of the single prediction call that produced every level.
    rows : list of dict
        Per level: ``alpha``, ``nominal``, ``coverage``, ``bound_low``, ``bound_high``,
        ``inside_bounds``, ``below_bounds`` (outside and below: a failure; outside and
        above is conservative, e.g. top-k sets or tied scores), the efficiency column, for
        sets ``singleton_rate`` and ``empty_rate``, ``n_test`` and ``time_seconds``.
    by_group : pandas.DataFrame or None
        With ``groups``: columns ``alpha``, ``group``, ``count``, ``coverage`` and the
        efficiency column, one row per level and group.
    note : str or None
        Printed below the table: why no verdict is given (weighted calibration, a
        cross-conformal model, or no ``n_calibration_``: ``inside_bounds`` and
        ``below_bounds`` are then None), how the rows were predicted when not in one
        call (a time-series model: online, on a copy), and with ``volume_samples`` how
        the volumes were sampled.

    Examples
    --------
    >>> row = {"alpha": 0.1, "nominal": 0.9, "coverage": 0.855, "bound_low": 0.815,
    ...        "bound_high": 0.965, "inside_bounds": True, "mean_width": 3.239}
    >>> report = CoverageReport("M", "regression", "mean_width", n_test=200,
    ...     n_calibration=200, confidence=0.99, time_seconds=0.002, rows=[row])
    >>> print(report)
    CoverageReport: M (regression), n_test=200, n_calibration=200, predict time 0.002 s
      alpha  nominal  coverage         99% bounds inside     mean_width
        0.1    0.900     0.855     [0.815, 0.965]    yes          3.239
    """

    model: str
    task: str
    efficiency: str
    n_test: int
    n_calibration: int | None
    confidence: float
    time_seconds: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    by_group: pd.DataFrame | None = None
    note: str | None = None

    # reports hold lists and a DataFrame that can change: equal by value, never hashed
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CoverageReport):
            return NotImplemented
        return _same(self.to_dict(), other.to_dict())

    # ---- conversions -----------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per level.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> report = CoverageReport("M", "regression", "mean_width", 10, 20, 0.99, 0.01,
        ...     rows=[{"alpha": 0.1, "nominal": 0.9, "coverage": 0.9}])
        >>> report.to_frame()
           alpha  nominal  coverage
        0    0.1      0.9       0.9
        """
        return pd.DataFrame(self.rows)

    def to_dict(self) -> dict[str, Any]:
        """Every number of the report as plain Python floats, ints, strings and lists.

        Non-finite values stay floats (``json.dumps`` writes them as ``Infinity`` /
        ``NaN``); a missing bound check (no ``n_calibration``) is ``None``.

        Returns
        -------
        dict

        Examples
        --------
        >>> import json
        >>> report = CoverageReport("M", "regression", "mean_width", 10, 20, 0.99, 0.01,
        ...     rows=[{"alpha": 0.1, "coverage": np.float64(0.9)}])
        >>> json.dumps(report.to_dict()["levels"])
        '[{"alpha": 0.1, "coverage": 0.9}]'
        """
        groups = None
        if self.by_group is not None:
            groups = [
                {key: _json_value(value) for key, value in record.items()}
                for record in self.by_group.to_dict(orient="records")
            ]
        return {
            "model": self.model,
            "task": self.task,
            "efficiency": self.efficiency,
            "n_test": int(self.n_test),
            "n_calibration": None if self.n_calibration is None else int(self.n_calibration),
            "confidence": float(self.confidence),
            "time_seconds": float(self.time_seconds),
            "levels": [
                {key: _json_value(value) for key, value in row.items()} for row in self.rows
            ],
            "by_group": groups,
            "note": self.note,
        }

    # ---- display -----------------------------------------------------------------------
    def __str__(self) -> str:
        calibration = "?" if self.n_calibration is None else str(self.n_calibration)
        lines = [
            f"CoverageReport: {self.model} ({self.task}), n_test={self.n_test}, "
            f"n_calibration={calibration}, predict time {self.time_seconds:.3g} s",
        ]
        # enough decimals to tell counts one apart (a coverage one point below its bound
        # showed as equal to it at 3 decimals from 2,000 test points), and columns as wide
        # as those decimals need
        digits = max(3, math.ceil(math.log10(max(int(self.n_test), 1))))
        coverage_width, bounds_width = max(9, digits + 2), max(18, 2 * digits + 8)
        # enough digits for the level given: 1 - 1e-9 printed as "100%" with ":g"
        percent = f"{100 * self.confidence:.14g}%"  # 1 - 1e-12 included
        header = (
            f"{'alpha':>7} {'nominal':>8} {'coverage':>{coverage_width}} "
            f"{percent + ' bounds':>{bounds_width}} {'inside':>6} {self.efficiency:>14}"
        )
        sets = self.task == "classification"
        if sets:
            header += f" {'singleton':>9} {'empty':>6}"
        lines.append(header)
        for row in self.rows:
            low, high = row.get("bound_low", math.nan), row.get("bound_high", math.nan)
            bounds = "-" if math.isnan(low) else f"[{low:.{digits}f}, {high:.{digits}f}]"
            flag = row.get("inside_bounds")
            if "inside_bounds" not in row and not math.isnan(low):  # a hand-built row
                flag = bool(low <= row["coverage"] <= high)
            inside = {True: "yes", None: "-"}.get(flag)
            if math.isnan(row["coverage"]):  # a hand-built row: nothing to judge
                inside = "-"
            elif inside is None:  # outside: below fails validity, above is conservative
                inside = "BELOW" if row["coverage"] < low else "above"
            nominal = row.get("nominal", 1 - row["alpha"])  # hand-built rows may omit it
            # as many decimals as the level has (alpha 0.0025: 0.9975, not 0.998), up to 6;
            # 3 for a level no short decimal holds (alpha 1/3: 0.667)
            places = next((k for k in range(3, 7) if abs(round(nominal, k) - nominal) < 1e-12), 3)
            alpha_text = f"{row['alpha']:.{places}g}"  # 0.1004 is not 0.1
            line = (
                f"{alpha_text:>7} {nominal:>8.{places}f} "
                f"{row['coverage']:>{coverage_width}.{digits}f} {bounds:>{bounds_width}} "
                f"{inside:>6} {row.get(self.efficiency, math.nan):>#14.4g}"
            )
            if sets:
                singleton = row.get("singleton_rate", math.nan)
                empty = row.get("empty_rate", math.nan)
                line += f" {singleton:>9.3f} {empty:>6.3f}"
            lines.append(line)
        if self.by_group is not None:
            lines.append("per group:")
            levels = {"alpha": lambda value: f"{value:.15g}"}  # as given: 0.05, not 0.05000
            text = self.by_group.to_string(
                index=False,
                float_format=lambda value: f"{value:#.4g}",
                formatters={k: f for k, f in levels.items() if k in self.by_group.columns},
                justify="right",
            )
            lines.extend("  " + line for line in text.splitlines())
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)

    __repr__ = __str__

    def plot(self, ax: Any = None) -> Any:
        """Observed against nominal coverage (bounds as error bars) and efficiency.

        Parameters
        ----------
        ax : matplotlib Axes or pair of Axes, optional
            A pair receives both panels; a single Axes only the coverage panel; by default
            a new figure with two panels.

        Returns
        -------
        The Axes drawn on (an array of two, or the single Axes given).

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> report = CoverageReport("M", "regression", "mean_width", 10, 20, 0.99, 0.01,
        ...     rows=[{"alpha": 0.1, "nominal": 0.9, "coverage": 0.9, "bound_low": 0.7,
        ...            "bound_high": 1.0, "mean_width": 2.0}])
        >>> axes = report.plot()
        >>> len(axes)
        2
        >>> matplotlib.pyplot.close("all")
        """
        plt = require_pyplot()
        frame = self.to_frame()
        single = ax is not None and not isinstance(ax, (Sequence, np.ndarray))
        if ax is None:
            ax = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")[1]
        elif not single and len(ax) != 2:
            raise ValueError(f"`ax` must be one Axes or a pair of Axes, got {len(ax)}.")
        coverage_ax = ax if single else ax[0]
        bounds = None
        if {"bound_low", "bound_high"} <= set(frame.columns):
            bounds = frame[["bound_low", "bound_high"]].to_numpy(dtype=float)
        nominal = frame["nominal"] if "nominal" in frame else 1 - frame["alpha"]  # hand-built rows
        plot_coverage(nominal, frame["coverage"], bounds, ax=coverage_ax)
        coverage_ax.set_title(self.model)
        if not single:
            label = self.efficiency.replace("_", " ")
            # hand-built rows may lack the efficiency column: an empty panel, as printed
            efficiency = frame[self.efficiency] if self.efficiency in frame else nominal * np.nan
            plot_efficiency(nominal, efficiency, ax=ax[1], ylabel=label)
        return ax


def _single_output_regressor(model: Any) -> bool:
    """True for a scikit-learn style regressor whose tags say it has one output."""
    try:
        tags = model.__sklearn_tags__()
    except AttributeError:  # a duck-typed model: no tags to go by
        return False
    return tags.estimator_type == "regressor" and not tags.target_tags.multi_output


def _swap_hint(model: Any, X: Any, y: NDArray) -> str:
    """A hint when a 2-D ``y_test`` looks like the features: ``X_test`` 1-D with as many
    entries as ``y_test`` has rows, or ``y_test`` with the model's number of features."""
    try:
        one_dimensional = np.ndim(X) == 1 and len(X) == y.shape[0]
    except (TypeError, ValueError):  # an X without a length or a shape
        one_dimensional = False
    if one_dimensional or y.shape[1] == getattr(model, "n_features_in_", None):
        return " Were `X_test` and `y_test` swapped? The order is evaluate(model, X_test, y_test)."
    return ""


def _task_and_method(model: Any, y: NDArray, X: Any = None) -> tuple[str, str, NDArray]:
    """The kind of model, the method that predicts its sets, and ``y`` in its shape (``X``,
    the test features, only for a hint when they look swapped with ``y``)."""
    from uqconform.classification import MultiLabelRiskController  # no import cycle
    from uqconform.multioutput import MultiOutputConformalRegressor

    if isinstance(model, MultiLabelRiskController):
        raise TypeError(
            "evaluate measures the coverage of intervals, regions and single-label sets; "
            "`model` (MultiLabelRiskController) controls a multi-label risk instead: measure "
            "that risk on model.predict_set(X_test) (for risk='fnr', the mean share of each "
            "row's true labels missing from its set)."
        )
    if isinstance(model, MultiOutputConformalRegressor):
        n_outputs = getattr(model, "n_outputs_", None)
        target = y[:, None] if y.ndim == 1 else y
        if target.ndim != 2 or (n_outputs is not None and target.shape[1] != n_outputs):
            raise ValueError(
                f"`y_test` must have shape (n, {n_outputs}) for this multi-output model, got "
                f"{y.shape}."
            )
        return "multioutput", "predict_set", target
    if y.ndim == 2 and getattr(model, "classes_", None) is not None:
        if y.shape[1] == 1:
            return "classification", "predict_set", y[:, 0]  # df[["label"]]: one label per row
        raise ValueError(
            f"`y_test` has {y.shape[1]} columns, but `model` ({type(model).__name__}) is a "
            "classifier: give one label per row (1-D), not one-hot or several label columns."
            f"{_swap_hint(model, X, y)}"
        )
    if y.ndim == 2 and y.shape[1] > 1 and hasattr(model, "predict_set"):
        if _single_output_regressor(model):
            raise ValueError(
                f"`y_test` has {y.shape[1]} columns but `model` ({type(model).__name__}) "
                f"predicts one output: pass a 1-D y_test.{_swap_hint(model, X, y)}"
            )
        return "multioutput", "predict_set", y
    if hasattr(model, "predict_interval") and getattr(model, "classes_", None) is None:
        return "regression", "predict_interval", y
    if hasattr(model, "predict_set"):
        return "classification", "predict_set", y
    raise TypeError(
        f"`model` ({type(model).__name__}) has neither predict_interval nor predict_set; "
        "evaluate needs a calibrated conformal model."
    )


def _check_output(output: Any, task: str, method: str, n_levels: int) -> Any:
    """The model's prediction, checked to carry one entry per level."""
    if task == "multioutput":
        regions = list(output) if isinstance(output, (list, tuple)) else [output]
        if len(regions) != n_levels:
            raise ValueError(
                f"model.{method} returned {len(regions)} regions for {n_levels} levels."
            )
        return regions
    array = np.asarray(output)
    expected = "(n, 2, k)" if task == "regression" else "(n, n_classes, k)"
    if array.ndim != 3 or array.shape[2] != n_levels:
        raise ValueError(
            f"model.{method} with {n_levels} levels returned shape {array.shape}, expected "
            f"{expected}."
        )
    return array


def _stratified_bounds(
    model: Any, groups: Any, target: NDArray, alphas: NDArray, confidence: float
) -> NDArray | None:
    """`coverage_bounds` of a Mondrian split-conformal model (``groups``, or
    ``class_conditional``), from the exact law of its covered count: each stratum's count is
    beta-binomial with that stratum's calibration size and test rows (a test row's stratum:
    its group, and its true class when class-conditional), independently across strata, so
    the strata's pmfs convolve. None for a model of one stratum, or one whose law this is
    not (weighted calibration); the pooled law's bounds are then used."""
    strata = model.__dict__.get("calibration_strata_")
    n_sub = int(model.__dict__.get("_n_sub_strata", 1))
    has_groups = getattr(model, "groups_", None) is not None
    if (
        strata is None
        or "calibration_weights_" in model.__dict__
        or (n_sub == 1 and not has_groups)
    ):
        return None
    n_test = int(target.shape[0])
    if n_sub > 1 and (target.ndim != 1 or target.dtype.kind not in "iu"):
        return None  # class-conditional strata need the true labels' indices
    # an unseen group maps to an extra, empty stratum (its rows get the whole space; the
    # prediction call warned about them)
    group_index = (
        model._group_index(groups, n_test, warn=False) if has_groups else np.zeros(n_test, int)
    )
    test_strata = group_index * n_sub + (target if n_sub > 1 else 0)
    n_strata = ((model.groups_.size + 1) if has_groups else 1) * n_sub
    calibration_sizes = np.bincount(strata, minlength=n_strata)
    test_sizes = np.bincount(test_strata, minlength=n_strata)
    # strata of equal calibration and test sizes share one law: each distinct law once,
    # with the number of strata it stands for (strata without test rows add nothing)
    multiplicity: dict[tuple[int, int], int] = {}
    for pair in zip(calibration_sizes.tolist(), test_sizes.tolist(), strict=True):
        if pair[1]:
            multiplicity[pair] = multiplicity.get(pair, 0) + 1
    bounds = np.empty((alphas.size, 2))
    for j, level in enumerate(alphas):  # a loop over levels
        laws = [
            (_single_count_law(n_s, float(level), m_s), count)
            for (n_s, m_s), count in multiplicity.items()
        ]
        offset, law = _strata_count_law(laws)
        bounds[j] = central_share_interval(offset, law, n_test, (1 - confidence) / 2)
    return bounds


# Up to this product of the two lengths a convolution is direct (np.convolve): measured
# 19 to 54 us at 1e5 (316 x 316, 1,000 x 100, 5,000 x 20 counts) against 72 to 144 us by
# FFT (scipy.signal.fftconvolve), and free of the FFT's round-off.
_DIRECT_CONVOLUTION = 10**5


def _add_counts(first: tuple[int, NDArray], second: tuple[int, NDArray]) -> tuple[int, NDArray]:
    """The law of the sum of two independent counts, each ``(first count, pmf)``, on the
    counts that carry its mass (`_carrying_mass`, the rule of every pooled law here)."""
    (start_a, pmf_a), (start_b, pmf_b) = first, second
    if pmf_a.size * pmf_b.size <= _DIRECT_CONVOLUTION:
        summed = np.convolve(pmf_a, pmf_b)
    else:
        summed = signal.fftconvolve(pmf_a, pmf_b)
    return _carrying_mass(start_a + start_b, summed)


def _strata_count_law(laws: list[tuple[tuple[int, NDArray], int]]) -> tuple[int, NDArray]:
    """The law of the total covered count of independent strata, ``(first count, pmf)``,
    from each distinct stratum law ``(first, pmf)`` and the number of strata that follow it.

    ``c`` equal strata add up by repeated squaring (``log2(c)`` convolutions, as
    `coverage_count_pmf` pools resplits), then the distinct totals two at a time, the two
    shortest first (Huffman's order: each convolution as short as it can be), instead of
    one FFT of the growing total per stratum: with 8,000 groups, 160,000 test rows and
    three levels, 3.4 to 3.8 s of CPU time before and 0.6 to 0.8 s now (two runs), most of
    it scipy's pmf of the 1,011 distinct laws per level.

    No window is added: every convolved law keeps, as before, the counts above ``1e-15``
    of its peak (`_carrying_mass`), below which an FFT's round-off leaves no information,
    and there are fewer such cuts (one per convolution: 14 for 1,000 equal strata instead
    of 1,000). Against a direct convolution cut at ``1e-40`` of its peak (less than
    ``1e-35`` of the mass dropped), a review found the same bounds in all 27 cases it ran
    (9 stratifications of 2 to 8,000 strata, at confidences 0.99, 1 - 1e-9 and 1 - 1e-12,
    three levels each), where the stratum-by-stratum sum was 1 to 3 counts off at
    1 - 1e-12 in 5 of its 8, and one product of the strata's DFTs (on a window of the
    total) up to 37; and the same bounds as the full-support direct convolution and as the
    stratum-by-stratum sum in 450 random stratifications (confidences 0.5 to 1 - 1e-6).
    """
    heap: list[tuple[int, int, tuple[int, NDArray]]] = []
    for index, (law, count) in enumerate(laws):  # a loop over the distinct strata
        total: tuple[int, NDArray] | None = None
        while count:  # a loop over the bits of count: log2(count) squarings
            if count & 1:
                total = law if total is None else _add_counts(total, law)
            count >>= 1
            if count:
                law = _add_counts(law, law)
        assert total is not None  # count >= 1
        heap.append((total[1].size, index, total))
    if not heap:  # no stratum tested: the count is 0
        return 0, np.ones(1)
    heapq.heapify(heap)
    index = len(heap)  # ties broken by order of creation: the same sum on every run
    while len(heap) > 1:  # a loop over the sums of the two shortest laws
        shortest, second = heapq.heappop(heap)[2], heapq.heappop(heap)[2]
        total = _add_counts(shortest, second)
        heapq.heappush(heap, (total[1].size, index, total))
        index += 1
    return heap[0][2]


def _warn_if_seen_rows(model: Any, X_test: Any, y_test: Any) -> None:
    """Warn when the test rows are the model's calibration or training rows (the same rows
    in the same order, `rows_fingerprint`): coverage there is no test of the guarantee."""
    state = getattr(model, "__dict__", {})
    seen = {"calibration": state.get("_calibration_rows"), "training": state.get("_training_rows")}
    if not any(seen.values()):
        return
    try:
        fingerprint = rows_fingerprint(X_test, y_test)
    except (TypeError, ValueError, IndexError):  # inputs the model's own checks will name
        return
    if fingerprint == seen["calibration"]:
        warn_user(
            "evaluate got the rows `model` was calibrated on: their coverage is about "
            "1 - alpha by construction (at least ceil((n + 1)(1 - alpha)) / n for scores "
            "that draw nothing), not a test of the guarantee. "
            "Evaluate on rows held out from fit and calibrate.",
            UserWarning,
        )
    elif fingerprint == seen["training"]:
        warn_user(
            "evaluate got the rows `model` was trained on: the model's errors there are "
            "smaller than on new data, so the coverage is optimistic. Evaluate on rows held "
            "out from fit and calibrate.",
            UserWarning,
        )


def evaluate(
    model: Any,
    X_test: Any,
    y_test: ArrayLike,
    alpha: float | Sequence[float] = (0.05, 0.1, 0.2),
    groups: ArrayLike | None = None,
    confidence: float = 0.99,
    volume_samples: int | None = None,
) -> CoverageReport:
    """Coverage, efficiency and timing of a calibrated conformal model on test data.

    Regressors are evaluated through ``predict_interval``, classifiers (models with
    ``classes_``) through ``predict_set``, and multi-output regressors (2-D ``y_test``)
    through the regions of ``predict_set``; all levels come from one prediction call.
    Time-series models (`uqconform.timeseries`: EnbPI, SPCI, KOWCPI) are evaluated by
    their online protocol, ``predict_interval(X_test, y=y_test, alpha=...)`` on a deep copy
    of the model: the rows are taken as the next steps of the series, in order, and each
    row's value is absorbed right after its interval is issued, so the residual memory and
    the adaptive levels of ``aci_gamma`` move as they would in use. Measured at alpha 0.1
    with ``aci_gamma=0.01``, a linear model fitted on the first 400 steps of a 700-step
    series whose noise sd grew fourfold (0.5 to 2) at step 450 and 300 test rows (the
    set-up of ``test_evaluate_runs_a_time_series_model_online_on_a_copy`` in the test
    suite; KOWCPI there with ``window=2``, ``finite_sample=False`` and 10 bootstrap
    models): predicting every row from the memory at fit, as a call without ``y`` does,
    covered 0.42 (EnbPI) and 0.31 (KOWCPI), the online protocol 0.89 and 0.87. The model
    passed is left unchanged, and ``report.note`` says so. Sequential methods have no
    exact finite-sample law of coverage: no bounds and no verdict are given.

    Parameters
    ----------
    model : calibrated conformal model
        E.g. a `uqconform.SplitConformalRegressor` after ``fit`` and ``calibrate``, or a
        fitted time-series model (evaluated online, on a copy).
    X_test : array-like or DataFrame of shape (n, n_features)
    y_test : array-like of shape (n,) or (n, d)
        Targets, or labels (from ``model.classes_``) for classifiers.
    alpha : float or sequence of float, default=(0.05, 0.1, 0.2)
        Miscoverage levels.
    groups : array-like of shape (n,), optional
        Group labels for the per-group table ``report.by_group`` (conditional coverage of
        any model); also passed to the model when it was calibrated with groups (Mondrian
        calibration).
    confidence : float, default=0.99
        Probability of the coverage bounds, per level: each level's bounds hold a valid
        model's coverage with this probability, and a valid model lands below them with
        probability at most ``(1 - confidence) / 2``. With ``k`` levels a valid model
        shows some "BELOW" with probability up to about ``k (1 - confidence) / 2``, and
        some row outside the bounds up to about ``k (1 - confidence)`` (with the default
        three levels at 0.99, reviews measured about 0.9 to 1.3% and 1.3 to 2.5% of
        calibrations, with 20 to 1,000 calibration points and 100 to 2,000 test rows). For
        one test, pass one level or raise ``confidence``.
    volume_samples : int, optional
        Multi-output models only: latent points per row of the Monte Carlo volumes of
        their regions (``n_samples`` of `uqconform.regions.PredictionRegion.volume`;
        regions of a normalizing flow, e.g. `uqconform.multioutput.CONTRA`), and said in
        ``report.note``; ``report.by_group`` averages the same volumes (each row's volume
        is taken once per level). None keeps the regions' default of 2,000, which dominates the
        cost of a flow's report: with a `uqconform.multioutput.CONTRA` of the default
        network (3 epochs, 1,000 fit and 1,000 calibration rows of ``make_banana``) and
        100 test rows at the three default levels, evaluate took 15.7 s of CPU time by
        default and 1.5 s with ``volume_samples=200``, and the mean volumes moved by
        about 0.01%. Exact volumes (affine regions: boxes, ellipsoids) take no points,
        and the note says it had no effect; a classifier's or a single-output
        regressor's efficiency is exact, so giving it for them is an error.

    Returns
    -------
    CoverageReport

    Notes
    -----
    The bounds are those of marginal split-conformal coverage with
    ``model.n_calibration_`` calibration points and continuous scores (ties, e.g. from
    non-randomised class scores, make coverage higher: the printed report then says
    "above", a conservative method, while "BELOW" is a failure). Two-tailed calibrations
    (`uqconform.ConformalizedQuantileRegressor` with ``symmetric=False``, the intervals
    of `uqconform.ConformalPredictiveSystem`) drop ``floor((n + 1) alpha / 2)`` points in
    each tail instead of ``floor((n + 1) alpha)`` in one: their coverage follows another
    beta-binomial law, as high or higher on average, and a valid model can read "above"
    more often than ``confidence`` allows (a review computed up to a 4.5% chance at 99%
    confidence, with 29 calibration points, alpha 0.1 and 2,000 test rows), which is no
    failure either. `uqconform.SplitConformalRegressor` with
    ``conformity_score=SignedResidualScore()`` (`uqconform.scores`) calibrates each side at
    ``alpha / 2`` in the same way (a review counted "above" in 42 of 1,000 runs with 29
    calibration points, alpha 0.1 and 2,000 test rows, the exact two-tailed law giving
    4.48%).
    Scores with ties or filled-in sets read "above" often too, and that is no failure:
    `uqconform.MultiDimScoreClassifier` where the label that fills an empty set alone
    covers more than ``1 - alpha`` (every set is then that one label), and
    `uqconform.ReliablePredictionSets`
    (RPS), whose vote scores tie (108 of 300 runs at alpha 0.1); RPS's bounds are its
    majority set's own law (`uqconform.classification.rps.majority_coverage_bounds`, from its
    partition sizes and ranks), which spreads more than split conformal's over all
    calibration rows (that law called a valid RPS "BELOW" two to three times as often as
    ``confidence`` allows, in a review). Under Mondrian
    calibration (``groups``, ``class_conditional``) each stratum has its own calibration
    points, so the marginal coverage spreads more: the bounds then come from the exact law
    of the covered count, the convolution of the strata's beta-binomials with their
    calibration sizes and test rows (the pooled law's bounds, which a review found too
    narrow, called a valid model "BELOW" 1.6 to 1.8 times as often as ``confidence``
    allows with two groups).
    Weighted calibration (``likelihood_ratio``) has no exact law of coverage: the
    report shows the unweighted law's bounds as a rough yardstick but gives no verdict
    (``inside_bounds`` and ``below_bounds`` are None, printed "-", and ``note`` says why):
    a review found valid weighted models below those bounds in 1.7% to 13% of resplits
    at 99% confidence, against the 0.5% a verdict would promise. Cross-conformal models
    (CV+, jackknife+, J+aB) count every training row in ``n_calibration_`` and promise
    only ``1 - 2 alpha``, and their coverage has no exact law: as for weighted models, the
    report shows split conformal's bounds with ``n_calibration_`` rows as a yardstick and
    gives no verdict (``note`` says why). ``coverage_bounds(n, 2 * alpha, n_test)`` is
    another rough yardstick with no known false-alarm rate (their mean coverage, over
    many resplits, is what ``1 - 2 alpha`` bounds).

    Predictions made elsewhere (arrays from another library) need no model: score them
    with `coverage` and `mean_width` / `mean_set_size` (intervals ``(n, 2[, k])``, boolean
    sets ``(n, n_classes[, k])``) and judge the coverage with
    ``coverage_bounds(n_calibration, alpha, n_test)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from uqconform import SplitConformalRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 2))
    >>> y = X @ [1.0, -2.0] + rng.normal(size=600)
    >>> cp = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    >>> report = evaluate(cp.calibrate(X[200:400], y[200:400]), X[400:], y[400:])
    >>> report.to_frame()[["alpha", "nominal", "n_test"]]
       alpha  nominal  n_test
    0   0.05     0.95     200
    1   0.10     0.90     200
    2   0.20     0.80     200
    """
    alphas = check_alpha(alpha)
    if np.unique(alphas).size < alphas.size:
        raise ValueError(f"`alpha` repeats a level: {alphas.tolist()}; give each level once.")
    check_confidence(confidence)
    volume_samples = check_int(volume_samples, "volume_samples", allow_none=True)
    if y_test is None:
        raise ValueError("`y_test` is None; pass the test targets.")
    check_row_order(X_test, y_test, "y_test", "X_test")
    check_row_order(X_test, groups, "groups", "X_test")
    check_row_order(y_test, groups, "groups", "y_test")  # X_test may carry no index
    y = np.asarray(y_test)
    try:  # the model checks X itself; this only names a length mismatch as the user's
        n_X: int | None = _num_samples(X_test)
    except TypeError:
        n_X = None
    if y.ndim >= 1 and n_X is not None and n_X != y.shape[0]:
        raise ValueError(f"`y_test` has {y.shape[0]} rows but `X_test` has {n_X}.")
    if y.ndim >= 1 and y.shape[0] == 0:
        raise ValueError("`X_test` and `y_test` have no rows: evaluate needs test rows.")
    if groups is not None and np.ndim(groups) == 1 and np.shape(groups)[0] != y.shape[0]:
        raise ValueError(
            f"`groups` has {np.shape(groups)[0]} entries but `y_test` has {y.shape[0]}."
        )
    _warn_if_seen_rows(model, X_test, y_test)
    task, method, y = _task_and_method(model, y, X_test)
    if volume_samples is not None and task != "multioutput":  # before the prediction call
        raise TypeError(
            f"`volume_samples` sets the Monte Carlo points of multi-output regions' volumes, "
            f"but `model` ({type(model).__name__}) is a {task} model whose "
            f"{_EXACT_EFFICIENCY[task]} is exact: it would have no effect; leave "
            "volume_samples at None."
        )
    check_names = getattr(model, "_check_output_names", None)
    if task == "multioutput" and check_names is not None:  # swapped outputs: an error
        check_names(y_test, learn=False, name="y_test")
    kwargs: dict[str, Any] = {"alpha": alphas.tolist()}
    if groups is not None and getattr(model, "groups_", None) is not None:
        kwargs["groups"] = groups  # a Mondrian model needs them; others only get the table
    online = _is_sequential(model)
    predictor = model
    if online:  # the online protocol, on a copy: the model passed stays as it was
        predictor = copy.deepcopy(model)
        kwargs["y"] = y_test
    start = time.perf_counter()
    output = getattr(predictor, method)(X_test, **kwargs)
    elapsed = time.perf_counter() - start
    output = _check_output(output, task, method, alphas.size)
    classes = np.asarray(model.classes_) if task == "classification" else None
    parsed, target = _prepare(y, output, classes, name="y_test", of_model=True)
    covered_rows = _covered(parsed, target)  # (n, k): the by-group table counts it too
    covered = covered_rows.mean(axis=0)
    volume_note = None
    if volume_samples is not None and parsed.kind == "region":
        volume_note = _volume_samples_note(parsed.data, volume_samples)
    sizes = _sizes(parsed, **({} if volume_samples is None else {"n_samples": volume_samples}))
    efficiency = EFFICIENCY_NAME[parsed.kind]
    n_test = int(target.shape[0])

    n_calibration = _calibration_count(model)
    weighted = "calibration_weights_" in getattr(model, "__dict__", {})
    if n_calibration is not None:
        own_law = getattr(model, "_coverage_law_bounds", None)  # a law of its own (RPS)
        law: NDArray | None = (
            np.asarray(own_law(alphas, n_test, confidence), dtype=float)
            if own_law is not None
            else _stratified_bounds(model, groups, target, alphas, confidence)
        )
        if law is not None:
            bounds = law
        else:
            bounds = np.asarray(coverage_bounds(n_calibration, alphas, n_test, confidence))
    else:
        bounds = np.full((alphas.size, 2), np.nan)

    cross = _is_cross_fit(model)
    judged = n_calibration is not None and not weighted and not cross
    rows = []
    for j, level in enumerate(alphas):  # a loop over levels
        low, high = float(bounds[j, 0]), float(bounds[j, 1])
        row: dict[str, Any] = {
            "alpha": float(level),
            "nominal": float(1 - level),
            "coverage": float(covered[j]),
            "bound_low": low,
            "bound_high": high,
            "inside_bounds": None if not judged else bool(low <= covered[j] <= high),
            # outside and below fails validity; outside and above is conservative
            "below_bounds": None if not judged else bool(covered[j] < low),
            efficiency: float(_mean(sizes[:, j])),
        }
        if parsed.kind == "set":
            row["singleton_rate"] = float(np.mean(sizes[:, j] == 1))
            row["empty_rate"] = float(np.mean(sizes[:, j] == 0))
        row["n_test"] = n_test
        row["time_seconds"] = float(elapsed)
        rows.append(row)

    notes = [_WEIGHTED_NOTE] if weighted and n_calibration is not None else []
    if online:
        notes.append(_ONLINE_NOTE)
    if n_calibration is None:  # full conformal's reason is not a sequential model's
        notes.append(
            _SEQUENTIAL_NO_LAW_NOTE
            if online
            else _BAYESIAN_NOTE
            if _is_bayesian(model)
            else _NO_CALIBRATION_NOTE
        )
    if cross and n_calibration is not None:
        notes.append(_CROSS_NOTE)
    if volume_note is not None:
        notes.append(volume_note)
    by_group = None
    if groups is not None:
        # the sizes of the rows above: each volume taken once, with volume_samples points
        check_row_order(output, groups, "groups", "prediction")  # a labelled prediction frame
        codes, uniques = _group_codes(groups, n_test, rows_of="`y_test`")
        table = _group_table(parsed, covered_rows, sizes, codes, uniques)
        table = table.reset_index()
        table.insert(0, "alpha", alphas[table.pop("level").to_numpy()])
        by_group = table
    return CoverageReport(
        model=type(model).__name__,
        task=task,
        efficiency=efficiency,
        n_test=n_test,
        n_calibration=n_calibration,
        confidence=float(confidence),
        time_seconds=float(elapsed),
        rows=rows,
        by_group=by_group,
        note=" ".join(notes) or None,
    )


_EXACT_EFFICIENCY = {"regression": "mean_width", "classification": "mean_set_size"}


def _volume_samples_note(regions: Any, volume_samples: int) -> str:
    """How ``volume_samples`` entered the volumes of a multi-output model's ``regions``,
    for ``report.note`` (flow regions sample their volumes; affine ones are exact)."""
    sampled = any(
        not getattr(getattr(region, "latent_map", None), "is_affine", False) for region in regions
    )
    if not sampled:
        return (
            f"volume_samples={volume_samples} had no effect: the regions' volumes are exact "
            "(affine maps: boxes, ellipsoids)."
        )
    return (
        f"mean_volume is a Monte Carlo estimate with volume_samples={volume_samples} "
        f"latent points per row (region.volume(n_samples={volume_samples}))."
    )


def _calibration_count(model: Any) -> int | None:
    """``model.n_calibration_`` as an int (an integer-valued real too, as `coverage_bounds`
    takes it; not a boolean), or None when the model has none."""
    value = getattr(model, "n_calibration_", None)
    if value is None:
        return None
    integral = isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer()
    )
    if isinstance(value, bool) or not integral or value < 0:
        raise ValueError(
            "`model.n_calibration_` must be an integer >= 0, the number of calibration "
            f"points the coverage bounds are computed for, got {value!r}; set it to that "
            "count, or leave it out (no bounds and no verdict are given then)."
        )
    return int(value)


def _is_sequential(model: Any) -> bool:
    """True for a time-series model (`uqconform.timeseries.SequentialConformalRegressor`:
    EnbPI, SPCI, KOWCPI), which predicts the rows of a series online."""
    from uqconform.timeseries import SequentialConformalRegressor  # no import cycle

    return isinstance(model, SequentialConformalRegressor)


def _is_bayesian(model: Any) -> bool:
    """True for a Bayesian predictive (`uqconform.bayes.LinearizedPredictive`), whose
    intervals carry no coverage guarantee."""
    from uqconform.bayes import LinearizedPredictive  # no import cycle

    return isinstance(model, LinearizedPredictive)


def _is_cross_fit(model: Any) -> bool:
    """True for a cross-conformal model (CV+, jackknife+, J+aB), whose every training row
    is a calibration row and whose guarantee is ``1 - 2 alpha``."""
    from uqconform._cross import CrossFitWrapper  # no import cycle

    return isinstance(model, CrossFitWrapper)


_NO_CALIBRATION_NOTE = (
    "the model has no n_calibration_, so no bounds and no verdict are given (full conformal "
    "prediction calibrates on its training rows, and the coverage of many test rows sharing "
    "one training set has no exact law; a model from elsewhere may hold no count)."
)

_BAYESIAN_NOTE = (
    "a Bayesian predictive has no coverage guarantee (its intervals are credible intervals "
    "of the posterior predictive), so no bounds and no verdict are given; wrap its point "
    "model in a conformal wrapper for a guarantee."
)

_SEQUENTIAL_NO_LAW_NOTE = (
    "sequential methods have no exact finite-sample law of coverage (the intervals adapt "
    "to the rows already seen), so no bounds and no verdict are given."
)

_CROSS_NOTE = (
    "cross-conformal model (CV+, jackknife+, J+aB): it promises 1 - 2 alpha and its coverage "
    "has no exact law, so the bounds shown are split conformal's with n_calibration rows, a "
    "rough yardstick, and no verdict is given."
)

_WEIGHTED_NOTE = (
    "weighted calibration (likelihood_ratio): its coverage has no exact law, so the bounds "
    "shown are the unweighted law's, a rough yardstick, and no verdict is given (valid "
    "weighted models fall below them far more often than the confidence allows)."
)

_ONLINE_NOTE = (
    "time-series model: the rows were predicted online, in order, each row's value absorbed "
    "right after its interval was issued (predict_interval(X_test, y=y_test)), on a copy "
    "of the model; the model passed is unchanged."
)


def _mean(values: NDArray) -> float:
    """Mean that is inf as soon as one value is inf (never NaN from inf - inf)."""
    return math.inf if np.isinf(values).any() else float(values.mean())
