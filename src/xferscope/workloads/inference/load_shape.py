"""``workload load``'s request shape chosen by measurement where the user gave none (``--split auto``,
``--threads auto``, the defaults).

How fast a load goes depends on the size of its requests and how many are in flight, and the best shape is the
storage's, not xferscope's: on a virtual disk that reads 2.2-2.9 GiB/s at 1 to 8 requests in flight and
1.2-1.6 GiB/s at 32 and more, 16 MiB pieces from 8 threads loaded a model 1.04 times faster than safetensors and
4 MiB pieces from 4 threads 1.41 times. So before the load, a probe reads the load's own shards by its path at
each shape of a small grid (what the user left open of 1, 4 and 16 MiB pieces x 2, 4, 8 and 16 threads), for
``TRIAL_SECONDS`` each, then the ``FINALISTS`` fastest again, twice each in rotated order for ``FINAL_SECONDS``
(one pass over a disk whose speed moves 10% from second to second is a lottery between shapes within 10% of each
other), each trial from its own place in the model (so that no shape reads what another just read), in the
engine's process; O_DIRECT where the load is, else the shards' pages evicted after each. The finalist with the
best median then runs the load, and the result says which was chosen from which figures.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable

import msgspec

from xferscope.units import format_size
from xferscope.workloads.inference.load_data import LoadPieces, Shards
from xferscope.workloads.inference.load_spec import DEFAULT_SPLIT, DEFAULT_THREADS, LoadSpec
from xferscope.workloads.inference.transfer import TransferEnd
from xferscope.workloads.inference.transfer_process import ShapeTrial, TransferJob

SPLITS = (1 << 20, 4 << 20, 16 << 20)
#: 16: fastsafetensors' own thread count, at which bounce-async outran it on the H200's virtual disk
THREADS = (2, 4, 8, 16)
TRIAL_SECONDS, FINALISTS, FINAL_SECONDS = 0.4, 3, 0.6
#: below this a load takes about a second whatever its shape, less than the probe would: the defaults then
MIN_PROBE_BYTES = 1 << 30


class ShapeFigure(msgspec.Struct, kw_only=True):
    split: int
    threads: int
    gb_per_s: float | None
    round: int = 1  # 1: every shape; 2: the finalists again


class LoadShape(msgspec.Struct, kw_only=True):
    """The shape a load ran with, and how it was chosen: "given" (both asked for), "probe" or "defaults" (the
    probe could not run: ``why``)."""

    split: int
    threads: int
    chosen_by: str
    why: str = ""
    trials: list[ShapeFigure] = msgspec.field(default_factory=list)

    def line(self) -> str:
        shape = f"pieces of at most {format_size(self.split)}, {self.threads} threads"
        if self.chosen_by == "given":
            return shape
        if self.chosen_by == "defaults":
            return f"{shape} (the defaults: {self.why})"
        first = [t for t in self.trials if t.round == 1]
        figures = ", ".join(
            f"{format_size(t.split)} x{t.threads} {t.gb_per_s:.2f}" for t in first if t.gb_per_s is not None
        )
        finals = final_rates(self.trials)
        again = "; again: " + ", ".join(
            f"{format_size(s)} x{n} {' '.join(f'{v:.2f}' for v in vs)}" for (s, n), vs in finals.items()
        )
        return f"{shape}: the fastest of {len(first)} shapes probed (GB/s: {figures}{again if finals else ''})"


def final_rates(trials: list[ShapeFigure]) -> dict[tuple[int, int], list[float]]:
    """The finalists' figures of the probe's second round, by (split, threads)."""
    out: dict[tuple[int, int], list[float]] = {}
    for t in trials:
        if t.round == 2 and t.gb_per_s is not None:
            out.setdefault((t.split, t.threads), []).append(t.gb_per_s)
    return out


def open_dimensions(spec: LoadSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The splits and thread counts to probe: the grid's where the user left them open, else what was given."""
    return (SPLITS if spec.split is None else (spec.split,)), (THREADS if spec.threads is None else (spec.threads,))


