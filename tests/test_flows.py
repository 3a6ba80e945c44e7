"""Normalizing flows of `uqconform.multioutput.flows`: training, the latent map, pickling.

Every flow here is tiny (one or two layers, a few hidden units, a few epochs): the properties
tested (bijection, Jacobian, reproducibility, the standardisation folded into the map) hold
for any trained flow, good or bad.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("nflows")

from uqconform.multioutput.flows import FlowMap, fit_flow, require_flows  # noqa: E402
from uqconform.regions import AffineMap, PredictionRegion  # noqa: E402

TINY = {"n_blocks": 2, "hidden_features": 8, "max_epochs": 4, "batch_size": 64}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def curved(n=300, seed=0, scale=(1.0, 50.0), shift=(3.0, -200.0)):
    """y | x on a parabola, outputs on very different scales (tests the standardisation)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    Y = np.c_[X[:, 0] + 0.3 * rng.normal(size=n), X[:, 0] ** 2 + 0.1 * rng.normal(size=n)]
    return X, Y * np.asarray(scale) + np.asarray(shift)


@pytest.fixture(scope="module")
def flows():
    X, Y = curved()
    return {
        (kind, conditional): fit_flow(
            Y, X if conditional else None, kind=kind, random_state=0, **TINY
        )
        for kind in ("maf", "spline")
        for conditional in (True, False)
    }


def _map(flow, X, rows=5, offset=None):
    return FlowMap(flow, X=X[:rows] if flow.conditional else None, offset=offset, n_rows=rows)


@pytest.mark.parametrize("kind", ["maf", "spline"])
@pytest.mark.parametrize("conditional", [True, False])
def test_latent_map_is_a_bijection(flows, kind, conditional):
    X, Y = curved()
    latent = _map(flows[kind, conditional], X, offset=np.full((5, 2), 2.0))
    Z = np.random.default_rng(1).normal(size=(5, 3, 2))
    outputs = latent.from_latent(Z)
    assert outputs.shape == (5, 3, 2) and outputs.dtype == np.float64
    for j in range(3):
        np.testing.assert_allclose(latent.to_latent(outputs[:, j]), Z[:, j], atol=2e-4)
    codes = latent.to_latent(Y[:5])
    np.testing.assert_allclose(latent.from_latent(codes[:, None])[:, 0], Y[:5], rtol=1e-4)


@pytest.mark.parametrize("kind", ["maf", "spline"])
def test_log_det_is_the_jacobian_of_the_inverse_in_original_units(flows, kind):
    """Central differences of from_latent (y in original units, scales 1 and 50)."""
    X, _ = curved()
    latent = _map(flows[kind, True], X, rows=4)
    Z = np.random.default_rng(2).normal(size=(4, 1, 2))
    h = 1e-2
    jacobian = np.empty((4, 2, 2))
    for j in range(2):
        step = np.zeros(2)
        step[j] = h
        jacobian[:, :, j] = (latent.from_latent(Z + step) - latent.from_latent(Z - step))[:, 0] / (
            2 * h
        )
    expected = np.log(np.abs(np.linalg.det(jacobian)))
    np.testing.assert_allclose(latent.log_abs_det_from_latent(Z)[:, 0], expected, atol=5e-3)


def test_log_prob_is_base_density_minus_log_det(flows):
    X, Y = curved()
    flow = flows["maf", True]
    Z = flow.to_latent(Y[:6], X[:6])
    _, log_det = flow.from_latent(Z[:, None], X[:6], log_det=True)
    base = -0.5 * (Z**2).sum(axis=1) - np.log(2 * np.pi)
    np.testing.assert_allclose(flow.log_prob(Y[:6], X[:6]), base - log_det[:, 0], atol=1e-3)


def test_points_of_the_wrong_shape_are_refused_by_name(flows):
    """One row as a 1-D array was broadcast into d identical rows."""
    X, Y = curved()
    for flow in (flows["maf", False], flows["spline", True]):
        context = X[:1] if flow.conditional else None
        for call in (flow.to_latent, flow.log_prob):
            with pytest.raises(ValueError, match=r"`Y` must have shape \(n, 2\), got \(2,\)"):
                call(Y[0], context)
            with pytest.raises(ValueError, match=r"`Y` must have shape \(n, 2\), got \(1, 3\)"):
                call(np.ones((1, 3)), context)


