"""The cps family: conformal predictive distributions against a Gaussian predictive.

`ConformalPredictiveSystem` (plain; normalized with the default difficulty model and with
a nearest-neighbour one) beside the strongest simple baseline,
a Gaussian around the same model with the mean and spread of the same calibration
residuals (scaled by the same difficulty for the normalized pair), on the same random
train / calibration / test splits: calibration of the whole distribution (the share of
test points at or below the upper p-quantile, for nine p, against its coverage law; the
KS distance of the smoothed PIT from uniform), the 90% central interval, and the mean
pinball loss over 19 levels (a discretised CRPS). crepes' `ConformalPredictiveSystem` runs
on the same residuals: its percentiles are compared with ours, and the time of calibrate +
predict.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from scipy import stats
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from uqconform.benchmarks._common import (
    headline,
    missing_anchor_note,
    optional_module,
    summarize,
    three_way_split,
    timed,
)
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.datasets import load_dataset
from uqconform.evaluation import coverage_bounds
from uqconform.regression import ConformalPredictiveSystem

ALPHA = 0.1
LEVELS = np.round(np.arange(0.05, 0.96, 0.05), 2)  # 19 quantile levels
CHECK_LEVELS = np.round(np.arange(0.1, 0.91, 0.1), 1)  # nine one-sided coverage checks
SKEWED = "synthetic-skewed"
GAUSSIAN = "synthetic-gaussian"


def _data(name: str, rows: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Real data from `load_dataset`, or a linear mean with heteroscedastic noise that is
    right-skewed (centred lognormal) or Gaussian."""
    if name in (SKEWED, GAUSSIAN):
        rng = np.random.default_rng(seed)
        n = rows or 2000
        X = rng.normal(size=(n, 4))
        scale = 0.5 + np.abs(X[:, 0])
        noise = rng.lognormal(0.0, 0.8, n) - np.exp(0.32) if name == SKEWED else rng.normal(size=n)
        return X, X @ [1.0, 0.5, -0.5, 0.2] + scale * noise
    X, y = load_dataset(name, n_samples=rows, random_state=seed)
    return np.asarray(X, dtype=float), np.asarray(y, dtype=float)


def _pinball(quantiles: np.ndarray, y: np.ndarray) -> float:
    gap = y[:, None] - quantiles
    return float(np.mean(np.maximum(LEVELS * gap, (LEVELS - 1) * gap)))


def _evaluate(
    rec: dict, y: np.ndarray, pit: np.ndarray, quantiles: np.ndarray, upper: np.ndarray, interval
) -> None:
    """Record one resplit; ``upper`` holds each row's upper quantiles at CHECK_LEVELS."""
    rec["below_upper"].append((y[:, None] <= upper).mean(axis=0))
    rec["ks"].append(float(stats.kstest(pit, "uniform").statistic))
    rec["coverage"].append(float(np.mean((interval[0] <= y) & (y <= interval[1]))))
    rec["width"].append(float(np.mean(interval[1] - interval[0])))
    rec["pinball"].append(_pinball(quantiles, y))


