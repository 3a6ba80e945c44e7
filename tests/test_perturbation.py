"""Input perturbation simulators: random and worst-of-k l2 shifts."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import Unchanged
from sklearn.linear_model import LogisticRegression

from uqconform.evaluation.perturbation import random_l2_perturbation, worst_of_k_perturbation


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)]
    return LogisticRegression().fit(X, y), X, y


def true_proba(model, X, y):
    columns = np.searchsorted(model.classes_, y)
    return model.predict_proba(X)[np.arange(len(y)), columns]


def test_random_shift_has_the_norm_asked_and_leaves_x_alone(fitted):
    _, X, _ = fitted
    guard = Unchanged(X)
    shifted = random_l2_perturbation(X, 0.3, random_state=1)
    np.testing.assert_allclose(np.linalg.norm(shifted - X, axis=1), 0.3)
    np.testing.assert_array_equal(shifted, random_l2_perturbation(X, 0.3, random_state=1))
    assert not np.allclose(shifted, random_l2_perturbation(X, 0.3, random_state=2))
    np.testing.assert_array_equal(random_l2_perturbation(X, 0.0, random_state=1), X)
    guard.check()
    # directions are uniform: their mean is near zero, no axis is preferred
    directions = (random_l2_perturbation(np.zeros((4000, 3)), 1.0, random_state=0)).mean(axis=0)
    assert np.abs(directions).max() < 4 / np.sqrt(3 * 4000)


def test_clip_keeps_the_box_and_shrinks_the_shift():
    """Clipping is applied to the same shift as without it (same seed: same directions)."""
    X = np.full((50, 4), 0.95)
    shifted = random_l2_perturbation(X, 0.5, clip=(0.0, 1.0), random_state=0)
    unclipped = random_l2_perturbation(X, 0.5, random_state=0)
    np.testing.assert_array_equal(shifted, np.clip(unclipped, 0.0, 1.0))
    assert shifted.min() >= 0 and shifted.max() <= 1
    norms = np.linalg.norm(shifted - X, axis=1)
    assert (norms <= 0.5 + 1e-12).all()
    assert (norms > 0).all()  # a shift is still applied: rows sit 0.05 below the upper edge


def test_worst_of_k_hurts_the_true_label_more_than_random(fitted):
    model, X, y = fitted
    guard = Unchanged(X, y)
    worst = worst_of_k_perturbation(X, y, 0.5, model, k=32, random_state=0)
    random = random_l2_perturbation(X, 0.5, random_state=0)
    np.testing.assert_allclose(np.linalg.norm(worst - X, axis=1), 0.5)
    assert true_proba(model, worst, y).mean() < true_proba(model, random, y).mean()
    # the worst of 32 directions is worse, on average, than a single random one
    one = worst_of_k_perturbation(X, y, 0.5, model, k=1, random_state=0)
    assert true_proba(model, worst, y).mean() < true_proba(model, one, y).mean()
    guard.check()


def test_worst_of_k_is_reproducible_batched_and_accepts_a_score_function(fitted):
    model, X, y = fitted
    full = worst_of_k_perturbation(X, y, 0.4, model, k=8, random_state=3)
    batched = worst_of_k_perturbation(X, y, 0.4, model, k=8, batch_size=7, random_state=3)
    np.testing.assert_array_equal(full, batched)
    codes = np.searchsorted(model.classes_, y)
    by_function = worst_of_k_perturbation(X, codes, 0.4, model.predict_proba, k=8, random_state=3)
    np.testing.assert_array_equal(full, by_function)


def test_worst_of_k_bad_input(fitted):
    model, X, y = fitted
    with pytest.raises(ValueError, match="`radius`"):
        worst_of_k_perturbation(X, y, -0.1, model)
    with pytest.raises(ValueError, match="`k`"):
        worst_of_k_perturbation(X, y, 0.1, model, k=0)
    with pytest.raises(ValueError, match="`y`"):
        worst_of_k_perturbation(X, y[:-1], 0.1, model)
    with pytest.raises(ValueError, match="never saw"):
        worst_of_k_perturbation(X, np.where(y == "a", "z", y), 0.1, model)
    with pytest.raises(TypeError, match="predict_proba"):
        worst_of_k_perturbation(X, y, 0.1, object())
    with pytest.raises(ValueError, match="`radius`"):
        random_l2_perturbation(X, np.nan)
    with pytest.raises(ValueError, match="finite"):
        random_l2_perturbation(np.array([[np.inf, 0.0]]), 0.1)


def test_worst_of_k_draws_its_directions_batch_by_batch():
    """Memory follows ``batch_size``, not ``n * k * d`` (every direction was drawn at once
    before), and the result does not depend on the batch size."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, d, k = 400, 200, 32
    X, y = rng.normal(size=(n, d)), rng.integers(2, size=n)

    def score(Z):
        return np.column_stack([np.tanh(Z[:, 0]), -np.tanh(Z[:, 0])])

    def run(batch_size):
        return worst_of_k_perturbation(
            X, y, 1.0, score, k=k, batch_size=batch_size, random_state=0
        )

    tracemalloc.start()
    small = run(10)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < n * k * d * 8 / 4  # the whole direction array is 20 MB
    np.testing.assert_array_equal(small, run(None))
    np.testing.assert_array_equal(small, run(n))


def test_worst_of_k_checks_classes_and_score_shapes_against_the_model(fitted):
    """`classes` in another order than `model.classes_` was accepted (the attack then
    lowered another label's probability); more classes than score columns met numpy's
    IndexError, and a score function of the wrong shape numpy's reshape message or one
    blaming `y`."""
    model, X, y = fitted
    labels = list(model.classes_)
    for classes in (labels[::-1], [*labels, "d"]):
        with pytest.raises(ValueError, match=r"`classes` .* disagree with `model.classes_`"):
            worst_of_k_perturbation(X, y, 0.5, model, k=4, classes=classes, random_state=0)
    same = worst_of_k_perturbation(X, y, 0.5, model, k=4, classes=labels, random_state=0)
    expected = worst_of_k_perturbation(X, y, 0.5, model, k=4, random_state=0)
    np.testing.assert_array_equal(same, expected)
    with pytest.raises(ValueError, match=r"`classes` has 4 labels but .* 3 columns"):
        worst_of_k_perturbation(X, y, 0.5, model.predict_proba, k=4, classes=[*labels, "d"])
    one_too_many = lambda Z: model.predict_proba(np.vstack([Z, Z[:1]]))  # noqa: E731
    for score in (one_too_many, lambda Z: model.predict_proba(Z)[:, 1]):
        with pytest.raises(ValueError, match=r"returned scores of shape .* \(rows, n_classes\)"):
            worst_of_k_perturbation(X, y, 0.5, score, k=4, classes=labels, random_state=0)
