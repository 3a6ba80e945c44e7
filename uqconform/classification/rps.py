"""Reliable prediction sets (RPS): conformal sets certified against data poisoning.

An adversary may insert, delete or relabel up to ``r_train`` training points and up to
``r_calib`` calibration points, with labels from a label set that stays the same (the
``classes`` parameter, or else the training labels: a poisoned point with a label no other
training row has, or the loss of a label's last row, changes the sets' labels, and with
``"vote_softmax"`` every row's scores, which is not covered). RPS makes each of those
points touch one small piece of the pipeline, then takes majority votes, so that the effect
of a few poisoned points is bounded and can be certified per test row:

1. **Partitions.** Every row goes to a partition by a keyed hash of its feature bytes
   (`hash_partition`), never of its label or position: a label flip never moves a point,
   an insertion or deletion touches one partition.
2. **Training.** One clone of the estimator per training partition, fitted on the
   partition's rows in a canonical order with a seed fixed by the partition index, so equal
   contents give an equal model. The smoothed score of a label is the softmax of the vote
   shares of the ``k_train`` models (``"vote_softmax"``) or the share itself (``"vote"``):
   a poisoned point changes one model, hence one vote.
3. **Calibration.** Each of ``k_calib`` calibration partitions gives its own conformal
   threshold and set; a label enters the final set when more than ``tau`` partition sets
   hold it, ``tau`` the binomial majority threshold (`majority_threshold`). A poisoned
   calibration point changes one partition's set.

``coverage="paper"`` uses the published per-partition rank, one below the textbook rank,
which by the coverage formula falls below ``1 - alpha`` for most partition sizes with 10
or more partitions (the default), most with the smallest (0.85 with 10 partitions of 9
points at alpha 0.1), never with 1 to 3 and often with 4 to 7 (at alpha 0.1, sizes 9 to
1,000: 66%, 88%, 26% and 75% of the sizes for 4, 5, 6 and 7 partitions, down to 0.87);
``coverage="exact"`` (ours) gives each partition the largest rank, computed from its own
size, for which the majority set covers at least ``1 - alpha`` when all partitions have
that size, by the distribution-free formula of `majority_coverage`.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd
from joblib import delayed
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_array, check_is_fitted

from uqconform._parallel import run_fits
from uqconform._rows import (
    check_sample_weight_rows,
    fit_params_rows,
    float_values,
    n_rows,
)
from uqconform._seeding import integer_seed, seed_parameters
from uqconform._validation import (
    CLONED_LIST_HINT,
    _unfitted_as_by_a_clone,
    check_class_labels,
    check_features,
    check_fitted_model,
    check_frozen_is_fitted,
    check_int,
    check_model_methods,
    check_n_jobs,
    check_row_order,
    check_verbose,
    check_weights_row_order,
    check_wrapper_fitted,
    class_probabilities,
    label_type_hint,
    labels_text,
    missing_proba_error,
    reading_features,
    refuse_model_class,
    refuse_sparse_columns,
    sklearn_tags,
    value_summary,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    adoption_lead,
    check_calibration_settings,
    check_nan_accepted,
    check_not_retrained,
    keeps_a_frozen_model,
    keeps_state_on_error,
    naming_refused_groups,
    record_calibration_settings,
    refuses_nan,
    remember_calibration_rows,
    remember_training_rows,
)
from uqconform.classification.split import encode_labels
from uqconform.quantiles import (
    _sentence_end,
    check_alpha,
    check_call_alpha,
    check_miscoverage,
    check_single_alpha,
    conformal_quantile,
    conformal_rank,
    minimum_scores,
)
from uqconform.routing import RoutesFitParams

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "ReliablePredictionSets",
    "hash_partition",
    "majority_coverage",
    "majority_coverage_bounds",
    "majority_threshold",
    "minimum_partition_size",
    "partition_rank",
]

SCORES = ("vote_softmax", "vote")
COVERAGE = ("exact", "paper")
_CDF_TOLERANCE = 1e-12  # BinomCDF(0; 1, 0.95) is 0.05000000000000004 in floating point
_QUADRATURE_NODES, _QUADRATURE_WEIGHTS = np.polynomial.legendre.leggauss(48)
_BLOCK_SIZE = 1 << 19  # entries of one (rows, targets, labels) block of `_target_bounds`


# ---- partitions ------------------------------------------------------------------------------
_SALT_BYTES = 64  # the longest key of BLAKE2b


def _salt_key(salt: Any) -> bytes:
    """The hash key of ``salt``: bytes as given, a str in UTF-8, an int little-endian and
    signed in 16 bytes (from ``-2**127`` to ``2**127 - 1``), or in as many as it needs
    beyond, up to 64 (a key of another length, so no collision with a 16-byte one)."""
    if isinstance(salt, bytes):
        key = salt
    elif isinstance(salt, str):
        key = salt.encode("utf-8")
    elif isinstance(salt, numbers.Integral) and not isinstance(salt, bool):
        value = int(salt)
        size = max(16, ((value if value >= 0 else ~value).bit_length() + 8) // 8)  # + sign
        if size > _SALT_BYTES:
            raise ValueError(
                f"`salt` must encode to at most {_SALT_BYTES} bytes: an integer salt must lie "
                f"from -2**511 to 2**511 - 1, got one of {value.bit_length()} bits; use a "
                "smaller one (e.g. secrets.randbits(256)), or bytes or a str of up to "
                f"{_SALT_BYTES} bytes."
            )
        key = value.to_bytes(size, "little", signed=True)
    else:
        raise TypeError(f"`salt` must be an int, a str or bytes, got {salt!r}.")
    if len(key) > 64:
        raise ValueError(f"`salt` must encode to at most {_SALT_BYTES} bytes, got {len(key)}.")
    return key


def _row_bytes(X: Any) -> list[bytes] | NDArray:
    """One byte string (or fixed-width byte row) per row: the identity of the row's features.

    Numeric data are hashed as float64 (so ``3`` and ``3.0`` agree), with ``-0.0`` mapped to
    ``0.0`` and every NaN to one NaN; rows holding other values through the ``repr`` of the
    row's values, each number among them as its float64 (see `_mixed_row_bytes`).
    """
    numeric = float_values(X) if isinstance(X, pd.DataFrame) else None  # by column dtypes
    if numeric is None:
        values = X.to_numpy() if hasattr(X, "to_numpy") else X
        if hasattr(values, "toarray"):
            values = values.toarray()
        array = np.asarray(values)
        if array.ndim not in (1, 2):
            raise ValueError(
                f"`X` must be a 2-D array of rows (or 1-D: one feature), got {array.ndim} "
                "dimensions."
            )
        if array.ndim == 1:
            array = array.reshape(-1, 1)
        numeric = float_values(array)  # any numeric dtype, nullable or object numbers alike
        if numeric is None:
            return _mixed_row_bytes(array)
    return _float_row_bytes(numeric)


def _float_row_bytes(numeric: NDArray) -> NDArray:
    """Rows of numbers as fixed-width bytes of float64, ``-0.0`` as ``0.0``, one NaN."""
    numeric = np.ascontiguousarray(numeric, dtype=np.float64) + 0.0  # -0.0 -> 0.0
    numeric[np.isnan(numeric)] = np.nan
    return numeric.view(np.dtype((np.void, numeric.dtype.itemsize * numeric.shape[1])))[:, 0]


def _cell_value(value: Any) -> Any:
    """A number (booleans and Decimals too) as its float64, ``-0.0`` as ``0.0``; a missing
    value (None, NaN, ``pd.NA``, ``NaT``) as NaN; any other value as given (text, a date,
    a complex number, an integer beyond float64)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return np.nan
    if isinstance(value, (numbers.Real, Decimal, np.bool_)):
        try:
            return float(value) + 0.0
        except (OverflowError, ValueError):  # beyond float64, a signalling NaN
            return value
    return value


def _mixed_row_bytes(array: NDArray) -> list[bytes]:
    """Rows of a table that holds values other than numbers, each encoded on its own
    values: a row of numbers (or missing values) gets the bytes it gets in a table of
    numbers, any other row the ``repr`` of its values with every number as its float64.
    So a row's bytes never depend on the other rows: a text, boolean or Decimal cell
    inserted elsewhere (which makes a DataFrame's column one of objects) must not move them
    to other partitions (the certificates count an insertion as touching one partition),
    and a DataFrame and its ``.to_numpy()`` agree."""
    cells = np.frompyfunc(_cell_value, 1, 1)(array.astype(object))
    numbers_only = np.frompyfunc(lambda value: isinstance(value, float), 1, 1)(cells)
    numbers_only = numbers_only.astype(bool).all(axis=1)
    rows: list[bytes] = [
        b"" if plain else repr(tuple(row)).encode("utf-8")
        for plain, row in zip(numbers_only.tolist(), cells.tolist(), strict=True)
    ]  # a loop over rows: the repr of each (the numbers' rows are filled below)
    if numbers_only.any():
        block = cells[numbers_only].astype(np.float64)
        for index, row in zip(np.flatnonzero(numbers_only), _float_row_bytes(block), strict=True):
            rows[index] = bytes(row)
    return rows


def row_digests(X: Any, salt: Any = 0) -> NDArray:
    """Keyed 128-bit BLAKE2b digest of every row's features, as ``(n, 2)`` uint64.

    Independent of the row order and of the labels. One ``hashlib`` call per row (the
    library has no batch interface); the byte view of the rows is built once, vectorised.
    """
    key = _salt_key(salt)
    rows = _row_bytes(X)
    digests = b"".join(
        hashlib.blake2b(bytes(row), digest_size=16, key=key, person=b"uqconform-rps").digest()
        for row in rows  # a loop over rows: hashlib hashes one message at a time
    )
    return np.frombuffer(digests, dtype="<u8").reshape(-1, 2)


def hash_partition(X: Any, n_partitions: int, salt: Any = 0) -> NDArray:
    """Partition index of every row: a keyed hash of the row's features modulo ``n_partitions``.

    The index depends on the row's feature values and the salt only: not on the label, not
    on the other rows or their order. Equal rows share a partition.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
    n_partitions : int
    salt : int, str or bytes, default=0
        Key of the BLAKE2b hash; a different salt gives an unrelated partition. An int
        from ``-2**511`` to ``2**511 - 1`` (e.g. ``secrets.randbits(256)``), a str or bytes
        of up to 64 bytes.

    Returns
    -------
    ndarray of int of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(12.0).reshape(6, 2)
    >>> part = hash_partition(X, 3)
    >>> bool((part == hash_partition(X[::-1], 3)[::-1]).all())
    True
    >>> bool((hash_partition(X.astype(int), 3) == part).all())
    True
    """
    check_int(n_partitions, "n_partitions")
    return _partition_of(row_digests(X, salt)[:, 0], n_partitions)


def _partition_of(digests: NDArray, n_partitions: int) -> NDArray:
    """Partition index from the first 64 bits of each row's digest."""
    return (digests % np.uint64(n_partitions)).astype(np.intp)


# Below this many effective distinct calibration rows per partition, repeated rows (which
# share a partition) make the partitions far from random samples: warn.
_REPEATS_PER_PARTITION = 5


# ---- majority threshold, ranks and coverage ---------------------------------------------------
def _one_level(alpha: Any) -> float:
    """``alpha`` checked as one miscoverage level (these functions take no sequence)."""
    return check_single_alpha(alpha, hint=" Call once per level.")


