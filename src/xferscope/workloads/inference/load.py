"""``workload load`` from start to end: the paths checked, the shards generated (or the user's parsed), the
page cache emptied of them (cold) or filled with them (warm) before each run, one run or the paths side by
side, and generated shards removed at the end. xferscope's paths run a ``TransferJob``; a library's path
(safetensors, fastsafetensors, the Run:ai streamer) runs the library itself (``library_load``), by the same
rules and clock."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from xferscope.engines import page_cache
from xferscope.errors import EnvironmentProblem, SpecError
from xferscope.units import format_bytes
from xferscope.workloads.common.gpu_memory import MEMORY_SHARE, measured_free
from xferscope.workloads.common.run_options import check_paths
from xferscope.workloads.common.side_by_side import Ranked, in_rounds
from xferscope.workloads.inference import library_load, load_data, load_shape
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


def library_job(spec: LoadSpec, shards: Shards) -> library_load.LibraryLoadJob:
    """The load as the library of ``spec``'s path makes it: every shard, in order, into the first GPU."""
    return library_load.LibraryLoadJob(
        spec.path,
        [f.path for f in shards.files],
        [[(t.name, t.start, t.end) for t in parsed.tensors] for parsed in shards.parsed],
        spec.gpus[0] if spec.lands_in_gpu else None,
        spec.verify,
    )


def check_library_memory(specs: Sequence[LoadSpec], shards: Shards) -> None:
    """A library holds the whole model on its one GPU: it must fit that GPU's free memory."""

    gpus = sorted({s.gpus[0] for s in specs if s.lands_in_gpu})
    if not gpus:
        return
    free = measured_free(gpus)
    for s in specs:
        have = free.get(s.gpus[0]) if s.lands_in_gpu else None
        if have is not None and shards.tensor_bytes > have * MEMORY_SHARE:
            raise SpecError(
                "gpu",
                f"{s.path} holds the whole model on GPU {s.gpus[0]}: {format_bytes(shards.tensor_bytes)}, more than "
                f"its free memory allows ({format_bytes(have)} free)",
            )


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
        specs = [dataclasses.replace(spec, path=p) for p in paths]
        check_paths([s.path for s in specs if not s.by_library])
        if "fastsafetensors-gds" in paths and not spec.host_to_gpu:
            raise EnvironmentProblem("fastsafetensors-gds: unavailable: it reads with cuFile into a GPU; no GPU here")
        shards = load_data.scan(spec) if spec.files is not None else load_data.planned(spec)
        check_memory_before([transfer_job(load_shape.widest(s), shards)[0] for s in specs if not s.by_library])
        check_library_memory([s for s in specs if s.by_library], shards)
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
        """A load: by xferscope's path (its shape measured first, where the probe chooses it), or by the library
        itself in a process of its own, a job a shard; ``on_ready``: the ranks of an MPI job start their loads
        together there."""
        assert self.shards is not None
        spec = spec or self.spec
        notes = [spec.defaults_note] * bool(spec.defaults_note) + self.shards.notes
        shape = None
        job: library_load.LibraryLoadJob | TransferJob
        if spec.by_library:
            job, pieces, serve = library_job(spec, self.shards), len(self.shards.files), library_load.serve
            if spec.threads is not None or spec.split is not None:
                notes.insert(
                    0, f"--threads and --split shape xferscope's paths: {spec.path} runs with its own settings"
                )
        else:
            shape = self.shape_for(spec)
            spec = load_shape.resolved(spec, shape)
            assert spec.split is not None and spec.threads is not None
            (job, pieces), serve = transfer_job(spec, self.shards), None
        resident = self._set_cache(spec)
        out, done = self.runner.run(job, f"the {spec.path} load", on_tick, on_ready, serve=serve)
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
            library=getattr(out.payload, "facts", None),
            labels=labels + notes,
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
