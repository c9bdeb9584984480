"""Idealised mechanisms that write score files (no training)."""
