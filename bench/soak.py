#!/usr/bin/env python3
"""Soak: runs back to back for N minutes, through the console in a real terminal and through the CLI,
watching what the processes hold over time.

    python bench/soak.py --minutes 60 --mode console --paths host --dir /var/tmp [--run-seconds 5]
    python bench/soak.py --minutes 10 --mode both --paths gpu --dir /mnt/nvme     # every GPU path, in turn

console: `xferscope tui --start` in a tmux window of its own (a real terminal emulator drawing every
frame); when a batch has ended (no engine process for two seconds) the script presses `l` then `r` to run
it again. Every --every seconds it samples the console's process: RSS, open file descriptors, threads,
child processes (the engine's), the engine process's RSS, and the GPU memory used (NVML, when there is a
GPU). A batch whose screen shows "died by" counts as a crash.

cli: `xferscope run` (or `compare` for several paths) again and again, each a new process: its peak RSS and
its file descriptors at the end, its exit status (a crash of the engine is exit 1 with "died by" on
stderr; a crash of the CLI itself a negative status), GPU memory before and after each run (back at the
baseline?), engine processes left behind, and scratch files left in --dir.

--mode both alternates: the console for half of the time, then the CLI. At the end (and every
--report minutes) it prints the trend: first and last values, the least-squares slope per hour (after
the first --warmup minutes), the runs, the failures, what was left behind. Goals: RSS growth under
5 MiB an hour and file descriptors flat for the console; GPU memory back at its baseline after each run;
0 crashes; nothing left behind. --log FILE keeps every sample as CSV.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import psutil

ENGINE = "xferscope.run.engine_process:serve"
GPU_PATHS = ("bounce", "bounce-async", "cufile", "cufile-batch", "cufile-async")
SOCKET = f"xferscope-soak-{os.getpid()}"
MIB = float(1 << 20)


# ------------------------------------------------------------------ what is measured


def gpu_memory_mib() -> float | None:
    """GPU memory used on all GPUs (MiB), or None without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        n = pynvml.nvmlDeviceGetCount()
        if not n:
            return None
        return sum(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used for i in range(n)) / MIB
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def engines_of(proc: psutil.Process) -> list[psutil.Process]:
    out = []
    try:
        kids = proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for p in kids:
        try:
            if ENGINE in " ".join(p.cmdline()):
                out.append(p)
                SEEN_ENGINES.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


LOG_FILES: list = []  # the --log file, flushed at every sample (read it while the soak runs)

#: every engine process this soak has seen (its console's and its CLI runs'), to tell which outlived its run
SEEN_ENGINES: set[int] = set()


def alive_engines() -> list[int]:
    """The engine processes this soak has seen that are still there."""
    out = []
    for pid in sorted(SEEN_ENGINES):
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE and ENGINE in " ".join(p.cmdline()):
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


@dataclass
class Reading:
    t: float
    mode: str
    rss_mib: float
    fds: int
    threads: int
    children: int
    engine_rss_mib: float | None
    gpu_mib: float | None
    runs: int


def read(proc: psutil.Process, mode: str, t0: float, runs: int) -> Reading | None:
    try:
        with proc.oneshot():
            rss, fds, threads = proc.memory_info().rss / MIB, proc.num_fds(), proc.num_threads()
        kids = proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    engine_rss = None
    for p in engines_of(proc):
        try:
            engine_rss = p.memory_info().rss / MIB
        except psutil.NoSuchProcess:
            pass
    return Reading(time.monotonic() - t0, mode, rss, fds, threads, len(kids), engine_rss, gpu_memory_mib(), runs)


@dataclass
class Tally:
    runs: int = 0
    failures: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    gpu_not_back: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    cli_peak_rss: list[float] = field(default_factory=list)
    cli_fds: list[int] = field(default_factory=list)


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 3:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 3600 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def scratch_in(directory: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if n.startswith(("xferscope", ".xferscope")))
    except OSError:
        return []


# ------------------------------------------------------------------ the console in tmux


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check).stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-t", "soak", check=False)


