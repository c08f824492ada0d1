#!/usr/bin/python3
"""Whole networks against PyTorch: gk-infer on models exported from torchvision's
definitions (scripts/export_torchvision.py), PyTorch on the same weights and input.

    scripts/networks.py check GK_INFER WORK_DIR [--nets a,b] [--batches 1,4] [--layouts NCHW8,NCHW,NHWC]
    scripts/networks.py bench GK_INFER WORK_DIR [--nets a,b] [--threads 1,2] [--rounds R]
                              [--bench-batches 1,8]

check: the logits agree, max |diff| <= 1e-4 x max |logit| with --high-accuracy (no
Winograd F(4x4)/F(6x6)) and <= 1e-3 x max |logit| with AUTO, in each layout (NCHW8, NCHW
and NHWC by default). Exits non-zero on any failure; prints "N passed, N failed".
bench: median milliseconds of a whole forward pass (3x224x224 images), gemmkit NCHW8 and
NHWC FASTRUN (profiled once, then cached) against PyTorch eager (NCHW and channels_last)
and TorchScript frozen + optimize_for_inference, measured in the same run, round by round
in turn; at batch 1, and at batch 8 per image against batch 1 (eager NCHW left out there:
it was never PyTorch's fastest mode, and a batch of 8 takes it seconds); writes
WORK_DIR/networks.md and networks.csv.
"""
import argparse
import copy
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torchvision as ex  # noqa: E402

SEED = 1


def model_file(work, name, model):
    path = os.path.join(work, f"{name}.gk")
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(ex.__file__):
        with open(path, "wb") as f:
            f.write(ex.export(name, model))
    return path


def input_batch(batch, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, 3, 224, 224, generator=g)


