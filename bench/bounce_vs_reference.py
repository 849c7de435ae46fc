"""xferscope `bounce` and `bounce-async` against a minimal reference loop, and against `host`.

The reference is the loop a user would write: per thread, pread (O_DIRECT) into a
pinned buffer, cuMemcpyHtoDAsync to the GPU, cuStreamSynchronize, in a tight
Python loop over its slice of the file (the same slices xferscope's workers read).
Two ratios are printed for each block size and worker count:

  bounce / reference      the serial path against the hand-written loop
  bounce-async / host     the pipelined path against reading into host memory
                          alone; goal >= 0.95 where PCIe is not the bottleneck

    python bench/bounce_vs_reference.py --dir /data [--size 2G] [--seconds 2] [--reps 2]
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import statistics
import sys
import threading
import time

from xferscope.runner import Run
from xferscope.spec import RunSpec
from xferscope.units import format_size, parse_size

PATHS = ("host", "bounce", "bounce-async")


def run_path(path: str, file: str, size: int, bs: int, workers: int, seconds: float) -> float:
    r = Run(RunSpec(path=path, file=file, file_size=size, block_size=bs, workers=workers, duration=seconds,
                    keep=True)).execute()
    return r.throughput_mib_s


def reference(file: str, size: int, bs: int, workers: int, seconds: float) -> float:
    """MiB/s of the hand-written pread + cuMemcpyHtoDAsync + cuStreamSynchronize loop."""
    from xferscope.engines.gpu_setup import GpuResources, check, driver

    cu = driver()
    share = size // bs // workers * bs
    done = [0] * workers
    with GpuResources() as res:
        setups = []
        for _ in range(workers):
            host = res.pinned_memory(0, bs)
            setups.append((res.device_memory(0, bs), host, res.stream(0),
                           memoryview((ctypes.c_char * bs).from_address(host)).cast("B")))
        ctx = res.context(0)
        start = threading.Barrier(workers + 1)
        deadline = [0.0]

        def loop(i: int) -> None:
            dev, host, stream, view = setups[i]
            check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            fd = os.open(file, os.O_RDONLY | os.O_DIRECT)
            try:
                base, off, n = i * share, 0, 0
                start.wait()
                while time.perf_counter() < deadline[0]:
                    if os.preadv(fd, [view], base + off) != bs:
                        raise RuntimeError("short read")
                    check(cu.cuMemcpyHtoDAsync(dev, host, bs, stream), "cuMemcpyHtoDAsync")
                    check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
                    n += bs
                    off = (off + bs) % share
                done[i] = n
            finally:
                os.close(fd)

        threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
        for t in threads:
            t.start()
        t0 = time.perf_counter()
        deadline[0] = t0 + seconds
        start.wait()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        for *_, view in setups:
            view.release()
    return sum(done) / (1 << 20) / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=".")
    ap.add_argument("--size", default="2G")
    ap.add_argument("--sizes", default="64K,1M,16M")
    ap.add_argument("--workers", default="1,8")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    file = os.path.join(os.path.abspath(args.dir), "xferscope-bounce-bench.dat")
    Run(RunSpec(path="host", file=file, file_size=size, duration=None, total_bytes=1 << 20, keep=True)).execute()
    rows = []
    try:
        for bs in [parse_size(s) for s in args.sizes.split(",")]:
            for workers in [int(w) for w in args.workers.split(",")]:
                got: dict[str, list[float]] = {p: [] for p in (*PATHS, "reference")}
                for rep in range(args.reps):
                    order = list(got) if rep % 2 == 0 else list(reversed(got))
                    for p in order:
                        if p == "reference":
                            got[p].append(reference(file, size, bs, workers, args.seconds))
                        else:
                            got[p].append(run_path(p, file, size, bs, workers, args.seconds))
                row = {"block_size": bs, "workers": workers, **{f"{p}_mib_s": statistics.median(v)
                                                                 for p, v in got.items()},
                       "reps": got}
                row["bounce_vs_reference"] = row["bounce_mib_s"] / row["reference_mib_s"]
                row["bounce_async_vs_host"] = row["bounce-async_mib_s"] / row["host_mib_s"]
                rows.append(row)
                print(f"{format_size(bs):>5} x{workers:<2} host {row['host_mib_s']:8.1f}  bounce "
                      f"{row['bounce_mib_s']:8.1f}  bounce-async {row['bounce-async_mib_s']:8.1f}  reference "
                      f"{row['reference_mib_s']:8.1f} MiB/s | bounce/ref {row['bounce_vs_reference']:.3f}  "
                      f"bounce-async/host {row['bounce_async_vs_host']:.3f}", flush=True)
                print("        spread: " + "  ".join(f"{p} {min(v):.0f}-{max(v):.0f}" for p, v in got.items()),
                      flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"rows": rows, "file_size": size, "seconds": args.seconds}, fh, indent=2)
    finally:
        for p in (file, file + ".xferscope"):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
