"""The record of a KV-cache restore run: typed (msgspec), with a schema version, written and read as JSON.

``KvResult.from_jobs`` turns the workers' jobs into the figures: a request is restored when every rank's part
has landed, and its time runs from the first rank's first read to the last rank's last byte. With a prefill
rate the user gave, the break-even comes from a least-squares line through the restore times (``statistics
.linear_regression``): restoring x tokens takes ``fixed + x * per_token``; recomputing them ``x / rate``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from xferscope.workloads.common.au import percentile
from xferscope.workloads.common.job_ranks import DataJobRecord, JobHostRow, JobRankRow
from xferscope.workloads.common.records import RunEnd, WorkloadResult, decode_as, run_end
from xferscope.workloads.common.records import num as _num
from xferscope.workloads.inference.kvcache_data import KvCacheFiles
from xferscope.workloads.inference.kvcache_spec import KvSpec
from xferscope.workloads.inference.transfer import JobDone

if TYPE_CHECKING:
    from typing_extensions import Unpack

SCHEMA_VERSION = 1
KIND = "workload-kvcache"


class KvRequest(msgspec.Struct, kw_only=True):
    number: int
    hits: int  # chunks restored
    tokens: int  # tokens restored
    seconds: float | None  # None: a rank's part did not land (the run ended first)


class GpuFigures(msgspec.Struct, kw_only=True):
    gpu: int | None  # None: pinned host memory (the host path)
    bytes: int
    gb_per_s: float | None


class BreakEven(msgspec.Struct, kw_only=True):
    prefill_rate: float  # tokens/s, the user's
    fixed_s: float  # a request's restore time that does not grow with its tokens
    s_per_token: float
    tokens: int | None  # prompts longer than this restore faster than they recompute; None: never here
    fit: str  # "least squares over N points" or "proportional (one prompt length)"


class KvRankFigures(JobRankRow, kw_only=True):
    """One rank of an MPI job's restores (``workload kvcache --mpi``), as it measured itself."""

    requests: int
    restore_p50_s: float | None
    restore_p99_s: float | None
    gb_per_s: float | None
    seconds: float


class KvHostFigures(JobHostRow, kw_only=True):
    """One host of the job: its ranks' requests together."""

    requests: int
    restore_p50_s: float | None
    restore_p99_s: float | None
    gb_per_s: float | None  # its ranks' bytes over the longest of their runs


class KvCluster(DataJobRecord, kw_only=True):
    """An MPI job's ranks and hosts (the slowest: the highest p99); the run's own figures are every rank's
    requests together."""

    per_rank: list[KvRankFigures]
    hosts: list[KvHostFigures]


