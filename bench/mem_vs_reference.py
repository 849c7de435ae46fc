#!/usr/bin/env python3
"""xferscope's memory sweep against google/multichase, side by side in one run, in rotated rounds.

    python bench/mem_vs_reference.py --multichase PATH [--multiload PATH] [--buffer 1G] [--strides 64,256]
        [--pages 4k,thp] [--localities default,whole] [--seconds 3] [--rounds 3] [--load-buffer 512M]
        [--threads N] [--sweep-seconds 0.5] [--idle-only] [--json FILE]

Idle latency, per stride, page size and locality, stride and page size matched on both sides
(xferscope --pages 4k / multichase without -H; --pages thp / -H), same buffer, same CPU (the first
this process may use; multichase pins there too):
  - default:  xferscope's default locality (64 pages, multichase's default -T) against multichase at
              its default -T;
  - whole:    xferscope --locality whole against multichase -T BUF (one random cycle over the buffer).
Each round runs xferscope, multichase and xferscope again (the A/A run: the noise floor of the ratio)
in an order rotated from round to round. Each tool's figure is the median of its windows (xferscope:
about 0.1-0.3 s each; multichase: its 0.5 s samples, read with -v); the ratio xferscope/multichase is
the median of the per-round ratios with their range (min-max). Goal: within 5%.

Unless --idle-only, also (each round, in turn) peak read bandwidth, xferscope `--mode peak --traffic R`
against `multiload -l stream-sum` (same thread count and bytes per thread; multiload prints MiB/s,
converted here to MB/s), and once a full default loaded-latency sweep (MLC's 19 delays) timed point by
point (goal: within 15 s after allocation).
The reference binaries are built by the person running this, outside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

from xferscope.memory.result import curve_points, idle_points
from xferscope.memory.sweep import MemSpec, MemSweepRun, allowed_cpus, llc_bytes
from xferscope.units import parse_size

MIB_TO_MB = (1 << 20) / 1e6


def ours_idle(buffer: int, stride: int, seconds: float, pages: str, locality: str) -> dict:
    spec = MemSpec(
        mode="idle",
        strides=(stride,),
        buffer_bytes=buffer,
        point_seconds=seconds,
        pages=pages,
        locality=locality,
        whole_idle=False,
    )
    result = MemSweepRun(spec).run()
    point = idle_points(result.points)[0]
    return {
        "median_ns": point.latency_ns,
        "min_ns": point.latency_min_ns,
        "locality": point.locality,
        "pages": dict(result.pages_obtained),
        "windows_short": point.windows_short,
    }


def multichase_idle(binary: str, buffer: int, stride: int, seconds: float, pages: str, locality: str) -> dict:
    """multichase's 0.5 s samples (-v prints each): their median and the best."""
    cmd = [binary, "-v", "-m", str(buffer), "-s", str(stride), "-n", str(max(3, round(seconds / 0.5)))]
    cmd += ["-H"] if pages == "thp" else []
    cmd += ["-T", str(buffer)] if locality == "whole" else []
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    samples = [float(m.group(1)) for m in re.finditer(r"avg=([\d.]+)", out)]
    return {
        "median_ns": statistics.median(samples),
        "min_ns": min(samples),
        "samples": len(samples),
        "command": " ".join(cmd[1:]),
    }


IDLE_VARIANTS = ("xs", "mc", "xs_aa")


def rotated(variants: tuple[str, ...], rnd: int) -> list[str]:
    """Round ``rnd``'s order: the variants rotated by one place per round, so each goes first in turn."""
    k = rnd % len(variants)
    return list(variants[k:] + variants[:k])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def idle_case(args, buffer: int, stride: int, pages: str, locality: str) -> dict:
    runs: dict[str, list[dict]] = {v: [] for v in IDLE_VARIANTS}
    for rnd in range(args.rounds):
        for variant in rotated(IDLE_VARIANTS, rnd):
            if variant == "mc":
                runs[variant].append(multichase_idle(args.multichase, buffer, stride, args.seconds, pages, locality))
            else:
                runs[variant].append(ours_idle(buffer, stride, args.seconds, pages, locality))
        print(
            f"    round {rnd}: " + "  ".join(f"{v} {runs[v][-1]['median_ns']:.1f}" for v in IDLE_VARIANTS), flush=True
        )
    ratios = [x["median_ns"] / m["median_ns"] for x, m in zip(runs["xs"], runs["mc"])]
    aa = [x["median_ns"] / a["median_ns"] for x, a in zip(runs["xs"], runs["xs_aa"])]
    best = [x["min_ns"] / m["min_ns"] for x, m in zip(runs["xs"], runs["mc"])]
    return {
        "stride": stride,
        "pages": pages,
        "locality": locality,
        "runs": runs,
        "xferscope_ns": statistics.median(r["median_ns"] for r in runs["xs"]),
        "multichase_ns": statistics.median(r["median_ns"] for r in runs["mc"]),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "aa": statistics.median(aa),
        "aa_min": min(aa),
        "aa_max": max(aa),
        "ratio_of_bests": statistics.median(best),
        "xferscope_locality": runs["xs"][0]["locality"],
        "xferscope_pages": runs["xs"][0]["pages"],
        "multichase_command": runs["mc"][0]["command"],
        "ratios": ratios,
        "aa_ratios": aa,
    }


