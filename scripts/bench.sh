#!/usr/bin/env bash
# Runs the GEMM, convolution and whole-network comparisons and leaves tables, CSVs and the
# plot in the output folder.
# Usage: scripts/bench.sh BENCH_GEMM BENCH_CONV BENCH_OPS GK_INFER OUT_DIR [extra flags for the
# first two]
set -euo pipefail
gemm=$1 conv=$2 ops=$3 infer=$4 out=$5
shift 5
mkdir -p "$out"
# Each measurement's console line goes to a log; the summary tables to the terminal.
run() {
  local bin=$1 log=$2 first=$3
  shift 3
  "$bin" --out="$out" "$@" --benchmark_counters_tabular=true > "$out/$log" 2>&1 || {
    tail -n 30 "$out/$log"; exit 1; }
  sed -n "/^$first/,\$p" "$out/$log"
}
run "$gemm" gemm.log "# gemmkit vs OpenBLAS" "$@"
echo
run "$conv" conv.log "# Convolution layers" "$@"
echo "per-layer convolution table: $out/conv.md"
echo
"$ops" --out="$out" > "$out/ops.log" 2>&1 || { tail -n 30 "$out/ops.log"; exit 1; }
cat "$out/ops.md"
echo
# The networks: first their logits against PyTorch's, then their speed.
scripts/networks.py check "$infer" "$out/networks" --batches 1,4
echo
scripts/networks.py bench "$infer" "$out/networks"
