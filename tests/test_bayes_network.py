"""Moment formulas of uqconform.bayes.network against Monte Carlo and hand derivatives."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from uqconform.bayes.network import (
    Activation,
    Affine,
    Dense,
    DiagonalBlock,
    FullBlock,
    KroneckerBlock,
    LayerNorm,
    Network,
    relu_moments,
)

DRAWS = 100_000


def _random_spd(d, rng, scale=1.0):
    A = rng.normal(size=(d, d))
    return scale * (A @ A.T / d + 0.1 * np.eye(d))


def _mc_check(samples, mean, cov):
    """Sample mean / covariance against the formulas (tolerances from the MC error)."""
    n = samples.shape[0]
    emp_mean = samples.mean(axis=0)
    sd = np.sqrt(np.diagonal(cov) if cov.ndim == 2 else cov)
    np.testing.assert_array_less(np.abs(emp_mean - mean), 5 * sd / np.sqrt(n) + 1e-12)
    if cov.ndim == 1:
        # standard error of the sample variance from the sample's fourth moment
        centred = (samples - emp_mean) ** 2
        se = centred.std(axis=0) / np.sqrt(n)
        np.testing.assert_array_less(np.abs(samples.var(axis=0) - cov), 5 * se + 1e-12)
    else:
        emp = np.cov(samples, rowvar=False)
        scale = np.sqrt(np.outer(np.diagonal(cov), np.diagonal(cov)))
        np.testing.assert_array_less(np.abs(emp - cov) / scale, 0.03)


@pytest.fixture
def layer_case():
    rng = np.random.default_rng(0)
    n_in, n_out = 4, 3
    layer = Dense(rng.normal(size=(n_in, n_out)), rng.normal(size=n_out))
    mu = rng.normal(size=n_in)
    return rng, layer, mu


def test_dense_diagonal_block_matches_monte_carlo(layer_case):
    rng, layer, mu = layer_case
    v = rng.uniform(0.1, 0.5, size=mu.size)
    S = rng.uniform(0.01, 0.2, size=layer.weight.shape)
    s = rng.uniform(0.01, 0.2, size=layer.n_out)
    block = DiagonalBlock(S, s)
    a = mu + np.sqrt(v) * rng.standard_normal((DRAWS, mu.size))
    W = layer.weight + np.sqrt(S) * rng.standard_normal((DRAWS, *S.shape))
    b = layer.bias + np.sqrt(s) * rng.standard_normal((DRAWS, s.size))
    h = np.einsum("ni,nio->no", a, W) + b
    mean, var = layer.moments(mu[None], v[None], block)
    _mc_check(h, mean[0], var[0])
    # full input covariance: the same block with covariances between units
    C = _random_spd(mu.size, rng, 0.3)
    a = rng.multivariate_normal(mu, C, size=DRAWS)
    h = np.einsum("ni,nio->no", a, W) + b
    mean, cov = layer.moments(mu[None], C[None], block)
    _mc_check(h, mean[0], cov[0])


def test_dense_kronecker_block_matches_monte_carlo(layer_case):
    rng, layer, mu = layer_case
    A = _random_spd(layer.n_in + 1, rng, 0.1)
    B = _random_spd(layer.n_out, rng, 0.5)
    C = _random_spd(mu.size, rng, 0.3)
    a = rng.multivariate_normal(mu, C, size=DRAWS)
    E = rng.standard_normal((DRAWS, layer.n_in + 1, layer.n_out))
    Wt = (
        np.vstack([layer.weight, layer.bias]) + np.linalg.cholesky(A) @ E @ np.linalg.cholesky(B).T
    )
    h = np.einsum("ni,nio->no", np.hstack([a, np.ones((DRAWS, 1))]), Wt)
    block = KroneckerBlock(A, B)
    mean, cov = layer.moments(mu[None], C[None], block)
    _mc_check(h, mean[0], cov[0])
    # diagonal propagation gives the diagonal of the same moments for a diagonal input
    v = np.diagonal(C)
    _, var = layer.moments(mu[None], v[None], block)
    _, full = layer.moments(mu[None], np.diag(v)[None], block)
    np.testing.assert_allclose(var[0], np.diagonal(full[0]))


def test_dense_full_block_matches_monte_carlo(layer_case):
    rng, layer, mu = layer_case
    P = (layer.n_in + 1) * layer.n_out
    Sigma = _random_spd(P, rng, 0.05)
    C = _random_spd(mu.size, rng, 0.3)
    a = rng.multivariate_normal(mu, C, size=DRAWS)
    theta = rng.multivariate_normal(np.zeros(P), Sigma, size=DRAWS).reshape(
        DRAWS, layer.n_in + 1, layer.n_out
    )
    Wt = np.vstack([layer.weight, layer.bias]) + theta
    h = np.einsum("ni,nio->no", np.hstack([a, np.ones((DRAWS, 1))]), Wt)
    block = FullBlock(Sigma.reshape(layer.n_in + 1, layer.n_out, layer.n_in + 1, layer.n_out))
    mean, cov = layer.moments(mu[None], C[None], block)
    _mc_check(h, mean[0], cov[0])
    _, var = layer.moments(mu[None], np.diagonal(C)[None], block)
    _, full = layer.moments(mu[None], np.diag(np.diagonal(C))[None], block)
    np.testing.assert_allclose(var[0], np.diagonal(full[0]))


HAND = {
    "identity": (lambda z: z, lambda z: np.ones_like(z)),
    "relu": (lambda z: np.maximum(z, 0), lambda z: (z > 0) * 1.0),
    "tanh": (np.tanh, lambda z: 1 / np.cosh(z) ** 2),
    "logistic": (expit, lambda z: np.exp(-z) / (1 + np.exp(-z)) ** 2),
    "gelu": (lambda z: z * norm.cdf(z), lambda z: norm.cdf(z) + z * norm.pdf(z)),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_activation_linearisation_uses_hand_derivatives(name):
    z = np.array([[-2.0, -0.3, 0.4, 1.7]])
    v = np.array([[0.2, 0.1, 0.3, 0.05]])
    g, dg = HAND[name]
    mean, var = Activation(name).moments(z, v)
    np.testing.assert_allclose(mean, g(z), rtol=1e-12)
    np.testing.assert_allclose(var, dg(z) ** 2 * v, rtol=1e-10)
    # and the slope is the numerical derivative of the forward pass
    step = 1e-6
    layer = Activation(name)
    numeric = (layer.forward(z + step) - layer.forward(z - step)) / (2 * step)
    np.testing.assert_allclose(layer.value_and_slope(z)[1], numeric, rtol=1e-5, atol=1e-8)
    # full covariance: J C J
    C = np.diag(v[0])[None] + 0.01
    _, cov = Activation(name).moments(z, C)
    np.testing.assert_allclose(cov[0], np.outer(dg(z[0]), dg(z[0])) * C[0], rtol=1e-10)


def test_exact_relu_moments_match_monte_carlo():
    rng = np.random.default_rng(1)
    mu = np.array([-1.5, -0.2, 0.0, 0.7, 2.0])
    v = np.array([0.3, 1.0, 2.0, 0.5, 0.1])
    draws = np.maximum(mu + np.sqrt(v) * rng.standard_normal((DRAWS, mu.size)), 0)
    mean, var = relu_moments(mu, v)
    _mc_check(draws, mean, var)
    m2, v2 = Activation("relu").moments(mu[None], v[None], mode="exact_relu")
    np.testing.assert_allclose(m2[0], mean)
    np.testing.assert_allclose(v2[0], var)
    # zero variance: the deterministic value
    m0, v0 = relu_moments(np.array([-1.0, 2.0]), np.zeros(2))
    np.testing.assert_array_equal(m0, [0.0, 2.0])
    np.testing.assert_array_equal(v0, [0.0, 0.0])


def _relu_variance_mp(mean, var):
    """Var max(h, 0), h ~ N(mean, var), at 80 digits (the cancellation is exact there)."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(80):
        m, v = mpmath.mpf(float(mean)), mpmath.mpf(float(var))
        s = mpmath.sqrt(v)
        cdf, pdf = mpmath.ncdf(m / s), mpmath.npdf(m / s)
        first = m * cdf + s * pdf
        return (m**2 + v) * cdf + m * s * pdf - first**2


