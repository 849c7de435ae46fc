"""The record of a model load: typed (msgspec), with a schema version, written and read as JSON.

The load's time runs from the start to the last piece landed on its GPU; the first byte on the GPU is the first
piece landed; a shard's time from its first read to its last piece landed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from xferscope.workloads.common.job_ranks import DataJobRecord, JobHostRow, JobRankRow
from xferscope.workloads.common.records import LibraryFacts, RunEnd, WorkloadResult, decode_as, run_end
from xferscope.workloads.inference.load_data import LoadShards
from xferscope.workloads.inference.load_shape import LoadShape
from xferscope.workloads.inference.load_spec import LoadSpec
from xferscope.workloads.inference.transfer import JobDone

if TYPE_CHECKING:
    from typing_extensions import Unpack

SCHEMA_VERSION = 1
KIND = "workload-load"


class GpuLoad(msgspec.Struct, kw_only=True):
    gpu: int | None  # None: host memory (no GPU here)
    bytes: int
    seconds: float | None  # to its last piece landed
    gb_per_s: float | None


class ShardLoad(msgspec.Struct, kw_only=True):
    name: str
    bytes: int
    start_s: float | None
    seconds: float | None  # first read to last piece landed


class Verified(msgspec.Struct, kw_only=True):
    pieces: int
    differ: int
    first: str | None = None


class LoadRankFigures(JobRankRow, kw_only=True):
    """One rank of an MPI job's load (``workload load --mpi``), as it measured itself."""

    bytes: int
    load_s: float | None
    first_byte_s: float | None
    gb_per_s: float | None


class LoadHostFigures(JobHostRow, kw_only=True):
    """One host of the job: its ranks' loads together (the time: its slowest rank's)."""

    bytes: int
    load_s: float | None
    gb_per_s: float | None


class LoadCluster(DataJobRecord, kw_only=True):
    """An MPI job's ranks and hosts (the slowest: the longest load); the run's own figures are every rank's
    together."""

    share: str  # copy (each rank its own copy of the model) or tp (each rank its tensor-parallel share)
    per_rank: list[LoadRankFigures]
    hosts: list[LoadHostFigures]


class LoadResult(WorkloadResult, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    kind: str = KIND
    spec: LoadSpec
    data: LoadShards
    cache_state: str  # cold or warm, as measured before the run
    resident_before: float | None  # share of the shards' bytes in the page cache as the run began
    load_s: float | None
    first_byte_s: float | None
    gb_per_s: float | None
    per_gpu: list[GpuLoad]
    shards: list[ShardLoad]
    slowest_shard: str | None
    pieces: int
    pieces_done: int
    verified: Verified | None = None
    #: the request shape it ran with, and how it was chosen (older records: absent)
    shape: LoadShape | None = None
    cluster: LoadCluster | None = None  # --mpi: the job's ranks and hosts (the figures above: all of them)
    #: a library's path (safetensors, fastsafetensors, the Run:ai streamer): what it is and how it ran
    library: LibraryFacts | None = None

    def host_rows(self) -> list[tuple[str, float | None, float | None, float | None]]:
        """An MPI job's hosts, to rank beside the job: each one's time to load and GB/s."""
        hosts = self.cluster.hosts if self.cluster is not None else []
        return [(h.host, h.load_s, None, h.gb_per_s) for h in hosts]

    @classmethod
    def from_jobs(
        cls,
        spec: LoadSpec,
        data: LoadShards,
        done: Sequence[JobDone],
        pieces: int,
        *,
        resident_before: float | None,
        verified: tuple[int, int, str | None] | None = None,
        shape: LoadShape | None = None,
        library: LibraryFacts | None = None,
        **end: Unpack[RunEnd],
    ) -> LoadResult:
        ends = [d.start_s + d.seconds for d in done]
        whole = len(done) == pieces and end["status"] == "ok"
        load_s = max(ends) if ends and whole else None
        total = sum(d.bytes for d in done)
        per_gpu = _per_gpu(done)
        shards = _shards(data.get("names", []), done)
        timed = [s for s in shards if s.seconds is not None]
        return cls(
            spec=spec,
            data=data,
            cache_state=spec.cache,
            resident_before=resident_before,
            load_s=load_s,
            first_byte_s=min(ends) if ends else None,
            gb_per_s=total / load_s / 1e9 if load_s else None,
            per_gpu=per_gpu,
            shards=shards,
            slowest_shard=max(timed, key=lambda s: s.seconds or 0.0).name if timed else None,
            pieces=pieces,
            pieces_done=len(done),
            verified=None if verified is None else Verified(pieces=verified[0], differ=verified[1], first=verified[2]),
            shape=shape,
            library=library,
            **run_end(total, end),
        )


def _per_gpu(done: Sequence[JobDone]) -> list[GpuLoad]:
    """Per GPU (host first): its bytes, when its last piece landed, its GB/s."""
    gpus: dict[int | None, list[JobDone]] = {}
    for d in done:
        gpus.setdefault(d.gpu, []).append(d)
    out = []
    for g in sorted(gpus, key=lambda x: -1 if x is None else x):
        ds = gpus[g]
        last = max(x.start_s + x.seconds for x in ds)
        n = sum(x.bytes for x in ds)
        out.append(GpuLoad(gpu=g, bytes=n, seconds=last, gb_per_s=n / last / 1e9 if last > 0 else None))
    return out


def _shards(names: Sequence[str], done: Sequence[JobDone]) -> list[ShardLoad]:
    """Per shard: its bytes, when its first piece started, and its first to last piece (None: none landed)."""
    by_shard: dict[int, list[JobDone]] = {}
    for d in done:
        by_shard.setdefault(d.tag, []).append(d)
    out = []
    for s, name in enumerate(names):
        ds = by_shard.get(s, [])
        start = min((x.start_s for x in ds), default=None)
        end = max((x.start_s + x.seconds for x in ds), default=None)
        seconds = None if start is None or end is None else end - start
        out.append(ShardLoad(name=name, bytes=sum(x.bytes for x in ds), start_s=start, seconds=seconds))
    return out


def decode(text: bytes | str, path: str = "<result>") -> LoadResult:
    return decode_as(LoadResult, text, path, "a load result")
