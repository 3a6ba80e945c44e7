"""The classic family: split conformal regression and classification on real data.

Split CP with absolute and normalized scores, CQR, and LAC / APS / RAPS / top-k sets, each
run by uqconform, MAPIE and crepes (where they have the method) on the *same* fitted models
and the *same* random train / calibration / test splits, averaged over resplits:
coverage, mean width or set size, and the time of calibrate + predict.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from uqconform.benchmarks._common import (
    coverage_inside_law,
    headline,
    log_axis_1_2_5,
    missing_anchor_note,
    optional_module,
    quiet_root_logger,
    ratio_to,
    summarize,
    three_way_split,
    timed,
    uncross,
)
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.classification import SplitConformalClassifier
from uqconform.datasets import load_dataset, make_heteroscedastic_regression
from uqconform.regression import ConformalizedQuantileRegressor, SplitConformalRegressor

ALPHA = 0.1
SYNTHETIC = "synthetic-hetero"


class _FlooredSpread:
    """A fitted difficulty model whose spreads are floored at the training-rows floor of
    uqconform's fit (``difficulty_floor_``), given to every library (MAPIE's normalised
    score with ``prefit=True`` takes the prediction as the spread itself), so the same
    spreads reach every library."""

    def __init__(self, model: Any, floor: float):
        self.model = model
        self.floor = floor
        self.n_features_in_ = model.n_features_in_

    def fit(self, X: Any, y: Any) -> _FlooredSpread:  # never called: the model is prefit
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.maximum(self.model.predict(X), self.floor)


def _regression_data(ctx, name: str, rows: int | None):
    if name == SYNTHETIC:
        X, y, oracle = make_heteroscedastic_regression(
            rows or 2000, n_features=5, noise=0.5, random_state=ctx.seed
        )
        return X, y, oracle
    X, y = load_dataset(name, n_samples=rows, random_state=ctx.seed)
    return X, y, None


def _hgb(seed: int, **params: Any) -> HistGradientBoostingRegressor:
    return HistGradientBoostingRegressor(random_state=seed, **params)


def _regression_methods(mapie, crepes, models, X_cal, y_cal, X_test):
    """(method, library) -> a call returning (n_test, 2) intervals; one entry per pair."""
    mean, difficulty, lower, upper, floor = (
        models["mean"],
        models["difficulty"],
        models["lower"],
        models["upper"],
        models["floor"],
    )
    calls: dict[tuple[str, str], Callable[[], np.ndarray]] = {
        ("split-absolute", "uqconform"): lambda: (
            SplitConformalRegressor(mean, alpha=ALPHA)
            .calibrate(X_cal, y_cal)
            .predict_interval(X_test)
        ),
        ("split-normalized", "uqconform"): lambda: (
            SplitConformalRegressor(
                mean,
                alpha=ALPHA,
                conformity_score="normalized",
                difficulty_estimator=_FlooredSpread(difficulty, floor),
            )
            .calibrate(X_cal, y_cal)
            .predict_interval(X_test)
        ),
        ("cqr", "uqconform"): lambda: (
            ConformalizedQuantileRegressor((lower, upper), alpha=ALPHA)
            .calibrate(X_cal, y_cal)
            .predict_interval(X_test)
        ),
    }
    if mapie is not None:
        from mapie.conformity_scores import ResidualNormalisedScore
        from mapie.regression import ConformalizedQuantileRegressor as MapieCQR
        from mapie.regression import SplitConformalRegressor as MapieSplit

        def mapie_split(score):
            model = MapieSplit(
                mean, confidence_level=1 - ALPHA, conformity_score=score, prefit=True
            )
            return model.conformalize(X_cal, y_cal).predict_interval(X_test)[1][:, :, 0]

        calls["split-absolute", "mapie"] = lambda: mapie_split("absolute")
        calls["split-normalized", "mapie"] = lambda: mapie_split(
            ResidualNormalisedScore(
                residual_estimator=_FlooredSpread(difficulty, floor), prefit=True
            )
        )

        def mapie_cqr():
            # MAPIE wants [lower, upper, median]; the median only gives point predictions.
            model = MapieCQR([lower, upper, mean], confidence_level=1 - ALPHA, prefit=True)
            model.conformalize(X_cal, y_cal)
            return model.predict_interval(X_test, symmetric_correction=True)[1][:, :, 0]

        calls["cqr", "mapie"] = mapie_cqr
    if crepes is not None:

        def crepes_absolute():
            wrapped = crepes.WrapRegressor(mean)
            wrapped.calibrate(X_cal, y_cal)
            return wrapped.predict_int(X_test, confidence=1 - ALPHA)

        def crepes_normalized():
            # The score-level predictor takes the same difficulty estimates as the others.
            regressor = crepes.ConformalRegressor()
            sigma_cal = np.maximum(difficulty.predict(X_cal), floor)
            regressor.fit(y_cal - mean.predict(X_cal), sigmas=sigma_cal)
            sigma_test = np.maximum(difficulty.predict(X_test), floor)
            return regressor.predict_int(
                mean.predict(X_test), sigmas=sigma_test, confidence=1 - ALPHA
            )

        calls["split-absolute", "crepes"] = crepes_absolute
        calls["split-normalized", "crepes"] = crepes_normalized
    return calls


def _classification_methods(mapie, crepes, model, X_cal, y_cal, X_test, seed):
    calls: dict[tuple[str, str], Callable[[], np.ndarray]] = {}
    for score in ("lac", "aps", "raps", "topk"):
        calls[score, "uqconform"] = lambda score=score: (
            SplitConformalClassifier(model, alpha=ALPHA, conformity_score=score, random_state=seed)
            .calibrate(X_cal, y_cal)
            .predict_set(X_test)
        )
    if mapie is not None:
        from mapie.classification import SplitConformalClassifier as MapieClassifier

        names = {"lac": "lac", "aps": "aps", "raps": "raps", "topk": "top_k"}
        for score, name in names.items():

            def mapie_sets(name=name, randomized=True):
                wrapped = MapieClassifier(
                    model,
                    confidence_level=1 - ALPHA,
                    conformity_score=name,
                    prefit=True,
                    random_state=seed,
                )
                wrapped.conformalize(X_cal, y_cal)
                params = (
                    {"include_last_label": "randomized"}
                    if randomized and name in ("aps", "raps")
                    else None
                )
                return wrapped.predict_set(X_test, conformity_score_params=params)[1][:, :, 0]

            calls[score, "mapie"] = mapie_sets
            if name in ("aps", "raps"):  # what a MAPIE user gets without extra parameters
                calls[score, "mapie-default"] = functools.partial(mapie_sets, randomized=False)
    if crepes is not None:

        def crepes_lac():  # crepes' default "hinge" score is 1 - p(y | x): LAC
            wrapped = crepes.WrapClassifier(model)
            wrapped.calibrate(X_cal, y_cal)
            sets = wrapped.predict_set(X_test, confidence=1 - ALPHA, smoothing=False, labels=False)
            return np.asarray(sets, dtype=bool)

        calls["lac", "crepes"] = crepes_lac
    return calls


def _note_failure(notes, dataset, method, library, error):
    message = " ".join(str(error).split())  # every line (a cut one lost its reason)
    note = f"{library} {method} on {dataset} failed: {type(error).__name__}: {message}"
    if note not in notes:
        notes.append(note)


def _rows(records, extra_keys, size_name):
    rows = []
    for (dataset, method, library), rec in records.items():
        coverage, coverage_sd = summarize(rec["coverage"])
        size, size_sd = summarize(rec["size"])
        time_ms, _ = summarize(rec["time_ms"])
        row = {
            "dataset": dataset,
            "method": method,
            "library": library,
            "coverage": coverage,
            "coverage_sd": coverage_sd,
            size_name: size,
            f"{size_name}_sd": size_sd,
        }
        for key in extra_keys:
            if rec.get(key):
                row[key] = summarize(rec[key])[0]
        row.update(
            {
                "time_ms": time_ms,
                "n_cal": rec["n_cal"],
                "n_test": rec["n_test"],
                "resplits": len(rec["coverage"]),
                "coverage_per_split": rec["coverage"],
                f"{size_name}_per_split": rec["size"],
                "time_ms_per_split": rec["time_ms"],
            }
        )
        rows.append(row)
    return rows


def _run_regression(ctx, mapie, crepes, evaluation, notes):
    datasets = ctx.pick(
        [("diabetes", None), (SYNTHETIC, 600)],
        [("diabetes", None), ("concrete", None), ("diamonds", 4000), (SYNTHETIC, 2000)],
        [
            ("diabetes", None),
            ("concrete", None),
            ("boston", None),
            ("diamonds", 20000),
            (SYNTHETIC, 5000),
        ],
    )
    resplits = ctx.pick(1, 10, 40)
    records: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(list))
    loaded = []  # each data set keeps the seeds of its place in the list when one is skipped
    for index, (name, rows) in enumerate(datasets):
        try:
            loaded.append((index, name, *_regression_data(ctx, name, rows)))
        except ImportError as error:
            notes.append(f"regression dataset {name!r} skipped: {error}")
    jobs = [(data, r) for data in loaded for r in range(resplits)]
    for (index, name, X, y, oracle), split in ctx.tqdm(jobs, desc="classic: regression"):
        seed = int(ctx.rng(1, index, split).integers(2**31))
        train, cal, test = three_way_split(len(y), ctx.rng(2, index, split))
        # One fit per split, shared by every library: the mean model and its difficulty
        # model (trained on out-of-fold residuals), and the CQR quantile pair.
        normalized = SplitConformalRegressor(
            _hgb(seed), conformity_score="normalized", random_state=seed
        ).fit(X[train], y[train])
        models = {
            "mean": normalized.estimator_,
            "difficulty": normalized.difficulty_estimator_,
            "lower": _hgb(seed, loss="quantile", quantile=ALPHA / 2).fit(X[train], y[train]),
            "upper": _hgb(seed, loss="quantile", quantile=1 - ALPHA / 2).fit(X[train], y[train]),
            "floor": normalized.difficulty_floor_,  # from the training rows, as fit sets it
        }
        calls = _regression_methods(mapie, crepes, models, X[cal], y[cal], X[test])
        oracle_width = None if oracle is None else float(oracle.width(X[test], ALPHA).mean())
        for (method, library), call in calls.items():
            try:
                intervals, elapsed = timed(call)
            except Exception as error:  # one library failing must not stop the others
                _note_failure(notes, name, method, library, error)
                continue
            intervals, crossed = uncross(intervals)
            rec = records[name, method, library]
            rec["crossed_rows"].append(crossed)
            rec["coverage"].append(float(evaluation.coverage(y[test], intervals)))
            width = float(evaluation.mean_width(intervals))
            rec["size"].append(width)
            if oracle_width is not None:
                rec["width_vs_oracle"].append(width / oracle_width)
            rec["time_ms"].append(1e3 * elapsed)
            rec["n_cal"], rec["n_test"] = len(cal), len(test)
    return _rows(records, ["width_vs_oracle", "crossed_rows"], "width")


def _run_classification(ctx, mapie, crepes, evaluation, notes):
    datasets = ctx.pick(
        ["wine", "breast_cancer"],
        ["digits", "breast_cancer", "wine"],
        ["digits", "breast_cancer", "wine", "penguins", "spam"],
    )
    resplits = ctx.pick(1, 10, 40)
    records: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(lambda: defaultdict(list))
    loaded = []  # each data set keeps the seeds of its place in the list when one is skipped
    for index, name in enumerate(datasets):
        try:
            loaded.append((index, name, *load_dataset(name)))
        except ImportError as error:
            notes.append(f"classification dataset {name!r} skipped: {error}")
    jobs = [(data, r) for data in loaded for r in range(resplits)]
    for (index, name, X, y), split in ctx.tqdm(jobs, desc="classic: classification"):
        seed = int(ctx.rng(3, index, split).integers(2**31))
        train, cal, test = three_way_split(len(y), ctx.rng(4, index, split))
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        model.fit(X[train], y[train])
        calls = _classification_methods(mapie, crepes, model, X[cal], y[cal], X[test], seed)
        for (method, library), call in calls.items():
            try:
                sets, elapsed = timed(call)
            except Exception as error:
                _note_failure(notes, name, method, library, error)
                continue
            rec = records[name, method, library]
            rec["coverage"].append(
                float(evaluation.coverage(y[test], sets, classes=model.classes_))
            )
            rec["size"].append(float(evaluation.mean_set_size(sets)))
            rec["time_ms"].append(1e3 * elapsed)
            rec["n_cal"], rec["n_test"] = len(cal), len(test)
    return _rows(records, [], "set_size")


def _plot(ctx, rows, size_name, title):
    def draw(fig):
        labels = sorted({(r["dataset"], r["method"]) for r in rows})
        # uqconform first, then by name: the same colour for a library in every run
        libraries = sorted({r["library"] for r in rows}, key=lambda x: (x != "uqconform", x))
        by_key = {(r["dataset"], r["method"], r["library"]): r for r in rows}
        axes = fig.subplots(1, 3, sharey=True)
        ratios = []
        position = np.arange(len(labels))
        step = 0.8 / max(1, len(libraries))
        for k, library in enumerate(libraries):
            for ax, key in zip(axes, ("coverage", size_name, "time_ms"), strict=True):
                values = []
                for d, m in labels:
                    row = by_key.get((d, m, library))
                    base = by_key.get((d, m, "uqconform"))
                    if row is None:
                        values.append(np.nan)
                    elif key == size_name and base is not None and base[key] > 0:
                        values.append(row[key] / base[key])
                        ratios.append(values[-1])
                    else:
                        values.append(row[key])
                rows_at = position + k * step
                if key == "time_ms":  # times span decades: bars on a log axis
                    ax.barh(rows_at, values, height=step, label=library, color=f"C{k}")
                else:  # coverage and ratio: points on an axis zoomed to their spread
                    ax.plot(values, rows_at, "o", label=library, color=f"C{k}")
        axes[0].set_yticks(position + 0.4 - step / 2, [f"{d} / {m}" for d, m in labels])
        axes[0].tick_params(axis="y", labelsize=7)
        axes[0].invert_yaxis()
        axes[0].axvline(1 - ALPHA, color="black", linestyle="--", linewidth=1)
        axes[0].set_xlabel("coverage (dashed: 1 - alpha)")
        axes[1].axvline(1.0, color="black", linestyle=":", linewidth=1)
        # at least +-5% around 1: equal sizes read as equal, not as rounding magnified
        spread = max([0.05, *(abs(r - 1.0) * 1.1 for r in ratios if np.isfinite(r))])
        axes[1].set_xlim(1.0 - spread, 1.0 + spread)
        axes[1].set_xlabel(f"{size_name.replace('_', ' ')} / uqconform's")
        axes[2].set_xscale("log")
        log_axis_1_2_5(axes[2].xaxis)
        axes[2].set_xlabel("calibrate + predict (ms)")
        for ax in axes:
            ax.grid(axis="x", alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(title)

    ctx.figure(size_name.replace("_", "-"), draw, size=(11.0, 0.25 * len(rows) + 2.5))


@register_family(
    "classic",
    "split CP (absolute, normalized), CQR, LAC/APS/RAPS/top-k on real data vs MAPIE and crepes",
)
def run(ctx) -> FamilyResult:
    """Coverage, size and time of the split methods on real data, next to the anchors."""
    from uqconform import evaluation

    notes: list[str] = []
    mapie = optional_module("mapie")
    crepes = optional_module("crepes")
    for library, module in (("MAPIE", mapie), ("crepes", crepes)):
        if module is None:
            notes.append(missing_anchor_note(library))
    # Small data: one OpenMP / BLAS thread avoids oversubscription stalls on shared CPUs.
    with threadpool_limits(1), quiet_root_logger():
        regression = _run_regression(ctx, mapie, crepes, evaluation, notes)
        classification = _run_classification(ctx, mapie, crepes, evaluation, notes)
    notes += [
        f"alpha = {ALPHA}; 50/25/25 train/calibration/test random splits, the same splits "
        "and fitted models for every library; time = calibrate + predict on the test rows "
        "(one thread); MAPIE's CQR also predicts the point model it requires (a third "
        "model) on those rows, which its time includes. crossed_rows: mean number of test "
        "rows a library returned with lower > upper (scored as zero-width intervals).",
        "Regression models: HistGradientBoostingRegressor (mean; difficulty model on "
        "out-of-fold absolute residuals for the normalized score, its spreads floored for "
        "every library at 1e-3 x the median training spread, the floor uqconform's fit "
        "sets; quantile pair at "
        "alpha/2, 1 - alpha/2 for CQR, symmetric correction in both libraries). "
        f"width_vs_oracle ({SYNTHETIC} only): mean width / mean width of the true "
        "conditional interval.",
        "Classification model: StandardScaler + LogisticRegression. APS/RAPS are "
        "randomised in both libraries (MAPIE: include_last_label='randomized'); 'mapie-default' "
        "rows are MAPIE's APS/RAPS as its users get them by default (include_last_label=True, "
        "not randomised). MAPIE's RAPS "
        "tunes k_reg and lambda on part of the calibration set; uqconform's uses the fixed "
        "k_reg=1, lambda_reg=0.01. crepes has LAC only (its 'hinge' score, no smoothing).",
    ]
    _plot(ctx, regression, "width", "Regression: coverage, width, time")
    _plot(ctx, classification, "set_size", "Classification: coverage, set size, time")
    headlines = []
    for task, rows, size in (
        ("regression", regression, "width"),
        ("classification", classification, "set_size"),
    ):
        inside, total = coverage_inside_law(rows, ALPHA, conservative=("topk",))
        headlines.append(
            headline(
                f"{task}: uqconform rows with coverage inside the split-CP law, pooled "
                "over resplits, all at once with 99% confidence (each row at 1 - 0.01 / rows"
                + ("; top-k: above its lower end)" if task == "classification" else ")"),
                f"{inside}/{total}",
                "all",
                inside == total,
            )
        )
        same = [row for row in rows if row["method"] != "raps"]  # RAPS: other settings
        ratio = ratio_to(same, size, ("dataset", "method"), "uqconform", "mapie")
        if np.isfinite(ratio):
            headlines.append(
                headline(
                    f"{task}: mean {size} uqconform / MAPIE, same method and settings"
                    + (
                        " (RAPS left out: MAPIE tunes k_reg and lambda)"
                        if task != "regression"
                        else ""
                    ),
                    round(ratio, 3),
                )
            )
    # Issue 2's efficiency target is against the sets MAPIE's users get by default; against
    # MAPIE's own randomised APS (same method and settings) the two should tie: no target.
    # The ratio compares sets of different coverage (the point of the target: randomised
    # sets cover at the nominal level, MAPIE's default ones above it), so the claim shows
    # both coverages and the rows that entered.
    adaptive = [row for row in classification if row["method"] in ("aps", "raps")]
    ratio = ratio_to(adaptive, "set_size", ("dataset", "method"), "uqconform", "mapie-default")
    if np.isfinite(ratio):
        theirs = {
            (row["dataset"], row["method"]): row
            for row in adaptive
            if row["library"] == "mapie-default"
        }
        paired = [
            (row, theirs[row["dataset"], row["method"]])
            for row in adaptive
            if row["library"] == "uqconform" and (row["dataset"], row["method"]) in theirs
        ]
        ours_cov = np.mean([mine["coverage"] for mine, _ in paired])
        their_cov = np.mean([other["coverage"] for _, other in paired])
        entered = ", ".join(f"{mine['dataset']} {mine['method']}" for mine, _ in paired)
        headlines.append(
            headline(
                "randomised APS/RAPS mean set size uqconform / MAPIE default (not randomised; "
                f"mean coverage {ours_cov:.3f} against MAPIE's {their_cov:.3f}, at nominal "
                f"{1 - ALPHA:.2f}; rows: {entered})",
                round(ratio, 3),
                "< 1",
                ratio < 1,
            )
        )
    aps = [row for row in classification if row["method"] == "aps"]
    ratio = ratio_to(aps, "set_size", ("dataset", "method"), "uqconform", "mapie")
    if np.isfinite(ratio):
        headlines.append(
            headline("randomised APS mean set size uqconform / MAPIE randomised", round(ratio, 3))
        )
    return FamilyResult(
        tables={
            f"Regression (alpha={ALPHA})": regression,
            f"Classification (alpha={ALPHA})": classification,
        },
        notes=notes,
        headlines=headlines,
    )
