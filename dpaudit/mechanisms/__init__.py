"""Idealised mechanisms that produce per-canary scores with known privacy."""
