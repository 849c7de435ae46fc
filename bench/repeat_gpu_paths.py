#!/usr/bin/env python3
"""Proof by repetition: short runs of each cuFile path, and `doctor --dir`, many times in a row, counting
crashes. For a GPU machine.

    python bench/repeat_gpu_paths.py --dir /mnt/nvme [--runs 200] [--doctor 100] [--seconds 2]
                                     [--paths cufile,cufile-batch,cufile-async] [--size 256M] [--jobs N]

Every run is the real CLI (`xferscope run --path P -T S --dir D --json F`, then `xferscope doctor --dir D
--json`), a new process each time, as a user would type it. Per path it counts: runs that ended ok, runs
whose engine process died (exit 1 and "died by SIGNAL" on stderr: the CLI survived, the crash is named),
runs where the CLI itself died by a signal (negative exit status: what this was built to end), other
failures, the cuFile mode label seen, runs after which GPU memory was not back at its level before the
run (NVML, with --gpu-slack-mib), engine processes left behind and scratch files left in the directory.
doctor: failed checks that name a signal, and doctor runs that died.

Goal: 0 crashes of the CLI or of doctor, 0 engine deaths, nothing left behind, GPU memory back after
every run. Prints a table for bench/RESULTS.md; exit status 1 when a goal was missed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ENGINE = "xferscope.run.engine_process:serve"


def gpu_memory_mib() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        return sum(
            pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used
            for i in range(pynvml.nvmlDeviceGetCount())
        ) / (1 << 20)
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def run_watched(cmd: list[str], timeout: float) -> tuple[int, str, str, set[int]]:
    """(exit status, stdout, stderr, the engine processes it started)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    engines: set[int] = set()
    ps = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout
    out_parts, err_parts = [], []
    while True:
        try:
            out, err = proc.communicate(timeout=0.2)
            out_parts.append(out)
            err_parts.append(err)
            break
        except subprocess.TimeoutExpired:
            pass
        try:
            for kid in ps.children(recursive=True):
                try:
                    if ENGINE in " ".join(kid.cmdline()):
                        engines.add(kid.pid)
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            pass
        if time.monotonic() > deadline:
            proc.kill()
    return proc.returncode, "".join(out_parts), "".join(err_parts), engines


