"""Warnings that point at the user's line, not at the library's internals.

Estimator methods are wrapped (`base.keeps_state_on_error`) and call each other, so no fixed
``stacklevel`` names the caller's line. :func:`warn_user` walks up the stack to the first frame
outside the package instead, as pandas does, also passing over scikit-learn and joblib, so
that a warning raised inside ``cross_validate``, a ``Pipeline`` or a search names the user's
call to them. (A warning raised in a thread or a worker process names that thread's entry.)
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_user"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PASSED_OVER = ("sklearn", "joblib")  # meta-estimators and parallel calls between user and us


def _library_dirs() -> tuple[str, ...]:
    dirs = [_PACKAGE_DIR]
    for name in _PASSED_OVER:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            dirs.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(dirs)


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue ``message`` as a warning attributed to the first caller outside uqconform (and
    outside scikit-learn and joblib, which sit between a user and the library).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_user("too few calibration points")
    >>> caught[0].filename.startswith(_PACKAGE_DIR)
    False
    """
    frame = sys._getframe(1)
    level = 2  # warnings.warn's stacklevel for the caller
    library = _library_dirs()
    while frame.f_back is not None and frame.f_code.co_filename.startswith(library):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
