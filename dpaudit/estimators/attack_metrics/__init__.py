"""Attack metrics of a membership-inference test (AUROC, TPR at low FPR, balanced accuracy,
the raw-count epsilon), with confidence intervals.

:mod:`.metrics`: the metrics from one sort of the scores and their bootstrap; :mod:`.ci`: the
intervals for independent canaries; :mod:`.audit`: the runner over a score file
(``method: attack_metrics``).
"""
