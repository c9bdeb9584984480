"""Idealised mechanisms that are simulated instead of trained; each writes score files."""
