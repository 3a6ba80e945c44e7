"""Simulated poisoning of training or calibration data, to check poisoning certificates.

Each attack returns new arrays (the inputs are never modified) with ``n_points`` rows
relabelled (`flip_labels`), added (`insert_points`) or removed (`delete_points`); each of
those counts one towards a certificate's radius. Where the rows go:

* ``strategy="random"``: rows drawn uniformly at random;
* ``"spread"``: one row in each of ``n_points`` different partitions, the most damaging way
  to use a budget against a majority vote over partitions;
* ``"concentrated"``: every row in one partition.

``partitions`` gives the partition of every row (e.g. `hash_partition` with the model's
``k_train`` or ``k_calib`` and ``salt``), and ``target`` the partitions to hit first; by
default they are chosen at random. `worst_partitions` ranks a fitted
`ReliablePredictionSets` model's partitions by how many test sets sit one vote from
changing because of them: the targets of a worst-case attack.

Inserted rows are copies of existing rows with another label: the same features, hence
the same partition, and a label the model finds implausible. Deletions and flips never
remove the last row of a label (the last one in attack order is spared), so the labels of
``y`` (and the columns of the sets) stay; only ``new_labels`` can add one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from uqconform._rows import shared_categories, take_rows
from uqconform._seeding import random_generator
from uqconform._validation import check_int, check_row_order

__all__ = ["delete_points", "flip_labels", "insert_points", "worst_partitions"]

STRATEGIES = ("random", "spread", "concentrated")


def _concat(first: Any, second: Any) -> Any:
    """``second``'s rows appended to ``first``'s, in ``first``'s container (an array of
    rows appended to a DataFrame gets its column names)."""
    if hasattr(first, "iloc"):
        import pandas as pd

        if not hasattr(second, "iloc"):  # X's columns and, where they hold, its dtypes
            second = pd.DataFrame(np.asarray(second), columns=first.columns)
            dtypes = {  # (category columns below: an astype would make new values NaN)
                name: dtype
                for name, dtype in first.dtypes.items()
                if not isinstance(dtype, pd.CategoricalDtype)
            }
            second = second.astype(dtypes, errors="ignore")
        # X's dtypes rule: a column categorical in source only takes X's dtype, and a
        # category column of X takes the union of both frames' categories (pd.concat turns
        # a column whose categories differ between the frames into text)
        only_source = [
            position
            for position, (own, other) in enumerate(zip(first.dtypes, second.dtypes, strict=True))
            if isinstance(other, pd.CategoricalDtype) and not isinstance(own, pd.CategoricalDtype)
        ]
        if only_source:
            second = second.copy(deep=False)  # (isetitem never writes into the old array)
            for position in only_source:
                column = second.iloc[:, position]
                try:
                    second.isetitem(position, column.astype(first.dtypes.iloc[position]))
                except (TypeError, ValueError):  # values X's dtype cannot hold: as given
                    second.isetitem(position, column.astype(object))
        first, second, _ = shared_categories(first, second, ("X", "source"))
        return pd.concat([first, second], ignore_index=True)
    return np.concatenate([np.asarray(first), np.asarray(second)])


def _source_columns(X: Any, pool_X: Any) -> Any:
    """``source``'s DataFrame with ``X``'s columns in ``X``'s order; other names refused
    (they would be appended as new columns, full of NaN)."""
    if not (hasattr(X, "columns") and hasattr(pool_X, "columns")):
        return pool_X
    if pool_X.columns.equals(X.columns):
        return pool_X
    if set(pool_X.columns) != set(X.columns) or len(pool_X.columns) != len(X.columns):
        raise ValueError(
            f"`source` is a DataFrame with columns {list(pool_X.columns)[:5]}, but X has "
            f"{list(X.columns)[:5]}: give X_source the column names of X (e.g. "
            "X_source.set_axis(X.columns, axis=1)) or pass its values as an array."
        )
    return pool_X[X.columns]


def _check(
    X: Any, y: ArrayLike, n_points: Any, strategy: str, name: str = "y", rows_of: str = "X"
) -> tuple[NDArray, int]:
    """``y`` as an array of labels paired with ``X``'s rows, and ``n_points`` as an int.

    A pandas ``y`` indexed by ``X``'s row labels in another order is refused (rows are
    paired by position), as the wrappers refuse it.
    """
    check_row_order(X, y, name, rows_of)
    if np.ndim(X) == 1 and np.asarray(X).dtype.kind in "biuf":
        raise ValueError(
            f"`{rows_of}` must be 2-D (one row per sample), got a 1-D array of shape "
            f"{np.shape(X)}: use {rows_of}.reshape(-1, 1) for a single feature."
        )
    labels = np.asarray(y)
    n = len(X)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"`{name}` must be 1-D with one label per row of {rows_of} ({n}), got {labels.shape}."
        )
    check_int(n_points, "n_points", low=0)
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {list(STRATEGIES)}, got {strategy!r}.")
    return labels, int(n_points)


def _check_rows(X: Any, rows_of: str, **values: Any) -> None:
    """Refuse a pandas argument (``order``, ``new_labels``, ``partitions``) indexed by the
    row labels of ``X`` (named ``rows_of``) in another order: each is read by position."""
    for name, value in values.items():
        if value is not None:
            check_row_order(X, value, name, rows_of)


def _priority(order: ArrayLike, n: int) -> NDArray:
    """``order`` as one finite number per row (smallest attacked first); a pandas ``order``
    is checked against the rows' labels beforehand (`_check_rows`)."""
    try:
        priority = np.asarray(order, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("`order` must hold one number per row (smallest first).") from None
    if priority.shape != (n,):
        raise ValueError(f"`order` must have one entry per row ({n}), got shape {priority.shape}.")
    if not np.isfinite(priority).all():
        raise ValueError(
            f"`order` contains {int((~np.isfinite(priority)).sum())} NaN or infinite values: "
            "give every row a finite number (smallest attacked first)."
        )
    return priority


def _pick_rows(
    n_points: int,
    eligible: NDArray,
    partitions: ArrayLike | None,
    target: ArrayLike | None,
    strategy: str,
    rng: np.random.Generator,
    order: ArrayLike | None = None,
    spare: NDArray | None = None,
) -> NDArray:
    """Row indices (distinct) among ``eligible`` placed as the strategy says; rows with the
    smallest ``order`` first (random order without it).

    ``spare`` (the label of every row): when the rows the attack can reach hold every row
    of a label, the last of them in attack order is left alone, so the label stays. The
    draws are those without ``spare``: the rows picked differ only where they would have
    taken a label's every row.
    """
    candidates = np.flatnonzero(eligible)
    # a label kept whole is left a row: the rows one attack can take at most
    most = candidates.size - (0 if spare is None else np.unique(spare[candidates]).size)
    if most < n_points:
        spared = "" if spare is None else " (the last row of each label is spared)"
        raise ValueError(
            f"Only {most} rows can be attacked{spared}, fewer than n_points={n_points}."
        )
    if order is None:
        shuffled = rng.permutation(candidates)
    else:
        priority = _priority(order, eligible.size)
        shuffled = candidates[np.argsort(priority[candidates], kind="stable")]
    if partitions is not None:  # checked whatever the strategy: nothing silently ignored
        part = np.asarray(partitions)
        if part.shape != eligible.shape:
            raise ValueError(f"`partitions` must have one entry per row ({eligible.size}).")
        if part.dtype.kind not in "iu":
            raise ValueError(
                "`partitions` must hold integer partition indices (e.g. from hash_partition), "
                f"got dtype {part.dtype}."
            )
    if strategy == "random" and target is not None:
        raise ValueError(
            "`target` (the partitions to attack first) is read by strategy='spread' or "
            "'concentrated'; strategy='random' attacks rows anywhere."
        )
    if strategy != "random" and partitions is None:
        raise ValueError(f"strategy={strategy!r} needs `partitions` (the partition of every row).")
    if target is not None:
        _check_target(target, part)
    if n_points == 0:  # every argument checked above
        return shuffled[:0]
    if strategy == "random":
        sequence = shuffled  # every row that can be attacked, in attack order
        shortfall = f"Only {{}} rows can be attacked, fewer than n_points={n_points}."
    else:
        sequence = _partition_sequence(shuffled, part, target, strategy, rng)
        shortfall = (
            f"Partition {part[sequence[0]]} has {{}} rows that can be attacked, fewer than "
            f"n_points={n_points}."
            if strategy == "concentrated"
            else f"Fewer than n_points={n_points} rows can be attacked ({{}})."
        )
    if spare is not None:
        reached = sequence.size
        sequence = _spare_last(sequence, spare)
        if sequence.size < reached:  # said only when a label lost its last row to it
            shortfall += (
                " The last row of a label the attack would take whole is spared "
                f"({reached - sequence.size} here)."
            )
    if sequence.size < n_points:
        raise ValueError(shortfall.format(sequence.size))
    return sequence[:n_points]


def _check_target(target: ArrayLike, part: NDArray) -> None:
    """Refuse a ``target`` that is not integer partition indices, or names a partition
    no row of ``partitions`` is in (it would be dropped, and other partitions attacked)."""
    wanted = np.asarray(target).ravel()
    if wanted.dtype.kind not in "iu":
        raise ValueError(
            "`target` must hold integer partition indices (those of `partitions`), got "
            f"{np.asarray(target)!r:.80}."
        )
    missing = np.setdiff1d(wanted, part)
    if missing.size:
        raise ValueError(
            f"`target` names partitions {missing.tolist()[:5]} that no row is in (the "
            f"partitions of the rows: {np.unique(part).tolist()[:20]}): name only partitions "
            "that `partitions` holds."
        )


def _partition_sequence(
    shuffled: NDArray,
    part: NDArray,
    target: ArrayLike | None,
    strategy: str,
    rng: np.random.Generator,
) -> NDArray:
    """Every row the ``"spread"`` or ``"concentrated"`` attack can reach, in the order it
    takes them: ``"concentrated"`` the rows of the first target partition; ``"spread"``
    one row of each target partition in turn, round after round (``shuffled``: the rows
    that can be attacked, in attack order)."""
    present = np.unique(part[shuffled])
    sequence = rng.permutation(present) if target is None else np.asarray(target).ravel()
    first = np.sort(np.unique(sequence, return_index=True)[1])  # a partition once, in order
    sequence = sequence[first]
    sequence = sequence[np.isin(sequence, present)]
    if sequence.size == 0:
        raise ValueError("None of the `target` partitions holds a row that can be attacked.")
    if strategy == "concentrated":
        return shuffled[part[shuffled] == sequence[0]]
    rows = shuffled[np.isin(part[shuffled], sequence)]
    own = part[rows]
    # round (depth) of a row: how many rows of its partition come before it
    by_partition = np.argsort(own, kind="stable")
    grouped = own[by_partition]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    depth = np.empty(rows.size, dtype=np.intp)
    depth[by_partition] = np.arange(rows.size) - np.repeat(
        starts, np.diff(np.r_[starts, rows.size])
    )
    sorter = np.argsort(sequence, kind="stable")
    turn = sorter[np.searchsorted(sequence, own, sorter=sorter)]  # place in the target order
    return rows[np.lexsort((turn, depth))]


def _spare_last(sequence: NDArray, labels: NDArray) -> NDArray:
    """``sequence`` without the last row of every label whose rows it holds all of."""
    _, index = np.unique(labels, return_inverse=True)
    codes = index[sequence]
    every = np.bincount(codes, minlength=index.max() + 1) == np.bincount(index)
    reversed_first = np.unique(codes[::-1], return_index=True)
    last = sequence.size - 1 - reversed_first[1]  # position of each label's last row
    drop = last[every[reversed_first[0]]]
    return np.delete(sequence, drop)


def _other_labels(labels: NDArray, rows: NDArray, rng: np.random.Generator) -> NDArray:
    """A different label, drawn uniformly among the others, for every row."""
    classes, index = np.unique(labels, return_inverse=True)
    if classes.size < 2:
        raise ValueError("`y` has a single label: there is no other label to flip to.")
    shift = rng.integers(1, classes.size, size=rows.size)
    return classes[(index[rows] + shift) % classes.size]


def _new_labels(
    labels: NDArray, rows: NDArray, new_labels: ArrayLike | None, rng: np.random.Generator
) -> NDArray:
    if new_labels is None:
        return _other_labels(labels, rows, rng)
    chosen = np.asarray(new_labels)
    if chosen.shape != labels.shape:
        raise ValueError(f"`new_labels` must have one entry per row ({labels.size}).")
    kept = rows[chosen[rows] == labels[rows]]
    if kept.size:
        raise ValueError(
            f"`new_labels` gives {kept.size} attacked row(s) their own label (first: row "
            f"{kept[0]}): an attacked row must get another label."
        )
    return chosen[rows]


def flip_labels(
    X: Any,
    y: ArrayLike,
    n_points: int,
    *,
    partitions: ArrayLike | None = None,
    target: ArrayLike | None = None,
    strategy: str = "random",
    order: ArrayLike | None = None,
    new_labels: ArrayLike | None = None,
    random_state: int | np.random.Generator | None = None,
) -> tuple[Any, NDArray]:
    """Give ``n_points`` rows another label (drawn among the other labels of ``y``).

    A label keeps at least one row: when the rows the attack can reach hold all of a
    label's rows, the last of them in attack order (the largest ``order``; random without
    it) is never relabelled, as `delete_points` never deletes it. Otherwise the rows are
    those the attack takes without that rule.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Paired with the rows of ``X`` by position, as are ``partitions``, ``order`` and
        ``new_labels``: a pandas Series indexed by ``X``'s row labels in another order is
        refused (``.reindex(X.index)`` puts it in order), as the wrappers refuse it.
    n_points : int
        Rows relabelled (the radius of the attack).
    partitions : array-like of int of shape (n_samples,), optional
        Partition of every row; needed by ``"spread"`` and ``"concentrated"``.
    target : sequence of int, optional
        Partitions to attack, first ones first (default: random order); each must be a
        partition of some row in ``partitions``.
    strategy : {"random", "spread", "concentrated"}, default="random"
    order : array-like of shape (n_samples,), optional
        Attack the rows with the smallest values first (e.g. the model's conformity score of
        their label, to relabel the least typical rows; minus that score for the most
        typical); random order by default.
    new_labels : array-like of shape (n_samples,), optional
        The label each row gets if attacked (e.g. its least plausible one); by default a
        random other label.
    random_state : int, Generator or None

    Returns
    -------
    X_new, y_new
        ``X`` itself is returned unchanged (features are not touched); ``y_new`` is a copy.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(10.0).reshape(5, 2), np.array([0, 1, 0, 1, 0])
    >>> _, y_new = flip_labels(X, y, 2, random_state=0)
    >>> int((y_new != y).sum()), y.tolist()
    (2, [0, 1, 0, 1, 0])
    """
    labels, n_points = _check(X, y, n_points, strategy)
    _check_rows(X, "X", order=order, new_labels=new_labels, partitions=partitions)
    rng = random_generator(random_state)
    eligible = np.ones(labels.size, bool)
    rows = _pick_rows(n_points, eligible, partitions, target, strategy, rng, order, labels)
    new = labels.copy()
    new[rows] = _new_labels(labels, rows, new_labels, rng)
    return X, new


def insert_points(
    X: Any,
    y: ArrayLike,
    n_points: int,
    *,
    partitions: ArrayLike | None = None,
    target: ArrayLike | None = None,
    strategy: str = "random",
    order: ArrayLike | None = None,
    new_labels: ArrayLike | None = None,
    source: tuple[Any, ArrayLike] | None = None,
    random_state: int | np.random.Generator | None = None,
) -> tuple[Any, NDArray]:
    """Append ``n_points`` copies of rows with another label.

    The copies come from ``X`` itself or from ``source = (X_source, y_source)`` (e.g. the
    test rows: a copy of a test row with a wrong label is the strongest single training
    point against that row). A copy has the same features as its original, hence lands in
    the same partition; ``partitions``, ``target``, ``strategy``, ``order`` and
    ``new_labels`` refer to the rows copied from, as in `flip_labels`. Like ``y_source``
    with ``X_source``, they are paired with those rows by position: a pandas one indexed by
    their row labels in another order is refused.

    Returns
    -------
    X_new, y_new
        New arrays (or DataFrame) with the inserted rows at the end, in ``X``'s container:
        rows copied from an array ``source`` get the column names of a DataFrame ``X``; a
        DataFrame ``source`` must have ``X``'s column names (a ``ValueError`` otherwise).

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(10.0).reshape(5, 2), np.array([0, 1, 0, 1, 0])
    >>> X_new, y_new = insert_points(X, y, 3, random_state=0)
    >>> X_new.shape, y_new.shape, X.shape
    ((8, 2), (8,), (5, 2))
    """
    labels, n_points = _check(X, y, n_points, strategy)
    rng = random_generator(random_state)
    if source is None:
        pool_X, pool_labels, pool_name = X, labels, "X"
    else:
        pool_X, pool_y = source
        pool_name = "X_source"
        pool_labels, _ = _check(pool_X, pool_y, n_points, strategy, "y_source", pool_name)
    # the rows copied from are those of the source
    _check_rows(pool_X, pool_name, order=order, new_labels=new_labels, partitions=partitions)
    if np.shape(pool_X)[1:] != np.shape(X)[1:]:
        raise ValueError(
            f"`source` must be (X_source, y_source) with rows like X's: its rows have shape "
            f"{np.shape(pool_X)[1:]}, X's {np.shape(X)[1:]}."
        )
    pool_X = _source_columns(X, pool_X)
    if not set(np.unique(pool_labels).tolist()) <= set(np.unique(labels).tolist()):
        raise ValueError("`source` has labels that `y` does not have.")
    eligible = np.ones(pool_labels.size, bool)
    rows = _pick_rows(n_points, eligible, partitions, target, strategy, rng, order)
    if new_labels is None:  # another label among those of y
        classes = np.unique(labels)
        if classes.size < 2:
            raise ValueError("`y` has a single label: there is no other label to insert with.")
        index = np.searchsorted(classes, pool_labels[rows])
        added = classes[(index + rng.integers(1, classes.size, size=rows.size)) % classes.size]
    else:
        added = _new_labels(pool_labels, rows, new_labels, rng)
    return _concat(X, take_rows(pool_X, rows)), np.concatenate([labels, added])


def delete_points(
    X: Any,
    y: ArrayLike,
    n_points: int,
    *,
    partitions: ArrayLike | None = None,
    target: ArrayLike | None = None,
    strategy: str = "random",
    order: ArrayLike | None = None,
    random_state: int | np.random.Generator | None = None,
) -> tuple[Any, NDArray]:
    """Remove ``n_points`` rows, never the last one of a label.

    ``partitions``, ``target``, ``strategy`` and ``order`` choose the rows as in
    `flip_labels`, and a label keeps a row as there: when the rows the attack reaches hold
    all of a label's rows, the last of them in attack order stays. Otherwise the rows are
    those the attack takes without that rule.

    Returns
    -------
    X_new, y_new
        New arrays (or DataFrame) without the deleted rows.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(10.0).reshape(5, 2), np.array([0, 1, 0, 1, 0])
    >>> X_new, y_new = delete_points(X, y, 2, random_state=0)
    >>> X_new.shape, sorted(set(y_new.tolist()))
    ((3, 2), [0, 1])
    """
    labels, n_points = _check(X, y, n_points, strategy)
    _check_rows(X, "X", order=order, partitions=partitions)
    rng = random_generator(random_state)
    eligible = np.ones(labels.size, bool)
    rows = _pick_rows(n_points, eligible, partitions, target, strategy, rng, order, labels)
    keep = np.ones(labels.size, bool)
    keep[rows] = False
    kept = np.flatnonzero(keep)
    X_new = take_rows(X, kept)
    if hasattr(X_new, "reset_index"):
        X_new = X_new.reset_index(drop=True)
    return X_new, labels[kept]


def worst_partitions(model: Any, X: Any, data: str = "calibration") -> NDArray:
    """Partitions of a fitted `ReliablePredictionSets` ordered from most to least pivotal.

    ``"calibration"``: a partition scores one point for every (row, label) of ``X`` whose
    membership in the majority set flips if that partition alone changes its vote.
    ``"training"``: a model scores one point for every row of ``X`` whose set is not
    certified robust against one poisoned training point and whose vote goes to the
    row's top label (changing that vote moves the row's scores most). That certificate is
    taken even when calibration partitions are too small for `certify` (which refuses
    them): such a partition votes for every label, in the sets as in the certificate.

    Parameters
    ----------
    model : ReliablePredictionSets
        Calibrated.
    X : array-like of shape (n_samples, n_features)
        Rows whose sets the attack aims at (e.g. the test rows).
    data : {"calibration", "training"}, default="calibration"

    Returns
    -------
    ndarray of int
        Partition indices, most pivotal first (ties by index).

    Examples
    --------
    The first ones are the ``target`` of a worst-case attack (`flip_labels`, `insert_points`,
    `delete_points`):

    >>> from uqconform import ReliablePredictionSets
    >>> from uqconform.datasets import make_gaussian_classification
    >>> X, y, _ = make_gaussian_classification(1000, separation=1.0, random_state=0)
    >>> rps = ReliablePredictionSets(k_train=10, k_calib=5, random_state=0)
    >>> rps = rps.fit(X[:400], y[:400]).calibrate(X[400:800], y[400:800])
    >>> worst_partitions(rps, X[800:])  # calibration partitions, most pivotal first
    array([3, 2, 0, 1, 4])
    >>> sorted(worst_partitions(rps, X[800:], "training")) == list(range(10))
    True
    """
    from uqconform.classification.rps import ReliablePredictionSets

    if not isinstance(model, ReliablePredictionSets):
        raise TypeError(
            f"`model` must be a ReliablePredictionSets (its partitions are what is ranked), "
            f"got {type(model).__name__}."
        )
    if data == "calibration":
        member = model.partition_sets(X)  # (n, K, k_calib)
        votes = member.sum(axis=2)
        tau = model.majority_threshold_
        leave = (votes == tau + 1)[:, :, None] & member  # one vote fewer: leaves the set
        join = (votes == tau)[:, :, None] & ~member  # one vote more: joins it
        weight = (leave | join).sum(axis=(0, 1))
    elif data == "training":
        # the training certificate of radius 1, without certify's check of the calibration
        # partition sizes: it is about calibration poisoning (a partition too small for a
        # threshold votes for every label, a fixed vote, here as in the sets)
        model._check_calibrated("worst_partitions")
        model._warn_if_adopted(1)  # models given fitted: the certificate's assumption
        bounds = model._test_bounds(model._test_votes(X), 1)
        fragile = ~model._certify_from(bounds, 1, 0, model._level(None))["robust"]
        top_label = model.classes_[np.argmax(model.predict_scores(X), axis=1)]
        weight = np.zeros(len(model.estimators_), dtype=np.int64)
        for index, member in enumerate(model.estimators_):  # a loop over partition models
            if np.asarray(member.classes_).size:  # an abstaining model has no vote to move
                weight[index] = int((fragile & (member.predict(X) == top_label)).sum())
    else:
        raise ValueError(f"`data` must be 'calibration' or 'training', got {data!r}.")
    return np.lexsort((np.arange(weight.size), -weight))
