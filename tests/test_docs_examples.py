"""The documentation's code blocks keep the promise of the index page's note.

The note says that the Python blocks run while the site is built, except those marked *not
executed*, and that the blocks a page shows run in order in a fresh session. Running the
blocks takes minutes per page (the docs build does it), so these checks are static: every
plain ``python`` block is marked in the text before it, and every name a shown block reads
is defined by the shown blocks of its session (a hidden set-up block does not count: a reader
does not see it). The fit docstring shared by the cross-fitted wrappers is checked against
what each of them does with ``groups``.
"""

import ast
import builtins
import inspect
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GroupKFold

from uqconform import CrossConformalRegressor
from uqconform.classification import CrossConformalClassifier, CrossVennAbersCalibrator
from uqconform.regression import JackknifeAfterBootstrapRegressor

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
BLOCK = re.compile(r"^( *)```python([^\n]*)\n(.*?)\n\1```", re.M | re.S)


def _defined(tree: ast.AST) -> set[str]:
    """Names a block binds anywhere: assignments, imports, defs, arguments, handlers."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.arg | ast.ExceptHandler):
            names.add(getattr(node, "name", None) or getattr(node, "arg", ""))
    return names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_shown_blocks_define_the_names_they_use(page: Path) -> None:
    text, sessions, missing = page.read_text(), {}, []
    for match in BLOCK.finditer(text):
        options = match.group(2)
        if 'exec="on"' not in options or "source=" not in options:
            continue  # plain blocks are checked below; hidden blocks are not shown
        tree = ast.parse(textwrap.dedent(match.group(3)))
        session = re.search(r'session="([^"]*)"', options)  # none: a session of its own
        known = sessions.setdefault(session.group(1) if session else match.start(), set())
        known |= _defined(tree)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(dir(builtins))
        line = text[: match.start()].count("\n") + 1
        missing += [f"line {line}: {name}" for name in sorted(used - known)]
    assert not missing, f"shown blocks read names no shown block defines: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_plain_python_blocks_are_marked_not_executed(page: Path) -> None:
    text = page.read_text()

    def paragraph_before(match: re.Match) -> str:
        return " ".join(text[: match.start()].rstrip().split("\n\n")[-1].split())

    unmarked = [
        text[: match.start()].count("\n") + 1
        for match in BLOCK.finditer(text)
        if 'exec="on"' not in match.group(2) and "not executed" not in paragraph_before(match)
    ]
    assert not unmarked, f"python blocks at lines {unmarked} are neither run nor marked"


def test_cross_fit_groups_docstring_matches_each_class() -> None:
    rng = np.random.default_rng(0)
    X, groups = rng.normal(size=(60, 3)), np.repeat(np.arange(6), 10)
    y = X[:, 0] + rng.normal(size=60)
    for cls in (CrossConformalRegressor, CrossConformalClassifier, CrossVennAbersCalibrator):
        model = Ridge() if cls is CrossConformalRegressor else LogisticRegression()
        target = y if cls is CrossConformalRegressor else (y > 0).astype(int)
        cls(model, cv=GroupKFold(3)).fit(X, target, groups=groups)  # the folds take them
    with pytest.raises(ValueError, match="takes no `groups`"):
        JackknifeAfterBootstrapRegressor(Ridge(), random_state=0).fit(X, y, groups=groups)
    for cls in (CrossConformalRegressor, JackknifeAfterBootstrapRegressor):
        entry = inspect.getdoc(cls.fit).split("groups :")[1].split("**fit_params")[0]
        assert "GroupKFold" in entry and "Bootstrap samples take none" not in entry
        assert "JackknifeAfterBootstrapRegressor`` refuses them" in entry
