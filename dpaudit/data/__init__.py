"""Datasets: procedurally generated (no network) and real ones downloaded with checksums."""
