"""The registry of benchmark families and the suites built from them.

A *family* is one function ``run(ctx) -> FamilyResult`` measuring one group of methods
(classic split methods, speed, memory, and later multi-output, time series, ...). A module
in `uqconform.benchmarks.suites` registers its families on import::

    from uqconform.benchmarks.registry import FamilyResult, register_family

    @register_family("timeseries", "KOWCPI vs EnbPI and SPCI on ...")
    def run(ctx):
        ...
        return FamilyResult(tables={"Time series": rows})

Every module of that package is imported automatically, so adding a file is enough. A
*suite* is a list of families run at one *scale*: ``quick`` and ``full`` run every family
registered with ``default=True`` (``smoke`` too, at a tiny size for tests), and every
family name is also a suite of its own (``--suite speed``).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SCALES",
    "Family",
    "FamilyResult",
    "get_families",
    "list_suites",
    "register_family",
    "resolve_suite",
]

#: Sizes every family understands: ``smoke`` (seconds per family, for tests; about five
#: minutes for the whole suite on two CPUs), ``quick``, ``full``.
SCALES = ("smoke", "quick", "full")


@dataclass
class FamilyResult:
    """What a family hands back to the runner.

    Attributes
    ----------
    tables : dict of str to list of dict
        Title -> rows; each row maps a column name to a value. Scalars are printed; lists
        and dicts (per-split figures) go only to ``results.json``.
    notes : list of str
        Remarks printed under the tables and kept in the report (skipped comparisons...).
    headlines : list of dict
        The family's key figures for the one-screen summary, the README and the docs: each
        row has ``"claim"`` (what is measured, in words), ``"value"`` (the figure),
        ``"target"`` (the number it must reach, in words, or ``None``) and ``"met"`` (bool or
        ``None`` when there is no target).

    Examples
    --------
    >>> result = FamilyResult(
    ...     tables={"Coverage": [{"method": "lac", "coverage": 0.901}]},
    ...     headlines=[{"claim": "coverage", "value": 0.901, "target": ">= 0.9", "met": True}],
    ... )
    >>> result.tables["Coverage"][0]["coverage"], result.notes
    (0.901, [])
    """

    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    headlines: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Family:
    """A registered benchmark family."""

    name: str
    description: str
    run: Callable[[Any], FamilyResult]
    default: bool = True
    requires: tuple[str, ...] = ()
    extra: str | None = None
    timed: bool = False
    weight: float = 1.0

    def missing_modules(self) -> list[str]:
        """The modules of `requires` that cannot be imported here."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]


_FAMILIES: dict[str, Family] = {}
# Families whose suite module failed to import: family name -> the import's traceback
# (reported as failed families, under the names `--suite` and the listing use).
_IMPORT_ERRORS: dict[str, str] = {}
_LOADED = False
# The families a suite module registers, where they are not its name with "-" for "_"
# (checked against the registered families by the tests).
_MODULE_FAMILIES: dict[str, tuple[str, ...]] = {"speed": ("speed", "memory")}


def _module_families(module: str) -> tuple[str, ...]:
    """The names of the families the suite module ``module`` registers: those a failure to
    import it is reported under."""
    return _MODULE_FAMILIES.get(module, (module.replace("_", "-"),))


def register_family(
    name: str,
    description: str,
    *,
    default: bool = True,
    requires: tuple[str, ...] = (),
    extra: str | None = None,
    timed: bool = False,
    weight: float = 1.0,
    replace: bool = False,
) -> Callable[[Callable[[Any], FamilyResult]], Callable[[Any], FamilyResult]]:
    """Decorator registering ``run(ctx) -> FamilyResult`` as the benchmark family ``name``.

    Parameters
    ----------
    name : str
        The family (and single-family suite) name, e.g. ``"classic"``.
    description : str
        One line shown by ``uqconform benchmark --list``.
    default : bool, default=True
        Include the family in the ``smoke``, ``quick`` and ``full`` suites.
    requires : tuple of str, default=()
        Optional modules the family needs (``("torch", "nflows")``). When one is missing
        the family is skipped with an install hint and the others run.
    extra : str, optional
        The uqconform extra that installs `requires` (named in the hint).
    timed : bool, default=False
        The family's figures are wall times or memory peaks: it runs alone, before the
        families that run side by side (see `uqconform.benchmarks.run_benchmark`'s
        ``jobs``).
    weight : float, default=1.0
        Its rough run time relative to a typical family: heavier families start first when
        several run side by side, so that the run ends sooner.
    replace : bool, default=False
        Allow replacing a family of the same name (otherwise a ``ValueError``).

    Examples
    --------
    >>> @register_family("doc-example", "a family used in this docstring", default=False)
    ... def run(ctx):
    ...     return FamilyResult(tables={"Example": [{"value": 1.0}]})
    >>> "doc-example" in list_suites()
    True
    >>> _ = _FAMILIES.pop("doc-example")
    """
    if not isinstance(name, str) or not name or name in SCALES:
        raise ValueError(f"`name` must be a non-empty string other than {SCALES}, got {name!r}.")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(  # it names the plot files "<name>_<plot>.png" in the output folder
            f"`name` must be letters, digits, '_', '.' or '-' (it names plot files), got {name!r}."
        )

    def decorate(run: Callable[[Any], FamilyResult]) -> Callable[[Any], FamilyResult]:
        _load_suite_modules()  # the built-in families first, so a clash is seen here
        if name in _FAMILIES and not replace:
            raise ValueError(
                f"A benchmark family named {name!r} is already registered: choose another "
                "name, or pass replace=True to override it."
            )
        _FAMILIES[name] = Family(
            name=name,
            description=description,
            run=run,
            default=default,
            requires=tuple(requires),
            extra=extra,
            timed=timed,
            weight=float(weight),
        )
        return run

    return decorate


