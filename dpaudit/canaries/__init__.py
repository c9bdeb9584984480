"""Canaries: crafted examples (input space) or gradients, and how they are included."""
