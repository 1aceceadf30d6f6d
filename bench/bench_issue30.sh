#!/bin/sh
# Issue 30's benchmark, every row of its targets table, at full scale: run it on a quiet machine.
# Generates bench/data/{dflash-730mb,hf-300mb,megatron-300mb,dflash-1024mb}.log (git-ignored,
# deterministic) on the first run. Extra arguments go to bench_replay.py (e.g. --size 100MB).
set -e
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" bench/bench_replay.py --runs 3 --markdown "$@"
echo
"$PY" bench/bench_tail_cpu.py --all --burst-mb 1024
echo
"$PY" bench/bench_tail.py --only sparse
