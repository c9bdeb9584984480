"""The real-bug catalogue: user training scripts, each with one documented DP-SGD bug.

Every entry is a ``train.entry_point`` function (``fn(data, audit, seed, device) -> dict``,
:mod:`dpaudit.attach.pipeline`) on the digits MLP, written as a user writes it (Opacus, or
plain PyTorch) and attached exactly as the docs show: ``audit.opacus(optimizer,
data_loader=loader, ...)`` for Opacus, the framework-neutral core placed as
examples/audit_handwritten.py places it otherwise. The auditor is told nothing about the bug:
no sample rate but the user's own, no canary placed inside the buggy code. The script returns
the claim its (buggy) accounting makes. One module per stage that departs:

- :mod:`~dpaudit.attach.catalogue.correct`: correct references (Opacus Poisson, Opacus with
  ``BatchMemoryManager``, hand-written);
- :mod:`~dpaudit.attach.catalogue.sampling`: shuffled batches accounted as Poisson, a
  ``WeightedRandomSampler`` kept or silently replaced, the floored expected batch size, tiny
  datasets;
- :mod:`~dpaudit.attach.catalogue.clipping`: fast clipping ignoring ``max_grad_norm``,
  microbatches, per-layer clipping off by the batch size;
- :mod:`~dpaudit.attach.catalogue.noise`: the mean's noise on the sum, a noise multiplier
  above the target;
- :mod:`~dpaudit.attach.catalogue.accounting`: fewer steps or a larger dataset claimed,
  gradient accumulation counted two ways.

:mod:`~dpaudit.attach.catalogue.true_epsilon` computes each entry's claim and the true epsilon
of what it runs; :mod:`~dpaudit.attach.catalogue.common` is the setup they share.
"""