def gk_infer(binary, model_path, in_path, out_path, args, env=None):
    cmd = [binary, model_path, "--input", in_path] + (["--output", out_path] if out_path else []) + args
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def check(a):
    passed = failed = 0
    print("| network | batch | mode | layout | max abs diff / max abs logit | bound | result |")
    print("|---|---|---|---|---|---|---|")
    for name in a.nets:
        model = ex.build_model(name, SEED)
        path = model_file(a.work, name, model)
        for batch in a.batches:
            x = input_batch(batch, 100 + batch)
            with torch.no_grad():
                ref = model(x).numpy()
            in_path = os.path.join(a.work, f"in{batch}.npy")
            out_path = os.path.join(a.work, f"{name}.out{batch}.npy")
            np.save(in_path, x.numpy())
            for mode, flags, bound in (("high-accuracy", ["--high-accuracy"], 1e-4), ("auto", [], 1e-3)):
                for layout in a.layouts:
                    try:
                        gk_infer(a.gk_infer, path, in_path, out_path, ["--layout", layout] + flags)
                        got = np.load(out_path)
                        rel = float(np.abs(got - ref).max() / np.abs(ref).max()) if got.shape == ref.shape else float("inf")
                    except RuntimeError as e:
                        print(e, file=sys.stderr)
                        rel = float("inf")
                    ok = rel <= bound
                    passed, failed = passed + ok, failed + (not ok)
                    print(f"| {name} | {batch} | {mode} | {layout} | {rel:.2e} | {bound:.0e} | {'ok' if ok else 'FAIL'} |",
                          flush=True)
    print(f"networks: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def gk_fields(binary, model_path, in_path, args, env):
    """gk-infer's key=value figures (median_ms, conv_ms, other_ms, ...) as floats."""
    out = gk_infer(binary, model_path, in_path, None, args, env)
    return {k: float(v) for line in out.split("\n") for k, v in (kv.split("=") for kv in line.split() if "=" in kv)}


def torch_median_ms(fn, x, reps):
    times = []
    with torch.no_grad():
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def basic_block_models(work):
    """A ResNet basic block (64 channels, 56x56) after a stem conv, with its residual join
    fused into the second conv, and as conv + a separate add: the two model files."""
    torch.manual_seed(3)
    stem = torch.nn.Conv2d(3, 64, 3, stride=4, padding=1)
    conv1, conv2 = torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.Conv2d(64, 64, 3, padding=1)
    paths = []
    for fused in (True, False):
        w = ex.Writer("basic_block", 224)
        x = w.conv(0, stem, act="relu")
        y = w.conv(x, conv1, act="relu")
        if fused:
            y = w.conv(y, conv2, act="relu", add=x)
        else:
            y = w.add(w.conv(y, conv2), x, act="relu")
        path = os.path.join(work, f"basic_block_{'fused' if fused else 'separate'}.gk")
        with open(path, "wb") as f:
            f.write(w.finish(w.fc(w.flatten(w.adaptive_avgpool(y, 1)), torch.nn.Linear(64, 10))))
        paths.append(path)
    return paths


def bench_basic_block(a, in_path, env):
    """Rows: the fused and separate block's time, interleaved, and the add's own time."""
    fused, separate = basic_block_models(a.work)
    lines = []
    for threads in a.threads:
        args = ["--threads", str(threads), "--layout", "NCHW8", "--algo", "fastrun"]
        for path in (fused, separate):
            gk_infer(a.gk_infer, path, in_path, None, args, env)
        # The add costs ~0.03 ms of ~1 ms, while a shared VM's speed moves 10-20% from
        # second to second: many short rounds in alternating order (ABBA), and the saving
        # as the median of each round's own difference, which a slow phase shifts less
        # than it shifts either median.
        runs = {fused: [], separate: []}
        other = []
        for r in range(max(4 * a.rounds, 16)):
            for path in ((fused, separate) if r % 2 == 0 else (separate, fused)):
                fields = gk_fields(a.gk_infer, path, in_path, args + ["--time", "--rounds", str(4 * a.reps)], env)
                runs[path].append(fields["median_ms"])
                if path == separate:
                    other.append(fields["other_ms"])
        m = statistics.median
        saved = m([s - f for s, f in zip(runs[separate], runs[fused])])
        lines.append(f"| {threads} | {m(runs[fused]):.3f} | {m(runs[separate]):.3f} | "
                     f"{saved:.3f} | {m(other):.3f} |")
    return ["", "## Residual fusion: a ResNet basic block (64 channels, 56x56, after a stem conv)", "",
            "fused: the join in the second conv's epilogue (GK_CONV_FLAG_ADD_TO_OUTPUT); separate: conv, then "
            "gk_add with ReLU. Whole-model median ms of alternating rounds; saved: the median of each round's "
            "separate - fused; 'add + pool + fc' is the separate model's time outside convolutions.", "",
            "| threads | fused ms | separate ms | saved ms | add + pool + fc ms |", "|---|---|---|---|---|"] + lines


def bench_rows(a, name, model, batch, env):
    """One row per thread count: every mode measured in turn in each round, per image."""
    x = input_batch(batch, 7)
    in_path = os.path.join(a.work, f"in{batch}.npy")
    np.save(in_path, x.numpy())
    path = model_file(a.work, name, model)
    with torch.no_grad():
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, x)))
    # PyTorch's NHWC: the model and the image in channels_last (eager), the peer of gemmkit NHWC.
    model_cl, x_cl = copy.deepcopy(model).to(memory_format=torch.channels_last), x.contiguous(
        memory_format=torch.channels_last)
    eager_too = batch == 1
    rounds, reps = (a.rounds, a.reps) if batch == 1 else (max(2, a.rounds - 2), max(2, a.reps - 2))
    rows = []
    for threads in a.threads:
        torch.set_num_threads(threads)
        gk_args = {layout: ["--threads", str(threads), "--layout", layout, "--algo", "fastrun"]
                   for layout in ("NCHW8", "NHWC")}
        for args in gk_args.values():
            gk_infer(a.gk_infer, path, in_path, None, args, env)  # profiles into the cache
        with torch.no_grad():  # warm up the PyTorch modes
            frozen(x), frozen(x), model_cl(x_cl)
            if eager_too:
                model(x)
        gk, conv, other, nhwc, eager, ofi, cl = [], [], [], [], [], [], []
        head = lanes = 0
        for _ in range(rounds):  # each round measures every mode, in turn
            fields = gk_fields(a.gk_infer, path, in_path, gk_args["NCHW8"] + ["--time", "--rounds", str(reps)], env)
            gk.append(fields["median_ms"] / batch)
            conv.append(fields["conv_ms"] / batch)
            other.append(fields["other_ms"] / batch)
            head, lanes = int(fields["image_by_image_ops"]), int(fields["lanes"])
            fields = gk_fields(a.gk_infer, path, in_path, gk_args["NHWC"] + ["--time", "--rounds", str(reps)], env)
            nhwc.append(fields["median_ms"] / batch)
            if eager_too:
                eager.append(torch_median_ms(model, x, reps) / batch)
            ofi.append(torch_median_ms(frozen, x, reps) / batch)
            cl.append(torch_median_ms(model_cl, x_cl, reps) / batch)
        m = statistics.median
        nan = float("nan")
        row = dict(net=name, batch=batch, threads=threads, gemmkit_ms=m(gk), conv_ms=m(conv), other_ms=m(other),
                   eager_ms=m(eager) if eager else nan, ofi_ms=m(ofi), best_gemmkit_ms=min(gk), nhwc_ms=m(nhwc),
                   channels_last_ms=m(cl), image_by_image_ops=head, lanes=lanes)
        # The batch table sets batch 8 against batch 1 without eager NCHW (not timed at batch 8).
        row["fast_torch_ms"] = min(row["ofi_ms"], row["channels_last_ms"])
        best_torch = min(v for v in (row["eager_ms"], row["fast_torch_ms"]) if v == v)
        row["best_torch_ms"] = best_torch
        row["vs_best_torch"] = row["gemmkit_ms"] / best_torch
        row["nhwc_vs_best_torch"] = row["nhwc_ms"] / best_torch
        row["outside_conv"] = row["other_ms"] / row["gemmkit_ms"]
        rows.append(row)
        print(f"{name} batch={batch} threads={threads}, ms per image: gemmkit {row['gemmkit_ms']:.2f} (conv "
              f"{row['conv_ms']:.2f}, other {row['other_ms']:.2f}), NHWC {row['nhwc_ms']:.2f}, PyTorch eager "
              f"{row['eager_ms']:.2f}, optimize_for_inference {row['ofi_ms']:.2f}, channels_last "
              f"{row['channels_last_ms']:.2f}: {row['vs_best_torch']:.2f}x the fastest PyTorch", flush=True)
    return rows


