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


def test_a_signalling_nan_hashes_as_nan_quietly():
    """diffrev13: adding 0.0 to a signalling NaN raised numpy's "invalid value" warning
    (a FloatingPointError under np.errstate(invalid="raise"))."""
    signalling = np.array([[np.uint64(0x7FF4000000000000).view(np.float64), 1.0]])
    with np.errstate(invalid="raise"):
        hashes = _float_rows_hashes(signalling)
    np.testing.assert_array_equal(hashes, _float_rows_hashes(np.array([[np.nan, 1.0]])))
