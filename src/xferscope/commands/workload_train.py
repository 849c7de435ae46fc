"""`xferscope workload train`: does this storage keep N GPUs busy? DLIO's training input, landing in GPU memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from xferscope.commands.option_groups import WORKLOAD_RUN, WorkloadRunOptions, takes
from xferscope.commands.options import WorkloadMpiOpt, gpu_list, one_path_under_mpi
from xferscope.errors import SpecError
from xferscope.output.terminal import install_hangup_handlers
from xferscope.workloads.train.options import (
    ACCELERATORS,
    FIND_MAX,
    TRAIN_SHAPE,
    AcceleratorOptions,
    FindMaxOptions,
    TrainShapeOptions,
)

if TYPE_CHECKING:
    from xferscope.workloads.train.train_spec import TrainSpec


def _defaults(path: str | None, compute: str | None) -> tuple[list[str], str, str]:
    """The paths (a path twice: an A/A pair, host#1 and host#2) and compute, with those the user left out: into
    the GPU where there is one, else as DLIO (host, sleep); and the note that says so."""
    note = ""
    if path is None or compute is None:
        from xferscope.gpus import gpu_count

        n, why = gpu_count()
        if n:
            path, compute = path or "bounce-async", compute or "gpu"
        else:
            left = " ".join(f for f, v in (("--path host", path), ("--compute sleep", compute)) if v is None)
            path, compute, note = path or "host", compute or "sleep", f"no GPU here ({why}): {left}, as DLIO"
    paths = [p.strip() for p in path.split(",") if p.strip()]
    if not paths:
        raise SpecError("path", "no path given")
    return paths, compute, note


@takes(WorkloadRunOptions)
@takes(AcceleratorOptions)
@takes(FindMaxOptions)
@takes(TrainShapeOptions)
def train_command(
    preset: Annotated[str, typer.Argument(help="unet3d, cosmoflow or resnet50 (DLIO's workload configs)")] = "unet3d",
    emulated: AcceleratorOptions = ACCELERATORS,
    gpu: Annotated[str | None, typer.Option("--gpu", "-d", help="GPUs the accelerators go round-robin over")] = None,
    path: Annotated[
        str | None,
        typer.Option(
            "--path",
            "-x",
            help="host (stops in host memory, as DLIO), bounce, bounce-async, cufile, dataloader (a PyTorch "
            "DataLoader, where torch is installed); a comma list runs each over one data set in rotated rounds and "
            "ranks them",
        ),
    ] = None,
    compute: Annotated[
        str | None, typer.Option("--compute", help="gpu (a kernel that spins for computation_time) or sleep (DLIO's)")
    ] = None,
    shape: TrainShapeOptions = TRAIN_SHAPE,
    search: FindMaxOptions = FIND_MAX,
    mpi: WorkloadMpiOpt = False,
    run: WorkloadRunOptions = WORKLOAD_RUN,
) -> None:
    """Emulate accelerators that read their batches by a path into GPU memory and compute on them: their utilisation
    (AU) as DLIO defines it, against the workload's threshold. Under --mpi, -a a rank, the data sharded over all."""
    from xferscope.workloads.train.train_spec import train_spec

    def make_spec() -> tuple[TrainSpec, list[str]]:
        run.check()
        search.check()
        paths, chosen_compute, note = _defaults(path, compute)
        one_path_under_mpi(paths, mpi)
        for p in paths[1:]:
            train_spec(preset, emulated.accelerator_type, path=p, computation_time=0.0)  # an unknown path: one line
        spec = train_spec(
            preset,
            emulated.accelerator_type,
            accelerators=emulated.accelerators,
            gpus=None if gpu is None or (mpi and "{" in gpu) else tuple(gpu_list(gpu)),  # -d {local_rank}: the rank's
            path=paths[0],
            compute=chosen_compute,
            **shape.spec_fields(),
            seed=run.seed,
            keep=run.keep,
            interval=run.interval,
            defaults_note=note,
        )
        return spec, paths

    install_hangup_handlers()
    if mpi:
        from xferscope.cluster.workload_ranks import check_launcher
        from xferscope.cluster.workload_train import train_mpi

        check_launcher()
        train_mpi(lambda: make_spec()[0], gpu_text=gpu, find_max=search.find_max, upper=search.max_accelerators,
                  **run.outputs)  # fmt: skip
        return
    from xferscope.output.workload import train_and_report

    train_and_report(*make_spec(), run.rounds, search.find_max, search.max_accelerators, **run.outputs)