def batch_lines(rows):
    """Batch 8 (or any batch past 1) per image against batch 1, per network and thread count."""
    ones = {(r["net"], r["threads"]): r for r in rows if r["batch"] == 1}
    lines = []
    for r in rows:
        one = ones.get((r["net"], r["threads"]))
        if r["batch"] == 1 or one is None:
            continue
        lines.append(f"| {r['net']} | {r['threads']} | {r['batch']} | {r['gemmkit_ms']:.2f} | "
                     f"{r['gemmkit_ms'] / one['gemmkit_ms']:.2f} | {r['lanes']} | {r['image_by_image_ops']} | {r['nhwc_ms']:.2f} | "
                     f"{r['nhwc_ms'] / one['nhwc_ms']:.2f} | {r['fast_torch_ms']:.2f} | "
                     f"{r['fast_torch_ms'] / one['fast_torch_ms']:.2f} | {r['vs_best_torch']:.2f} |")
    if not lines:
        return []
    return ["", "## Batches: ms per image against batch 1", "",
            "Per image: a batch pass's median ms over its images (2 rounds fewer and 2 passes fewer than at batch 1, "
            "at least 2 of each). b / b1: against the same mode's batch 1 (<= 1: the batch costs no more per image). "
            "gemmkit runs a batch as lanes, a thread each with its share of the images (gk-infer's `--lanes`), "
            "and in a lane its first ops image by image (`image_by_image_ops`, `--image-by-image-ops`). PyTorch: the faster of optimize_for_inference and channels_last, at either "
            "batch; ratio = gemmkit NCHW8 / that.", "",
            "| network | threads | batch | gemmkit NCHW8 | b / b1 | lanes | image-by-image ops | gemmkit NHWC | b / b1 "
            "| PyTorch fastest | b / b1 | ratio |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"] + lines


