#!/usr/bin/env bash
# Time one CPU-scale config as the real-data requirements ask: from a fresh clone of this
# repository's HEAD (no results/, no resources/), with /usr/bin/time -v, on the cores given.
#
#   benchmarks/time_cpu_config.sh [--cores N] [--results-to DIR] -- <snakemake targets and options>
#   e.g. benchmarks/time_cpu_config.sh -- results/lidp/table1_cpu.csv results/reproduction.md \
#          --configfile config/cpu/lidp.yaml --config data='{mirror: ../shared/data}'
#
# The clone is made beside this checkout (so a relative `../shared` resolves as it does here) and
# removed afterwards; `--results-to DIR` (or KEEP_RESULTS=DIR) first copies its results/ and run.log
# to DIR, so the timed run's outputs can be read without running the config a second time. The
# Python environment is the active one; the clone's own package is put first on PYTHONPATH. Prints
# wall time, CPU time, peak memory (the largest single process) and the number of jobs.
set -euo pipefail
cores=2
keep=${KEEP_RESULTS:-}
if [ "${1:-}" = "--cores" ]; then cores=$2; shift 2; fi
if [ "${1:-}" = "--results-to" ]; then keep=$(realpath -m "$2"); shift 2; fi
[ "${1:-}" = "--" ] && shift
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
clone=$(mktemp -d "$(dirname "$repo")/timing-clone.XXXXXX")
trap '[ -n "$keep" ] && mkdir -p "$keep" && cp -r "$clone/results" "$clone/run.log" "$keep"/ 2>/dev/null; rm -rf "$clone"' EXIT
git clone -q "$repo" "$clone"
cd "$clone"
echo "commit $(git rev-parse --short HEAD), $(getconf _NPROCESSORS_ONLN) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
export PYTHONPATH="$clone${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg
/usr/bin/time -v -o "$clone/time.txt" snakemake --cores "$cores" "$@" >"$clone/run.log" 2>&1 || {
  tail -40 "$clone/run.log"
  echo "the run failed" >&2
  exit 1
}
jobs=$(grep -Eo '[0-9]+ of [0-9]+ steps' "$clone/run.log" | tail -1)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "jobs: ${jobs:-none (nothing to do?)}"
grep -E 'Elapsed \(wall|User time|System time|Maximum resident' "$clone/time.txt"
if [ -n "$keep" ]; then echo "results and run.log copied to $keep"; fi
