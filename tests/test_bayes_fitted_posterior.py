"""A posterior fitted apart and handed to `LinearizedPredictive`, and the validation rows of
`LaplacePosterior.fit`: their columns, their later refits and their classes (review s60)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.neural_network import MLPClassifier, MLPRegressor

from uqconform.bayes import LaplacePosterior, LinearizedPredictive


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


@pytest.fixture(scope="module")
def framed():
    """A network trained on an array; its rows as a frame with columns of unequal scales."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 3)) * [1, 5, 0.2], columns=["a", "b", "c"])
    y = np.sin(X["a"]).to_numpy() + 0.2 * X["b"].to_numpy() + 0.2 * rng.normal(size=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        net = MLPRegressor(hidden_layer_sizes=(16,), max_iter=800, random_state=0)
        net.fit(X[:200].to_numpy(), y[:200])
    return net, X, y


def test_laplace_posterior_refuses_x_val_with_the_columns_of_x_reordered(framed):
    """Review finding: X_val's columns were read by position, never compared with X's: a
    frame (c, a, b) after X (a, b, c) moved the noise variance from 0.201 to 1.843 and the
    tuned prior from 10 to 100, without a word. Now refused, naming `X_val`."""
    net, X, y = framed
    Xv, yv = X[200:], y[200:]
    fitted = LaplacePosterior(net, random_state=0).fit(X[:200], y[:200], Xv, yv)
    with pytest.raises(
        ValueError, match=r"(?s)^`X_val` must have the columns of `X`, in its order: .*same order"
    ):
        LaplacePosterior(net, random_state=0).fit(X[:200], y[:200], Xv[["c", "a", "b"]], yv)
    with pytest.raises(ValueError, match=r"^`X_val` must have the columns of `X`"):  # other names
        LaplacePosterior(net, random_state=0).fit(
            X[:200], y[:200], Xv.rename(columns={"c": "d"}), yv
        )
    # integer column labels (pd.DataFrame(array)), which scikit-learn does not record
    numbered = pd.DataFrame(X.to_numpy())
    with pytest.raises(ValueError, match=r"^`X_val` has the column labels \[2, 0, 1\]"):
        LaplacePosterior(net, random_state=0).fit(
            numbered[:200], y[:200], numbered[200:][[2, 0, 1]], yv
        )
    # the columns in the order of X: the posterior of arrays
    plain = LaplacePosterior(net, random_state=0).fit(
        X[:200].to_numpy(), y[:200], Xv.to_numpy(), yv
    )
    assert fitted.noise_variance_ == plain.noise_variance_
    assert fitted.prior_precision_ == plain.prior_precision_


def test_messages_about_x_val_name_it(framed):
    """Diff review: the errors and warnings about `X_val` said `X` ("`X_val`: `X` contains
    NaN", scikit-learn's "X does not have valid feature names" for an array `X_val`)."""
    net, X, y = framed
    Xv = X[200:].to_numpy(copy=True)
    with pytest.warns(UserWarning, match=r"^`X_val` does not have valid feature names") as told:
        LaplacePosterior(net, random_state=0).fit(X[:200], y[:200], Xv, y[200:])
    named = [w for w in told if str(w.message).startswith("`X_val`")]
    assert [w.filename for w in named] == [__file__]  # the user's line (diff review 39)
    Xv[0, 1] = np.nan
    with pytest.raises(ValueError, match=r"^`X_val` contains NaN, which a network"):
        LaplacePosterior(net, random_state=0).fit(X[:200], y[:200], Xv, y[200:])


def test_a_fitted_posterior_must_know_the_columns_the_predictive_is_fitted_on(framed):
    """Review finding: LinearizedPredictive(net, posterior=post) never compared the fitted
    posterior's feature_names_in_ with its own frame: a posterior built on (a, b, c) and a
    predictive fitted and used on (c, a, b) frames predicted means 4.7 away. Now refused,
    naming the posterior."""
    net, X, y = framed
    post = LaplacePosterior(net, random_state=0).fit(X[:200], y[:200], X[200:], y[200:])
    with pytest.raises(ValueError, match=r"`posterior` was fitted on the columns \['a', 'b'"):
        LinearizedPredictive(net, posterior=post, random_state=0).fit(
            X[200:][["c", "a", "b"]], y[200:]
        )
    model = LinearizedPredictive(net, posterior=post, random_state=0).fit(X[200:], y[200:])
    assert model.posterior_ is post
    # nothing to compare when either side has no names (arrays)
    LinearizedPredictive(net, posterior=post, random_state=0).fit(X[200:].to_numpy(), y[200:])
    unnamed = LaplacePosterior(net, random_state=0).fit(
        X[:200].to_numpy(), y[:200], X[200:].to_numpy(), y[200:]
    )
    LinearizedPredictive(net, posterior=unnamed, random_state=0).fit(X[200:], y[200:])
    # integer labels: the same labels in another order are refused; a renumbered frame of
    # the same columns (other labels) is read by position, as check_features reads it
    ints = X.set_axis([1, 3, 5], axis=1)
    post = LaplacePosterior(net, random_state=0).fit(ints[:200], y[:200], ints[200:], y[200:])
    with pytest.raises(ValueError, match=r"`posterior` was fitted on the columns \[1, 3, 5\]"):
        LinearizedPredictive(net, posterior=post, random_state=0).fit(
            ints[200:][[5, 1, 3]], y[200:]
        )
    renumbered = ints[200:].set_axis([0, 1, 2], axis=1)
    with pytest.warns(UserWarning, match=r"not those of the posterior's fit \(\[1, 3, 5\]\)"):
        LinearizedPredictive(net, posterior=post, random_state=0).fit(renumbered, y[200:])
    # labels that cannot be ordered (timestamps beside integers) are compared as sets
    stamps = [0, pd.Timestamp("2020-01-01"), pd.Timestamp("2021-01-01")]
    post = LaplacePosterior(net, random_state=0).fit(
        X[:200].set_axis(stamps, axis=1), y[:200], X[200:].set_axis(stamps, axis=1), y[200:]
    )
    with pytest.raises(ValueError, match=r"`posterior` was fitted on the columns"):
        LinearizedPredictive(net, posterior=post, random_state=0).fit(
            X[200:].set_axis(stamps[::-1], axis=1), y[200:]
        )


def _refit_setup():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=600)
    net = MLPRegressor(hidden_layer_sizes=(16,), max_iter=800, random_state=0)
    net.fit(X[:300], y[:300])
    post = LaplacePosterior(net, prior_precision=1.0).fit(X[:300], y[:300], X[300:450], y[300:450])
    model = LinearizedPredictive(net, posterior=post, random_state=0).fit(X[300:450], y[300:450])
    return X, y, post, model


