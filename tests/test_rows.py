"""The identity of rows by value (`uqconform._rows`), which seeds and warnings depend on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from uqconform._rows import _float_rows_hashes, rows_digest


@pytest.mark.parametrize("shape", [(1, 2), (16, 30), (0, 3), (300, 7)])
def test_float_rows_hash_as_pandas_hashes_their_frame(shape):
    """The fast path for float rows gives pandas' row hashes of the same DataFrame, so the
    digests (and the seeds drawn from them) are those of the general path; -0.0 is read
    as 0.0 and every NaN alike, on any pandas version."""
    rows = np.random.default_rng(0).normal(size=shape)
    if rows.size:
        rows[0, 0], rows.flat[-1] = 0.0, np.nan
    expected = pd.util.hash_pandas_object(pd.DataFrame(rows), index=False).to_numpy()
    np.testing.assert_array_equal(_float_rows_hashes(rows), expected)
    if rows.size:
        signed = rows.copy()
        signed[0, 0] = -0.0
        signed.flat[-1] = -np.float64("nan")
        np.testing.assert_array_equal(_float_rows_hashes(signed), expected)
        assert not np.array_equal(_float_rows_hashes(signed + 1), expected)


def test_rows_digest_reads_values_whatever_the_container():
    values = np.random.default_rng(1).integers(-5, 6, size=(40, 3)).astype(float)
    digest = rows_digest(values)
    frame = pd.DataFrame(values, columns=["a", "b", "c"], index=np.arange(40) + 7)
    for same in (np.asfortranarray(values), frame, frame.astype("Int64"), values.tolist(),
                 values.astype(object), values.astype(np.float32)):  # fmt: skip
        assert rows_digest(same) == digest
    changed = values.copy()
    changed[39, 2] += 1
    assert rows_digest(changed) != digest
    assert rows_digest(values[::-1]) != digest
    assert rows_digest(values.reshape(20, 6)) != digest  # the shape is part of the rows


def test_texts_and_mixed_tables_hash_alike_in_every_container():
    """Pandas review: one text per row gave three digests (a list and a str array, an
    object array, a Series), so the same TF-IDF pipeline with one seed got other
    randomised sets (41 of 150 rows) and missed the training-rows warning; a mixed table
    and its `.to_numpy()` differed too."""
    texts = ["a cat", "a dog", "two cats", "a cat"]
    digest = rows_digest(texts)
    for same in (np.array(texts), np.array(texts, dtype=object), pd.Series(texts),
                 pd.Series(texts, index=[9, 3, 5, 1]), pd.DataFrame({"text": texts}),
                 [[text] for text in texts]):  # fmt: skip
        assert rows_digest(same) == digest
    assert rows_digest(texts[::-1]) != digest
    table = pd.DataFrame({"n": [1, 2, 3, 4], "x": [0.5, 1.5, 2.5, 3.5], "t": texts})
    digest = rows_digest(table)
    for same in (table.to_numpy(), table.to_numpy().tolist(), table.astype({"n": float})):
        assert rows_digest(same) == digest
    assert rows_digest(table.assign(x=table["x"] + 1)) != digest


def test_a_signalling_nan_hashes_as_nan_quietly():
    """diffrev13: adding 0.0 to a signalling NaN raised numpy's "invalid value" warning
    (a FloatingPointError under np.errstate(invalid="raise"))."""
    signalling = np.array([[np.uint64(0x7FF4000000000000).view(np.float64), 1.0]])
    with np.errstate(invalid="raise"):
        hashes = _float_rows_hashes(signalling)
    np.testing.assert_array_equal(hashes, _float_rows_hashes(np.array([[np.nan, 1.0]])))


# ---- row weights and columns of X as the wrappers outside `ConformalPredictor.fit` read them


def _weighted_wrappers():
    """Wrappers and public models whose ``fit`` pairs ``sample_weight`` with ``X``: a
    factory and the target kind (regression, classes or two outputs)."""
    from sklearn.linear_model import LogisticRegression, QuantileRegressor, Ridge

    from uqconform import (
        KOWCPI,
        SPCI,
        EllipsoidalConformalRegressor,
        EnbPI,
        MultiDimScoreClassifier,
        RectangularConformalRegressor,
        ReliablePredictionSets,
        ResidualCONTRA,
    )
    from uqconform.classification import HeadEnsemble
    from uqconform.regression import QuantileBand

    return {
        "ReliablePredictionSets": (
            lambda: ReliablePredictionSets(LogisticRegression(), k_train=3, random_state=0),
            "classes",
        ),
        "HeadEnsemble": (lambda: HeadEnsemble(LogisticRegression(), 3, random_state=0), "classes"),
        "MultiDimScoreClassifier": (
            lambda: MultiDimScoreClassifier(LogisticRegression(), n_heads=3, random_state=0),
            "classes",
        ),
        "EllipsoidalConformalRegressor": (
            lambda: EllipsoidalConformalRegressor(Ridge(), random_state=0),
            "outputs",
        ),
        "RectangularConformalRegressor": (
            lambda: RectangularConformalRegressor(Ridge(), random_state=0),
            "outputs",
        ),
        "ResidualCONTRA": (
            lambda: ResidualCONTRA(Ridge(), max_epochs=1, random_state=0),
            "outputs",
        ),
        "EnbPI": (lambda: EnbPI(Ridge(), n_bootstrap=10, random_state=0), "values"),
        "SPCI": (lambda: SPCI(Ridge(), n_bootstrap=10, window=20, random_state=0), "values"),
        "KOWCPI": (lambda: KOWCPI(Ridge(), n_bootstrap=10, window=1, random_state=0), "values"),
        "QuantileBand": (
            lambda: QuantileBand(
                QuantileRegressor(quantile=0.1, alpha=0), QuantileRegressor(quantile=0.9, alpha=0)
            ),
            "values",
        ),
    }


def _labelled_rows(n: int = 120) -> tuple[pd.DataFrame, dict[str, object]]:
    """Rows labelled 1000, 1001, ... and a target of each kind with the same labels."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=list("abc"), index=np.arange(n) + 1000)
    values = pd.Series(X @ [1.0, -2.0, 0.5] + rng.normal(size=n), index=X.index)
    targets = {
        "values": values,
        "classes": pd.Series((X.a + rng.normal(size=n) > 0).astype(int), index=X.index),
        "outputs": pd.DataFrame({"y1": values, "y2": X.b + rng.normal(size=n)}),
    }
    return X, targets


