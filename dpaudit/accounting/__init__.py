"""Claimed epsilon: accountants for DP-SGD, the exact Gaussian mechanism, mu-GDP, and the
private-selection (hyper-parameter tuning) bounds. See docs/accounting.md."""
