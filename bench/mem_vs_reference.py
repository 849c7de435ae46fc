#!/usr/bin/env python3
"""xferscope's memory sweep against google/multichase, side by side in one run, alternating.

    python bench/mem_vs_reference.py --multichase PATH --multiload PATH [--buffer 1G] [--strides 64,256]
        [--load-buffer 512M] [--threads N] [--rounds 2] [--sweep-seconds 0.5] [--json FILE]

Measures, each round, in turn:
  - idle latency: xferscope `--mode idle` against `multichase -H -m BUF -s STRIDE -T BUF` (one random
    chase over the whole buffer, huge pages on both sides, same CPU 0);
  - peak read bandwidth: xferscope `--mode peak --traffic R` against `multiload -l stream-sum`
    (same thread count and bytes per thread; multiload prints MiB/s, converted here to MB/s);
and once, a full default loaded-latency sweep (MLC's 19 delays) timed point by point.

Prints medians over rounds and the ratios xferscope/reference. Goals: latency and bandwidth
ratios within 0.95..1.05; the 19-point sweep within 15 s after allocation.
The reference binaries are built by the person running this, outside the repository.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

from xferscope.engines.mem import MemSpec, MemSweep, allowed_cpus, llc_bytes
from xferscope.units import parse_size

MIB_TO_MB = (1 << 20) / 1e6


def ours_idle(buffer: int, stride: int, seconds: float) -> dict:
    sweep = MemSweep(MemSpec(mode="idle", strides=(stride,), buffer_bytes=buffer, point_seconds=seconds))
    result = sweep.run()
    point = result.idle_points[0]
    return {"median_ns": point.latency_ns, "min_ns": point.latency_min_ns, "thp": result.thp_coverage}


def multichase_idle(binary: str, buffer: int, stride: int, seconds: float) -> dict:
    samples = max(2, round(seconds / 0.5))
    base = [binary, "-H", "-m", str(buffer), "-s", str(stride), "-T", str(buffer), "-n", str(samples)]
    best = float(subprocess.run(base, capture_output=True, text=True, check=True).stdout.split()[-1])
    avg = float(subprocess.run(base + ["-a"], capture_output=True, text=True, check=True).stdout.split()[-1])
    return {"best_ns": best, "average_ns": avg}


def ours_peak_read(load_bytes: int, threads: int, seconds: float) -> dict:
    spec = MemSpec(mode="peak", traffic=("R",), buffer_bytes=load_bytes, threads=threads, point_seconds=seconds)
    point = MemSweep(spec).run().curve_points[0]
    return {"mb_s": point.bandwidth_mb_s}


def multiload_peak_read(binary: str, load_bytes: int, threads: int, samples: int) -> dict:
    cmd = [binary, "-n", str(samples), "-t", str(threads), "-m", str(load_bytes), "-l", "stream-sum"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    header, row = [line for line in out.splitlines() if "," in line][-2:]
    fields = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    return {"mb_s": float(fields["LdAvgMibs"]) * MIB_TO_MB, "max_mb_s": float(fields["LdMaxMibs"]) * MIB_TO_MB}


def timed_sweep(seconds: float, traffic: str) -> dict:
    sweep = MemSweep(MemSpec(mode="loaded", traffic=(traffic,), point_seconds=seconds))
    t0 = time.monotonic()
    stamps = []
    for point in sweep:
        stamps.append((time.monotonic() - t0, point))
    idle_at = stamps[0][0]
    curve = [p for _, p in stamps[1:]]
    return {
        "traffic": traffic,
        "points": len(curve),
        "until_idle_point_s": idle_at,
        "loaded_points_s": stamps[-1][0] - idle_at,
        "total_s": stamps[-1][0],
        "idle_ns": stamps[0][1].latency_ns,
        "rows": [(p.delay, round(p.latency_ns, 2), round(p.bandwidth_mb_s, 1)) for p in curve],
        "warnings": sweep.result.warnings,
        "ns_per_delay_iter": sweep.result.environment.get("ns_per_delay_iter"),
    }


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--multichase", required=True)
    ap.add_argument("--multiload", required=True)
    ap.add_argument("--buffer", default="1G", help="latency buffer (both tools)")
    ap.add_argument("--strides", default="64,256")
    ap.add_argument("--load-buffer", default="512M", help="bytes per load thread (both tools)")
    ap.add_argument("--threads", type=int, default=len(allowed_cpus()))
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per case and tool")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sweep-seconds", type=float, default=0.5)
    ap.add_argument("--sweep-traffic", default="R,W6")
    ap.add_argument("--json", help="write every number to FILE")
    args = ap.parse_args()

    buffer, load_bytes = parse_size(args.buffer), parse_size(args.load_buffer)
    strides = [int(s) for s in args.strides.split(",")]
    report: dict = {
        "machine": {"cpu": platform.processor(), "cpus": len(allowed_cpus()), "llc_bytes": llc_bytes(),
                    "kernel": platform.release(), "python": platform.python_version()},
        "args": vars(args), "idle": {}, "peak_read": {}, "sweeps": [],
    }
    try:
        with open("/proc/cpuinfo") as fh:
            report["machine"]["cpu"] = next(l.split(":", 1)[1].strip() for l in fh if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"machine: {report['machine']}")

    for stride in strides:
        ours, ref = [], []
        for r in range(args.rounds):
            ours.append(ours_idle(buffer, stride, args.seconds))
            ref.append(multichase_idle(args.multichase, buffer, stride, args.seconds))
            print(f"  idle stride {stride} round {r}: xferscope {ours[-1]}  multichase {ref[-1]}", flush=True)
        o_med = statistics.median(x["median_ns"] for x in ours)
        o_min = statistics.median(x["min_ns"] for x in ours)
        m_avg = statistics.median(x["average_ns"] for x in ref)
        m_best = statistics.median(x["best_ns"] for x in ref)
        report["idle"][stride] = {"xferscope_median_ns": o_med, "xferscope_min_ns": o_min,
                                  "multichase_average_ns": m_avg, "multichase_best_ns": m_best,
                                  "ratio_median_to_average": o_med / m_avg, "ratio_min_to_best": o_min / m_best}
        print(f"idle latency stride {stride}: xferscope median {o_med:.1f} ns / multichase average {m_avg:.1f} ns "
              f"= {ratio(o_med, m_avg)};  xferscope min {o_min:.1f} / multichase best {m_best:.1f} = "
              f"{ratio(o_min, m_best)}", flush=True)

    ours, ref = [], []
    samples = max(3, round(args.seconds / 0.5))
    for r in range(args.rounds):
        ours.append(ours_peak_read(load_bytes, args.threads, args.seconds))
        ref.append(multiload_peak_read(args.multiload, load_bytes, args.threads, samples))
        print(f"  peak read round {r}: xferscope {ours[-1]}  multiload {ref[-1]}", flush=True)
    o_bw = statistics.median(x["mb_s"] for x in ours)
    m_bw = statistics.median(x["mb_s"] for x in ref)
    report["peak_read"] = {"threads": args.threads, "xferscope_mb_s": o_bw, "multiload_mb_s": m_bw,
                           "ratio": o_bw / m_bw}
    print(f"peak read bandwidth, {args.threads} threads: xferscope {o_bw:.0f} MB/s / multiload stream-sum "
          f"{m_bw:.0f} MB/s = {ratio(o_bw, m_bw)}", flush=True)

    for traffic in [t for t in args.sweep_traffic.split(",") if t]:
        sweep = timed_sweep(args.sweep_seconds, traffic)
        report["sweeps"].append(sweep)
        print(f"sweep {traffic}: {sweep['points']} delays at {args.sweep_seconds} s/point: "
              f"{sweep['loaded_points_s']:.2f} s after the idle point "
              f"(allocation + calibration + idle point: {sweep['until_idle_point_s']:.2f} s); idle {sweep['idle_ns']:.1f} ns")
        for row in sweep["rows"]:
            print(f"    {row[0]:05d}  {row[1]:8.2f}  {row[2]:10.1f}")
        for w in sweep["warnings"]:
            print(f"    warning: {w}")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
