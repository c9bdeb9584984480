"""Multi-run audits: one target per training run, FPR/FNR of a thresholded score (Annamalai,
Balle, Hayes, De Cristofaro 2024, "To Shuffle or not to Shuffle", arXiv:2411.10614, Eq. 1 and
Algorithm 5).

:mod:`.definition`: Clopper-Pearson, Eq. 1, the sweep and Algorithm 5's maximum bound by bound
(the paper's math, the reference of the tests); :mod:`.search`: the same maximum found by branch
and bound (the speed-up); :mod:`.bound`: the threshold choice, the split and the result row;
:mod:`.audit`: the runner over a score file (``method: multi_run_cp``, ``gdp_fit``).
"""
