"""A checkpoint run: the plan's files written and read back in the engine's own process (``checkpoint_process``),
in a directory of xferscope's own (removed at the end unless kept), and its figures as MLPerf Storage and DLIO
give them.

A checkpoint's save lasts from the ranks' common start to the last rank's last fsync (with ``--async``, from the
copy that blocks the GPUs): its duration is the slowest rank's (MLPerf's rule), and its GB/s all the ranks' bytes
over that duration. DLIO's own figure is all the bytes over rank 0's time. A restore is timed the same way.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from xferscope.workloads.checkpoint.checkpoint_process import (
    CheckpointEnd,
    CheckpointJob,
    CheckpointTick,
    RankRead,
    RankWrite,
)
from xferscope.workloads.checkpoint.cluster_figures import CheckpointCluster
from xferscope.workloads.checkpoint.layout import Rank
from xferscope.workloads.checkpoint.plan import CheckpointPlan, CheckpointPlanRecord, plan_record
from xferscope.workloads.common.generated import GeneratedDir
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, check_installed
from xferscope.workloads.common.process_run import WorkloadChild, WorkloadOutcome
from xferscope.workloads.common.rank_processes import RankProcesses
from xferscope.workloads.common.records import LibraryFacts, WorkloadResult
from xferscope.workloads.common.run_options import check_paths
from xferscope.workloads.common.side_by_side import Ranked, in_rounds

GIB = 1 << 30


@dataclass(frozen=True)
class CheckpointRunOptions:
    fsync: bool = True
    verify: bool = False
    rank_shift: int = 0
    seed: int = 0
    keep: bool = False
    every: float = 0.0  # seconds of training between two checkpoints
    interval: float = 0.5  # seconds between live ticks (--interval)


class Phase(msgspec.Struct, kw_only=True):
    """One checkpoint's save or restore: its duration (the slowest rank's), GB/s over it, and DLIO's GB/s."""

    checkpoint: int
    bytes: int
    seconds: float
    gb_per_s: float
    dlio_gb_per_s: float
    fsync_seconds: float | None = None  # the slowest rank's fsyncs (saves)
    blocked_seconds: float | None = None  # --async: the slowest rank's copy, the time the GPUs are blocked (saves)


class CheckpointRankTimes(msgspec.Struct, kw_only=True):
    """One rank over the run: bytes a checkpoint, mean save and fsync seconds, mean restore seconds."""

    rank: int
    bytes: int
    write_seconds: float
    fsync_seconds: float
    restore_seconds: float | None
    restored_from: int | None
    blocked_seconds: float | None = None  # --async: the copy of this rank's state
    gpu: int | None = None  # where its state lives (None: host memory)
    durable_seconds: float | None = None  # mean, from the save's start to its last fsync (every rank's copies first)


class CheckpointRecord(WorkloadResult, kw_only=True):
    """``workload checkpoint --json``: what every workload record carries (the spec is the plan, the bytes read
    those restored, the CPU the path's: ``--verify``'s checks left out), then what was measured."""

    kind: str = "checkpoint"
    spec: CheckpointPlanRecord
    bytes_written: int
    saves: list[Phase]
    restores: list[Phase]
    ranks: list[CheckpointRankTimes]
    resident_share_at_restore: float | None
    verified: bool
    fsync: bool
    rank_shift: int
    asynchronous: bool = False  # --async: the GPUs blocked only for the copy of the state
    every_seconds: float = 0.0
    state_on_gpu: bool = False
    cluster: CheckpointCluster | None = None  # --mpi: the job's ranks and hosts (the figures above: all of them)
    library: LibraryFacts | None = None  # a library's path: its version, call, settings and set-up's seconds

    @property
    def save_seconds(self) -> float | None:
        """The median over the checkpoints of a save's time until durable (the slowest rank's)."""
        return statistics.median(p.seconds for p in self.saves) if self.saves else None

    @property
    def restore_seconds(self) -> float | None:
        return statistics.median(p.seconds for p in self.restores) if self.restores else None

    def host_rows(self) -> list[tuple[str, float | None, float | None, float | None]]:
        """An MPI job's hosts, to rank beside the job: each one's save and restore seconds, save GB/s."""
        hosts = self.cluster.hosts if self.cluster is not None else []
        return [(h.host, h.save_seconds, h.restore_seconds, h.save_gb_per_s) for h in hosts]

    @property
    def gb_per_s(self) -> float | None:
        """The median over the checkpoints of a save's GB/s."""
        return statistics.median(p.gb_per_s for p in self.saves) if self.saves else None


