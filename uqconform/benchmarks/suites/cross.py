"""The cross family: cross-conformal regression (CV+, CV min-max, jackknife+-after-
bootstrap) and classification (CV+ sets) against split CP.

On small real regression sets, every method gets the same training rows of each random
resplit (80% of the data; the other 20% is the test set). `CrossConformalRegressor` trains
five fold models on all of them, `JackknifeAfterBootstrapRegressor` 20 bootstrap models.
Split CP, the strongest simple baseline, trains on one part and calibrates on the rest,
with half (``split-50``) or a quarter (``split-25``) of the rows for calibration, around
the same model, and for J+aB also around a bagged ensemble of 20 of them
(``bagged-split-*``). The models are Ridge and a gradient-boosting regressor. MAPIE's
``CrossConformalRegressor`` runs on the same folds: its intervals are compared with ours,
and the time of fit + predict.

Classification follows the same protocol on small real classification sets:
`CrossConformalClassifier` (five folds, LAC and randomised APS) against split CP with the
same score and model (25% or 50% calibration), and MAPIE's ``CrossConformalClassifier``
(``agg_scores="crossval"``, LAC) on the same folds; the models are a scaled logistic
regression and a gradient-boosting classifier. Class-conditional CV+ LAC runs against
class-conditional split CP, and every method reports its least-covered class.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from sklearn.ensemble import (
    BaggingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
)
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from uqconform.benchmarks._common import (
    headline,
    missing_anchor_note,
    optional_module,
    summarize,
    timed,
)
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.classification import CrossConformalClassifier, SplitConformalClassifier
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
    rec["size"].append(float(np.mean(high - low)))
    rec["time_s"].append(elapsed)
    rec["n_cal"], rec["n_test"] = n_cal, len(y_test)


def _classifiers(seed: int) -> dict[str, Any]:
    return {
        "logistic": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
        "hist-gradient-boosting": HistGradientBoostingClassifier(max_iter=50, random_state=seed),
    }


def _record_sets(rec, sets, labels, elapsed, n_cal) -> None:
    """``labels``: the test rows' column indices in the sets."""
    covered = sets[np.arange(labels.size), labels]
    rec["coverage"].append(float(covered.mean()))
    rec["class_hits"].append(np.bincount(labels, weights=covered, minlength=sets.shape[1]))
    rec["class_rows"].append(np.bincount(labels, minlength=sets.shape[1]))
    rec["size"].append(float(sets.sum(axis=1).mean()))
    rec["time_s"].append(elapsed)
    rec["n_cal"], rec["n_test"] = n_cal, labels.size


def _one_classification_split(X, y, train, test, seed, mapie, records, name) -> None:
    folds = KFold(FOLDS, shuffle=True, random_state=seed)
    labels = y[test]  # 0 .. K-1, every class in the training rows (checked by the caller)
    for model_name, model in _classifiers(seed).items():
        key = (name, model_name)
        cross_sets = {}
        # (score, class-conditional): both scores on average over classes, LAC per class
        for score, conditional in (("lac", False), ("aps", False), ("lac", True)):
            suffix = f"{score} class-cond" if conditional else score
            cp = CrossConformalClassifier(
                model, alpha=ALPHA, conformity_score=score, class_conditional=conditional,
                cv=folds, random_state=seed,
            )  # fmt: skip

            def fit_predict(cp: CrossConformalClassifier = cp) -> np.ndarray:
                with warnings.catch_warnings():  # a class too small: in every set
                    warnings.simplefilter("ignore", UserWarning)
                    return cp.fit(X[train], y[train]).predict_set(X[test])

            cross_sets[suffix], elapsed = timed(fit_predict)
            _record_sets(records[(*key, f"cv+ {suffix}")], cross_sets[suffix], labels,
                         elapsed, len(train))  # fmt: skip
            for share in (0.5, 0.25):
                n_cal = round(share * len(train))
                fit, cal = train[n_cal:], train[:n_cal]  # train is already shuffled
                split = SplitConformalClassifier(
                    model, alpha=ALPHA, conformity_score=score,
                    class_conditional=conditional, random_state=seed,
                ).fit(X[fit], y[fit])  # fmt: skip
                if split.classes_.size < np.unique(y[train]).size:
                    continue  # a class only among the calibration rows: split CP cannot run
                with warnings.catch_warnings():  # a class too small: in every set
                    warnings.simplefilter("ignore", UserWarning)
                    sets = split.calibrate(X[cal], y[cal]).predict_set(X[test])
                label = f"split-{round(100 * share)} {suffix}"
                _record_sets(records[(*key, label)], sets, labels, 0, n_cal)
        if mapie is None:
            continue

        def theirs(model=model):
            wrapped = mapie.CrossConformalClassifier(
                model, confidence_level=1 - ALPHA, conformity_score="lac", cv=folds
            ).fit_conformalize(X[train], y[train])
            return wrapped.predict_set(X[test], agg_scores="crossval")[1][..., 0]

        reference, elapsed = timed(theirs)
        rec = records[(*key, "mapie-cv+ lac")]
        _record_sets(rec, reference, labels, elapsed, len(train))
        rec["differing"].append(float(np.mean(reference != cross_sets["lac"])))
        rec["inside"].append(bool((reference <= cross_sets["lac"]).all()))


