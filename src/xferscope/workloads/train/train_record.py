"""The record of a training-input run: typed (msgspec), with a schema version, written and read as JSON.

``TrainResult.from_steps`` turns the accelerators' steps into the figures; ``encode``/``decode`` write and
read the file (a damaged or foreign one is one line naming the field) (``xferscope schema train`` prints its JSON Schema).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from xferscope.workloads.common.au import Step, mean_au, percentile, utilisation
from xferscope.workloads.common.job_ranks import DataJobRecord, JobHostRow, JobRankRow
from xferscope.workloads.common.records import RunEnd, WorkloadResult, decode_as, run_end
from xferscope.workloads.common.records import num as _num
from xferscope.workloads.train.train_data import TrainDataSet
from xferscope.workloads.train.train_spec import TrainSpec

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from xferscope.workloads.train.train_data import TrainData

SCHEMA_VERSION = 1
KIND = "workload-train"


class AcceleratorRun(NamedTuple):
    """One accelerator's run as its process hands it over: its number, GPU, steps and bytes read, and its threads'
    CPU seconds (None where not measured)."""

    accelerator: int
    gpu: int | None
    steps: Sequence[Step]
    bytes_read: int
    cpu_s: float | None = None


class TrainJob(NamedTuple):
    """What a training run's process is given: the spec, and the data set it reads."""

    spec: TrainSpec
    data: TrainData


class TrainEnd(NamedTuple):
    """What a training run's process sends at its end: the seconds it ran, and each accelerator's run."""

    seconds: float
    runs: list[AcceleratorRun]


class AcceleratorFigures(msgspec.Struct, kw_only=True):
    index: int
    gpu: int | None
    steps: int
    counted_steps: int
    au: float | None  # share 0-1; None with fewer than 2 steps
    passed: bool | None
    compute_s: float
    span_s: float
    samples_per_s: float | None
    mb_per_s: float | None  # 10^6 bytes a second, of the samples counted
    io_wait_p50_s: float | None
    io_wait_p99_s: float | None
    first_batch_s: float | None
    bytes_read: int
    cpu_s_per_gib: float | None = None  # its own threads' CPU (readers and step loop) per GiB it read


class RankFigures(JobRankRow, kw_only=True):
    """One rank of an MPI job, as its own run measured it (``gpus``: its accelerators')."""

    first_accelerator: int  # its accelerators' numbers in the job start here
    accelerators: int
    au: float | None
    samples_per_s: float | None
    mb_per_s: float | None
    bytes_read: int
    seconds: float


class HostFigures(JobHostRow, kw_only=True):
    """One host of an MPI job: its ranks' accelerators taken together."""

    accelerators: int
    au: float | None  # the mean over its accelerators
    passed: bool | None
    samples_per_s: float | None
    mb_per_s: float | None
    io_wait_p99_s: float | None


class ClusterFigures(DataJobRecord, kw_only=True):
    """An MPI job's ranks and hosts (``workload train --mpi``; the slowest: the lowest AU); the run's own figures
    are every rank's together."""

    per_rank: list[RankFigures]
    hosts: list[HostFigures]
    clients_memory_bytes: int  # every host's RAM, summed (MLPerf's rule: the set at least 5 times that)
    data_to_memory: float | None


class TrainResult(WorkloadResult, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    kind: str = KIND
    spec: TrainSpec
    data: TrainDataSet
    accelerators: list[AcceleratorFigures]
    au: float | None
    au_threshold: float
    passed: bool | None
    samples_per_s: float | None
    mb_per_s: float | None
    io_wait_p50_s: float | None
    io_wait_p99_s: float | None
    first_batch_s: float | None
    seconds: float
    cluster: ClusterFigures | None = None  # under MPI: every rank's and host's figures

    @classmethod
    def from_steps(
        cls,
        spec: TrainSpec,
        data: TrainDataSet,
        runs: Sequence[AcceleratorRun | tuple],
        **end: Unpack[RunEnd],
    ) -> TrainResult:
        """``runs``: each accelerator's run (an ``AcceleratorRun``, or a tuple of its fields)."""
        figures = []
        waits: list[float] = []
        samples = nbytes = 0
        span = 0.0
        accelerator_runs = [AcceleratorRun(*r) for r in runs]
        for run in accelerator_runs:
            u = utilisation(run.steps)
            waits += [s.wait_s for s in run.steps[1:]]
            samples += u.samples
            nbytes += u.bytes
            span = max(span, u.span_s)
            figures.append(_accelerator(spec, run.accelerator, run.gpu, u, run.bytes_read, run.cpu_s))
        au = mean_au([f.au if f.au is not None else math.nan for f in figures]) if figures else math.nan
        # the accelerators' rates add up; each over its own span (they run side by side)
        rate = sum(f.samples_per_s or 0.0 for f in figures) if figures and span > 0 else math.nan
        mbs = sum(f.mb_per_s or 0.0 for f in figures) if figures and span > 0 else math.nan
        firsts = [f.first_batch_s for f in figures if f.first_batch_s is not None]
        return cls(
            spec=spec,
            data=data,
            accelerators=figures,
            au=_num(au),
            au_threshold=spec.au_threshold,
            passed=None if math.isnan(au) else au >= spec.au_threshold,
            samples_per_s=_num(rate),
            mb_per_s=_num(mbs),
            io_wait_p50_s=_num(percentile(waits, 50)),
            io_wait_p99_s=_num(percentile(waits, 99)),
            first_batch_s=max(firsts) if firsts else None,
            seconds=end["seconds"],
            **run_end(sum(r.bytes_read for r in accelerator_runs), end),
        )


def _accelerator(
    spec: TrainSpec, index: int, gpu: int | None, u: Any, bytes_read: int, cpu_seconds: float | None
) -> AcceleratorFigures:
    """One accelerator's figures from its steps' utilisation ``u``, with its threads' CPU per GiB read."""
    gib = bytes_read / (1 << 30)
    return AcceleratorFigures(
        index=index,
        gpu=gpu,
        steps=u.steps,
        counted_steps=u.counted_steps,
        au=_num(u.au),
        passed=None if math.isnan(u.au) else u.au >= spec.au_threshold,
        compute_s=u.compute_s,
        span_s=u.span_s,
        samples_per_s=_num(u.samples_per_s),
        mb_per_s=_num(u.bytes_per_s / 1e6),
        io_wait_p50_s=_num(u.io_wait_p50_s),
        io_wait_p99_s=_num(u.io_wait_p99_s),
        first_batch_s=_num(u.first_batch_s),
        bytes_read=bytes_read,
        cpu_s_per_gib=cpu_seconds / gib if cpu_seconds is not None and gib > 0 else None,
    )


class FindMaxPoint(msgspec.Struct, kw_only=True):
    accelerators: int
    aus: list[float | None]
    au: float | None  # the mean of its runs
    passed: bool


class FindMaxResult(msgspec.Struct, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    kind: str = KIND + "-find-max"
    best: int  # the most accelerators at or above the threshold (0: not even one)
    upper: int  # the most the search would try
    au_threshold: float
    runs: int
    points: list[FindMaxPoint]
    results: list[TrainResult]  # every run, in the order measured
    status: str = "ok"

    @property
    def spec(self) -> TrainSpec:
        return self.results[0].spec


def decode(text: bytes | str, path: str = "<result>") -> TrainResult:
    """A result file read back; a damaged or foreign one raises FormatError naming the field."""
    return decode_as(TrainResult, text, path, "a training result")
