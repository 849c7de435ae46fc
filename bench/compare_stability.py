#!/usr/bin/env python3
"""Do `xferscope compare` verdicts hold from one invocation to the next?

Runs the same `xferscope compare` several times, each a separate process with its own dataset, and prints
every invocation's verdicts (paired ratio with its range) side by side, then whether they agree. With
`--single-pass` it first runs the same comparison with `--rounds 1` as many times, to show what one pass
gives on this machine (the ratio whose sign the rounds are meant to settle).

A/A on a CPU machine (the acceptance of the noise floor: no invocation may say faster or slower):

    python bench/compare_stability.py --paths host,host --bs 64K --seconds 2 --rounds 3 --invocations 10

Paths against each other on a GPU machine (the same verdicts three times over):

    python bench/compare_stability.py --paths host,bounce,bounce-async --bs 1M --workers 4 --rounds 5 \\
        --invocations 3 --single-pass

Prints the machine's load average before and after: figures from a busy machine say little.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def compare(args, rounds: int) -> dict:
    cmd = (
        [
            sys.executable,
            "-m",
            "xferscope.cli",
            "compare",
            "--paths",
            args.paths,
            "--bs",
            args.bs,
            "--workers",
            str(args.workers),
            "--size",
            args.size,
            "--duration",
            str(args.seconds),
            "--rounds",
            str(rounds),
            "--format",
            "json",
        ]
        + (["--dir", args.dir] if args.dir else [])
        + args.extra
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    return json.loads(proc.stdout)["comparison"]


def row(comp: dict) -> list[str]:
    cells = []
    for p in comp["paths"][1:]:
        if p.get("ratio") is None:
            cells.append(f"{p['label']}: no paired round")
        elif comp["rounds"] > 1:
            cells.append(f"{p['label']}: {p['ratio']:.2f} ({p['ratio_min']:.2f}-{p['ratio_max']:.2f}) {p['verdict']}")
        else:
            cells.append(f"{p['label']}: {p['ratio']:.2f}")
    base = comp["paths"][0]["throughput_mib_s"]
    cells.append(f"{comp['paths'][0]['label']} {base['median']:,.1f} MiB/s ({base['min']:,.1f}-{base['max']:,.1f})")
    if comp.get("drift"):
        cells.append("drift")
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", default="host,host")
    ap.add_argument("--bs", default="64K")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--invocations", type=int, default=10)
    ap.add_argument("--dir", default=None, help="where the dataset goes (default: a temporary directory)")
    ap.add_argument("--single-pass", action="store_true", help="first run the same with --rounds 1")
    ap.add_argument("--raw", action="store_true", help="print every round's figure of every path at the end")
    ap.add_argument("extra", nargs="*", help="more compare options, after --")
    args = ap.parse_args()

    print(f"load before: {load()}  ({os.cpu_count()} CPUs)")
    started = time.time()
    if args.single_pass:
        print(f"\nsingle pass (--rounds 1), {args.invocations} invocations:")
        for i in range(args.invocations):
            print(f"  {i + 1:>2}: " + "; ".join(row(compare(args, 1))), flush=True)
    print(f"\n{args.rounds} rounds, {args.invocations} invocations:")
    verdicts = []
    raw = []
    for i in range(args.invocations):
        comp = compare(args, args.rounds)
        raw.append([p["rounds"] for p in comp["paths"]])
        verdicts.append(tuple(p.get("verdict") for p in comp["paths"][1:]))
        print(f"  {i + 1:>2}: " + "; ".join(row(comp)), flush=True)
    print(f"\nrule: {comp['rule']}")
    same = len(set(verdicts)) == 1
    decided = sum(1 for v in verdicts for w in v if w in ("faster", "slower"))
    print(
        f"verdicts the same in every invocation: {'yes' if same else 'no'}; "
        f"faster/slower said {decided} times in {len(verdicts)} invocations"
    )
    if args.raw:
        print("per-round MiB/s of each path, each invocation: " + json.dumps(raw))
    print(f"load after: {load()}; {time.time() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