def resolved(spec: LoadSpec, shape: LoadShape) -> LoadSpec:
    return dataclasses.replace(spec, split=shape.split, threads=shape.threads)


def default_shape(spec: LoadSpec) -> tuple[int, int]:
    """(split, threads): as given, the defaults where the spec left them open."""
    return (
        DEFAULT_SPLIT if spec.split is None else spec.split,
        DEFAULT_THREADS if spec.threads is None else spec.threads,
    )


def with_defaults(spec: LoadSpec) -> LoadSpec:
    """``spec`` with the defaults where it left the shape open."""
    split, threads = default_shape(spec)
    return dataclasses.replace(spec, split=split, threads=threads)


def widest(spec: LoadSpec) -> LoadSpec:
    """``spec`` with the most threads and the largest pieces it may run with (what memory is checked for)."""
    splits, threads = open_dimensions(spec)
    return dataclasses.replace(spec, split=max(splits), threads=max(threads))


def probe_job(
    spec: LoadSpec, shards: Shards, direct: bool, base: TransferJob, seconds: float, final_seconds: float
) -> TransferJob:
    """One transfer job in the engine's process that runs every shape of the grid in turn (``base``: the load's
    own job, with the most threads of the grid)."""
    splits, threads = open_dimensions(spec)
    pieces = {split: LoadPieces(dataclasses.replace(spec, split=split), shards, direct) for split in splits}
    grid = [(split, n) for split in splits for n in threads]
    trials = [ShapeTrial(split, n, pieces[split].jobs, i / len(grid)) for i, (split, n) in enumerate(grid)]
    buffers = [max(col) for col in zip(*(p.buffer_bytes for p in pieces.values()))]
    return dataclasses.replace(
        base,
        buffers=list(zip([g for g, _ in base.buffers], buffers)),
        trials=trials,
        duration=seconds,
        finalists=min(FINALISTS, len(grid)) if len(grid) > 1 else 0,
        final_duration=final_seconds,
    )


def choose(
    spec: LoadSpec,
    shards: Shards,
    direct: bool,
    base: TransferJob,
    run: Callable[[TransferJob], TransferEnd | None],
    seconds: float = TRIAL_SECONDS,
    min_bytes: int = MIN_PROBE_BYTES,
    final_seconds: float = FINAL_SECONDS,
) -> LoadShape:
    """The shape the load runs with: as given, the fastest of the probe's, or the defaults (with why). ``base`` is
    the load's job with the most threads of the grid; ``run`` runs a job and gives its payload."""
    split, threads = default_shape(spec)
    if spec.split is not None and spec.threads is not None:
        return LoadShape(split=split, threads=threads, chosen_by="given")
    total = sum(f.size for f in shards.files)
    if total < min_bytes:
        why = f"the shards hold {format_size(total)}; under {format_size(min_bytes)} a load takes less than a probe"
        return LoadShape(split=split, threads=threads, chosen_by="defaults", why=why)
    payload = run(probe_job(spec, shards, direct, base, seconds, final_seconds))
    figures = [
        ShapeFigure(split=s, threads=n, gb_per_s=nbytes / secs / 1e9 if secs > 0 and nbytes else None, round=rnd)
        for s, n, nbytes, secs, rnd in (payload.trials if payload is not None else [])
    ]
    measured = [f for f in figures if f.gb_per_s]
    if not measured:
        why = "the probe measured nothing (stopped, or it failed)"
        return LoadShape(split=split, threads=threads, chosen_by="defaults", why=why, trials=figures)
    finals = final_rates(figures)
    if finals:
        split, threads = max(finals, key=lambda k: statistics.median(finals[k]))
    else:
        best = max(measured, key=lambda f: f.gb_per_s or 0.0)
        split, threads = best.split, best.threads
    return LoadShape(split=split, threads=threads, chosen_by="probe", trials=figures)