def ours_peak_read(load_bytes: int, threads: int, seconds: float) -> dict:
    spec = MemSpec(mode="peak", traffic=("R",), buffer_bytes=load_bytes, threads=threads, point_seconds=seconds)
    point = curve_points(MemSweepRun(spec).run().points)[0]
    return {"mb_s": point.bandwidth_mb_s}


def multiload_peak_read(binary: str, load_bytes: int, threads: int, samples: int) -> dict:
    cmd = [binary, "-n", str(samples), "-t", str(threads), "-m", str(load_bytes), "-l", "stream-sum"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    header, row = [line for line in out.splitlines() if "," in line][-2:]
    fields = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    return {"mb_s": float(fields["LdAvgMibs"]) * MIB_TO_MB, "max_mb_s": float(fields["LdMaxMibs"]) * MIB_TO_MB}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed_sweep(seconds: float, traffic: str) -> dict:
    sweep = MemSweepRun(MemSpec(mode="loaded", traffic=(traffic,), point_seconds=seconds, whole_idle=False))
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
    ap.add_argument("--multiload", help="needed unless --idle-only")
    ap.add_argument("--buffer", default="1G", help="latency buffer (both tools)")
    ap.add_argument("--strides", default="64,256")
    ap.add_argument("--pages", default="4k,thp", help="4k (multichase without -H) and/or thp (-H)")
    ap.add_argument("--localities", default="default,whole")
    ap.add_argument("--load-buffer", default="512M", help="bytes per load thread (both tools)")
    ap.add_argument("--threads", type=int, default=len(allowed_cpus()))
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per case and tool")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep-seconds", type=float, default=0.5)
    ap.add_argument("--sweep-traffic", default="R,W6")
    ap.add_argument("--idle-only", action="store_true", help="only the idle latency cases")
    ap.add_argument("--json", help="write every number to FILE")
    args = ap.parse_args()
    if not args.idle_only and not args.multiload:
        ap.error("--multiload is needed unless --idle-only")

    buffer, load_bytes = parse_size(args.buffer), parse_size(args.load_buffer)
    strides = [int(s) for s in args.strides.split(",")]
    report: dict = {
        "machine": {
            "cpu": platform.processor(),
            "cpus": len(allowed_cpus()),
            "llc_bytes": llc_bytes(),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "load_before": load(),
        },
        "args": vars(args),
        "idle": [],
        "peak_read": {},
        "sweeps": [],
    }
    try:
        with open("/proc/cpuinfo") as fh:
            report["machine"]["cpu"] = next(
                line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    print(f"machine: {report['machine']}")

    print("# idle latency, xferscope/multichase: median of the per-round ratios (min-max); A/A xferscope/xferscope")
    for stride in strides:
        for pages in [p for p in args.pages.split(",") if p]:
            for locality in [x for x in args.localities.split(",") if x]:
                print(f"  stride {stride}, pages {pages}, locality {locality}:", flush=True)
                case = idle_case(args, buffer, stride, pages, locality)
                report["idle"].append(case)
                print(
                    f"  stride {stride} {pages} {locality} ({case['xferscope_locality']}; multichase "
                    f"{case['multichase_command']}): xferscope {case['xferscope_ns']:.1f} ns, multichase "
                    f"{case['multichase_ns']:.1f} ns, ratio {spread(case['ratios'])}, A/A "
                    f"{spread(case['aa_ratios'])}, ratio of bests {case['ratio_of_bests']:.3f}",
                    flush=True,
                )

    if not args.idle_only:
        ours, ref = [], []
        samples = max(3, round(args.seconds / 0.5))
        for r in range(args.rounds):
            ours.append(ours_peak_read(load_bytes, args.threads, args.seconds))
            ref.append(multiload_peak_read(args.multiload, load_bytes, args.threads, samples))
            print(f"  peak read round {r}: xferscope {ours[-1]}  multiload {ref[-1]}", flush=True)
        o_bw = statistics.median(x["mb_s"] for x in ours)
        m_bw = statistics.median(x["mb_s"] for x in ref)
        report["peak_read"] = {
            "threads": args.threads,
            "xferscope_mb_s": o_bw,
            "multiload_mb_s": m_bw,
            "ratio": o_bw / m_bw,
        }
        print(
            f"peak read bandwidth, {args.threads} threads: xferscope {o_bw:.0f} MB/s / multiload stream-sum "
            f"{m_bw:.0f} MB/s = {ratio(o_bw, m_bw)}",
            flush=True,
        )

        for traffic in [t for t in args.sweep_traffic.split(",") if t]:
            sweep = timed_sweep(args.sweep_seconds, traffic)
            report["sweeps"].append(sweep)
            print(
                f"sweep {traffic}: {sweep['points']} delays at {args.sweep_seconds} s/point: "
                f"{sweep['loaded_points_s']:.2f} s after the idle point "
                f"(allocation + calibration + idle point: {sweep['until_idle_point_s']:.2f} s); idle "
                f"{sweep['idle_ns']:.1f} ns"
            )
            for row in sweep["rows"]:
                print(f"    {row[0]:05d}  {row[1]:8.2f}  {row[2]:10.1f}")
            for w in sweep["warnings"]:
                print(f"    warning: {w}")

    report["machine"]["load_after"] = load()
    print(f"load average before {report['machine']['load_before']}, after {report['machine']['load_after']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