def alive(pids: set[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="directory on the storage under test (O_DIRECT, ext4/xfs)")
    ap.add_argument("--runs", type=int, default=200, help="runs of each path")
    ap.add_argument("--doctor", type=int, default=100, help="runs of `doctor --dir`")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--bs", default="1M")
    ap.add_argument("--paths", default="cufile,cufile-batch,cufile-async")
    ap.add_argument("--gpu-slack-mib", type=float, default=64.0)
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (each in its own directory)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="xferscope-repeat-", dir=args.dir)
    out_json = os.path.join(tempfile.mkdtemp(prefix="xferscope-repeat-out-"), "run.json")
    xs = [sys.executable, "-m", "xferscope.cli"]
    print(
        f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform(terse=True)}; "
        f"load {os.getloadavg()[0]:.2f}; {args.runs} runs of each of {args.paths}, {args.seconds:g} s, "
        f"{args.size} {args.bs} in {args.dir}; {args.doctor} doctor runs, {args.jobs} at a time"
    )
    rows = []
    good = True
    lanes = max(1, args.jobs)
    lane_dirs = [os.path.join(work, f"lane{k}") for k in range(lanes)]
    lane_outs = [os.path.join(os.path.dirname(out_json), f"run{k}.json") for k in range(lanes)]
    for d in lane_dirs:
        os.mkdir(d)
    if lanes > 1:
        print(
            f"{lanes} runs at a time, each in a directory of its own; GPU memory is checked against the level "
            f"before each path's first run once all its runs have ended (runs beside each other share the GPU)"
        )

    def one_run(path: str, i: int) -> tuple[str, str | None, list[str], list[str]]:
        """(outcome, cuFile mode, what it left or kept, notes) of the i-th run of path, in lane i % lanes."""
        lane = i % lanes
        where, out = lane_dirs[lane], lane_outs[lane]
        notes: list[str] = []
        before = gpu_memory_mib() if lanes == 1 else None
        rc, _, err, engines = run_watched(
            xs
            + [
                "run",
                "--path",
                path,
                "-T",
                str(args.seconds),
                "-s",
                args.size,
                "--bs",
                args.bs,
                "--dir",
                where,
                "--json",
                out,
            ],
            timeout=args.seconds + 300,
        )
        died = re.search(r"died by (SIG\w+)", err)
        mode = None
        if rc < 0:
            outcome = "cli crashed"
            notes.append(f"run {i}: the CLI died by signal {-rc}")
        elif died:
            outcome = "engine died"
            notes.append(f"run {i}: engine died by {died.group(1)}")
        elif rc != 0:
            outcome = "failed"
            notes.append(f"run {i}: exit {rc}: {err.strip()[-160:]}")
        else:
            outcome = "ok"
            try:
                with open(out) as fh:
                    mode = f"{json.load(fh).get('environment', {}).get('cufile_mode', '?')}"
            except (OSError, ValueError):
                pass
        extra = []
        left = alive(engines)
        if left:
            extra.append("engine left")
            notes.append(f"run {i}: engine processes left: {left}")
        if os.listdir(where):
            extra.append("scratch left")
            notes.append(f"run {i}: left in {where}: {os.listdir(where)}")
            for name in os.listdir(where):
                os.unlink(os.path.join(where, name))
        if before is not None:
            after = gpu_memory_mib()
            if after is not None and after > before + args.gpu_slack_mib:
                extra.append("gpu memory not back")
                notes.append(f"run {i}: GPU memory {before:.0f} -> {after:.0f} MiB")
        return outcome, mode, extra, notes

    def in_lanes(fn, n: int) -> list:
        """fn(i) for i in range(n), `lanes` at a time, each lane taking its own indices in turn."""
        results: list = [None] * n

        def lane_loop(lane: int) -> None:
            for i in range(lane, n, lanes):
                results[i] = fn(i)

        threads = [threading.Thread(target=lane_loop, args=(k,)) for k in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    try:
        for path in [p.strip() for p in args.paths.split(",") if p.strip()]:
            tally = collections.Counter()
            modes = collections.Counter()
            notes: list[str] = []
            t0 = time.monotonic()
            level = gpu_memory_mib()
            for outcome, mode, extra, run_notes in in_lanes(lambda i, path=path: one_run(path, i), args.runs):
                tally[outcome] += 1
                tally.update(extra)
                if mode is not None:
                    modes[mode] += 1
                notes.extend(run_notes)
            if lanes > 1:
                after = gpu_memory_mib()
                if level is not None and after is not None and after > level + args.gpu_slack_mib:
                    tally["gpu memory not back"] += 1
                    notes.append(f"after all runs: GPU memory {level:.0f} -> {after:.0f} MiB")
            minutes = (time.monotonic() - t0) / 60
            rows.append((path, args.runs, tally, dict(modes), minutes))
            bad = sum(v for k, v in tally.items() if k != "ok")
            good = good and bad == 0
            print(f"{path}: {dict(tally)} modes {dict(modes)} in {minutes:.1f} min", flush=True)
            for note in notes[:20]:
                print("   ", note)
        if args.doctor:
            tally = collections.Counter()
            notes = []
            t0 = time.monotonic()

            def one_doctor(i: int) -> tuple[str, str | None]:
                rc, out, err, _ = run_watched(xs + ["doctor", "--dir", lane_dirs[i % lanes], "--json"], timeout=600)
                if rc < 0:
                    return "doctor crashed", f"doctor {i}: died by signal {-rc}"
                try:
                    report = json.loads(out)
                except ValueError:
                    return "no report", f"doctor {i}: exit {rc}: {err.strip()[-160:]}"
                crashed = [c for c in report["checks"] if "died by" in c["detail"]]
                if crashed:
                    return "check crashed", f"doctor {i}: {crashed[0]['name']}: {crashed[0]['detail'][:160]}"
                return "ok", None

            for outcome, note in in_lanes(one_doctor, args.doctor):
                tally[outcome] += 1
                if note:
                    notes.append(note)
            minutes = (time.monotonic() - t0) / 60
            rows.append(("doctor --dir", args.doctor, tally, {}, minutes))
            good = good and all(k == "ok" for k in tally)
            print(f"doctor: {dict(tally)} in {minutes:.1f} min", flush=True)
            for note in notes[:20]:
                print("   ", note)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(os.path.dirname(out_json), ignore_errors=True)
    print()
    print(
        "| what | runs | ok | engine died | CLI crashed | other failures | left behind | GPU memory not back | "
        "cuFile mode |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for what, n, t, modes, _minutes in rows:
        other = t["failed"] + t["no report"] + t["check crashed"]
        print(
            f"| {what} | {n} | {t['ok']} | {t['engine died']} | {t['cli crashed'] + t['doctor crashed']} | {other} "
            f"| {t['engine left'] + t['scratch left']} | {t['gpu memory not back']} | "
            f"{', '.join(f'{k} {v}' for k, v in modes.items()) or '-'} |"
        )
    print("goals met" if good else "goals NOT met")
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