@pytest.mark.parametrize("sd", [1e-7, 1.0, 3.0])
def test_exact_relu_variance_matches_a_high_precision_oracle(sd):
    """Review finding: E[a^2] - E[a]^2 cancelled for strongly active units (z = mean / sd
    large): mean 100 and var 1e-13 gave variance 0, mean 1000 and var 1e-10 gave 1.16 times
    the true value. For z >= 0 a handful of roundings remain (bound 8 eps; measured <= 2 eps,
    against 3.6e-9 before at sd 1e-7); for -3 <= z < 0 the direct formula, whose leading
    terms cancel as about z^4 (measured 7e-14 relative at z = -3), below it a continued
    fraction (measured 7e-15 at z = -10, where the direct formula gave 3.9e-11): bound
    1e-12."""
    mpmath = pytest.importorskip("mpmath")
    z = np.r_[-np.geomspace(10, 1e-3, 40), 0.0, np.geomspace(1e-3, 1e4, 80)]
    mean, var = z * sd, np.full(z.size, sd**2)
    _, got = relu_moments(mean, var)
    exact = [_relu_variance_mp(m, v) for m, v in zip(mean, var, strict=True)]
    error = np.array([float(abs(mpmath.mpf(g) / e - 1)) for g, e in zip(got, exact, strict=True)])
    eps = np.finfo(float).eps
    assert np.all(error[z >= 0] <= 8 * eps)
    assert np.all(error[z < 0] <= 1e-12)
    # the reviewer's cases: a strongly active unit passes its input variance on
    for m, v in [(5.0, 1e-14), (100.0, 1e-13), (1e3, 1e-10)]:
        _, out = relu_moments(np.array([m]), np.array([v]))
        assert abs(out[0] / v - 1) <= 8 * eps


