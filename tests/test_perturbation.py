"""Input perturbation simulators: random and worst-of-k l2 shifts."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

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


def test_worst_of_k_refuses_a_class_for_the_model(fitted):
    """A class (``LogisticRegression`` without parentheses) has predict_proba and is
    callable, so it was called as a model: a raw "missing 1 required positional argument"
    TypeError (a class without predict_proba was called as a scoring function)."""
    _, X, y = fitted
    expected = r"`model` .* the class LogisticRegression: pass a fitted instance instead, e\.g\."
    with pytest.raises(TypeError, match=expected + r" LogisticRegression\(\)\.fit"):
        worst_of_k_perturbation(X, y, 0.1, LogisticRegression)
    with pytest.raises(TypeError, match=r"`model` .* the class StandardScaler: pass a fitted"):
        worst_of_k_perturbation(X, y, 0.1, StandardScaler)


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


def test_worst_of_k_refuses_a_pandas_y_in_another_row_order(fitted):
    """A label Series indexed by X's row labels in reverse order was paired by position
    (each row attacked for another row's label), where the rest of the library refuses it."""
    model, X, y = fitted
    frame = pd.DataFrame(X[:20], index=np.arange(100, 120))
    labels = pd.Series(y[:20], index=frame.index)
    with pytest.raises(ValueError, match=r"`y` is indexed by the row labels of `X` in another"):
        worst_of_k_perturbation(frame, labels.iloc[::-1], 0.5, model, k=4, random_state=0)
    same = worst_of_k_perturbation(frame, labels, 0.5, model, k=4, random_state=0)
    expected = worst_of_k_perturbation(X[:20], y[:20], 0.5, model, k=4, random_state=0)
    np.testing.assert_array_equal(same.to_numpy(), expected)


@pytest.fixture(scope="module")
def by_name():
    """A model that selects its columns by name, fitted on a DataFrame, and the same model
    selecting them by position, fitted on the array."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    frame = pd.DataFrame(X, columns=["a", "b", "c"], index=np.arange(200)[::-1] * 3)

    def pipeline(columns):
        scale = ColumnTransformer([("scale", StandardScaler(), columns)])
        return make_pipeline(scale, LogisticRegression())

    return pipeline(["a", "b"]).fit(frame, y), pipeline([0, 1]).fit(X, y), frame, y


def test_dataframes_keep_their_columns_for_a_model_reading_them_by_name(by_name):
    """The tools turned a DataFrame into an array: a model selecting columns by name met
    scikit-learn's "Specifying the columns using strings is only supported for dataframes"
    inside `worst_of_k_perturbation`, and could not read `random_l2_perturbation`'s output."""
    named, positional, frame, y = by_name
    guard = Unchanged(frame, y)
    X = frame.to_numpy()
    worst = worst_of_k_perturbation(frame, y, 0.5, named, k=8, batch_size=30, random_state=0)
    assert isinstance(worst, pd.DataFrame)
    pd.testing.assert_index_equal(worst.index, frame.index)
    pd.testing.assert_index_equal(worst.columns, frame.columns)
    expected = worst_of_k_perturbation(X, y, 0.5, positional, k=8, random_state=0)
    np.testing.assert_array_equal(worst.to_numpy(), expected)
    shifted = random_l2_perturbation(frame, 0.5, clip=(-2, 2), random_state=0)
    assert isinstance(shifted, pd.DataFrame)
    pd.testing.assert_index_equal(shifted.index, frame.index)
    pd.testing.assert_index_equal(shifted.columns, frame.columns)
    np.testing.assert_array_equal(
        shifted.to_numpy(), random_l2_perturbation(X, 0.5, clip=(-2, 2), random_state=0)
    )
    assert named.predict_proba(shifted).shape == (200, 2)
    guard.check()


def test_dataframes_raise_no_feature_name_warnings(by_name):
    """A model fitted on a DataFrame warned "X does not have valid feature names" once per
    batch; one fitted on an array must not warn either when X is a DataFrame."""
    _, _, frame, y = by_name
    X = frame.to_numpy()
    with_names = LogisticRegression().fit(frame, y)
    without = LogisticRegression().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for model in (with_names, without, without.predict_proba):
            moved = worst_of_k_perturbation(frame, y, 0.5, model, k=4, batch_size=50)
            assert isinstance(moved, pd.DataFrame)
            with_names.predict_proba(random_l2_perturbation(frame, 0.5))


def test_dataframes_with_a_non_numeric_column_are_refused_naming_x(fitted):
    _, X, y = fitted
    frame = pd.DataFrame(X[:10, :2], columns=["a", "b"]).assign(city="Paris")
    with pytest.raises(ValueError, match=r"`X` has non-numeric columns \['city'\]"):
        random_l2_perturbation(frame, 0.5)
    with pytest.raises(ValueError, match=r"`X` has non-numeric columns \['city'\]"):
        worst_of_k_perturbation(frame, y[:10], 0.5, lambda Z: np.ones((len(Z), 3)))


def test_worst_of_k_refuses_nan_scores_naming_the_model(fitted):
    """NaN scores were accepted, np.argmin then kept the first NaN candidate."""
    model, X, y = fitted

    def broken(Z):
        proba = model.predict_proba(Z)
        proba[Z[:, 0] > 1.5] = np.nan
        return proba

    with pytest.raises(ValueError, match=r"`model` \(broken\) returned NaN scores .* of `X`"):
        worst_of_k_perturbation(X, y, 0.5, broken, classes=model.classes_, random_state=0)
    all_nan = lambda Z: np.full((len(Z), 3), np.nan)  # noqa: E731
    with pytest.raises(ValueError, match=r"\(<lambda>\) returned NaN .* \(first: row 0\)"):
        worst_of_k_perturbation(X, y, 0.5, all_nan, classes=model.classes_, batch_size=7)


def test_worst_of_k_takes_an_infinitely_bad_score_as_the_worst():
    """-inf (a log-probability of 0) is a score to compare, not an error."""
    X = np.zeros((50, 3))

    def log_proba(Z):
        return np.column_stack([np.where(Z[:, 0] > 0, -np.inf, 0.0), np.zeros(len(Z))])

    moved = worst_of_k_perturbation(X, np.zeros(50, int), 1.0, log_proba, k=16, random_state=0)
    assert (moved[:, 0] > 0).all()


def test_worst_of_k_checks_the_classes_argument(fitted):
    """Duplicated `classes` were accepted (a label then had two score columns), and a label
    outside `classes` was reported as one "the model never saw during fit"."""
    model, X, y = fitted
    score = model.predict_proba
    no_b = np.where(y == "b", "a", y)  # every label in the list: this was accepted
    with pytest.raises(ValueError, match=r"`classes` must hold each label once .*\['a'\]"):
        worst_of_k_perturbation(X, no_b, 0.5, score, classes=["a", "a", "c"])
    outside = np.where(y == "c", "d", y)
    with pytest.raises(ValueError, match=r"`y` contains labels that are not in `classes`: \['d'"):
        worst_of_k_perturbation(X, outside, 0.5, score, classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="never saw"):  # the model's own classes
        worst_of_k_perturbation(X, outside, 0.5, model)


@pytest.mark.parametrize("clip", [("0", "1"), (False, True), (0.0, "1"), ("a", "b")])
def test_clip_bounds_must_be_numbers(fitted, clip):
    """Text bounds met numpy's UFuncTypeError inside np.clip."""
    model, X, y = fitted
    with pytest.raises(ValueError, match="`clip` must be two numbers"):
        random_l2_perturbation(X, 1.0, clip=clip)
    with pytest.raises(ValueError, match="`clip` must be two numbers"):
        worst_of_k_perturbation(X, y, 1.0, model, clip=clip)


def test_a_scoring_function_gets_arrays_for_a_dataframe():
    """Review finding (diffrev5): after frames reached column-reading models, a plain
    function written for arrays (``lambda Z: clf.predict_proba(Z[:, :2])``) got a
    DataFrame and failed; only a model fitted with feature names gets frames."""
    import warnings

    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = LogisticRegression().fit(X[:, :2], y)  # fitted on an array
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attacked = worst_of_k_perturbation(
            frame, y, 0.5, lambda Z: clf.predict_proba(Z[:, :2]), k=4, random_state=0
        )
    expected = worst_of_k_perturbation(
        X, y, 0.5, lambda Z: clf.predict_proba(Z[:, :2]), k=4, random_state=0
    )
    np.testing.assert_array_equal(attacked.to_numpy(), expected)


def test_a_bound_predict_proba_reads_its_estimators_classes(fitted):
    """With a bound ``clf.predict_proba`` and text labels, `classes=` was required ("`y`
    must hold column indices 0..K-1 ..."), though the estimator's ``classes_`` were at
    hand (read already to decide whether candidates are DataFrames) (shift review)."""
    model, X, y = fitted
    by_model = worst_of_k_perturbation(X, y, 0.4, model, k=8, random_state=3)
    bound = worst_of_k_perturbation(X, y, 0.4, model.predict_proba, k=8, random_state=3)
    np.testing.assert_array_equal(bound, by_model)
    with pytest.raises(ValueError, match="never saw"):
        worst_of_k_perturbation(X, np.where(y == "a", "z", y), 0.4, model.predict_proba)
    # integer labels other than the column indices: read as labels too (label 2 of classes
    # [1, 2] was refused as a column index beyond the 2 columns)
    ones_twos = (X[:, 0] > 0).astype(int) + 1
    binary = LogisticRegression().fit(X, ones_twos)
    np.testing.assert_array_equal(
        worst_of_k_perturbation(X, ones_twos, 0.4, binary.predict_proba, k=4, random_state=0),
        worst_of_k_perturbation(X, ones_twos, 0.4, binary, k=4, random_state=0),
    )
    # classes that are numbers of another dtype (float labels -1., 0., 1.) against integer
    # y: labels too, compared as numbers (diffrev14: read as column indices, the wrong
    # class attacked)
    signs = np.sign(np.round(X[:, 0]))  # -1., 0., 1.
    floats = LogisticRegression().fit(X, signs)
    ints = signs.astype(int)
    np.testing.assert_array_equal(
        worst_of_k_perturbation(X[:40], ints[:40], 0.4, floats.predict_proba, k=4, random_state=0),
        worst_of_k_perturbation(X[:40], ints[:40], 0.4, floats, k=4, random_state=0),
    )
    # the reading is the dtypes', never the values' (diffrev13: classes [1, 2, 3] and y of
    # 1s and 2s were read as labels, and with one 0 added as column indices): integer y
    # with integer classes are labels, so a 0 is a label the model never saw
    three = LogisticRegression().fit(X, np.digitize(X[:, 0], [-0.5, 0.5]) + 1)
    with pytest.raises(ValueError, match="never saw"):
        worst_of_k_perturbation(X[:3], np.array([0, 1, 2]), 0.4, three.predict_proba)
    rows = worst_of_k_perturbation(
        X[:2], np.array([1, 2]), 0.4, three.predict_proba, k=4, random_state=0
    )
    np.testing.assert_array_equal(
        rows, worst_of_k_perturbation(X[:2], np.array([1, 2]), 0.4, three, k=4, random_state=0)
    )


@pytest.mark.parametrize(
    ("dtype", "columns"), [(bool, 2), (bool, 1), ("boolean", 1), ("Int64", 1)]
)
def test_boolean_and_nullable_integer_frames_are_shifted_like_their_floats(dtype, columns):
    """Review finding (stop 57): an all-boolean frame, a "boolean" or an "Int64" column
    crashed both functions with numpy's "output array is read-only" (scikit-learn's
    check_array returns a read-only array for them under pandas 3)."""
    frame = pd.DataFrame({"a": [True, False, True, True], "b": [False, False, True, False]})
    frame = frame.iloc[:, :columns].astype(dtype)
    floats = frame.to_numpy(dtype=float)
    guard = Unchanged(frame)
    moved = random_l2_perturbation(frame, 0.5, clip=(0, 1), random_state=0)
    assert isinstance(moved, pd.DataFrame)
    np.testing.assert_array_equal(
        moved.to_numpy(), random_l2_perturbation(floats, 0.5, clip=(0, 1), random_state=0)
    )
    y = np.array([0, 1, 1, 0])
    model = LogisticRegression().fit(floats, y)
    worst = worst_of_k_perturbation(frame, y, 0.5, model.predict_proba, k=4, random_state=0)
    np.testing.assert_array_equal(
        worst.to_numpy(),
        worst_of_k_perturbation(floats, y, 0.5, model.predict_proba, k=4, random_state=0),
    )
    guard.check()


def test_nan_and_one_dimensional_x_are_named_with_a_remedy():
    """Review finding (stop 57): NaN in X said "`X` must be a finite numeric 2-D array
    (Input contains NaN.)" with no remedy, and a 1-D X printed scikit-learn's dump of it."""
    X = np.array([[0.5, np.nan], [1.0, 2.0]])
    with pytest.raises(ValueError, match=r"`X` contains NaN .*impute") as nan_error:
        random_l2_perturbation(X, 0.1)
    assert "Input contains" not in str(nan_error.value)
    row = np.array([0.123456, 2.5, 3.5])
    with pytest.raises(ValueError, match=r"`X` must be 2-D .*X\.reshape\(-1, 1\)") as flat:
        random_l2_perturbation(row, 0.1)
    assert "0.123456" not in str(flat.value) and "array=" not in str(flat.value)
    with pytest.raises(ValueError, match=r"`X` contains NaN .*impute"):
        worst_of_k_perturbation(X, [0, 1], 0.1, lambda Z: np.ones((len(Z), 2)))


def test_infinite_none_empty_and_three_dimensional_x_are_named_with_their_remedy():
    """Diff-review finding (stop 57): infinite values in X were told to use
    sklearn.impute.SimpleImputer, which refuses infinity; X=None said "Expected 2D array,
    got scalar array", and a frame without columns or a 3-D X got scikit-learn's words."""
    simulators = (
        lambda X: random_l2_perturbation(X, 0.1, random_state=0),
        lambda X: worst_of_k_perturbation(
            X, [0, 1], 0.1, lambda Z: np.full((len(Z), 2), 0.5), k=2, random_state=0
        ),
    )
    for simulate in simulators:
        with pytest.raises(ValueError, match=r"`X` contains infinite values") as infinite:
            simulate(np.array([[0.5, np.inf], [1.0, -np.inf]]))
        assert "SimpleImputer" not in str(infinite.value)
        assert "np.nan_to_num" in str(infinite.value) and "drop" in str(infinite.value)
        with pytest.raises(ValueError, match=r"`X` contains NaN and infinite .*np\.nan_to_num"):
            simulate(np.array([[np.nan, np.inf], [1.0, 2.0]]))
        with pytest.raises(ValueError, match=r"`X` contains NaN .*SimpleImputer"):
            simulate(np.array([[np.nan, 1.0], [1.0, 2.0]]))
        with pytest.raises(ValueError, match=r"`X` is None: pass the rows of features"):
            simulate(None)
        with pytest.raises(ValueError, match=r"`X` has no columns \(shape \(2, 0\)\)"):
            simulate(pd.DataFrame(index=[0, 1]))
        with pytest.raises(ValueError, match=r"`X` must be 2-D .*got shape \(2, 2, 2\)"):
            simulate(np.zeros((2, 2, 2)))
