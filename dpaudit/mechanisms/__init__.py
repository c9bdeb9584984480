"""Idealised mechanisms that produce score files without training a model."""