def _in_law(method: str, coverage: float, low: float, high: float) -> bool:
    """Whether ``coverage`` is inside the split-CP law ``[low, high]`` of the row's total
    calibration size; class-conditional rows by its lower end only: each class is
    calibrated on its own rows (a class below 1/alpha - 1 of them is in every set), which
    covers more than the marginal law of all the rows."""
    if "class-cond" in method:
        return bool(low <= coverage)
    return bool(low <= coverage <= high)


def _rows(records, size_name: str = "width") -> list[dict[str, Any]]:
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
            "coverage_in_law": _in_law(method, coverage, low, high),
            size_name: summarize(rec["size"])[0],
            f"{size_name}_sd": summarize(rec["size"])[1],
            "n_cal": rec["n_cal"],
            "n_test": rec["n_test"],
            "resplits": resplits,
        }
        if not method.startswith(("split", "bagged")):
            row["time_s"] = summarize(rec["time_s"])[0]
        if rec.get("max_abs_diff"):
            row["max_abs_diff_vs_uqconform"] = float(np.max(rec["max_abs_diff"]))
        if rec.get("class_hits"):  # sets: the least-covered class, pooled over resplits
            hits, count = np.sum(rec["class_hits"], axis=0), np.sum(rec["class_rows"], axis=0)
            row["worst_class_coverage"] = float(np.min(hits[count > 0] / count[count > 0]))
        if rec.get("differing"):  # sets: the largest share of (row, class) cells that differ
            row["cells_differing_from_uqconform"] = float(np.max(rec["differing"]))
            row["sets_inside_uqconform"] = bool(np.all(rec["inside"]))
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


def _class_headlines(rows) -> list[dict[str, Any]]:
    by = {(row["dataset"], row["model"], row["method"]): row for row in rows}
    cases = sorted({(row["dataset"], row["model"]) for row in rows})
    lines = []
    for method in ("lac", "aps", "lac class-cond"):
        ratios = {}
        for case in cases:
            splits = [by[key]["set_size"] for key in by if key[:2] == case
                      and key[2] in (f"split-50 {method}", f"split-25 {method}")]  # fmt: skip
            if splits:
                ratios[case] = by[(*case, f"cv+ {method}")]["set_size"] / min(splits)
        smaller = sum(r < 1 for r in ratios.values())
        name = method.upper().replace(" CLASS-COND", ", class-conditional,")
        lines.append(
            headline(
                f"CV+ {name} set size / the smaller split CP {name} set "
                f"(25% or 50% calibration), per dataset and model (smaller in "
                f"{smaller}/{len(ratios)})",
                ", ".join(f"{d} {m} {r:.3f}" for (d, m), r in ratios.items()),
            )
        )
    lines.append(
        headline(
            "coverage of the least-covered class, CV+ LAC class-conditional / plain CV+ "
            f"LAC, at nominal {1 - ALPHA:.2f}, per dataset and model",
            ", ".join(
                f"{d} {m} {by[(d, m, 'cv+ lac class-cond')]['worst_class_coverage']:.3f} / "
                f"{by[(d, m, 'cv+ lac')]['worst_class_coverage']:.3f}"
                for d, m in cases
            ),
        )
    )
    lines.append(
        headline(
            f"CV+ LAC coverage at nominal {1 - ALPHA:.2f}, per dataset and model",
            ", ".join(f"{d} {m} {by[(d, m, 'cv+ lac')]['coverage']:.3f}" for d, m in cases),
        )
    )
    mapie_rows = [row for row in rows if row["method"] == "mapie-cv+ lac"]
    if mapie_rows:
        lines.append(
            headline(
                "MAPIE's crossval LAC sets against ours, largest share of cells that differ "
                "(MAPIE keeps a label at alpha (n - 1) out-of-fold scores above it, the "
                "paper at floor(alpha (n + 1)); MAPIE's sets inside ours in every run: "
                f"{all(row['sets_inside_uqconform'] for row in mapie_rows)})",
                max(row["cells_differing_from_uqconform"] for row in mapie_rows),
            )
        )
        times = [
            by[(row["dataset"], row["model"], "cv+ lac")]["time_s"] / row["time_s"]
            for row in mapie_rows
        ]
        lines.append(
            headline(
                "classification: time of fit + predict (5 folds), uqconform / MAPIE, "
                "geometric mean",
                float(np.exp(np.mean(np.log(times)))),
            )
        )
    return lines


