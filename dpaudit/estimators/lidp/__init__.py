"""LiDP: lower bounds on epsilon from K inserted and m null canaries per trial (Pillutla et al.
2023, "Unleashing the Power of Randomization in Auditing Differentially Private ML", NeurIPS
2023, arXiv:2305.18447).

:mod:`.xbern`: the XBern confidence intervals of exchangeable Bernoulli means; :mod:`.bound`:
Algorithm 1's bound and its threshold tuning; :mod:`.audit`: the runner over a score file
(``method: lidp``).
"""
