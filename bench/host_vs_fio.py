#!/usr/bin/env python3
"""xferscope's host engine against fio, side by side on the same file, alternating.

    python bench/host_vs_fio.py --fio /path/to/fio --dir /mnt/nvme [--size 1G] [--seconds 5] [--rounds 3]

Cases: 1 MiB sequential read (1 worker), 4 KiB random read (1 and 8 workers),
4 KiB random read at queue depth 32 (io_uring), 1 MiB sequential write (1 worker).
Prints, per case, the median over rounds of each tool and the ratios
xferscope/fio for throughput, mean latency and p99 latency. Goal: throughput
ratio >= 0.98, latency ratios <= 1.05.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

CASES = [
    # name, io, bs, workers, iodepth
    ("seqread 1M w1", "read", "1M", 1, 1),
    ("randread 4K w1", "randread", "4K", 1, 1),
    ("randread 4K w8", "randread", "4K", 8, 1),
    ("randread 4K qd32", "randread", "4K", 1, 32),
    ("seqwrite 1M w1", "write", "1M", 1, 1),
]


def run_xferscope(path: str, io: str, bs: str, workers: int, depth: int, seconds: float) -> dict:
    cmd = [sys.executable, "-m", "xferscope.cli", "run", "--path", "host", "--io", io, "--bs", bs,
           "--workers", str(workers), "--iodepth", str(depth), "--duration", str(seconds), "--file", path,
           "--keep", "--format", "json", "--interval", "0.5"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    return {"mib_s": d["throughput_mib_s"], "lat_mean_us": d["latency_us"]["mean"],
            "lat_p99_us": d["latency_us"]["p99"], "iops": d["iops"], "labels": d["labels"]}


def run_fio(fio: str, path: str, size: int, io: str, bs: str, workers: int, depth: int, seconds: float) -> dict:
    engine = "io_uring" if depth > 1 else "psync"
    cmd = [fio, "--name=bench", f"--filename={path}", f"--size={size}", "--direct=1", f"--rw={io}", f"--bs={bs}",
           f"--numjobs={workers}", "--thread", "--group_reporting", f"--ioengine={engine}", f"--iodepth={depth}",
           "--time_based", f"--runtime={seconds}", "--lat_percentiles=1", "--output-format=json",
           "--randrepeat=0", "--norandommap"]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    job = d["jobs"][0]
    side = job["write"] if io.endswith("write") else job["read"]
    lat = side["lat_ns"]
    return {"mib_s": side["bw_bytes"] / (1 << 20), "lat_mean_us": lat["mean"] / 1e3,
            "lat_p99_us": lat["percentile"]["99.000000"] / 1e3, "iops": side["iops"]}


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fio", default=shutil.which("fio"), help="fio binary")
    ap.add_argument("--dir", default=None, help="directory on the storage to test (default: a temp dir)")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="", help="comma list of case names to run (default all)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    if not args.fio:
        print("fio not found: pass --fio PATH", file=sys.stderr)
        return 2
    from xferscope.units import parse_size

    size = parse_size(args.size)
    workdir = tempfile.mkdtemp(prefix="xs-bench-", dir=args.dir or "/var/tmp")
    path = os.path.join(workdir, "bench.dat")
    # create the scratch file once through xferscope (kept for both tools)
    subprocess.run([sys.executable, "-m", "xferscope.cli", "run", "--bs", "1M", "--size", args.size, "--file", path,
                    "--keep", "--total", "1M", "--format", "json"], check=True, capture_output=True)
    fio_version = subprocess.run([args.fio, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# host vs fio ({fio_version}) on {platform.node()}, kernel {platform.release()}, "
          f"{os.cpu_count()} CPUs, file {args.size} in {workdir}, {args.seconds:g}s x {args.rounds} rounds")
    print(f"{'case':<18} {'xs MiB/s':>10} {'fio MiB/s':>10} {'tput':>6} {'xs lat':>8} {'fio lat':>8} {'lat':>6} "
          f"{'xs p99':>8} {'fio p99':>8} {'p99':>6}")
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    report = []
    try:
        for name, io, bs, workers, depth in CASES:
            if wanted and name not in wanted:
                continue
            xs, fi = [], []
            for rnd in range(args.rounds):
                # alternate who goes first, so neither tool always meets the device in the same state
                order = [("xs", xs), ("fio", fi)] if rnd % 2 == 0 else [("fio", fi), ("xs", xs)]
                for tool, rows in order:
                    if tool == "xs":
                        rows.append(run_xferscope(path, io, bs, workers, depth, args.seconds))
                    else:
                        rows.append(run_fio(args.fio, path, size, io, bs, workers, depth, args.seconds))
            row = {"case": name, "rounds": [{"xs_mib_s": a["mib_s"], "fio_mib_s": b["mib_s"]} for a, b in zip(xs, fi)]}
            for key in ("mib_s", "lat_mean_us", "lat_p99_us"):
                row[f"xs_{key}"], row[f"fio_{key}"] = median(xs, key), median(fi, key)
                row[f"ratio_{key}"] = row[f"xs_{key}"] / row[f"fio_{key}"]
            report.append(row)
            print(f"{name:<18} {row['xs_mib_s']:>10.1f} {row['fio_mib_s']:>10.1f} {row['ratio_mib_s']:>6.3f} "
                  f"{row['xs_lat_mean_us']:>8.1f} {row['fio_lat_mean_us']:>8.1f} {row['ratio_lat_mean_us']:>6.3f} "
                  f"{row['xs_lat_p99_us']:>8.1f} {row['fio_lat_p99_us']:>8.1f} {row['ratio_lat_p99_us']:>6.3f}  "
                  f"per round: " + " ".join(f"{r['xs_mib_s'] / r['fio_mib_s']:.2f}" for r in row["rounds"]),
                  flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