@register_family(
    "cross",
    "Cross-conformal regression (CV+, CV min-max, J+aB) and classification (CV+ sets) vs "
    "split CP with 25% or 50% calibration, and MAPIE's CV+: coverage, width or set size, "
    "time on small real data",
    weight=2.5,
)
def run(ctx) -> FamilyResult:
    """Cross-conformal regression and classification against split CP and MAPIE on small
    real data sets."""
    # one thread for every model: the gradient boosting's OpenMP threads oversubscribe a
    # loaded machine (as in the speed family)
    with threadpool_limits(1):
        return _run(ctx)


def _load(datasets, notes, classification: bool) -> list[tuple]:
    loaded = []  # each data set keeps the seeds of its place in the list when one is skipped
    for index, (name, n_train) in enumerate(datasets):
        try:
            X, y = load_dataset(name)
        except (ImportError, ValueError) as error:
            notes.append(f"dataset {name!r} skipped: {error}")
            continue
        label = name if n_train is None else f"{name} ({n_train} rows)"
        target = np.unique(y, return_inverse=True)[1] if classification else np.asarray(y, float)
        loaded.append((index, label, n_train, np.asarray(X, dtype=float), target))
    return loaded


def _resplit(ctx, loaded, resplits, stream, one_split, mapie, records, desc) -> None:
    jobs = [(data, r) for data in loaded for r in range(resplits)]
    for (index, label, n_train, X, y), split in ctx.tqdm(jobs, desc=desc):
        rng = ctx.rng(stream, index, split)
        order = rng.permutation(len(y))
        n_fit = round((1 - TEST_SHARE) * len(y)) if n_train is None else n_train
        train, test = order[:n_fit], order[n_fit:]
        one_split(X, y, train, test, int(rng.integers(2**31)), mapie, records, label)


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
    resplits = ctx.pick(1, 4, 50)
    records: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(list))
    loaded = _load(datasets, notes, classification=False)
    _resplit(ctx, loaded, resplits, 1, _one_split, mapie, records, "cross regression")
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
    class_sets = ctx.pick(
        [("wine", None)],
        [("wine", None), ("penguins", None), ("breast_cancer", 80), ("digits", 200)],
        [("wine", None), ("penguins", None), ("breast_cancer", 80), ("breast_cancer", None),
         ("digits", 200), ("digits", 500)],
    )  # fmt: skip
    mapie_classification = optional_module("mapie.classification")
    class_records: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(
        lambda: defaultdict(list)
    )
    loaded = _load(class_sets, notes, classification=True)
    _resplit(
        ctx, loaded, resplits, 2, _one_classification_split, mapie_classification,
        class_records, "cross classification",
    )  # fmt: skip
    class_rows = _rows(class_records, size_name="set_size")
    notes.append(
        "Classification: the same protocol; set_size is the mean number of classes per "
        "set. A split CP run whose training part missed a class is left out (its "
        "resplits count is smaller). cells_differing_from_uqconform: the largest share of "
        "(row, class) cells where MAPIE's crossval LAC sets differ from ours: MAPIE keeps a "
        "label when at least alpha (n - 1) out-of-fold scores are at least its score, the "
        "paper (and uqconform) when at least floor(alpha (n + 1)) are, so MAPIE's sets can "
        "miss a label that the paper's rule keeps. worst_class_coverage: the coverage of "
        "the least-covered class, pooled over the resplits. 'class-cond': "
        "class_conditional=True; a class with too few calibration rows for the level is in "
        "every set (the warning is silenced here). coverage_in_law of class-conditional rows "
        "judges the lower end of the law only: each class is calibrated on its own rows, "
        "which covers more than the marginal law of all n_cal rows."
    )
    return FamilyResult(
        tables={
            "Cross-conformal regression": rows,
            "Cross-conformal classification": class_rows,
        },
        notes=notes,
        headlines=_headlines(rows) + _class_headlines(class_rows),
    )
