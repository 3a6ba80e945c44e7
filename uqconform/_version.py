"""The package version, and pickles that remember it.

A pickled estimator holds private attributes whose names and meaning may change between
versions; loading it under another version can fail later, or silently give other sets
(MAPIE's users met this across a module rename, MAPIE #511). `VersionedState` writes the
version into every pickle of a uqconform estimator and warns when one is loaded under
another version, as scikit-learn does for its own estimators.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

from uqconform._warnings import warn_user

__version__ = "0.1.0.dev0"

__all__ = ["InconsistentVersionWarning", "VersionedState", "__version__"]

_STATE_KEY = "_uqconform_version"


class InconsistentVersionWarning(UserWarning):
    """An estimator was pickled by another version of uqconform than the one loading it.

    Its predictions may differ or fail: refit and recalibrate it under this version (or
    install the version that saved it, named in the message).
    """


#: Private attributes renamed between builds (old name: new name), for older pickles.
_RENAMED_STATE = {
    "_heads_adopted": "_estimator_adopted",
    "_adopted": "_estimator_adopted",
    "_integer_columns_in": "_column_labels_in",
}


class VersionedState:
    """Mixin for estimators: pickles carry ``uqconform.__version__`` and loading one saved
    by another version (or by a version that did not record it) warns with
    `InconsistentVersionWarning`.

    Examples
    --------
    >>> import pickle
    >>> from uqconform import SplitConformalRegressor
    >>> state = SplitConformalRegressor().__getstate__()
    >>> state["_uqconform_version"] == __version__
    True
    """

    def __getstate__(self) -> dict[str, Any]:
        state = cast(dict[str, Any], super().__getstate__())  # BaseEstimator's: a dict
        return {**state, _STATE_KEY: __version__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        saved_by = state.pop(_STATE_KEY, None)
        if saved_by != __version__:
            warn_user(
                # No class name: the estimators nested in one pickle (a CQR's band, an
                # ensemble's heads) then give one warning at the user's line, not one each.
                "Loading an estimator pickled by uqconform "
                f"{saved_by or '(a version that did not record it)'} under "
                f"uqconform {__version__}: its predictions may differ or fail. Refit and "
                "recalibrate it under this version, or install the version that saved it.",
                InconsistentVersionWarning,
            )
        for old, new in _RENAMED_STATE.items():  # attributes renamed since: the new name
            if old in state:
                state.setdefault(new, state.pop(old))
        # constructor parameters added since: their defaults, the behaviour the pickle had
        # (get_params, repr and clone read every parameter)
        for name, parameter in _init_parameters(type(self)).items():
            if name not in state and parameter.default is not inspect.Parameter.empty:
                state[name] = parameter.default
        super().__setstate__(state)  # type: ignore[misc]


def _init_parameters(cls: Any) -> dict[str, inspect.Parameter]:
    """The keyword parameters of ``cls.__init__`` (``*args``/``**kwargs`` left out)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    signature = inspect.signature(cls)
    return {name: p for name, p in signature.parameters.items() if p.kind in kinds}