def _whole_numbers(values: ArrayLike, name: str) -> NDArray:
    """``values`` as int64, refused unless every entry is a finite whole number."""
    try:
        entries = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be whole numbers, got {value_summary(values)}.") from None
    if not np.isfinite(entries).all() or (entries % 1 != 0).any():
        raise ValueError(f"`{name}` must be whole numbers, got {np.asarray(values)!r:.80}.")
    return entries.astype(np.int64)


def majority_threshold(k_calib: int, alpha: float) -> int:
    """The binomial majority threshold ``tau``: the largest ``t`` in ``0..k`` with
    ``BinomCDF(t; k, 1 - alpha) <= alpha``; a label needs more than ``tau`` votes.

    Parameters
    ----------
    k_calib : int
        Number ``k`` of calibration partitions (voters), at least 1.
    alpha : float
        One miscoverage level in (0, 1).

    Returns
    -------
    int
        ``tau``, between 0 and ``k_calib - 1``.

    Raises
    ------
    ValueError
        If ``k_calib`` is not a positive integer or ``alpha`` not one level in (0, 1).

    Examples
    --------
    >>> [majority_threshold(k, 0.1) for k in (2, 5, 10, 22, 40)]
    [0, 3, 7, 17, 33]
    >>> majority_threshold(1, 0.05)  # exactly alpha, despite floating point
    0
    """
    k = check_int(k_calib, "k_calib")
    level = _one_level(alpha)
    cdf = stats.binom.cdf(np.arange(k + 1), k, 1 - level)
    return int(np.flatnonzero(cdf <= level * (1 + _CDF_TOLERANCE) + _CDF_TOLERANCE).max())


def _inclusion_probability(u: NDArray, n: int, rank: int) -> NDArray:
    """``P(Bin(n, u) >= rank)``: a test score at quantile ``u`` clears the ``rank``-th smallest
    of ``n`` calibration scores."""
    if rank <= 0:
        return np.ones_like(u)
    return special.betainc(rank, n - rank + 1, u)


def _votes_above(u: NDArray, sizes: NDArray, ranks: NDArray, threshold: int) -> NDArray:
    """``P(more than threshold partitions keep a test score at quantile u)`` at every ``u``:
    the Poisson-binomial tail of the votes, built one partition at a time."""
    law = np.zeros((sizes.size + 1, u.size))  # law[v]: P(v votes) at every u
    law[0] = 1.0
    for i, (n, r) in enumerate(zip(sizes, ranks, strict=True)):  # a loop over partitions
        g = _inclusion_probability(u, int(n), int(r))
        h = 1 - g
        # after i partitions only the rows 0..i are nonzero: rows 1..i + 1 take
        # law[v] * h + law[v - 1] * g, in place, in contiguous rows
        moved = law[: i + 1] * g
        law[1 : i + 2] *= h
        law[1 : i + 2] += moved
        law[0] *= h
    # summed along contiguous rows of the votes, in the order of a sum over axis 1
    return np.ascontiguousarray(law[threshold + 1 :].T).sum(axis=1)


def _support(sizes: NDArray, ranks: NDArray) -> tuple[float, float]:
    """Where the votes' law changes: from the first active partition's rise to the last's
    (``_transition``); ranks must hold at least one active (positive) rank."""
    spans = np.array([_transition(int(n), int(r)) for n, r in zip(sizes, ranks, strict=True)])
    active = ranks > 0
    return float(spans[active, 0].min()), float(spans[active, 1].max())


def _transition(n: int, rank: int) -> tuple[float, float]:
    """Where ``P(Bin(n, u) >= rank)`` rises from 0 to 1 (to 1e-13)."""
    if rank <= 0:
        return 0.0, 0.0
    # not a frozen `stats.beta(...)`: building one took most of this function's time
    a, b = rank, n - rank + 1
    return float(stats.beta.ppf(1e-13, a, b)), float(stats.beta.isf(1e-13, a, b))


def _nodes(low: float, high: float, panels: int) -> tuple[NDArray, NDArray]:
    """Composite Gauss-Legendre nodes and weights on ``[low, high]``."""
    edges = np.linspace(low, high, panels + 1)
    half = np.diff(edges)[:, None] / 2
    centre = (edges[:-1, None] + edges[1:, None]) / 2
    nodes = centre + half * _QUADRATURE_NODES[None, :]
    weights = half * _QUADRATURE_WEIGHTS[None, :]
    return nodes.ravel(), weights.ravel()


def majority_coverage(sizes: ArrayLike, ranks: ArrayLike, threshold: int) -> float:
    """Probability that the majority set holds the true label, for continuous scores.

    Partition ``i`` has ``sizes[i]`` calibration points and keeps a label whose score is at
    least its ``ranks[i]``-th smallest calibration score (rank 0: every label). With the test
    score at quantile ``u`` of the score law, partition ``i`` votes for the true label with
    probability ``g_i(u) = P(Bin(n_i, u) >= r_i)``, independently given ``u``; the coverage
    is ``int_0^1 P(sum_i Bernoulli(g_i(u)) > threshold) du``, whatever the score law.

    Parameters
    ----------
    sizes, ranks : array-like of int of shape (k_calib,)
    threshold : int
        The label needs more than ``threshold`` votes.

    Returns
    -------
    float

    Examples
    --------
    >>> round(majority_coverage([100] * 10, [9] * 10, 7), 3)  # the published rule
    0.894
    """
    sizes = _whole_numbers(sizes, "sizes")
    ranks = _whole_numbers(ranks, "ranks")
    if sizes.ndim != 1 or ranks.shape != sizes.shape:
        raise ValueError(
            f"`sizes` and `ranks` must be 1-D with one entry per partition, got shapes "
            f"{sizes.shape} and {ranks.shape}."
        )
    if (ranks < 0).any() or (ranks > sizes).any():
        raise ValueError(
            f"`ranks` must lie between 0 and the partition's size, got ranks {ranks.tolist()} "
            f"for sizes {sizes.tolist()}."
        )
    threshold = check_int(threshold, "threshold", low=0)
    if threshold >= sizes.size:  # more votes than partitions: no label can enter
        return 0.0
    active = ranks > 0
    if not active.any():
        return 1.0 if threshold < sizes.size else 0.0
    low, high = _support(sizes, ranks)
    u, w = _nodes(low, high, 8 * max(1, int(active.sum())))
    inside = float(w @ _votes_above(u, sizes, ranks, threshold))
    # Below `low` every active partition rejects, above `high` every one accepts.
    below = low * float(int((~active).sum()) > threshold)
    return float(below + inside + (1.0 - high))


def _covered_count_pmf(
    sizes: NDArray, ranks: NDArray, threshold: int, n_test: int, nodes: int
) -> NDArray:
    """Law of the number of ``n_test`` rows the majority set covers, for one calibration.

    In the quantile scale ``u`` of the score law, partition ``i`` keeps the true label when
    ``u >= U_i``, ``U_i ~ Beta(r_i, n_i - r_i + 1)`` its rank-th smallest uniform (0 at rank
    0), independently; the majority keeps it when ``u >= V``, the ``threshold + 1``-th
    smallest ``U_i``. Given the calibration the coverage is ``1 - V``: the count is
    ``Binomial(n_test, 1 - V)`` mixed over ``V``'s law, taken on ``nodes`` cells of its
    support (``P(V <= v)``: the votes' tail `_votes_above`, as in `majority_coverage`).
    """
    if threshold >= sizes.size:  # more votes than partitions: no label can enter
        return np.eye(n_test + 1)[0]
    if not (ranks > 0).any():  # every partition keeps every label
        return np.eye(n_test + 1)[-1]
    edges = np.concatenate([[0.0], np.linspace(*_support(sizes, ranks), nodes)])
    cdf = np.append(_votes_above(edges, sizes, ranks, threshold), 1.0)  # P(V <= v); V <= 1
    edges = np.append(edges, 1.0)
    mass = np.clip(np.diff(cdf), 0.0, None)
    middle = (edges[:-1] + edges[1:]) / 2
    pmf = _binomial_mixture(mass, 1.0 - middle, n_test)
    pmf[-1] += cdf[0]  # V = 0: more than `threshold` partitions keep every label
    return pmf / pmf.sum()