def test_a_given_posterior_refitted_in_place_is_refused():
    """Review finding: a fitted posterior given to the predictive and refitted in place with
    the same settings on other rows moved predict_std from 0.353 to 0.528 (its scale_ tuned
    for the old posterior), silently. Now each prediction refuses, as for the network."""
    X, y, post, model = _refit_setup()
    before = model.predict_std(X[450:])
    post.fit(X[:300], y[:300], X[300:450], y[300:450])  # the same rows: the same posterior
    np.testing.assert_array_equal(model.predict_std(X[450:]), before)
    post.fit(X[:60], y[:60], X[300:450], y[300:450])
    calls = {
        "predict": lambda: model.predict(X[450:]),
        "predict_distribution": lambda: model.predict_distribution(X[450:], "glm"),
        "predict_std": lambda: model.predict_std(X[450:]),
        "predict_interval": lambda: model.predict_interval(X[450:]),
        "log_predictive": lambda: model.log_predictive(X[450:], y[450:], "mc"),
        "score": lambda: model.score(X[450:], y[450:]),
    }
    for method, call in calls.items():
        with pytest.raises(
            NotFittedError, match=rf"{method}: the fitted posterior \(`posterior`\) changed "
        ):
            call()
    model.fit(X[300:450], y[300:450])  # fit again: tuned for the refitted posterior
    assert not np.array_equal(model.predict_std(X[450:]), before)


def test_a_predictive_pickled_without_the_posterior_digest_still_predicts():
    """A predictive pickled by a build that recorded no digest of its posterior is not
    checked (nothing to compare with); a pickled copy keeps its digest."""
    X, _y, _post, model = _refit_setup()
    copied = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(copied.predict_std(X[450:]), model.predict_std(X[450:]))
    state = model.__getstate__()
    assert "_posterior_digest" in state
    del state["_posterior_digest"]
    older = LinearizedPredictive.__new__(LinearizedPredictive)
    older.__setstate__(state)
    np.testing.assert_array_equal(older.predict_std(X[450:]), model.predict_std(X[450:]))


def test_a_prefit_classifier_tunes_on_rows_of_one_class_with_a_warning():
    """Review finding: a prefit binary network with a fitted posterior, tuned on held-out
    rows all of one class, was refused with "`y` has only one class; a classifier's
    predictive needs at least 2 classes", though the network has its 2 classes and the
    validation NLL is defined. The check now applies when fit trains the network; a
    prefit one gets a warning."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 1.2).astype(int)
    net = MLPClassifier(hidden_layer_sizes=(8,), max_iter=500, random_state=0)
    net.fit(X[:300], y[:300])
    post = LaplacePosterior(net, prior_precision=1.0).fit(X[:300], y[:300])
    negatives = np.flatnonzero(y[300:] == 0)[:30] + 300
    for posterior in (post, None):
        with pytest.warns(UserWarning, match=r"every row of `y` is of class 0"):
            model = LinearizedPredictive(net, posterior=posterior, random_state=0).fit(
                X[negatives], y[negatives]
            )
        proba = model.predict_proba(X[:5])
        assert proba.shape == (5, 2) and np.isfinite(model.scale_)
    # a network trained here still needs both classes
    with pytest.raises(ValueError, match=r"`y` has only one class"):
        LinearizedPredictive(
            MLPClassifier(hidden_layer_sizes=(8,), max_iter=50, random_state=0)
        ).fit(X[negatives], y[negatives])
