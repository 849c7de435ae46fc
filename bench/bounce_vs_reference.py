"""xferscope `bounce` and `bounce-async` against `host`, each other, and a minimal reference loop.

Variants, run in rotated order in every round on one file (same slices per worker), each at its defaults (host and
bounce buffers on 2 MiB huge pages where the kernel offers them):

  host               reads into host memory, the baseline (no GPU copy at all)
  host#aa            the same again: the A/A noise floor of every ratio
  bounce             serial: read, copy, wait (sleeping until the copy is due)
  bounce-async       pipelined: reads into a ring of pinned buffers, copied to the GPU a group at a time
  bounce-async+4k    the same with --4k-pages: CUDA's pinned allocation (cuMemHostAlloc), as before huge pages
  reference          the loop a user would write: per thread, pread (O_DIRECT) into a pinned buffer
                     (cuMemHostAlloc), cuMemcpyHtoDAsync, cuStreamSynchronize, in a tight Python loop

Per block size and worker count: each variant's median MiB/s with its spread, and paired verdicts
(xferscope.compare.verdict: the median of the per-round ratios, min-max, faster/slower only when every round agrees):

  bounce-async / host             goal >= 0.97 (PCIe is not the bottleneck on these disks)
  bounce-async / bounce           goal: not slower, at every block size
  bounce-async --4k-pages / host  what the huge pages are worth
  bounce / reference              the serial path against the hand-written loop
  A/A                             host#aa / host

    python bench/bounce_vs_reference.py --dir /data [--size 2G] [--sizes 64K,1M,16M] [--workers 1,4,8] \
        [--seconds 2] [--rounds 5] [--json out.json]
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

from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec
from xferscope.units import format_size, parse_size

VARIANTS = ("host", "host#aa", "bounce", "bounce-async", "bounce-async+4k", "reference")
#: (name, variant, baseline, goal): the paired ratios variant/baseline that are printed
RATIOS = (
    ("bounce-async / host", "bounce-async", "host", ">= 0.97"),
    ("bounce-async / bounce", "bounce-async", "bounce", "not slower"),
    ("bounce-async --4k-pages / host", "bounce-async+4k", "host", ""),
    ("bounce / reference", "bounce", "reference", ""),
    ("A/A host", "host#aa", "host", "within noise"),
)


def run_path(variant: str, file: str, size: int, bs: int, workers: int, seconds: float) -> tuple[float, dict]:
    """MiB/s of one xferscope run of ``variant`` (a path, ``+huge`` for --huge-pages, ``#...`` a repeat)."""
    path, _, extra = variant.split("#")[0].partition("+")
    r = EngineRun(
        RunSpec(
            path=path,
            file=file,
            file_size=size,
            block_size=bs,
            workers=workers,
            duration=seconds,
            keep=True,
            huge_pages={"huge": True, "4k": False}.get(extra),
        )
    ).execute()
    return r.throughput_mib_s, {"labels": r.labels, "cpu_s_per_gib": r.cpu_seconds_per_gib}


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
            setups.append(
                (
                    res.device_memory(0, bs),
                    host,
                    res.stream(0),
                    memoryview((ctypes.c_char * bs).from_address(host)).cast("B"),
                )
            )
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
    from xferscope.compare.verdict import RULE, paired_verdict

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=".")
    ap.add_argument("--size", default="2G")
    ap.add_argument("--sizes", default="64K,1M,16M")
    ap.add_argument("--workers", default="1,4,8")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", "--reps", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="a subset of " + ",".join(VARIANTS))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants: {', '.join(sorted(unknown))}")
    file = os.path.join(os.path.abspath(args.dir), "xferscope-bounce-bench.dat")
    EngineRun(RunSpec(path="host", file=file, file_size=size, duration=None, total_bytes=1 << 20, keep=True)).execute()
    print(
        f"# {args.seconds:g}s x {args.rounds} rounds, variants in rotated order; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n# {RULE}",
        flush=True,
    )
    rows = []
    try:
        for bs in [parse_size(s) for s in args.sizes.split(",")]:
            for workers in [int(w) for w in args.workers.split(",")]:
                got: dict[str, list[float]] = {v: [] for v in variants}
                info: dict[str, dict] = {}
                for rnd in range(args.rounds):
                    k = rnd % len(variants)
                    for v in variants[k:] + variants[:k]:
                        if v == "reference":
                            got[v].append(reference(file, size, bs, workers, args.seconds))
                        else:
                            mib_s, info[v] = run_path(v, file, size, bs, workers, args.seconds)
                            got[v].append(mib_s)
                row: dict = {
                    "block_size": bs,
                    "workers": workers,
                    "rounds": got,
                    "ratios": {},
                    "medians": {v: statistics.median(r) for v, r in got.items()},
                    "info": info,
                }
                print(
                    f"{format_size(bs):>5} x{workers:<2} "
                    + "  ".join(f"{v} {statistics.median(r):.1f} ({min(r):.0f}-{max(r):.0f})" for v, r in got.items())
                    + " MiB/s",
                    flush=True,
                )
                for name, other, base, goal in RATIOS:
                    if other in got and base in got:
                        v = paired_verdict(got[base], got[other])
                        row["ratios"][name] = v.as_dict() | {"goal": goal}
                        print(
                            f"        {name}: {v.spread()} {v.word}" + (f" (goal {goal})" if goal else ""), flush=True
                        )
                rows.append(row)
        print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(
                    {"rows": rows, "file_size": size, "seconds": args.seconds, "rounds": args.rounds}, fh, indent=2
                )
    finally:
        for p in (file, file + ".xferscope"):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
