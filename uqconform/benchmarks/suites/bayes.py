"""The bayes family: the single-pass Bayesian predictive against Monte Carlo, GLM and MAP.

* "predictive": scikit-learn MLPs (hidden layers (64, 64), StandardScaler first) on
  diabetes, concrete, friedman (regression) and digits, wine, breast cancer
  (classification); a diagonal Laplace posterior with the prior precision tuned by
  validation NLL; test NLL of the one-pass predictive, Monte Carlo (1,000 weight samples)
  and GLM on the same posterior, of the MAP network with its noise variance (regression)
  or temperature (classification) tuned on the same validation rows, and of a plain deep
  ensemble of five networks (the strongest simple baseline); coverage of the
  Gaussian 90% intervals, Spearman correlation of the predictive variances with MC's, ECE.
* "prior": the prior pitfall on the regression sets: scikit-learn's ``alpha`` as the prior
  with unpenalised biases, the marginal-likelihood prior and the validation-tuned prior.
* "conformal bridge": the one-pass predictive std as the difficulty of a normalized split
  conformal regressor, coverage judged by the split-CP law.
* "speed": one pass against Monte Carlo with 10 / 100 / 1,000 weight samples drawn in
  advance, and against GLM, on 1,000 rows and on single rows.
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import ndtri
from scipy.stats import spearmanr
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from uqconform.bayes import LaplacePosterior, LinearizedPredictive
from uqconform.bayes.laplace import PRIOR_GRID
from uqconform.bayes.likelihood import gaussian_log_density, log_probabilities
from uqconform.bayes.network import Dense
from uqconform.benchmarks._common import best_time, headline, summarize
from uqconform.benchmarks.registry import FamilyResult, register_family
from uqconform.datasets import load_dataset
from uqconform.evaluation import coverage, coverage_bounds, mean_width
from uqconform.regression import SplitConformalRegressor

REGRESSION = ("diabetes", "concrete", "friedman")
CLASSIFICATION = ("digits", "wine", "breast_cancer")
HIDDEN = (64, 64)
ALPHA = 0.1
MC_SAMPLES = 1000
MC_TUNE_SAMPLES = 200  # Monte Carlo samples per validation NLL when tuning MC's own scale
ENSEMBLE = 5  # members of the deep-ensemble baseline (the MAP network and 4 other seeds)
TARGETS: dict[str, Any] = {
    "nll_rel": 0.05,
    "coverage": (0.85, 0.95),
    "spearman": 0.8,
    "speedup_100": 20.0,
}
CONFIDENCE = 0.99
Z90 = float(ndtri(1 - ALPHA / 2))  # the Gaussian 90% interval's half-width in sds


def _data(name: str, ctx) -> tuple[np.ndarray, np.ndarray]:
    if name == "friedman":
        return make_friedman1(ctx.pick(400, 1000, 2000), noise=1.0, random_state=ctx.seed)
    X, y = load_dataset(name)
    return np.asarray(X, dtype=float), np.asarray(y)


def _loaded(names, ctx, notes: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The data sets of ``names`` whose package is installed; the others skipped with a note
    (the real regression sets need the ``data`` extra)."""
    data = {}
    for name in names:
        try:
            data[name] = _data(name, ctx)
        except ImportError as error:
            notes.append(f"data set {name!r} skipped: {error}")
    return data


