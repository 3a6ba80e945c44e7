"""Independent fits through ``joblib.Parallel``, with a progress bar of finished fits.

Every loop over independent model fits (bootstrap models, heads, partitions) runs here, so
that ``n_jobs`` and a ``joblib.parallel_config(backend="dask")`` apply to all of them, and
``verbose=True`` shows one ``tqdm`` bar that advances as fits finish (not as they are sent).
Warnings raised by a fit in another process (loky, multiprocessing, dask) are recorded
there and raised again in the calling process, each distinct one once: without that they
were printed by the worker, out of reach of the caller's warning filters and of
``pytest.warns``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from joblib import Parallel, delayed

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
    parent = os.getpid()
    jobs = [delayed(_recording_warnings)(parent, *job) for job in jobs]
    if not verbose:
        return _reraise_warnings(Parallel(n_jobs=n_jobs)(jobs))
    from tqdm.auto import tqdm

    try:
        finished = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    except ValueError as error:  # a backend without generator output (multiprocessing)
        if "return_as" not in str(error):
            raise
        finished = None
    if finished is None:  # outside the except: a job's own error is not chained to it
        finished = Parallel(n_jobs=n_jobs)(jobs)  # the bar then fills at the end
    return _reraise_warnings(list(tqdm(finished, total=total, desc=desc)))


def _recording_warnings(
    parent: int, function: Callable[..., Any], args: tuple, kwargs: dict
) -> tuple[Any, list[tuple[str, type[Warning], str, int]]]:
    """``function(*args, **kwargs)`` and, when run in another process than ``parent``,
    the warnings it raised (in this process, they reach the caller's filters directly:
    recording them would also race with other threads' warning filters)."""
    if os.getpid() == parent:
        return function(*args, **kwargs), []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def _reraise_warnings(outcomes: list[tuple[Any, list]]) -> list[Any]:
    """The results of `_recording_warnings` jobs, after raising each distinct recorded
    warning once, in the order first seen (through the caller's filters)."""
    seen = dict.fromkeys(record for _, records in outcomes for record in records)
    for message, category, filename, lineno in seen:
        warnings.warn_explicit(message, category, filename, lineno)
    return [result for result, _ in outcomes]
