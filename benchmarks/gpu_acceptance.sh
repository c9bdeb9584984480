#!/usr/bin/env bash
# The GPU acceptance run (issue 27): run it first on a new GPU machine, before any paper-scale
# target, and record what it prints in BENCHMARKS.md ("Paper-scale jobs on the CPU" holds the
# CPU side).
#   1. the miniature of every paper training config on the GPU: every kind of paper-scale
#      training job (WRN-16-4 on CIFAR-10-format data in passes, Adam, ClipBKD on
#      Purchase-format tables, shuffle variants, tuning, ...) with its audits, tables, figures,
#      paper targets, reproduction rows and report (benchmarks/paper_miniature.py);
#   2. every training engine on the GPU against the CPU, with models per second and peak GPU
#      memory (benchmarks/gpu_check.py);
#   3. peak GPU memory and wall seconds per example and step of every kind of paper job at
#      the paper's model and pass (benchmarks/paper_job_costs.py --device cuda; 8 steps: at 3,
#      a job's fixed costs hide the steps on an H200).
# On a GPU machine without network access: pip download the missing wheels elsewhere, install
# them there with --target DIR, then PYTHONPATH=DIR (the miniature keeps the caller's
# PYTHONPATH). Run on an NVIDIA H200 on 2026-11-28: BENCHMARKS.md, "Paper-scale jobs on a GPU".
# Usage: benchmarks/gpu_acceptance.sh [OUTDIR]   (CORES=N: Snakemake cores of the miniature)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu_acceptance}
mkdir -p "$out"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg
python benchmarks/paper_miniature.py --device cuda --cores "${CORES:-4}" \
  --workdir "$out/miniature" | tee "$out/miniature.txt"
python benchmarks/gpu_check.py --device cuda | tee "$out/gpu_check.txt"
python benchmarks/paper_job_costs.py --device cuda --passes 1024 64 --steps 8 \
  --json "$out/paper_job_costs.json" \
  | tee "$out/paper_job_costs.txt"
