"""Ctrl-C on ``mpirun`` during ``workload checkpoint --mpi``: is the job's record kept, and are its files removed,
within the time the launcher gives the ranks?

Open MPI passes Ctrl-C on to the ranks as SIGTERM and kills them ``odls_base_sigkill_timeout`` (1 s by default)
later. This starts ``--jobs`` jobs at once (2 ranks each, llama3-8b ``--scale``, the states where the machine puts
them: on its GPUs where it has some), sends each ``mpirun`` SIGINT once every engine process of the job has
written ``--after`` bytes, and prints for each: the seconds from the signal to the job's end, whether the record
was written (and its status), and whether any checkpoint file was left a moment after the end (a rank killed before
it removed its files leaves them to its janitor process).

    python bench/mpi_ctrl_c.py --dir /var/tmp/cc --jobs 3 --kill-timeout 1 [--path bounce-async]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psutil

SERVING = "checkpoint_process:serve"


def mpirun(ranks: int) -> list[str]:
    cmd = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def engines_written(proc: subprocess.Popen, ranks: int, nbytes: int) -> bool:
    """Every engine process of the job has written ``nbytes``."""
    found = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if SERVING in " ".join(child.cmdline()):
                found.append(child.io_counters().write_bytes)
        except psutil.Error:
            continue
    return len(found) == ranks and all(n >= nbytes for n in found)


def one_job(i: int, a: argparse.Namespace, rows: list) -> None:
    where = tempfile.mkdtemp(dir=a.dir, prefix=f"job{i}-")
    out = os.path.join(where, "job.json")
    cmd = [
        *mpirun(2), sys.executable, "-m", "xferscope.cli", "workload", "checkpoint", "llama3-8b", "--mpi",
        "--scale", a.scale, "--checkpoints", str(a.checkpoints), "--every", "0.2", "--path", a.path, "--dir", where, "--json", out,
    ]  # fmt: skip
    env = {**os.environ, "OMPI_MCA_odls_base_sigkill_timeout": str(a.kill_timeout)}
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")  # some containers forbid cross-memory copies
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while not engines_written(proc, 2, a.after):
            if proc.poll() is not None or time.monotonic() > deadline:
                said = proc.communicate()[1] if proc.poll() is not None else ""
                line = next((x for x in said.splitlines() if x.startswith("xferscope:")), said.strip()[-300:])
                rows.append((i, f"ended before the signal: {line}", None, None, None))
                return
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
        ended = time.monotonic() - t0
        status = None
        if os.path.exists(out):
            with open(out) as fh:
                status = json.load(fh)["status"]

        def left() -> list[str]:
            return [p for p in os.listdir(where) if p.startswith("xferscope-")]

        t1 = time.monotonic()  # a killed rank's janitor removes its files once the rank is gone: up to 10 s
        while left() and time.monotonic() - t1 < 10:
            time.sleep(0.05)
        rows.append((i, "ran", ended, status, (left(), time.monotonic() - t1)))
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(where, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--jobs", type=int, default=3, help="jobs at once (2 ranks each)")
    p.add_argument("--kill-timeout", type=float, default=1.0, help="Open MPI's odls_base_sigkill_timeout, seconds")
    p.add_argument("--path", default="bounce-async")
    p.add_argument("--scale", default="0.01")
    p.add_argument("--checkpoints", type=int, default=40, help="more than are written before the signal")
    p.add_argument("--after", type=int, default=64 << 20, help="bytes each engine has written before Ctrl-C")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rows: list = []
    threads = [threading.Thread(target=one_job, args=(i, a, rows)) for i in range(a.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = 0
    for i, what, ended, status, files in sorted(rows, key=lambda r: r[0]):
        if what != "ran":
            print(f"  job {i}: {what}")
            continue
        left, after = files
        kept += status is not None and not left
        gone = f"files left: {left}" if left else f"its files gone {after:.1f} s after its end"
        print(f"  job {i}: ended {ended:.2f} s after Ctrl-C; record {status or 'NOT written'}; {gone}")
    print(f"{kept} of {a.jobs} jobs kept their record and left no file (kill timeout {a.kill_timeout:g} s, {a.path})")
    return 0 if kept == a.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
