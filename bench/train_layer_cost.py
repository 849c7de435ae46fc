"""What the training workload layer costs: `workload train --computation-time 0` against a plain `run` of the
same path, at the same request size and concurrency, in interleaved rotated rounds with an A/A pair beside.

Goals (issue: training input measured into the GPU):
  * the data rate of the workload (samples/s x sample size) >= 0.95 x the plain run's;
  * host memory per emulated accelerator (peak RSS / accelerators, host path) <= prefetch depth x batch x
    sample size + 64 MiB.

The data set is made once by xferscope (`--keep`) and read with `--data`; samples are of one size, a whole
number of requests, so both sides read the same requests. The plain run reads one file per worker.

    python bench/train_layer_cost.py --dir /var/tmp/xs [--path host] [--rounds 5] [--seconds 5]
        [--accelerators 2] [--read-threads 2] [--sample 16M] [--bs 4M] [--files 64]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from xferscope.units import parse_size as size

MIB = 1 << 20


def xferscope(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "xferscope.cli", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"xferscope {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--path", default="host")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--accelerators", type=int, default=2)
    ap.add_argument("--read-threads", type=int, default=2)
    ap.add_argument("--sample", default="16M")
    ap.add_argument("--bs", default="4M")
    ap.add_argument("--files", type=int, default=64)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="xs-train-cost-", dir=args.dir)
    workers = args.accelerators * args.read_threads
    sample = size(args.sample)
    try:
        sets, scratch = os.path.join(work, "sets"), os.path.join(work, "run")
        os.makedirs(sets)
        os.makedirs(scratch)
        common = ["--path", args.path, "--bs", args.bs, "--format", "json"]
        xferscope(
            "workload",
            "train",
            "cosmoflow",
            "--files",
            str(args.files),
            "--sample-size",
            args.sample,
            "--sample-sd",
            "0",
            "--steps",
            "1",
            "--dir",
            sets,
            "--keep",
            "--compute",
            "sleep",
            *common,
        )
        (kept,) = os.listdir(sets)
        data = os.path.join(sets, kept, "train")
        per_worker = max(sample * args.files // workers, 64 * MIB)

        def train() -> dict:
            r = xferscope(
                "workload",
                "train",
                "cosmoflow",
                "--data",
                data,
                "--samples-per-file",
                "1",
                "--batch",
                "1",
                "--computation-time",
                "0",
                "-a",
                str(args.accelerators),
                "--read-threads",
                str(args.read_threads),
                "-T",
                str(args.seconds),
                "--compute",
                "sleep",
                *common,
            )
            return {"mb_s": r["mb_per_s"], "rss": r["peak_rss_bytes"], "slots": args.read_threads + 1}

        def plain() -> dict:
            r = xferscope(
                "run",
                "-w",
                str(workers),
                "-T",
                str(args.seconds),
                "--dir",
                scratch,
                "--size",
                str(per_worker),
                "--keep",
                *common,
            )
            return {"mb_s": r["bytes"] / r["seconds"] / 1e6}

        ratios, aa, rss = [], [], []
        for i in range(args.rounds):
            order = [("train", train), ("plain", plain), ("plain2", plain)]
            k = i % 3
            order = order[k:] + order[:k]
            got = {name: fn() for name, fn in order}
            ratios.append(got["train"]["mb_s"] / got["plain"]["mb_s"])
            aa.append(got["plain2"]["mb_s"] / got["plain"]["mb_s"])
            rss.append(got["train"]["rss"] / args.accelerators)
            print(
                f"round {i + 1}: train {got['train']['mb_s']:.0f} MB/s, run {got['plain']['mb_s']:.0f} and "
                f"{got['plain2']['mb_s']:.0f} MB/s -> {ratios[-1]:.3f} (A/A {aa[-1]:.3f})",
                flush=True,
            )
        med, lo, hi = statistics.median(ratios), min(ratios), max(ratios)
        bound = (args.read_threads + 1) * 1 * sample + 64 * MIB
        print(
            f"\npath {args.path}, {args.accelerators} accelerators x {args.read_threads} read threads = {workers} "
            f"workers, samples {args.sample}, requests {args.bs}, {args.seconds:g} s, {args.rounds} rounds"
        )
        print(
            f"{'met' if med >= 0.95 else 'not met':>7}  workload / run data rate: median {med:.3f} "
            f"({lo:.3f}-{hi:.3f}); A/A {statistics.median(aa):.3f} ({min(aa):.3f}-{max(aa):.3f})"
        )
        peak = max(rss)
        print(
            f"{'met' if peak <= bound else 'not met':>7}  peak RSS per accelerator {peak / MIB:.0f} MiB, bound "
            f"{bound / MIB:.0f} MiB (prefetch {args.read_threads + 1} x batch 1 x {args.sample} + 64 MiB)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
