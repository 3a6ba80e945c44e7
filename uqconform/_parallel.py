"""Independent fits through ``joblib.Parallel``, with a progress bar of finished fits.

Every loop over independent model fits (bootstrap models, heads, partitions) runs here, so
that ``n_jobs`` and a ``joblib.parallel_config(backend="dask")`` apply to all of them, and
``verbose=True`` shows one ``tqdm`` bar that advances as fits finish (not as they are sent).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from joblib import Parallel

__all__ = ["run_fits"]


def run_fits(
    jobs: Iterable[Any], *, n_jobs: int | None, verbose: bool, desc: str, total: int
) -> list[Any]:
    """Results of ``joblib.delayed`` ``jobs``, in order.

    Parameters
    ----------
    jobs : iterable of joblib delayed calls
    n_jobs : int or None
        As in ``joblib.Parallel`` (None: one job, or the active ``parallel_config``).
    verbose : bool
        Show a ``tqdm`` bar named ``desc`` counting finished fits out of ``total``.
    desc : str
    total : int

    Examples
    --------
    >>> from joblib import delayed
    >>> run_fits((delayed(pow)(i, 2) for i in range(4)), n_jobs=None, verbose=False,
    ...          desc="squares", total=4)
    [0, 1, 4, 9]
    """
    if not verbose:
        return Parallel(n_jobs=n_jobs)(jobs)
    from tqdm.auto import tqdm

    jobs = list(jobs)  # kept for the fallback below
    try:
        finished = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    except ValueError as error:  # a backend without generator output (multiprocessing)
        if "return_as" not in str(error):
            raise
        finished = None
    if finished is None:  # outside the except: a job's own error is not chained to it
        finished = Parallel(n_jobs=n_jobs)(jobs)  # the bar then fills at the end
    return list(tqdm(finished, total=total, desc=desc))
