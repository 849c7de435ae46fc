"""``workload load`` from start to end: the paths checked, the shards generated (or the user's parsed), the
page cache emptied of them (cold) or filled with them (warm) before each run, one run or the paths side by
side, and generated shards removed at the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from xferscope.engines import page_cache
from xferscope.workloads.common.run_options import check_paths
from xferscope.workloads.common.side_by_side import Ranked, in_rounds
from xferscope.workloads.inference import load_data, load_shape
from xferscope.workloads.inference.inference import JobRunner, check_memory_before, gpu_present
from xferscope.workloads.inference.load_data import LoadPieces, Shards
from xferscope.workloads.inference.load_record import LoadResult
from xferscope.workloads.inference.load_shape import LoadShape
from xferscope.workloads.inference.load_spec import LoadSpec
from xferscope.workloads.inference.transfer import Files, TransferEnd, TransferTick
from xferscope.workloads.inference.transfer_process import TransferJob


class LoadComparison(Ranked, kw_only=True):
    kind: str = "workload-load-compare"
    results: list[LoadResult]


def direct_for(spec: LoadSpec, shards: Shards) -> bool:
    """O_DIRECT for a cold load by the paths that read into buffers of their own; the host path maps the file
    (the page cache, emptied first), and a warm load reads what the page cache holds."""
    return shards.direct and spec.cache == "cold" and spec.path != "host"


def transfer_job(spec: LoadSpec, shards: Shards) -> tuple[TransferJob, int]:
    """The load as one transfer job (its shape open: the defaults), and how many pieces it has."""
    spec = load_shape.with_defaults(spec)
    assert spec.split is not None and spec.threads is not None
    direct = direct_for(spec, shards)
    pieces = LoadPieces(spec, shards, direct)
    gpus: list[int | None] = [g if spec.lands_in_gpu else None for g in spec.gpus]
    job = TransferJob(
        path=spec.engine_path,
        files=Files(shards.files, direct),
        block_size=spec.split,
        worker_gpus=[gpus[w % len(gpus)] for w in range(spec.threads)],
        worker_buffer=0,
        buffers=list(zip(gpus, pieces.buffer_bytes)),
        source=pieces,
        interval=spec.interval,
        verify=spec.verify,
        memory_option="gpu",
        memory_fix="shard the model over more GPUs (--gpu 0,1,…)",
    )
    return job, len(pieces.jobs)


class LoadSession:
    def __init__(self, spec: LoadSpec):
        self.spec = spec
        self.shards: Shards | None = None
        self.runner = JobRunner()
        #: per path, the request shape its loads run with (load_shape: given, probed or the defaults)
        self.shapes: dict[str, LoadShape] = {}

    def stop(self) -> None:
        self.runner.stop()

    @property
    def stopped(self) -> bool:
        return self.runner.stopped

    def check(self, paths: Sequence[str] = ()) -> Shards:
        """The paths, and every path's buffers against the GPUs' free memory, checked before anything is written:
        the user's shards (``--files``), or the generated ones as they will lie."""
        spec = self.spec = dataclasses.replace(self.spec, host_to_gpu=gpu_present())
        paths = list(paths) or [spec.path]
        check_paths(paths)
        shards = load_data.scan(spec) if spec.files is not None else load_data.planned(spec)
        check_memory_before(
            [transfer_job(load_shape.widest(dataclasses.replace(spec, path=p)), shards)[0] for p in paths]
        )
        if spec.files is not None:
            self.shards = shards
        return shards

    def generate(self, progress: Callable[[int, int], None] | None = None) -> Shards:
        self.shards = load_data.generate(self.spec, progress, cancel=lambda: self.stopped)
        return self.shards

    def prepare(self, progress: Callable[[int, int], None] | None = None, paths: Sequence[str] = ()) -> Shards:
        shards = self.check(paths)
        return shards if self.spec.files is not None else self.generate(progress)

    def _set_cache(self, spec: LoadSpec) -> float | None:
        """Empty the page cache of the shards (cold) or read them into it (warm); the share resident now."""
        assert self.shards is not None
        paths = [f.path for f in self.shards.files]
        if spec.cache == "warm":
            return page_cache.hold(paths, cancel=lambda: self.stopped)
        return page_cache.evict_files(paths)

    def shape_for(self, spec: LoadSpec) -> LoadShape:
        """The request shape of ``spec``'s path: measured once per path (load_shape), before its first load."""
        shape = self.shapes.get(spec.path)
        if shape is None:
            assert self.shards is not None
            base, _ = transfer_job(load_shape.widest(spec), self.shards)

            def probe(job: TransferJob) -> TransferEnd | None:
                out, _ = self.runner.run(job, f"the {spec.path} load's shape probe")
                if out.status == "interrupted" or self.stopped:  # Ctrl-C during the probe: no load follows
                    self.runner.stop()
                    raise KeyboardInterrupt
                return out.payload

            direct = direct_for(spec, self.shards)
            shape = self.shapes[spec.path] = load_shape.choose(spec, self.shards, direct, base, probe)
        return shape

    def run(
        self,
        spec: LoadSpec | None = None,
        on_tick: Callable[[TransferTick], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> LoadResult:
        """A load (its shape measured first, where the probe chooses it); ``on_ready``: the ranks of an MPI job
        start their loads together there."""
        assert self.shards is not None
        shape = self.shape_for(spec or self.spec)
        spec = load_shape.resolved(spec or self.spec, shape)
        assert spec.split is not None and spec.threads is not None
        job, pieces = transfer_job(spec, self.shards)
        resident = self._set_cache(spec)
        out, done = self.runner.run(job, f"the {spec.path} load", on_tick, on_ready)
        labels = list(out.labels)
        gpus = ", ".join(str(g) for g in spec.gpus)
        if spec.lands_in_gpu:
            split = "one GPU" if len(spec.gpus) == 1 else f"GPUs {gpus}, each tensor's rows split over them"
            labels.append(f"every tensor into GPU memory ({split})")
        else:
            labels.append("no GPU here: the tensors stop in host memory")
        if resident is not None:
            labels.append(f"{spec.cache}: {100 * resident:.0f}% of the shards in the page cache as it began")
        return LoadResult.from_jobs(
            spec,
            self.shards.describe(),
            done,
            pieces,
            status=out.status,
            resident_before=resident,
            cpu_seconds=out.process.cpu_seconds,
            peak_rss_bytes=out.process.peak_rss_bytes,
            verified=out.payload.verified if out.payload is not None else None,
            shape=shape,
            labels=labels + [spec.defaults_note] * bool(spec.defaults_note) + self.shards.notes,
            environment=out.environment,
            error=out.error,
        )

    def compare_paths(self, paths: Sequence[str], rounds: int, on_tick=None) -> LoadComparison:
        ranked, results, status = in_rounds(
            self.spec, paths, rounds, lambda spec: self.run(spec, on_tick), lambda: self.stopped, lambda r: r.load_s
        )
        return LoadComparison(rounds=rounds, entries=ranked, results=results, status=status)

    def close(self) -> None:
        if self.shards is not None:
            self.shards.close(keep=self.spec.keep)