def _one_split(X, y, train, cal, test, seed, records, name) -> None:
    model = HistGradientBoostingRegressor(max_iter=100, random_state=seed)
    with warnings.catch_warnings(record=True) as caught:
        # the default difficulty model (a clone of the boosting) draws the library's
        # warning about spreads near zero on some resplits: counted for the notes
        warnings.simplefilter("always", UserWarning)
        normalized = ConformalPredictiveSystem(model, normalized=True, random_state=seed)
        normalized.fit(X[train], y[train]).calibrate(X[cal], y[cal])
    records[name, "cps-normalized"]["difficulty_warnings"].append(
        sum("`difficulty_estimator`" in str(w.message) for w in caught)
    )
    for w in caught:  # any other warning is shown as usual
        if "`difficulty_estimator`" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    # the difficulty model the warning recommends: an average of absolute residuals over
    # the 50 nearest rows on standardised features (the same boosting, refitted with the
    # same seed, is the same model)
    smooth = ConformalPredictiveSystem(
        model,
        normalized=True,
        difficulty_estimator=make_pipeline(StandardScaler(), KNeighborsRegressor(50)),
        random_state=seed,
    ).fit(X[train], y[train])
    plain = ConformalPredictiveSystem(normalized.estimator_, random_state=seed)  # same model
    y_test = y[test]
    for method, cps in (
        ("cps", plain),
        ("cps-normalized", normalized),
        ("cps-normalized-knn", smooth),
    ):
        if method != "cps-normalized":
            cps.calibrate(X[cal], y[cal])
        quantiles = cps.predict_quantile(X[test], LEVELS)
        pit = cps.predict_cdf(X[test], y_test, smooth=True)
        upper = cps.predict_quantile(X[test], CHECK_LEVELS, side="upper")
        interval = cps.predict_interval(X[test], alpha=ALPHA)
        _evaluate(records[name, method], y_test, pit, quantiles, upper, interval.T)
        # The baseline: a Gaussian around the same model. Plain: the mean and std of the
        # calibration residuals. Normalized: the spread times the median and the IQR / 1.349
        # of the standardised residuals (their mean and std are ruled by the few rows a
        # difficulty model calls near noiseless, which made that Gaussian useless).
        residuals = cps.conformity_scores_[:, 1]
        centre = cps.predict(X[test])
        if method == "cps":
            mean, sd = centre + residuals.mean(), np.full(len(test), residuals.std(ddof=1))
        else:
            spread = cps._difficulty(X[test])
            low, mid, high = np.percentile(residuals, [25, 50, 75])
            mean, sd = centre + spread * mid, spread * (high - low) / 1.349
        half = stats.norm.ppf(1 - ALPHA / 2) * sd
        _evaluate(
            records[name, method.replace("cps", "gaussian")],
            y_test,
            stats.norm.cdf((y_test - mean) / sd),
            mean[:, None] + sd[:, None] * stats.norm.ppf(LEVELS),
            mean[:, None] + sd[:, None] * stats.norm.ppf(CHECK_LEVELS),
            (mean - half, mean + half),
        )
        for key in (method, method.replace("cps", "gaussian")):
            records[name, key]["n_cal"], records[name, key]["n_test"] = len(cal), len(test)


def _speed(X, y, train, cal, test, crepes, records, name) -> None:
    """Calibrate + predict (19 quantiles, a smoothed PIT, a 90% interval) by uqconform and
    crepes around the same Ridge model (its predictions cost microseconds, so the time is
    the conformal work; uqconform predicts once per call, crepes is given them), and the
    largest relative difference between their percentiles."""
    model = Ridge().fit(X[train], y[train])
    y_cal, y_test = y[cal], y[test]

    def ours():
        cps = ConformalPredictiveSystem(model, random_state=0).calibrate(X[cal], y_cal)
        quantiles = cps.predict_quantile(X[test], LEVELS)
        cps.predict_cdf(X[test], y_test, smooth=True)
        cps.predict_interval(X[test], alpha=ALPHA)
        return quantiles

    quantiles, elapsed = timed(ours)
    records[name, "cps"]["time_ms"].append(1e3 * elapsed)
    if crepes is None:
        return
    lower, upper = LEVELS[LEVELS < 0.5], LEVELS[LEVELS >= 0.5]

    def theirs():
        system = crepes.ConformalPredictiveSystem().fit(y_cal - model.predict(X[cal]))
        centre = model.predict(X[test])
        percentiles = system.predict(
            centre, lower_percentiles=100 * lower, higher_percentiles=100 * upper
        )
        system.predict(centre, y=y_test, smoothing=True, seed=0)
        system.predict(
            centre, lower_percentiles=100 * ALPHA / 2, higher_percentiles=100 * (1 - ALPHA / 2)
        )
        return percentiles

    percentiles, elapsed = timed(theirs)
    rec = records[name, "crepes-cps"]
    rec["time_ms"].append(1e3 * elapsed)
    scale = np.maximum(np.abs(quantiles), 1.0)
    rec["max_rel_diff"].append(float(np.max(np.abs(percentiles - quantiles) / scale)))


METHODS = (  # the table's order within a dataset
    "cps", "gaussian", "cps-normalized", "gaussian-normalized", "cps-normalized-knn",
    "gaussian-normalized-knn", "crepes-cps",
)  # fmt: skip


