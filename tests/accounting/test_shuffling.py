"""The Poisson reference of shuffled DP-SGD (:mod:`dpaudit.accounting.shuffling`).

Paper: Annamalai, Balle, Hayes, De Cristofaro, "To Shuffle or not to Shuffle" (arXiv:2411.10614),
§6.2.1 / Fig. 3 and §6.3.2 / Figs. 6-7.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dpaudit.accounting.shuffling import poisson_reference_epsilon, poisson_reference_sigma

DELTA = 1e-5
PACKAGE = Path(__file__).resolve().parents[2] / "dpaudit"


@pytest.mark.parametrize(
    "sigma,note,paper", [(0.5, 6.476, 6.49), (1.0, 0.718, 0.73), (1.5, 0.292, 0.30)]
)
def test_poisson_epsilon_fig3(sigma, note, paper):
    # Fig. 3 / §6.2.1: T = 100, one epoch; paper (PRV) 6.49 / 0.73 / 0.30; ours with PLD.
    eps = poisson_reference_epsilon(sigma, 100, 1, DELTA)
    assert eps == pytest.approx(note, abs=0.002)
    assert eps == pytest.approx(paper, abs=0.015)


def test_poisson_reference_sigma_inverts_the_reference():
    # docs/mechanisms/shuffling.md: T = 100, E = 1, eps = 4 gives sigma = 0.5905 (a coarse
    # tolerance in log sigma keeps the number of accountant calls small)
    sigma = poisson_reference_sigma(4.0, 100, 1, DELTA, xtol=1e-3)
    assert sigma == pytest.approx(0.5905, abs=1e-3)
    assert poisson_reference_epsilon(sigma, 100, 1, DELTA) == pytest.approx(4.0, abs=0.01)


def test_poisson_reference_bad_input():
    with pytest.raises(ValueError, match="delta"):
        poisson_reference_epsilon(1.0, 100, 1, 0.0)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        poisson_reference_epsilon(1.0, 0, 1, DELTA)
    with pytest.raises(ValueError, match="epochs"):
        poisson_reference_epsilon(1.0, 100, 0, DELTA)
    with pytest.raises(ValueError, match="epsilon"):
        poisson_reference_sigma(0.0, 100, 1, DELTA)


#: Packages (and the Opacus subpackage) that compute a privacy accountant's epsilon.
ACCOUNTANT_PACKAGES = ("dp_accounting", "prv_accountant", "autodp")


def test_accountant_libraries_are_imported_in_accounting_only():
    """Issue 38: every accountant call goes through dpaudit/accounting/ (the mechanisms used to
    call dp_accounting themselves)."""
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "accounting":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            hits = [
                n
                for n in names
                if n.split(".")[0] in ACCOUNTANT_PACKAGES or n.startswith("opacus.accountants")
            ]
            outside += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {h}" for h in hits]
    assert not outside, outside