def _phase(
    k: int,
    times: Sequence[tuple[int, float]],
    first: float,
    fsync: float | None = None,
    blocked: float | None = None,
) -> Phase:
    """``times``: each rank's (bytes, seconds); ``first``: rank 0's seconds."""
    total = sum(b for b, _ in times)
    slowest = max((s for _, s in times), default=0.0)
    return Phase(
        checkpoint=k,
        bytes=total,
        seconds=slowest,
        gb_per_s=total / slowest / 1e9 if slowest else 0.0,
        dlio_gb_per_s=total / first / 1e9 if first else 0.0,
        fsync_seconds=fsync,
        blocked_seconds=blocked,
    )


def saves_of(end: CheckpointEnd, staged: bool = False) -> list[Phase]:
    out = []
    for k, writes in enumerate(end.writes, 1):
        times = [(w.bytes, w.durable_s) for w in writes]
        meta = end.metadata_s[k - 1] if len(end.metadata_s) >= k else 0.0
        times[0] = (times[0][0], times[0][1] + meta)  # the coordinator commits DCP's index
        blocked = max(w.blocked_s for w in writes) if staged else None
        out.append(_phase(k, times, times[0][1], max(w.fsync_s for w in writes), blocked))
    return out


def restores_of(end: CheckpointEnd) -> list[Phase]:
    return [
        _phase(k, [(r.bytes, r.seconds) for r in reads], reads[0].seconds) for k, reads in enumerate(end.restores, 1)
    ]


def rank_figures(end: CheckpointEnd, job: CheckpointJob) -> list[CheckpointRankTimes]:
    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    out = []
    for i, first in enumerate(end.writes[0] if end.writes else []):
        writes: list[RankWrite] = [w[i] for w in end.writes if len(w) > i]
        reads: list[RankRead] = [r[i] for r in end.restores if len(r) > i]
        out.append(
            CheckpointRankTimes(
                rank=first.rank,
                bytes=first.bytes,
                write_seconds=mean([w.write_s for w in writes]),
                fsync_seconds=mean([w.fsync_s for w in writes]),
                restore_seconds=mean([r.seconds for r in reads]) if reads else None,
                restored_from=reads[0].wrote if reads else None,
                blocked_seconds=mean([w.blocked_s for w in writes]) if job.staged else None,
                durable_seconds=mean([w.durable_s for w in writes]),
                gpu=job.gpu_of(i) if job.on_gpu else None,
            )
        )
    return out


