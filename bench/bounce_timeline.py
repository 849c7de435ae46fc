"""Where a worker's time goes: the native core's timeline of `host`, `bounce` and `bounce-async`, side by side.

Each variant reads the same file with one worker (or --workers N) while the native core records every
interval of every worker on one clock (time.monotonic_ns): reads, copies issued (for `bounce`: issued and
waited for), waits for a copy to land. Per variant the medians over rounds (order rotated per round) of:

  MiB/s          bytes over the span from the first read's start to the last read's end
  read ms        median time of one read (pread; host at --iodepth > 1: io_uring, submission to completion)
  gap us         median time between the end of one read and the start of the next: what the path puts
                 on the read's critical path (host: the loop; bounce: copy + wait; bounce-async: the next
                 buffer, and once a group the group's copy call)
  copy call us   median time of the copy call itself (cuMemcpyHtoDAsync and cuEventRecord)
  waits          reads that had to wait for a copy to land first, and the time spent waiting
  CPU-s/GiB      the worker threads' own CPU time (user + system) per GiB read
  buffers        how many buffers the reads went into
  read ms by buffer   whether reads into some buffers are slower than into others

    python bench/bounce_timeline.py --dir /data [--size 2G] [--bs 16M] [--workers 1] [--iodepth 1] \
        [--seconds 3] [--rounds 5] [--variants host,bounce,bounce-async] [--source cache]

A variant is a path, with `+4k` for --4k-pages (bounce: CUDA's pinned allocation), `+huge` for --huge-pages,
and a buffer design after `@` (see `configure`): bounce-async `@one`, `@turns`, `@ring`, `@b4x2`; host `@n16`. `--standins` runs on host stand-ins
for CUDA (xferscope._gpusim, the tests' seam) to check the script without a GPU: it measures no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import threading

from xferscope import _iocore
from xferscope import target as targets
from xferscope.engines.registry import engine_class
from xferscope.spec import RunSpec
from xferscope.units import format_size, parse_size


def use_standins() -> None:
    """Put xferscope._gpusim's host stand-ins behind the bounce engines (as tests/gpu_standins.py does)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from gpu_standins import SimResources

    from xferscope import _gpusim
    from xferscope.engines import gpu_native, gpu_setup

    gpu_setup.GpuResources = SimResources
    gpu_setup.unavailable_reason = lambda: None
    gpu_native.GpuNativeEngine.functions = lambda self: _gpusim.functions()
    # copies that land by themselves, 10 us after issue plus 18 us a MiB (about 54 GB/s, as a PCIe Gen5 link)
    _gpusim.configure(copy_ns=10_000, copy_ns_per_mib=18_000, landing=_gpusim.LAND_EAGER)


def spec_of(variant: str, file: str, size: int, bs: int, workers: int, iodepth: int, seconds: float, source: str):
    name, _, _how = variant.partition("@")
    path, _, pages = name.partition("+")
    return RunSpec(
        path=path,
        file=file,
        file_size=size,
        block_size=bs,
        workers=workers,
        iodepth=iodepth,
        duration=seconds,
        keep=True,
        huge_pages={"huge": True, "4k": False}.get(pages),
        source=source,
    ).validate()


def run_variant(variant: str, spec: RunSpec) -> dict:
    from xferscope.engines import page_cache

    target = targets.plan(spec)
    targets.materialize(target, threading.Event(), None)
    if spec.source == "cache":
        page_cache.hold([f.path for f in target.files])
    engine = engine_class(spec.path)(spec, target)
    engine.timeline_records = 1 << 20
    configure(engine, variant.partition("@")[2], spec.block_size)
    try:
        snap = engine.run_to_end()
        timeline = engine.timeline()
        engine.after_run()
        labels = list(engine.labels)
    finally:
        engine.close()
    cpu_s = sum(w.cpu_usr_us + w.cpu_sys_us for w in snap.workers) / 1e6
    return summarise(timeline, spec.block_size) | {
        "labels": labels,
        "cpu_s_per_gib": cpu_s / (snap.bytes / (1 << 30)) if snap.bytes else 0.0,
    }


