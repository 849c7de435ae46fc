#!/usr/bin/env python3
"""The memory sweep in the calling process against the same sweep in a process of its own, in rotated rounds.

    python bench/mem_isolation.py [--rounds 5] [--seconds 1] [--buffer 256M] [--threads 1] [--json FILE]

Since the memory engine runs in a child process (``xferscope.memory.runner.MemRun``), its figures must be
those it gave in the calling process (``xferscope.memory.sweep.MemSweepRun``). Each round measures, in an
order rotated from round to round:
  - in-process:   MemSweepRun, idle latency (default locality, no whole-buffer point) then peak read bandwidth;
  - in-process':  the same again (the A/A run: the noise floor of the ratio);
  - isolated:     MemRun, the same two sweeps.
Each figure is the engine's own (the median of its windows). Printed per round, then each ratio
(isolated/in-process and in-process'/in-process, paired within a round) as the median with its range
(min-max) and the verdict rule of ``xferscope.compare.verdict`` (bandwidth: higher is better; latency: its
inverse). The load average and the busiest processes are printed before and after: on a busy machine
the figures move with the neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

from xferscope.compare.verdict import RULE, paired_verdict
from xferscope.memory.result import idle_points, peak_points
from xferscope.memory.runner import MemRun
from xferscope.memory.sweep import MemSpec, MemSweepRun
from xferscope.units import parse_size

KINDS = ("in-process", "in-process'", "isolated")


def measure(kind: str, buffer: int, seconds: float, threads: int) -> dict:
    sweep_of = MemRun if kind == "isolated" else MemSweepRun
    idle = sweep_of(MemSpec(mode="idle", buffer_bytes=buffer, point_seconds=seconds, whole_idle=False)).run()
    peak = sweep_of(
        MemSpec(mode="peak", traffic=("R",), buffer_bytes=buffer, point_seconds=seconds, threads=threads)
    ).run()
    point = idle_points(idle.points)[0]
    return {
        "latency_ns": point.latency_ns,
        "windows_short": point.windows_short,
        "bandwidth_mb_s": peak_points(peak.points)[0].bandwidth_mb_s,
    }


def machine_load() -> str:
    top = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True).stdout
    busiest = ", ".join(" ".join(ln.split()) for ln in top.splitlines()[1:4])
    return f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; busiest: {busiest}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="measured time per point")
    ap.add_argument("--buffer", default="256M")
    ap.add_argument("--threads", type=int, default=1, help="load threads of the bandwidth sweep")
    ap.add_argument("--json", help="write every round's figures to FILE")
    args = ap.parse_args()
    buffer = parse_size(args.buffer)
    print(
        f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    print("before:", machine_load())
    rounds = []
    for r in range(args.rounds):
        order = KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]
        figures = {kind: measure(kind, buffer, args.seconds, args.threads) for kind in order}
        rounds.append(figures)
        print(
            f"round {r + 1} ({' > '.join(order)}): "
            + "; ".join(f"{k} {figures[k]['latency_ns']:.1f} ns {figures[k]['bandwidth_mb_s']:.0f} MB/s" for k in KINDS)
        )
    print("after:", machine_load())
    print(RULE)
    summary = {}
    for other in ("isolated", "in-process'"):
        for figure, higher_better in (("bandwidth_mb_s", True), ("latency_ns", False)):
            base = [x["in-process"][figure] for x in rounds]
            them = [x[other][figure] for x in rounds]
            if not higher_better:  # a speed: the inverse of the latency
                base, them = [1 / v for v in base], [1 / v for v in them]
            verdict = paired_verdict(base, them)
            summary[f"{other} {figure}"] = verdict.as_dict()
            name = "bandwidth" if higher_better else "1/latency"
            print(f"{other:>12} / in-process, {name:>9}: {verdict.spread()}  {verdict.word}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rounds": rounds, "summary": summary, "args": vars(args)}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
