"""The MPI layer's own cost for `workload train`: ``mpirun -np N xferscope workload train --mpi -a A`` against one
process with N x A accelerators, over the same data set and total accelerators, in interleaved rotated rounds.

Each round runs, in a rotated order: the job under mpirun (N ranks of A accelerators), one process of N x A
accelerators, and that process again (the A/A). The set is generated once (``--keep``) and every run reads it
with ``--data``, so both read the same files the same way. The figure is samples/s, the sum over every
accelerator (the runs are bounded by ``-T``); it prints the job / one-process ratio with its range over the rounds,
the A/A beside it, and "met" where the median ratio is at least 1 - ``--within`` (5%).

    python bench/train_mpi_cost.py --dir /var/tmp/tm --ranks 4 --rounds 5 [--path host --compute sleep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys

from xferscope.compare.rounds import round_orders
from xferscope.compare.verdict import paired_verdict


def xferscope(*args: str) -> list[str]:
    return [sys.executable, "-m", "xferscope.cli", "workload", "train", *args]


def mpirun(ranks: int) -> list[str]:
    cmd = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def samples_per_s(cmd: list[str], out: str) -> float:
    proc = subprocess.run([*cmd, "--json", out], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:8])} ... failed: {proc.stderr.strip()[-600:]}")
    with open(out) as fh:
        return float(json.load(fh)["samples_per_s"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("-a", "--accelerators", type=int, default=1, help="accelerators a rank")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", default="6")
    p.add_argument("--path", default="host")
    p.add_argument("--compute", default="sleep")
    p.add_argument("--gpu", default=None, help="-d of the one process (the job takes {local_rank})")
    p.add_argument("--files", type=int, default=256)
    p.add_argument("--sample-size", default="4M")
    p.add_argument("--computation-time", default="0", help="0: the reads alone bound the rate")
    p.add_argument("--within", type=float, default=0.05)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    shape = [
        "--path", a.path, "--compute", a.compute, "--sample-size", a.sample_size, "--sample-sd", "0",
        "--batch", "4", "--computation-time", a.computation_time, "-T", a.seconds,
    ]  # fmt: skip
    before = set(os.listdir(a.dir))
    made = subprocess.run(
        xferscope("unet3d", *shape, "--files", str(a.files), "--steps", "1", "--dir", a.dir, "--keep"),
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        raise SystemExit(f"making the data set failed: {made.stderr.strip()[-600:]}")
    [root] = [os.path.join(a.dir, d) for d in set(os.listdir(a.dir)) - before]
    try:
        data = ["--data", os.path.join(root, "train"), "--samples-per-file", "1"]
        total = a.ranks * a.accelerators
        one_gpu = ["-d", a.gpu] if a.gpu else []
        job_gpu = ["-d", "{local_rank}"] if a.gpu else []
        arms = {
            "mpi": [
                *mpirun(a.ranks),
                *xferscope("unet3d", "--mpi", "-a", str(a.accelerators), *job_gpu, *shape, *data),
            ],
            "one process": xferscope("unet3d", "-a", str(total), *one_gpu, *shape, *data),
            "one process again": xferscope("unet3d", "-a", str(total), *one_gpu, *shape, *data),
        }
        got: dict[str, list[float]] = {k: [] for k in arms}
        names = list(arms)
        for order in round_orders(len(names), a.rounds):
            for i in order:
                got[names[i]].append(samples_per_s(arms[names[i]], os.path.join(a.dir, "out.json")))
            print("  round: " + ", ".join(f"{k} {v[-1]:.1f} samples/s" for k, v in got.items()), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(a.dir, "out.json"))
    v = paired_verdict(got["one process"], got["mpi"])
    same = paired_verdict(got["one process"], got["one process again"])
    print(
        f"{a.ranks} ranks x {a.accelerators} under mpirun / one process of {total}, samples/s: {v.ratio:.3f} "
        f"(rounds {v.range_low:.3f}-{v.range_high:.3f}, {v.word}); A/A {same.ratio:.3f} "
        f"({same.range_low:.3f}-{same.range_high:.3f})"
    )
    met = v.ratio >= 1 - a.within
    print(f"goal: at most {a.within:.0%} below one process: {'met' if met else 'not met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
