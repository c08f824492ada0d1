#!/usr/bin/env bash
# Runs the GEMM comparison and leaves the table, CSV and plot in the output folder.
# Usage: scripts/bench.sh BENCH_BINARY OUT_DIR [extra bench_gemm flags]
set -euo pipefail
bin=$1 out=$2
shift 2
mkdir -p "$out"
# The console lines of every measurement go to a log; the summary table to the terminal.
"$bin" --out="$out" "$@" --benchmark_counters_tabular=true > "$out/gemm.log" 2>&1 || {
  tail -n 30 "$out/gemm.log"; exit 1; }
sed -n '/^# gemmkit vs OpenBLAS/,$p' "$out/gemm.log"
