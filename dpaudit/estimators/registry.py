"""Registry of audit estimators: which score files each applies to, and how to run it.

:data:`METHODS` maps each estimator *method* to its runner (defined in its family's
``<family>/audit.py``) and the score-file designs it applies to; add one entry to add a method. The
audit rule runs every configured estimator on every score file whose design it applies to (the
score-file contract is in :mod:`dpaudit.scores`), and each run returns rows of one tidy table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpaudit.scores import ScoreFile

#: A runner takes a score file and the estimator's parameters and returns table rows. Every
#: row must carry ``epsilon`` (the lower bound, or the estimate), ``valid`` (True when the
#: number is a statistically valid lower bound at the stated confidence, False for an
#: uncorrected or point estimate) and ``assumes`` (:func:`assumes`: ``""`` for a bound that
#: holds for every mechanism, else the trade-off family it holds for), plus any diagnostics.
Runner = Callable[[ScoreFile, dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Method:
    """One estimator method: its name, the score-file designs it applies to and where its
    runner lives (``"module:function"``). The runner's module is imported on first use of
    :attr:`run`, so that reading the names and designs (the workflow does, in every Snakemake
    process, each cluster job's included) imports no estimator family and none of SciPy.

    ``coins``: the method's theorem takes the canaries' membership to be independent fair coins
    (the one-run bounds: Steinke, Nasr, Jagielski 2023, arXiv:2305.08846, Sec. 3 and Thm. 3.1;
    Xiang et al. 2025, arXiv:2509.08704; Mahloujifar, Melis, Chaudhuri 2025, arXiv:2410.22235).
    Its rows are valid only on a file whose membership is plausible under a declared fair coin
    (:func:`dpaudit.audit.fair_coin_failure`). The others condition on the membership (the
    multi-run and LiDP bounds count IN and OUT scores separately) or give no valid bound."""

    name: str
    designs: tuple[str, ...]
    runner: str
    coins: bool = False
    #: True when its rows are estimates, never valid lower bounds, whatever its parameters.
    estimate: bool = False

    @property
    def run(self) -> Runner:
        module, _, function = self.runner.partition(":")
        return getattr(importlib.import_module(module), function)

    @property
    def doc(self) -> str:
        return (self.run.__doc__ or "").strip()

    def applies(self, sf: ScoreFile) -> bool:
        return sf.meta["design"] in self.designs


#: Values of the ``assumes`` column of an audit row, and what the row's epsilon then assumes of
#: the audited mechanism. ``""`` (:data:`FAMILY_FREE`): nothing, the bound holds for every
#: mechanism. The others are the f-DP tests of a one-parameter null family {f_theta} whose
#: rejected theta is converted to (epsilon, delta): that epsilon bounds the mechanism's epsilon
#: only if its trade-off curve has the family's shape (Xiang et al. 2025, arXiv:2509.08704,
#: Sec. 5.4 and Alg. 2; Mahloujifar, Melis, Chaudhuri 2025, arXiv:2410.22235).
ASSUMPTIONS: dict[str, str] = {
    "gdp": "a Gaussian (mu-GDP) trade-off curve",
    "laplace": "a Laplace trade-off curve",
    "subsampled_gaussian": "a one-step subsampled-Gaussian trade-off curve",
    "subsampled_gaussian_steps": (
        "a DP-SGD trade-off curve: the stated steps of Poisson-subsampled Gaussian noise at the "
        "stated rate q, both neighbouring directions (fdp_abstention)"
    ),
    "approx_dp_delta>0": (
        "delta-events independent per canary (Xiang et al.'s Theorem 1 at f_{eps,delta}, "
        "delta > 0, does not hold for every (eps, delta)-DP mechanism)"
    ),
}

#: The ``assumes`` value of a bound that holds for every mechanism.
FAMILY_FREE = ""

#: Methods whose bounds assume the null family they test (``family``), and the families each
#: tests without assuming them (any (eps, delta)-DP mechanism is f_{eps,delta}-DP).
_FAMILY_METHODS: dict[str, tuple[str, ...]] = {
    "fdp_one_run": (),  # approx_dp only at delta = 0 (below)
    "fdp_abstention": ("approx_dp",),  # the recursion holds for every f (the paper's Thm.)
}


def assumes(method: str, family: str | None = None, delta: float | None = None) -> str:
    """What the bounds of estimator ``method`` assume of the mechanism (a key of
    :data:`ASSUMPTIONS`, or :data:`FAMILY_FREE`).

    ``family`` is the null family of the f-DP methods (``fdp_one_run``, ``fdp_abstention``;
    ``None``: the schema's default) and ``delta`` the delta their bound is computed at
    (``None``: not known yet, e.g. a block whose delta is the score file's). ``gdp_fit``
    fits a GDP curve (an estimate, never valid) and assumes ``gdp``. ``fdp_one_run``'s
    ``approx_dp`` at delta = 0 tests pure epsilon-DP and assumes nothing; at delta > 0 (or a
    delta not known yet) it assumes independent delta-events (docs/estimators/fdp_one_run.md,
    finding 1).
    """
    if method == "gdp_fit":
        return "gdp"
    if method not in _FAMILY_METHODS:
        return FAMILY_FREE
    if family is None:
        from dpaudit.defaults import estimator_defaults

        family = estimator_defaults(method)["family"]
    family = str(family).strip().lower().replace("-", "_")
    if family in _FAMILY_METHODS[method]:
        return FAMILY_FREE
    if family == "approx_dp":
        return FAMILY_FREE if delta is not None and float(delta) == 0.0 else "approx_dp_delta>0"
    if family not in ASSUMPTIONS:
        raise ValueError(f"{method}: unknown null family {family!r}")
    if method == "fdp_abstention" and family == "subsampled_gaussian":
        return "subsampled_gaussian_steps"  # composed over steps (fdp_abstention.bound.sgm_curve)
    return family


def block_assumes(block: dict[str, Any]) -> str:
    """What the rows of an estimator block (``method`` plus parameters) assume, before any score
    file is read (a ``delta`` left null is the file's, so not known yet: see :func:`assumes`)."""
    return assumes(block["method"], block.get("family"), block.get("delta"))


def family_free(block: dict[str, Any]) -> bool:
    """Whether every row of an estimator block holds for every mechanism (no family assumed)."""
    return block_assumes(block) == FAMILY_FREE


def _method(
    name: str, designs: tuple[str, ...], runner: str, coins: bool = False, estimate: bool = False
) -> Method:
    return Method(name, designs, f"dpaudit.estimators.{runner}", coins, estimate)


#: Every estimator method, the one list: the schema's ``method`` enum lists them in this order,
#: and the display names and colours of :mod:`dpaudit.plots` name only these
#: (tests/estimators/test_registry.py).
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("one_run", ("one_run",), "one_run.audit:run_one_run", coins=True),
        _method("fdp_one_run", ("one_run",), "fdp_one_run.audit:run_fdp_one_run", coins=True),
        _method(
            "fdp_abstention",
            ("one_run",),
            "fdp_abstention.audit:run_fdp_abstention",
            coins=True,
        ),
        _method("lidp", ("lidp",), "lidp.audit:run_lidp"),
        _method("multi_run_cp", ("multi_run",), "multi_run.audit:run_multi_run_cp"),
        _method("gdp_fit", ("multi_run",), "multi_run.audit:run_gdp_fit", estimate=True),
        _method(
            "attack_metrics",
            ("one_run", "multi_run", "lidp"),
            "attack_metrics.audit:run_attack_metrics",
            estimate=True,
        ),
    )
}


def family_free_blocks(design: str) -> dict[str, dict[str, Any]]:
    """The estimator blocks (name -> block, as in a config) for score files of ``design`` whose
    rows are lower bounds that hold for every mechanism (:func:`block_assumes` is
    :data:`FAMILY_FREE`; no :attr:`Method.estimate`), in the order of :data:`METHODS`: a method
    with its default parameters (named as the method), or under each null family it tests
    without assuming it (named ``<method>_<family>``). The own-training verdict runs those of
    design ``one_run`` (:data:`dpaudit.verdict.VERDICT_ESTIMATORS`)."""
    out: dict[str, dict[str, Any]] = {}
    for m in METHODS.values():
        if design not in m.designs or m.estimate:
            continue
        if family_free({"method": m.name}):
            out[m.name] = {"method": m.name}
        for family in _FAMILY_METHODS.get(m.name, ()):
            block = {"method": m.name, "family": family}
            if family_free(block):
                out[f"{m.name}_{family}"] = block
    return out


def get(name: str) -> Method:
    """The method ``name`` (a clear error naming the allowed ones otherwise)."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown estimator method {name!r}; allowed: {sorted(METHODS)}") from None