def _split(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Train 50%, validation 20%, calibration 10%, test 20%."""
    order = rng.permutation(n)
    cuts = np.round(np.cumsum([0.5, 0.2, 0.1]) * n).astype(int)
    parts = np.split(order, cuts)
    return dict(zip(("train", "val", "cal", "test"), parts, strict=True))


def _network(task: str, seed: int, ctx):
    kind = MLPRegressor if task == "regression" else MLPClassifier
    mlp = kind(hidden_layer_sizes=HIDDEN, max_iter=ctx.pick(150, 400, 800), random_state=seed)
    return make_pipeline(StandardScaler(), mlp)


def ece(proba: np.ndarray, labels: np.ndarray, bins: int = 15) -> float:
    """Expected calibration error of the top-label confidence (equal-width bins)."""
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == labels
    index = np.minimum((confidence * bins).astype(int), bins - 1)
    total = np.bincount(index, minlength=bins)
    gap = np.abs(
        np.bincount(index, weights=correct, minlength=bins)
        - np.bincount(index, weights=confidence, minlength=bins)
    )
    return float(gap.sum() / max(total.sum(), 1))


def _temperature(logits: np.ndarray, labels: np.ndarray, output: str) -> float:
    rows = np.arange(labels.size)

    def nll(log_t: float) -> float:
        return -float(np.mean(log_probabilities(logits / np.exp(log_t), output)[rows, labels]))

    # bounded to [1/4, 20]: on separable validation rows the NLL keeps falling as the
    # temperature goes to 0, a degenerate fit that made the tuned MAP far worse on test
    low, high = np.log(0.25), np.log(20.0)
    return float(np.exp(minimize_scalar(nll, bounds=(low, high), method="bounded").x))


def _ensemble(net, task: str, X, y, tr, va, te, seed: int, ctx) -> dict[str, Any]:
    """The plain deep-ensemble baseline: ``ENSEMBLE`` networks from different seeds (the MAP
    network is the first), as deep ensembles are used.

    Regression: Gaussian with the members' mean and their spread plus one noise variance
    fitted on the validation rows (the networks predict no variance of their own).
    Classification: the members' averaged probabilities, untempered (a temperature fitted on
    near-separable validation rows collapses towards 0, as for the MAP row, and ruins it).
    """
    members = [net] + [
        _network(task, seed + 10_000 * k, ctx).fit(X[tr], y[tr]) for k in range(1, ENSEMBLE)
    ]
    if task == "regression":
        val = np.stack([m.predict(X[va]) for m in members])
        test = np.stack([m.predict(X[te]) for m in members])

        def nll(log_noise: float, rows: np.ndarray, target: np.ndarray) -> float:
            var = rows.var(axis=0) + np.exp(log_noise)
            return -float(np.mean(gaussian_log_density(target, rows.mean(axis=0), var)))

        log_noise = minimize_scalar(nll, bounds=(-12, 4), args=(val, y[va]), method="bounded").x
        half = Z90 * np.sqrt(test.var(axis=0) + np.exp(log_noise))
        centre = test.mean(axis=0)
        intervals = np.column_stack([centre - half, centre + half])
        return {
            "nll_ensemble": nll(log_noise, test, y[te]),
            "coverage_ensemble": coverage(y[te], intervals),
            "width_ensemble": mean_width(intervals),
        }
    proba = np.mean([m.predict_proba(X[te]) for m in members], axis=0)
    labels = np.searchsorted(np.asarray(net.classes_), y[te])
    return {
        "nll_ensemble": -float(np.mean(np.log(proba[np.arange(labels.size), labels]))),
        "ece_ensemble": ece(proba, labels),
    }


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(spearmanr(a, b).statistic)


def _mc_own_scale(model: LinearizedPredictive, X_val, y_val) -> LinearizedPredictive:
    """``model`` with the covariance scale that minimises Monte Carlo's validation NLL.

    The one-pass predictive's scale is fitted for the one pass; this gives the Monte Carlo
    predictive the same chance (same posterior, its own scale), with common random numbers
    (fixed weight draws) across the scales tried.
    """
    centre = np.log(model.scale_)

    def refit(log_scale: float) -> LinearizedPredictive:
        # not sklearn.clone: it would return an unfitted copy of the posterior (and network)
        return LinearizedPredictive(
            model.estimator_,
            posterior=model.posterior_,
            scale=float(np.exp(log_scale)),
            random_state=model.random_state,
        ).fit(X_val, y_val)

    def nll(log_scale: float) -> float:
        lp = refit(log_scale).log_predictive(X_val, y_val, "mc", n_samples=MC_TUNE_SAMPLES)
        return -float(np.mean(lp))

    result = minimize_scalar(
        nll, bounds=(centre - 4.0, centre + 4.0), method="bounded", options={"xatol": 0.1}
    )
    return refit(result.x)


# ---- one data set, one split ----------------------------------------------------------------
def _evaluate(name: str, task: str, X, y, parts, seed: int, ctx) -> dict[str, Any]:
    tr, va, ca, te = (parts[k] for k in ("train", "val", "cal", "test"))
    if task == "regression":
        centre, spread = y[tr].mean(), y[tr].std()
        y = (y - centre) / spread  # NLL on the standardised scale
    net = _network(task, seed, ctx).fit(X[tr], y[tr])
    start = time.perf_counter()
    post = LaplacePosterior(net, random_state=seed).fit(X[tr], y[tr], X[va], y[va])
    model = LinearizedPredictive(net, posterior=post, n_samples=MC_SAMPLES, random_state=seed).fit(
        X[va], y[va]
    )
    out: dict[str, Any] = {"fit_s": time.perf_counter() - start}
    out["prior_precision"] = float(post.prior_precision_)
    out["scale"] = model.scale_
    log_p = {method: model.log_predictive(X[te], y[te], method) for method in ("onepass", "glm")}
    # every Monte Carlo figure from two passes over the same 1,000 weight draws (fixed seed)
    mean_mc, var_mc = model.predict_distribution(X[te], "mc", n_samples=MC_SAMPLES)
    if task == "regression":
        log_p["mc"] = model.log_predictive(X[te], y[te], "mc", n_samples=MC_SAMPLES)
    else:
        proba_mc = model.predict_proba(X[te], "mc")  # model.n_samples == MC_SAMPLES
        labels = np.searchsorted(model.classes_, y[te])
        log_p["mc"] = np.log(np.maximum(proba_mc[np.arange(labels.size), labels], 1e-300))
    for method, values in log_p.items():
        out[f"nll_{method}"] = -float(np.mean(values))
    # per test row: NLL one pass - NLL MC (pooled over resplits for a paired standard error)
    out["_nll_diff_rows"] = log_p["mc"] - log_p["onepass"]
    # Monte Carlo with the scale its own validation NLL prefers (same GGN and prior)
    start = time.perf_counter()
    mc_own = _mc_own_scale(model, X[va], y[va])
    out["mc_own_s"] = time.perf_counter() - start
    out["scale_mc_own"] = mc_own.scale_
    out["nll_mc_own_scale"] = -float(
        np.mean(mc_own.log_predictive(X[te], y[te], "mc", n_samples=MC_SAMPLES))
    )
    # the richer single pass: full covariances between units, exact ReLU moments
    rich = LinearizedPredictive(
        net, posterior=post, covariance="full", activation_moments="exact_relu", random_state=seed
    ).fit(X[va], y[va])
    out["nll_onepass_rich"] = -float(np.mean(rich.log_predictive(X[te], y[te])))
    out["nll_mc_rich"] = -float(
        np.mean(rich.log_predictive(X[te], y[te], "mc", n_samples=MC_SAMPLES))
    )
    _, var_one = model.predict_distribution(X[te])
    _, var_glm = model.predict_distribution(X[te], "glm")
    if task == "classification":
        var_one, var_glm = var_one.sum(axis=1), var_glm.sum(axis=1)
        var_mc = var_mc.sum(axis=1)
    out["spearman_mc"] = _spearman(var_one, var_mc)
    out["spearman_glm_mc"] = _spearman(var_glm, var_mc)
    out["var_ratio_mc"] = float(np.median(var_one / var_mc))
    f_val = model.view_.network.forward(model.view_.transform(X[va]))
    f_test = model.view_.network.forward(model.view_.transform(X[te]))
    if task == "regression":
        noise = float(np.mean((y[va] - f_val[:, 0]) ** 2))
        out["nll_map"] = -float(np.mean(gaussian_log_density(y[te], f_test[:, 0], noise)))
        z = Z90
        map_intervals = np.column_stack(
            [f_test[:, 0] - z * np.sqrt(noise), f_test[:, 0] + z * np.sqrt(noise)]
        )
        intervals = model.predict_interval(X[te], ALPHA)
        out["coverage_onepass"] = coverage(y[te], intervals)
        half_mc = z * np.sqrt(var_mc + model.noise_variance_)  # = predict_interval(..., "mc")
        out["coverage_mc"] = coverage(
            y[te], np.column_stack([mean_mc - half_mc, mean_mc + half_mc])
        )
        out["coverage_map"] = coverage(y[te], map_intervals)
        out["width_onepass"] = mean_width(intervals)
        out["width_map"] = mean_width(map_intervals)
        out["spearman_sqerr"] = _spearman(var_one, (y[te] - f_test[:, 0]) ** 2)
        # conformal bridge: the predictive std as the difficulty of normalized split CP
        cp = SplitConformalRegressor(
            net, alpha=ALPHA, conformity_score="normalized", difficulty_estimator=model
        ).calibrate(X[ca], y[ca])
        plain = SplitConformalRegressor(net, alpha=ALPHA).calibrate(X[ca], y[ca])
        out["cp_coverage"] = coverage(y[te], cp.predict_interval(X[te]))
        out["cp_width"] = mean_width(cp.predict_interval(X[te]))
        out["cp_abs_width"] = mean_width(plain.predict_interval(X[te]))
        out["n_cal"], out["n_test"] = ca.size, te.size
    else:
        output = model.view_.network.output
        T = _temperature(f_val, np.searchsorted(model.classes_, y[va]), output)
        log_map = log_probabilities(f_test / T, output)
        out["nll_map"] = -float(np.mean(log_map[np.arange(labels.size), labels]))
        log_raw = log_probabilities(f_test, output)
        out["nll_map_raw"] = -float(np.mean(log_raw[np.arange(labels.size), labels]))
        out["temperature_map"] = T
        out["ece_onepass"] = ece(model.predict_proba(X[te]), labels)
        out["ece_mc"] = ece(proba_mc, labels)
        out["ece_map"] = ece(np.exp(log_map), labels)
        out["ece_map_raw"] = ece(np.exp(log_probabilities(f_test, output)), labels)
        out["accuracy"] = float(np.mean(model.predict(X[te]) == y[te]))
        out["_reliability"] = (name, model.predict_proba(X[te]), np.exp(log_map), labels)
    out |= _ensemble(net, task, X, y, tr, va, te, seed, ctx)
    return out


def resplits(n_rows: int, ctx) -> int:
    """Resplits of a data set: enough that the pooled test rows reach a floor.

    Test NLLs of a few hundredths of a nat on a few dozen test rows (wine: 36) move by more
    than 5% with a single row, so small data sets get more resplits (at least
    ``ctx.pick(0, 400, 1000)`` pooled test rows, capped).
    """
    base, pooled, cap = ctx.pick((1, 0, 1), (2, 400, 10), (5, 1000, 20))
    n_test = max(1, round(0.2 * n_rows))
    return int(min(cap, max(base, -(-pooled // n_test))))


def _run_predictive(ctx, keep, notes):
    names = ctx.pick(("diabetes", "friedman", "wine"), REGRESSION + CLASSIFICATION, None)
    records: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    diffs: dict[str, list[np.ndarray]] = defaultdict(list)
    data = _loaded(names or REGRESSION + CLASSIFICATION, ctx, notes)
    names = list(data)
    jobs = [(name, seed) for name in names for seed in range(resplits(len(data[name][1]), ctx))]
    for name, seed in ctx.tqdm(jobs, desc="bayes: predictive"):
        task = "regression" if name in REGRESSION else "classification"
        X, y = data[name]
        parts = _split(len(y), ctx.rng(1, seed))
        result = _evaluate(name, task, X, y, parts, seed, ctx)
        if "_reliability" in result:
            shown = result.pop("_reliability")
            if shown[0] == "digits" or "reliability" not in keep:
                keep["reliability"] = shown
        diffs[name].append(result.pop("_nll_diff_rows"))
        for key, value in result.items():
            records[name][key].append(value)
    rows = [_predictive_row(name, records[name], diffs[name]) for name in names]
    bridge = [_bridge_row(name, records[name]) for name in names if name in REGRESSION]
    return rows, bridge


def _predictive_row(name: str, rec: dict[str, list], diffs: list[np.ndarray]) -> dict[str, Any]:
    """A data set's predictive row: means over resplits of one pass, MC, GLM and the
    baselines, with the targets judged on them (``diffs``: per-row NLL differences)."""
    n_splits = len(rec["nll_onepass"])
    mean = {key: summarize(values)[0] for key, values in rec.items()}
    gap = mean["nll_onepass"] - mean["nll_mc"]
    rel = abs(gap) / abs(mean["nll_mc"])
    pooled = np.concatenate(diffs)
    split_gaps = np.subtract(rec["nll_onepass"], rec["nll_mc"])
    # At the top of the prior grid the posterior is a point, unless the fitted scale grows
    # to make up for the prior: one pass, MC and MAP then coincide.
    at_top = np.isclose(rec["prior_precision"], PRIOR_GRID[-1])
    row: dict[str, Any] = {
        "data": name,
        "task": "regression" if name in REGRESSION else "classification",
        "nll_onepass": mean["nll_onepass"],
        "nll_mc1000": mean["nll_mc"],
        "nll_glm": mean["nll_glm"],
        "nll_map_tuned": mean["nll_map"],
        "nll_onepass_minus_mc": gap,
        "nll_diff_se": float(pooled.std(ddof=1) / np.sqrt(pooled.size)),
        "nll_diff_se_resplits": (
            float(split_gaps.std(ddof=1) / np.sqrt(n_splits)) if n_splits > 1 else float("nan")
        ),
        "resplits_prior_at_top": int(at_top.sum()),
        "nll_gap_other_resplits": (
            float(split_gaps[~at_top].mean()) if (~at_top).any() else float("nan")
        ),
        "nll_rel_diff_mc": rel,
        "nll_abs_diff_mc": abs(gap),
        # The usefulness target: the one pass at most 5% above MC (lower is better).
        "nll_target_met": bool(gap <= TARGETS["nll_rel"] * abs(mean["nll_mc"])),
        "nll_within_two_sided": bool(rel <= TARGETS["nll_rel"]),
        "nll_rel_diff_glm": (mean["nll_onepass"] - mean["nll_glm"]) / abs(mean["nll_glm"]),
        "nll_mc1000_own_scale": mean["nll_mc_own_scale"],
        "nll_rel_diff_mc_own_scale": (mean["nll_onepass"] - mean["nll_mc_own_scale"])
        / abs(mean["nll_mc_own_scale"]),
        "onepass_minus_map": mean["nll_onepass"] - mean["nll_map"],
        "nll_ensemble5": mean["nll_ensemble"],
        "onepass_minus_ensemble": mean["nll_onepass"] - mean["nll_ensemble"],
        "nll_onepass_full_relu": mean["nll_onepass_rich"],
        "nll_mc1000_full_relu": mean["nll_mc_rich"],
        "nll_rel_diff_mc_full_relu": abs(mean["nll_onepass_rich"] - mean["nll_mc_rich"])
        / abs(mean["nll_mc_rich"]),
        "spearman_var_mc": mean["spearman_mc"],
        "spearman_glm_mc": mean["spearman_glm_mc"],
        "spearman_target_met": bool(mean["spearman_mc"] >= TARGETS["spearman"]),
        "var_ratio_onepass_mc": mean["var_ratio_mc"],
        "prior_precision": float(np.exp(np.mean(np.log(rec["prior_precision"])))),
        "scale": mean["scale"],
        "fit_s": mean["fit_s"],
        "mc_own_scale_s": mean["mc_own_s"],
        "resplits": n_splits,
        "test_rows_pooled": int(pooled.size),
    }
    if name in REGRESSION:
        low, high = TARGETS["coverage"]
        row |= {
            "coverage90_onepass": mean["coverage_onepass"],
            "coverage90_mc": mean["coverage_mc"],
            "coverage90_map": mean["coverage_map"],
            "coverage_target_met": bool(low <= mean["coverage_onepass"] <= high),
            "width_onepass": mean["width_onepass"],
            "width_map": mean["width_map"],
            "coverage90_ensemble5": mean["coverage_ensemble"],
            "width_ensemble5": mean["width_ensemble"],
            "spearman_var_sqerr": mean["spearman_sqerr"],
        }
    else:
        row |= {
            "accuracy": mean["accuracy"],
            "ece_onepass": mean["ece_onepass"],
            "ece_mc1000": mean["ece_mc"],
            "ece_map_tuned": mean["ece_map"],
            "ece_map_raw": mean["ece_map_raw"],
            "ece_ensemble5": mean["ece_ensemble"],
            "nll_map_raw": mean["nll_map_raw"],
            "temperature_map": float(np.exp(np.mean(np.log(rec["temperature_map"])))),
        }
    row["nll_onepass_per_split"] = rec["nll_onepass"]
    row["nll_mc_per_split"] = rec["nll_mc"]
    return row


def _bridge_row(name: str, rec: dict[str, list]) -> dict[str, Any]:
    """The conformal bridge's row of a regression data set, with the coverage law's range."""
    n_splits = len(rec["nll_onepass"])
    mean = {key: summarize(rec[key])[0] for key in ("cp_coverage", "cp_width", "cp_abs_width")}
    n_cal, n_test = int(rec["n_cal"][0]), int(rec["n_test"][0])
    lo, hi = coverage_bounds(n_cal, ALPHA, n_test, CONFIDENCE, n_repeats=n_splits)
    return {
        "data": name,
        "coverage": mean["cp_coverage"],
        "coverage_low": lo,
        "coverage_high": hi,
        "coverage_ok": bool(lo <= mean["cp_coverage"] <= hi),
        "width_normalized_bayes": mean["cp_width"],
        "width_absolute": mean["cp_abs_width"],
        "n_calibration": n_cal,
        "n_test": n_test,
        "resplits": n_splits,
        "coverage_per_split": rec["cp_coverage"],
    }


# ---- the prior pitfall ------------------------------------------------------------------------
def _run_prior(ctx):
    # a data set skipped here was skipped, with a note, by the predictive part
    data = _loaded(ctx.pick(("diabetes",), REGRESSION, REGRESSION), ctx, [])
    seeds = ctx.pick((0,), (0,), (0, 1, 2))
    rows = []
    for name in ctx.tqdm(list(data), desc="bayes: prior"):
        X, y = data[name]
        for activation in ("relu", "tanh"):
            rec: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
            for seed in seeds:
                parts = _split(len(y), ctx.rng(1, seed))
                tr, va, te = parts["train"], parts["val"], parts["test"]
                yy = (y - y[tr].mean()) / y[tr].std()
                net = _network("regression", seed, ctx)
                net.set_params(mlpregressor__activation=activation).fit(X[tr], yy[tr])
                mlp = net[-1]
                base = LaplacePosterior(net, prior_precision=1.0).fit(X[tr], yy[tr], X[va], yy[va])
                naive = np.concatenate(
                    [
                        np.r_[
                            np.full(W.size, mlp.alpha / base.noise_variance_),
                            np.full(b.size, 1e-8),
                        ]
                        for W, b in zip(mlp.coefs_, mlp.intercepts_, strict=True)
                    ]
                )
                for label, prior in (
                    ("sklearn alpha, free biases", naive),
                    ("marglik", "marglik"),
                    ("auto (validation NLL)", "auto"),
                ):
                    post = LaplacePosterior(net, prior_precision=prior, random_state=seed).fit(
                        X[tr], yy[tr], X[va], yy[va]
                    )
                    model = LinearizedPredictive(net, posterior=post, scale=1.0, random_state=seed)
                    model.fit(X[va], yy[va])
                    _, v1 = model.predict_distribution(X[te])
                    mm, vm = model.predict_distribution(X[te], "mc", n_samples=MC_SAMPLES)
                    half_mc = Z90 * np.sqrt(vm + model.noise_variance_)  # predict_interval mc
                    r = rec[label]
                    r["ratio"].append(float(np.median(v1 / vm)))
                    r["spearman"].append(_spearman(v1, vm))
                    r["coverage_onepass"].append(
                        coverage(yy[te], model.predict_interval(X[te], ALPHA))
                    )
                    r["coverage_mc"].append(
                        coverage(yy[te], np.column_stack([mm - half_mc, mm + half_mc]))
                    )
                    r["nll_onepass"].append(-float(np.mean(model.log_predictive(X[te], yy[te]))))
                    r["nll_mc"].append(
                        -float(
                            np.mean(
                                model.log_predictive(X[te], yy[te], "mc", n_samples=MC_SAMPLES)
                            )
                        )
                    )
                    r["prior"].append(float(np.median(post.prior_precision_)))
            for label, r in rec.items():
                rows.append(
                    {
                        "data": name,
                        "activation": activation,
                        "prior": label,
                        "median_prior_precision": summarize(r["prior"])[0],
                        "var_ratio_onepass_mc": summarize(r["ratio"])[0],
                        "spearman_onepass_mc": summarize(r["spearman"])[0],
                        "coverage90_onepass": summarize(r["coverage_onepass"])[0],
                        "coverage90_mc": summarize(r["coverage_mc"])[0],
                        "nll_onepass": summarize(r["nll_onepass"])[0],
                        "nll_mc1000": summarize(r["nll_mc"])[0],
                        "resplits": len(seeds),
                    }
                )
    return rows


# ---- speed ------------------------------------------------------------------------------------
def _run_speed(ctx, notes):
    n = ctx.pick(300, 1000, 1000)
    X, y = make_friedman1(3 * n, noise=1.0, random_state=ctx.seed)
    net = _network("regression", 0, ctx).fit(X[:n], y[:n])
    # the predictive is tuned on rows the network did not see, as the docs ask
    model = LinearizedPredictive(net, random_state=0).fit(X[n : 2 * n], y[n : 2 * n])
    network, transform = model.view_.network, model.view_.transform
    repeats = ctx.pick(2, 3, 7)
    rows = []
    timed = X[2 * n :]
    for label, rows_X in (
        ("1,000 rows" if n == 1000 else f"{n} rows", timed),
        ("100 rows", timed[:100]),
        ("10 rows", timed[:10]),
        ("1 row", timed[:1]),
    ):
        Xt = transform(rows_X)
        _, public = best_time(lambda rows_X=rows_X: model.predict_distribution(rows_X), repeats)
        blocks = model.posterior_.blocks(model.scale_)
        _, one_pass = best_time(lambda Xt=Xt, blocks=blocks: network.moments(Xt, blocks), repeats)
        _, glm = best_time(
            lambda rows_X=rows_X: model.predict_distribution(rows_X, "glm"), repeats
        )
        row = {
            "rows": label,
            "onepass_ms": 1e3 * one_pass,
            "predict_distribution_ms": 1e3 * public,
            "glm_ms": 1e3 * glm,
            "glm_over_onepass": glm / public,  # both through predict_distribution
        }
        for samples in (10, 100, 1000):
            theta = model.posterior_.sample(samples, 0, model.scale_)  # drawn in advance
            _, mc = best_time(lambda theta=theta, Xt=Xt: _mc_pass(network, Xt, theta), repeats)
            row[f"mc{samples}_ms"] = 1e3 * mc
            row[f"mc{samples}_over_onepass"] = mc / one_pass
            if samples == 100:
                weights = _unpack_samples(network, theta)  # unpacked in advance as well
                _, per_sample = best_time(
                    lambda weights=weights, Xt=Xt: _mc_per_sample(network, Xt, weights),
                    repeats,
                )
                row["mc100_per_sample_ms"] = 1e3 * per_sample
                row["mc100_per_sample_over_onepass"] = per_sample / one_pass
                row["mc100_fastest_over_onepass"] = min(mc, per_sample) / one_pass
        row["target_met"] = bool(row["mc100_per_sample_over_onepass"] >= TARGETS["speedup_100"])
        row["target_met_fastest_mc"] = bool(
            row["mc100_fastest_over_onepass"] >= TARGETS["speedup_100"]
        )
        rows.append(row)
    notes.append(
        f"speed: single thread (threadpool_limits(1)), best of {repeats} runs for every "
        "method, network (64, 64) "
        "ReLU on friedman inputs. onepass = Network.moments with the posterior blocks built "
        "once; mc* = forward passes with the weight samples drawn in advance, blocks of "
        "samples batched with matmul (a 3-D product per layer), averaging the outputs; "
        "mc100_per_sample = the same 100 samples, unpacked into per-layer weights in advance, "
        "one forward pass per sample, which is how laplace-torch's 'nn' predictive runs "
        "(vector_to_parameters and a forward call per sample) and the protocol behind the "
        "issue's prototype figures (26-39x on batches, 160-220x on single points); "
        "mc100_fastest = the faster of the two per row count (batching wins on small batches, "
        "the per-sample loop on 1,000 rows). GLM = Jacobians by the numpy backward pass of "
        "uqconform.linearize plus J Sigma J'; glm_over_onepass compares GLM and the one pass "
        "both through the public predict_distribution (input checks and transform "
        "included). target_met: the per-sample MC-100 at least "
        f"{TARGETS['speedup_100']:.0f}x the one-pass time (the issue's protocol); "
        "target_met_fastest_mc: the same against the fastest MC-100. The one pass costs about "
        "three forward passes plus numpy's fixed cost per call (about 20 microseconds for this "
        "network), so on one to ten rows batched Monte Carlo is within 20x of it. Timings on a "
        "shared machine are noisy; the ratios are what the issue asks for."
    )
    return rows


def _unpack_samples(network, theta: np.ndarray) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per sample, the ``(W, b)`` of each Dense layer (views into ``theta``)."""
    dense = network.dense_layers
    slices = network.parameter_slices()
    return [
        [
            (
                sample[part][: layer.weight.size].reshape(layer.n_in, layer.n_out),
                sample[part][layer.weight.size :],
            )
            for layer, part in zip(dense, slices, strict=True)
        ]
        for sample in theta
    ]


