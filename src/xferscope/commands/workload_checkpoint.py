"""`xferscope workload checkpoint`: a training job's checkpoints (MLPerf Storage's llama3 checkpointing), sized
from the model and its parallelism, rank by rank: ``--plan`` says what each rank writes; without it they are
written from where the states live (GPU memory, or host memory as DLIO's) by a path and read back; several paths
run in rotated rounds and are ranked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from xferscope.commands.option_groups import WORKLOAD_RUN, WorkloadRunOptions, takes
from xferscope.commands.options import WorkloadDirOpt, WorkloadMpiOpt, one_path_under_mpi, workload_gpus
from xferscope.errors import SpecError
from xferscope.workloads.checkpoint.options import (
    CHECKPOINT_IO,
    CHECKPOINT_SIZE,
    MODEL_SHAPE,
    CheckpointIoOptions,
    CheckpointSizeOptions,
    ModelShapeOptions,
)

if TYPE_CHECKING:
    from xferscope.workloads.checkpoint import session


@takes(WorkloadRunOptions)
@takes(CheckpointIoOptions)
@takes(CheckpointSizeOptions)
@takes(ModelShapeOptions)
def checkpoint_command(
    model: Annotated[
        str, typer.Argument(help="llama3-8b, llama3-70b, llama3-405b, llama3-1t (MLPerf Storage's) or custom")
    ],
    plan: Annotated[
        bool, typer.Option("--plan", help="print each rank's files and bytes and how they were found; write nothing")
    ] = False,
    size: CheckpointSizeOptions = CHECKPOINT_SIZE,
    gpu: Annotated[str | None, typer.Option("--gpu", "-d", help="GPUs the ranks' states go round-robin over")] = None,
    shape: ModelShapeOptions = MODEL_SHAPE,
    path: Annotated[
        str,
        typer.Option(
            "--path",
            "-x",
            help="host (through the page cache, as torch.save), bounce, bounce-async, cufile; torch-save and dcp "
            "(the libraries themselves, where torch is installed); a comma list runs each in rotated rounds over one "
            "checkpoint size and ranks them by the time until durable (a path twice: an A/A pair)",
        ),
    ] = "host",
    io: CheckpointIoOptions = CHECKPOINT_IO,
    directory: WorkloadDirOpt = None,
    mpi: WorkloadMpiOpt = False,
    run: WorkloadRunOptions = WORKLOAD_RUN,
) -> None:
    """MLPerf Storage's llama3 checkpoints (DLIO's checkpointing), or PyTorch DCP's: each rank's files and bytes,
    from the model's parameters and its tensor, pipeline and data parallelism with ZeRO; written (fsync per file),
    evicted from the page cache and read back: save and restore times and GB/s, MLPerf's and DLIO's. Under --mpi,
    the checkpoint's ranks split over the job's, each save and restore begun together."""
    from xferscope.output.workload_checkpoint import checkpoint_and_report
    from xferscope.workloads.checkpoint.plan import CheckpointSpec

    run.check()
    paths = [p.strip() for p in path.split(",") if p.strip()]

    def make() -> tuple[CheckpointSpec, session.CheckpointRunOptions]:
        one_path_under_mpi(paths, mpi)
        if mpi and plan:
            raise SpecError("plan", "--plan is of one host: run it without --mpi")
        spec = CheckpointSpec(
            shape.model(model, size.ranks),
            **size.spec_fields(),
            directory=directory,
            gpus=workload_gpus(gpu, mpi),
            path=paths[0],
        )
        return spec, io.run_options(seed=run.seed, keep=run.keep, interval=run.interval)

    if mpi:
        from xferscope.cluster.workload_checkpoint import checkpoint_mpi
        from xferscope.cluster.workload_ranks import check_launcher
        from xferscope.output.terminal import install_hangup_handlers

        check_launcher()
        install_hangup_handlers()
        checkpoint_mpi(make, gpu_text=gpu, **run.outputs)
        return
    spec, options = make()
    checkpoint_and_report(spec, paths, run.rounds, options, plan_only=plan, **run.outputs)
