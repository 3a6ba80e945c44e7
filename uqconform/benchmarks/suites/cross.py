"""The cross family: cross-conformal regression (CV+, CV min-max, jackknife+-after-
bootstrap) against split CP.

On small real regression sets, every method gets the same training rows of each random
resplit (80% of the data; the other 20% is the test set). `CrossConformalRegressor` trains
five fold models on all of them, `JackknifeAfterBootstrapRegressor` 20 bootstrap models.
Split CP, the strongest simple baseline, trains on one part and calibrates on the rest,
with half (``split-50``) or a quarter (``split-25``) of the rows for calibration, around
the same model, and for J+aB also around a bagged ensemble of 20 of them
(``bagged-split-*``). The models are Ridge and a gradient-boosting regressor. MAPIE's
``CrossConformalRegressor`` runs on the same folds: its intervals are compared with ours,
and the time of fit + predict.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from sklearn.ensemble import BaggingRegressor, HistGradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from uqconform.benchmarks._common import (
    headline,
    missing_anchor_note,
    optional_module,
    summarize,
    timed,
)
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.datasets import load_dataset
from uqconform.evaluation import coverage_bounds
from uqconform.regression import (
    CrossConformalRegressor,
    JackknifeAfterBootstrapRegressor,
    SplitConformalRegressor,
)

ALPHA = 0.1
FOLDS = 5
BOOTSTRAP = 20  # jackknife+-after-bootstrap models
TEST_SHARE = 0.2


def _models(seed: int) -> dict[str, Any]:
    return {
        "ridge": Ridge(alpha=1.0),
        "hist-gradient-boosting": HistGradientBoostingRegressor(max_iter=50, random_state=seed),
    }


def _one_split(X, y, train, test, seed, mapie, records, name) -> None:
    folds = KFold(FOLDS, shuffle=True, random_state=seed)
    y_test = y[test]
    for model_name, model in _models(seed).items():
        key = (name, model_name)

        intervals: dict[str, np.ndarray] = {}
        wrappers = {
            "cv+": CrossConformalRegressor(model, alpha=ALPHA, cv=folds),
            "cv-minmax": CrossConformalRegressor(model, alpha=ALPHA, method="minmax", cv=folds),
            "j+ab": JackknifeAfterBootstrapRegressor(
                model, alpha=ALPHA, n_bootstrap=BOOTSTRAP, random_state=seed
            ),
        }
        for label, cp in wrappers.items():

            def fit_predict(cp: CrossConformalRegressor = cp) -> np.ndarray:
                return cp.fit(X[train], y[train]).predict_interval(X[test])

            intervals[label], elapsed = timed(fit_predict)
            _record(records[(*key, label)], intervals[label], y_test, elapsed, len(train))
        # J+aB's models form a bagged ensemble: its simple rival is split CP around the
        # same ensemble (fitted on the training part of the split)
        bagged = BaggingRegressor(model, n_estimators=BOOTSTRAP, random_state=seed)
        for share in (0.5, 0.25):
            n_cal = round(share * len(train))
            fit, cal = train[n_cal:], train[:n_cal]  # train is already shuffled
            for prefix, wrapped in (("split", model), ("bagged-split", bagged)):
                cp = SplitConformalRegressor(wrapped, alpha=ALPHA).fit(X[fit], y[fit])
                split = cp.calibrate(X[cal], y[cal]).predict_interval(X[test])
                label = f"{prefix}-{round(100 * share)}"
                _record(records[(*key, label)], split, y_test, 0, n_cal)
        if mapie is None:
            continue

        def theirs(model=model):
            wrapped = mapie.CrossConformalRegressor(
                model, confidence_level=1 - ALPHA, method="plus", cv=folds
            )
            return wrapped.fit_conformalize(X[train], y[train]).predict_interval(X[test])[1]

        reference, elapsed = timed(theirs)
        reference = reference[..., 0]
        rec = records[(*key, "mapie-cv+")]
        _record(rec, reference, y_test, elapsed, len(train))
        rec["max_abs_diff"].append(float(np.max(np.abs(reference - intervals["cv+"]))))


def _record(rec, intervals, y_test, elapsed, n_cal) -> None:
    low, high = intervals[:, 0], intervals[:, 1]
    rec["coverage"].append(float(np.mean((low <= y_test) & (y_test <= high))))
    rec["width"].append(float(np.mean(high - low)))
    rec["time_s"].append(elapsed)
    rec["n_cal"], rec["n_test"] = n_cal, len(y_test)


def _rows(records) -> list[dict[str, Any]]:
    rows = []
    for (dataset, model, method), rec in records.items():
        resplits = len(rec["coverage"])
        coverage = summarize(rec["coverage"])[0]
        low, high = coverage_bounds(
            int(rec["n_cal"]), ALPHA, int(rec["n_test"]), n_repeats=resplits
        )
        row = {
            "dataset": dataset,
            "model": model,
            "method": method,
            "coverage": coverage,
            "coverage_in_law": bool(low <= coverage <= high),
            "width": summarize(rec["width"])[0],
            "width_sd": summarize(rec["width"])[1],
            "n_cal": rec["n_cal"],
            "n_test": rec["n_test"],
            "resplits": resplits,
        }
        if method in ("cv+", "cv-minmax", "j+ab", "mapie-cv+"):
            row["time_s"] = summarize(rec["time_s"])[0]
        if rec.get("max_abs_diff"):
            row["max_abs_diff_vs_uqconform"] = float(np.max(rec["max_abs_diff"]))
        rows.append(row)
    return rows


def _headlines(rows) -> list[dict[str, Any]]:
    by = {(row["dataset"], row["model"], row["method"]): row for row in rows}
    cases = sorted({(row["dataset"], row["model"]) for row in rows})
    ratios = {
        case: by[(*case, "cv+")]["width"]
        / min(by[(*case, "split-50")]["width"], by[(*case, "split-25")]["width"])
        for case in cases
    }
    narrower = sum(r < 1 for r in ratios.values())
    lines = [
        headline(
            "CV+ width / the narrower split CP (25% or 50% calibration), per dataset and "
            f"model (narrower in {narrower}/{len(ratios)})",
            ", ".join(f"{d} {m} {r:.3f}" for (d, m), r in ratios.items()),
        ),
        headline(
            f"CV+ coverage at nominal {1 - ALPHA:.2f}, per dataset and model (guaranteed: "
            f"{1 - 2 * ALPHA:.2f} minus the CV term)",
            ", ".join(f"{d} {m} {by[(d, m, 'cv+')]['coverage']:.3f}" for d, m in cases),
        ),
    ]
    bootstrap = {
        case: by[(*case, "j+ab")]["width"]
        / min(by[(*case, "bagged-split-50")]["width"], by[(*case, "bagged-split-25")]["width"])
        for case in cases
    }
    lines.append(
        headline(
            f"J+aB ({BOOTSTRAP} models) width / the narrower split CP around the same bagged "
            f"ensemble, per dataset and model (narrower in "
            f"{sum(r < 1 for r in bootstrap.values())}/{len(bootstrap)})",
            ", ".join(f"{d} {m} {r:.3f}" for (d, m), r in bootstrap.items()),
        )
    )
    mapie_rows = [row for row in rows if row["method"] == "mapie-cv+"]
    if mapie_rows:
        lines.append(
            headline(
                "MAPIE's CV+ intervals against ours, largest absolute difference",
                max(row["max_abs_diff_vs_uqconform"] for row in mapie_rows),
            )
        )
        times = [
            by[(row["dataset"], row["model"], "cv+")]["time_s"] / row["time_s"]
            for row in mapie_rows
        ]
        lines.append(
            headline(
                "time of fit + predict (5 folds), uqconform / MAPIE, geometric mean",
                float(np.exp(np.mean(np.log(times)))),
            )
        )
    return lines


@register_family(
    "cross",
    "Cross-conformal regression (CV+, CV min-max) vs split CP with 25% or 50% calibration, "
    "and MAPIE's CV+: coverage, width, time on small real data",
)
def run(ctx) -> FamilyResult:
    """CV+ and CV min-max against split CP and MAPIE on small real regression sets."""
    # one thread for every model: the gradient boosting's OpenMP threads oversubscribe a
    # loaded machine (as in the speed family)
    with threadpool_limits(1):
        return _run(ctx)


def _run(ctx) -> FamilyResult:
    mapie = optional_module("mapie.regression")
    notes = [] if mapie is not None else [missing_anchor_note("MAPIE")]
    # (name, training rows): None, 80% of the data (the rest tests); a number, that many
    # random rows train and all the others test (small data, where every row counts)
    datasets = ctx.pick(
        [("diabetes", None)],
        [("diabetes", None), ("concrete", None), ("boston", None), ("diabetes", 80),
         ("concrete", 80)],
        [("diabetes", None), ("concrete", None), ("boston", None), ("diabetes", 80),
         ("concrete", 80), ("boston", 80), ("diabetes", 200)],
    )  # fmt: skip
    resplits = ctx.pick(1, 10, 50)
    records: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(list))
    loaded = []
    for name, n_train in datasets:
        try:
            X, y = load_dataset(name)
        except (ImportError, ValueError) as error:
            notes.append(f"dataset {name!r} skipped: {error}")
            continue
        label = name if n_train is None else f"{name} ({n_train} rows)"
        loaded.append((label, n_train, np.asarray(X, dtype=float), np.asarray(y, dtype=float)))
    jobs = [(d, r) for d in range(len(loaded)) for r in range(resplits)]
    for index, split in ctx.tqdm(jobs, desc="cross"):
        label, n_train, X, y = loaded[index]
        rng = ctx.rng(1, index, split)
        order = rng.permutation(len(y))
        n_fit = round((1 - TEST_SHARE) * len(y)) if n_train is None else n_train
        train, test = order[:n_fit], order[n_fit:]
        _one_split(X, y, train, test, int(rng.integers(2**31)), mapie, records, label)
    rows = _rows(records)
    notes.append(
        "Every method gets the same training rows (80% of the data, or the stated number "
        "of random rows with all others testing) and test rows. "
        "n_cal: rows that calibrate (all training rows for cross-conformal). "
        "coverage_in_law: the mean coverage is inside the 99% split-CP coverage law at "
        f"alpha = {ALPHA} for n_cal (CV+ is only guaranteed 1 - 2 alpha minus a small CV "
        "term, min-max 1 - alpha). time_s: fit + predict. CV+ and MAPIE's CV+ use the same "
        "folds and models."
    )
    return FamilyResult(
        tables={"Cross-conformal regression": rows}, notes=notes, headlines=_headlines(rows)
    )
