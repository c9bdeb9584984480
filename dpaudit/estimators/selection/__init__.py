"""How an estimator chooses its threshold or guess count, shared by the one-run, f-DP one-run,
multi-run and LiDP estimators.

:mod:`.rules`: the selection strategies (explicit, Bonferroni, uncorrected, sample split, held
out, multi-split); :mod:`.multi_split`: the ``multi_split`` rows of the estimators.
"""