class CheckpointSession:
    """One checkpoint run that can be stopped from another thread (the console's x): ``run`` writes the plan's
    checkpoints and reads them back in the engine's own process; ``stop`` ends it early, what was measured kept."""

    def __init__(self, plan: CheckpointPlan, options: CheckpointRunOptions):
        self.plan, self.options = plan, options
        self._child: WorkloadChild | RankProcesses | None = None
        self.stopped = False
        self.where: GeneratedDir | None = None  # the run's directory (made by ``open_dir``, or by the run)
        self.end: CheckpointEnd | None = None  # what the run's process measured, as it sent it

    def open_dir(self) -> str:
        """The run's directory, made now (under MPI each rank's is known to the others before the run)."""
        if self.where is None:
            self.where = GeneratedDir(self.plan.directory, "checkpoint", direct=False)
        return self.where.path

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """What this machine cannot hold, or a path it cannot run, raised before anything is written (the states
        are made in the run's own process)."""
        if not self.plan.placed:
            self.plan = self.plan.spec.plan()
        if self.plan.refusals:
            raise self.plan.refusals[0]
        if self.plan.spec.by_library:
            check_installed(self.plan.spec.path, CHECKPOINT_LIBRARIES)
        else:
            check_paths([self.plan.spec.path])

    def stop(self) -> None:
        self.stopped = True
        if self._child is not None:
            self._child.stop()

    def run(
        self,
        on_tick: Callable[[object], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        on_meet: Callable[[str], bool] | None = None,
        sources: tuple[tuple[Rank, str], ...] = (),
        index: bytes | None = None,
        shared: tuple[str, tuple[int, int]] | None = None,
    ) -> CheckpointRecord:
        """The record, also of a run interrupted or failed (what was measured kept). Under MPI: ``on_ready`` and
        ``on_meet`` are where the ranks meet (``WorkloadChild.execute``), ``sources`` what each rank reads back
        and where, ``index`` DCP's index of the world, ``shared`` the directory every rank writes its checkpoints
        in (DCP's layout is one directory a checkpoint) with this rank's place in the library's process group."""
        self.prepare()
        plan, options, s = self.plan, self.options, self.plan.spec
        owned = self.where is None  # a directory made by the caller (open_dir) is the caller's to remove (close)
        self.open_dir()
        where = self.where
        assert where is not None
        try:
            job = CheckpointJob(
                where.path if shared is None else shared[0],
                plan.ranks,
                s.checkpoints,
                s.layout,
                options.fsync,
                options.verify,
                options.rank_shift,
                options.seed,
                s.path,
                s.gpus,
                on_gpu=plan.state_on_gpu,
                staged=s.pinned_copies,
                every=options.every,
                meets=on_meet is not None,
                sources=sources,
                index=index,
                group=(0, 1) if shared is None else shared[1],
                interval=options.interval,
            )
            if s.by_library and on_meet is None:  # the library's ranks: a process each, meeting here
                out = self._run_ranks(job, on_tick)
            else:
                self._child = WorkloadChild(_serve_of(s.path), "workload checkpoint", s.path)
                if self.stopped:  # stopped before its process started: it starts and ends at once
                    self._child.stop()
                out = self._child.execute(job, on_tick, on_ready, on_meet)
        finally:
            if owned:
                self.close()
        self.end = out.payload if isinstance(out.payload, CheckpointEnd) else CheckpointEnd()
        return _record(plan, options, job, out, where.path if options.keep else None)

    def _run_ranks(self, job: CheckpointJob, on_tick: Callable[[object], None] | None) -> WorkloadOutcome:
        """A library's ranks of this host, a process each (``library_checkpoint``), each save and restore begun
        together; each reads back the files of the rank ``rank_shift`` after it; one outcome of them all."""
        from xferscope.workloads.checkpoint.library_checkpoint import serve

        n = len(job.ranks)
        jobs = [
            dataclasses.replace(
                job,
                ranks=[r],
                gpus=(job.gpu_of(i),),
                meets=True,
                sources=((job.ranks[(i + job.rank_shift) % n], job.directory),),
                group=(i, n),
            )
            for i, r in enumerate(job.ranks)
        ]
        group = RankProcesses([WorkloadChild(serve, f"workload checkpoint rank {r.rank}", job.path) for r in job.ranks])
        self._child = group
        if self.stopped:
            group.stop()
        latest: list[CheckpointTick | None] = [None] * n

        def tick(i: int, t: object) -> None:  # every rank's bytes, as one tick
            if on_tick is None or not isinstance(t, CheckpointTick):
                return
            latest[i] = t
            now = [x for x in latest if x is not None]
            per_rank = tuple(x.per_rank[0] if x and x.per_rank else 0 for x in latest)
            on_tick(CheckpointTick(t.phase, min(x.checkpoint for x in now), sum(per_rank), per_rank))

        return joined_outcomes(group.execute(jobs, tick))

    def close(self) -> None:
        """The run's directory removed (unless kept); the run's process freed everything else."""
        if self.where is not None:
            self.where.close(keep=self.options.keep)
            self.where = None


def _serve_of(path: str) -> Callable[[Any], None]:
    from xferscope.workloads.checkpoint import checkpoint_process, library_checkpoint

    return library_checkpoint.serve if path in CHECKPOINT_LIBRARIES else checkpoint_process.serve


def joined_outcomes(outs: list[WorkloadOutcome]) -> WorkloadOutcome:
    """The ranks' processes as one run: failed where one failed (its error), else interrupted where one was; each
    checkpoint's saves and restores every rank's (those every rank finished), their CPU and peak memory summed (the host's)."""
    from xferscope.child_messages import ProcessFigures

    bad = next((o for o in outs if o.status == "failed"), None) or next((o for o in outs if o.status != "ok"), None)
    ends = [o.payload if isinstance(o.payload, CheckpointEnd) else CheckpointEnd() for o in outs]
    end = CheckpointEnd(
        writes=[[e.writes[k][0] for e in ends] for k in range(min(len(e.writes) for e in ends))],
        restores=[[e.restores[k][0] for e in ends] for k in range(min(len(e.restores) for e in ends))],
        verify_cpu_s=sum(e.verify_cpu_s for e in ends),
        facts=next((e.facts for e in ends if e.facts is not None), None),
    )
    shares = [e.resident_share for e in ends if e.resident_share is not None]
    end.resident_share = sum(shares) / len(shares) if shares else None
    cpus = [o.process.cpu_seconds for o in outs]
    peaks = [o.process.peak_rss_bytes for o in outs if o.process.peak_rss_bytes is not None]
    return WorkloadOutcome(
        status=bad.status if bad else "ok",
        error=bad.error if bad else None,
        payload=end,
        process=ProcessFigures(
            sum(c for c in cpus if c is not None) if None not in cpus else None, sum(peaks) if peaks else None
        ),
        labels=outs[0].labels,
        environment=outs[0].environment,
    )


def run_checkpoints(
    plan: CheckpointPlan, options: CheckpointRunOptions, on_tick: Callable[[object], None] | None = None
) -> CheckpointRecord:
    """Write the plan's checkpoints and read them back (SpecError first for what this machine cannot hold, or an
    unknown path); the record, also of a run interrupted or failed (what was measured kept)."""
    return CheckpointSession(plan, options).run(on_tick)


def _record(
    plan: CheckpointPlan, options: CheckpointRunOptions, job: CheckpointJob, out: WorkloadOutcome, kept: str | None
) -> CheckpointRecord:
    end: CheckpointEnd = out.payload if isinstance(out.payload, CheckpointEnd) else CheckpointEnd()
    saves, restores = saves_of(end, job.staged), restores_of(end)
    written, read = sum(p.bytes for p in saves), sum(p.bytes for p in restores)
    cpu = out.process.cpu_seconds
    if cpu is not None:  # the path's cost: checking the bytes is not part of it
        cpu = max(0.0, cpu - end.verify_cpu_s)
    environment = out.environment.copy()
    if kept:
        environment["kept_in"] = kept
    return CheckpointRecord(
        status=out.status,
        error=out.error,
        spec=plan_record(plan),
        bytes_read=read,
        bytes_written=written,
        cpu_seconds=cpu,
        cpu_s_per_gib=cpu / ((written + read) / GIB) if cpu is not None and written + read else None,
        peak_rss_bytes=out.process.peak_rss_bytes,
        saves=saves,
        restores=restores,
        ranks=rank_figures(end, job),
        resident_share_at_restore=end.resident_share,
        verified=options.verify and out.status == "ok" and len(end.restores) == plan.spec.checkpoints,
        fsync=options.fsync,
        rank_shift=options.rank_shift,
        asynchronous=job.staged,
        every_seconds=job.every,
        state_on_gpu=job.on_gpu,
        library=end.facts,
        labels=list(out.labels),
        environment=environment,
    )


class CheckpointComparison(Ranked, kw_only=True):
    """``workload checkpoint --path a,b,...``: the paths in rotated rounds over one checkpoint size, ranked by the
    time until a save is durable (each run's median over its checkpoints), the restore time beside it."""

    kind: str = "workload-checkpoint-compare"
    results: list[CheckpointRecord]


def compare_paths(
    plans: dict[str, CheckpointPlan],
    paths: Sequence[str],
    rounds: int,
    options: CheckpointRunOptions,
    on_tick: Callable[[object], None] | None = None,
) -> CheckpointComparison:
    """Each path's run (``plans``: each path's, of one spec) once a round, the order rotated (a path twice: an
    A/A pair); every plan checked first, so that what one path cannot run is said before anything is written."""
    for plan in plans.values():
        if plan.refusals:
            raise plan.refusals[0]
    check_paths([p for p in plans if p not in CHECKPOINT_LIBRARIES])  # a library's package: checked by its plan
    ranked, results, status = in_rounds(
        plans[paths[0]].spec,
        paths,
        rounds,
        lambda s: run_checkpoints(plans[s.path], options, on_tick),
        lambda: False,  # Ctrl-C ends a run (its record interrupted), and that ends the rounds
        lambda r: r.save_seconds,
        beside=lambda r: r.restore_seconds,
    )
    return CheckpointComparison(rounds=rounds, entries=ranked, results=results, status=status)
