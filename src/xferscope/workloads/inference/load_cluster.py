"""The figures of a model load across the ranks of an MPI job (``workload load --mpi``), from every rank's own.

Every rank loads the model (its own copy, or its tensor-parallel share with ``--share tp``), the loads begun
together. The job's time to load is its slowest rank's (a serving job is up once its last rank is), its GB/s
every rank's bytes over that, the first byte the first rank's; each shard from its first read on any rank to its
last piece landed on any. Beside them: each rank as it measured itself, and each host (its ranks' bytes over its
slowest rank's time), the slowest host named.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from xferscope.workloads.common.job_ranks import JobFacts, RankResult, host_row_fields, job_record, process_totals
from xferscope.workloads.inference.load_record import (
    GpuLoad,
    LoadCluster,
    LoadHostFigures,
    LoadRankFigures,
    LoadResult,
    ShardLoad,
    Verified,
)


def _slowest(results: Sequence[LoadResult]) -> float | None:
    """The time to load of ranks that all loaded whole (None where one did not)."""
    times = [r.load_s for r in results]
    return None if not times or any(t is None for t in times) else max(t for t in times if t is not None)


def _shards(results: Sequence[LoadResult]) -> list[ShardLoad]:
    """Each shard over every rank: its bytes, from its first read on any rank to its last piece landed on any."""
    out = []
    for i, first in enumerate(results[0].shards):
        same = [r.shards[i] for r in results if len(r.shards) > i]
        starts = [s.start_s for s in same if s.start_s is not None]
        ends = [s.start_s + s.seconds for s in same if s.start_s is not None and s.seconds is not None]
        start = min(starts) if starts else None
        out.append(
            ShardLoad(
                name=first.name,
                bytes=sum(s.bytes for s in same),
                start_s=start,
                seconds=max(ends) - start if ends and start is not None else None,
            )
        )
    return out


def _verified(results: Sequence[LoadResult]) -> Verified | None:
    checks = [r.verified for r in results]
    if any(v is None for v in checks):
        return None
    firsts = [v.first for v in checks if v is not None and v.first]
    return Verified(
        pieces=sum(v.pieces for v in checks if v is not None),
        differ=sum(v.differ for v in checks if v is not None),
        first=firsts[0] if firsts else None,
    )


def _per_gpu(results: Sequence[LoadResult]) -> list[GpuLoad]:
    """Each GPU of one host over its ranks: their bytes, until the last of them landed, GB/s over that."""
    gpus: dict[int | None, list[GpuLoad]] = {}
    for g in (g for r in results for g in r.per_gpu):
        gpus.setdefault(g.gpu, []).append(g)
    out = []
    for gpu in sorted(gpus, key=lambda x: -1 if x is None else x):
        total = sum(g.bytes for g in gpus[gpu])
        times = [g.seconds for g in gpus[gpu] if g.seconds is not None]
        last = max(times) if times else None
        out.append(GpuLoad(gpu=gpu, bytes=total, seconds=last, gb_per_s=total / last / 1e9 if last else None))
    return out


def _rank_figures(r: RankResult[LoadResult, None]) -> LoadRankFigures:
    res = r.result
    return LoadRankFigures(
        **r.row_fields([g.gpu for g in res.per_gpu]),
        bytes=res.bytes_read,
        load_s=res.load_s,
        first_byte_s=res.first_byte_s,
        gb_per_s=res.gb_per_s,
    )


def _host_figures(host: str, ranks: Sequence[RankResult[LoadResult, None]]) -> LoadHostFigures:
    total = sum(r.result.bytes_read for r in ranks)
    slowest = _slowest([r.result for r in ranks])
    return LoadHostFigures(
        **host_row_fields(host, ranks),
        bytes=total,
        load_s=slowest,
        gb_per_s=total / slowest / 1e9 if slowest else None,
    )


def cluster_result(ranks: Sequence[RankResult[LoadResult, None]], facts: JobFacts, share: str) -> LoadResult:
    """The job's record from every rank's (any order): the loads together, each rank and host beside them."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    results = [r.result for r in ranks]
    first = results[0]
    slowest = _slowest(results)
    total = sum(r.bytes_read for r in results)
    firsts = [r.first_byte_s for r in results if r.first_byte_s is not None]
    shards = _shards(results)
    timed = [s for s in shards if s.seconds is not None]
    resident = [r.resident_before for r in results if r.resident_before is not None]
    cluster, hosts, status, error = job_record(
        LoadCluster,
        ranks,
        facts,
        _rank_figures,
        _host_figures,
        lambda h: h.load_s,
        share=share,
    )
    return msgspec.structs.replace(
        first,
        status=status,
        error=error,
        bytes_read=total,
        resident_before=sum(resident) / len(resident) if resident else None,
        load_s=slowest,
        first_byte_s=min(firsts) if firsts else None,
        gb_per_s=total / slowest / 1e9 if slowest else None,
        per_gpu=_per_gpu(results) if len(hosts) == 1 else [],  # GPU numbers are a host's own
        shards=shards,
        slowest_shard=max(timed, key=lambda s: s.seconds or 0.0).name if timed else None,
        pieces=sum(r.pieces for r in results),
        pieces_done=sum(r.pieces_done for r in results),
        verified=_verified(results),
        cluster=cluster,
        **process_totals(results, total),
    )
