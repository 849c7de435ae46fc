"""`xferscope workload train`: does this storage keep N GPUs busy? DLIO's training input, landing in GPU memory."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

import typer

from xferscope.commands.option_groups import WORKLOAD_RUN, WorkloadRunOptions, takes
from xferscope.commands.options import (
    WorkloadDirOpt,
    WorkloadMpiOpt,
    gpu_list,
    one_path_under_mpi,
    optional_size,
)
from xferscope.errors import SpecError
from xferscope.output.terminal import install_hangup_handlers
from xferscope.units import parse_duration

if TYPE_CHECKING:
    from xferscope.workloads.train.train_spec import TrainSpec


def _share(text: str | None) -> float | None:
    """0.9, or 90%."""
    if text is None:
        return None
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise SpecError("au-threshold", f"a share such as 0.9 or 90%, got {text!r}") from None


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


@dataclasses.dataclass(frozen=True)
class AcceleratorOptions:
    """The emulated accelerators: whose computation time the preset gives, and how many."""

    accelerator_type: Annotated[
        str,
        typer.Option("--accelerator-type", help="whose computation_time the preset gives: h100, a100 (b200: unet3d)"),
    ] = "h100"
    accelerators: Annotated[int, typer.Option("--accelerators", "-a", help="emulated accelerators")] = 1


ACCELERATORS = AcceleratorOptions()


@dataclasses.dataclass(frozen=True)
class FindMaxOptions:
    """--find-max: the most accelerators this storage keeps at the AU threshold, and the most it tries."""

    find_max: Annotated[
        bool, typer.Option("--find-max", help="the most accelerators this storage keeps at the AU threshold")
    ] = False
    max_accelerators: Annotated[int, typer.Option("--max-accelerators", help="most --find-max tries")] = 64

    def check(self) -> None:
        if self.max_accelerators < 1:
            raise SpecError("max-accelerators", f"must be at least 1, got {self.max_accelerators}")


FIND_MAX = FindMaxOptions()


@dataclasses.dataclass(frozen=True)
class TrainShapeOptions:
    """What the emulated training reads and computes, and for how long; None: the preset's (DLIO's) value."""

    sample_size: Annotated[str | None, typer.Option("--sample-size", help="mean sample size, e.g. 140M")] = None
    sample_sd: Annotated[str | None, typer.Option("--sample-sd", help="standard deviation of the sample size")] = None
    samples_per_file: Annotated[int | None, typer.Option("--samples-per-file", help="samples in one file")] = None
    files: Annotated[int | None, typer.Option("--files", help="files in the generated data set")] = None
    batch: Annotated[int | None, typer.Option("--batch", help="samples per batch (per step)")] = None
    read_threads: Annotated[int | None, typer.Option("--read-threads", help="reader threads per accelerator")] = None
    computation_time: Annotated[
        float | None, typer.Option("--computation-time", help="seconds of computation per batch")
    ] = None
    au_threshold: Annotated[str | None, typer.Option("--au-threshold", help="pass mark, e.g. 0.9 or 90%")] = None
    prefetch: Annotated[
        int,
        typer.Option(
            "--prefetch",
            help="prefetch depth: batch buffers per accelerator, the one computed on included (0: read threads + 1)",
        ),
    ] = 0
    steps: Annotated[int | None, typer.Option("--steps", help="steps per accelerator")] = None
    duration: Annotated[str | None, typer.Option("--duration", "-T", help="seconds to run")] = None
    epochs: Annotated[int | None, typer.Option("--epochs", help="epochs (1 when no other end is given)")] = None
    directory: WorkloadDirOpt = None
    data: Annotated[str | None, typer.Option("--data", help="read your own files in DIR as the data set")] = None
    bs: Annotated[str, typer.Option("--bs", "-i", help="request size of the reads")] = "4M"
    buffered: Annotated[bool, typer.Option("--buffered", help="through the page cache (no O_DIRECT)")] = False

    def spec_fields(self) -> dict[str, Any]:
        """These options as ``train_spec``'s keywords (SpecError names a bad one)."""
        return {
            "sample_size": optional_size(self.sample_size, "sample-size"),
            "sample_sd": optional_size(self.sample_sd, "sample-sd"),
            "samples_per_file": self.samples_per_file,
            "files": self.files,
            "batch": self.batch,
            "read_threads": self.read_threads,
            "computation_time": self.computation_time,
            "au_threshold": _share(self.au_threshold),
            "prefetch": self.prefetch,
            "steps": self.steps,
            "duration": parse_duration(self.duration) if self.duration is not None else None,
            "epochs": self.epochs,
            "directory": self.directory,
            "data": self.data,
            "block_size": optional_size(self.bs, "bs"),
            "buffered": self.buffered,
        }


TRAIN_SHAPE = TrainShapeOptions()


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
