#!/usr/bin/env python3
"""Does the CLI start slower than at an earlier commit?

Each command is started ``--starts`` times a round in each tree and its median kept; a round runs the earlier tree
twice around this one (earlier, this, earlier), so the earlier tree's two medians are the A/A pair. Prints every
round, then each command's ratio this / earlier (median and range over the rounds) beside the A/A's.

    python bench/cli_start.py 64f52e6 --rounds 4

The earlier tree is checked out in a temporary git worktree and removed at the end; each tree runs with its own
``src`` first on the import path. Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from suite_against import HERE, earlier_tree, spread

#: (what it is, the arguments): the help, a command refused before anything runs (exit 2), a workload's help
COMMANDS = (
    ("xferscope --help", ["--help"]),
    ("xferscope run --path tape", ["run", "--path", "tape"]),
    ("xferscope workload load --help", ["workload", "load", "--help"]),
)
START = "import sys; sys.argv[0] = 'xferscope'; from xferscope.cli import main; main()"


def start_ms(tree: Path, args: list[str], starts: int) -> float:
    """The median wall time of ``starts`` starts of the CLI in ``tree`` with ``args``, in ms, its modules' bytecode
    cached as an installed package's is (one start first writes it)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", START, *args], cwd=tree, env=env, capture_output=True, check=False)
    times = []
    for _ in range(starts):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", START, *args], cwd=tree, env=env, capture_output=True, check=False)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the earlier commit")
    ap.add_argument("--rounds", type=int, default=4, help="rounds (default 4)")
    ap.add_argument("--starts", type=int, default=15, help="starts of each command a round and tree (default 15)")
    ap.add_argument("--match", default="", help="only the commands whose line holds this text (default: all)")
    args = ap.parse_args()
    if args.rounds < 1 or args.starts < 1:
        raise SystemExit("cli_start: --rounds and --starts must be at least 1")
    with earlier_tree(args.rev, "cli_start") as earlier:
        for what, argv in [c for c in COMMANDS if args.match in c[0]]:
            ratios, aa = [], []
            for r in range(args.rounds):
                a = start_ms(earlier, argv, args.starts)
                this = start_ms(HERE, argv, args.starts)
                b = start_ms(earlier, argv, args.starts)
                print(f"{what}: round {r + 1}: earlier {a:.1f} ms, this {this:.1f} ms, earlier {b:.1f} ms")
                ratios.append(this / ((a + b) / 2))
                aa.append(b / a)
            print(f"{what}: this / {args.rev} {spread(ratios)}; A/A {spread(aa)}", flush=True)


if __name__ == "__main__":
    main()
