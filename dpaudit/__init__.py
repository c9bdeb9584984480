"""dpaudit: empirical privacy auditing of differentially private machine learning.

Layers (see docs/architecture.md): ``data`` and ``training`` (or ``mechanisms`` for
simulations) write per-canary score files (:mod:`dpaudit.scores`); ``estimators`` turn score
files into lower bounds on epsilon (:mod:`dpaudit.audit`); ``accounting`` gives the claimed
epsilon; ``plots`` draws the figures. Everything here works without Snakemake.
"""

__version__ = "0.1.0"