def soak_console(
    args, paths: list[str], until: float, t0: float, tally: Tally, readings: list[Reading], log, progress
) -> None:
    cmd = [
        sys.executable,
        "-m",
        "xferscope.cli",
        "tui",
        "--start",
        "--dir",
        args.dir,
        "--size",
        args.size,
        "--bs",
        args.bs,
        "--duration",
        str(args.run_seconds),
    ]
    if paths != ["default"]:
        cmd += ["--path", paths[0]]  # several paths: the console's default (host and every GPU path here)
    tmux("new-session", "-d", "-s", "soak", "-x", str(args.cols), "-y", str(args.rows), "exec " + shlex.join(cmd))
    console = psutil.Process(int(tmux("display-message", "-p", "-t", "soak", "#{pane_pid}").strip()))
    next_sample = time.monotonic()
    idle_since: float | None = None
    seen_engines: set[int] = set()
    try:
        while time.monotonic() < until:
            if not console.is_running() or console.status() == psutil.STATUS_ZOMBIE:
                tally.crashes.append(f"the console itself ended (last screen: {' '.join(screen().split())[-300:]})")
                return
            engines = engines_of(console)
            for e in engines:
                if e.pid not in seen_engines:
                    seen_engines.add(e.pid)
                    tally.runs += 1
            now = time.monotonic()
            if engines:
                idle_since = None
            elif idle_since is None:
                idle_since = now
            elif now - idle_since > 2.0:  # the batch has ended: look at it, start it again
                text = screen()
                if "died by" in text:
                    line = next((ln for ln in text.splitlines() if "died by" in ln), "died by ?")
                    tally.crashes.append("console: " + " ".join(line.split())[:200])
                elif "Run failed" in text:
                    tally.failures.append("console: " + " ".join(text.split())[-200:])
                gpu = gpu_memory_mib()
                if (
                    gpu is not None
                    and readings
                    and readings[0].gpu_mib is not None
                    and gpu > readings[0].gpu_mib + args.gpu_slack_mib
                ):
                    tally.gpu_not_back.append(
                        f"console, after run {tally.runs}: {gpu:.0f} MiB used (baseline {readings[0].gpu_mib:.0f})"
                    )
                tmux("send-keys", "-t", "soak", "l")
                time.sleep(0.3)
                tmux("send-keys", "-t", "soak", "r")
                idle_since = None
                time.sleep(1.0)
            if now >= next_sample:
                r = read(console, "console", t0, tally.runs)
                if r is not None:
                    readings.append(r)
                    log_reading(log, r)
                next_sample += args.every
                progress()
            time.sleep(0.2)
    finally:
        tmux("send-keys", "-t", "soak", "q", check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and console.is_running() and console.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.2)
        tmux("kill-server", check=False)


# ------------------------------------------------------------------ the CLI, a process per run


def soak_cli(
    args,
    paths: list[str],
    until: float,
    t0: float,
    tally: Tally,
    readings: list[Reading],
    log,
    machine_paths: list[str],
    progress,
) -> None:
    out_dir = tempfile.mkdtemp(prefix="xferscope-soak-out-")
    i = 0
    try:
        while time.monotonic() < until:
            chosen = machine_paths if paths == ["default"] else paths
            path = chosen[i % len(chosen)]
            i += 1
            base_gpu = gpu_memory_mib()
            cmd = [
                sys.executable,
                "-m",
                "xferscope.cli",
                "run",
                "--path",
                path,
                "--dir",
                args.dir,
                "--size",
                args.size,
                "--bs",
                args.bs,
                "--duration",
                str(args.run_seconds),
                "--json",
                os.path.join(out_dir, "run.json"),
            ]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            ps = psutil.Process(proc.pid)
            peak, fds = 0.0, 0
            stderr_chunks = []
            while proc.poll() is None:
                try:
                    peak = max(peak, ps.memory_info().rss / MIB)
                    fds = ps.num_fds()
                except psutil.NoSuchProcess:
                    break
                engines_of(ps)
                time.sleep(0.1)
            stderr_chunks.append(proc.stderr.read())
            proc.wait()
            err = "".join(stderr_chunks)
            tally.runs += 1
            tally.cli_peak_rss.append(peak)
            tally.cli_fds.append(fds)
            if proc.returncode < 0:
                tally.crashes.append(f"cli {path}: the CLI itself died by signal {-proc.returncode}")
            elif "died by" in err:
                tally.crashes.append(f"cli {path}: " + next(ln for ln in err.splitlines() if "died by" in ln)[:200])
            elif proc.returncode not in (0,):
                tally.failures.append(f"cli {path}: exit {proc.returncode}: {err.strip()[-200:]}")
            time.sleep(0.5)
            left = [f"engine pid {pid}" for pid in alive_engines()] + scratch_in(args.dir)
            if left:
                tally.left_behind.append(f"after cli run {tally.runs} ({path}): {', '.join(left)}")
            after = gpu_memory_mib()
            if base_gpu is not None and after is not None and after > base_gpu + args.gpu_slack_mib:
                tally.gpu_not_back.append(f"cli {path}: {after:.0f} MiB used after, {base_gpu:.0f} before")
            r = Reading(time.monotonic() - t0, "cli", peak, fds, 0, len(left), None, after, tally.runs)
            readings.append(r)
            log_reading(log, r)
            progress()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


