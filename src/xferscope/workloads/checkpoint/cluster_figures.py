"""The record's rows of a checkpoint run across the ranks of an MPI job (``workload checkpoint --mpi``): each rank
of the job and each host, as ``checkpoint_cluster`` makes them."""

from __future__ import annotations

from xferscope.workloads.common.job_ranks import JobHostRow, JobRankRow, JobRecord


class CheckpointRankFigures(JobRankRow, kw_only=True):
    """One rank of the MPI job: the checkpoint's ranks it held, as its own run measured them (``gpus``: where
    their states lived)."""

    ranks: list[int]  # the checkpoint's ranks it wrote
    bytes: int  # a checkpoint
    save_seconds: float | None  # the median over the checkpoints of its slowest rank's time until durable
    save_gb_per_s: float | None
    restore_seconds: float | None
    restore_gb_per_s: float | None


class CheckpointHostFigures(JobHostRow, kw_only=True):
    """One host of the job: its ranks' checkpoint ranks together (the medians over the checkpoints)."""

    bytes: int  # a checkpoint
    save_seconds: float | None
    save_gb_per_s: float | None
    restore_seconds: float | None
    restore_gb_per_s: float | None
    written_to_memory: float | None  # every checkpoint's bytes it wrote over its RAM (DLIO warns under 3)


class CheckpointCluster(JobRecord, kw_only=True):
    """An MPI job's ranks and hosts (the slowest: the longest save); the run's own figures are every checkpoint
    rank's together."""

    per_rank: list[CheckpointRankFigures]
    hosts: list[CheckpointHostFigures]
