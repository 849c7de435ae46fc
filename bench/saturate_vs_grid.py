#!/usr/bin/env python3
"""The adaptive knee search against the full grid it replaces, in one session, on the same file.

    python bench/saturate_vs_grid.py --dir /mnt/nvme [--path host] [--bs 4K,1M] [--seconds 1] [--grid-reps 3]

1. ``xferscope saturate`` over workers 1..16 x queue depth 1..64 at each block size (its JSON kept);
2. ``xferscope replay`` of the full grid: workers 1..16 x queue depth {1, 4, 16, 64} x the block sizes, each
   point ``--grid-reps`` times (median), on the same file and with the same seconds per run.

Prints, per block size: the points the search measured against the grid's count (acceptance: at most 40%),
its plateau, the grid's best point (the best median) and the ratio grid best / plateau (acceptance: the grid's
best within 10% of the plateau), and the load average before and after: on a busy machine say so beside the
figures, or run it again when ``uptime`` is quiet.

The search and the grid run minutes apart; on a shared or virtual disk the same point can drift by more than
10% in that time. So, 3. the search's plateau point and the grid's best point are then run again in
``--confirm-rounds`` interleaved rounds (order rotated) and their paired ratio is judged by compare's rule: the
like-for-like answer to "did the search find a plateau as high as the grid's best?".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POINT_SHARE = 0.40  # the search may measure at most this share of the grid's points
GRID_WITHIN = 0.10  # the grid's best point within this of the reported plateau

GRID = """name = "saturate-grid"
kind = "io"
repetitions = {reps}
duration = {seconds}

[base]
path = "{path}"
io = "read"
file = "{file}"
file_size = "{size}"