# ------------------------------------------------------------------ reporting


def log_reading(log, r: Reading) -> None:
    if log is not None:
        log.writerow(
            {k: ("" if v is None else (f"{v:.3f}" if isinstance(v, float) else v)) for k, v in vars(r).items()}
        )
        LOG_FILES[-1].flush()


def report(readings: list[Reading], tally: Tally, warmup_s: float, elapsed: float) -> bool:
    """Print the trend; True when the goals were met."""
    ok = True
    print(
        f"--- after {elapsed / 60:.1f} min: {tally.runs} runs, {len(tally.crashes)} crashes, "
        f"{len(tally.failures)} other failures"
    )
    console = [r for r in readings if r.mode == "console"]
    if console:
        steady = [r for r in console if r.t >= console[0].t + warmup_s] or console
        rss_slope = slope_per_hour([(r.t, r.rss_mib) for r in steady])
        fd_values = sorted({r.fds for r in steady})
        quarter = max(1, len(steady) // 4)
        fds_early, fds_late = max(r.fds for r in steady[:quarter]), max(r.fds for r in steady[-quarter:])
        print(
            f"console RSS: first {console[0].rss_mib:.1f} MiB, after warm-up {steady[0].rss_mib:.1f}, "
            f"last {console[-1].rss_mib:.1f}, max {max(r.rss_mib for r in console):.1f}; "
            f"slope {rss_slope:+.2f} MiB/hour (goal < 5)"
        )
        print(
            f"console fds: first {console[0].fds}, last {console[-1].fds}, after warm-up "
            f"{fd_values[0]}..{fd_values[-1]} (the most in the first quarter {fds_early}, in the last "
            f"{fds_late}: 3 more while a run is on, its engine's pipes); "
            f"threads {console[0].threads}..{max(r.threads for r in console)}; "
            f"children at most {max(r.children for r in console)}"
        )
        engine = [r.engine_rss_mib for r in console if r.engine_rss_mib is not None]
        if engine:
            print(f"engine process RSS: {min(engine):.1f}..{max(engine):.1f} MiB")
        ok = ok and rss_slope < 5.0 and fds_late <= fds_early
    cli = [r for r in readings if r.mode == "cli"]
    if cli:
        print(
            f"cli: peak RSS per run {min(tally.cli_peak_rss):.1f}..{max(tally.cli_peak_rss):.1f} MiB "
            f"(slope {slope_per_hour([(r.t, r.rss_mib) for r in cli]):+.2f} MiB/hour), "
            f"fds at the end {min(tally.cli_fds)}..{max(tally.cli_fds)}"
        )
    gpu = [r.gpu_mib for r in readings if r.gpu_mib is not None]
    if gpu:
        print(
            f"GPU memory used: {min(gpu):.0f}..{max(gpu):.0f} MiB; not back at baseline after "
            f"{len(tally.gpu_not_back)} runs"
        )
    for what, items in (
        ("crash", tally.crashes),
        ("failure", tally.failures),
        ("GPU memory not back", tally.gpu_not_back),
        ("left behind", tally.left_behind),
    ):
        for item in items[:10]:
            print(f"  {what}: {item}")
        if len(items) > 10:
            print(f"  ... and {len(items) - 10} more")
    return ok and not tally.crashes and not tally.left_behind and not tally.gpu_not_back


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--mode", choices=("console", "cli", "both"), default="console")
    ap.add_argument(
        "--paths",
        default="host",
        help="comma list, `gpu` (every GPU path that runs here) or `default` (host and those)",
    )
    ap.add_argument("--dir", default="/var/tmp", help="directory for the scratch files (O_DIRECT must work)")
    ap.add_argument("--size", default="64M")
    ap.add_argument("--bs", default="64K")
    ap.add_argument("--run-seconds", type=float, default=5.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples of the console")
    ap.add_argument("--report", type=float, default=10.0, help="minutes between trend reports")
    ap.add_argument("--warmup", type=float, default=2.0, help="minutes left out of the slopes")
    ap.add_argument(
        "--gpu-slack-mib",
        type=float,
        default=64.0,
        help="GPU memory above the baseline still counted as back at it (other processes)",
    )
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--log", help="CSV file for every sample")
    args = ap.parse_args()
    import signal

    def stop(signum, frame):  # started in the background (SIGINT ignored there): SIGTERM ends it cleanly
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if args.mode != "cli" and not shutil.which("tmux"):
        raise SystemExit("tmux is needed: the console is soaked in a real terminal emulator")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from xferscope.engines.registry import availability

    avail = availability()
    machine_paths = [p for p in ("host",) + GPU_PATHS if avail.get(p) is None]
    if args.paths == "gpu":
        paths = [p for p in GPU_PATHS if avail.get(p) is None]
        if not paths:
            raise SystemExit("no GPU path runs here: " + "; ".join(f"{p}: {avail[p]}" for p in GPU_PATHS))
    else:
        paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    print(
        f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform(terse=True)}, "
        f"Python {platform.python_version()}; load {os.getloadavg()[0]:.2f}; {args.minutes:g} min of {args.mode} "
        f"runs of {','.join(paths)}, {args.run_seconds:g} s each, {args.size} {args.bs} in {args.dir}"
    )
    args.dir = tempfile.mkdtemp(prefix="xferscope-soak-", dir=args.dir)  # scratch files here, and only here
    log = None
    log_fh = None
    if args.log:
        log_fh = open(args.log, "w", newline="")  # noqa: SIM115 (closed at exit, with LOG_FILES)
        LOG_FILES.append(log_fh)
        log = csv.DictWriter(log_fh, fieldnames=list(Reading.__dataclass_fields__))
        log.writeheader()
    tally, readings = Tally(), []
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    next_report = [t0 + args.report * 60]

    def progress() -> None:
        if time.monotonic() >= next_report[0]:
            report(readings, tally, args.warmup * 60, time.monotonic() - t0)
            sys.stdout.flush()
            next_report[0] += args.report * 60

    console_paths = paths if len(paths) == 1 else ["default"]
    try:
        if args.mode == "both":
            soak_console(args, console_paths, t0 + args.minutes * 30, t0, tally, readings, log, progress)
            soak_cli(args, paths, end, t0, tally, readings, log, machine_paths, progress)
        elif args.mode == "console":
            soak_console(args, console_paths, end, t0, tally, readings, log, progress)
        else:
            soak_cli(args, paths, end, t0, tally, readings, log, machine_paths, progress)
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        tmux("kill-server", check=False) if shutil.which("tmux") else None
        if log_fh:
            log_fh.close()
    print("=== summary")
    good = report(readings, tally, args.warmup * 60, time.monotonic() - t0)
    left = [f"engine pid {pid}" for pid in alive_engines()] + scratch_in(args.dir)
    print(f"left behind at the end: {', '.join(left) if left else 'nothing'}")
    shutil.rmtree(args.dir, ignore_errors=True)
    print("goals met" if good and not left else "goals NOT met")
    sys.exit(0 if good and not left else 1)


if __name__ == "__main__":
    main()