@pytest.mark.parametrize("name", sorted(_weighted_wrappers()))
def test_a_weight_series_in_another_row_order_is_refused(name):
    """pandas review s58: a ``sample_weight`` Series holding ``X``'s row labels in another
    order was paired by position (each row trained with another row's weight) by these
    wrappers, refused by the split and cross ones; a Series in ``X``'s order is taken."""
    factory, kind = _weighted_wrappers()[name]
    X, targets = _labelled_rows()
    weight = pd.Series(np.random.default_rng(1).uniform(0.1, 3, len(X)) ** 3, index=X.index)
    with pytest.raises(ValueError, match="`sample_weight` is indexed by the row labels of `X`"):
        factory().fit(X, targets[kind], sample_weight=weight.sample(frac=1, random_state=1))
    if name != "ResidualCONTRA":  # (a flow's training: slow, and nothing to check here)
        factory().fit(X, targets[kind], sample_weight=weight)  # X's order: taken


@pytest.mark.parametrize("name", sorted(_weighted_wrappers()))
def test_a_weight_one_entry_short_is_named_by_the_library(name):
    """pandas review s58: Ellipsoidal, Rectangular and QuantileBand let the model refuse
    it in scikit-learn's words ("sample_weight.shape == (119,), expected (120,)!")."""
    factory, kind = _weighted_wrappers()[name]
    X, targets = _labelled_rows()
    with pytest.raises(ValueError, match=r"`sample_weight` has 119 entries but X has 120 rows"):
        factory().fit(X, targets[kind], sample_weight=np.ones(119))


@pytest.mark.parametrize("kind", ["str", "category"])
@pytest.mark.parametrize(
    "name", sorted(set(_weighted_wrappers()) - {"QuantileBand", "ResidualCONTRA"})
)
def test_a_text_column_in_X_is_named_with_its_remedy(name, kind):
    """pandas review s58: numpy's bare "could not convert string to float: 'Oslo'" came out
    of the model fits of these wrappers; the others name X, the column, its kind and the
    encoding (`refuse_non_numeric_features`)."""
    factory, target = _weighted_wrappers()[name]
    X, targets = _labelled_rows()
    cities = np.array(["Oslo", "Rome"])[np.random.default_rng(2).integers(0, 2, len(X))]
    X["city"] = pd.Series(cities, index=X.index).astype(kind)
    shown = "text" if kind == "str" else "categories"
    message = rf"`X` has columns that are not numbers, .*: 'city' \({shown}\)\. .*OneHotEncoder"
    with pytest.raises(ValueError, match=message):
        factory().fit(X, targets[target])


def test_a_text_column_encoded_by_a_pipeline_reaches_the_model():
    """The refusal reads only a model's failure: a Pipeline that encodes the column fits."""
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from uqconform import EllipsoidalConformalRegressor, EnbPI, ReliablePredictionSets
    from uqconform.classification import HeadEnsemble

    X, targets = _labelled_rows()
    X["city"] = np.array(["Oslo", "Rome"])[np.random.default_rng(2).integers(0, 2, len(X))]

    def encoded(model):
        columns = make_column_transformer((OneHotEncoder(), ["city"]), remainder="passthrough")
        return make_pipeline(columns, model)

    ReliablePredictionSets(encoded(LogisticRegression()), k_train=3).fit(X, targets["classes"])
    HeadEnsemble(encoded(LogisticRegression()), 3, random_state=0).fit(X, targets["classes"])
    EllipsoidalConformalRegressor(encoded(Ridge())).fit(X, targets["outputs"])
    EnbPI(encoded(Ridge()), n_bootstrap=10, random_state=0).fit(X, targets["values"])


def test_a_column_of_number_categories_hashes_as_its_numbers():
    """Review s65: a category column of numbers kept its int64 values (hashed otherwise
    than float64), so randomised sets differed on 113 of 300 rows from the same numbers
    held as int; categories of text are hashed as their text, as before."""
    import pandas as pd

    from uqconform._rows import rows_digest

    numbers = pd.DataFrame({"x": [0.5, 1.5, 2.5], "zone": [11, 22, 33]})
    as_category = numbers.astype({"zone": "category"})
    assert rows_digest(as_category) == rows_digest(numbers) == rows_digest(numbers.to_numpy())
    text = pd.DataFrame({"x": [0.5, 1.5], "zone": ["a", "b"]})
    assert rows_digest(text.astype({"zone": "category"})) == rows_digest(text)


def test_a_series_of_number_categories_hashes_as_its_numbers():
    """Diff review 55: a one-column frame of categories was fixed, a Series was not."""
    numbers = pd.Series([11, 22, 33])
    assert rows_digest(numbers.astype("category")) == rows_digest(numbers)