def configure(engine, how: str, bs: int) -> None:
    """A variant's buffer design: bounce-async ``@one`` (one buffer, each copy waited for), ``@turns`` (two groups
    taking turns, from the first read), ``@ring`` (the earlier design: three groups of up to 4 MiB taking turns),
    ``@bBxG`` (G groups of B blocks taking turns); host ``@nN`` (N buffers read into in turn)."""
    from xferscope import _iocore

    if not how:
        return
    if how.startswith("n") and how[1:].isdigit():
        engine.native_options = lambda: {"host_buffers": int(how[1:])}
        return
    engine.turns = _iocore.TURNS_NEVER if how == "one" else _iocore.TURNS_ALWAYS
    if how == "ring":
        engine.blocks_per_copy, engine.groups = max(1, min(16, (4 << 20) // bs)), 3
    elif how.startswith("b") and "x" in how:
        b, g = how[1:].split("x")
        engine.blocks_per_copy, engine.groups = int(b), int(g)


def summarise(timeline: list[dict], bs: int) -> dict:
    """The figures of one run from its workers' timelines."""
    reads, gaps, waits, wait_ns, by_buf, spans, calls = [], [], 0, 0, {}, [], []
    nbytes = 0
    for worker in timeline:
        recs = sorted(worker["records"], key=lambda r: r[3])
        rd = [r for r in recs if r[0] == _iocore.TL_READ]
        if not rd:
            continue
        spans.append((rd[0][3], rd[-1][4]))
        nbytes += len(rd) * bs
        for r in rd:
            reads.append(r[4] - r[3])
            by_buf.setdefault(r[2], []).append(r[4] - r[3])
        gaps += [b[3] - a[4] for a, b in itertools.pairwise(rd)]
        calls += [r[4] - r[3] for r in recs if r[0] == _iocore.TL_COPY]
        last = rd[-1][4]
        for w in (r for r in recs if r[0] == _iocore.TL_WAIT and r[3] < last):
            waits += 1
            wait_ns += w[4] - w[3]
    span = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0
    return {
        "mib_s": nbytes / (1 << 20) / (span / 1e9) if span else 0.0,
        "read_ms": statistics.median(reads) / 1e6 if reads else 0.0,
        "gap_us": statistics.median(gaps) / 1e3 if gaps else 0.0,
        "copy_call_us": statistics.median(calls) / 1e3 if calls else 0.0,
        "waits": waits,
        "wait_ms": wait_ns / 1e6,
        "reads": len(reads),
        "buffers": len(by_buf),
        "read_ms_by_buffer": {b: statistics.median(v) / 1e6 for b, v in sorted(by_buf.items())},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=".")
    ap.add_argument("--size", default="2G")
    ap.add_argument("--bs", default="16M")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--iodepth", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default="host,bounce,bounce-async")
    ap.add_argument("--source", default="storage", help="storage, or cache: the file held in the page cache")
    ap.add_argument("--standins", action="store_true", help="host stand-ins for CUDA: checks the script only")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.standins:
        use_standins()
    size, bs = parse_size(args.size), parse_size(args.bs)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    file = os.path.join(os.path.abspath(args.dir), "xferscope-timeline-bench.dat")
    got: dict[str, list[dict]] = {v: [] for v in variants}
    print(
        f"# {format_size(bs)} x{args.workers} qd{args.iodepth}, {args.seconds:g}s x {args.rounds} rounds, "
        f"source {args.source}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        + (" [STAND-INS, no GPU]" if args.standins else ""),
        flush=True,
    )
    try:
        for rnd in range(args.rounds):
            k = rnd % len(variants)
            for v in variants[k:] + variants[:k]:
                spec = spec_of(v, file, size, bs, args.workers, args.iodepth, args.seconds, args.source)
                got[v].append(run_variant(v, spec))
        for v, runs in got.items():
            med = {
                key: statistics.median(r[key] for r in runs)
                for key in (
                    "mib_s",
                    "read_ms",
                    "gap_us",
                    "copy_call_us",
                    "waits",
                    "wait_ms",
                    "buffers",
                    "cpu_s_per_gib",
                )
            }
            bufs = {}
            for r in runs:
                for b, ms in r["read_ms_by_buffer"].items():
                    bufs.setdefault(b, []).append(ms)
            print(
                f"{v:<22} {med['mib_s']:9.1f} MiB/s ({min(r['mib_s'] for r in runs):.0f}-"
                f"{max(r['mib_s'] for r in runs):.0f})  read {med['read_ms']:.3f} ms  gap {med['gap_us']:.1f} us  "
                f"copy call {med['copy_call_us']:.1f} us  waits {med['waits']:.0f} ({med['wait_ms']:.1f} ms)  "
                f"CPU-s/GiB {med['cpu_s_per_gib']:.3f}  buffers {med['buffers']:.0f}  read ms by "
                f"buffer " + " ".join(f"{b}:{statistics.median(ms):.3f}" for b, ms in sorted(bufs.items())),
                flush=True,
            )
            print(f"{'':<22} {'; '.join(runs[-1]['labels'])}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"args": vars(args), "runs": got}, fh, indent=2, default=str)
    finally:
        for p in (file, file + ".xferscope"):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