def test_exact_relu_moments_are_accurate_far_below_zero():
    """Review finding: for z = mean / sd far below 0 the variance's E[a^2] =
    var ((z^2 + 1) Phi(z) + z phi(z)) cancelled, its terms about z^4 / 2 times the result
    (the comment said no catastrophic cancellation): 2.3e-8 relative at z = -30, 1.1e-7 at
    z = -37 (the mean 5.1e-11 and 1.6e-10). Below z = -3 both come from a continued
    fraction now: measured 1.1e-13 at z = -37, where the error of Phi(z) itself dominates."""
    mpmath = pytest.importorskip("mpmath")
    z = -np.r_[np.linspace(3.0, 10.0, 15), np.linspace(11.0, 37.0, 27)]
    for sd in (1.0, 3.0):
        mean, var = relu_moments(z * sd, np.full(z.size, sd**2))
        with mpmath.workdps(80):
            for k, value in enumerate(z):
                t = mpmath.mpf(float(value))
                cdf, pdf = mpmath.ncdf(t), mpmath.npdf(t)
                first = t * cdf + pdf
                second = (t**2 + 1) * cdf + t * pdf - first**2
                assert float(abs(mpmath.mpf(mean[k]) / (sd * first) - 1)) <= 1e-12
                assert float(abs(mpmath.mpf(var[k]) / (sd**2 * second) - 1)) <= 1e-12
    # Phi(z) underflows below about z = -37.5: 0 there (and no warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, var = relu_moments(np.array([-40.0, -1e3]), np.ones(2))
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_array_equal(var, 0.0)