[grid]
block_size = [{blocks}]
workers = [{workers}]
iodepth = [{depths}]
"""


def xferscope(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "xferscope.cli", *args]
    print("$ xferscope " + " ".join(args), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"xferscope {args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc


def run_mib_s(args, data_file: str, bs: int, workers: int, depth: int) -> float:
    proc = xferscope(
        "run",
        "--path",
        args.path,
        "--bs",
        str(bs),
        "-w",
        str(workers),
        "--iodepth",
        str(depth),
        "-T",
        str(args.seconds),
        "-s",
        args.size,
        "--file",
        data_file,
        "--keep",
        "--format",
        "json",
    )
    return json.loads(proc.stdout)["throughput_mib_s"]


def confirm(args, data_file: str, bs: int, mine: tuple[int, int], theirs: tuple[int, int]):
    """The search's plateau point against the grid's best, in interleaved rounds (order rotated)."""
    from xferscope.compare.verdict import paired_verdict

    plateau, grid_best = [], []
    for round_no in range(args.confirm_rounds):
        order = [(mine, plateau), (theirs, grid_best)]
        for (workers, depth), into in order if round_no % 2 == 0 else order[::-1]:
            into.append(run_mib_s(args, data_file, bs, workers, depth))
    return paired_verdict(plateau, grid_best)


def measured(sat: dict, path: str) -> list[dict]:
    """The searches of ``path`` itself (not the host search run as the storage reference of another path)."""
    return [s for s in sat["series"] if s["path"] == path and s["role"] == "measured"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="directory on the storage under test (O_DIRECT)")
    ap.add_argument("--path", default="host")
    ap.add_argument("--bs", default="4K,1M")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per run, search and grid alike")
    ap.add_argument("--max-workers", type=int, default=16)
    ap.add_argument("--max-qd", type=int, default=64)
    ap.add_argument("--grid-reps", type=int, default=3, help="runs of each grid point (median)")
    ap.add_argument("--confirm-rounds", type=int, default=5, help="interleaved rounds of plateau against grid best")
    ap.add_argument("--keep", metavar="DIR", help="keep the saturation and grid JSON files here")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="xferscope-bench-", dir=args.dir)
    out = args.keep or tempfile.mkdtemp(prefix="xferscope-bench-results-")
    os.makedirs(out, exist_ok=True)
    data_file = os.path.join(work, "xferscope-scratch.dat")
    sat_json = os.path.join(out, "saturate.json")
    grid_json = os.path.join(out, "grid.results.json")
    blocks = [b.strip() for b in args.bs.split(",") if b.strip()]
    depths = [1]
    while depths[-1] * 4 <= args.max_qd:
        depths.append(depths[-1] * 4)
    if args.path not in ("host", "cufile-batch"):
        depths = [1]
    started = time.time()
    load_before = load()
    try:
        xferscope(
            "saturate",
            "--path",
            args.path,
            "--bs",
            args.bs,
            "--max-workers",
            str(args.max_workers),
            "--max-qd",
            str(args.max_qd),
            "-T",
            str(args.seconds),
            "-s",
            args.size,
            "--file",
            data_file,
            "--keep",
            "--json",
            sat_json,
        )
        search_s = time.time() - started
        profile = os.path.join(work, "grid.toml")
        with open(profile, "w") as fh:
            fh.write(
                GRID.format(
                    reps=args.grid_reps,
                    seconds=args.seconds,
                    path=args.path,
                    file=data_file,
                    size=args.size,
                    blocks=", ".join(f'"{b}"' for b in blocks),
                    workers=", ".join(str(w) for w in range(1, args.max_workers + 1)),
                    depths=", ".join(map(str, depths)),
                )
            )
        grid_started = time.time()
        xferscope("replay", profile, "--results", grid_json)
        grid_s = time.time() - grid_started
        sat = json.loads(Path(sat_json).read_text())
        grid = json.loads(Path(grid_json).read_text())
        best: dict[int, tuple[float, str, dict]] = {}
        for point in grid["points"]:
            median = (point.get("stats") or {}).get("throughput_mib_s", {}).get("median")
            if median is None:
                continue
            bs = point["identity"]["block_size"]
            if median > best.get(bs, (0.0, "", {}))[0]:
                best[bs] = (median, point["label"], point["identity"])
        confirmed = {}
        for series in measured(sat, args.path):
            bs = series["block_size"]
            if series["plateau"] and bs in best:
                mine = (series["plateau"]["workers"], series["plateau"]["iodepth"])
                theirs = (best[bs][2]["workers"], best[bs][2]["iodepth"])
                confirmed[bs] = confirm(args, data_file, bs, mine, theirs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = load()

    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{time.strftime('%Y-%m-%d %H:%M')}; load average before {load_before}, after {load_after}"
    )
    print(f"# search {search_s:.0f} s, grid {grid_s:.0f} s ({args.grid_reps} runs a point, {args.seconds:g} s a run)")
    failed = False
    for series in measured(sat, args.path):
        bs = series["block_size"]
        plateau = series["figures"]["plateau_gib_s"] * 1024 if series["figures"] else float("nan")
        grid_best, label, _ = best.get(bs, (float("nan"), "-", {}))
        share = series["points_measured"] / series["grid_points"]
        ratio = grid_best / plateau if plateau else float("nan")
        ok_points, ok_best = share <= POINT_SHARE, abs(ratio - 1) <= GRID_WITHIN
        failed |= not (ok_points and ok_best)
        print(
            f"{series['label']}: knee {series['knee']['workers']}w x qd {series['knee']['iodepth']}, "
            f"{series['points_measured']} of {series['grid_points']} points ({share:.0%}, "
            f"{'ok' if ok_points else 'over'} {POINT_SHARE:.0%}), {series['runs']} runs; "
            f"plateau {plateau:.1f} MiB/s, "
            f"grid best {grid_best:.1f} MiB/s at {label}: grid best / plateau {ratio:.3f} "
            f"({'within' if ok_best else 'outside'} {GRID_WITHIN:.0%})"
        )
        if bs in confirmed:
            verdict = confirmed[bs]
            print(
                f"  interleaved, {verdict.rounds} rounds: grid best / plateau point {verdict.spread()} "
                f"({verdict.word}; within 10%: {'yes' if abs(verdict.ratio - 1) <= GRID_WITHIN else 'no'})"
            )
        print(f"  {series['verdict_line']}")
    if args.keep:
        print(f"# files: {sat_json}, {grid_json}")
    else:
        shutil.rmtree(out, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