def test_regions_of_the_whole_space_and_empty_selections(flows):
    """Every radius infinite (too few calibration points), or no row selected: boxes of
    +-inf, NaN boundaries, empty regions (a review found them refused for no rows)."""
    X, _ = curved()
    flow = flows["maf", True]
    whole = PredictionRegion(_map(flow, X), np.inf)
    assert np.isinf(whole.bounding_box(16)).all()
    assert np.isnan(whole.boundary(8)).all()
    part = PredictionRegion(_map(flow, X), 1.0)
    assert len(part[np.array([], dtype=int)]) == 0 and len(part[np.zeros(5, bool)]) == 0
    with pytest.raises(ValueError, match="`n_rows` must be >= 0"):
        FlowMap(flow, n_rows=-2)


def test_same_seed_same_flow_and_caller_rng_untouched():
    X, Y = curved()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = fit_flow(Y, X, random_state=7, **TINY)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's generator is restored
    second = fit_flow(Y, X, random_state=np.int64(7), **TINY)
    other = fit_flow(Y, X, random_state=8, **TINY)
    np.testing.assert_array_equal(first.to_latent(Y, X), second.to_latent(Y, X))
    assert first.history == second.history
    assert not np.allclose(first.to_latent(Y, X), other.to_latent(Y, X))


def test_pickle_round_trip_gives_identical_outputs(flows):
    X, Y = curved()
    Z = np.random.default_rng(3).normal(size=(5, 4, 2))
    for flow in flows.values():
        loaded = pickle.loads(pickle.dumps(flow))
        before, after = _map(flow, X), _map(loaded, X)
        np.testing.assert_array_equal(after.to_latent(Y[:5]), before.to_latent(Y[:5]))
        np.testing.assert_array_equal(after.from_latent(Z), before.from_latent(Z))
        np.testing.assert_array_equal(
            after.log_abs_det_from_latent(Z), before.log_abs_det_from_latent(Z)
        )
        assert loaded.history == flow.history


def test_monte_carlo_volume_matches_the_exact_volume_of_an_affine_flow():
    """A MAF whose autoregressive outputs ignore y is a diagonal affine map: its Monte Carlo
    volume (Jacobian identity, y scaling included) equals the exact volume of the AffineMap
    read off its images of 0 and the unit vectors."""
    X, Y = curved()
    flow = fit_flow(Y, X, random_state=0, **TINY)
    with torch.no_grad():
        for name, value in flow.module.named_parameters():
            if name.endswith("final_layer.weight"):
                value.zero_()
    latent = _map(flow, X, rows=3)
    centre = latent.from_latent(np.zeros((3, 1, 2)))[:, 0]
    columns = latent.from_latent(np.eye(2)[None].repeat(3, axis=0)) - centre[:, None]
    exact_map = AffineMap(centre, np.transpose(columns, (0, 2, 1)))
    flow_region = PredictionRegion(latent, 1.7)
    exact = PredictionRegion(exact_map, 1.7).volume()
    volume, std = flow_region.volume(n_samples=200, random_state=0, return_std=True)
    np.testing.assert_allclose(volume, exact, rtol=1e-4)
    np.testing.assert_allclose(std, 0.0, atol=1e-4 * exact.max())
    assert not np.allclose(exact, np.pi * 1.7**2, rtol=0.1)  # scales 1 x 50 do matter


def test_boundary_points_sit_at_the_radius(flows):
    X, _ = curved()
    region = PredictionRegion(_map(flows["spline", True], X, rows=4), 1.3)
    boundary = region.boundary(n_points=16)
    for j in range(16):
        norms = np.linalg.norm(region.latent(boundary[:, j]), axis=1)
        np.testing.assert_allclose(norms, 1.3, rtol=1e-4)
    inside = region.latent_map.from_latent(0.98 * region.latent(boundary[:, 0])[:, None])
    outside = region.latent_map.from_latent(1.02 * region.latent(boundary[:, 0])[:, None])
    assert region.contains(inside[:, 0]).all()
    assert not region.contains(outside[:, 0]).any()


def test_take_selects_rows(flows):
    X, Y = curved()
    latent = _map(flows["maf", True], X, rows=6, offset=np.arange(12.0).reshape(6, 2))
    full = latent.to_latent(Y[:6])
    mask = np.array([True, False, True, False, False, True])
    np.testing.assert_array_equal(latent.take(mask).to_latent(Y[:6][mask]), full[mask])
    np.testing.assert_array_equal(latent.take(slice(1, 3)).to_latent(Y[1:3]), full[1:3])
    assert latent.take(4).n_rows == 1
    with pytest.raises(ValueError, match="Y"):
        latent.to_latent(Y[:5])
    with pytest.raises(ValueError, match="Z"):
        latent.from_latent(np.zeros((6, 2)))


