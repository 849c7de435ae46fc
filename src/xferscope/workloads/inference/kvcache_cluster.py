"""The figures of KV-cache restores across the ranks of an MPI job (``workload kvcache --mpi``), from every rank's.

The job's requests are spread over its ranks (rank *i* of *N* makes requests *i*, *i + N*, ...), every rank's run
begun together. The job's restore times are the percentiles over every request of every rank; its GB/s, chunks
and tokens a second every rank's over the longest rank's run. Beside them: each rank as it measured itself, and
each host (its ranks' requests together), the host of the highest p99 named.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from xferscope.workloads.common.au import percentile
from xferscope.workloads.common.job_ranks import JobFacts, RankResult, host_row_fields, job_record, process_totals
from xferscope.workloads.common.records import num
from xferscope.workloads.inference.kvcache_record import (
    GpuFigures,
    KvCluster,
    KvHostFigures,
    KvRankFigures,
    KvResult,
    median_break_even,
)


def _times(results: Sequence[KvResult]) -> list[float]:
    """Every restored request's time (a request that found no chunk aside, as one run leaves it out)."""
    return [q.seconds for r in results for q in r.request_log if q.seconds is not None and q.hits]


def _per_gpu(results: Sequence[KvResult], seconds: float) -> list[GpuFigures]:
    """Each GPU of one host over its ranks: their bytes, GB/s over the longest run."""
    gpus: dict[int | None, int] = {}
    for g in (g for r in results for g in r.per_gpu):
        gpus[g.gpu] = gpus.get(g.gpu, 0) + g.bytes
    return [
        GpuFigures(gpu=g, bytes=b, gb_per_s=num(b / seconds / 1e9) if seconds > 0 else None)
        for g, b in sorted(gpus.items(), key=lambda x: -1 if x[0] is None else x[0])
    ]


def _rank_figures(r: RankResult[KvResult, None]) -> KvRankFigures:
    res = r.result
    return KvRankFigures(
        **r.row_fields([g.gpu for g in res.per_gpu]),
        requests=res.requests,
        restore_p50_s=res.restore_p50_s,
        restore_p99_s=res.restore_p99_s,
        gb_per_s=res.gb_per_s,
        seconds=res.seconds,
    )


def _host_figures(host: str, ranks: Sequence[RankResult[KvResult, None]]) -> KvHostFigures:
    results = [r.result for r in ranks]
    times = _times(results)
    seconds = max(r.seconds for r in results)
    total = sum(r.bytes_read for r in results)
    return KvHostFigures(
        **host_row_fields(host, ranks),
        requests=sum(r.requests for r in results),
        restore_p50_s=num(percentile(times, 50)),
        restore_p99_s=num(percentile(times, 99)),
        gb_per_s=num(total / seconds / 1e9) if seconds > 0 else None,
    )


def cluster_result(ranks: Sequence[RankResult[KvResult, None]], facts: JobFacts) -> KvResult:
    """The job's record from every rank's (any order): every request together, each rank and host beside it."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    results = [r.result for r in ranks]
    first = results[0]
    seconds = max(r.seconds for r in results)
    total = sum(r.bytes_read for r in results)
    times = _times(results)
    chunk_tokens = (first.cache.get("chunk_shape") or [0, 0, first.spec.chunk_tokens])[2]
    chunks = sum(q.hits for r in results for q in r.request_log if q.seconds is not None)
    evens = [r.break_even for r in results if r.break_even is not None]
    cluster, hosts, status, error = job_record(
        KvCluster,
        ranks,
        facts,
        _rank_figures,
        _host_figures,
        lambda h: h.restore_p99_s,
    )

    def rate(x: float) -> float | None:
        return num(x / seconds) if seconds > 0 else None

    return msgspec.structs.replace(
        first,
        status=status,
        error=error,
        bytes_read=total,
        requests=sum(r.requests for r in results),
        restore_p50_s=num(percentile(times, 50)),
        restore_p99_s=num(percentile(times, 99)),
        gb_per_s=rate(total / 1e9),
        per_gpu=_per_gpu(results, seconds) if len(hosts) == 1 else [],  # GPU numbers are a host's own
        chunks_per_s=rate(chunks),
        tokens_per_s=rate(chunks * chunk_tokens),
        seconds=seconds,
        break_even=median_break_even(evens) if evens and len(evens) == len(results) else None,
        request_log=sorted((q for r in results for q in r.request_log), key=lambda q: q.number),
        cluster=cluster,
        **process_totals(results, total),
    )
