"""No measured figure is typed by hand in the documentation's prose.

Issue 9 asks that every figure in the docs be traceable to a JSON written by the benchmark
runner. Figures on the pages are therefore printed by executed ``python exec="on"`` blocks:
either the page's own example, or a block that reads ``docs/benchmark-results/results.json``
(or the full run's ``docs/benchmark-results-full/results.json``). This test scans the
prose of the user-facing pages (everything outside fenced code blocks, inline code and
maths) for decimal numbers with at least three significant digits, such as ``0.917`` or
``55.6``: that is what a benchmark result copied by hand looks like, while parameters
(``alpha = 0.1``), rounded statements ("about 90%") and definitions are shorter. The few
long constants that are definitions are listed in ``ALLOWED`` with their reason.

The scan is static (no build, no randomness), so it cannot be flaky; it misses figures with
fewer digits, which is the price of not flagging every ``0.1``.
"""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(
    [
        DOCS / "index.md",
        DOCS / "getting-started.md",
        *(DOCS / "concepts").glob("*.md"),
        *(DOCS / "methods").glob("*.md"),
    ]
)

# Long numbers that are definitions, not measurements (keep this list short).
ALLOWED = {
    "1.4826": "consistency constant of the MAD for the normal law (timeseries bandwidth unit)",
    "1.349": "IQR of the standard normal law (the cps page's robust Gaussian scale)",
    "1.645": "one-sided 5% normal quantile (coverage-law sample-size formula)",
    "2.146": "chi_2 quantile at 0.9, the radius a perfect flow gives (multioutput)",
}

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
# Inline code, inline and display maths, link targets and arXiv identifiers.
NOT_PROSE = re.compile(
    r"`[^`]*`"
    r"|\\\(.*?\\\)"
    r"|\\\[.*?\\\]"
    r"|\$\$.*?\$\$"
    r"|\$[^$]*\$"
    r"|\]\([^)]*\)"
    r"|arXiv:\S+",
    re.DOTALL,
)
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.]*\d)")


def prose(text: str) -> str:
    """The page without fenced code blocks, inline code, maths and link targets."""
    kept, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker
            elif marker.startswith(fence[0]) and len(marker) >= len(fence):
                fence = None
            kept.append("")
            continue
        kept.append("" if fence is not None else line)
    return NOT_PROSE.sub(" ", "\n".join(kept))


def significant_digits(number: str) -> int:
    return len(number.replace(".", "").lstrip("0"))


def hand_typed(text: str) -> list[str]:
    """Decimal numbers with three or more significant digits in the prose of ``text``."""
    return [
        number
        for number in DECIMAL.findall(prose(text))
        if significant_digits(number) >= 3 and number not in ALLOWED
    ]


def test_prose_filter_finds_typed_figures_and_ignores_code():
    page = (
        "KOWCPI covers 0.917 / 0.175 on ELEC2 and `0.905` in code, \\(0.123\\) in maths.\n"
        "```python\nprint(0.917)\n```\n"
        "Alpha 0.1, about 90%, arXiv:2107.07511, radius 2.146.\n"
    )
    assert hand_typed(page) == ["0.917", "0.175"]


def test_pages_exist():
    assert len(PAGES) >= 10, [p.name for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_no_hand_typed_figures(page):
    found = hand_typed(page.read_text(encoding="utf-8"))
    assert not found, (
        f"{page.relative_to(DOCS)} quotes {found} in its prose: print the figure from an "
        "executed block (the page's example or the benchmark JSON), reword it, or, if it is "
        "a definition, add it to ALLOWED in tests/test_docs_figures.py with its reason."
    )