def _binomial_mixture(mass: NDArray, success: NDArray, n_test: int) -> NDArray:
    """``sum_j mass[j] * Binomial(n_test, success[j]).pmf`` on ``0..n_test``, the pmfs in
    log space (scipy's ``binom.pmf`` took 90% of the time at 4000 test rows), cells without
    mass skipped, and at most about 4e6 values held at once."""
    from uqconform.evaluation.bounds import log_choose

    keep = mass > 0
    mass, success = mass[keep], success[keep]
    counts = np.arange(n_test + 1, dtype=float)
    log_coefficients = log_choose(n_test, counts)
    pmf = np.zeros(n_test + 1)
    step = max(1, 4_000_000 // (n_test + 1))
    for start in range(0, mass.size, step):  # a loop over blocks of cells
        p = success[start : start + step, None]
        log_pmf = (
            log_coefficients + special.xlogy(counts, p) + special.xlog1py(n_test - counts, -p)
        )
        pmf += mass[start : start + step] @ np.exp(log_pmf)
    return pmf


def majority_coverage_bounds(
    sizes: ArrayLike,
    ranks: ArrayLike,
    threshold: int,
    n_test: int,
    confidence: float = 0.99,
    nodes: int = 2048,
) -> tuple[float, float]:
    """Interval that the observed coverage of the majority set falls in, for continuous
    scores: the RPS counterpart of `uqconform.evaluation.coverage_bounds`.

    Each calibration gives a coverage ``1 - V`` (``V`` the miscoverage of its partition
    thresholds, whose mean is ``1 - majority_coverage``); a test set of ``n_test`` rows
    covers a mixed-binomial number of them, and independent resplits add up. With tied
    (vote) scores coverage is only larger: the lower end stays a valid test.

    Parameters
    ----------
    sizes, ranks : array-like of int of shape (k_calib,) or (n_repeats, k_calib)
        Partition sizes and threshold ranks of one calibration, or of each resplit
        pooled (each row its own calibration).
    threshold : int
        The label needs more than ``threshold`` votes.
    n_test : int
        Test rows per resplit.
    confidence : float, default=0.99
        Probability that a valid method's pooled coverage lands inside the interval.
    nodes : int, default=2048
        Cells on which the law of ``V`` is taken.

    Returns
    -------
    (lower, upper) : tuple of float

    Examples
    --------
    >>> low, high = majority_coverage_bounds([60] * 10, [5] * 10, 7, 500)
    >>> bool(low < majority_coverage([60] * 10, [5] * 10, 7) < high)
    True
    """
    from uqconform.evaluation.bounds import central_share_interval, check_confidence

    check_confidence(confidence)
    n_test = check_int(n_test, "n_test")
    nodes = check_int(nodes, "nodes", low=16)
    size_rows = np.atleast_2d(_whole_numbers(sizes, "sizes"))
    rank_rows = np.atleast_2d(_whole_numbers(ranks, "ranks"))
    if size_rows.ndim != 2 or rank_rows.shape != size_rows.shape:
        raise ValueError(
            f"`sizes` and `ranks` must have one entry per partition (one row per resplit), "
            f"got shapes {np.shape(sizes)} and {np.shape(ranks)}."
        )
    if (rank_rows < 0).any() or (rank_rows > size_rows).any():
        raise ValueError("`ranks` must lie between 0 and the partition's size.")
    threshold = check_int(threshold, "threshold", low=0)
    pooled = np.ones(1)
    for n_row, r_row in zip(size_rows, rank_rows, strict=True):  # a loop over resplits
        pooled = np.convolve(pooled, _covered_count_pmf(n_row, r_row, threshold, n_test, nodes))
    return central_share_interval(0, pooled / pooled.sum(), pooled.size - 1, (1 - confidence) / 2)


@functools.lru_cache(maxsize=4096)
def _equal_size_coverage(n: int, rank: int, k_calib: int, threshold: int) -> float:
    if rank <= 0:
        return 1.0
    low, high = _transition(n, rank)
    u, w = _nodes(low, high, 8)
    g = _inclusion_probability(u, n, rank)
    return float(w @ stats.binom.sf(threshold, k_calib, g)) + (1.0 - high)


@functools.lru_cache(maxsize=4096)
def _exact_rank(n: int, k_calib: int, alpha: float) -> int:
    threshold = majority_threshold(k_calib, alpha)
    low, high = 0, n  # coverage decreases with the rank; rank 0 covers always
    while low < high:  # bisection over ranks
        middle = (low + high + 1) // 2
        if _equal_size_coverage(n, middle, k_calib, threshold) >= 1 - alpha - 1e-12:
            low = middle
        else:
            high = middle - 1
    return low


def partition_rank(n: int, k_calib: int, alpha: float, coverage: str = "exact") -> int:
    """Rank of a calibration partition's threshold among its ``n`` sorted conformity scores.

    ``"paper"``: ``floor((n + 1) alpha) - 1`` (at least 1), the published rule, for
    partitions of at least ``minimum_scores(alpha)`` points (the published code refuses
    smaller ones; here they get rank 0).
    ``"exact"``: the largest rank such that, were every one of the ``k_calib`` partitions of
    size ``n``, the majority set would cover at least ``1 - alpha`` (`majority_coverage`). It
    depends on the partition's own size only, so poisoning one partition cannot move the
    others' thresholds. Rank 0 means the partition's set holds every label.

    Parameters
    ----------
    n : int
        Size of the partition (number of its conformity scores), at least 0.
    k_calib : int
        Number of calibration partitions, at least 1 (used by ``"exact"`` only).
    alpha : float
        One miscoverage level in (0, 1).
    coverage : {"exact", "paper"}, default="exact"
        The rule, as above.

    Returns
    -------
    int
        The rank, between 0 and ``n``: the threshold is the rank-th smallest score.

    Raises
    ------
    ValueError
        For an invalid ``n``, ``k_calib``, ``alpha`` or ``coverage``.

    Examples
    --------
    >>> partition_rank(1000, 1, 0.1, "paper"), partition_rank(1000, 1, 0.1, "exact")
    (99, 100)
    >>> partition_rank(100, 10, 0.1, "paper"), partition_rank(100, 10, 0.1, "exact")
    (9, 8)
    >>> partition_rank(8, 10, 0.1, "paper")  # fewer than minimum_scores(0.1) = 9 points
    0
    """
    level = _one_level(alpha)
    n = check_int(n, "n", low=0)
    k_calib = check_int(k_calib, "k_calib")
    if coverage == "paper":
        conforming = int(conformal_rank(n, level, kind="conformity")[0])
        return max(conforming - 1, 1) if conforming >= 1 else 0
    if coverage == "exact":
        return _exact_rank(n, int(k_calib), level)
    raise ValueError(f"`coverage` must be one of {list(COVERAGE)}, got {coverage!r}.")


def minimum_partition_size(k_calib: int, alpha: float, coverage: str) -> int:
    """Fewest points a calibration partition needs for a threshold (`partition_rank` >= 1).

    Below it the partition's threshold sits below every score and its set holds every
    label. With ``coverage="exact"`` this is more than ``minimum_scores(alpha)`` from 4
    partitions on, except 6 at ``alpha = 0.1`` (11 at 4, 13 at 5, 14 at 10, 18 at 40).

    Parameters
    ----------
    k_calib : int
        Number of calibration partitions, at least 1.
    alpha : float
        One miscoverage level in (0, 1).
    coverage : {"exact", "paper"}
        The rule of `partition_rank`.

    Returns
    -------
    int
        The smallest ``n`` with ``partition_rank(n, k_calib, alpha, coverage) >= 1``.

    Raises
    ------
    ValueError
        For an invalid ``k_calib``, ``alpha`` or ``coverage``.

    Examples
    --------
    >>> minimum_partition_size(1, 0.1, "paper"), minimum_partition_size(14, 0.05, "exact")
    (9, 35)
    """
    level = _one_level(alpha)
    if coverage not in COVERAGE:
        raise ValueError(f"`coverage` must be one of {list(COVERAGE)}, got {coverage!r}.")
    return _minimum_partition_size(check_int(k_calib, "k_calib"), level, coverage)


@functools.lru_cache(maxsize=256)
def _minimum_partition_size(k_calib: int, alpha: float, coverage: str) -> int:
    """`minimum_partition_size` on checked arguments (cached)."""
    low = minimum_scores(alpha)  # the rank grows with n: double, then bisect
    if partition_rank(low, k_calib, alpha, coverage) >= 1:
        return low
    high = 2 * low
    while partition_rank(high, k_calib, alpha, coverage) < 1:
        low, high = high, 2 * high
    while high - low > 1:  # partition_rank(low) < 1 <= partition_rank(high)
        middle = (low + high) // 2
        if partition_rank(middle, k_calib, alpha, coverage) >= 1:
            high = middle
        else:
            low = middle
    return high


def _partition_threshold(scores: NDArray, rank: int) -> float:
    """The ``rank``-th smallest score (``-inf`` for rank 0), through the conformal quantile."""
    if rank <= 0:
        return -np.inf
    return float(conformal_quantile(scores, rank / (scores.size + 1), kind="conformity")[0])


# ---- votes and their worst cases --------------------------------------------------------------
def _votes_reached(scores: NDArray, thresholds: NDArray) -> NDArray:
    """How many partition thresholds each score reaches (``score >= threshold``), for every
    entry of ``scores``: a binary search, not a comparison with every threshold."""
    return np.searchsorted(np.sort(thresholds), scores, side="right")


def _smoothed(counts: NDArray, k_train: int, kind: str) -> NDArray:
    """Score of every label from vote counts ``(..., K)``."""
    share = counts / k_train
    if kind == "vote":
        return share
    e = np.exp(share)
    # summed in increasing order (not label order): vote vectors that are permutations of
    # each other give a label the same score to the bit, so exact ties stay ties
    return e / np.sort(e, axis=-1).sum(axis=-1, keepdims=True)


def _target_bounds(
    counts: NDArray, target: NDArray, radius: int, k_train: int, kind: str
) -> tuple[NDArray, NDArray]:
    """Lowest and highest score of label ``target[i]`` (or of each label ``target[i, j]``)
    of row ``i`` when ``radius`` of the ``k_train`` models change their vote arbitrarily (to
    any label, or none).

    Highest: each changed vote leaves the strongest competitor (an abstaining model if no
    competitor has a vote) for the target. Lowest: each changed vote goes to the strongest
    competitor, taken from the target first, then from abstaining models, then from the
    weakest competitors that still have votes (by convexity of the softmax denominator).
    Ties go to the lowest label, as `np.argmax` and `np.argmin` break them.

    The final vote counts of those greedy moves are computed directly, not vote by vote
    (`_block_bounds`), and give the floats of `_smoothed` on them bit for bit: the same
    elementwise ``exp`` and division, and the same (pairwise) sum over the labels in
    increasing order of their terms, numpy's along a contiguous axis, as `_smoothed` does.

    Parameters
    ----------
    counts : ndarray of int of shape (n, K)
    target : ndarray of int of shape (n,) or (n, T)
    radius, k_train : int
    kind : {"vote_softmax", "vote"}

    Returns
    -------
    low, high : ndarray of float of the shape of ``target``
    """
    counts = np.asarray(counts, dtype=np.int64)  # read, never written
    target = np.asarray(target)
    targets = target[:, None] if target.ndim == 1 else target
    if radius == 0:
        scores = np.take_along_axis(_smoothed(counts, k_train, kind), targets, axis=1)
        low, high = scores, scores.copy()
    else:
        # beyond every row's votes and abstentions a larger radius changes nothing
        radius = min(radius, max(k_train, int(counts.sum(axis=1).max(initial=0))))
        low, high = np.empty(targets.shape), np.empty(targets.shape)
        step = max(1, _BLOCK_SIZE // (targets.shape[1] * counts.shape[1]))
        for start in range(0, counts.shape[0], step):  # a loop over blocks of rows
            rows = slice(start, start + step)
            low[rows], high[rows] = _block_bounds(
                counts[rows], targets[rows], radius, k_train, kind
            )
    if target.ndim == 1:
        return low[:, 0], high[:, 0]
    return low, high


def _block_bounds(
    counts: NDArray, target: NDArray, radius: int, k_train: int, kind: str
) -> tuple[NDArray, NDArray]:
    """`_target_bounds` on one block of rows: ``counts`` (b, K), ``target`` (b, T),
    ``radius >= 1``."""
    n_labels = counts.shape[1]
    total = counts.sum(axis=1, keepdims=True)
    abstain = k_train - total
    own = np.take_along_axis(counts, target, axis=1)
    # highest: `moved` votes leave the competitors, then abstaining models join the target
    moved = np.minimum(total - own, radius)
    high = own + moved + np.minimum(radius - moved, np.maximum(abstain, 0))
    # lowest: votes leave the target, then abstaining models join the strongest competitor
    taken = np.minimum(own, radius)
    from_abstain = np.minimum(radius - taken, abstain)
    low = own - taken  # alone (one label), the votes taken go to no label
    if kind == "vote":
        return low / k_train, high / k_train
    e_low, e_high = np.exp(low / k_train), np.exp(high / k_train)
    if n_labels == 1:
        return e_low / e_low, e_high / e_high
    order = np.argsort(-counts, axis=1, kind="stable")  # strongest first, lowest label first
    e_row = np.exp(counts / k_train)

    # lowest: the rest of the radius drains the weakest competitors into the strongest
    first = order[:, :1]
    strongest = np.where(first == target, order[:, 1:2], first)
    strong = np.take_along_axis(counts, strongest, axis=1)
    drained = np.minimum(radius - taken - from_abstain, total - own - strong)
    # weakest first among the labels with votes, lowest label first, empty labels last
    weakest = np.argsort(np.where(counts > 0, counts, k_train + total), axis=1, kind="stable")
    rank = _positions(weakest)
    # each drained competitor gives at least one vote: all are among the `drained + 2`
    # weakest labels with votes, the target and the strongest perhaps among them too
    width = min(n_labels, int(drained.max()) + 2)
    window = weakest[:, :width]
    values = np.take_along_axis(counts, window, axis=1)
    data: tuple[NDArray, ...] = (window, values, np.cumsum(values, axis=1) - values)
    own_rank = np.take_along_axis(rank, target, axis=1)
    pairs: tuple[NDArray, ...]  # four entries here, three below
    pairs = (own, own_rank, strong, np.take_along_axis(rank, strongest, axis=1))
    outside: tuple[Any, ...] = (0, n_labels, np.take_along_axis(counts, first, axis=1))
    outside = (*outside, np.take_along_axis(rank, first, axis=1))  # target-free pairs
    inside = (own_rank < width) | (target == first)
    lowest = functools.partial(_drained_window, data)
    e_strong = np.exp((strong + taken + from_abstain + drained) / k_train)
    patches: tuple[tuple[NDArray, NDArray], ...] = ((strongest, e_strong), (target, e_low))
    low = e_low / _denominators(e_row, lowest, drained, pairs, outside, inside, patches, k_train)

    # highest: `moved` votes leave the strongest competitors, one at a time; each changed
    # competitor loses at least one: all are among the `moved + 1` strongest labels
    width = min(n_labels - 1, int(moved.max()))
    span = min(n_labels, width + 2)
    values = np.zeros((len(counts), width + 2), dtype=np.int64)  # descending, zero padded
    values[:, :span] = np.take_along_axis(counts, order[:, :span], axis=1)
    prefix = np.zeros_like(values)
    np.cumsum(values[:, :-1], axis=1, out=prefix[:, 1:])
    i = np.arange(1, width + 1)
    above = prefix[:, 1 : width + 1] - i * values[:, :width]
    below = prefix[:, 2 : width + 2] - i * values[:, 1 : width + 1]
    window = order[:, : width + 1]
    # ranked[:, l]: the l strongest labels sorted by label, then n_labels
    kept = np.arange(width + 1)[None, None, :] < np.arange(width + 2)[None, :, None]
    ranked = np.where(kept, window[:, None, :], n_labels)
    ranked.sort(axis=2)
    data = (window, values, prefix, above, below, ranked)
    pos = np.take_along_axis(_positions(order), target, axis=1)
    highest = functools.partial(_levelled_window, data)
    pairs, outside, patches = (own, pos, target), (0, n_labels, n_labels), ((target, e_high),)
    den = _denominators(e_row, highest, moved, pairs, outside, pos <= width, patches, k_train)
    return low, e_high / den


def _denominators(
    e_row: NDArray,
    window: Any,
    key: NDArray,
    pairs: tuple,
    outside: tuple,
    inside: NDArray,
    patches: tuple,
    k_train: int,
) -> NDArray:
    """Softmax denominator of every (row, target) pair (b, T): the sum over the labels, in
    increasing order of the terms, of ``exp(counts / k_train)``, the row's ``e_row`` with
    the counts of a few window labels changed, then the ``patches`` (labels and values
    (b, T)) set.

    ``window(rows, key, *pairs)`` gives the window labels and their new counts for pairs
    (broadcastable arrays of their rows, ``key`` and ``pairs`` entries). The target of a
    pair outside the window (``~inside``) changes nothing there, so those pairs share the
    window of a target-free pair with the same ``key`` (``outside``: its ``pairs``
    entries, broadcastable to (b, n_keys)): one per row and key, when they are fewer than
    the pairs.
    """
    n_rows, n_targets = key.shape
    n_keys = int(key.max()) + 1
    every = np.arange(n_rows)[:, None]
    slots = np.arange(n_targets)[None, :]
    if 1 < n_keys < n_targets:  # shared windows, then the pairs inside theirs
        shape = (n_rows, n_keys)
        shared = (np.broadcast_to(entry, shape) for entry in outside)
        labels, new = window(every, np.broadcast_to(np.arange(n_keys), shape), *shared)
        table = np.empty((*shape, e_row.shape[1]))
        table[...] = e_row[:, None, :]
        table[every[..., None], np.arange(n_keys)[None, :, None], labels] = np.exp(new / k_train)
        buffer = table[every, key]
        row, slot = np.nonzero(inside)  # the same window labels, overwritten
        labels, new = window(row, key[row, slot], *(entry[row, slot] for entry in pairs))
        buffer[row[:, None], slot[:, None], labels] = np.exp(new / k_train)
    else:
        buffer = np.empty((*key.shape, e_row.shape[1]))
        buffer[...] = e_row[:, None, :]
        if n_keys > 1:  # every pair on its own (no vote moves otherwise)
            labels, new = window(every, key, *pairs)
            buffer[every[..., None], slots[..., None], labels] = np.exp(new / k_train)
    for label, value in patches:
        buffer[every, slots, label] = value
    return np.sort(buffer, axis=2).sum(axis=2)  # in increasing order, as `_smoothed`


def _positions(order: NDArray) -> NDArray:
    """Position of every label in each row's ``order``: the inverse permutation."""
    place = np.empty_like(order)
    np.put_along_axis(place, order, np.arange(order.shape[1])[None, :], axis=1)
    return place


def _drained_window(
    data: tuple,
    rows: NDArray,
    drained: NDArray,
    own: NDArray,
    own_rank: NDArray,
    strong: NDArray,
    strong_rank: NDArray,
) -> tuple[NDArray, NDArray]:
    """Labels and counts of the window, the ``w`` weakest labels with votes (weakest
    first, lowest label first among ties), once ``drained`` votes left the competitors
    among them one at a time, each from the weakest that still has one: so each is emptied
    before the next is touched.

    ``data``: the rows' window labels, counts and the votes before each in the window
    (b, w). Pairs: ``rows``, ``drained``, the target's and the strongest competitor's
    counts and ranks in the weakest-first order, which give no vote here (both
    broadcastable).
    """
    labels, values, before = (entry[rows] for entry in data)
    j = np.arange(values.shape[-1])
    before = before - own[..., None] * (own_rank[..., None] < j)
    before = before - strong[..., None] * (strong_rank[..., None] < j)
    return labels, values - np.clip(drained[..., None] - before, 0, values)


def _levelled_window(
    data: tuple,
    rows: NDArray,
    moved: NDArray,
    own: NDArray,
    pos: NDArray,
    target: NDArray,
) -> tuple[NDArray, NDArray]:
    """Labels and counts of the window, the ``w + 1`` strongest labels (``w`` at least
    ``moved``), once ``moved`` votes left the competitors one at a time, each from the
    strongest (lowest label among ties).

    Those moves level the strongest competitors down: the ones above ``level`` end at it,
    then the ``extra`` lowest labels among the competitors at ``level`` lose one more vote.
    ``level`` is the smallest integer whose cost ``sum_j max(c_j - level, 0)`` over the
    competitors is at most ``moved``, ``extra`` what remains of ``moved``. With ``s`` the
    descending counts and ``P_i`` the sum of the first ``i``, levelling the ``i``
    strongest competitors to the ``i``-th costs ``D_i = P_i - i s_{i-1}`` when the target
    (at rank ``pos``) is not among the ``i`` strongest labels, ``E_i - s_pos`` with
    ``E_i = P_{i+1} - i s_i`` when it is among the ``i + 1`` strongest; both grow with
    ``i``. Levelling below the first competitor left out of the window (``floor``) costs
    at least ``w + 1 > moved``, so ``level`` is not below it.

    ``data``: the rows' window labels (b, w + 1); descending counts, zero padded, and
    their prefix sums (b, w + 2); ``D_i`` and ``E_i`` for ``i = 1..w`` (b, w); the ``l``
    strongest labels sorted by label, padded with ``K``, for ``l = 0..w + 1``
    (b, w + 2, w + 1). Pairs (broadcastable): ``rows``, ``moved``, the target's count,
    rank and label.
    """
    labels, values, prefix, above, below, ranked = data
    width = above.shape[1]
    # `top` competitors are levelled: those the cost reaches, skipping the target
    n_above = (above[rows] <= moved[..., None]).sum(axis=-1)
    n_below = (below[rows] <= (moved + own)[..., None]).sum(axis=-1)
    top = np.minimum(np.minimum(pos, width), n_above) + np.maximum(n_below - pos, 0)
    head = np.where(top <= pos, prefix[rows, top], prefix[rows, top + 1] - own)
    floor = values[rows, np.where(pos <= width, width + 1, width)]
    level = np.maximum(floor, -((moved - head) // top))
    extra = moved - (head - top * level)
    # the extra-th lowest label among the levelled competitors, the target left out
    ties = top + (pos < top)
    nth = np.maximum(extra - 1, 0)
    nth = nth + ((pos < ties) & (ranked[rows, ties, nth] >= target))
    last = np.where(extra > 0, ranked[rows, ties, nth], -1)
    labels = labels[rows]
    cap = level[..., None] - (labels <= last[..., None])  # the extra lowest lose one more
    return labels, np.minimum(values[rows, : width + 1], cap)


class _ConstantClassifier(ClassifierMixin, BaseEstimator):
    """The model of a partition with one label (predicts it) or none (abstains)."""

    def __init__(self, label: Any = None):
        self.label = label

    def fit(self, X: Any = None, y: Any = None) -> _ConstantClassifier:
        self.classes_ = np.asarray([] if self.label is None else [self.label])
        return self

    def predict_proba(self, X: Any) -> NDArray:
        return np.ones((n_rows(X), self.classes_.size))

    def predict(self, X: Any) -> NDArray:
        if self.classes_.size == 0:
            raise ValueError("This partition had no training rows: its model abstains.")
        return np.full(n_rows(X), self.classes_[0])


def _partition_failure(error: ValueError, index: int, k: int, size: int) -> ValueError:
    """``error`` of partition ``index``'s model, named: a model that needs more rows than a
    partition holds (a k-NN's ``n_neighbors``, an inner validation split) fails on the
    partition, not on the data set the user gave."""
    text = str(error).rstrip()
    lead = (
        f"The model of training partition {index} ({size} training rows) of k_train={k} "
        f"failed: {text}{'' if text.endswith('.') else '.'}"
    )
    if k == 1:  # the one partition holds every training row: the data is the cause
        return ValueError(f"{lead} With k_train=1 it trains on every training row.")
    return ValueError(
        f"{lead} Each partition's model trains on about 1/k_train of the training rows: if "
        "it needs more, use a smaller `k_train` or a model that works on that many rows; "
        "if the model also fails on the whole training set, the data is the cause."
    )


def _fit_partition(
    estimator: Any,
    X: Any,
    y: NDArray,
    rows: NDArray,
    seed: int,
    fit_params: dict[str, Any],
    index: int,
    k: int,
) -> Any:
    """Fit one partition's model (partition ``index`` of ``k``) on its rows (already in
    canonical order), with ``fit_params`` (the per-row ones already taken on those rows)."""
    labels = np.unique(y[rows])
    if labels.size < 2:  # nothing to learn: the single label, or abstention
        return _ConstantClassifier(labels[0] if labels.size else None).fit()
    model = clone(estimator)
    model.set_params(**{name: seed for name in seed_parameters(model)})
    part = X.iloc[rows] if hasattr(X, "iloc") else X[rows]
    try:
        return model.fit(part, y[rows], **fit_params)
    except ValueError as error:
        if type(error) is not ValueError:  # scikit-learn's parameter errors, say: as they are
            raise
        raise _partition_failure(error, index, k, rows.size) from error


def _label_kind(classes: NDArray) -> str:
    """``"numbers"``, ``"strings"`` or ``"mixed"``: what a model's labels are."""
    if classes.dtype.kind in "biuf":
        return "numbers"
    if classes.dtype.kind in "US":
        return "strings"
    kinds = {
        "strings"
        if isinstance(value, str)
        else "numbers"
        if isinstance(value, numbers.Number)
        else "mixed"
        for value in classes.tolist()
    }
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _check_label_kinds(models: list) -> None:
    """Refuse fitted partition models whose labels are of different kinds (numbers and
    strings): their union would hold ``0`` and ``'0'`` as two labels."""
    seen: dict[str, int] = {}
    for index, model in enumerate(models):
        classes = np.asarray(model.classes_)
        if classes.size:  # an abstaining model has no labels
            seen.setdefault(_label_kind(classes), index)
    if len(seen) > 1:
        described = ", ".join(
            f"model {index} {value_summary(np.asarray(models[index].classes_).tolist())} ({kind})"
            for kind, index in seen.items()
        )
        raise ValueError(
            f"The models of `estimator` have labels of different kinds: {described}. Fit "
            "every model on labels of one type (e.g. all as str, or all as int)."
        )


# ---- the estimator ---------------------------------------------------------------------------
class ReliablePredictionSets(
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    VersionedState,
    RoutesFitParams,
    ClassifierMixin,
    BaseEstimator,
):
    """Conformal prediction sets with per-row certificates against data poisoning (RPS).

    The certificates cover poisoned points whose labels stay in the label set: pass
    ``classes`` when poisoned training data might bring a label no other training row has,
    or take away a label's last row (see `certify`).

    Parameters
    ----------
    estimator : classifier or list of fitted classifiers, default=None
        Cloned and fitted once per training partition (``None``:
        ``LogisticRegression(max_iter=1000)``); any ``random_state`` it has is set per
        partition. Or the ``k_train`` partition models, already fitted (``calibrate`` then
        works without ``fit``; each may know a subset of the labels). Their training
        certificates (``r_train``) hold only if each training row reached at most one
        model, by a partition that depends on the row alone (e.g. model ``i`` fitted on the
        rows where ``hash_partition(X_train, k_train, salt) == i``); nothing can check it,
        so a training radius warns. Calibration certificates (``r_calib``) do not depend on
        it.
    k_train : int, default=10
        Training partitions, one model each. With 1 the score is the model's own
        probability (plain split CP, certified against calibration poisoning only).
    k_calib : int, default=10
        Calibration partitions; each needs at least `minimum_partition_size` points
        (``minimum_scores(alpha)`` with ``coverage="paper"``, more with ``"exact"``: 14
        for 10 partitions at alpha 0.1). A smaller one gets rank 0 and votes for every
        label (`calibrate` warns); `certify` refuses it.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s); `predict_set` may override it.
    conformity_score : {"vote_softmax", "vote"}, default="vote_softmax"
        Smoothed score of a label: the softmax of the models' vote shares, or the share. (It
        is not called ``score`` so that the scikit-learn ``score(X, y)`` method stays.)
    coverage : {"exact", "paper"}, default="exact"
        Per-partition rank: ``"exact"`` makes the majority set cover at least ``1 - alpha``
        (for partitions of equal size), ``"paper"`` is the published rule, below
        ``1 - alpha`` for most partition sizes with 10 or more partitions (``calibrate``
        warns then; see `partition_rank`).
    salt : int, str or bytes, default=0
        Key of the partition hash. The certificates' validity does not depend on it:
        they hold for poisoned points in any partitions. Which rows are certified does: the
        share certified usually moves by several points from one salt to another
        (partitions of other sizes and contents), and can collapse: on digits with
        ``k_train=k_calib=5``, one integer salt in 30 certified no row at ``r_train=1``
        (the others 0.73 to 0.84), since the vote thresholds are discrete and one poisoned
        model can then sink a label below the majority. A salt chosen by looking at the
        data is outside the guarantees. A secret salt (e.g. ``secrets.randbits(256)``; an
        int from ``-2**511`` to ``2**511 - 1``, a str or bytes of up to 64 bytes) keeps
        an adversary from concentrating poisoned points in partitions of their choice,
        which can do more damage to the rows that are not certified.
    n_jobs : int, default=None
        Partition models are fitted through ``joblib.Parallel``, so
        ``joblib.parallel_config(backend="dask")`` spreads them over a Dask cluster.
    random_state : int or None, default=None
        Seed of the partition models (``None`` means 0: the certificates need training that
        gives the same model for the same partition contents).
    verbose : bool, default=False
        Show a progress bar while fitting.
    classes : array-like of shape (n_classes,), default=None
        The label set, fixed: ``classes_`` is its sorted copy, every label keeps its column
        (and its term in the ``"vote_softmax"`` denominator) even with no training row or
        vote, and training labels (or fitted models' labels) outside it are refused.
        ``None``: the labels of the training data (the union of the models' labels for
        models given fitted), which a poisoned point can change: one with a label no
        other training row has adds a label, the deletion or relabelling of a label's last
        row removes one, and the sets (with ``"vote_softmax"`` every row's scores) change
        beyond what the training certificates (``r_train``) cover. Give it when poisoned
        training data may bring new labels or drop rare ones.

    Attributes
    ----------
    estimators_ : list of length k_train
        The partition models (a constant classifier for a partition with one label or none).
    classes_ : ndarray of shape (n_classes,)
        ``classes`` sorted, or the training labels.
    training_partition_sizes_ : ndarray of shape (k_train,)
    conformity_scores_ : ndarray of shape (n_calibration,)
        Smoothed score of the true label of every calibration row.
    calibration_partition_ : ndarray of shape (n_calibration,)
    partition_sizes_ : ndarray of shape (k_calib,)
    partition_ranks_, partition_thresholds_ : ndarray of shape (k_calib,)
        At the constructor's (first) ``alpha``, as it is now (`set_params` moves them).
    majority_threshold_ : int
        A label enters the set with more than this many partition votes (at that level).
    majority_coverage_ : float
        The coverage the formula of `majority_coverage` gives for these partition sizes
        (at that level).
    n_calibration_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> X, y = load_digits(return_X_y=True)
    >>> rps = ReliablePredictionSets(k_train=5, k_calib=5, alpha=0.1, random_state=0)
    >>> rps = rps.fit(X[:900], y[:900]).calibrate(X[900:1500], y[900:1500])
    >>> rps.predict_set(X[1500:]).shape
    (297, 10)
    >>> certified = rps.certify(X[1500:], r_calib=1)
    >>> sorted(certified)
    ['coverage_reliable', 'robust', 'size_reliable']
    """

    #: Parameters the partition models and ``classes_`` depend on (changing one needs a new
    #: fit); not recorded for fitted models adopted from a list (`_calibration_params`).
    _fit_params = ("estimator", "classes", "k_train")

    @property
    def _calibration_params(self) -> tuple[str, ...]:
        """Parameters the calibration depends on (changing one needs a new calibrate); with
        fitted models adopted from a list, also ``classes`` (calibrate adopts them again)."""
        names = ("k_calib", "conformity_score", "coverage", "salt")
        return (*names, "classes") if self.__dict__.get("_estimator_adopted", False) else names

    def __init__(
        self,
        estimator: Any = None,
        k_train: int = 10,
        k_calib: int = 10,
        alpha: float | ArrayLike = 0.1,
        conformity_score: str = "vote_softmax",
        coverage: str = "exact",
        salt: int | str | bytes = 0,
        n_jobs: int | None = None,
        random_state: int | None = None,
        verbose: bool = False,
        classes: ArrayLike | None = None,
    ):
        self.estimator = estimator
        self.k_train = k_train
        self.k_calib = k_calib
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.coverage = coverage
        self.salt = salt
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.classes = classes

    # ---- parameters ----------------------------------------------------------------------
    def _prefit(self) -> list | None:
        return list(self.estimator) if isinstance(self.estimator, (list, tuple)) else None

    def _validate_params(self) -> None:
        refuse_model_class(self.estimator, self)
        check_miscoverage(self.alpha, "alpha", owner=self)
        if self._prefit() is None:
            check_int(self.k_train, "k_train")
            check_model_methods(self._base_estimator(), ("fit", "predict"), self)
            tags = sklearn_tags(self._base_estimator())  # None outside scikit-learn
            if tags is not None and tags.estimator_type == "regressor":
                raise TypeError(
                    "ReliablePredictionSets needs a classifier as `estimator` (its models "
                    f"vote for labels), got the regressor {type(self.estimator).__name__}."
                )
        check_int(self.k_calib, "k_calib")
        if self.conformity_score not in SCORES:
            raise ValueError(
                f"`conformity_score` must be one of {list(SCORES)}, got {self.conformity_score!r}."
            )
        if self.coverage not in COVERAGE:
            raise ValueError(f"`coverage` must be one of {list(COVERAGE)}, got {self.coverage!r}.")
        _salt_key(self.salt)
        if isinstance(self.random_state, np.random.Generator | np.random.RandomState):
            raise ValueError(
                "`random_state` must be an int or None, not a random generator: the "
                "certificates need training that gives the same model for the same "
                "partition contents, and a generator would give a new seed at every fit."
            )
        try:
            integer_seed(self.random_state)
        except ValueError:  # its message offers generators, which RPS refuses (above)
            raise ValueError(
                f"`random_state` must be None or an int in [0, 2**32), got {self.random_state!r}."
            ) from None
        check_n_jobs(self.n_jobs)
        check_verbose(self.verbose)
        self._fixed_classes()

    def _fixed_classes(self) -> NDArray | None:
        """``classes`` checked and sorted (None when not given)."""
        if self.classes is None:
            return None
        if isinstance(self.classes, (str, bytes)) or np.ndim(self.classes) != 1:
            raise ValueError(
                "`classes` must be a 1-D sequence of labels (the label set), got "
                f"{value_summary(self.classes)}."
            )
        size = np.shape(self.classes)[0]
        missing = [  # (a loop over the label set)
            label
            for label in np.asarray(self.classes, dtype=object)
            if pd.isna(label) or (isinstance(label, float) and not np.isfinite(label))
        ]
        if missing:  # check_class_labels' advice is for rows of data
            raise ValueError(
                f"`classes` lists the labels, and {labels_text(missing[:1])} cannot be one: "
                "leave it out of `classes` (and drop or relabel such rows of `y`)."
            )
        given = check_class_labels(self.classes, size, "classes", training=True)
        index = pd.Index(given)
        repeated = index[index.duplicated()].unique()
        if repeated.size:
            raise ValueError(
                f"`classes` must hold each label once, got {labels_text(repeated, 5)} more "
                "than once."
            )
        return np.unique(given)

    def _encode(self, labels: NDArray, name: str = "y") -> NDArray:
        """Column of each label in ``classes_``; one outside a given ``classes`` is named as
        such (else as unseen in training)."""
        try:
            return encode_labels(labels, self.classes_, name)
        except ValueError as error:
            outside = pd.unique(labels[pd.Index(self.classes_).get_indexer(labels) < 0])
            if self.classes is None:
                if "never saw during fit" not in str(error) or label_type_hint(
                    np.asarray(outside), self.classes_, name
                ):  # other types of the same labels: their hint is the way out
                    raise
                # a label no training partition holds: declared, it gets votes of none
                raise ValueError(
                    f"{error} To calibrate or evaluate with labels the training rows lack, "
                    "declare every label at fit: classes=[...]."
                ) from None
            if not outside.size:  # another reason (booleans)
                raise
        current = cast(NDArray, self._fixed_classes())  # not None: `classes` is given
        if not np.array_equal(current, self.classes_):  # set after fit, by an older build's
            # pickle (no recorded fit settings, so `check_calibration_settings` let it pass)
            raise ValueError(
                f"`{name}` contains labels outside the label set fit used "
                f"({labels_text(self.classes_)}): {labels_text(outside, 5)}. `classes` "
                f"({labels_text(current)}) changed since fit: call fit(X, y) again."
            ) from None
        raise ValueError(
            f"`{name}` contains labels outside `classes`: {labels_text(outside, 5)}. "
            f"`classes` ({labels_text(current)}) fixes the label set: add them to it, "
            "or leave `classes` out to take the training labels."
        ) from None

    def _check_fit_settings(self, method: str, again: str | None = None) -> None:
        """Refuse ``method`` when ``classes`` or ``k_train`` changed since fit trained the
        partition models (a model an older build pickled has no record: not checked)."""
        check_calibration_settings(self, method, step="fit", again=again)

    def _base_estimator(self) -> Any:
        return LogisticRegression(max_iter=1000) if self.estimator is None else self.estimator

    def _routed_models(self) -> dict[str, Any]:
        return {} if self._prefit() is not None else {"estimator": self._base_estimator()}

    def _nan_template(self) -> Any:
        """The model whose NaN support `_check_X` checks (the first of a list of models)."""
        template = self._base_estimator()  # (a partition model may be a constant stand-in)
        return template[0] if isinstance(template, (list, tuple)) and template else template

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # NaN passes exactly when the models take it, as `_check_X` checks; sparse X stays
        # refused (rows are hashed by their dense bytes)
        tags.input_tags.allow_nan = not refuses_nan(self._nan_template())
        return tags

    def _default_model_text(self) -> str:
        return "LogisticRegression(max_iter=1000)"

    # ---- training ------------------------------------------------------------------------
    @keeps_state_on_error
    def fit(self, X: Any, y: ArrayLike, **fit_params: Any) -> Self:
        """Partition the training rows by hash and fit one model per partition.

        With a list of fitted models as ``estimator`` nothing is trained: they are checked
        and adopted, and ``X`` and ``y`` are checked against them (rows of the models'
        features, labels among their classes).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params : dict
            Passed to each partition model's ``fit``; per-row ones (``sample_weight``) on
            the partition's rows, so a row's weight stays with it, in one model. The
            others reach every model: data in them (an ``eval_set``) is outside the
            training certificate. With scikit-learn's metadata routing on, only those the
            model requested (see `uqconform.routing`).

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        check_weights_row_order(X, fit_params, y)
        self._validate_params()
        check_frozen_is_fitted(self.estimator, self)
        if keeps_a_frozen_model(self.estimator) and int(self.k_train) > 1:
            # clone() returns a frozen model itself and its fit does nothing: every
            # partition would hold the same model, trained on none of its rows
            raise ValueError(
                f"`estimator` holds a FrozenEstimator, which fit cannot train on each of the "
                f"k_train={int(self.k_train)} partitions (they would all hold the same "
                "model, and the training certificate would cover rows it never saw). Pass "
                "an unfitted classifier, fitted models as a list (one per partition), or "
                "k_train=1."
            )
        self._reset_calibration()
        if self._prefit() is not None:
            if fit_params:
                raise ValueError(
                    f"fit parameters {sorted(fit_params)} were given, but the partition "
                    "models are already fitted (`estimator` is a list of fitted classifiers)."
                )
            self._adopt(cast(list, self._prefit()))  # not None: checked just above
            self._check_adopted_rows(X, y)
            remember_training_rows(self, X, y, trained=False)
            return self
        fit_params = self._routed_fit_params(fit_params)["estimator"]
        X = self._check_X(X, reset=True)
        check_sample_weight_rows(fit_params, n_rows(X))
        labels = check_class_labels(y, n_rows(X), training=True)  # two classes or more
        fixed = self._fixed_classes()
        if fixed is None:
            self.classes_, index = np.unique(labels, return_inverse=True)
        else:  # a fixed label set: labels with no rows keep their columns
            self.classes_ = fixed
            index = self._encode(labels)
        k = int(self.k_train)
        digests = row_digests(X, self.salt)
        partition = (digests[:, 0] % np.uint64(k)).astype(np.intp)
        # Canonical order inside a partition: by digest, then label (never input order).
        order = np.lexsort((index, digests[:, 1], digests[:, 0], partition))
        bounds = np.searchsorted(partition[order], np.arange(k + 1))
        seed = integer_seed(self.random_state) or 0
        seeds = np.random.SeedSequence(seed).generate_state(k, dtype=np.uint32) >> 1
        self.training_partition_sizes_: NDArray | None = np.diff(bounds)  # None: adopted
        if (self.training_partition_sizes_ == 0).any():
            warn_user(
                f"{int((self.training_partition_sizes_ == 0).sum())} of the {k} training "
                "partitions are empty (their model abstains): use a smaller k_train for "
                f"{len(labels)} training rows.",
                UserWarning,
            )
        rows = [order[bounds[i] : bounds[i + 1]] for i in range(k)]
        params = [fit_params_rows(fit_params, len(labels), part) for part in rows]
        jobs = (
            delayed(_fit_partition)(
                self._base_estimator(), X, labels, rows[i], int(seeds[i]), params[i], i, k
            )
            for i in range(k)
        )
        with naming_refused_groups(self, fit_params), reading_features(X, self._base_estimator()):
            self.estimators_ = run_fits(
                jobs, n_jobs=self.n_jobs, verbose=self.verbose, desc="RPS partitions", total=k
            )
        self._estimator_adopted = False
        record_calibration_settings(self, step="fit")
        remember_training_rows(self, X, labels)
        return self

    def _adopt(self, models: list) -> None:
        if not models:
            raise ValueError("`estimator` as a list needs at least one fitted classifier.")
        for index, model in enumerate(models):
            try:
                check_fitted_model(model)
            except NotFittedError:
                hint = f" {CLONED_LIST_HINT}" if _unfitted_as_by_a_clone(models) else ""
                raise NotFittedError(
                    f"Model {index} of `estimator` is not fitted: pass fitted classifiers, or "
                    f"one classifier to be cloned and fitted by fit(X, y).{hint}"
                ) from None
            if not hasattr(model, "classes_") or not hasattr(model, "predict"):
                raise TypeError(f"Model {index} ({type(model).__name__}) is not a classifier.")
        _check_label_kinds(models)
        fixed = self._fixed_classes()
        if fixed is None:
            self.classes_ = np.unique(np.concatenate([np.asarray(m.classes_) for m in models]))
        else:
            for index, model in enumerate(models):  # a loop over the models
                known = np.asarray(model.classes_)
                outside = known[pd.Index(fixed).get_indexer(known) < 0]
                if outside.size:
                    raise ValueError(
                        f"Model {index} of `estimator` knows labels outside `classes`: "
                        f"{labels_text(outside, 5)}. `classes` ({labels_text(fixed)}) fixes "
                        "the label set: add them to it, or leave `classes` out to take the "
                        "models' labels."
                    )
            self.classes_ = fixed
        self.estimators_ = models
        self.training_partition_sizes_ = None
        self._estimator_adopted = True
        self.__dict__.pop("_fit_settings", None)  # nothing trained: `classes` is calibrate's
        self.__dict__.pop("_column_labels_in", None)  # the order the models saw: unknown
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(models[0], name):
                setattr(self, name, getattr(models[0], name))
            else:
                self.__dict__.pop(name, None)

    def _check_adopted_rows(self, X: Any, y: ArrayLike) -> None:
        """``fit``'s rows, with fitted models: rows of the models' features (``X`` 2-D,
        each model's ``n_features_in_`` when it has one), labels among their classes."""
        shape = np.shape(X) if not hasattr(X, "shape") else X.shape
        for position, model in enumerate(self.estimators_):  # a loop over the models
            width = getattr(model, "n_features_in_", None)
            if len(shape) == 2 and width is not None and width != shape[1]:
                raise ValueError(
                    f"`X` has {shape[1]} features, but model {position} of `estimator` was "
                    f"fitted on {width}: pass rows with the features the models were fitted on."
                )
        X = self._check_X(X, reset=not hasattr(self, "n_features_in_"))
        self._encode(check_class_labels(y, n_rows(X)))  # known labels

    def _check_X(self, X: Any, *, reset: bool) -> Any:
        """Check shape and features; a DataFrame is passed on as is, anything else as an array."""
        X = check_features(self, X, reset=reset)  # None, 1-D, no rows: named errors
        refuse_sparse_columns(X, type(self).__name__)
        # Sparse input is refused (rows are hashed by their dense bytes); NaN is left to the
        # models that take it (the others are named before they see it).
        if hasattr(X, "iloc"):  # columns of their own dtypes (dates beside numbers: no
            if X.shape[1] == 0:  # common numpy dtype to check them in)
                raise ValueError("`X` has no columns: give at least one feature.")
            check_nan_accepted(self._nan_template(), X)
            return X
        checked = check_array(X, accept_sparse=False, dtype=None, ensure_all_finite=False)
        check_nan_accepted(self._nan_template(), checked)
        return checked

    # ---- votes ---------------------------------------------------------------------------
    @property
    def k_train_(self) -> int:
        """Number of partition models."""
        check_is_fitted(self, "estimators_")
        return len(self.estimators_)

    def _probability_mode(self) -> bool:
        return self.k_train_ == 1

    def vote_counts(self, X: Any) -> NDArray:
        """Votes of the partition models for every label: int ``(n_samples, n_classes)``.

        A model that never saw a label never votes for it; an abstaining model votes for none.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of int64, shape (n_samples, n_classes)
            Columns in ``classes_`` order; each row sums to at most ``k_train_``.
        """
        check_is_fitted(self, "estimators_")
        self._check_fit_settings("vote_counts", "fit(X, y)")
        X = self._check_X(X, reset=False)
        n, k = n_rows(X), self.classes_.size
        counts = np.zeros((n, k), dtype=np.int64)
        rows = np.arange(n)
        sizes = self.__dict__.get("training_partition_sizes_")  # None: adopted models
        for i, model in enumerate(self.estimators_):  # a loop over the partition models
            if np.asarray(model.classes_).size == 0:
                continue
            try:
                predicted = np.asarray(model.predict(X))
            except ValueError as error:
                if sizes is None or type(error) is not ValueError:  # adopted: the user's own
                    raise
                raise _partition_failure(error, i, len(self.estimators_), int(sizes[i])) from error
            column = encode_labels(predicted, self.classes_, "predictions")
            counts[rows, column] += 1  # one vote per row: no repeated (row, column) pair
        return counts

    def _probabilities(self, X: Any) -> NDArray:
        """``k_train = 1``: the model's probabilities in the global label order (0 elsewhere)."""
        model = self.estimators_[0]
        if not hasattr(model, "predict_proba"):
            raise missing_proba_error(
                model, "`estimator`", "with k_train=1 the score is the model's probability"
            )
        X = self._check_X(X, reset=False)
        proba = np.zeros((n_rows(X), self.classes_.size))
        columns = encode_labels(np.asarray(model.classes_), self.classes_, "classes_")
        # checked: a NaN would rank above every threshold and join a certified set
        proba[:, columns] = class_probabilities(model, X, columns.size, check_sums=False)
        return proba

    def predict_scores(self, X: Any) -> NDArray:
        """Smoothed conformity score of every label (higher: more plausible).

        The ``conformity_score`` of the models' votes; with ``k_train=1``, the model's own
        probabilities.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of float, shape (n_samples, n_classes)
            Columns in ``classes_`` order.
        """
        check_wrapper_fitted(self, "estimators_", "predict_scores")
        self._check_fit_settings("predict_scores", "fit(X, y)")
        if self._probability_mode():
            return self._probabilities(X)
        return _smoothed(self.vote_counts(X), self.k_train_, self.conformity_score)

    def predict(self, X: Any) -> NDArray:
        """The label with the highest smoothed score (majority vote of the models).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_`` (the largest column of `predict_scores`).
        """
        check_wrapper_fitted(self, "estimators_", "predict")
        self._check_fit_settings("predict", "fit(X, y)")
        scores = self.predict_scores(X)
        return self.classes_[np.argmax(scores, axis=1)]

    # ---- calibration ---------------------------------------------------------------------
    def _reset_calibration(self) -> None:
        for name in (
            "conformity_scores_",
            "calibration_partition_",
            "partition_sizes_",
            "n_calibration_",
            "_calibration_counts",
            "_calibration_labels",
            "_calibrate_settings",
            "_threshold_cache",
            "_coverage_cache",
            "_checked_level",
            "_majority_checked",
        ):
            self.__dict__.pop(name, None)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        # computed again by the version that loads the pickle (its quadrature may differ)
        state.pop("_coverage_cache", None)
        return state

    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike) -> Self:
        """Partition the calibration rows by hash and score their true labels.

        There is no Mondrian (``groups``) calibration: the guarantee is the majority
        vote's over hash partitions of all calibration rows.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels among ``classes_`` (the training labels, or ``classes``).

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        self._validate_params()
        if not hasattr(self, "estimators_") or self.__dict__.get("_estimator_adopted", False):
            if self._prefit() is None:
                held = "None" if self.estimator is None else "one model"
                raise NotFittedError(
                    f"{adoption_lead(self, 'estimators_')}, and `estimator` is {held}, not a "
                    "list of fitted partition models: call fit(X_train, y_train) first, or "
                    "pass the fitted partition models as a list in `estimator`."
                )
            self._adopt(cast(list, self._prefit()))  # not None: checked just above
        else:  # the models fit trained: with the `classes` and `k_train` they have now?
            self._check_fit_settings("calibrate")
        self._reset_calibration()
        X = self._check_X(X, reset=not hasattr(self, "n_features_in_"))
        n = n_rows(X)
        given = check_class_labels(y, n)
        remember_calibration_rows(self, X, given)
        labels = self._encode(given)
        k = int(self.k_calib)
        digests = row_digests(X, self.salt)[:, 0]
        partition = _partition_of(digests, k)  # hash_partition, digests kept for the check
        sizes = np.bincount(partition, minlength=k)
        self._warn_if_rows_repeat(digests, k)
        levels = check_alpha(self.alpha, "alpha")
        self._warn_small_partitions(sizes, levels)  # at the most demanding level
        self._checked_level = float(np.min(levels))
        if self._probability_mode():
            counts = None
            scores = self._probabilities(X)[np.arange(n), labels]
        else:
            counts = self.vote_counts(X)
            scores = _smoothed(counts, self.k_train_, self.conformity_score)[np.arange(n), labels]
        self.conformity_scores_ = scores
        record_calibration_settings(self)
        self.calibration_partition_ = partition
        self.partition_sizes_ = sizes
        self.n_calibration_ = n
        self._calibration_counts = counts
        self._calibration_labels = labels
        self._warn_majority_below(levels)
        return self

    # ---- what the calibration gives at the current `alpha` (read at each access, so that
    # `set_params(alpha=...)` moves them with the sets) -------------------------------------
    def _current_level(self) -> float:
        if "conformity_scores_" not in self.__dict__:
            raise AttributeError("not calibrated: call calibrate(X_calib, y_calib) first")
        return float(check_alpha(self.alpha, "alpha")[0])

    @property
    def partition_ranks_(self) -> NDArray:
        """Rank of every calibration partition's threshold at the (first) ``alpha``."""
        return self._ranks(self._current_level())

    @property
    def partition_thresholds_(self) -> NDArray:
        """Threshold of every calibration partition at the (first) ``alpha``."""
        return self._partition_thresholds(self.partition_ranks_, 0)[0]

    @property
    def majority_threshold_(self) -> int:
        """A label enters the set with more than this many partition votes."""
        return majority_threshold(int(self.k_calib), self._current_level())

    @property
    def majority_coverage_(self) -> float:
        """The coverage `majority_coverage` gives for these partition sizes.

        Its quadrature is slow (a pass over every partition at thousands of nodes), so the
        value is kept per calibration, under the sizes, ranks and threshold it is a function
        of: a changed ``alpha``, ``coverage`` or ``k_calib`` computes it again, a new
        `calibrate` clears it, and a pickle leaves it out.
        """
        return self._majority_coverage_at(self._current_level())  # raises: not calibrated

    def _majority_coverage_at(self, level: float) -> float:
        """`majority_coverage_` at the level ``level`` (kept per calibration)."""
        ranks = np.asarray(self._ranks(level), dtype=np.int64)
        sizes = np.asarray(self.partition_sizes_, dtype=np.int64)
        threshold = majority_threshold(int(self.k_calib), level)
        cache = self.__dict__.setdefault("_coverage_cache", {})
        key = (sizes.tobytes(), ranks.tobytes(), threshold)
        if key not in cache:
            cache[key] = majority_coverage(sizes, ranks, threshold)
        return cache[key]

    def _warn_majority_below(self, levels: NDArray) -> None:
        """Warn when the coverage formula gives the majority set less than ``1 - level``,
        once per level (and ``coverage``) of a calibration: at calibrate for its levels, at
        prediction for a level given to the call or set by ``set_params(alpha=...)`` since."""
        checked = self.__dict__.setdefault("_majority_checked", set())
        for level in map(float, np.unique(levels)):
            if (key := (level, self.coverage, int(self.k_calib))) in checked:
                continue
            checked.add(key)
            covered = self._majority_coverage_at(level)
            if covered >= 1 - level - 1e-9:
                continue
            cause, remedy = (
                ("With these unequal calibration partition sizes", "more calibration data or "
                 "fewer partitions fixes it")
                if self.coverage == "exact"
                else ("With coverage='paper' (the published rank)", "coverage='exact' (the "
                      "default) gives at least 1 - alpha")
            )  # fmt: skip
            warn_user(
                f"{cause} the majority set covers {covered:.4f} < 1 - alpha = {1 - level:.4f} "
                f"by the coverage formula; {remedy}.",
                UserWarning,
            )

    @staticmethod
    def _warn_if_rows_repeat(digests: NDArray, k: int) -> None:
        """Equal feature rows share a partition, so with many repeats the partitions are
        not random samples of the calibration rows, which the coverage formula assumes."""
        counts = np.unique(digests, return_counts=True)[1]
        effective = digests.size**2 / float(np.sum(counts.astype(float) ** 2))
        # repeats, and few distinct rows per partition (small partitions alone are fine)
        if effective < _REPEATS_PER_PARTITION * k and effective < 0.9 * digests.size:
            warn_user(
                f"The {digests.size} calibration rows hold only about {effective:.0f} "
                "distinct feature rows (effective count): equal rows share a hash partition, "
                "so the partitions are not random samples and the coverage of 1 - alpha can "
                "fail, for a given draw of the data and on average (reviews, nominal 0.90, "
                "600 rows: with 20 distinct rows one draw in ten covered below 0.84; with "
                "10 the mean over 200 draws was about 0.887, two standard errors below). "
                "RPS assumes nearly distinct feature rows; with repeated rows prefer split "
                "conformal prediction (no poisoning certificate) or fewer partitions.",
                UserWarning,
            )

    def _check_sizes(self, sizes: NDArray, alpha: float, r_calib: int) -> None:
        """For a certificate: every partition needs a threshold, and room for the radius
        above `minimum_scores` (a partition poisoned below its minimum gets rank 0 and votes
        for every label: one flip, which the certificate counts)."""
        needed = max(
            minimum_partition_size(int(self.k_calib), alpha, self.coverage),
            minimum_scores(alpha) + r_calib,
        )
        if sizes.min() < needed:
            worst = int(np.argmin(sizes))
            radius = f" and r_calib={r_calib}" if r_calib else ""
            raise ValueError(
                f"Calibration partition {worst} has {int(sizes[worst])} points, but at "
                f"alpha={alpha}{radius} every one of the k_calib={int(self.k_calib)} partitions "
                f"needs at least {needed} for a certificate (a threshold above the smallest "
                f"score, coverage={self.coverage!r}{', plus the radius' if r_calib else ''}): "
                "use fewer calibration partitions or more calibration data."
            )

    def _warn_small_partitions(self, sizes: NDArray, levels: NDArray) -> None:
        """Partitions below their minimum get rank 0 and vote for every label: the sets
        stay valid but grow (every set is full when more than tau of them are small)."""
        level = float(np.min(levels))
        needed = minimum_partition_size(int(self.k_calib), level, self.coverage)
        small = np.flatnonzero(sizes < needed)
        if small.size:
            tau = majority_threshold(int(self.k_calib), level)
            consequence = (
                "so every set holds every label"
                if small.size > tau
                else "so they vote for every label and the sets grow"
            )
            warn_user(
                f"{small.size} of the k_calib={int(self.k_calib)} calibration partitions have "
                f"fewer than the {needed} points a threshold needs at alpha={level:g} "
                f"(coverage={self.coverage!r}; smallest {int(sizes[small].min())}), "
                f"{consequence}: use fewer calibration partitions or more calibration data.",
                UserWarning,
            )

    def _warn_small_partitions_again(self, levels: NDArray) -> None:
        """`_warn_small_partitions` at prediction, for a level below the one calibrate
        checked (given to the call, or set by ``set_params(alpha=...)`` since: a larger
        level needs fewer points, so it is covered by calibrate's warning)."""
        checked = self.__dict__.get("_checked_level")  # None: pickled before it was kept
        if checked is None or float(np.min(levels)) < checked:
            self._warn_small_partitions(self.partition_sizes_, levels)

    def _coverage_law_bounds(self, alphas: NDArray, n_test: int, confidence: float) -> NDArray:
        """`uqconform.evaluation.evaluate`'s bounds ``(k, 2)``: the majority set's
        coverage law at each level (`majority_coverage_bounds`, with the ranks of
        ``coverage="exact"``, the guarantee's). It spreads more than split
        CP's law over all calibration rows, by which a valid model read "BELOW" two to
        three times as often as ``confidence`` allows in a review."""
        sizes = np.asarray(self.partition_sizes_, dtype=np.int64)
        k = int(self.k_calib)
        # the law of the guarantee, the "exact" ranks, whatever `coverage` is: a model
        # whose paper ranks cover less can then read "BELOW" (diff review 54)
        return np.array(
            [
                majority_coverage_bounds(
                    sizes,
                    self._ranks(level, "exact"),
                    majority_threshold(k, level),
                    n_test,
                    confidence,
                )
                for level in map(float, alphas)  # a loop over levels
            ]
        )

    def _ranks(self, alpha: float, coverage: str | None = None) -> NDArray:
        """Each partition's threshold rank (``coverage``: the rule, ``self.coverage``
        when None)."""
        rule = self.coverage if coverage is None else coverage
        return np.array(
            [partition_rank(n, int(self.k_calib), alpha, rule) for n in self.partition_sizes_]
        )

    def _thresholds(self, scores: NDArray, ranks: NDArray) -> NDArray:
        """Threshold of every calibration partition (a loop over partitions)."""
        part = self.calibration_partition_
        return np.array(
            [_partition_threshold(scores[part == i], int(r)) for i, r in enumerate(ranks)]
        )

    def _check_calibrated(self, method: str) -> None:
        check_wrapper_fitted(
            self, "estimators_", method, "fit(X, y) and then calibrate(X_calib, y_calib)"
        )
        if not hasattr(self, "conformity_scores_"):
            raise NotFittedError(
                "ReliablePredictionSets needs calibration: call calibrate(X_calib, y_calib) on "
                "held-out data first."
            )
        self._check_fit_settings(method)
        check_calibration_settings(self, method)
        check_not_retrained(self, method)

    def _level(self, alpha: float | None) -> float:
        """The one level of a call: ``alpha``, or the constructor's (first) level."""
        levels = check_call_alpha(alpha, self.alpha)
        if alpha is not None and levels.size != 1:
            raise ValueError(
                f"`alpha` must be a single level here, got {_sentence_end(value_summary(alpha))}"
            )
        return float(levels[0])

    # ---- prediction ----------------------------------------------------------------------
    def partition_sets(self, X: Any, alpha: float | None = None) -> NDArray:
        """Set of every calibration partition: bool ``(n_samples, n_classes, k_calib)``.

        `predict_set` keeps a label when more than ``majority_threshold(k_calib, alpha)`` of
        these sets hold it (``majority_threshold_`` at the constructor's level).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float, optional
            One miscoverage level; defaults to the constructor's (first) ``alpha``.

        Returns
        -------
        ndarray of bool, shape (n_samples, n_classes, k_calib)
            ``[i, j, p]``: label ``classes_[j]`` is in partition ``p``'s set for row ``i``.
        """
        self._check_calibrated("partition_sets")
        level = self._level(alpha)
        self._warn_small_partitions_again(np.array([level]))
        self._warn_majority_below(np.array([level]))
        thresholds = self._partition_thresholds(self._ranks(level), 0)[0]
        return self.predict_scores(X)[:, :, None] >= thresholds[None, None, :]

    def predict_set(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        """Majority prediction sets as a boolean mask over ``classes_``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.

        Returns
        -------
        ndarray of bool, shape (n_samples, n_classes) or (n_samples, n_classes, k)
            May hold empty sets: they are part of the guarantee and of the certificates.
        """
        self._check_calibrated("predict_set")
        value = self.alpha if alpha is None else alpha
        levels = check_call_alpha(alpha, self.alpha, X)
        scores = self.predict_scores(X)
        out = np.empty((*scores.shape, levels.size), dtype=bool)
        self._warn_small_partitions_again(levels)
        self._warn_majority_below(levels)
        for j, level in enumerate(levels):  # a loop over levels
            thresholds = self._partition_thresholds(self._ranks(float(level)), 0)[0]
            votes = _votes_reached(scores, thresholds)
            out[..., j] = votes > majority_threshold(int(self.k_calib), float(level))
        return out[..., 0] if np.ndim(value) == 0 else out

    # ---- certificates --------------------------------------------------------------------
    def _test_votes(self, X: Any) -> NDArray:
        """Vote counts of the rows (their probabilities when ``k_train = 1``)."""
        if self._probability_mode():
            return self._probabilities(X)
        return self.vote_counts(X)

    def _test_bounds(self, votes: NDArray, r_train: int) -> tuple[NDArray, NDArray, NDArray]:
        """Scores of every label now, and their lowest and highest values under ``r_train``."""
        if self._probability_mode():
            if r_train == 0:
                return votes, votes, votes
            return votes, np.zeros_like(votes), np.ones_like(votes)
        k, kind = self.k_train_, self.conformity_score
        scores = _smoothed(votes, k, kind)
        if r_train == 0:
            return scores, scores, scores
        every = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)  # each label
        low, high = _target_bounds(votes, every, r_train, k, kind)
        return scores, low, high

    def _partition_thresholds(
        self, ranks: NDArray, r_train: int
    ) -> tuple[NDArray, NDArray, NDArray]:
        """Threshold of every partition now, and its lowest and highest value under
        ``r_train`` (training poisoning moves every calibration score, within its own
        bounds). They depend on the calibration data only, so they are computed once per
        calibration, ranks and radius: a call on a few rows does not re-read every
        calibration score."""
        cache = self.__dict__.setdefault("_threshold_cache", {})
        key = (ranks.tobytes(), r_train)
        if key in cache:
            return cache[key]
        now = self._thresholds(self.conformity_scores_, ranks)
        if r_train == 0:
            lowest = highest = now
        else:
            if self._probability_mode():
                low = np.zeros_like(self.conformity_scores_)
                high = np.ones_like(low)
            else:
                assert self._calibration_counts is not None  # calibrate set it: votes mode
                low, high = _target_bounds(
                    self._calibration_counts,
                    self._calibration_labels,
                    r_train,
                    self.k_train_,
                    self.conformity_score,
                )
            lowest, highest = self._thresholds(low, ranks), self._thresholds(high, ranks)
        cache[key] = (now, lowest, highest)
        return cache[key]

    def _certify_from(self, bounds, r_train, r_calib, level) -> dict[str, NDArray]:
        scores, low, high = bounds
        ranks = self._ranks(level)
        tau = majority_threshold(int(self.k_calib), level)
        thresholds, lowest, highest = self._partition_thresholds(ranks, r_train)
        now = _votes_reached(scores, thresholds)
        in_set = now > tau
        surely_in = _votes_reached(low, highest)
        maybe_in = _votes_reached(high, lowest)
        stays = surely_in - r_calib > tau  # cannot leave the set
        stays_out = maybe_in + r_calib <= tau  # cannot enter it
        # rows of 2-D masks: arrays, never a numpy scalar
        coverage = cast(NDArray, np.where(in_set, stays, True).all(axis=1))
        size = cast(NDArray, np.where(in_set, True, stays_out).all(axis=1))
        return {"coverage_reliable": coverage, "size_reliable": size, "robust": coverage & size}

    def _warn_if_adopted(self, r_train: int) -> None:
        """Models given fitted (``training_partition_sizes_`` None): a training radius
        assumes what nothing here can check, that each training row reached one model.
        (One model, ``k_train = 1``, assumes nothing: its scores may move anywhere.)"""
        if r_train > 0 and self.training_partition_sizes_ is None and self.k_train_ > 1:
            warn_user(
                f"The training certificate (r_train={r_train}) of the {self.k_train_} models "
                "given fitted in `estimator` assumes disjoint training partitions: each "
                "training row reached at most one model, and where it went depends on that "
                "row alone (e.g. the rows of hash_partition(X_train, k_train, salt) == i for "
                "model i; a split by position moves rows between models when one is "
                "inserted or deleted). For models trained on overlapping data (bags, shared "
                "rows), one poisoned row can change every model and the training "
                "certificate does not hold; certificates of a calibration radius (r_calib) "
                "do not depend on it.",
                UserWarning,
            )

    def _check_radii(self, r_train: Any, r_calib: Any, level: float) -> tuple[int, int]:
        r_train = check_int(r_train, "r_train", low=0)
        r_calib = check_int(r_calib, "r_calib", low=0)
        self._check_sizes(self.partition_sizes_, level, r_calib)
        return r_train, r_calib

    def certify(
        self, X: Any, r_train: int = 0, r_calib: int = 0, alpha: float | None = None
    ) -> dict[str, NDArray]:
        """Which prediction sets provably survive poisoning of the given size.

        The radius counts poisoned points: each inserted, deleted or relabelled point
        counts 1; changing a point's features counts 2 (a deletion and an insertion).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        r_train : int, default=0
            Poisoned training points, with labels in the label set: ``classes``, or when it
            is not given the training labels, which one poisoned point can change (a label
            no other training row has adds one, the deletion or relabelling of a label's
            last row removes one), changing the sets (with ``"vote_softmax"`` every row's
            scores) beyond the certificate; a fixed ``classes`` refuses training labels
            outside it. For models given fitted as a list in ``estimator`` the certificate
            assumes disjoint training partitions, each row's chosen by that row alone
            (`hash_partition`), which nothing here can check: it warns.
        r_calib : int, default=0
            Poisoned calibration points; every calibration partition must keep at least
            ``max(minimum_partition_size(k_calib, alpha, coverage),
            minimum_scores(alpha) + r_calib)`` points, otherwise a ``ValueError`` (a
            partition that deletions shrink below its minimum gets rank 0 and votes for
            every label: one flip, which the certificate counts).
        alpha : float, optional
            Defaults to the constructor's (first) ``alpha``.

        Returns
        -------
        dict of str to ndarray of bool of shape (n_samples,)
            ``"coverage_reliable"``: no label of the set can leave it (a covered true label
            stays covered; empty sets qualify). ``"size_reliable"``: no label can join it
            (full sets qualify). ``"robust"``: both, the set cannot change.
        """
        self._check_calibrated("certify")
        level = self._level(alpha)
        r_train, r_calib = self._check_radii(r_train, r_calib, level)
        self._warn_if_adopted(r_train)
        bounds = self._test_bounds(self._test_votes(X), r_train)
        return self._certify_from(bounds, r_train, r_calib, level)

    def reliability_curve(
        self, X: Any, radii: ArrayLike, poisoned: str = "calibration", alpha: float | None = None
    ) -> dict[str, NDArray]:
        """Share of rows certified at each radius, for plots.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        radii : sequence of int
        poisoned : {"calibration", "training", "both"}, default="calibration"
            Which data the radius applies to (``"both"``: ``r_train = r_calib = radius``).
        alpha : float, optional

        Returns
        -------
        dict of str to ndarray
            ``"radius"`` and, per radius, the ratios ``"coverage_reliable"``,
            ``"size_reliable"`` and ``"robust"``.
        """
        if poisoned not in ("calibration", "training", "both"):
            raise ValueError(
                f"`poisoned` must be 'calibration', 'training' or 'both', got {poisoned!r}."
            )
        self._check_calibrated("reliability_curve")
        level = self._level(alpha)
        # the user's entries, not an array's (which turns [0, 1, 2.5] into floats and
        # [True, 2] into integers)
        entries = list(radii) if isinstance(radii, (list, tuple)) else np.asarray(radii).tolist()
        if np.ndim(radii) != 1 or not entries:
            raise ValueError("`radii` must be a non-empty 1-D sequence of integers.")
        pairs = []
        for radius in entries:  # validate every radius before any work
            check_int(radius, "radii", low=0)  # each entry, named as the user gave it
            r_train = radius if poisoned in ("training", "both") else 0
            r_calib = radius if poisoned in ("calibration", "both") else 0
            pairs.append(self._check_radii(r_train, r_calib, level))
        self._warn_if_adopted(max(r_train for r_train, _ in pairs))
        curve: dict[str, list] = {"coverage_reliable": [], "size_reliable": [], "robust": []}
        votes = self._test_votes(X)
        cache: dict[int, Any] = {}
        for r_train, r_calib in pairs:  # a loop over radii
            if r_train not in cache:
                cache[r_train] = self._test_bounds(votes, r_train)
            certified = self._certify_from(cache[r_train], r_train, r_calib, level)
            for key, value in certified.items():
                curve[key].append(float(value.mean()))
        return {
            "radius": np.array(entries, dtype=int),
            **{k: np.array(v) for k, v in curve.items()},
        }
