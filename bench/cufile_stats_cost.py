#!/usr/bin/env python3
"""Do cuFile's statistics, left on, cost throughput? For a GPU machine.

    python bench/cufile_stats_cost.py --dir /mnt/nvme [--paths cufile,cufile-batch] [--bs 4K,1M] [--rounds 6]
                                      [--seconds 5] [--size 1G] [--workers 4]

xferscope never switches cuFile's statistics on in the process that measures (its mode probe runs in a
process of its own), so its figures do not depend on this. The question is still worth an answer: a user
whose cufile.json sets `"profile": {"cufile_stats": 3}` measures with them on all the time. This runs the same
`xferscope run` with two cufile.json files that differ only in `profile.cufile_stats` (0 and 3; the rest
copied from the cufile.json in effect, or cuFile's defaults), in rotated rounds with an A/A pair (stats off
twice), and prints per case the paired ratio on/off with its range and the verdict under compare's rule.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from xferscope.compare.verdict import RULE, paired_verdict
from xferscope.engines.cufile_driver import config_path, read_config


def config_with_stats(level: int, directory: str) -> str:
    try:
        cfg = read_config(config_path())
    except (OSError, ValueError):
        cfg = {}
    cfg.setdefault("profile", {})["cufile_stats"] = level
    path = os.path.join(directory, f"cufile-stats-{level}.json")
    with open(path, "w") as fh:
        json.dump(cfg, fh, indent=2)
    return path


def run(path: str, bs: str, args, config: str, out: str) -> float:
    cmd = [
        sys.executable,
        "-m",
        "xferscope.cli",
        "run",
        "--path",
        path,
        "--bs",
        bs,
        "-w",
        str(args.workers),
        "-s",
        args.size,
        "-T",
        str(args.seconds),
        "--file",
        os.path.join(args.dir, "xferscope-stats-cost.dat"),
        "--keep",
        "--json",
        out,
    ]
    env = {**os.environ, "CUFILE_ENV_PATH_JSON": config}
    subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=args.seconds + 600)
    with open(out) as fh:
        return json.load(fh)["throughput_mib_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--paths", default="cufile,cufile-batch,cufile-async")
    ap.add_argument("--bs", default="4K,1M")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="xferscope-stats-cost-")
    off, on = config_with_stats(0, work), config_with_stats(3, work)
    out = os.path.join(work, "run.json")
    print(
        f"machine: {platform.node()}, {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}; {args.rounds} rounds "
        f"of {args.seconds:g} s, {args.workers} workers, {args.size} in {args.dir}"
    )
    print(RULE)
    print(f"{'case':<24}{'off MiB/s':>11}{'on MiB/s':>11}{'on/off':>8}{'range':>15}  verdict   {'A/A':>6}  A/A verdict")
    try:
        for path in args.paths.split(","):
            for bs in args.bs.split(","):
                variants = {"off": off, "on": on, "off again": off}
                figures: dict[str, list[float]] = {k: [] for k in variants}
                names = list(variants)
                for r in range(args.rounds):
                    order = names[r % 3 :] + names[: r % 3]
                    for name in order:
                        figures[name].append(run(path, bs, args, variants[name], out))
                v = paired_verdict(figures["off"], figures["on"])
                aa = paired_verdict(figures["off"], figures["off again"])
                print(
                    f"{path + ' ' + bs:<24}{statistics.median(figures['off']):>11.1f}"
                    f"{statistics.median(figures['on']):>11.1f}{v.ratio:>8.3f}{f'{v.low:.3f}-{v.high:.3f}':>15}  "
                    f"{v.word:<9} {aa.ratio:>6.3f}  {aa.word}"
                )
    finally:
        for name in os.listdir(args.dir):
            if name.startswith("xferscope-stats-cost.dat"):
                os.unlink(os.path.join(args.dir, name))
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
