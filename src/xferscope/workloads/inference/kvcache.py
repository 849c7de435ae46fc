"""``workload kvcache`` from start to end: the paths checked, the cache generated (or an existing one read),
one run or the paths side by side over it, and a generated cache removed at the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from xferscope.errors import SpecError
from xferscope.workloads.common.run_options import check_paths
from xferscope.workloads.common.side_by_side import Ranked, in_rounds
from xferscope.workloads.inference import kvcache_data
from xferscope.workloads.inference.inference import JobRunner, check_memory_before, gpu_present
from xferscope.workloads.inference.kvcache_data import KvCache, KvJobs
from xferscope.workloads.inference.kvcache_record import KvResult
from xferscope.workloads.inference.kvcache_spec import KvSpec
from xferscope.workloads.inference.transfer import TransferTick
from xferscope.workloads.inference.transfer_process import TransferJob


class KvComparison(Ranked, kw_only=True):
    kind: str = "workload-kvcache-compare"
    results: list[KvResult]


def transfer_job(spec: KvSpec, cache: KvCache, host_gpu: int | None) -> TransferJob:
    largest = cache.largest_read(spec.layout)
    bs = spec.block_size or -(-largest // 4096) * 4096
    return TransferJob(
        path=spec.path,
        files=cache.fileset,
        block_size=bs,
        worker_gpus=[spec.rank_gpu(w % spec.tp) if spec.lands_in_gpu else None for w in range(spec.workers)],
        worker_buffer=cache.buffer_bytes(spec.max_hits, spec.layout),
        buffers=[],
        source=KvJobs(spec, cache),
        duration=spec.duration,
        interval=spec.interval,
        marks=spec.layout == "block",
        host_gpu=host_gpu if spec.path == "host" else None,
        memory_option="concurrency",
        memory_fix="lower --concurrency, --prompt-tokens or --hit-ratio",
    )


class KvSession:
    """The cache and the runs over it. ``close()`` (also after Ctrl-C) removes a generated cache."""

    def __init__(self, spec: KvSpec):
        self.spec = spec
        self.cache: KvCache | None = None
        self.runner = JobRunner()
        self.host_gpu: int | None = None

    def stop(self) -> None:
        self.runner.stop()

    @property
    def stopped(self) -> bool:
        return self.runner.stopped

    def check(self, paths: Sequence[str] = ()) -> KvCache:
        """The paths, an existing cache (``--cache``), and every path's buffers against the GPUs' free memory,
        checked before anything is written; the cache, or a generated one as it will lie."""
        spec = self.spec
        paths = list(paths) or [spec.path]
        check_paths(paths)
        self.host_gpu = spec.gpus[0] if gpu_present() else None
        if spec.cache is not None:
            cache = kvcache_data.scan(spec)
            tokens = cache.shape.tokens
            if tokens != spec.chunk_tokens:
                self.spec = spec = dataclasses.replace(spec, chunk_tokens=tokens).validate()
            if cache.positions < spec.max_hits:
                raise SpecError(
                    "cache",
                    f"{spec.cache} holds {cache.positions} chunks per rank; the longest prompt restores {spec.max_hits}",
                )
            self.cache = cache
        else:
            chunks = kvcache_data.plan(spec)[2]
            cache = KvCache("", [], False, spec.shape, chunks, spec.tp, True)  # as it will be: for the memory check
        check_memory_before([transfer_job(dataclasses.replace(spec, path=p), cache, self.host_gpu) for p in paths])
        return cache

    def generate(self, progress: Callable[[int, int], None] | None = None) -> KvCache:
        self.cache = kvcache_data.generate(self.spec, progress, cancel=lambda: self.stopped)
        return self.cache

    def prepare(self, progress: Callable[[int, int], None] | None = None, paths: Sequence[str] = ()) -> KvCache:
        cache = self.check(paths)
        return cache if self.spec.cache is not None else self.generate(progress)

    def run(
        self,
        spec: KvSpec | None = None,
        on_tick: Callable[[TransferTick], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> KvResult:
        """A run over the cache; ``on_ready``: the ranks of an MPI job start their runs together there."""
        assert self.cache is not None
        spec = spec or self.spec
        job = transfer_job(spec, self.cache, self.host_gpu)
        out, done = self.runner.run(job, f"the {spec.path} kvcache run", on_tick, on_ready)
        labels = list(out.labels)
        labels.append(
            f"{spec.concurrency} concurrent request{'s' * (spec.concurrency != 1)} x {spec.tp} rank{'s' * (spec.tp != 1)}, "
            f"{'one read per chunk' if spec.layout == 'block' else 'one read per K and V plane of a layer'}"
        )
        if spec.path == "host":
            labels.append(
                "chunks stop in pinned host memory"
                if self.host_gpu is not None
                else "chunks stop in host memory (no GPU: not pinned)"
            )
        return KvResult.from_jobs(
            spec,
            self.cache.describe(),
            done,
            status=out.status,
            seconds=out.payload.seconds if out.payload is not None else 0.0,
            cpu_seconds=out.process.cpu_seconds,
            peak_rss_bytes=out.process.peak_rss_bytes,
            labels=labels + [spec.defaults_note] * bool(spec.defaults_note) + self.cache.notes,
            environment=out.environment,
            error=out.error,
        )

    def compare_paths(self, paths: Sequence[str], rounds: int, on_tick=None) -> KvComparison:
        ranked, results, status = in_rounds(
            self.spec,
            paths,
            rounds,
            lambda spec: self.run(spec, on_tick),
            lambda: self.stopped,
            lambda r: r.restore_p50_s,
        )
        return KvComparison(rounds=rounds, entries=ranked, results=results, status=status)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close(keep=self.spec.keep)
