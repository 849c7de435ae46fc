"""`workload checkpoint`'s GPU goals, in one run:

* ``figures``: llama3-8b ``--subset`` scaled to about 16 GiB, 8 ranks over the one GPU, by each of ``--paths``:
  save GB/s (MLPerf's: the slowest rank) and restore GB/s, then the same with ``--async``: the time the GPUs are
  blocked beside the time until durable. Every byte restored is checked (``--verify``).
* ``against-run``: the workload's save rate against a plain ``xferscope run --io write`` of the same path, request
  size (16 MiB) and concurrency (a worker a rank), in interleaved rotated rounds, each round's ratio of the two,
  with an A/A (the workload against itself, run twice a round) beside it. "met" where the median ratio is at
  least ``--goal`` (0.95). ``run`` writes over files it made and filled before its timed region; a checkpoint
  writes new files, so a fourth arm does just that with no GPU (``new files``: a thread a rank, each a new file
  of a rank's bytes in 16 MiB O_DIRECT writes from 2 MiB huge pages, as run's bounce paths and the checkpoint's
  staging write from, then fsync): what this storage gives new files.
* ``gpus``: on a machine of several GPUs, 8 ranks round-robin over all of them, by each of ``--paths``: each GPU's
  ranks, save and restore GB/s (its ranks' bytes over the slowest one's mean time).

    python bench/checkpoint_goals.py --dir /var/tmp/ck [--paths host,bounce-async,cufile] [--scale 0.153]
    python bench/checkpoint_goals.py --dir /var/tmp/ck --only against-run --ratio-path bounce-async --rounds 5
    python bench/checkpoint_goals.py --dir /var/tmp/ck --only gpus --scale 0.05
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from xferscope.compare.rounds import round_orders
from xferscope.compare.verdict import paired_verdict

#: the request size a checkpoint's storers write with
REQUEST = "16M"


def xferscope(*args: str) -> dict:
    """One xferscope command's JSON on stdout (its error line raised)."""
    proc = subprocess.run(
        [sys.executable, "-m", "xferscope.cli", *args, "--format", "json"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"xferscope {' '.join(args)}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def checkpoint(a, path: str, *more: str) -> dict:
    return xferscope(
        "workload", "checkpoint", "llama3-8b", "--subset", "--scale", str(a.scale), "--checkpoints",
        str(a.checkpoints), "--path", path, "--dir", a.dir, *more,
    )  # fmt: skip


def spread(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def figures(a) -> None:
    print(f"llama3-8b --subset --scale {a.scale}, {a.checkpoints} checkpoints, 8 ranks over GPU 0, {a.verify}")
    for path in a.paths.split(","):
        for more in ((), ("--async",)):
            d = checkpoint(a, path, *a.verify, *more)
            saves, restores = d["saves"], d["restores"]
            gib = d["spec"]["bytes_a_checkpoint_here"] / (1 << 30)
            blocked = [s["blocked_seconds"] for s in saves if s.get("blocked_seconds") is not None]
            print(
                f"  {path:13s} {'--async' if more else 'sync':8s} {gib:.1f} GiB a checkpoint: save "
                f"{spread([s['gb_per_s'] for s in saves])} GB/s in {spread([s['seconds'] for s in saves], 1)} s, "
                f"restore {spread([r['gb_per_s'] for r in restores])} GB/s"
                + (f", GPUs blocked {spread(blocked, 2)} s" if blocked else "")
                + f", status {d['status']}, verified {d['verified']}, CPU-s/GiB {d['cpu_s_per_gib']:.3f}"
            )


def run_write(a, path: str, ranks: int) -> float:
    d = xferscope(
        "run", "--path", path, "--io", "write", "--bs", REQUEST, "--workers", str(ranks), "--qd", "1",
        "-T", str(a.seconds), "-s", "1G", "--dir", a.dir,
    )  # fmt: skip
    return d["bytes"] / d["seconds"] / 1e9


def new_files(a, ranks: int, size: int) -> float:
    """What this storage gives for what a checkpoint's ranks write: ``ranks`` threads, each a new file of ``size``
    bytes from host memory on 2 MiB huge pages (as run's bounce paths and the checkpoint's staging write from) in
    16 MiB O_DIRECT writes, then fsync (no GPU); GB/s."""
    import ctypes
    import os
    import threading
    import time

    from xferscope.engines.gpu_setup import map_huge_pages, unmap

    request = 16 << 20
    raw, length, base = map_huge_pages(request)
    ctypes.memset(base, 0xA5, request)
    buf = memoryview((ctypes.c_char * request).from_address(base)).cast("B")
    names = [os.path.join(a.dir, f"new-file-{i}") for i in range(ranks)]

    def one(name: str) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
        try:
            for at in range(0, size, request):
                os.pwrite(fd, buf, at)
            os.fsync(fd)
        finally:
            os.close(fd)

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    for n in names:
        os.unlink(n)
    buf.release()
    unmap(raw, length)
    return ranks * size / seconds / 1e9


def against_run(a) -> bool:
    path = a.ratio_path
    print(f"{path}: workload checkpoint's save GB/s against run --io write (bs {REQUEST}, 8 workers, qd 1), "
          f"{a.rounds} rotated rounds, scale {a.ratio_scale}")  # fmt: skip
    kinds = ("checkpoint", "checkpoint again", "run", "new files")
    got: dict[str, list[float]] = {k: [] for k in kinds}
    planned = xferscope(
        "workload", "checkpoint", "llama3-8b", "--subset", "--scale", str(a.ratio_scale), "--plan", "--dir", a.dir
    )
    # the new files are as large as the largest rank's share, in whole requests
    rank_bytes = -(-max(r["bytes"] for r in planned["ranks_here"]) // (16 << 20)) * (16 << 20)
    for order in round_orders(len(kinds), a.rounds):
        for i in order:
            if kinds[i] == "run":
                got["run"].append(run_write(a, path, 8))
            elif kinds[i] == "new files":
                got["new files"].append(new_files(a, 8, rank_bytes))
            else:
                d = checkpoint(argparse.Namespace(**{**vars(a), "scale": a.ratio_scale, "checkpoints": 1}), path)
                got[kinds[i]].append(statistics.median(s["gb_per_s"] for s in d["saves"]))
        print("  round: " + ", ".join(f"{k} {v[-1]:.2f} GB/s" for k, v in got.items()))
    ratio = paired_verdict(got["run"], got["checkpoint"])
    fresh = paired_verdict(got["new files"], got["checkpoint"])
    same = paired_verdict(got["checkpoint again"], got["checkpoint"])
    met = ratio.ratio >= a.goal
    print(
        f"  checkpoint / run: {ratio.ratio:.3f} (rounds {ratio.range_low:.3f}-{ratio.range_high:.3f}, "
        f"{ratio.word}); checkpoint / new files: {fresh.ratio:.3f} ({fresh.range_low:.3f}-{fresh.range_high:.3f}, "
        f"{fresh.word}); A/A checkpoint / checkpoint: {same.ratio:.3f} ({same.range_low:.3f}-{same.range_high:.3f})"
    )
    print(f"  goal: at least {a.goal} of run --io write: {'met' if met else 'not met'}")
    return met


def gpus(a) -> bool:
    """8 ranks over every GPU here, by each path: per-GPU figures (False where there are fewer than 2 GPUs)."""
    from xferscope.gpus import gpu_count

    n, why = gpu_count()
    if n < 2:
        print(f"gpus: {n} GPU here{f' ({why})' if why else ''}: needs 2 or more")
        return False
    every = ",".join(str(i) for i in range(n))
    print(f"llama3-8b --subset --scale {a.scale}, {a.checkpoints} checkpoints, 8 ranks over GPUs {every}, --verify")
    ok = True
    for path in a.paths.split(","):
        d = checkpoint(a, path, "--verify", "--gpu", every)
        ok = ok and d["verified"] and d["status"] == "ok"
        print(f"  {path}: save {spread([s['gb_per_s'] for s in d['saves']])} GB/s, restore "
              f"{spread([r['gb_per_s'] for r in d['restores']])} GB/s, verified {d['verified']}")  # fmt: skip
        for g in range(n):
            mine = [r for r in d["ranks"] if r["gpu"] == g]
            total = sum(r["bytes"] for r in mine)
            save = max(r["write_seconds"] + r["fsync_seconds"] for r in mine)
            restore = max(r["restore_seconds"] or 0 for r in mine)
            print(f"    GPU {g}: ranks {','.join(str(r['rank']) for r in mine)}, {total / (1 << 30):.2f} GiB, "
                  f"save {total / save / 1e9:.2f} GB/s, restore {total / restore / 1e9:.2f} GB/s")  # fmt: skip
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--paths", default="host,bounce-async,cufile")
    p.add_argument("--scale", type=float, default=0.153, help="of llama3-8b's 104.7 GiB: 0.153 is about 16 GiB")
    p.add_argument("--checkpoints", type=int, default=2)
    p.add_argument("--only", choices=("figures", "against-run", "gpus"))
    p.add_argument("--ratio-path", default="bounce-async")
    p.add_argument("--ratio-scale", type=float, default=0.05)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0, help="each run --io write")
    p.add_argument("--goal", type=float, default=0.95)
    p.add_argument("--no-verify", action="store_true", help="figures: without --verify (checking 16 GiB takes long)")
    a = p.parse_args()
    a.verify = () if a.no_verify else ("--verify",)
    if a.only in (None, "figures"):
        figures(a)
    met = True
    if a.only in (None, "against-run"):
        met = against_run(a)
    if a.only == "gpus":
        met = gpus(a)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
