#!/usr/bin/env python3
"""Does the console slow the engine? The same host run with the console open and headless, alternating.

    python bench/tui_overhead.py [--dir DIR] [--size 256M] [--seconds 5] [--rounds 3] [--cols 80 --rows 24]
                                 [--cases TEXT]

The console runs as a person would see it: `xferscope tui --start` in a tmux window of the given size
(a real terminal emulator drawing every frame), on a tmux server of its own. When the panels show the
whole run's figures the script presses `c` and reads the console's own CPU from the comparison
screen, presses `e` (CSV snapshot, written to a scratch directory; the throughput is read from it) and
`q`. The headless run is `xferscope run --format json` on the same file, kept between runs so nothing
is created in the timed region. Each round runs both, in alternating order.

Cases: 4 KiB random read and 1 MiB sequential read, one worker, through the page cache (the file is
cached first: the engine is CPU-bound, so any CPU the console takes from it shows) and with O_DIRECT
(what the device gives; on shared virtual disks this varies a lot from run to run).

Prints per case the medians over rounds: throughput with the console and headless, the median of
the per-round ratios console/headless (goal >= 0.98; pairing the two runs of a round cancels the slow
drift of a shared virtual machine), the console's own CPU as it reports it (its own process over the
timed region, percent of one core: the engine runs in a process of its own) and the difference in the
engine process's CPU between the two runs of a round over the run's seconds.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = [
    # name, io, bs, through the page cache
    ("randread 4K page cache", "randread", "4K", True),
    ("read 1M page cache", "read", "1M", True),
    ("randread 4K O_DIRECT", "randread", "4K", False),
    ("read 1M O_DIRECT", "read", "1M", False),
]
GIB = float(1 << 30)
SOCKET = "xferscope-bench"
NOTE = re.compile(r"it used ([\d.]+) CPU-s over ([\d.]+) s of runs \(([\d.]+)% of one core\)")


def headless(path: str, io: str, bs: str, buffered: bool, seconds: float) -> dict:
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
        "--duration",
        str(seconds),
        "--file",
        path,
        "--keep",
        "--format",
        "json",
    ] + (["--buffered"] * buffered)
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return {"mib_s": d["throughput_mib_s"], "seconds": d["seconds"], "cpu_s": d["cpu"]["cpu_seconds"]}


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check).stdout


def running() -> bool:
    return subprocess.run(["tmux", "-L", SOCKET, "has-session", "-t", "console"], capture_output=True).returncode == 0


def screen() -> str:
    return " ".join(tmux("capture-pane", "-p", "-t", "console", check=False).split())


def wait_screen(needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = screen()
        if needle in text:
            return text
        if "[the console exited with" in text:
            break
        time.sleep(0.5)
    raise RuntimeError(f"the console never showed {needle!r}; it shows: {screen()}")


def console(path: str, io: str, bs: str, buffered: bool, seconds: float, cols: int, rows: int, workdir: str) -> dict:
    """One run in the console inside tmux; throughput from the CSV snapshot, own CPU from its screen."""
    for old in glob.glob(os.path.join(workdir, "xferscope-*")):
        os.unlink(old)
    cmd = [
        sys.executable,
        "-m",
        "xferscope.cli",
        "tui",
        "--start",
        "--path",
        "host",
        "--file",
        path,
        "--io",
        io,
        "--bs",
        bs,
        "--duration",
        str(seconds),
    ] + (["--buffered"] * buffered)
    # a console that fails stays on screen with its error (Textual draws on stderr: leave it to the pane)
    tmux(
        "new-session",
        "-d",
        "-s",
        "console",
        "-x",
        str(cols),
        "-y",
        str(rows),
        "-c",
        workdir,
        shlex.join(cmd) + ' || { echo "[the console exited with $?]"; sleep 60; }',
    )
    try:
        wait_screen("(whole run)", seconds + 60)
        tmux("send-keys", "-t", "console", "c")
        note = NOTE.search(wait_screen("of one core)", 10))
        tmux("send-keys", "-t", "console", "e")
        deadline = time.monotonic() + 20
        summary = []
        while time.monotonic() < deadline and not summary:
            time.sleep(0.2)
            summary = glob.glob(os.path.join(workdir, "xferscope-*-summary.csv"))
        if not summary:
            raise RuntimeError("the console wrote no snapshot")
        tmux("send-keys", "-t", "console", "q")
        deadline = time.monotonic() + 15  # let it quit by itself (it removes nothing: the file is kept)
        while time.monotonic() < deadline and running():
            time.sleep(0.2)
    finally:
        tmux("kill-server", check=False)
    row = next(csv.DictReader(Path(summary[0]).read_text().splitlines()))
    secs = float(row["seconds"])
    return {
        "mib_s": float(row["throughput_mib_s"]),
        "seconds": secs,
        "cpu_s": float(row["cpu_s_per_gib"]) * int(row["bytes"]) / GIB,
        "own_pct": float(note.group(3)) if note else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp", help="directory for the scratch file (O_DIRECT must work)")
    ap.add_argument("--size", default="256M")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cols", type=int, default=80)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--cases", default="", help="only the cases whose name holds this text, e.g. '4K page'")
    args = ap.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed: the console is measured in a real terminal emulator")

    scratch = tempfile.mkdtemp(prefix="xferscope-bench-", dir=args.dir)
    workdir = tempfile.mkdtemp(prefix="xferscope-console-")
    path = os.path.join(scratch, "data.bin")
    xs = [sys.executable, "-m", "xferscope.cli", "run", "--file", path, "--keep", "--format", "json"]
    try:
        subprocess.run(xs + ["--size", args.size, "--duration", "0.2"], check=True, capture_output=True)
        print(
            f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform(terse=True)}, "
            f"Python {platform.python_version()}; file {args.size} in {args.dir}; {args.seconds:g} s a run, "
            f"{args.rounds} rounds, console in tmux {args.cols}x{args.rows}"
        )
        print(f"{'case':<24}{'console MiB/s':>14}{'headless MiB/s':>16}{'ratio':>7}{'own CPU':>9}{'Δ process CPU':>15}")
        for name, io, bs, buffered in (c for c in CASES if args.cases in c[0]):
            if buffered:  # bring the whole file into the page cache first
                subprocess.run(xs + ["--buffered", "--duration", "2"], check=True, capture_output=True)
            with_console, without = [], []
            for i in range(args.rounds):
                for use_console in (True, False) if i % 2 == 0 else (False, True):
                    if use_console:
                        with_console.append(
                            console(path, io, bs, buffered, args.seconds, args.cols, args.rows, workdir)
                        )
                    else:
                        without.append(headless(path, io, bs, buffered, args.seconds))
            c = statistics.median(r["mib_s"] for r in with_console)
            h = statistics.median(r["mib_s"] for r in without)
            ratio = statistics.median(a["mib_s"] / b["mib_s"] for a, b in zip(with_console, without))
            own = statistics.median(r["own_pct"] for r in with_console)
            extra = statistics.median(
                (a["cpu_s"] - b["cpu_s"]) / a["seconds"] * 100 for a, b in zip(with_console, without)
            )
            print(f"{name:<24}{c:>14.1f}{h:>16.1f}{ratio:>7.3f}{own:>8.1f}%{extra:>14.1f}%")
            for a, b in zip(with_console, without):
                print(
                    f"    console {a['mib_s']:8.1f} MiB/s {a['cpu_s']:6.3f} CPU-s (own {a['own_pct']:.1f}%) | "
                    f"headless {b['mib_s']:8.1f} MiB/s {b['cpu_s']:6.3f} CPU-s | {a['mib_s'] / b['mib_s']:.3f}"
                )
    finally:
        tmux("kill-server", check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