def bench(a):
    env = dict(os.environ, GEMMKIT_FASTRUN_CACHE=os.path.join(a.work, "fastrun.cache"))
    rows = []
    for name in a.nets:
        model = ex.build_model(name, SEED)
        for batch in a.bench_batches:
            rows += bench_rows(a, name, model, batch, env)
    with open(os.path.join(a.work, "networks.csv"), "w") as f:
        keys = list(rows[0].keys())
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(str(r[k]) for k in keys) + "\n")
    lines = ["# Whole networks: gemmkit vs PyTorch " + torch.__version__,
             "",
             f"Batch 1, 3x224x224, median ms of {a.rounds} rounds x {a.reps} passes, each round measuring all "
             "five in turn. gemmkit: gk-infer, NCHW8 (and NHWC), FASTRUN (profile cached); PyTorch: eager NCHW, "
             "TorchScript frozen + optimize_for_inference, and eager channels_last (NHWC). ratio = gemmkit / the "
             "fastest PyTorch (< 1: gemmkit faster); outside conv = share of gemmkit's NCHW8 time in the other "
             "operations.",
             "",
             "| network | threads | gemmkit ms | best round | conv ms | other ms | outside conv | gemmkit NHWC ms "
             "| PyTorch eager ms | PyTorch optimize_for_inference ms | PyTorch channels_last ms | ratio | NHWC ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["batch"] != 1:
            continue
        lines.append(f"| {r['net']} | {r['threads']} | {r['gemmkit_ms']:.2f} | {r['best_gemmkit_ms']:.2f} | "
                     f"{r['conv_ms']:.2f} | {r['other_ms']:.2f} | {100 * r['outside_conv']:.1f}% | {r['nhwc_ms']:.2f} | "
                     f"{r['eager_ms']:.2f} | {r['ofi_ms']:.2f} | {r['channels_last_ms']:.2f} | "
                     f"{r['vs_best_torch']:.2f} | {r['nhwc_vs_best_torch']:.2f} |")
    lines += batch_lines(rows)
    x = input_batch(1, 7)
    in_path = os.path.join(a.work, "in1.npy")
    np.save(in_path, x.numpy())
    lines += bench_basic_block(a, in_path, env)
    with open(os.path.join(a.work, "networks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("check", "bench"))
    p.add_argument("gk_infer")
    p.add_argument("work")
    p.add_argument("--nets", default=",".join(ex.NETWORKS))
    p.add_argument("--batches", default="1,4", help="batches the check runs")
    p.add_argument("--bench-batches", default="1,8", help="batches the bench times (per image)")
    p.add_argument("--layouts", default="NCHW8,NCHW,NHWC", help="gk-infer layouts the check runs")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    a.nets = a.nets.split(",")
    a.batches = [int(b) for b in a.batches.split(",")]
    a.bench_batches = [int(b) for b in a.bench_batches.split(",")]
    a.threads = [int(t) for t in a.threads.split(",")]
    a.layouts = a.layouts.split(",")
    os.makedirs(a.work, exist_ok=True)
    return check(a) if a.mode == "check" else bench(a)


if __name__ == "__main__":
    sys.exit(main())