def _rows(records) -> list[dict[str, Any]]:
    rows = []
    datasets = list(dict.fromkeys(dataset for dataset, _ in records))
    order = sorted(records, key=lambda key: (datasets.index(key[0]), METHODS.index(key[1])))
    for dataset, method in order:
        rec = records[dataset, method]
        row: dict[str, Any] = {"dataset": dataset, "method": method}
        if rec.get("coverage"):
            resplits = len(rec["coverage"])
            share = np.mean(rec["below_upper"], axis=0)
            inside = 0
            for level, observed in zip(CHECK_LEVELS, share, strict=True):
                low, high = coverage_bounds(
                    int(rec["n_cal"]), 1 - level, int(rec["n_test"]), n_repeats=resplits
                )
                inside += bool(low <= observed <= high)
            row.update(
                {
                    "quantiles_in_law": f"{inside}/{CHECK_LEVELS.size}",
                    "quantiles_in_law_count": inside,
                    "ks": summarize(rec["ks"])[0],
                    "coverage": summarize(rec["coverage"])[0],
                    "width": summarize(rec["width"])[0],
                    "pinball": summarize(rec["pinball"])[0],
                    "n_cal": rec["n_cal"],
                    "n_test": rec["n_test"],
                    "resplits": resplits,
                    "share_below_upper_quantile": [float(v) for v in share],
                    "pinball_per_split": rec["pinball"],
                }
            )
        if "difficulty_warnings" in rec:
            row["difficulty_warned"] = (
                f"{sum(n > 0 for n in rec['difficulty_warnings'])}/{resplits}"
            )
        if rec.get("time_ms"):
            row["time_ms"] = summarize(rec["time_ms"])[0]
        if rec.get("max_rel_diff"):
            row["max_rel_diff_vs_uqconform"] = float(np.max(rec["max_rel_diff"]))
        rows.append(row)
    return rows


def pinball_ratio(row: dict[str, Any], base: dict[str, Any]) -> tuple[float, float]:
    """Mean and standard error over the shared resplits of ``row``'s pinball loss over
    ``base``'s (paired: both methods see the same rows in each resplit)."""
    ratios = np.divide(row["pinball_per_split"], base["pinball_per_split"])
    se = ratios.std(ddof=1) / np.sqrt(ratios.size) if ratios.size > 1 else float("nan")
    return float(ratios.mean()), float(se)


def allowed_misses(checks: int) -> int:
    """Checks outside their 99% law allowed: the 99.9% quantile of the misses of a valid
    system were the checks independent (each misses with probability 0.01). The nine
    levels of a method share their rows, so misses cluster: a review's simulation of a
    valid system with the committed sizes exceeded it in 1-4% of quick runs and 2-6% of
    full runs (the former "about 1%", 1 of 135, in about a third).

    Examples
    --------
    >>> allowed_misses(135), allowed_misses(162)
    (6, 7)
    """
    return int(stats.binom.ppf(0.999, checks, 0.01))


def _headlines(rows) -> list[dict[str, Any]]:
    by = {(row["dataset"], row["method"]): row for row in rows}
    datasets = sorted({row["dataset"] for row in rows})
    cps_rows = [row for row in rows if row["method"].startswith("cps")]
    inside = sum(row["quantiles_in_law_count"] for row in cps_rows)
    total = CHECK_LEVELS.size * len(cps_rows)
    lines = [
        headline(
            "CPS (plain and both normalized): shares of test labels at or below the upper "
            "p-quantile, p = 0.1 ... 0.9, inside the 99% coverage law, all datasets",
            f"{inside}/{total}",
            f"at most {allowed_misses(total)} outside",
            inside >= total - allowed_misses(total),
        )
    ]
    for method in ("cps", "cps-normalized", "cps-normalized-knn"):
        base = method.replace("cps", "gaussian")
        paired = {
            d: pinball_ratio(by[d, method], by[d, base])
            for d in datasets
            if (d, method) in by and (d, base) in by
        }
        # one resplit (smoke scale) has no standard error: such a ratio is not judged
        judged = [(r, se) for r, se in paired.values() if np.isfinite(se)]
        wins = sum(r + 2 * se < 1 for r, se in judged)
        losses = sum(r - 2 * se > 1 for r, se in judged)
        unjudged = len(paired) - len(judged)
        counts = f"wins {wins}, losses {losses}, ties {len(judged) - wins - losses}"
        if unjudged:
            counts += f", not judged {unjudged} (one resplit: no s.e.)"
        lines.append(
            headline(
                f"{method} pinball loss / Gaussian predictive's, per dataset: mean of the "
                "per-resplit ratios ± standard error (lower is better; beyond 2 s.e.: "
                f"{counts} of {len(paired)})",
                ", ".join(
                    f"{d} {r:.3f} ± {f'{se:.3f}' if np.isfinite(se) else 'n/a'}"
                    for d, (r, se) in paired.items()
                ),
            )
        )
    crepes_rows = [row for row in rows if row["method"] == "crepes-cps"]
    if crepes_rows:
        worst = max(row["max_rel_diff_vs_uqconform"] for row in crepes_rows)
        lines.append(
            headline("crepes' percentiles against ours, largest relative difference", worst)
        )
        ratios = [
            by[row["dataset"], "cps"]["time_ms"] / row["time_ms"]
            for row in crepes_rows
            if (row["dataset"], "cps") in by
        ]
        lines.append(
            headline(
                "time of calibrate + predict (19 quantiles, a PIT, an interval) around "
                "the same Ridge, uqconform / crepes, geometric mean over datasets",
                float(np.exp(np.mean(np.log(ratios)))),
            )
        )
    return lines


