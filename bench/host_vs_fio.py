#!/usr/bin/env python3
"""xferscope's host engine against fio, side by side on the same file, in rotated rounds.

    python bench/host_vs_fio.py --fio /path/to/fio --dir /mnt/nvme [--size 1G] [--seconds 5] [--rounds 5]

Cases: 1 MiB sequential read (1 worker), 4 KiB random read (1 and 8 workers),
4 KiB random read at queue depth 32 (io_uring), 1 MiB sequential write (1 worker).

Each round runs three variants on the same file, in an order that rotates from
round to round: xferscope, fio, and xferscope again (the A/A run: how far two
runs of the same tool differ here, the noise floor of every ratio). Per case it
prints the median over rounds of each tool, and the ratios xferscope/fio as the
median of the per-round ratios with their spread (min-max) for:

  throughput            goal >= 0.98
  mean and p99 latency  goal <= 1.05
  CPU-seconds per GiB   goal <= 1.00: the I/O threads' user+system CPU over the
                        bytes they moved; xferscope's worker threads (getrusage
                        per thread, the timed region) against fio's job thread
                        (fio's usr_cpu + sys_cpu over its runtime, --thread).
                        xferscope's whole process (sampler and Python included)
                        is printed beside it.
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

GIB = 1 << 30
CASES = [
    # name, io, bs, workers, iodepth
    ("seqread 1M w1", "read", "1M", 1, 1),
    ("randread 4K w1", "randread", "4K", 1, 1),
    ("randread 4K w8", "randread", "4K", 8, 1),
    ("randread 4K qd32", "randread", "4K", 1, 32),
    ("seqwrite 1M w1", "write", "1M", 1, 1),
]
VARIANTS = ("xs", "fio", "xs_aa")


def run_xferscope(path: str, io: str, bs: str, workers: int, depth: int, seconds: float) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "xferscope.cli",
        "run",
        "--path",
        "host",
        "--io",
        io,
        "--bs",
        bs,
        "--workers",
        str(workers),
        "--iodepth",
        str(depth),
        "--duration",
        str(seconds),
        "--file",
        path,
        "--keep",
        "--format",
        "json",
        "--interval",
        "0.5",
        "--4k-pages",  # fio's buffers are malloc'd on 4 KiB pages
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    gib = d["bytes"] / GIB
    return {
        "mib_s": d["throughput_mib_s"],
        "lat_mean_us": d["latency_us"]["mean"],
        "lat_p99_us": d["latency_us"]["p99"],
        "iops": d["iops"],
        "labels": d["labels"],
        "cpu_s_per_gib": d["cpu"]["engine_cpu_seconds"] / gib,
        "process_cpu_s_per_gib": d["cpu"]["cpu_seconds"] / gib,
    }


def run_fio(fio: str, path: str, size: int, io: str, bs: str, workers: int, depth: int, seconds: float) -> dict:
    engine = "io_uring" if depth > 1 else "psync"
    cmd = [
        fio,
        "--name=bench",
        f"--filename={path}",
        f"--size={size}",
        "--direct=1",
        f"--rw={io}",
        f"--bs={bs}",
        f"--numjobs={workers}",
        "--thread",
        "--group_reporting",
        f"--ioengine={engine}",
        f"--iodepth={depth}",
        "--time_based",
        f"--runtime={seconds}",
        "--lat_percentiles=1",
        "--output-format=json",
        "--randrepeat=0",
        "--norandommap",
    ]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    job = d["jobs"][0]
    side = job["write"] if io.endswith("write") else job["read"]
    lat = side["lat_ns"]
    # usr_cpu/sys_cpu: percent of job_runtime; with group_reporting fio sums both the jobs' CPU times and
    # their runtimes (job_runtime is N x the run's length for N jobs), so their product is the group's CPU time
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000
    return {
        "mib_s": side["bw_bytes"] / (1 << 20),
        "lat_mean_us": lat["mean"] / 1e3,
        "lat_p99_us": lat["percentile"]["99.000000"] / 1e3,
        "iops": side["iops"],
        "cpu_s_per_gib": cpu_s / (side["io_bytes"] / GIB),
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.2f}-{max(values):.2f})"


def rotated(variants: tuple[str, ...], rnd: int) -> list[str]:
    """Round ``rnd``'s order: the variants rotated by one place per round, so each goes first in turn."""
    k = rnd % len(variants)
    return list(variants[k:] + variants[:k])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fio", default=shutil.which("fio"), help="fio binary")
    ap.add_argument("--dir", default=None, help="directory on the storage to test (default: a temp dir)")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=5)
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
    subprocess.run(
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "run",
            "--bs",
            "1M",
            "--size",
            args.size,
            "--file",
            path,
            "--keep",
            "--total",
            "1M",
            "--format",
            "json",
        ],
        check=True,
        capture_output=True,
    )
    fio_version = subprocess.run([args.fio, "--version"], capture_output=True, text=True).stdout.strip()
    print(
        f"# host vs fio ({fio_version}) on {platform.node()}, kernel {platform.release()}, "
        f"{os.cpu_count()} CPUs, file {args.size} in {workdir}, {args.seconds:g}s x {args.rounds} rounds, "
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print("# ratios xferscope/fio: median of the per-round ratios (min-max); A/A: xferscope/xferscope")
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    report = []
    try:
        for name, io, bs, workers, depth in CASES:
            if wanted and name not in wanted:
                continue
            got: dict[str, list[dict]] = {v: [] for v in VARIANTS}
            for rnd in range(args.rounds):
                for variant in rotated(VARIANTS, rnd):
                    if variant == "fio":
                        got[variant].append(run_fio(args.fio, path, size, io, bs, workers, depth, args.seconds))
                    else:
                        got[variant].append(run_xferscope(path, io, bs, workers, depth, args.seconds))
            xs, fi, aa = got["xs"], got["fio"], got["xs_aa"]
            row: dict = {"case": name, "rounds": got}
            for key in ("mib_s", "lat_mean_us", "lat_p99_us", "cpu_s_per_gib"):
                row[f"xs_{key}"] = statistics.median(r[key] for r in xs)
                row[f"fio_{key}"] = statistics.median(r[key] for r in fi)
                row[f"ratios_{key}"] = [a[key] / b[key] for a, b in zip(xs, fi)]
                row[f"aa_{key}"] = [a[key] / b[key] for a, b in zip(aa, xs)]
            row["xs_process_cpu_s_per_gib"] = statistics.median(r["process_cpu_s_per_gib"] for r in xs)
            report.append(row)
            print(f"{name}: xferscope {row['xs_mib_s']:.1f} MiB/s, fio {row['fio_mib_s']:.1f} MiB/s")
            print(f"    throughput {spread(row['ratios_mib_s'])}  A/A {spread(row['aa_mib_s'])}")
            print(f"    mean lat   {spread(row['ratios_lat_mean_us'])}  p99 lat {spread(row['ratios_lat_p99_us'])}")
            print(
                f"    CPU-s/GiB  xferscope workers {row['xs_cpu_s_per_gib']:.3f} (process "
                f"{row['xs_process_cpu_s_per_gib']:.3f}), fio {row['fio_cpu_s_per_gib']:.3f}: ratio "
                f"{spread(row['ratios_cpu_s_per_gib'])}  A/A {spread(row['aa_cpu_s_per_gib'])}",
                flush=True,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
