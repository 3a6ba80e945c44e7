"""Scaling shortcuts of the multi-output regions give the same numbers as the plain code.

* Translation-invariant maps (ResidualCONTRA with an unconditional flow): bounding boxes and
  boundaries are computed once per distinct radius and shifted to every row; they must equal
  the general path, which pushes the latent sphere through the map of every row.
* Local ellipsoids: the neighbour covariances are computed in row blocks; tiny blocks (with a
  last partial block) must equal one block.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import uqconform.multioutput.baselines as baselines
from uqconform.multioutput import EllipsoidalConformalRegressor
from uqconform.regions import PredictionRegion

# ---- translation-invariant maps ------------------------------------------------------------


class Bent:
    """``y = c_i + A rho(z)`` with ``rho(z) = z (1 + |z|^2)``: one curved shape translated
    to every row (float64 throughout, so shortcut and general path agree to rounding). No
    ``offset``: the shortcut takes the translations from ``g_i^{-1}(0)``."""

    is_affine = False
    translation_invariant = True

    def __init__(self, translations):
        self.translations = np.asarray(translations, dtype=float)
        self.n_rows, self.dim = self.translations.shape
        self.matrix = np.eye(self.dim) + 0.5 * np.eye(self.dim, k=1)

    def _shape(self, Z):
        Z = np.asarray(Z, dtype=float)
        return (Z * (1 + (Z**2).sum(axis=-1, keepdims=True))) @ self.matrix.T

    def from_latent(self, Z):
        return self.translations[:, None, :] + self._shape(Z)

    def to_latent(self, Y):  # not needed by boxes and boundaries
        raise NotImplementedError

    def log_abs_det_from_latent(self, Z):
        return np.zeros(np.shape(Z)[:2])

    def take(self, index):
        return type(self)(self.translations[np.atleast_1d(np.arange(self.n_rows)[index])])


class BentWithOffset(Bent):
    """The same map giving its translations as ``offset`` (as `FlowMap` does)."""

    @property
    def offset(self):
        return self.translations


def general_path(monkeypatch, region, method, *args):
    """``region.method(*args)`` with the translation shortcut turned off."""
    with monkeypatch.context() as patch:
        patch.setattr(PredictionRegion, "_translates", lambda self: None)
        return getattr(region, method)(*args)


RADII = {
    "scalar": 1.3,
    "zero": 0.0,
    "infinite": np.inf,
    "per row": np.array([1.0, 2.0, 1.0, np.inf, 0.0, 2.0, 1.0, np.inf, 3.0]),
}


@pytest.mark.parametrize("cls", [Bent, BentWithOffset])
@pytest.mark.parametrize("norm", ["l2", "linf"])
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("radius", list(RADII), ids=list(RADII))
def test_shortcut_box_equals_the_general_path(monkeypatch, cls, norm, d, radius):
    translations = np.random.default_rng(d).normal(scale=10, size=(9, d))
    region = PredictionRegion(cls(translations), RADII[radius], norm)
    assert region._translates() is not None
    box = region.bounding_box(64)
    expected = general_path(monkeypatch, region, "bounding_box", 64)
    np.testing.assert_array_equal(np.isinf(box), np.isinf(expected))
    np.testing.assert_allclose(box, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", [Bent, BentWithOffset])
@pytest.mark.parametrize("norm", ["l2", "linf"])
@pytest.mark.parametrize("radius", list(RADII), ids=list(RADII))
def test_shortcut_boundary_equals_the_general_path(monkeypatch, cls, norm, radius):
    translations = np.random.default_rng(0).normal(scale=10, size=(9, 2))
    region = PredictionRegion(cls(translations), RADII[radius], norm)
    curve = region.boundary(13)
    expected = general_path(monkeypatch, region, "boundary", 13)
    np.testing.assert_array_equal(np.isnan(curve), np.isnan(expected))
    np.testing.assert_allclose(curve, expected, rtol=0, atol=1e-12)


def test_shortcut_pushes_one_row_per_distinct_radius(monkeypatch):
    pushed = []
    original = PredictionRegion._push

    def spy(self, Z, *args, **kwargs):
        pushed.append(len(self))
        return original(self, Z, *args, **kwargs)

    monkeypatch.setattr(PredictionRegion, "_push", spy)
    translations = np.random.default_rng(0).normal(size=(9, 2))
    PredictionRegion(BentWithOffset(translations), RADII["per row"]).bounding_box()
    PredictionRegion(Bent(translations), 1.0).boundary()
    # one row per finite radius 0, 1, 2, 3 (the sampled circle, then the arcs refining the
    # 2-D extremes); then one shared radius
    assert pushed == [4, 4, 1]


def test_volume_of_translates_is_estimated_once_per_distinct_radius(monkeypatch):
    """Mondrian groups give one radius per group: rows of a radius share one estimate
    (each row had its own Monte Carlo: 400x slower and volumes spread by 7%)."""
    rows = []
    original = Bent.log_abs_det_from_latent

    def spy(self, Z):
        rows.append(Z.shape[0])
        return original(self, Z)

    monkeypatch.setattr(Bent, "log_abs_det_from_latent", spy)
    translations = np.random.default_rng(0).normal(size=(9, 2))
    radii = RADII["per row"]
    volume = PredictionRegion(Bent(translations), radii).volume(n_samples=200)
    assert sum(rows) == 3  # the finite positive radii 1, 2 and 3, one row each
    for r in np.unique(radii):
        assert np.unique(volume[radii == r]).size == 1
    assert volume[radii == 0].tolist() == [0.0] and np.isinf(volume[radii == np.inf]).all()
    assert volume[radii == 1.0][0] < volume[radii == 2.0][0] < volume[radii == 3.0][0]


def test_no_shortcut_when_it_would_not_be_exact_or_save_anything():
    translations = np.random.default_rng(0).normal(size=(4, 2))
    assert PredictionRegion(Bent(translations[:1]), 1.0)._translates() is None  # one row
    assert PredictionRegion(Bent(translations), np.arange(1.0, 5.0))._translates() is None
    varying = Bent(translations)
    varying.translation_invariant = False  # e.g. a conditional flow
    assert PredictionRegion(varying, 1.0)._translates() is None
    overflow = Bent(translations)
    overflow.translations = translations.copy()
    overflow.translations[2, 0] = np.inf
    assert PredictionRegion(overflow, 1.0)._translates() is None


def test_several_levels_and_groups_with_a_residual_flow(monkeypatch):
    """ResidualCONTRA (unconditional flow): shortcut on, the same boxes and boundaries;
    the conditional flow never takes it. Float32 flows: agreement to float32 rounding."""
    pytest.importorskip("torch")
    pytest.importorskip("nflows")
    from uqconform.multioutput import ResidualCONTRA

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(500, 2))
    t = rng.normal(size=500)
    Y = np.c_[t + X[:, 1], t**2 + 0.5 * X[:, 0]] + 0.1 * rng.normal(size=(500, 2))
    tiny = {"n_blocks": 1, "hidden_features": 8, "max_epochs": 2, "batch_size": 64}
    groups = np.r_[np.zeros(100, int), np.ones(95, int), np.full(5, 2)]  # group 2: whole space
    for conditional in (False, True):
        model = ResidualCONTRA(Ridge(), conditional=conditional, random_state=0, **tiny)
        model.fit(X[:200], Y[:200])
        with pytest.warns(UserWarning, match="Too few calibration points"):
            model.calibrate(X[200:400], Y[200:400], groups=groups)
        with pytest.warns(UserWarning, match="Too few calibration points"):
            regions = model.predict_set(X[400:], alpha=[0.1, 0.3], groups=np.arange(100) % 3)
        for region in regions:
            assert (region._translates() is None) == conditional
            for method, arg in (("bounding_box", 256), ("boundary", 16)):
                fast = getattr(region, method)(arg)
                slow = general_path(monkeypatch, region, method, arg)
                np.testing.assert_array_equal(np.isfinite(fast), np.isfinite(slow))
                np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-5)


# ---- local ellipsoids in row blocks --------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_local_ellipsoid_blocks_equal_one_block(monkeypatch, d):
    rng = np.random.default_rng(d)
    X = rng.normal(size=(260, 3))
    Y = X[:, :1] * (1 + np.abs(X[:, 1:2])) + rng.normal(size=(260, d))
    model = EllipsoidalConformalRegressor(
        Ridge(), covariance="local", n_neighbors=10, random_state=0
    ).fit(X[:120], Y[:120])
    X_new = X[120:140]  # 20 rows: blocks of 3 leave a last block of 2
    one_block = model._local_cholesky(X_new)
    scores = model.calibrate(X[140:], Y[140:]).conformity_scores_.copy()
    box = model.predict_interval(X_new)
    monkeypatch.setattr(baselines, "_LOCAL_CELLS", 3 * 10 * d)
    np.testing.assert_allclose(model._local_cholesky(X_new), one_block, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        model.calibrate(X[140:], Y[140:]).conformity_scores_, scores, rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(model.predict_interval(X_new), box, rtol=0, atol=1e-12)
    monkeypatch.setattr(baselines, "_LOCAL_CELLS", 1)  # fewer cells than one row: row by row
    np.testing.assert_allclose(model._local_cholesky(X_new), one_block, rtol=0, atol=1e-12)
