"""DP-SGD training that produces per-canary score files."""
