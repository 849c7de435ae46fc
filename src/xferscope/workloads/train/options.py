"""The options of `workload train`, declared once (``workloads.common.options``): the emulated accelerators,
--find-max, and what the training reads and computes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

from xferscope.errors import SpecError
from xferscope.workloads.common.options import (
    Arg,
    CommandShape,
    Given,
    gpu_list,
    opt,
    optional_duration,
    optional_size,
    paths_of,
)

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


@dataclasses.dataclass(frozen=True)
class AcceleratorOptions:
    """The emulated accelerators: whose computation time the preset gives, and how many."""

    accelerator_type: Annotated[
        str,
        opt("--accelerator-type", help="whose computation_time the preset gives: h100, a100 (b200: unet3d)"),
    ] = "h100"
    accelerators: Annotated[int, opt("--accelerators", "-a", help="emulated accelerators")] = 1


@dataclasses.dataclass(frozen=True)
class FindMaxOptions:
    """--find-max: the most accelerators this storage keeps at the AU threshold, and the most it tries."""

    find_max: Annotated[
        bool, opt("--find-max", help="the most accelerators this storage keeps at the AU threshold")
    ] = False
    max_accelerators: Annotated[int, opt("--max-accelerators", help="most --find-max tries")] = 64

    def check(self) -> None:
        if self.max_accelerators < 1:
            raise SpecError("max-accelerators", f"must be at least 1, got {self.max_accelerators}")


@dataclasses.dataclass(frozen=True)
class TrainShapeOptions:
    """What the emulated training reads and computes, and for how long; None: the preset's (DLIO's) value."""

    sample_size: Annotated[str | None, opt("--sample-size", help="mean sample size, e.g. 140M")] = None
    sample_sd: Annotated[str | None, opt("--sample-sd", help="standard deviation of the sample size")] = None
    samples_per_file: Annotated[int | None, opt("--samples-per-file", help="samples in one file")] = None
    files: Annotated[int | None, opt("--files", help="files in the generated data set")] = None
    batch: Annotated[int | None, opt("--batch", help="samples per batch (per step)")] = None
    read_threads: Annotated[int | None, opt("--read-threads", help="reader threads per accelerator")] = None
    computation_time: Annotated[float | None, opt("--computation-time", help="seconds of computation per batch")] = None
    au_threshold: Annotated[str | None, opt("--au-threshold", help="pass mark, e.g. 0.9 or 90%")] = None
    prefetch: Annotated[
        int,
        opt(
            "--prefetch",
            help="prefetch depth: batch buffers per accelerator, the one computed on included (0: read threads + 1)",
        ),
    ] = 0
    steps: Annotated[int | None, opt("--steps", help="steps per accelerator")] = None
    duration: Annotated[str | None, opt("--duration", "-T", help="seconds to run")] = None
    epochs: Annotated[int | None, opt("--epochs", help="epochs (1 when no other end is given)")] = None
    directory: Annotated[str | None, opt("--dir", "-D", help="where the data set is generated")] = None
    data: Annotated[str | None, opt("--data", help="read your own files in DIR as the data set")] = None
    bs: Annotated[str, opt("--bs", "-i", help="request size of the reads")] = "4M"
    buffered: Annotated[bool, opt("--buffered", help="through the page cache (no O_DIRECT)")] = False

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
            "duration": optional_duration(self.duration, "duration"),
            "epochs": self.epochs,
            "directory": self.directory,
            "data": self.data,
            "block_size": optional_size(self.bs, "bs"),
            "buffered": self.buffered,
        }


@dataclasses.dataclass(frozen=True)
class TrainTargetOptions:
    """Where the batches land and what computes on them; left out: into the GPU where there is one, else as DLIO."""

    gpu: Annotated[str | None, opt("--gpu", "-d", help="GPUs the accelerators go round-robin over")] = None
    path: Annotated[
        str | None,
        opt(
            "--path",
            "-x",
            help="host (stops in host memory, as DLIO), bounce, bounce-async, cufile, dataloader (a PyTorch "
            "DataLoader, where torch is installed); a comma list runs each over one data set in rotated rounds and "
            "ranks them",
        ),
    ] = None
    compute: Annotated[
        str | None, opt("--compute", help="gpu (a kernel that spins for computation_time) or sleep (DLIO's)")
    ] = None

    def chosen(self, mpi: bool) -> tuple[list[str], str, str]:
        """The paths (a path twice: an A/A pair, host#1 and host#2) and compute, with those the user left out: into
        the GPU where there is one, else as DLIO (host, sleep); and the note that says so."""
        path, compute, note = self.path, self.compute, ""
        if path is None or compute is None:
            from xferscope.gpus import gpu_count

            n, why = gpu_count()
            if n:
                path, compute = path or "bounce-async", compute or "gpu"
            else:
                left = " ".join(f for f, v in (("--path host", path), ("--compute sleep", compute)) if v is None)
                path, compute, note = path or "host", compute or "sleep", f"no GPU here ({why}): {left}, as DLIO"
        return paths_of(path, mpi), compute, note


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """What `workload train` runs: the spec, the paths side by side, ``-d`` as given (``{local_rank}`` filled in
    by each rank under --mpi), and --find-max."""

    spec: TrainSpec
    paths: list[str]
    gpu_text: str | None
    find_max: bool
    upper: int


def train_request(given: Given) -> TrainRequest:
    from xferscope.workloads.train.train_spec import train_spec

    emulated, target, search = given[AcceleratorOptions], given[TrainTargetOptions], given[FindMaxOptions]
    search.check()
    paths, compute, note = target.chosen(given.mpi)
    for p in paths[1:]:
        train_spec(given.argument or "", emulated.accelerator_type, path=p, computation_time=0.0)  # one line
    gpu = target.gpu
    spec = train_spec(
        given.argument or "",
        emulated.accelerator_type,
        accelerators=emulated.accelerators,
        gpus=None
        if gpu is None or (given.mpi and "{" in gpu)
        else tuple(gpu_list(gpu)),  # -d {local_rank}: each rank's
        path=paths[0],
        compute=compute,
        **given[TrainShapeOptions].spec_fields(),
        seed=given.seed,
        keep=given.keep,
        interval=given.interval,
        defaults_note=note,
    )
    return TrainRequest(spec, paths, gpu, search.find_max, search.max_accelerators)


COMMAND = CommandShape(
    help="Emulate accelerators that read their batches by a path into GPU memory and compute on them: their "
    "utilisation (AU) as DLIO defines it, against the workload's threshold. Under --mpi, -a a rank, the data sharded "
    "over all.",
    argument=Arg("preset", "unet3d, cosmoflow or resnet50 (DLIO's workload configs)", "unet3d"),
    groups=(AcceleratorOptions, TrainTargetOptions, TrainShapeOptions, FindMaxOptions),
    make=train_request,
)