@register_family(
    "cps",
    "Conformal predictive distributions (plain, normalized) vs a Gaussian predictive and "
    "crepes: PIT calibration, pinball loss, 90% intervals",
    weight=2.0,
)
def run(ctx) -> FamilyResult:
    crepes = optional_module("crepes")
    notes = [] if crepes is not None else [missing_anchor_note("crepes")]
    datasets = ctx.pick(
        [("diabetes", None), (SKEWED, 600)],
        [("diabetes", None), ("concrete", None), ("diamonds", 4000), (SKEWED, 2000),
         (GAUSSIAN, 2000)],
        [("diabetes", None), ("concrete", None), ("boston", None), ("diamonds", 20000),
         (SKEWED, 5000), (GAUSSIAN, 5000)],
    )  # fmt: skip
    resplits = ctx.pick(1, 10, 30)
    records: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(list))
    loaded = []  # each data set keeps the seeds of its place in the list when one is skipped
    for index, (name, rows) in enumerate(datasets):
        try:
            loaded.append((index, name, *_data(name, rows, ctx.seed + index)))
        except ImportError as error:
            notes.append(f"dataset {name!r} skipped: {error}")
    jobs = [(data, r) for data in loaded for r in range(resplits)]
    for (index, name, X, y), split in ctx.tqdm(jobs, desc="cps"):
        seed = int(ctx.rng(1, index, split).integers(2**31))
        train, cal, test = three_way_split(len(y), ctx.rng(2, index, split))
        _one_split(X, y, train, cal, test, seed, records, name)
        _speed(X, y, train, cal, test, crepes, records, name)
    rows = _rows(records)
    notes.append(
        "quantiles_in_law counts the nine levels p where the share of test labels at or "
        "below the upper p-quantile (the ceil((n + 1) p)-th calibration value for CPS, the "
        "Gaussian's p-quantile), pooled over resplits, is inside the 99% coverage law at "
        "alpha = 1 - p: the exact law of a valid system's upper quantile (a valid system "
        "lands inside at almost every level; the Gaussian has no such guarantee). The "
        "smoothed PIT's share at or below p has mean p, not the law's centre "
        "ceil((n + 1) p) / (n + 1), so it is not judged by that law. KS: the smoothed "
        "conformal PIT Q(y_true) for CPS, Phi((y - mean) / sd) for the Gaussian. Pinball: "
        "mean over the 19 levels 0.05 ... 0.95. cps-normalized uses the default difficulty "
        "model (a clone of the gradient boosting, fitted to out-of-fold absolute "
        "residuals); difficulty_warned counts the resplits where it drew the library's "
        "warning of spreads near zero (shown here instead of on the console). "
        "cps-normalized-knn uses the model that warning recommends: the mean absolute "
        "residual of the 50 nearest rows on standardised features."
    )
    return FamilyResult(
        tables={"Predictive distributions": rows}, notes=notes, headlines=_headlines(rows)
    )
