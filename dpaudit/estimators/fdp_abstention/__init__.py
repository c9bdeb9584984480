"""f-DP auditing in one run with abstention (Mahloujifar, Melis and Chaudhuri 2025, "Auditing
f-Differential Privacy in One Run", arXiv:2410.22235).

:mod:`.bound`: the recursion on the blow-up function (their Algorithm 3), the null families and
the lower bound; :mod:`.audit`: the runner over a score file (``method: fdp_abstention``).
"""
