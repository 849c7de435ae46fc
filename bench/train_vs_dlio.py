"""The same training workload and data set run by DLIO and by `xferscope workload train --path host --compute sleep`
(the data stopping in host memory and the accelerator a sleep, as DLIO does), AU side by side.

DLIO (argonne-lcf/dlio_benchmark, installed outside this repository) makes the data set in its own format and
layout; xferscope reads the same files with `--data`, with DLIO's batch, read threads and computation time,
through the page cache as DLIO reads (`--buffered`). The page cache is dropped before every run where this runs
as root. Rounds alternate which tool goes first; the figure is the median difference in AU points.

Goal (issue: training input measured into the GPU): xferscope's AU within 3 points of DLIO's.

    python bench/train_vs_dlio.py --dlio /path/to/venv/bin/dlio_benchmark --dir /var/tmp/xs [--workload unet3d_h100]
        [--files 16] [--sample 8M] [--accelerators 1] [--epochs 2] [--rounds 3] [--computation-time 0.323]
        [--batch 7] [--read-threads 4]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from xferscope.engines import page_cache
from xferscope.units import parse_size as size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlio", required=True, help="the dlio_benchmark executable")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--workload", default="unet3d_h100")
    ap.add_argument("--preset", default="unet3d", help="xferscope's preset of the same workload")
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--sample", default="8M")
    ap.add_argument("--accelerators", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--computation-time", type=float, default=0.323)
    ap.add_argument("--batch", type=int, default=7)
    ap.add_argument("--read-threads", type=int, default=4)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="xs-vs-dlio-", dir=os.path.abspath(args.dir))  # DLIO runs in it
    if os.sep in args.dlio:
        args.dlio = os.path.abspath(args.dlio)
    data = os.path.join(work, "data")
    common = [
        f"workload={args.workload}",
        f"++workload.dataset.data_folder={data}",
        f"++workload.dataset.num_files_train={args.files}",
        "++workload.dataset.num_files_eval=0",
        f"++workload.dataset.record_length_bytes={size(args.sample)}",
        "++workload.dataset.record_length_bytes_stdev=0",
        f"++workload.reader.batch_size={args.batch}",
        f"++workload.reader.read_threads={args.read_threads}",
        f"++workload.train.computation_time={args.computation_time}",
        f"++workload.train.epochs={args.epochs}",
        "++workload.workflow.checkpoint=False",
        "++workload.workflow.evaluation=False",
    ]
    mpi = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(args.accelerators)]
    try:
        out = os.path.join(work, "gen")
        gen = subprocess.run(
            [
                *mpi,
                args.dlio,
                *common,
                "++workload.workflow.generate_data=True",
                "++workload.workflow.train=False",
                f"++workload.output.folder={out}",
            ],
            capture_output=True,
            text=True,
            cwd=work,  # DLIO's hydra writes its logs below the working directory
        )
        if gen.returncode != 0:
            raise SystemExit(f"DLIO could not make the data set: {gen.stderr.strip()[-600:]}")
        train_dir = os.path.join(data, "train")
        files = sorted(glob.glob(os.path.join(train_dir, "*")))
        print(f"DLIO made {len(files)} files in {train_dir}", flush=True)

        def dlio(i: int) -> float:
            out = os.path.join(work, f"dlio-{i}")
            r = subprocess.run(
                [
                    *mpi,
                    args.dlio,
                    *common,
                    "++workload.workflow.generate_data=False",
                    "++workload.workflow.train=True",
                    f"++workload.output.folder={out}",
                ],
                capture_output=True,
                text=True,
                cwd=work,
            )
            summaries = glob.glob(os.path.join(out, "**", "summary.json"), recursive=True)
            if r.returncode != 0 or not summaries:
                raise SystemExit(f"DLIO's run failed: {r.stderr.strip()[-600:]}")
            with open(summaries[0]) as fh:
                return json.load(fh)["metric"]["train_au_mean_percentage"]

        def ours() -> float:
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "xferscope.cli",
                    "workload",
                    "train",
                    args.preset,
                    "--data",
                    train_dir,
                    "--samples-per-file",
                    "1",
                    "--path",
                    "host",
                    "--compute",
                    "sleep",
                    "--buffered",
                    "-a",
                    str(args.accelerators),
                    "--epochs",
                    str(args.epochs),
                    "--batch",
                    str(args.batch),
                    "--read-threads",
                    str(args.read_threads),
                    "--computation-time",
                    str(args.computation_time),
                    "--format",
                    "json",
                ],
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                raise SystemExit(f"xferscope's run failed: {r.stderr.strip()[-600:]}")
            return 100 * json.loads(r.stdout)["au"]

        diffs = []
        STAYED = "; the files' pages stayed in the page cache"
        for i in range(args.rounds):
            got = {}
            order = ["dlio", "xferscope"] if i % 2 == 0 else ["xferscope", "dlio"]
            for name in order:
                dropped = page_cache.evict_files(files) in (0.0, None)
                got[name] = dlio(i) if name == "dlio" else ours()
            diffs.append(got["xferscope"] - got["dlio"])
            print(
                f"round {i + 1}: DLIO AU {got['dlio']:.1f}%, xferscope AU {got['xferscope']:.1f}% "
                f"({diffs[-1]:+.1f} points){'' if dropped else STAYED}",
                flush=True,
            )
        med = statistics.median(diffs)
        print(
            f"\n{args.workload}: {args.files} files of {args.sample}, batch {args.batch}, {args.read_threads} read "
            f"threads, {args.computation_time} s a batch, {args.accelerators} accelerators, {args.epochs} epochs, "
            f"{args.rounds} rounds"
        )
        print(
            f"{'met' if abs(med) <= 3 else 'not met':>7}  xferscope AU - DLIO AU: median {med:+.1f} points "
            f"({min(diffs):+.1f} to {max(diffs):+.1f})"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
