"""Warnings that point at the user's line, not at the library's internals.

Estimator methods are wrapped (`base.keeps_state_on_error`) and call each other, so no fixed
``stacklevel`` names the caller's line. :func:`warn_user` walks up the stack to the first frame
outside the package instead, as pandas does.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_user"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue ``message`` as a warning attributed to the first caller outside uqconform.

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
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
