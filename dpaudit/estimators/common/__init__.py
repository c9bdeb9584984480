"""Pieces shared by several estimator families.

:mod:`.ties`: the tie-aware selection of the highest and lowest scores (the guesses of the
one-run, f-DP one-run and abstention audits); :mod:`.checks`: argument checks several families
share (the confidence level, integer counts); :mod:`.search`: the search for the largest
rejected parameter of a nested family of nulls (f-DP one-run and abstention bounds).
"""
