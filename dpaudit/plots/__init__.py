"""Figures (matplotlib, Agg backend: no display needed)."""

import matplotlib

matplotlib.use("Agg")
