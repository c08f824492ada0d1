#!/usr/bin/env bash
# Runs the GEMM, convolution and whole-network comparisons and leaves tables, CSVs and the
# plot in the output folder.
# Usage: scripts/bench.sh BENCH_GEMM BENCH_CONV BENCH_OPS GK_INFER OUT_DIR [extra flags for the
# first two]
set -euo pipefail
gemm=$1 conv=$2 ops=$3 infer=$4 out=$5
shift 5
mkdir -p "$out"
# Each measurement's console line goes to a log; the summary tables to the terminal: from
# the line starting with `first` up to the one starting with `until` (or the end).
run() {
  local bin=$1 log=$2 first=$3 until=$4
  shift 4
  "$bin" --out="$out" "$@" --benchmark_counters_tabular=true > "$out/$log" 2>&1 || {
    tail -n 30 "$out/$log"; exit 1; }
  awk -v first="$first" -v until="$until" \
    'index($0, first) == 1 { on = 1 } on && until != "" && index($0, until) == 1 { exit } on' "$out/$log"
}
run "$gemm" gemm.log "# gemmkit vs OpenBLAS" "" "$@"
echo
run "$conv" conv.log "# Convolution layers" "" "$@"
echo "per-layer convolution table: $out/conv.md"
echo
# Batch 8 against batch 1 (timed in the same rounds), ResNet-18 and MobileNetV2 only, one
# thread, 3 rounds: about 3 minutes on the 2-vCPU Xeon (the layers at batch 8 take 8 times
# as long).
grep -E '^(net|resnet18|mobilenet_v2),' perf/networks.csv > "$out/batch8-layers.csv"
run "$conv" conv-batch8.log "## NHWC" "## Winograd" --batch=8 --threads=1 --rounds=3 \
  --layers="$out/batch8-layers.csv" "$@"
echo "per-layer convolution table at batch 8: $out/conv-batch8.md"
echo
# ResNeXt-50 32x4d's layers: grouped 3x3 convolutions (32 groups of 4 to 32 channels), 3 rounds.
run "$conv" conv-resnext50.log "# Convolution layers" "## Winograd" --layers=perf/resnext50.csv \
  --name=conv-resnext50 --rounds=3 "$@"
echo "per-layer convolution table of ResNeXt-50: $out/conv-resnext50.md"
echo
"$ops" --out="$out" > "$out/ops.log" 2>&1 || { tail -n 30 "$out/ops.log"; exit 1; }
cat "$out/ops.md"
echo
# The networks: first their logits against PyTorch's, then their speed.
scripts/networks.py check "$infer" "$out/networks" --batches 1,4
echo
scripts/networks.py bench "$infer" "$out/networks"