def _mc_per_sample(network, Xt: np.ndarray, weights) -> np.ndarray:
    """Monte Carlo variance with one forward pass per weight sample (laplace-torch's way)."""
    total = np.zeros((Xt.shape[0], network.n_outputs))
    square = np.zeros_like(total)
    for sample in weights:
        dense = iter(sample)
        a = Xt
        for layer in network.layers:
            if isinstance(layer, Dense):
                W, b = next(dense)
                a = a @ W + b
            else:
                a = layer.forward(a)
        total += a
        square += a * a
    mean = total / len(weights)
    return square / len(weights) - mean**2


def _mc_pass(network, Xt: np.ndarray, theta: np.ndarray) -> np.ndarray:
    width = max(layer.n_out for layer in network.dense_layers)
    block = max(1, 2**22 // max(1, Xt.shape[0] * width))
    total = np.zeros((Xt.shape[0], network.n_outputs))
    square = np.zeros_like(total)
    for start in range(0, theta.shape[0], block):
        out = network.forward_samples(Xt, theta[start : start + block])
        total += out.sum(axis=0)
        square += (out**2).sum(axis=0)
    mean = total / theta.shape[0]
    return square / theta.shape[0] - mean**2


# ---- plot -------------------------------------------------------------------------------------
def _plot_reliability(ctx, keep) -> None:
    if "reliability" not in keep:
        return
    name, onepass, map_proba, labels = keep["reliability"]

    def draw(fig):
        ax = fig.subplots()
        bins = np.linspace(0, 1, 11)
        for proba, label in (
            (onepass, "one pass (probit)"),
            (map_proba, "MAP, tuned temperature"),
        ):
            conf = proba.max(axis=1)
            correct = proba.argmax(axis=1) == labels
            index = np.clip(np.digitize(conf, bins) - 1, 0, 9)
            counts = np.bincount(index, minlength=10)
            acc = np.bincount(index, weights=correct, minlength=10) / np.maximum(counts, 1)
            centre = np.bincount(index, weights=conf, minlength=10) / np.maximum(counts, 1)
            keep_bins = counts > 0
            (line,) = ax.plot(centre[keep_bins], acc[keep_bins], "-", label=label)
            # marker area proportional to the number of rows in the bin
            ax.scatter(
                centre[keep_bins],
                acc[keep_bins],
                s=4 + 200 * counts[keep_bins] / counts.sum(),
                color=line.get_color(),
            )
        ax.plot([0, 1], [0, 1], "k--", lw=1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{name}: reliability (test rows; marker area = rows in bin)")
        ax.legend()

    ctx.figure("reliability", draw, size=(5.0, 4.5))


@register_family(
    "bayes",
    "single-pass Bayesian predictive vs Monte Carlo, GLM and tuned MAP; prior pitfall; "
    "conformal bridge; speed",
    requires=(),  # numpy only: the family runs scikit-learn MLPs, never torch,
    weight=2.0,
)
def run(ctx) -> FamilyResult:
    """Predictive quality, the prior pitfall, the conformal bridge and speed."""
    notes: list[str] = []
    keep: dict[str, Any] = {}
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        predictive, bridge = _run_predictive(ctx, keep, notes)
        prior = _run_prior(ctx)
        speed = _run_speed(ctx, notes)
        _plot_reliability(ctx, keep)
    notes.append(
        "predictive: StandardScaler + MLP (64, 64), ReLU, scikit-learn defaults "
        "(alpha 1e-4, adam); 50/20/10/20 train/validation/calibration/test resplits. "
        "Posterior: diagonal GGN on the training rows, one prior precision on every "
        "parameter (biases included) from a log grid by the one-pass validation NLL; scale "
        "and regression noise fitted on the validation rows; MC and GLM use the same "
        "posterior, scale and noise. Regression NLL on targets standardised with the training "
        "mean and sd. nll_target_met: NLL one pass <= NLL MC-1000 + 5% of it (the "
        "issue's usefulness target: at most 5% worse; lower is better); "
        "nll_within_two_sided: |NLL one pass - NLL MC-1000| <= 5% of NLL MC (the stricter "
        "reading, which also fails a one pass that is better); nll_onepass_minus_mc < 0 "
        "means the one pass is better; nll_diff_se: "
        "standard error of the per-row difference pooled over resplits (test_rows_pooled), "
        "which ignores that the rows of a resplit share one network and posterior; "
        "nll_diff_se_resplits: the standard error over resplits (sd of the per-resplit gaps "
        "/ sqrt(resplits); the one the headlines quote, unreliable with 2-4 resplits). "
        "resplits_prior_at_top: resplits whose tuned prior precision is the top of the grid "
        "(1e6), where the posterior is a point and the one pass, MC and MAP coincide (gap 0) "
        "unless the fitted scale grows to make up for the prior (a large scale_); "
        "nll_gap_other_resplits: the mean gap over the other resplits. "
        "Small data sets get more resplits (at least 400 pooled test rows at quick scale, "
        "1,000 at full, capped at 10 / 20 resplits). nll_mc1000_own_scale: Monte Carlo on "
        "the same GGN and prior with the covariance scale its own validation NLL prefers "
        "(200 common weight draws per trial), so that MC is not judged at the one pass's "
        "scale; nll_rel_diff_glm: one pass against the linearised (GLM) predictive. "
        "nll_map_raw / temperature_map (classification): the untempered MAP network, and the "
        "tuned temperature (bounded to [1/4, 20]: unbounded, it collapses towards 0 when the "
        "validation rows are separated). "
        "MAP tuned: the network's output with the validation mean squared residual as noise "
        "(regression) or a validation-fitted temperature (classification). "
        "onepass_minus_map < 0 means the Bayesian predictive helps. *_full_relu: the same "
        "posterior with covariance='full' (covariances between units propagated) and "
        "activation_moments='exact_relu', with its own fitted scale (so its MC column differs). "
        "On wine and breast cancer the NLLs are a few hundredths of a nat, so a 5% relative "
        "gap is a few thousandths of a nat (nll_abs_diff_mc): the relative criterion is "
        "ill-conditioned there, and a single test row can move it. Where the two differ, the "
        "one pass is the better one (lower NLL): under weight noise ReLU units flip, "
        "Monte Carlo's logits move off the MAP output and spread (a predictive worse on "
        "near-separable data), which a linearised pass does not follow; the exact ReLU "
        "moments (*_full_relu) follow it and sit closer to their MC. The probit "
        "approximation is not the cause (one pass with Monte Carlo over its Gaussian "
        "logits gives about the same NLL)."
    )
    notes.append(
        f"nll_ensemble5: the plain deep-ensemble baseline, {ENSEMBLE} networks of the same "
        "kind from different seeds on the same training rows (the MAP network is one), "
        "averaged; regression adds one noise variance, fitted on the validation rows, to "
        "their spread; classification averages their probabilities, untempered. "
        f"It costs {ENSEMBLE} trainings where the one pass costs one "
        "training and a posterior. onepass_minus_ensemble > 0 means the ensemble is better."
    )
    notes.append(
        "Where it does not help: if nll_map_tuned ties nll_onepass (and the tuned prior "
        "precision sits at the top of its grid, 1e6), the posterior adds nothing over the MAP "
        "network with tuned noise; spearman_var_sqerr (rank correlation of the epistemic "
        "variance with the squared test error) says whether the variance ranks the errors."
    )
    notes.append(
        "prior: the same networks with three prior precisions, scale fixed at 1. 'sklearn "
        "alpha, free biases' = alpha / noise on the weights and 1e-8 on the biases (alpha "
        "read as a full-batch penalty, as lbfgs applies it; adam's minibatches make these "
        "networks' penalty 3.2 to 5.8 times alpha, uqconform.linearize.weight_decay). "
        "var_ratio_onepass_mc = median over test rows of the one-pass variance over MC's on "
        "the same posterior."
    )
    notes.append(
        "conformal bridge: SplitConformalRegressor(net, conformity_score='normalized', "
        "difficulty_estimator=<fitted LinearizedPredictive>) calibrated on the calibration "
        "rows; coverage_low/high: central 99% interval of the split-CP coverage law "
        "(coverage_bounds, pooled over resplits). width_absolute: the absolute score."
    )
    return FamilyResult(
        tables={
            "predictive (test NLL, coverage, ECE; same posterior)": predictive,
            "prior precision pitfall": prior,
            "conformal bridge (alpha 0.1)": bridge,
            "speed": speed,
        },
        notes=notes,
        headlines=_headlines(predictive, bridge, speed),
    )


def _se_text(se: float | None) -> str:
    """A standard error for a headline: "n/a" for one resplit (it has none; stored tables
    hold it as null)."""
    return "n/a" if se is None or not np.isfinite(se) else f"{se:.4f}"


def _headlines(predictive, bridge, speed) -> list[dict[str, Any]]:
    """One row per number the issue asks for (NLL vs MC per data set, coverage, ...)."""
    low, high = TARGETS["coverage"]
    found = [
        headline(
            f"{row['data']}: test NLL, (one pass - MC-1000) / MC-1000, same posterior "
            f"({row['nll_onepass_minus_mc']:+.4f} +- {_se_text(row['nll_diff_se_resplits'])} "
            "nats, "
            f"s.e. over {row['resplits']} resplits; {row['resplits_prior_at_top']} at the top "
            "of the prior grid, where the gap is 0)",
            round(row["nll_onepass_minus_mc"] / abs(row["nll_mc1000"]), 3),
            f"<= +{TARGETS['nll_rel']:.0%} (one pass at most 5% worse; lower is better)",
            row["nll_target_met"],
        )
        for row in predictive
    ]
    if predictive:
        two_sided = sum(row["nll_within_two_sided"] for row in predictive)
        found.append(
            headline(
                "data sets where the one-pass NLL is within 5% of MC-1000's either way "
                "(the two-sided reading, which counts a better one pass as a miss)",
                f"{two_sided}/{len(predictive)}",
            )
        )
    found += [
        headline(
            f"{row['data']}: coverage of the one-pass Gaussian 90% intervals",
            round(row["coverage90_onepass"], 3),
            f"in [{low}, {high}]",
            row["coverage_target_met"],
        )
        for row in predictive
        if "coverage90_onepass" in row
    ]
    if predictive:
        worst = min(predictive, key=lambda row: row["spearman_var_mc"])
        found.append(
            headline(
                f"Spearman of one-pass variance with MC's, lowest ({worst['data']})",
                round(worst["spearman_var_mc"], 3),
                f">= {TARGETS['spearman']}",
                worst["spearman_var_mc"] >= TARGETS["spearman"],
            )
        )
        classified = [row for row in predictive if "ece_onepass" in row]
        if classified:
            found.append(
                headline(
                    "ECE of the one pass, mean over the classification sets",
                    round(float(np.mean([row["ece_onepass"] for row in classified])), 4),
                )
            )
        # The MAP baseline, per set the stronger of the two (noise or temperature tuned on
        # the validation rows, and for classifiers the untempered network): picking it on
        # the test rows favours the baseline, not the one pass.
        gaps = {
            row["data"]: row["nll_onepass"]
            - min(row["nll_map_tuned"], row.get("nll_map_raw") or np.inf)
            for row in predictive
        }
        if gaps:
            found.append(
                headline(
                    "test NLL, one pass - the stronger MAP baseline (noise or temperature "
                    "tuned on validation; for classifiers also the untempered network), per "
                    "set (< 0: the one pass is better)",
                    ", ".join(f"{data} {gap:+.3f}" for data, gap in gaps.items()),
                )
            )
        better = [r["data"] for r in predictive if r["nll_ensemble5"] < r["nll_onepass"]]
        found.append(
            headline(
                f"test NLL: sets where a deep ensemble ({ENSEMBLE} trainings) beats the one pass",
                f"{len(better)} of {len(predictive)}"
                + (": " + ", ".join(better) if better else ""),
            )
        )
    for row in (speed[0], speed[-1]):  # the largest batch and a single row
        found.append(
            headline(
                f"time of MC-100, one pass per sample (weights drawn in advance; "
                f"laplace-torch's way) / one pass, {row['rows']}",
                round(row["mc100_per_sample_over_onepass"], 1),
                f">= {TARGETS['speedup_100']:.0f}x",
                row["target_met"],
            )
        )
        found.append(
            headline(
                f"time of the fastest MC-100 (batched or per sample) / one pass, {row['rows']}",
                round(row["mc100_fastest_over_onepass"], 1),
                f">= {TARGETS['speedup_100']:.0f}x (stricter than the issue)",
                row["target_met_fastest_mc"],
            )
        )
    found += [
        headline(
            f"{row['data']}: normalized split CP with the one-pass std, coverage",
            round(row["coverage"], 3),
            f"in [{row['coverage_low']:.3f}, {row['coverage_high']:.3f}] (coverage_bounds)",
            row["coverage_ok"],
        )
        for row in bridge
    ]
    return found
