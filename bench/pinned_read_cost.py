"""What pinned memory costs a read, against what bounce-async costs: at 64K x8, 1M x4 and 16M x4, O_DIRECT, the
engines run in this process in rotated rounds over one file:

* host: reads into the workers' own 2 MiB huge pages (the host path);
* host@registered: the same reads, no copy, into huge pages registered with CUDA (the bounce paths' memory);
* host@allocated: into cuMemHostAlloc's memory;
* bounce-async, twice (an A/A pair): reads into registered huge pages and copies to the GPU.

Prints each variant's median GB/s with its range and, per point, the paired ratios (the median of the per-round
ratios): bounce-async / host@registered (issue 54's goal: at least 0.98, the path within 2% of what the memory
itself costs), host@registered / host (what pinning costs a read here) and the A/A.

    python bench/pinned_read_cost.py --dir /var/tmp/xs [--rounds 5] [--seconds 2] [--size 4G]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading

POINTS = (("64K", 8), ("1M", 4), ("16M", 4))
VARIANTS = ("host", "host@registered", "host@allocated", "bounce-async#1", "bounce-async#2")


def run_once(variant: str, spec, target) -> float:
    """One run of ``variant`` over ``target``: its GB/s."""
    from xferscope.engines.host import HostEngine
    from xferscope.engines.registry import engine_class

    path, _, memory = variant.partition("@")
    path = path.split("#")[0]
    engine = engine_class(path)(_with_path(spec, path), target)
    if memory:
        assert isinstance(engine, HostEngine)
        engine.pinned_memory = memory
    try:
        snap = engine.run_to_end()
    finally:
        engine.close()
    if snap.error:
        raise RuntimeError(f"{variant}: {snap.error[0]}")
    span = max(w.done_ns or snap.t_ns for w in snap.workers)
    return snap.bytes / (span / 1e9) / 1e9


def _with_path(spec, path: str):
    import dataclasses

    return dataclasses.replace(spec, path=path).validate()


def paired(a: list[float], b: list[float]) -> str:
    r = [x / y for x, y in zip(a, b)]
    return f"{statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})"


def main() -> int:
    from xferscope import target as targets
    from xferscope.spec import RunSpec
    from xferscope.units import parse_size

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--size", default="4G")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="a subset (host alone runs without a GPU)")
    a = ap.parse_args()
    variants = tuple(a.variants.split(","))
    for bs, workers in POINTS:
        spec = RunSpec(
            path="host",
            file=os.path.join(a.dir, "xferscope-pinned-cost.dat"),
            file_size=parse_size(a.size),
            block_size=parse_size(bs),
            workers=workers,
            duration=a.seconds,
            keep=False,
        ).validate()
        target = targets.plan(spec)
        gb: dict[str, list[float]] = {v: [] for v in variants}
        try:
            targets.materialize(target, threading.Event(), None)
            for r in range(a.rounds):
                for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
                    gb[v].append(run_once(v, spec, target))
        finally:
            targets.cleanup(target, keep=False)
        print(f"# {bs} x{workers}, {a.rounds} rotated rounds of {a.seconds:g} s, O_DIRECT")
        for v, xs in gb.items():
            print(f"{v:>18}: {statistics.median(xs):.3f} GB/s ({min(xs):.3f}-{max(xs):.3f})")
        if {"bounce-async#1", "host@registered"} <= set(gb):
            ratio = statistics.median(x / y for x, y in zip(gb["bounce-async#1"], gb["host@registered"]))
            word = "met" if ratio >= 0.98 else "not met"
            print(
                f"{word:>8} bounce-async / host@registered >= 0.98: {paired(gb['bounce-async#1'], gb['host@registered'])}"
            )
        for a_, b_ in (("host@registered", "host"), ("host@allocated", "host"), ("bounce-async#2", "bounce-async#1")):
            if {a_, b_} <= set(gb):
                print(f"         {a_} / {b_}: {paired(gb[a_], gb[b_])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