class KvResult(WorkloadResult, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    kind: str = KIND
    spec: KvSpec
    cache: KvCacheFiles
    bytes_per_token: int
    formula: str
    requests: int  # restored (every rank's part landed)
    restore_p50_s: float | None
    restore_p99_s: float | None
    gb_per_s: float | None  # 10^9 bytes a second, all ranks
    per_gpu: list[GpuFigures]
    chunks_per_s: float | None
    tokens_per_s: float | None
    seconds: float
    break_even: BreakEven | None = None
    request_log: list[KvRequest] = msgspec.field(default_factory=list)
    cluster: KvCluster | None = None  # --mpi: the job's ranks and hosts (the figures above: all of them)

    def host_rows(self) -> list[tuple[str, float | None, float | None, float | None]]:
        """An MPI job's hosts, to rank beside the job: each one's restore p50 and GB/s."""
        hosts = self.cluster.hosts if self.cluster is not None else []
        return [(h.host, h.restore_p50_s, None, h.gb_per_s) for h in hosts]

    @classmethod
    def from_jobs(
        cls,
        spec: KvSpec,
        cache: KvCacheFiles,
        done: Sequence[JobDone],
        **end: Unpack[RunEnd],
    ) -> KvResult:
        chunk_tokens = (cache.get("chunk_shape") or [0, 0, spec.chunk_tokens])[2]
        seconds = end.get("seconds", 0.0)
        per_gpu: dict[int | None, int] = {}
        for d in done:
            per_gpu[d.gpu] = per_gpu.get(d.gpu, 0) + d.bytes
        restored_bytes = sum(per_gpu.values())
        log = _request_log(spec, cache, done, chunk_tokens)
        times = [r.seconds for r in log if r.seconds is not None and r.hits]
        restored = [r for r in log if r.seconds is not None]
        chunks = sum(r.hits for r in restored)

        def rate(x: float) -> float | None:
            return _num(x / seconds) if seconds > 0 else None

        bpt, formula = _per_token(spec, cache)
        return cls(
            spec=spec,
            cache=cache,
            bytes_per_token=bpt,
            formula=formula,
            requests=len(restored),
            restore_p50_s=_num(percentile(times, 50)),
            restore_p99_s=_num(percentile(times, 99)),
            gb_per_s=rate(restored_bytes / 1e9),
            per_gpu=[
                GpuFigures(gpu=g, bytes=b, gb_per_s=rate(b / 1e9))
                for g, b in sorted(per_gpu.items(), key=lambda x: -1 if x[0] is None else x[0])
            ],
            chunks_per_s=rate(chunks),
            tokens_per_s=rate(chunks * chunk_tokens),
            break_even=break_even(spec, done, log, chunk_tokens) if spec.prefill_rate else None,
            request_log=log,
            seconds=end["seconds"],
            **run_end(restored_bytes, end),
        )


def _request_log(spec: KvSpec, cache: KvCacheFiles, done: Sequence[JobDone], chunk_tokens: int) -> list[KvRequest]:
    """Each request with the chunks it found and, where every rank's part landed, its restore time (first read
    to last piece)."""
    by_request: dict[int, list[JobDone]] = {}
    for d in done:
        by_request.setdefault(d.tag, []).append(d)
    payload = cache.get("chunk_payload_bytes") or 1
    log: list[KvRequest] = []
    for n in sorted(by_request):
        parts = by_request[n]
        hits = round(max(p.bytes for p in parts) / payload)  # a rank's bytes: its part of each chunk
        whole = len(parts) == spec.tp
        secs = max(p.start_s + p.seconds for p in parts) - min(p.start_s for p in parts) if whole else None
        log.append(KvRequest(number=n, hits=hits, tokens=hits * chunk_tokens, seconds=secs))
    return log


def _per_token(spec: KvSpec, cache: KvCacheFiles) -> tuple[int, str]:
    """Bytes per token and how they come: the model's formula for a generated cache, the chunk headers for a cache
    that was read (whatever model wrote it)."""
    if cache.get("generated", True):
        return spec.model.kv_bytes_per_token, spec.model.kv_formula()
    kv, _layers, tokens, _hidden = cache["chunk_shape"]
    ranks = cache["ranks"] if kv == 2 else 1  # MLA's vector is whole on every rank
    bpt = cache["chunk_payload_bytes"] // tokens * ranks
    return bpt, (
        f"from the cache's chunk headers: {cache['chunk_shape']} of {cache['dtype']} x {ranks} "
        f"rank{'s' * (ranks != 1)} = {bpt:,} B per token"
    )


def break_even(spec: KvSpec, done: Sequence[JobDone], log: Sequence[KvRequest], chunk_tokens: int) -> BreakEven | None:
    """Where restoring gets faster than recomputing at the user's prefill rate, from the restore times measured:
    each request (tokens restored, seconds) and, with one read per chunk, each chunk as it landed within its
    request. None when nothing was restored."""
    rate = spec.prefill_rate
    assert rate
    xs: list[float] = []
    ys: list[float] = []
    for r in log:
        if r.seconds is not None and r.tokens:
            xs.append(r.tokens)
            ys.append(r.seconds)
    if spec.layout == "block":
        for d in done:
            for i, t in enumerate(d.marks):
                xs.append((i + 1) * chunk_tokens)
                ys.append(t)
    if not xs:
        return None
    if len(set(xs)) > 1:
        slope, fixed = statistics.linear_regression(xs, ys)
        fit = f"least squares over {len(xs)} points"
    else:
        slope, fixed = sum(ys) / len(ys) / xs[0], 0.0
        fit = "proportional (one prompt length)"
    return at_rate(rate, fixed, slope, fit)


def at_rate(rate: float, fixed: float, slope: float, fit: str) -> BreakEven:
    """The break-even of a restore that takes ``fixed`` + ``slope`` a token against recomputing at ``rate``
    tokens a second: the prompt length from which restoring is faster (None: never)."""
    recompute = 1.0 / rate
    tokens = None if slope >= recompute else max(0, math.ceil(fixed / (recompute - slope)))
    return BreakEven(prefill_rate=rate, fixed_s=fixed, s_per_token=slope, tokens=tokens, fit=fit)


def median_break_even(evens: Sequence[BreakEven]) -> BreakEven:
    """One path's break-even over its runs (rounds): the median of their fits' fixed time and time a token."""
    fixed = statistics.median(b.fixed_s for b in evens)
    slope = statistics.median(b.s_per_token for b in evens)
    runs = f"{len(evens)} run{'s' * (len(evens) != 1)}"
    return at_rate(evens[0].prefill_rate, fixed, slope, f"the median of the fits of {runs}")


def decode(text: bytes | str, path: str = "<result>") -> KvResult:
    return decode_as(KvResult, text, path, "a kvcache result")
