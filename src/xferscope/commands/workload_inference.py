"""`xferscope workload kvcache` and `xferscope workload load`: KV-cache restores and model loads into the GPU."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from xferscope.commands.option_groups import WORKLOAD_RUN, WorkloadRunOptions, takes
from xferscope.commands.options import WorkloadDirOpt, WorkloadMpiOpt, one_path_under_mpi, workload_gpus
from xferscope.errors import SpecError
from xferscope.output.terminal import install_hangup_handlers
from xferscope.workloads.common.options import optional_size
from xferscope.workloads.inference.options import (
    KV_REQUESTS,
    KV_SHAPE,
    MODEL_FILES,
    READ_SHAPE,
    KvRequestOptions,
    KvShapeOptions,
    ModelFilesOptions,
    ReadShapeOptions,
)

PathOpt = Annotated[
    str | None,
    typer.Option(
        "--path",
        "-x",
        help="host, bounce, bounce-async, cufile; load also: the libraries safetensors, fastsafetensors, "
        "fastsafetensors-gds, runai-streamer (where installed, with torch); a comma list runs each over one data "
        "set in rotated rounds and ranks them (a path twice: an A/A pair)",
    ),
]


def _paths(path: str | None) -> tuple[list[str], str]:
    """The paths asked for, or the default: into the GPU by bounce-async where there is one, else host."""
    if path is not None:
        paths = [p.strip() for p in path.split(",") if p.strip()]
        if not paths:
            raise SpecError("path", "no path given")
        return paths, ""
    from xferscope.gpus import gpu_count

    n, why = gpu_count()
    return (["bounce-async"], "") if n else (["host"], f"no GPU here ({why}): --path host")


def _check_other_paths(spec, paths: list[str]) -> None:
    """The spec holds for every path after the first too (an unknown path: one line, before anything runs)."""
    for p in paths[1:]:
        dataclasses.replace(spec, path=p).validate()


def _here_or_across_ranks(kind: str, mpi: bool, make_spec, run: WorkloadRunOptions, *job_args: object) -> None:
    """Run the workload ``kind`` (kvcache or load): on this host, its paths ranked in rounds, or under --mpi one
    path across the job's ranks (``job_args``: what its rank job takes beside the ranks, the spec and ``live``)."""
    from xferscope.output import workload_inference as output

    install_hangup_handlers()
    if mpi:
        from xferscope.cluster import workload_inference as cluster
        from xferscope.cluster.workload_ranks import check_launcher

        check_launcher()
        job = getattr(cluster, f"{kind}_job")
        show = getattr(output, f"show_{kind}")
        cluster.inference_mpi(
            lambda: make_spec()[0],
            lambda ranks, spec, live: job(ranks, spec, *job_args, live),
            lambda result: show(result, **run.outputs),
            fmt=run.fmt,
        )
        return
    spec, paths = make_spec()
    getattr(output, f"{kind}_and_report")(spec, paths, run.rounds, **run.outputs)


@takes(WorkloadRunOptions)
@takes(KvRequestOptions)
@takes(KvShapeOptions)
def kvcache_command(
    cache_shape: KvShapeOptions = KV_SHAPE,
    request: KvRequestOptions = KV_REQUESTS,
    path: PathOpt = None,
    gpu: Annotated[str | None, typer.Option("--gpu", "-d", help="GPUs the ranks go round-robin over")] = None,
    cache: Annotated[str | None, typer.Option("--cache", help="read an existing cache in LMCache's GDS layout")] = None,
    directory: WorkloadDirOpt = None,
    cache_chunks: Annotated[
        int | None, typer.Option("--cache-chunks", help="chunks per rank in the generated cache")
    ] = None,
    bs: Annotated[
        str | None, typer.Option("--bs", "-i", help="bounce paths: staging per read (default: the read)")
    ] = None,
    prefill_rate: Annotated[
        float | None, typer.Option("--prefill-rate", help="tokens/s your GPUs prefill: prints the break-even")
    ] = None,
    buffered: Annotated[bool, typer.Option("--buffered", help="through the page cache (no O_DIRECT)")] = False,
    mpi: WorkloadMpiOpt = False,
    run: WorkloadRunOptions = WORKLOAD_RUN,
) -> None:
    """Restore KV-cache chunks (LMCache's GDS layout) by a path into GPU memory, as requests arrive: time to
    restore a request, GB/s per GPU, chunks and tokens per second, CPU cost, and with --prefill-rate the prompt
    length above which restoring beats recomputing. Under --mpi, the requests spread over the ranks."""
    from xferscope.workloads.inference.kvcache_spec import KvSpec

    def make_spec() -> tuple[KvSpec, list[str]]:
        run.check()
        paths, note = _one_path_under_mpi(path, mpi)
        spec = KvSpec(
            **cache_shape.spec_fields(),
            **request.spec_fields(),
            path=paths[0],
            gpus=workload_gpus(gpu, mpi),
            cache=cache,
            directory=directory,
            cache_chunks=cache_chunks,
            block_size=optional_size(bs, "bs"),
            prefill_rate=prefill_rate,
            seed=run.seed,
            keep=run.keep,
            buffered=buffered,
            interval=run.interval,
            defaults_note=note,
        )
        spec.validate()
        _check_other_paths(spec, paths)
        return spec, paths

    _here_or_across_ranks("kvcache", mpi, make_spec, run, gpu)


