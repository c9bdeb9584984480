"""One-run audit of Steinke, Nasr and Jagielski 2023 ("Privacy Auditing with One (1) Training
Run", arXiv:2305.08846): m coin-flip canaries, one model, guesses on the highest and lowest scores.

:mod:`.bound`: Theorem 3.1's p-value, the lower bound and its search over guess counts;
:mod:`.audit`: the runner over a score file (``method: one_run``).
"""
