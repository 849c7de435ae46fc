"""The record's rows of a checkpoint run across the ranks of an MPI job (``workload checkpoint --mpi``): each rank
of the job and each host, as ``checkpoint_cluster`` makes them."""

from __future__ import annotations

import msgspec


class CheckpointRankFigures(msgspec.Struct, kw_only=True):
    """One rank of the MPI job: the checkpoint's ranks it held, as its own run measured them."""

    rank: int
    host: str
    ranks: list[int]  # the checkpoint's ranks it wrote
    gpus: list[int]  # where their states lived (none: host memory)
    status: str
    error: str | None = None
    bytes: int  # a checkpoint
    save_seconds: float | None  # the median over the checkpoints of its slowest rank's time until durable
    save_gb_per_s: float | None
    restore_seconds: float | None
    restore_gb_per_s: float | None


class CheckpointHostFigures(msgspec.Struct, kw_only=True):
    """One host of the job: its ranks' checkpoint ranks together (the medians over the checkpoints)."""

    host: str
    ranks: list[int]  # the job's ranks on it
    bytes: int  # a checkpoint
    save_seconds: float | None
    save_gb_per_s: float | None
    restore_seconds: float | None
    restore_gb_per_s: float | None
    memory_bytes: int | None  # the host's RAM
    cpus: int
    written_to_memory: float | None  # every checkpoint's bytes it wrote over its RAM (DLIO warns under 3)


class CheckpointCluster(msgspec.Struct, kw_only=True):
    """An MPI job's ranks and hosts; the run's own figures are every checkpoint rank's together."""

    ranks: int
    launcher: str
    mpi: str
    per_rank: list[CheckpointRankFigures]
    hosts: list[CheckpointHostFigures]
    slowest_host: str | None  # the host of the longest save