def test_exact_relu_moments_propagate_nan_and_take_minus_infinity():
    """Review finding: a NaN variance fails ``sqrt(var) > 0`` and was read as a zero
    variance, (mean 1, var NaN) giving (1, 0): a NaN from an earlier layer vanished (the
    predictives refuse NaN moments, naming the rows). And mean = -inf warned "invalid value
    encountered in multiply" (-inf times Phi = 0) and gave a NaN mean where max(h, 0) is 0."""
    mean = np.array([1.0, -1.0, np.nan, np.nan, np.nan, -np.inf, -np.inf, np.inf, 2.0])
    var = np.array([np.nan, np.nan, 1.0, 0.0, np.nan, 1.0, 0.0, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first, variance = relu_moments(mean, var)
    np.testing.assert_array_equal(first, [np.nan] * 5 + [0.0, 0.0, np.inf, 2.0])
    np.testing.assert_array_equal(variance, [np.nan] * 5 + [0.0, 0.0, 1.0, 0.0])
    # through a layer: the NaN reaches the outputs
    out_mean, out_var = Activation("relu").moments(
        mean[None, :2], var[None, :2], mode="exact_relu"
    )
    assert np.isnan(out_mean).all() and np.isnan(out_var).all()


@pytest.mark.parametrize("name", ["tanh", "logistic"])
def test_probit_style_moments_are_close_to_monte_carlo(name):
    """Probit-style tanh / logistic moments: an approximation (the probit fit of the
    logistic is off by up to ~0.01, doubled for tanh), closer to Monte Carlo than
    linearisation."""
    rng = np.random.default_rng(2)
    mu = np.array([-1.5, -0.2, 0.0, 0.7, 2.0])
    v = np.array([0.3, 1.0, 2.0, 0.5, 3.0])
    layer = Activation(name)
    draws = layer.forward(mu + np.sqrt(v) * rng.standard_normal((DRAWS, mu.size)))
    mean, var = layer.moments(mu[None], v[None], mode="matched")
    np.testing.assert_allclose(mean[0], draws.mean(axis=0), atol=0.03)
    np.testing.assert_allclose(var[0], draws.var(axis=0), rtol=0.15)
    lin_mean, lin_var = layer.moments(mu[None], v[None], mode="linearize")
    assert np.abs(mean - draws.mean(axis=0)).max() < np.abs(lin_mean - draws.mean(axis=0)).max()
    err_matched = np.abs(var[0] - draws.var(axis=0)).max()
    err_linear = np.abs(lin_var[0] - draws.var(axis=0)).max()
    assert err_matched < err_linear


def test_layernorm_and_affine_match_monte_carlo():
    rng = np.random.default_rng(3)
    mu = rng.normal(size=5)
    v = rng.uniform(0.05, 0.3, size=5)
    ln = LayerNorm(rng.normal(size=5), rng.normal(size=5), statistics="fixed")
    a = mu + np.sqrt(v) * rng.standard_normal((DRAWS, 5))
    # statistics fixed from the mean input, as the formula assumes
    centre, inv = mu.mean(), 1 / np.sqrt(mu.var() + ln.eps)
    out = (a - centre) * inv * ln.gamma + ln.beta
    mean, var = ln.moments(mu[None], v[None])
    _mc_check(out, mean[0], var[0])
    np.testing.assert_allclose(mean[0], ln.forward(mu[None])[0])
    # linearised statistics: exact in the small-variance limit, against MC with real LayerNorm
    small = 1e-6 * v
    tiny = mu + np.sqrt(small) * rng.standard_normal((DRAWS, 5))
    linear = LayerNorm(ln.gamma, ln.beta)
    _, var_lin = linear.moments(mu[None], small[None])
    np.testing.assert_allclose(var_lin[0], linear.forward(tiny).var(axis=0), rtol=0.03)
    C = np.diag(small) + 1e-7
    _, cov_lin = linear.moments(mu[None], C[None])
    tiny = rng.multivariate_normal(mu, C, size=DRAWS)
    np.testing.assert_allclose(
        cov_lin[0], np.cov(linear.forward(tiny), rowvar=False), atol=0.03 * np.abs(cov_lin).max()
    )
    # a random shift shared by every unit: the normalisation removes it, "fixed" keeps it
    shared = np.full((1, 5, 5), 1e-6)
    _, cov_fixed = ln.moments(mu[None], shared)
    _, cov_linear = linear.moments(mu[None], shared)
    np.testing.assert_allclose(np.diag(cov_fixed[0]), 1e-6 * (ln.gamma * inv) ** 2)
    np.testing.assert_allclose(cov_linear[0], 0.0, atol=1e-12)
    affine = Affine(rng.normal(size=5), rng.normal(size=5))
    mean, var = affine.moments(mu[None], v[None])
    _mc_check(affine.forward(a), mean[0], var[0])


def test_network_forward_samples_and_parameters_layout():
    rng = np.random.default_rng(4)
    net = Network(
        [
            Dense(rng.normal(size=(3, 4)), rng.normal(size=4)),
            Activation("tanh"),
            Dense(rng.normal(size=(4, 2)), rng.normal(size=2)),
        ],
        output="softmax",
    )
    X = rng.normal(size=(6, 3))
    theta = net.parameters()
    assert theta.size == net.n_parameters == 3 * 4 + 4 + 4 * 2 + 2
    np.testing.assert_allclose(net.forward_samples(X, theta[None])[0], net.forward(X))
    # zero posterior variance: moments are the deterministic pass with zero variance
    blocks = [DiagonalBlock(np.zeros((3, 4)), np.zeros(4)), None]
    mean, var = net.moments(X, blocks)
    np.testing.assert_allclose(mean, net.forward(X))
    np.testing.assert_array_equal(var, 0.0)


def test_bad_layers_and_activations_are_named():
    with pytest.raises(TypeError, match="softplus"):
        Activation("softplus")
    with pytest.raises(TypeError, match="str"):
        Network([Dense(np.eye(2), np.zeros(2)), "dropout"])
    with pytest.raises(ValueError, match="weight must be"):
        Dense(np.eye(2), np.zeros(3))
    with pytest.raises(ValueError, match="blocks"):
        Network([Dense(np.eye(2), np.zeros(2))]).moments(np.ones((1, 2)), [])


def test_exact_relu_with_full_covariance_stays_a_covariance():
    """Exact variances set into the linearised matrix made it indefinite: two copies of
    one pre-activation gave relu(h) - relu(h) a variance of -1.24."""
    relu = Activation("relu")
    _, var = relu_moments(np.array([0.1]), np.array([1.0]))
    _, cov = relu.moments(np.array([[0.1, 0.1]]), np.ones((1, 2, 2)), mode="exact_relu")
    np.testing.assert_allclose(cov[0], var[0] * np.ones((2, 2)), rtol=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(20):
        root = rng.normal(size=(5, 5))
        cov = (root @ root.T)[None]
        _, out = relu.moments(rng.normal(size=(1, 5)), cov, mode="exact_relu")
        assert np.linalg.eigvalsh(out[0]).min() >= -1e-12 * np.abs(out[0]).max()


def test_hand_built_blocks_and_networks_are_checked():
    # the docs tell users to build posterior blocks themselves: a negative variance used to
    # come out as a negative predictive variance, and widths that do not chain failed
    # inside numpy (or not at all until a forward pass)
    layer = Dense(np.ones((2, 1)), [0.0])
    x, zero = np.array([[1.0, 2.0]]), np.zeros((1, 2))
    bad_blocks = [
        (lambda: DiagonalBlock(np.full((2, 1), -0.1), np.array([0.05])), "negative variances"),
        (lambda: DiagonalBlock(np.full((2, 1), np.nan), np.array([0.05])), "NaN or infinite"),
        (lambda: DiagonalBlock(np.full((2, 1), 0.1), np.array([0.05, 0.1])), "`bias_var`"),
        (lambda: KroneckerBlock(-np.eye(3), np.eye(1)), "negative variances"),
        (lambda: KroneckerBlock(np.ones((3, 2)), np.eye(1)), "`input_cov` must be square"),
        (lambda: FullBlock(np.ones((3, 1, 2, 1))), "`cov` must have shape"),
    ]
    for build, message in bad_blocks:
        with pytest.raises(ValueError, match=message):
            build()
    other_layer = DiagonalBlock(np.full((3, 1), 0.1), np.array([0.05]))
    with pytest.raises(ValueError, match="does not fit Dense"):
        layer.moments(x, zero, other_layer)
    with pytest.raises(ValueError, match=r"layer 2 \(Dense\(5, 1\)\) takes 5 units"):
        Network(
            [Dense(np.ones((3, 2)), np.zeros(2)), Activation("relu"), Dense(np.ones((5, 1)), [0])]
        )
    with pytest.raises(ValueError, match="`eps` must be a finite number > 0"):
        LayerNorm(np.ones(2), np.zeros(2), eps=-1.0)
    with pytest.raises(ValueError, match="`gamma` and `beta`"):
        LayerNorm(np.ones(2), np.zeros(3))
    with pytest.raises(ValueError, match="`scale` and `shift`"):
        Affine(np.ones(2), np.zeros(3))
    net = Network(
        [
            Dense(np.ones((2, 3)), np.zeros(3)),
            Affine(np.ones(3), np.zeros(3)),
            Dense(np.ones((3, 1)), [0.0]),
        ]
    )
    for X in (np.ones(2), np.ones((4, 3))):
        with pytest.raises(ValueError, match=r"`X` must have shape \(n_samples, 2\)"):
            net.forward(X)
    good = DiagonalBlock(np.full((2, 1), 0.1), np.array([0.05]))
    np.testing.assert_allclose(layer.moments(x, zero, good)[1], [[0.55]])  # still as documented


_A = np.array([-1.0, 1.0])  # the augmented input [a, 1] at a = -1


@pytest.mark.parametrize(
    ("build", "n_out", "variance", "message"),
    [
        (
            lambda factor: KroneckerBlock(factor, np.eye(1)),
            1,
            lambda good: [_A @ good @ _A],
            r"`input_cov` must be a symmetric positive semi-definite matrix: its smallest "
            r"eigenvalue is -4\.0 \(its largest 6\.0\)",
        ),
        (
            lambda factor: KroneckerBlock(0.1 * np.eye(2), factor),
            2,
            lambda good: 0.2 * np.diagonal(good),
            r"`output_cov` must be a symmetric positive semi-definite matrix: its smallest "
            r"eigenvalue is -4\.0",
        ),
        (
            lambda factor: FullBlock(factor.reshape(2, 1, 2, 1)),
            1,
            lambda good: [_A @ good @ _A],
            r"`cov` \(read as a 2 x 2 matrix\) must be a symmetric positive semi-definite "
            r"matrix: its smallest eigenvalue is -4\.0",
        ),
    ],
    ids=["kronecker-input", "kronecker-output", "full"],
)
def test_indefinite_covariance_factors_are_refused(build, n_out, variance, message):
    """Review finding: KroneckerBlock and FullBlock checked only the diagonal of their
    covariances, so an indefinite factor ([[1, 5], [5, 1]], eigenvalues -4 and 6) was taken
    and a one-input Dense layer at a = -1 gave a predictive variance of -8.0 silently."""
    with pytest.raises(ValueError, match=message):
        build(np.array([[1.0, 5.0], [5.0, 1.0]]))
    # a positive semi-definite factor is still taken, also singular ones ([[1, 1], [1, 1]]:
    # eigenvalues 0 and 2; zero: fixed weights) and one indefinite only by rounding (-1e-15)
    net = Network([Dense(np.ones((1, n_out)), np.zeros(n_out))])
    rounding = np.ones((2, 2)) + np.array([[0.0, 1e-15], [1e-15, 0.0]])
    goods = (np.array([[2.0, 1.0], [1.0, 2.0]]), np.ones((2, 2)), np.zeros((2, 2)), rounding)
    for good in goods:
        _, var = net.moments(np.array([[-1.0]]), [build(good)])
        np.testing.assert_allclose(var, [variance(good)], atol=1e-13)


def test_non_symmetric_covariance_factors_are_refused():
    """Review finding: KroneckerBlock and FullBlock took a non-symmetric "covariance"
    ([[1, 5], [0, 1]]) and used it in quadratic forms as if it were one."""
    skew = np.array([[1.0, 5.0], [0.0, 1.0]])
    message = r"must be a symmetric positive semi-definite matrix: entries \[0, 1\] and \[1, 0\]"
    with pytest.raises(ValueError, match=r"`input_cov` " + message + r" differ \(5\.0 and 0\.0\)"):
        KroneckerBlock(skew, np.eye(1))
    with pytest.raises(ValueError, match=r"`output_cov` " + message):
        KroneckerBlock(np.eye(2), skew)
    with pytest.raises(ValueError, match=r"`cov` \(read as a 2 x 2 matrix\) " + message):
        FullBlock(skew.reshape(2, 1, 2, 1))
    # asymmetry at rounding level (a product of an eigendecomposition) is still taken
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    cov = (Q * rng.uniform(0.0, 1.0, size=6)) @ Q.T
    KroneckerBlock(cov[:3, :3], cov[3:, 3:])
    FullBlock(cov.reshape(3, 2, 3, 2))


def test_library_built_blocks_pass_the_covariance_checks():
    """Review finding: the symmetry and PSD checks of KroneckerBlock and FullBlock must not
    refuse the blocks the library builds from eigendecompositions, symmetric and PSD only up
    to rounding (here singular, eigenvalues down to -7e-10). A guard: passes on old code."""
    rng = np.random.default_rng(1)
    for size, low in ((5, 0.0), (40, 1e-12), (120, 0.0)):
        Q = np.linalg.qr(rng.normal(size=(size, size)))[0]
        values = np.concatenate([[low, 0.0], rng.uniform(1e-6, 1e6, size=size - 2)])
        cov = (Q * values) @ Q.T  # PSD, singular: rounding may give -1e-10 eigenvalues
        KroneckerBlock(cov, cov)
        FullBlock(cov.reshape(size, 1, size, 1))


def test_network_moments_options_are_checked():
    """Review finding: Network.moments took covariance="Full" (any value but "diag"
    propagated full covariances) and activation_moments="bogus" (linearised) silently."""
    net = Network(
        [Dense(np.ones((2, 3)), np.zeros(3)), Activation("relu"), Dense(np.ones((3, 1)), [0.0])]
    )
    blocks = [
        DiagonalBlock(np.full((2, 3), 0.1), np.full(3, 0.1)),
        DiagonalBlock(np.full((3, 1), 0.1), np.full(1, 0.1)),
    ]
    X = np.array([[1.0, 2.0]])
    with pytest.raises(
        ValueError, match=r"`covariance` must be one of \['diag', 'full'\], got 'Full'"
    ):
        net.moments(X, blocks, covariance="Full")
    with pytest.raises(
        ValueError,
        match=r"`activation_moments` must be one of \['linearize', 'exact_relu', 'matched'\], "
        r"got 'bogus'",
    ):
        net.moments(X, blocks, activation_moments="bogus")
    # every allowed value still works: with diagonal blocks the variances agree
    reference = net.moments(X, blocks)
    for covariance in ("diag", "full"):
        for mode in ("linearize", "exact_relu", "matched"):
            mean, var = net.moments(X, blocks, covariance=covariance, activation_moments=mode)
            assert np.isfinite(mean).all() and (var > 0).all()
    np.testing.assert_allclose(net.moments(X, blocks, covariance="full")[1], reference[1])


def test_non_finite_inputs_and_wrong_parameter_count_are_named():
    """Review finding: a NaN or infinite X reached Network.moments's overflow check ("inputs
    too large for float64"), a wrong diagnosis; forward_samples with the wrong number of
    parameters failed inside numpy ("cannot reshape array of size 10 into shape (2,3)")."""
    net = Network(
        [Dense(np.ones((2, 3)), np.zeros(3)), Activation("tanh"), Dense(np.ones((3, 1)), [0.0])]
    )
    blocks = [
        DiagonalBlock(np.full((2, 3), 0.1), np.full(3, 0.1)),
        DiagonalBlock(np.full((3, 1), 0.1), np.full(1, 0.1)),
    ]
    for bad in (np.nan, np.inf, -np.inf):
        X = np.array([[1.0, 2.0], [bad, 1.0]])
        message = r"`X` contains NaN or infinite values on 1 row \(first: row 1\)"
        with pytest.raises(ValueError, match=message) as error:
            net.moments(X, blocks)
        assert "overflowed" not in str(error.value)
        for call in (net.forward, lambda X: net.forward_samples(X, net.parameters()[None])):
            with pytest.raises(ValueError, match=message):
                call(X)
    message = r"`theta` must have shape \(n_draws, 13\): .* 13 parameters per row, got shape "
    with pytest.raises(ValueError, match=message + r"\(2, 5\)"):
        net.forward_samples(np.array([[1.0, 2.0]]), np.zeros((2, 5)))
    with pytest.raises(ValueError, match=message + r"\(13,\)"):
        net.forward_samples(np.array([[1.0, 2.0]]), net.parameters())
    # valid inputs still work
    X = np.array([[1.0, 2.0], [-1.0, 0.5]])
    theta = np.stack([net.parameters(), 2 * net.parameters()])
    out = net.forward_samples(X, theta)
    assert out.shape == (2, 2, 1)
    np.testing.assert_allclose(out[0], net.forward(X))
    mean, var = net.moments(X, blocks)
    np.testing.assert_allclose(mean, net.forward(X))
    assert (var > 0).all()


def test_transformer_layer_is_refused_by_kind_with_its_own_3d_input():
    """A TransformerEncoderLayer given its normal (n, seq, d) input gets the TypeError
    refusing that model kind, not a complaint about X's shape that reshaping would not cure
    (the kind was checked after X's shape before)."""
    torch = pytest.importorskip("torch")
    from uqconform.bayes import LaplacePosterior, LinearizedPredictive

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double()
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 5, 8)), rng.normal(size=20)
    for model in (LinearizedPredictive(layer), LaplacePosterior(layer)):
        for inputs in (X, X.reshape(20, -1)):
            with pytest.raises(TypeError, match="TransformerEncoderLayer has no Laplace"):
                model.fit(inputs, y)


def test_a_network_class_is_named_with_the_instance_to_pass():
    """API review (stop 57): LaplacePosterior(MLPRegressor) said "cannot build a network
    from ABCMeta"."""
    from sklearn.neural_network import MLPRegressor

    from uqconform.bayes import LaplacePosterior

    X, y = np.random.default_rng(0).normal(size=(20, 2)), np.arange(20.0)
    message = r"`estimator` is the class MLPRegressor: pass an instance, e.g. MLPRegressor\(\)"
    with pytest.raises(TypeError, match=message):
        LaplacePosterior(MLPRegressor).fit(X, y)
    with pytest.raises(TypeError, match=message):
        LaplacePosterior.from_variance(MLPRegressor, np.ones(3))