@takes(WorkloadRunOptions)
@takes(ReadShapeOptions)
@takes(ModelFilesOptions)
def load_command(
    shards: ModelFilesOptions = MODEL_FILES,
    path: PathOpt = None,
    gpu: Annotated[
        str | None, typer.Option("--gpu", "-d", help="GPUs the tensors are split over, as tensor parallelism")
    ] = None,
    reads: ReadShapeOptions = READ_SHAPE,
    cache: Annotated[
        str, typer.Option("--cache", help="cold (page cache emptied of the shards, O_DIRECT) or warm")
    ] = "cold",
    directory: WorkloadDirOpt = None,
    verify: Annotated[
        bool, typer.Option("--verify", "-V", help="after the load, check every tensor's bytes landed")
    ] = False,
    mpi: WorkloadMpiOpt = False,
    share: Annotated[
        str, typer.Option("--share", help="--mpi: copy (each rank its own copy) or tp (its tensor-parallel share)")
    ] = "copy",
    run: WorkloadRunOptions = WORKLOAD_RUN,
) -> None:
    """Load a model's safetensors shards into GPU memory by a path (cold start): time to load, time to the first
    byte on the GPU, GB/s overall and per GPU, the slowest shard, CPU cost. Under --mpi, every rank loads the
    model, the loads begun together: the time to load is the slowest rank's."""
    from xferscope.workloads.inference.load_spec import LoadSpec

    def make_spec() -> tuple[LoadSpec, list[str]]:
        run.check()
        paths, note = _one_path_under_mpi(path, mpi)
        _check_share(share, mpi, paths[0])
        spec = LoadSpec(
            **shards.spec_fields(),
            path=paths[0],
            gpus=workload_gpus(gpu, mpi),
            **reads.spec_fields(),
            cache=cache,
            directory=directory,
            verify=verify,
            seed=run.seed,
            keep=run.keep,
            interval=run.interval,
            defaults_note=note,
        ).validate()
        _check_other_paths(spec, paths)
        return spec, paths

    _here_or_across_ranks("load", mpi, make_spec, run, gpu, share)


def _one_path_under_mpi(path: str | None, mpi: bool) -> tuple[list[str], str]:
    """The paths asked for (or the default), one under --mpi."""
    paths, note = _paths(path)
    return one_path_under_mpi(paths, mpi), note


def _check_share(share: str, mpi: bool, path: str) -> None:
    """--share: copy or tp, tp only under --mpi and for xferscope's paths (a library loads the whole model)."""
    if share not in ("copy", "tp"):
        raise SpecError("share", f"copy (each rank its own copy) or tp (its tensor-parallel share), got {share!r}")
    if share != "copy" and not mpi:
        raise SpecError("share", "the ranks share the model under --mpi; on one host, --gpu splits it")
    from xferscope.workloads.common.libraries import LOAD_LIBRARIES  # when checked: not on every start

    if share == "tp" and path in LOAD_LIBRARIES:
        raise SpecError(
            "share", f"{path} loads the whole model in each process here: --share copy, or one of xferscope's paths"
        )