def test_unconditional_flow_is_translation_invariant(flows):
    X, _ = curved()
    shifts = np.array([[0.0, 0.0], [5.0, -3.0]])
    latent = FlowMap(flows["maf", False], offset=shifts)
    assert latent.translation_invariant and not _map(flows["maf", True], X).translation_invariant
    Z = np.random.default_rng(4).normal(size=(1, 3, 2)).repeat(2, axis=0)
    out = latent.from_latent(Z)
    np.testing.assert_allclose(out[1] - out[0], np.tile(shifts[1] - shifts[0], (3, 1)), atol=1e-5)
    log_det = latent.log_abs_det_from_latent(Z)
    np.testing.assert_array_equal(log_det[0], log_det[1])


def test_inputs_are_not_modified():
    X, Y = curved()
    X0, Y0 = X.copy(), Y.copy()
    flow = fit_flow(Y, X, random_state=0, **TINY)
    flow.to_latent(Y, X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)


def test_divergence_is_a_clear_error():
    X, Y = curved()
    with pytest.raises(RuntimeError, match=r"diverged.*smaller learning_rate"):
        fit_flow(Y, X, learning_rate=1e6, random_state=0, **TINY)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "glow"}, "`flow` must be one of"),
        ({"n_blocks": 0}, "`n_blocks`"),
        ({"hidden_features": 2.5}, "`hidden_features`"),
        ({"max_epochs": True}, "`max_epochs`"),
        ({"batch_size": -1}, "`batch_size`"),
        ({"learning_rate": 0.0}, "`learning_rate`"),
        ({"patience": 0}, "`patience`"),
        ({"validation_fraction": 1.0}, "`validation_fraction`"),
        # the architecture's own: a torch error, a negative dimension, silent truncation
        ({"kind": "spline", "tail_bound": -1.0}, "`tail_bound`"),
        ({"kind": "spline", "num_bins": 0}, "`num_bins`"),
        ({"kind": "spline", "num_bins": 2.5}, "`num_bins`"),
        ({"n_hidden_blocks": -1}, "`n_hidden_blocks`"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, message):
    X, Y = curved(n=20)
    with pytest.raises(ValueError, match=message):
        fit_flow(Y, X, **kwargs)


@pytest.mark.parametrize("kind", ["maf", "spline"])
def test_no_hidden_blocks_is_a_plain_masked_network(kind):
    X, Y = curved(n=60)
    flow = fit_flow(Y, X, kind=kind, n_hidden_blocks=0, random_state=0, **TINY)
    assert flow.to_latent(Y[:3], X[:3]).shape == (3, 2)


def test_bad_data():
    X, Y = curved(n=20)
    with pytest.raises(ValueError, match="`X`"):
        fit_flow(Y[:5], X[:4])
    Y[3, 1] = np.nan
    with pytest.raises(ValueError, match="`Y`"):
        fit_flow(Y, X)


def test_missing_torch_names_the_flows_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r'pip install "uqconform\[flows\]"'):
        require_flows()
    X, Y = curved(n=20)
    with pytest.raises(ImportError, match=r"uqconform\[flows\]"):
        fit_flow(Y, X)


def test_importing_uqconform_does_not_import_torch():
    code = (
        "import sys, uqconform, uqconform.multioutput.flows, uqconform.multioutput.contra; "
        "assert 'torch' not in sys.modules and 'nflows' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("kind", ["maf", "spline"])
def test_the_flow_starts_as_the_gaussian_fit_of_y(kind):
    """Every layer starts as the identity on whitened outputs: the untrained map is
    ``chol^{-1} (y - mean)``, with ``log|det| = log det chol`` (the ellipsoid's shape)."""
    X, Y = curved()
    flow = fit_flow(Y, X, kind=kind, learning_rate=1e-12, random_state=0, **TINY)
    mean = Y.mean(axis=0)
    chol = np.linalg.cholesky(np.cov(Y.T, bias=True))
    expected = np.linalg.solve(chol, (Y - mean).T).T
    np.testing.assert_allclose(flow.to_latent(Y, X), expected, atol=1e-4)
    _, log_det = flow.from_latent(expected[:4, None], X[:4], log_det=True)
    np.testing.assert_allclose(log_det, np.log(np.diag(chol)).sum(), rtol=1e-5)


def test_a_flow_replaces_its_gaussian_start_only_when_clearly_better():
    from uqconform.multioutput.flows import _clearly_better

    class Stored:
        def __init__(self, values):
            self.values = torch.as_tensor(values)

        def log_prob(self, y, context=None):
            return self.values

    gain = np.random.default_rng(0).normal(0.05, 1.0, size=20_000)
    start = torch.zeros(20_000, dtype=torch.float64)
    assert _clearly_better(Stored(gain), start, None, None)  # s.e. 0.007 < 0.05
    assert not _clearly_better(Stored(gain[:20]), start[:20], None, None)  # s.e. 0.2
    assert not _clearly_better(Stored(-np.abs(gain)), start, None, None)