def _load_suite_modules() -> None:
    """Import every module of `uqconform.benchmarks.suites` once (they register)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    package = importlib.import_module("uqconform.benchmarks.suites")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{package.__name__}.{module.name}")
        except Exception:  # a broken family must not take the others down
            error = traceback.format_exc()
            for name in _module_families(module.name):  # reported as these families fail
                if name not in _FAMILIES:  # one registered before the error runs as such
                    _IMPORT_ERRORS[name] = error


def get_families() -> dict[str, Family]:
    """Registered families by name (suite modules imported on first call).

    Examples
    --------
    >>> families = get_families()
    >>> {"classic", "speed", "timeseries"} <= set(families)
    True
    >>> families["classic"].default, families["classic"].requires
    (True, ())
    """
    _load_suite_modules()
    return dict(_FAMILIES)


def import_errors() -> dict[str, str]:
    """The families whose suite module could not be imported, with its traceback."""
    _load_suite_modules()
    return dict(_IMPORT_ERRORS)


def list_suites() -> list[str]:
    """Valid ``--suite`` values: the scales, then every family name.

    Examples
    --------
    >>> {"quick", "full", "classic", "speed"} <= set(list_suites())
    True
    """
    families = get_families()
    return [*SCALES, *sorted(set(families) | set(import_errors()) - set(SCALES))]


def resolve_suite(suite: str, scale: str | None = None) -> tuple[list[str], str]:
    """Families and scale of a suite name.

    ``quick`` / ``full`` / ``smoke`` run every default family at that scale; a family
    name runs that family at ``scale`` (default ``quick``), together with the families
    named ``<name>-*`` (``robust`` runs ``robust`` and ``robust-inputs``). Families whose
    module failed to import are included so that the failure is reported.

    Parameters
    ----------
    suite : str
        A scale (``"smoke"``, ``"quick"``, ``"full"``) or a family name (`list_suites`).
    scale : {"smoke", "quick", "full"}, optional
        The scale of a family suite (default ``"quick"``); with a scale as the suite, it
        must be that scale or None.

    Returns
    -------
    families : list of str
        The families to run, in order.
    scale : str
        The scale to run them at.

    Raises
    ------
    ValueError
        For an unknown suite or scale, or a scale that contradicts a scale suite.

    Examples
    --------
    >>> resolve_suite("speed", "full")
    (['speed'], 'full')
    >>> resolve_suite("robust")
    (['robust', 'robust-inputs'], 'quick')
    >>> families, scale = resolve_suite("quick")
    >>> "classic" in families, scale
    (True, 'quick')
    """
    valid = list_suites()
    if suite not in valid:
        raise ValueError(f"Unknown benchmark `suite` {suite!r}; valid suites: {', '.join(valid)}.")
    if scale is not None and scale not in SCALES:
        raise ValueError(f"Unknown `scale` {scale!r}; valid scales: {', '.join(SCALES)}.")
    if suite in SCALES:
        if scale is not None and scale != suite:
            raise ValueError(
                f"`scale` {scale!r} contradicts the suite {suite!r}; for every family at "
                f"that scale give `suite` {scale!r}, or a family name as the suite to choose "
                "its scale."
            )
        names = [name for name, family in get_families().items() if family.default]
        return [*sorted(names), *sorted(set(import_errors()) - set(names))], suite
    group = [name for name in valid[len(SCALES) :] if name.startswith(f"{suite}-")]
    return [suite, *group], scale or "quick"
